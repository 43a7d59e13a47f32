//! Queries that read one relation: each shown relation gets its own copy of the rules where a
//! column is read, under which a column is one that relation has.
//!
//! A context-free grammar cannot know the `FROM` before the select list, so under shared rules
//! the model may write a column of one shown table and then read another (`SELECT maker FROM
//! cars_data`, `count(DISTINCT singer_id) FROM concert`). Here a `SELECT` whose `FROM` is one
//! relation is written under that relation's copy; llama.cpp keeps every copy open while the
//! model writes the select list and the `FROM` decides, so after `singer_id` only a relation
//! that has it, or a `FROM` of two or more, can follow. A `FROM` of two or more relations (or a
//! subquery alone) is written under the shared rules, where a column is any shown relation's.
//!
//! Each relation has two copies. In the statement's own `SELECT`s, which have no outer query,
//! every column is the relation's, whatever qualifies it (the model otherwise reached another
//! table's column through an invented alias, `yearG.year`, or another table's name). In a
//! subquery a column alone or after the relation's own name is the relation's, and one after an
//! alias or another relation's name (the outer query's, in a correlated subquery) is any shown
//! relation's, as under the shared rules; so is one after an own name of at most five
//! characters, which an alias could be. Subqueries are `SELECT`s too: each chooses its copy.

use super::{literal, radix};
use crate::schema::Schema;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write;

/// Most relations given a copy of their own; a prompt showing more gets the shared rules only
/// (a relation's two copies are some 5 KiB, and llama.cpp keeps a parse stack open per copy).
pub const MAX_SCOPED: usize = 16;

/// A shown relation: as the prompt writes it, its table's name alone when that differs, and
/// the column names it has (each as the prompt writes it).
pub struct Relation {
    /// Its table (an index into the schema's tables).
    pub table: usize,
    pub written: String,
    pub bare: Option<String>,
    pub columns: BTreeSet<String>,
    /// Shown columns it lacks that its own copies also take alone: see [`reach`].
    pub reached: BTreeSet<String>,
}

/// For each relation, the shown columns of the one table a single-column foreign key of it
/// points to (many rows to one), which it lacks itself: written alone in one of the statement's
/// own `SELECT`s of that relation (`SELECT avg(accelerate) FROM cars_data WHERE make = ...`,
/// where `make` is car_names'), they are what the alignment joins that table on its key for
/// (align::names::join_for_columns). Without them the model, wanting such a column there, went
/// on as the one name the copy allowed that starts so: `make_date('volvo')`. Only where the
/// alignment would join: not a name two keys of the relation reach (two keys to one table, or
/// two tables that have it, shown or not), nor one the relation has among columns the prompt
/// leaves out, nor one the alignment reads first as a typo or a word of the relation's own
/// columns (`maker` beside `make`, `name` beside `emp_name`), nor a table of another role's
/// off the search path. (The alignment may still read such a `SELECT` as one of the other
/// table, where every column it reads is that table's and the question names it rather than the
/// relation: align::question's `other_table`, as for any query.) Not in a subquery, where PostgreSQL takes such a name from the outer
/// query when its table has it (`model IN (SELECT model FROM cars_data ...)` read car_names'
/// model from outside: measured, a wrong answer).
pub fn reach(schema: &Schema, relations: &mut [Relation]) {
    for k in 0..relations.len() {
        crate::interrupt::every(k, 16);
        let Some(table) = schema.tables.get(relations[k].table) else { continue };
        let own: Vec<&str> = table.columns.iter().map(|c| c.name.as_str()).collect();
        // The tables its keys point to (shown or not), as the alignment finds them.
        let parents: Vec<&crate::schema::Table> = schema.single_keys(table).into_iter().map(|(_, u)| u).collect();
        let mut keys_to: HashMap<&str, usize> = HashMap::new();
        for c in parents.iter().flat_map(|p| p.columns.iter()) {
            *keys_to.entry(c.name.as_str()).or_default() += 1;
        }
        let mut found: BTreeSet<String> = BTreeSet::new();
        // Not a table of the relation's own name (another schema's): the alignment joins none.
        for parent in parents.iter().filter(|p| p.oid != table.oid && p.name != table.name) {
            let Some(shown) = relations.iter().find(|r| schema.tables.get(r.table).is_some_and(|t| t.oid == parent.oid)) else { continue };
            for c in parent.columns.iter().filter(|c| keys_to.get(c.name.as_str()) == Some(&1)) {
                let written = crate::render::ident(&c.ident);
                if shown.columns.contains(&written) && !table.has_column(&c.name) && !read_as_own(&c.name, &own) {
                    found.insert(written);
                }
            }
        }
        relations[k].reached = found;
    }
}

