//! For the tests: reads GBNF text back (the subset the builder writes) and tells whether a text
//! is in the language it defines, so a test can check which queries a grammar allows.

use std::collections::{BTreeSet, HashMap};

#[derive(Debug, Clone)]
pub enum Node {
    Lit(Vec<char>),
    Class { negated: bool, ranges: Vec<(char, char)> },
    Ref(String),
    Seq(Vec<Node>),
    Alt(Vec<Node>),
    Rep(Box<Node>, usize, Option<usize>),
}

pub struct Parsed {
    pub rules: HashMap<String, Node>,
}

/// Parses GBNF text; an error names what it could not read.
pub fn parse(text: &str) -> Result<Parsed, String> {
    let mut rules = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
        let (name, body) = line.split_once(" ::= ").ok_or_else(|| format!("not a rule: {line}"))?;
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(format!("bad rule name: {name}"));
        }
        let chars: Vec<char> = body.chars().collect();
        let mut p = Reader { s: &chars, i: 0 };
        let node = p.alt()?;
        p.ws();
        if p.i != chars.len() {
            return Err(format!("trailing text in rule {name} at {}: {}", p.i, chars[p.i..].iter().collect::<String>()));
        }
        if rules.insert(name.to_string(), node).is_some() {
            return Err(format!("rule {name} defined twice"));
        }
    }
    Ok(Parsed { rules })
}

struct Reader<'a> {
    s: &'a [char],
    i: usize,
}

impl Reader<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i] == ' ' {
            self.i += 1;
        }
    }
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }
    fn alt(&mut self) -> Result<Node, String> {
        let mut alts = vec![self.seq()?];
        loop {
            self.ws();
            if self.peek() == Some('|') {
                self.i += 1;
                alts.push(self.seq()?);
            } else {
                return Ok(if alts.len() == 1 { alts.remove(0) } else { Node::Alt(alts) });
            }
        }
    }
    fn seq(&mut self) -> Result<Node, String> {
        let mut items = Vec::new();
        loop {
            self.ws();
            match self.peek() {
                None | Some('|') | Some(')') => return Ok(Node::Seq(items)),
                _ => {
                    let p = self.primary()?;
                    items.push(self.postfix(p)?);
                }
            }
        }
    }
    fn escape(&mut self) -> Result<char, String> {
        self.i += 1;
        let c = self.peek().ok_or("escape at the end")?;
        self.i += 1;
        let hex = |r: &mut Self, n: usize| -> Result<char, String> {
            let h: String = r.s.get(r.i..r.i + n).ok_or("short escape")?.iter().collect();
            r.i += n;
            u32::from_str_radix(&h, 16).ok().and_then(char::from_u32).ok_or_else(|| format!("bad escape {h}"))
        };
        Ok(match c {
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'x' => hex(self, 2)?,
            'u' => hex(self, 4)?,
            'U' => hex(self, 8)?,
            // as llama.cpp's reader: no other escapes (`\-` and `\^` are refused there)
            '\\' | '"' | ']' | '[' => c,
            _ => return Err(format!("unknown escape \\{c}")),
        })
    }
    fn primary(&mut self) -> Result<Node, String> {
        match self.peek() {
            Some('"') => {
                self.i += 1;
                let mut lit = Vec::new();
                loop {
                    match self.peek() {
                        None => return Err("unterminated literal".into()),
                        Some('"') => {
                            self.i += 1;
                            return Ok(Node::Lit(lit));
                        }
                        Some('\\') => lit.push(self.escape()?),
                        Some(c) if (' '..='~').contains(&c) => {
                            lit.push(c);
                            self.i += 1;
                        }
                        Some(c) => return Err(format!("raw character {:?} in a literal", c)),
                    }
                }
            }
            Some('[') => {
                self.i += 1;
                let negated = self.peek() == Some('^');
                if negated {
                    self.i += 1;
                }
                let mut ranges = Vec::new();
                loop {
                    let c = match self.peek() {
                        None => return Err("unterminated class".into()),
                        Some(']') => {
                            self.i += 1;
                            return Ok(Node::Class { negated, ranges });
                        }
                        Some('\\') => self.escape()?,
                        Some(c) => {
                            self.i += 1;
                            c
                        }
                    };
                    if self.peek() == Some('-') && self.s.get(self.i + 1) != Some(&']') {
                        self.i += 1;
                        let hi = if self.peek() == Some('\\') { self.escape()? } else { let h = self.peek().ok_or("class")?; self.i += 1; h };
                        ranges.push((c, hi));
                    } else {
                        ranges.push((c, c));
                    }
                }
            }
            Some('(') => {
                self.i += 1;
                let inner = self.alt()?;
                self.ws();
                if self.peek() != Some(')') {
                    return Err("unclosed group".into());
                }
                self.i += 1;
                Ok(inner)
            }
            Some(c) if c.is_ascii_alphanumeric() => {
                let start = self.i;
                while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == '-') {
                    self.i += 1;
                }
                Ok(Node::Ref(self.s[start..self.i].iter().collect()))
            }
            other => Err(format!("unexpected {other:?} at {}", self.i)),
        }
    }
    fn postfix(&mut self, p: Node) -> Result<Node, String> {
        let n = match self.peek() {
            Some('?') => Node::Rep(Box::new(p), 0, Some(1)),
            Some('*') => Node::Rep(Box::new(p), 0, None),
            Some('+') => Node::Rep(Box::new(p), 1, None),
            Some('{') => {
                let close = self.s[self.i..].iter().position(|&c| c == '}').ok_or("unclosed {")? + self.i;
                let spec: String = self.s[self.i + 1..close].iter().collect();
                self.i = close;
                let (lo, hi) = match spec.split_once(',') {
                    None => (spec.parse().map_err(|_| "bad {m}")?, Some(spec.parse().map_err(|_| "bad {m}")?)),
                    Some((a, "")) => (a.parse().map_err(|_| "bad {m,}")?, None),
                    Some((a, b)) => (a.parse().map_err(|_| "bad {m,n}")?, Some(b.parse().map_err(|_| "bad {m,n}")?)),
                };
                Node::Rep(Box::new(p), lo, hi)
            }
            _ => return Ok(p),
        };
        self.i += 1;
        Ok(n)
    }
}

