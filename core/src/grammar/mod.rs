//! A grammar per question (GBNF, as llama.cpp's server and vLLM's xgrammar read it) under which
//! the model can only write the relations its prompt shows and column names those relations
//! have, in the form it writes without one: a column alone or after any qualifier, and in a
//! `SELECT` that reads one relation, one of that relation's (scoped.rs). What the
//! grammar covers and what it leaves to the guard: docs/pipeline.md.
//!
//! Names are a table owner's text: each one goes into the grammar only as a string literal
//! escaped here ([`literal`]); rule names are nl2sql's own. The grammar is a generation aid: the
//! parse-tree policy still decides on what runs.

use crate::render;
use crate::schema::Schema;
use std::collections::{BTreeSet, HashSet};
use std::fmt::Write;

/// The fixed part: PostgreSQL's syntax, without names.
const SQL: &str = include_str!("sql.gbnf");

/// The functions a query may call, besides count(*), EXTRACT and CAST: each one is allowed as
/// written here and in upper case. Anything else is left out of the grammar (the guard decides
/// on what runs whatever this lists).
const FUNCTIONS: &[&str] = &[
    "count", "sum", "avg", "min", "max", "string_agg", "array_agg", "bool_and", "bool_or", "stddev", "round", "abs", "coalesce",
    "nullif", "greatest", "least", "lower", "upper", "length", "trim", "substring", "replace", "concat", "position", "split_part",
    "left", "right", "initcap", "date_trunc", "date_part", "to_char", "to_date", "to_timestamp", "make_date", "age", "ceil", "floor",
    "sqrt", "power", "mod", "ln", "exp", "sign", "trunc", "rank", "dense_rank", "row_number", "ntile", "lag", "lead", "first_value",
    "last_value", "percent_rank", "cume_dist",
];

/// The start of the one name the grammar allows that no table has: the model writes it, with
/// what the question asks for, where no shown column holds that (`unknown_salary`), so that the
/// query keeps the evidence abstention reads (a name the tables lack) instead of another column.
pub const NOTHING_FITS: &str = "unknown_";

/// Largest grammar sent (bytes). A schema whose shown names need more is asked without one
/// (the trace says so); the prompt's own token budget keeps the shown tables far below this.
pub const MAX_BYTES: usize = 256 * 1024;

/// How an endpoint takes a grammar (nl2sql.grammar).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Never sent.
    #[default]
    Off,
    /// Sent as llama.cpp's server takes it (nothing is detected: a server that ignores the field
    /// answers unconstrained). Under every mode but Off, an endpoint that refuses a request with a
    /// grammar is asked again without, and after a 400 or 422 not sent one again by this process.
    Auto,
    /// llama.cpp's server: `"grammar": "<GBNF>"`.
    LlamaCpp,
    /// vLLM: `"structured_outputs": {"grammar": "<GBNF>"}` (its xgrammar backend reads GBNF).
    Vllm,
}

/// Most columns one `#columns:` line of the structured chain of thought may list.
const MAX_THOUGHT_COLUMNS: usize = 16;

/// What the model answers with: the query in a ```sql block, or the structured chain of thought
/// (`#reason:` … `#SQL-like:` lines, then the block) whose `#columns:` line lists columns as
/// the grammar allows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Query,
    Thought,
}

/// A grammar built for one prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grammar {
    pub text: String,
    /// Relations it allows, and distinct column names.
    pub relations: usize,
    pub columns: usize,
    /// Relations given rules of their own (scoped.rs); 0 when the shared rules only were sent.
    pub scoped: usize,
}

/// Why no grammar was built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoGrammar {
    /// The prompt shows no relation.
    NoRelations,
    /// The shown names need more than [`MAX_BYTES`].
    TooLarge(usize),
}