/// Whether the alignment takes `name`, written alone where a relation with columns `own` is
/// read, for one of them: a typo of one, or a word of one (align::columns).
fn read_as_own(name: &str, own: &[&str]) -> bool {
    crate::text::closest_name(name, own.iter().copied()).is_some() || crate::text::name_made_of(name, own.iter().copied()).is_some()
}

/// Where a query's select list, `WHERE`, `GROUP BY` and `HAVING` begin.
const STARTS: [&str; 4] = ["items", "where", "group-by", "having"];

/// The rules the builder adds to the fixed ones: `top`, `select-core` and `from`, and, for at
/// most [`MAX_SCOPED`] relations, each one's two copies. `nothing_fits`: whether a column may
/// be the reserved word that none fits, as in the shared `column` rule. Returns the rules and
/// how many relations have a copy of their own (0: the shared rules only).
pub fn rules(fixed: &str, relations: &[Relation], nothing_fits: bool) -> (String, usize) {
    let many = "\"SELECT \" \"DISTINCT \"? items sp \"FROM \" from where? group-by? having?";
    if relations.is_empty() || relations.len() > MAX_SCOPED {
        return (format!("top ::= main\nselect-core ::= {many}\nfrom ::= source (\",\" sp source | sp join){{0,7}}\n"), 0);
    }
    let template = template(fixed);
    let mut out = String::new();
    // The statement itself: its SELECTs have no outer query, so every column they read is one
    // of their FROM's. A subquery's may read the outer query's.
    out.push_str("top ::= top-core (sp set-op sp top-core){0,3} order-by? limit?\n");
    let list = |prefix: &str| (0..relations.len()).map(|k| format!("{prefix}{k}")).collect::<Vec<_>>().join(" | ");
    let _ = writeln!(out, "top-core ::= {} | many-relations", list("top-one-"));
    let _ = writeln!(out, "select-core ::= {} | many-relations", list("one-"));
    let _ = writeln!(out, "many-relations ::= {many}");
    // Two relations or more, or a subquery alone (whose columns are free names).
    out.push_str("from ::= source (\",\" sp source | sp join){1,7} | \"(\" sp? main sp? \")\" (\" AS \" | \" \") sub-name\n");
    for (k, r) in relations.iter().enumerate() {
        crate::interrupt::every(k, 4);
        let relation = format!("relation-t{k}");
        let _ = writeln!(out, "{relation} ::= {}", literal(&r.written));
        let own = match &r.bare {
            Some(b) => format!("{relation} | {}", literal(b)),
            None => relation.clone(),
        };
        let fits = if nothing_fits { format!(" | {} name", literal(super::NOTHING_FITS)) } else { String::new() };
        let _ = writeln!(out, "column-t{k} ::= {}{fits}", radix(&r.columns));
        // In the statement, whatever qualifies a column (the relation, its alias), the column
        // is the relation's.
        // A column of the one table a key of it points to, written alone (see [`reach`]).
        let reached = if r.reached.is_empty() { String::new() } else { format!(" | {}", radix(&r.reached)) };
        let _ = writeln!(out, "colref-s{k} ::= ((alias | {own}) \".\")? column-t{k}{reached}");
        // In a subquery, another relation's name or an alias qualifies any shown column: the
        // outer query's, in a correlated subquery.
        let others: Vec<&str> = relations
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != k)
            .flat_map(|(_, o)| std::iter::once(o.written.as_str()).chain(o.bare.as_deref()))
            .filter(|o| *o != r.written && Some(*o) != r.bare.as_deref())
            .collect();
        let other = if others.is_empty() { "alias".to_string() } else { format!("(alias | {})", radix(&others)) };
        // Not alone in a subquery: there a name the outer query's table has is that table's
        // (a correlated reference PostgreSQL resolves outside, which the alignment leaves).
        let _ = writeln!(out, "colref-t{k} ::= (({own}) \".\")? column-t{k} | {other} \".\" column");
        for (one, suffix) in [(format!("top-one-{k}"), format!("s{k}")), (format!("one-{k}"), format!("t{k}"))] {
            let s = |name: &str| format!("{name}-{suffix}");
            let _ = writeln!(
                out,
                "{one} ::= \"SELECT \" \"DISTINCT \"? {} sp \"FROM \" {relation} ((\" AS \" | \" \") alias)? {}? {}? {}?",
                s("items"),
                s("where"),
                s("group-by"),
                s("having")
            );
            for (name, body) in &template.rules {
                let _ = writeln!(out, "{} ::= {}", s(name), rename(body, &template.copied, &suffix));
            }
        }
    }
    (out, relations.len())
}

