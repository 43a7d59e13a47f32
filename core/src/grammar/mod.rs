//! A grammar per question (GBNF, as llama.cpp's server and vLLM's xgrammar read it) under which
//! the model can only write the relations its prompt shows and, for each, only the columns it
//! has: a column is written with its table as one choice (`singer.name`), never as two free
//! names. What the grammar covers and what it leaves to the guard: docs/pipeline.md.
//!
//! Names are a table owner's text: each one goes into the grammar only as a string literal
//! escaped here ([`literal`]); rule names are nl2sql's own (`t0`, `t1`, …). The grammar is a
//! generation aid: the parse-tree policy still decides on what runs.

use crate::render;
use crate::schema::Schema;
use std::collections::HashSet;
use std::fmt::Write;

/// The fixed part: PostgreSQL's syntax, without names.
const SQL: &str = include_str!("sql.gbnf");

/// Largest grammar sent (bytes). A schema whose shown names need more is asked without one
/// (the trace says so); the prompt's own token budget keeps the shown tables far below this.
pub const MAX_BYTES: usize = 256 * 1024;

/// How an endpoint takes a grammar (nl2sql.grammar).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Never sent.
    #[default]
    Off,
    /// Sent as llama.cpp's server takes it; an endpoint that refuses it is asked again without,
    /// and not sent one again by this process.
    Auto,
    /// llama.cpp's server: `"grammar": "<GBNF>"`.
    LlamaCpp,
    /// vLLM: `"structured_outputs": {"grammar": "<GBNF>"}` (its xgrammar backend reads GBNF).
    Vllm,
}

/// Bytes PostgreSQL keeps of a name, and one.
const NAMEDATALEN: usize = 64;

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
    /// Relations and columns it allows.
    pub relations: usize,
    pub columns: usize,
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
/// it), with only its shown columns; a second and third use of one relation in a query take the
/// aliases `<name>_2` and `<name>_3`, whose columns are that relation's.
pub fn build(schema: &Schema, columns: &[String], form: Form) -> Result<Grammar, NoGrammar> {
    let shown: HashSet<&str> = columns.iter().map(String::as_str).collect();
    // Only tables the rendering names: a table is looked at when some shown column starts with
    // its identifier and a dot, so a wide schema costs what the prompt shows, not all of it.
    let prefixes: HashSet<&str> = columns.iter().flat_map(|c| c.char_indices().filter(|(_, ch)| *ch == '.').map(move |(i, _)| &c[..i])).collect();
    let mut tables: Vec<(&crate::schema::Table, Vec<&crate::schema::Column>)> = Vec::new();
    for (i, t) in schema.tables.iter().enumerate() {
        crate::interrupt::every(i, 256);
        if !prefixes.contains(t.ident.as_str()) {
            continue;
        }
        let cols: Vec<&crate::schema::Column> = t.columns.iter().filter(|c| shown.contains(format!("{}.{}", t.ident, c.ident).as_str())).collect();
        if !cols.is_empty() {
            tables.push((t, cols));
        }
    }
    if tables.is_empty() {
        return Err(NoGrammar::NoRelations);
    }
    let mut out = String::with_capacity(SQL.len() + 64 * tables.len());
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
    for line in SQL.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        out.push_str(line);
        out.push('\n');
    }
    let mut relations: Vec<(String, String)> = Vec::with_capacity(tables.len());
    let mut qualified: Vec<(String, String)> = Vec::with_capacity(3 * tables.len());
    let mut count = 0;
    for (i, (t, cols)) in tables.iter().enumerate() {
        crate::interrupt::every(i, 256);
        let rule = format!("t{i}");
        let shown_as = render::ident(&t.ident);
        let second = alias(&t.name, 2);
        let third = alias(&t.name, 3);
        let aliases = format!("(\" AS \" ({} | {}))?", literal(&second), literal(&third));
        relations.push((shown_as.clone(), aliases));
        for q in [&shown_as, &second, &third] {
            qualified.push((format!("{q}."), rule.clone()));
        }
        let names: Vec<(String, String)> = cols.iter().map(|c| (render::ident(&c.ident), String::new())).collect();
        count += names.len();
        let body = radix(names);
        let _ = writeln!(out, "{rule} ::= {body}");
        // Stop as soon as it is too large: a table owner's long names cost no more than this.
        if out.len() > MAX_BYTES {
            return Err(NoGrammar::TooLarge(out.len()));
        }
    }
    let _ = writeln!(out, "relation ::= {}", radix(relations));
    let _ = writeln!(out, "colref ::= {}", radix(qualified));
    if out.len() > MAX_BYTES {
        return Err(NoGrammar::TooLarge(out.len()));
    }
    Ok(Grammar { text: out, relations: tables.len(), columns: count })
}

/// The alias of the `n`th use of a relation named `name` in one query, as PostgreSQL needs it
/// written and as the prompt would show it.
fn alias(name: &str, n: u32) -> String {
    // PostgreSQL keeps 63 bytes of a name: a long name is cut first, so that the suffix stays
    // and `_2` and `_3` stay two names.
    let mut cut = name.len().min(NAMEDATALEN - 3);
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    let a = format!("{}_{n}", &name[..cut]);
    let plain = a.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && a.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    render::ident(&if plain { a } else { format!("\"{}\"", a.replace('"', "\"\"")) })
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

/// An alternation of `words`, each followed by its continuation (a GBNF fragment of nl2sql's
/// own, possibly empty), with common prefixes factored out (a radix tree): llama.cpp keeps a
/// parse stack per alternative still open, so sharing prefixes keeps few open at a time.
fn radix(mut words: Vec<(String, String)>) -> String {
    words.sort();
    words.dedup();
    let items: Vec<(&str, &str)> = words.iter().map(|(w, c)| (w.as_str(), c.as_str())).collect();
    alternation(&items)
}

fn alternation(items: &[(&str, &str)]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < items.len() {
        crate::interrupt::every(i, 256);
        let Some(first) = items[i].0.chars().next() else {
            // The empty word: the continuation alone.
            parts.push(if items[i].1.is_empty() { literal("") } else { items[i].1.to_string() });
            i += 1;
            continue;
        };
        let mut j = i + 1;
        while j < items.len() && items[j].0.starts_with(first) {
            j += 1;
        }
        let group = &items[i..j];
        let prefix = common_prefix(group.iter().map(|g| g.0));
        let rest: Vec<(&str, &str)> = group.iter().map(|(w, c)| (&w[prefix.len()..], *c)).collect();
        let tail = if rest.len() == 1 {
            let (w, c) = rest[0];
            let mut t = String::new();
            if !w.is_empty() {
                t.push(' ');
                t.push_str(&literal(w));
            }
            if !c.is_empty() {
                t.push(' ');
                t.push_str(c);
            }
            t
        } else {
            format!(" ({})", alternation(&rest))
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

#[cfg(test)]
mod check;
#[cfg(test)]
mod tests;