impl Parsed {
    /// Whether `text` is in the language of rule `start`. Every rule referenced must exist.
    pub fn accepts(&self, start: &str, text: &str) -> bool {
        let s: Vec<char> = text.chars().collect();
        let mut m = Matcher { g: self, s: &s, memo: HashMap::new(), busy: BTreeSet::new() };
        m.rule(start, 0).contains(&s.len())
    }

    /// Rule names referenced but not defined.
    pub fn undefined(&self) -> Vec<String> {
        fn walk(n: &Node, out: &mut Vec<String>, g: &Parsed) {
            match n {
                Node::Ref(r) if !g.rules.contains_key(r) => out.push(r.clone()),
                Node::Seq(v) | Node::Alt(v) => v.iter().for_each(|x| walk(x, out, g)),
                Node::Rep(x, _, _) => walk(x, out, g),
                _ => {}
            }
        }
        let mut out = Vec::new();
        self.rules.values().for_each(|n| walk(n, &mut out, self));
        out
    }
}

struct Matcher<'a> {
    g: &'a Parsed,
    s: &'a [char],
    memo: HashMap<(String, usize), BTreeSet<usize>>,
    busy: BTreeSet<(String, usize)>,
}

impl Matcher<'_> {
    fn rule(&mut self, name: &str, at: usize) -> BTreeSet<usize> {
        let key = (name.to_string(), at);
        if let Some(r) = self.memo.get(&key) {
            return r.clone();
        }
        if !self.busy.insert(key.clone()) {
            return BTreeSet::new();
        }
        let out = match self.g.rules.get(name) {
            Some(n) => self.node(&n.clone(), at),
            None => BTreeSet::new(),
        };
        self.busy.remove(&key);
        self.memo.insert(key, out.clone());
        out
    }

    fn node(&mut self, n: &Node, at: usize) -> BTreeSet<usize> {
        match n {
            Node::Lit(l) => {
                if self.s.len() >= at + l.len() && self.s[at..at + l.len()] == l[..] { [at + l.len()].into() } else { BTreeSet::new() }
            }
            Node::Class { negated, ranges } => match self.s.get(at) {
                Some(&c) if ranges.iter().any(|&(a, b)| a <= c && c <= b) != *negated => [at + 1].into(),
                _ => BTreeSet::new(),
            },
            Node::Ref(r) => self.rule(r, at),
            Node::Seq(items) => {
                let mut here: BTreeSet<usize> = [at].into();
                for it in items {
                    let mut next = BTreeSet::new();
                    for p in here {
                        next.extend(self.node(it, p));
                    }
                    here = next;
                    if here.is_empty() {
                        break;
                    }
                }
                here
            }
            Node::Alt(v) => v.iter().flat_map(|x| self.node(x, at)).collect(),
            Node::Rep(x, lo, hi) => {
                let mut out = BTreeSet::new();
                let mut here: BTreeSet<usize> = [at].into();
                let mut seen: BTreeSet<usize> = BTreeSet::new();
                let mut k = 0;
                loop {
                    if k >= *lo {
                        out.extend(here.iter().copied());
                    }
                    if hi.is_some_and(|h| k >= h) || here.is_empty() {
                        break;
                    }
                    let mut next = BTreeSet::new();
                    for p in &here {
                        next.extend(self.node(x, *p));
                    }
                    // Past the minimum, a position already reached adds nothing new.
                    if k >= *lo {
                        next.retain(|p| !seen.contains(p));
                        seen.extend(here.iter().copied());
                    }
                    here = next;
                    k += 1;
                }
                out
            }
        }
    }
}