/// The names of the fixed rules copied per relation (for the tests).
#[cfg(test)]
pub fn copied(fixed: &str) -> Vec<&'static str> {
    template(fixed).rules.iter().map(|(n, _)| n.as_str()).collect()
}

/// How many lines each relation's copies add (for the tests).
#[cfg(test)]
pub fn lines_per_relation(fixed: &str) -> usize {
    2 * (template(fixed).rules.len() + 1) + 4
}

/// The fixed rules that are copied per relation: those reached from [`STARTS`] that reach
/// `colref` (not through `main`, where a subquery chooses its own copy), in the fixed order.
struct Template {
    rules: Vec<(String, String)>,
    /// Their names, and `colref`: the references a copy renames.
    copied: HashSet<String>,
}

fn template(fixed: &str) -> &'static Template {
    static TEMPLATE: std::sync::OnceLock<Template> = std::sync::OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let rules: Vec<(String, String)> =
            fixed.lines().filter_map(|l| l.split_once(" ::= ")).map(|(n, b)| (n.to_string(), b.to_string())).collect();
        let refs: HashMap<&str, Vec<String>> = rules.iter().map(|(n, b)| (n.as_str(), references(b))).collect();
        let mut reaches: HashMap<&str, bool> = HashMap::new();
        for (n, _) in &rules {
            let r = reaches_colref(n, &refs, &mut HashSet::new());
            reaches.insert(n.as_str(), r);
        }
        // Forward from the starts, through rules that reach colref.
        let mut keep: HashSet<String> = HashSet::new();
        let mut todo: Vec<&str> = STARTS.to_vec();
        while let Some(n) = todo.pop() {
            if n == "main" || n == "colref" || !reaches.get(n).copied().unwrap_or(false) || !keep.insert(n.to_string()) {
                continue;
            }
            todo.extend(refs.get(n).into_iter().flatten().map(String::as_str));
        }
        let kept: Vec<(String, String)> = rules.into_iter().filter(|(n, _)| keep.contains(n)).collect();
        let mut copied: HashSet<String> = kept.iter().map(|(n, _)| n.clone()).collect();
        copied.insert("colref".to_string());
        Template { rules: kept, copied }
    })
}

fn reaches_colref(name: &str, refs: &HashMap<&str, Vec<String>>, seen: &mut HashSet<String>) -> bool {
    if name == "colref" {
        return true;
    }
    if name == "main" || !seen.insert(name.to_string()) {
        return false;
    }
    refs.get(name).into_iter().flatten().any(|r| reaches_colref(r, refs, seen))
}

/// The rule names a GBNF body refers to (outside its literals and character classes).
fn references(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    walk(body, |word| {
        out.push(word.to_string());
        word.to_string()
    });
    out
}

/// `body` with every reference to a rule of `copied` renamed to its copy (`suffix`).
fn rename(body: &str, copied: &HashSet<String>, suffix: &str) -> String {
    walk(body, |word| if copied.contains(word) { format!("{word}-{suffix}") } else { word.to_string() })
}

/// Copies `body`, passing each rule name it refers to through `name`.
fn walk(body: &str, mut name: impl FnMut(&str) -> String) -> String {
    let chars: Vec<char> = body.chars().collect();
    let mut out = String::with_capacity(body.len() + 32);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '[' => {
                let close = if c == '"' { '"' } else { ']' };
                out.push(c);
                i += 1;
                while i < chars.len() && chars[i] != close {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        out.push(chars[i]);
                        i += 1;
                    }
                    out.push(chars[i]);
                    i += 1;
                }
                if i < chars.len() {
                    out.push(chars[i]);
                    i += 1;
                }
            }
            c if c.is_ascii_lowercase() => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_lowercase() || chars[i].is_ascii_digit() || chars[i] == '-') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                out.push_str(&name(&word));
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}
