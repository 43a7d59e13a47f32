//! The aliases a query may declare: a letter, then at most four letters, digits or
//! underscores, but none of PostgreSQL's reserved words (in any case), and none that starts with
//! a column name the prompt shows. Where the grammar leaves the model a relation's alias, the
//! keyword it meant to write next would otherwise be read as one (`FROM cars_data WHERE LEFT
//! JOIN ...`, `WHERE` taken for an alias), and the query would not parse; and where the model
//! writes a column the grammar does not allow there (another table's, in a `SELECT` of one
//! relation), the alias path took the name and made it a qualifier of invented names
//! (`maker.unknown_IN`, `yearG.makeid`). Written as rules that walk a trie of the words: at each
//! step the next character either leaves every word (the rest is free) or follows one, and the
//! alias may end anywhere but at the end of a reserved word, and never goes past a column name.

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

/// Most column names the rule keeps aliases from starting with (the first, in the order given):
/// each adds a few rules.
pub const MAX_COLUMNS: usize = 256;

#[derive(Default)]
struct Node {
    /// A reserved word ends here: the alias may not.
    word: bool,
    /// A column name ends here: the alias may neither end here nor go on.
    closed: bool,
    next: BTreeMap<char, Node>,
}

/// Whether an alias could start with `name` (a column name as the prompt writes it): two to
/// five letters, digits and underscores, a letter first, in lower case (a quoted name starts
/// with a quote, which no alias does).
pub fn shadows(name: &str) -> bool {
    (2..=MAX).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The `alias` rule and the rules it uses (`alias-…`), keeping aliases from starting with any
/// of `columns` that [`shadows`] (at most [`MAX_COLUMNS`] of them).
pub fn rules<S: AsRef<str>>(columns: &[S]) -> String {
    let mut root = Node::default();
    for w in WORDS {
        let mut n = &mut root;
        for c in w.chars() {
            n = n.next.entry(c).or_default();
        }
        n.word = true;
    }
    for name in columns.iter().map(AsRef::as_ref).filter(|n| shadows(n)).take(MAX_COLUMNS) {
        let mut n = &mut root;
        for c in name.chars() {
            n = n.next.entry(c).or_default();
        }
        n.closed = true;
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
    let rest = MAX - depth - 1;
    if let Some(leaving) = class(depth == 0, &n.next.keys().copied().collect::<Vec<_>>()) {
        alternatives.push(if rest == 0 { leaving } else { format!("{leaving} [A-Za-z0-9_]{{0,{rest}}}") });
    }
    for (c, child) in &n.next {
        if child.closed {
            continue;
        }
        let both = format!("[{}{}]", c.to_ascii_uppercase(), c);
        if depth + 1 == MAX {
            // The whole length used: only where that is no word.
            if !child.word {
                alternatives.push(both);
            }
            continue;
        }
        let inner = node(child, depth + 1, out, count);
        if inner.is_empty() {
            // Nothing may follow: an end, where that is no word.
            if !child.word {
                alternatives.push(both);
            }
            continue;
        }
        *count += 1;
        let name = format!("alias-{count}");
        let _ = writeln!(out, "{name} ::= {inner}");
        alternatives.push(if child.word { format!("{both} {name}") } else { format!("{both} {name}?") });
    }
    alternatives.join(" | ")
}

/// A class of the characters an alias may have at this point (a letter first), but `not`
/// in either case; None when none is left.
fn class(first: bool, not: &[char]) -> Option<String> {
    let mut allowed: Vec<char> = ('A'..='Z').chain('a'..='z').collect();
    if !first {
        allowed.extend('0'..='9');
        allowed.push('_');
    }
    allowed.retain(|c| !not.contains(&c.to_ascii_lowercase()));
    if allowed.is_empty() {
        return None;
    }
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
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::super::check;
    use super::*;

    #[test]
    fn an_alias_is_a_short_name_but_no_reserved_word() {
        let g = rules::<&str>(&[]);
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

    #[test]
    fn an_alias_never_starts_with_a_shown_column_name() {
        let g = rules(&["year", "maker", "id", "mpg", "name_of_singer", "a", "\"Year\"", "or"]);
        let p = check::parse(&g).unwrap_or_else(|e| panic!("{e}\n{g}"));
        // What the model wrote where the grammar allowed no such column.
        for a in ["year", "yearG", "YEAR", "Year1", "maker", "Maker", "id", "idinn", "IdX", "mpg", "mpgs0", "or", "orx"] {
            assert!(!p.accepts("alias", a), "{a}");
        }
        // Negative: short aliases, prefixes of the names, and aliases a long, one-letter or
        // quoted name, which no alias could start with, leaves alone.
        for a in ["y", "ye", "yea", "yr", "m", "ma", "make", "mak", "i", "ix", "mp", "mpx", "name", "names", "a", "a1", "ab", "Yeah", "s", "T1", "cm", "ml", "o"] {
            assert!(p.accepts("alias", a), "{a}");
        }
        // Reserved words stay out.
        for a in ["in", "IN", "where", "join"] {
            assert!(!p.accepts("alias", a), "{a}");
        }
        assert!(shadows("year") && shadows("t1") && !shadows("a") && !shadows("years1") && !shadows("\"Year\"") && !shadows("1a"));
    }

    #[test]
    fn a_name_for_every_first_letter_still_leaves_aliases_and_a_valid_grammar() {
        // Every two-character name starting with c or t: no longer alias starts so; the
        // letters alone, and other aliases, are left.
        let names: Vec<String> = ['c', 't'].into_iter().flat_map(|x| ('a'..='z').chain('0'..='9').chain(['_']).map(move |y| format!("{x}{y}"))).collect();
        let g = rules(&names);
        let p = check::parse(&g).unwrap_or_else(|e| panic!("{e}\n{g}"));
        assert!(p.accepts("alias", "t") && p.accepts("alias", "C") && p.accepts("alias", "s1"));
        assert!(!p.accepts("alias", "t1") && !p.accepts("alias", "cm") && !p.accepts("alias", "Tx"));
        assert_eq!(p.undefined(), Vec::<String>::new());
    }
}
