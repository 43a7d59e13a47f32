//! The aliases a query may declare: a letter, then at most four letters, digits or
//! underscores, but none of PostgreSQL's reserved words (in any case). Where the grammar leaves
//! the model a relation's alias, the keyword it meant to write next would otherwise be read as
//! one (`FROM cars_data WHERE LEFT JOIN ...`, `WHERE` taken for an alias), and the query would
//! not parse. Written as rules that walk a trie of the words: at each step the next character
//! either leaves every word (the rest is free) or follows one, and the alias may end anywhere
//! but at the end of a word.

use std::collections::BTreeMap;
use std::fmt::Write;

/// Longest alias, in characters.
const MAX: usize = 5;

/// PostgreSQL's reserved key words of at most [`MAX`] characters, and those that cannot name a
/// table's alias without `AS` either (`JOIN`, `LEFT`, ...).
const WORDS: &[&str] = &[
    "all", "and", "any", "array", "as", "asc", "both", "case", "cast", "check", "cross", "desc", "do", "else", "end", "false", "fetch", "for",
    "from", "full", "grant", "group", "ilike", "in", "inner", "into", "is", "join", "left", "like", "limit", "not", "null", "on", "only", "or",
    "order", "outer", "right", "some", "table", "then", "to", "true", "union", "user", "using", "when", "where", "with",
];

#[derive(Default)]
struct Node {
    word: bool,
    next: BTreeMap<char, Node>,
}

/// The `alias` rule and the rules it uses (`alias-…`).
pub fn rules() -> String {
    let mut root = Node::default();
    for w in WORDS {
        let mut n = &mut root;
        for c in w.chars() {
            n = n.next.entry(c).or_default();
        }
        n.word = true;
    }
    let mut out = String::new();
    let mut count = 0;
    let body = node(&root, 0, &mut out, &mut count);
    format!("alias ::= {body}\n{out}")
}

/// The body of a rule for what may follow the prefix `n` stands for (at `depth` characters):
/// a character that leaves every word and a free rest, or one that follows a word and what may
/// follow it (nothing, where it is no word's end).
fn node(n: &Node, depth: usize, out: &mut String, count: &mut usize) -> String {
    let mut alternatives = Vec::new();
    let leaving = class(depth == 0, &n.next.keys().copied().collect::<Vec<_>>());
    let rest = MAX - depth - 1;
    alternatives.push(if rest == 0 { leaving } else { format!("{leaving} [A-Za-z0-9_]{{0,{rest}}}") });
    for (c, child) in &n.next {
        let both = format!("[{}{}]", c.to_ascii_uppercase(), c);
        if depth + 1 == MAX {
            // The whole length used: only where that is no word.
            if !child.word {
                alternatives.push(both);
            }
            continue;
        }
        *count += 1;
        let name = format!("alias-{count}");
        let inner = node(child, depth + 1, out, count);
        let _ = writeln!(out, "{name} ::= {inner}");
        alternatives.push(if child.word { format!("{both} {name}") } else { format!("{both} {name}?") });
    }
    alternatives.join(" | ")
}

/// A class of the characters an alias may have at this point (a letter first), but `not`
/// in either case.
fn class(first: bool, not: &[char]) -> String {
    let mut allowed: Vec<char> = ('A'..='Z').chain('a'..='z').collect();
    if !first {
        allowed.extend('0'..='9');
        allowed.push('_');
    }
    allowed.retain(|c| !not.contains(&c.to_ascii_lowercase()));
    let mut s = String::from("[");
    let mut i = 0;
    while i < allowed.len() {
        let mut j = i;
        while j + 1 < allowed.len() && allowed[j + 1] as u32 == allowed[j] as u32 + 1 {
            j += 1;
        }
        if j > i + 1 {
            let _ = write!(s, "{}-{}", allowed[i], allowed[j]);
        } else {
            for c in &allowed[i..=j] {
                s.push(*c);
            }
        }
        i = j + 1;
    }
    s.push(']');
    s
}

#[cfg(test)]
mod tests {
    use super::super::check;
    use super::*;

    #[test]
    fn an_alias_is_a_short_name_but_no_reserved_word() {
        let g = rules();
        let p = check::parse(&g).unwrap_or_else(|e| panic!("{e}\n{g}"));
        for a in ["s", "T1", "sic", "cd", "ml", "c", "cust", "stads", "wh", "whe", "wher", "wherf", "where1", "on_", "o", "a1", "x_y", "yearG", "Asx", "ends", "lefty"] {
            let ok = a.len() <= MAX;
            assert_eq!(p.accepts("alias", a), ok, "{a}");
        }
        for w in WORDS {
            for a in [w.to_string(), w.to_uppercase(), format!("{}{}", w[..1].to_uppercase(), &w[1..])] {
                assert!(!p.accepts("alias", &a), "{a}");
            }
        }
        for a in ["", "1a", "_a", "abcdef", "a-b", "a b", "é"] {
            assert!(!p.accepts("alias", a), "{a}");
        }
        assert!(WORDS.iter().all(|w| w.len() <= MAX && w.chars().all(|c| c.is_ascii_lowercase())));
    }
}