/// The grammar for a prompt that shows `columns` (`table.column`, as the schema's identifiers
/// write them: [`crate::schema::Rendered::columns`]) of `schema`'s tables. Each relation is
/// written as the prompt writes it (its identifier, schema-qualified where the prompt qualifies
/// it), with or without an alias; a column is one of the names the shown relations have, alone
/// or after a qualifier (an alias, or a relation as the prompt writes it).
pub fn build(schema: &Schema, columns: &[String], form: Form) -> Result<Grammar, NoGrammar> {
    let shown: HashSet<&str> = columns.iter().map(String::as_str).collect();
    // Only tables the rendering names: a table is looked at when some shown column starts with
    // its identifier and a dot, so a wide schema costs what the prompt shows, not all of it.
    let prefixes: HashSet<&str> = columns.iter().flat_map(|c| c.char_indices().filter(|(_, ch)| *ch == '.').map(move |(i, _)| &c[..i])).collect();
    let mut relations: BTreeSet<String> = BTreeSet::new();
    // A schema-qualified relation is also known by its table's name alone (`airports.code`
    // after `FROM travel.airports`).
    let mut bare: BTreeSet<String> = BTreeSet::new();
    let mut names: BTreeSet<String> = BTreeSet::new();
    let mut copies: Vec<scoped::Relation> = Vec::new();
    let mut size = fixed().len();
    for (i, t) in schema.tables.iter().enumerate() {
        crate::interrupt::every(i, 256);
        if !prefixes.contains(t.ident.as_str()) {
            continue;
        }
        let mut own: BTreeSet<String> = BTreeSet::new();
        for c in t.columns.iter().filter(|c| shown.contains(format!("{}.{}", t.ident, c.ident).as_str())) {
            let n = render::ident(&c.ident);
            if !names.contains(&n) {
                size += literal(&n).len() + 4;
                names.insert(n.clone());
            }
            own.insert(n);
        }
        if !own.is_empty() {
            let r = render::ident(&t.ident);
            size += 2 * literal(&r).len() + 8;
            let b = last_part(&t.ident).map(render::ident).filter(|b| *b != r);
            if let Some(b) = &b {
                size += literal(b).len() + 4;
                bare.insert(b.clone());
            }
            if relations.insert(r.clone()) {
                copies.push(scoped::Relation { table: i, written: r, bare: b, columns: own, reached: BTreeSet::new() });
            }
        }
        // Stop as soon as it is too large: a table owner's long names cost no more than this.
        if size > MAX_BYTES {
            return Err(NoGrammar::TooLarge(size));
        }
    }
    if relations.is_empty() {
        return Err(NoGrammar::NoRelations);
    }
    let mut out = String::with_capacity(size + 1024);
    out.push_str(match form {
        Form::Query => "root ::= query-block\n",
        Form::Thought => "root ::= thought query-block\n",
    });
    if form == Form::Thought {
        let _ = writeln!(
            out,
            "thought ::= \"#reason: \" line \"\\n#columns: \" colref (\", \" colref){{0,{}}} \"\\n#values: \" line \"\\n#SELECT: \" line \"\\n#SQL-like: \" line \"\\n#SQL: \"",
            MAX_THOUGHT_COLUMNS - 1
        );
    }
    out.push_str(fixed());
    // Aliases: no reserved word, none that starts with a shown column's name (alias.rs).
    out.push_str(&alias::rules(&names.iter().collect::<Vec<_>>()));
    let _ = writeln!(out, "func ::= {}", radix(FUNCTIONS.iter().flat_map(|f| [f.to_string(), f.to_uppercase()])));
    let count = names.len();
    let _ = writeln!(out, "relation ::= {}", radix(&relations));
    // "Nothing fits", unless a shown column already starts so (a table owner's name is never
    // taken for the model's word that none fits).
    let reserved = names.iter().any(|n| n.to_lowercase().trim_start_matches('"').starts_with(NOTHING_FITS));
    if reserved {
        let _ = writeln!(out, "column ::= {}", radix(&names));
    } else {
        let _ = writeln!(out, "column ::= {} | {} name", radix(&names), literal(NOTHING_FITS));
    }
    // A short alias or a shown relation as the prompt writes it (or its table's name alone):
    // nothing longer is free.
    if bare.is_empty() {
        out.push_str("qualifier ::= alias | relation\n");
    } else {
        let _ = writeln!(out, "qualifier ::= alias | relation | {}", radix(&bare));
    }
    // Each relation's own copy where it fits, else the shared rules only.
    if copies.len() <= scoped::MAX_SCOPED {
        scoped::reach(schema, &mut copies);
    }
    let (mut tail, mut own) = scoped::rules(fixed(), &copies, !reserved);
    if out.len() + tail.len() > MAX_BYTES {
        (tail, own) = scoped::rules(fixed(), &[], !reserved);
    }
    out.push_str(&tail);
    if out.len() > MAX_BYTES {
        return Err(NoGrammar::TooLarge(out.len()));
    }
    Ok(Grammar { text: out, relations: relations.len(), columns: count, scoped: own })
}

/// The fixed rules: sql.gbnf without its comments, worked out once (the aliases, alias.rs,
/// depend on the shown columns).
fn fixed() -> &'static str {
    static FIXED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    FIXED.get_or_init(|| SQL.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).map(|l| format!("{l}\n")).collect())
}

/// The last part of a schema-qualified identifier (`airports` of `travel.airports`, `"B.c"` of
/// `a."B.c"`); None when it has one part only.
fn last_part(ident: &str) -> Option<&str> {
    let mut quoted = false;
    let mut dot = None;
    for (i, c) in ident.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => dot = Some(i),
            _ => {}
        }
    }
    dot.map(|i| &ident[i + 1..])
}

/// Whether `grammar` (built here) lets the model write that nothing fits ([`NOTHING_FITS`]).
pub fn offers_nothing_fits(grammar: &str) -> bool {
    let end = format!(" | {} name", literal(NOTHING_FITS));
    grammar.lines().any(|l| l.starts_with("column ::= ") && l.ends_with(&end))
}

/// `s` as a GBNF string literal: only printable ASCII stays as it is; the quote and the
/// backslash are escaped, every other character is written as its code point.
pub fn literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            ' '..='~' => out.push(c),
            c if (c as u32) <= 0xFFFF => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08X}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

/// An alternation of `words` with common prefixes factored out (a radix tree): llama.cpp keeps a
/// parse stack per alternative still open, so sharing prefixes keeps few open at a time.
fn radix<S: AsRef<str>>(words: impl IntoIterator<Item = S>) -> String {
    let mut words: Vec<String> = words.into_iter().map(|w| w.as_ref().to_string()).collect();
    words.sort();
    words.dedup();
    let items: Vec<&str> = words.iter().map(String::as_str).collect();
    alternation(&items)
}

fn alternation(items: &[&str]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < items.len() {
        crate::interrupt::every(i, 256);
        let Some(first) = items[i].chars().next() else {
            parts.push(literal(""));
            i += 1;
            continue;
        };
        let mut j = i + 1;
        while j < items.len() && items[j].starts_with(first) {
            j += 1;
        }
        let group = &items[i..j];
        let prefix = common_prefix(group.iter().copied());
        let rest: Vec<&str> = group.iter().map(|w| &w[prefix.len()..]).collect();
        let tail = match rest.as_slice() {
            [""] => String::new(),
            [w] => format!(" {}", literal(w)),
            _ => format!(" ({})", alternation(&rest)),
        };
        parts.push(format!("{}{tail}", literal(prefix)));
        i = j;
    }
    parts.join(" | ")
}

/// The longest prefix the words share, cut at a character boundary.
fn common_prefix<'a>(mut words: impl Iterator<Item = &'a str>) -> &'a str {
    let Some(first) = words.next() else { return "" };
    let mut len = first.len();
    for w in words {
        len = first.char_indices().zip(w.chars()).take_while(|((_, a), b)| a == b).map(|((i, a), _)| i + a.len_utf8()).last().unwrap_or(0).min(len);
    }
    &first[..len]
}

mod alias;
mod scoped;

#[cfg(test)]
mod check;
#[cfg(test)]
mod tests;
