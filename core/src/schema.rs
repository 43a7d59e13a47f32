//! The database schema as the model sees it, rendered in the Open-SQL format within a token budget.

use serde::Deserialize;
use std::fmt::Write;

use crate::render::{self, cut, has_unsafe, ident, prose};

mod budget;
mod graph;
pub use budget::Linking;
pub use graph::Focus;

/// Tables and keys visible to the calling role.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Schema {
    #[serde(default)]
    pub tables: Vec<Table>,
    #[serde(default)]
    pub foreign_keys: Vec<ForeignKey>,
    /// The OIDs of strangers' tables read from the catalog but not kept here
    /// ([`Schema::strangers_if_room`], a per-question schema): searches leave them out too.
    #[serde(skip)]
    pub strangers_left_out: Vec<u32>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Table {
    pub oid: u32,
    pub schema: String,
    pub name: String,
    /// How the table is written in SQL: quoted where needed, schema-qualified when not on the search path.
    pub ident: String,
    /// 'r' table, 'p' partitioned, 'v' view, 'm' materialized view, 'f' foreign table.
    pub kind: String,
    pub comment: Option<String>,
    #[serde(default)]
    pub row_estimate: Option<f64>,
    /// Rows inserted, updated and deleted since statistics were reset; tells when samples are stale.
    #[serde(default)]
    pub changes: Option<i64>,
    pub columns: Vec<Column>,
    #[serde(default)]
    pub primary_key: Vec<String>,
    /// The primary key is none declared but one profiling found in the data.
    #[serde(default)]
    pub key_inferred: bool,
    /// The owner is one the caller trusts: a superuser, the database's owner or the caller
    /// (sql/introspect/schema.sql). The alignment reads a bare name as a table off the search
    /// path only then (align/names.rs).
    #[serde(default)]
    pub owner_trusted: bool,
}

/// Whether a table is on the search path: its ident is not schema-qualified (no dot outside
/// double quotes).
pub fn on_search_path(ident: &str) -> bool {
    let mut quoted = false;
    for c in ident.chars() {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => return false,
            _ => {}
        }
    }
    true
}

impl Table {
    /// A stranger's table: off the caller's search path and of an owner the caller does not
    /// trust (not a superuser, the database's owner or the caller). Her names, comments and rows
    /// are her words: introspection drops her comments and enum labels, nothing samples her
    /// rows, and nothing links her table to a question or brings it into a query.
    pub fn is_strangers(&self) -> bool {
        !self.owner_trusted && !on_search_path(&self.ident)
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Column {
    pub name: String,
    /// quote_ident(name).
    pub ident: String,
    pub data_type: String,
    /// pg_type.typcategory: S string, N numeric, D datetime, B boolean, E enum, …
    #[serde(default)]
    pub category: String,
    pub comment: Option<String>,
    #[serde(default)]
    pub not_null: bool,
    /// Enum labels when the column's type is an enum.
    #[serde(default)]
    pub enum_values: Vec<String>,
    #[serde(default)]
    pub stats: Option<ColumnStats>,
}

/// Cheap statistics of one column, taken from a bounded sample of rows.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct ColumnStats {
    /// Distinct non-null values seen (at most a handful are kept).
    #[serde(default)]
    pub values: Vec<String>,
    /// Number of distinct non-null values in the sample.
    #[serde(default)]
    pub distinct: i64,
    /// Whether the sample covered the whole table.
    #[serde(default)]
    pub complete: bool,
    pub min: Option<String>,
    pub max: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ForeignKey {
    pub table: String,
    pub columns: Vec<String>,
    pub ref_table: String,
    pub ref_columns: Vec<String>,
    /// Not declared: profiling found it in the data (one a DBA confirmed counts as declared).
    #[serde(default)]
    pub inferred: bool,
    /// A constraint PostgreSQL enforces on every row the role reads (sql/introspect/schema.sql):
    /// declared, validated, not deferrable, its checks not turned off, no inheritance children
    /// on either side, no row security on the table it points to. Not a relationship profiling found or a DBA stored.
    #[serde(default)]
    pub enforced: bool,
}

/// How many values make a column categorical (Open-SQL: up to five).
pub const MAX_CATEGORICAL_VALUES: usize = 5;
/// Sample texts shown for a non-categorical string column.
pub const SAMPLE_TEXTS: usize = 3;
/// Longest value shown before it is cut.
const MAX_VALUE_CHARS: usize = 40;
/// Longest example value in a schema cut to fit its budget.
const SHORT_VALUE_CHARS: usize = 24;

/// Estimated tokens of a text: 3.2 characters a token, rounded up. On the spider-pg prompts the
/// Qwen2.5 tokenizer averages 3.35 characters a token (`make bench` prints both counts), so this
/// errs a little high, the safe side for a budget. Exact counts come from the endpoint's `usage`.
/// A character beyond ASCII counts as a token, two when it takes four UTF-8 bytes (a byte-level
/// tokenizer spends one or more on each, and names of rare four-byte characters would
/// otherwise pass a budget at a tenth of their size).
pub fn estimate_tokens(text: &str) -> usize {
    token_units(text).div_ceil(TOKEN_UNITS)
}

/// Sixteenths of a token, the unit every budget of a prompt is priced in before rounding up:
/// 5 an ASCII character, 16 another, 32 one of four UTF-8 bytes (see [`estimate_tokens`]).
pub const TOKEN_UNITS: usize = 16;

/// A text's price in sixteenths of a token: sums of these round up to [`estimate_tokens`]'s.
pub fn token_units(text: &str) -> usize {
    text.chars().map(|c| if c.is_ascii() { 5 } else { TOKEN_UNITS * (c.len_utf8() / 2) }).sum()
}

/// How much detail a rendering keeps; lower levels are tried when the budget is exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Detail {
    /// Table and column names only, one line a table (Open-SQL's shortest form: on a wide
    /// schema every table keeps a place in the prompt).
    Names,
    /// Names, types and keys only.
    Bare,
    /// Plus comments and categorical values.
    Core,
    /// Plus sample texts and numeric/date ranges.
    Full,
}

/// The rendered schema and what had to be left out to fit the budget.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub text: String,
    pub tokens: usize,
    pub detail: Detail,
    pub tables_shown: usize,
    pub tables_omitted: usize,
    /// The columns the text shows, in any form, as `table.column` (idents).
    pub columns: Vec<String>,
    /// Indices of the tables whose columns the text details (with types), in Open-SQL's
    /// renderings; none in the names-only and CREATE TABLE forms.
    pub detailed: Vec<usize>,
}

impl Table {
    /// Whether the table has a column of that (folded) name.
    pub fn has_column(&self, name: &str) -> bool {
        self.columns.iter().any(|c| c.name == name)
    }
}

impl ForeignKey {
    /// Whether each row of the key's table meets at most one row of `parent`: an enforced
    /// constraint (PostgreSQL makes it reference a unique key), a relationship profiling found
    /// (it points to a column found unique), or one to `parent`'s one-column primary key. Not
    /// one a DBA stored to any other column: it may be a column whose values repeat.
    pub fn to_one(&self, parent: &Table) -> bool {
        self.enforced || self.to_key_or_found(parent)
    }

    /// Whether the key points to `parent`'s one-column primary key (one not inferred), or is a
    /// relationship profiling found (it always points to a column found unique).
    pub fn to_key_or_found(&self, parent: &Table) -> bool {
        self.inferred
            || (!parent.key_inferred
                && parent.primary_key.len() == 1
                && self.ref_columns.len() == 1
                && parent.columns.iter().any(|c| c.ident == self.ref_columns[0] && c.name == parent.primary_key[0]))
    }
}

impl Schema {
    /// The single-column foreign keys of `table` to one row ([`ForeignKey::to_one`]), each with
    /// the table it points to, where that table may be read for a name written without its
    /// schema (not another role's off the search path): the tables a column one key away is
    /// joined from (many rows to one: the rows stay the table's).
    pub fn single_keys(&self, table: &Table) -> Vec<(&ForeignKey, &Table)> {
        self.foreign_keys
            .iter()
            .filter(|fk| fk.table == table.ident && fk.columns.len() == 1 && fk.ref_columns.len() == 1)
            .filter_map(|fk| self.tables.iter().find(|u| u.ident == fk.ref_table && !u.is_strangers()).map(|u| (fk, u)))
            .filter(|(fk, u)| fk.to_one(u))
            .collect()
    }

    /// Whether tables of several schemas have this name: written without its schema, which one
    /// PostgreSQL reads is the search path's.
    pub fn name_in_several_schemas(&self, name: &str) -> bool {
        self.tables.iter().filter(|t| t.name == name).count() > 1
    }

    /// The schema without anything read from rows: no samples, categorical values, ranges or
    /// enum labels (nl2sql.privacy). Names, types, keys and comments stay.
    pub fn without_data(&self) -> Schema {
        let mut s = self.clone();
        for c in s.tables.iter_mut().flat_map(|t| t.columns.iter_mut()) {
            c.stats = None;
            c.enum_values.clear();
        }
        s
    }

    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// The schema without the strangers' tables ([`Table::is_strangers`]) unless, at every
    /// budget of `budgets` (each a prompt's), the others are shown in full with them as without
    /// them: hers are shown only in the room the others leave, so that one wide table of hers
    /// granted to everyone neither shortens every reader's layout, pushes a table out, nor
    /// makes a schema wide (linked per question). A schema of strangers' tables only is kept.
    pub fn strangers_if_room(self, budgets: &[usize]) -> Schema {
        if !self.tables.iter().any(Table::is_strangers) || self.tables.iter().all(Table::is_strangers) {
            return self;
        }
        let fits = budgets.iter().all(|&b| {
            let all = self.render(b);
            all.detail == Detail::Full && all.tables_omitted == 0
        });
        if fits {
            return self;
        }
        let kept: std::collections::HashSet<&str> = self.tables.iter().filter(|t| !t.is_strangers()).map(|t| t.ident.as_str()).collect();
        let foreign_keys = self.foreign_keys.iter().filter(|fk| kept.contains(fk.table.as_str()) && kept.contains(fk.ref_table.as_str())).cloned().collect();
        let strangers_left_out = self.strangers();
        Schema { tables: self.tables.into_iter().filter(|t| !t.is_strangers()).collect(), foreign_keys, strangers_left_out }
    }

    /// The OIDs of the strangers' tables ([`Table::is_strangers`]), those this schema holds and
    /// those it was cut from: searches of columns and values leave them out before they rank,
    /// so that hers never crowd out the others nor reach a prompt her table is not in.
    pub fn strangers(&self) -> Vec<u32> {
        let shown = self.tables.iter().filter(|t| t.is_strangers()).map(|t| t.oid);
        shown.chain(self.strangers_left_out.iter().copied()).collect()
    }

    /// Every table's name and its columns' names, as stored (unquoted), but a stranger's
    /// ([`Table::is_strangers`]): her names decide no word of a question (the words value
    /// searches skip, the words examples mask).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tables.iter().filter(|t| !t.is_strangers()).flat_map(|t| std::iter::once(t.name.as_str()).chain(t.columns.iter().map(|c| c.name.as_str())))
    }

    /// How many leading tables can be shown at all within `max_tokens` (at the barest detail):
    /// the others need no statistics.
    pub fn tables_within(&self, max_tokens: usize) -> usize {
        let mut used = 0;
        for (i, t) in self.tables.iter().enumerate() {
            let mut one = String::new();
            render_table(&mut one, t, Detail::Names);
            used += estimate_tokens(&one);
            if used > max_tokens {
                return i.max(1);
            }
        }
        self.tables.len()
    }

    /// Renders in the Open-SQL format within `max_tokens`, dropping detail first, then tables.
    pub fn render(&self, max_tokens: usize) -> Rendered {
        // Every other form is longer than the name lines: on a wide schema skip rendering them.
        let names: usize = self.tables.iter().map(budget::name_line_units).sum();
        let details: &[Detail] = if names.div_ceil(TOKEN_UNITS) > max_tokens { &[] } else { &[Detail::Full, Detail::Core, Detail::Bare, Detail::Names] };
        for &detail in details {
            let text = self.render_tables(&self.tables, detail, 0);
            let tokens = estimate_tokens(&text);
            if tokens <= max_tokens {
                let detailed = if detail == Detail::Names { vec![] } else { (0..self.tables.len()).collect() };
                return Rendered { text, tokens, detail, tables_shown: self.tables.len(), tables_omitted: 0, columns: self.column_names(self.tables.len()), detailed };
            }
        }
        // Still too large: keep the longest prefix of tables that fits. Start from the prefix
        // whose tables alone fit, then shrink until the foreign keys and the note fit too.
        let start = self.tables_within(max_tokens);
        self.longest_prefix(max_tokens, start, |tables, omitted| self.render_tables(tables, Detail::Names, omitted))
    }

    /// Renders as CREATE TABLE statements (names, types, keys; no statistics) within
    /// `max_tokens`, keeping the longest prefix of tables that fits.
    pub fn render_ddl(&self, max_tokens: usize) -> Rendered {
        self.longest_prefix(max_tokens, self.tables.len(), |tables, omitted| self.ddl_tables(tables, omitted))
    }

    /// The longest prefix of tables, from `start` down, whose rendering fits `max_tokens` (at
    /// least one table).
    fn longest_prefix(&self, max_tokens: usize, start: usize, render: impl Fn(&[Table], usize) -> String) -> Rendered {
        let all = self.tables.len();
        let mut shown = start.clamp(1, all.max(1)).min(all);
        loop {
            let text = render(&self.tables[..shown], all - shown);
            let tokens = estimate_tokens(&text);
            if tokens <= max_tokens || shown <= 1 {
                return Rendered {
                    text,
                    tokens,
                    detail: Detail::Names,
                    tables_shown: shown,
                    tables_omitted: all - shown,
                    columns: self.column_names(shown),
                    detailed: vec![],
                };
            }
            shown = (shown * 9 / 10).clamp(1, shown - 1);
        }
    }

    /// The columns of the first `tables` tables, as `table.column`.
    fn column_names(&self, tables: usize) -> Vec<String> {
        self.tables[..tables].iter().flat_map(|t| t.columns.iter().map(move |c| format!("{}.{}", t.ident, c.ident))).collect()
    }

    fn ddl_tables(&self, tables: &[Table], omitted: usize) -> String {
        let shown: std::collections::HashSet<&str> = tables.iter().map(|t| t.ident.as_str()).collect();
        let mut out = String::new();
        for t in tables {
            let kind = kind_note(&t.kind).map(|k| format!(" -- a {k}")).unwrap_or_default();
            let _ = writeln!(out, "CREATE TABLE {} ({kind}", ident(&t.ident));
            let mut lines: Vec<String> = Vec::with_capacity(t.columns.len() + 2);
            let single_key = t.primary_key.len() == 1;
            let fks: Vec<&ForeignKey> =
                self.foreign_keys.iter().filter(|fk| fk.table == t.ident && shown.contains(fk.ref_table.as_str())).collect();
            for c in &t.columns {
                let mut line = format!("  {} {}", ident(&c.ident), ident(&c.data_type));
                if single_key && t.primary_key[0] == c.name {
                    line.push_str(" PRIMARY KEY");
                } else if c.not_null {
                    line.push_str(" NOT NULL");
                }
                if let Some(fk) = fks.iter().find(|fk| fk.columns.len() == 1 && fk.columns[0] == c.ident) {
                    let refs: Vec<String> = fk.ref_columns.iter().map(|c| ident(c)).collect();
                    let _ = write!(line, " REFERENCES {} ({}){}", ident(&fk.ref_table), refs.join(", "), inferred_note(fk, " /* inferred */"));
                }
                lines.push(line);
            }
            if t.primary_key.len() > 1 {
                let key: Vec<String> = t
                    .primary_key
                    .iter()
                    .map(|k| ident(t.columns.iter().find(|c| &c.name == k).map(|c| c.ident.as_str()).unwrap_or(k.as_str())))
                    .collect();
                lines.push(format!("  PRIMARY KEY ({})", key.join(", ")));
            }
            for fk in fks.iter().filter(|fk| fk.columns.len() > 1) {
                let cols: Vec<String> = fk.columns.iter().map(|c| ident(c)).collect();
                let refs: Vec<String> = fk.ref_columns.iter().map(|c| ident(c)).collect();
                lines.push(format!(
                    "  FOREIGN KEY ({}) REFERENCES {} ({}){}",
                    cols.join(", "),
                    ident(&fk.ref_table),
                    refs.join(", "),
                    inferred_note(fk, " /* inferred */")
                ));
            }
            out.push_str(&lines.join(",\n"));
            out.push_str("\n);\n");
        }
        if omitted > 0 {
            let _ = writeln!(out, "-- ... {omitted} more tables not shown (schema larger than the prompt budget)");
        }
        out
    }

    pub(crate) fn render_tables(&self, tables: &[Table], detail: Detail, omitted: usize) -> String {
        let mut out = String::new();
        for t in tables {
            render_table(&mut out, t, detail);
        }
        if omitted > 0 {
            let _ = writeln!(out, "# ... {omitted} more tables not shown (schema larger than the prompt budget)");
        }
        let fks = self.foreign_keys_among(tables.iter());
        write_foreign_keys(&mut out, &fks);
        out
    }

    /// The foreign keys whose two tables are both among `tables`.
    fn foreign_keys_among<'a>(&self, tables: impl Iterator<Item = &'a Table>) -> Vec<&ForeignKey> {
        let shown: std::collections::HashSet<&str> = tables.map(|t| t.ident.as_str()).collect();
        self.foreign_keys.iter().filter(|fk| shown.contains(fk.table.as_str()) && shown.contains(fk.ref_table.as_str())).collect()
    }
}

/// The `# FOREIGN KEYS:` section of the Open-SQL form (nothing when there are none).
fn write_foreign_keys(out: &mut String, fks: &[&ForeignKey]) {
    if fks.is_empty() {
        return;
    }
    out.push_str("# FOREIGN KEYS:\n");
    for fk in fks {
        let lhs: Vec<String> = fk.columns.iter().map(|c| format!("{}.{}", ident(&fk.table), ident(c))).collect();
        let rhs: Vec<String> = fk.ref_columns.iter().map(|c| format!("{}.{}", ident(&fk.ref_table), ident(c))).collect();
        let _ = writeln!(out, "# {} = {}{}", lhs.join(", "), rhs.join(", "), inferred_note(fk, " (inferred)"));
    }
}

/// How a prompt marks a relationship profiling inferred (nothing for a declared one).
fn inferred_note(fk: &ForeignKey, note: &'static str) -> &'static str {
    if fk.inferred {
        note
    } else {
        ""
    }
}

/// What a relation that is not a plain table is, for the schema prompt.
fn kind_note(kind: &str) -> Option<&'static str> {
    match kind {
        "v" => Some("view"),
        "m" => Some("materialized view"),
        "f" => Some("foreign table"),
        _ => None,
    }
}

fn render_table(out: &mut String, t: &Table, detail: Detail) {
    if detail == Detail::Names {
        let kind = kind_note(&t.kind).map(|k| format!(" -- {k}")).unwrap_or_default();
        let cols: Vec<String> = t.columns.iter().map(|c| ident(&c.ident)).collect();
        let _ = writeln!(out, "# {}({}){kind}", ident(&t.ident), cols.join(", "));
        return;
    }
    render_columns(out, t, detail, false, |_| true);
}

/// One table in the Open-SQL form: the columns `keep` accepts at `detail` (`short`: one example
/// value, cut short), the others by name on one line.
fn render_columns(out: &mut String, t: &Table, detail: Detail, short: bool, keep: impl Fn(&Column) -> bool) {
    let kind = kind_note(&t.kind).map(|k| format!(" -- {k}")).unwrap_or_default();
    let _ = write!(out, "# {} ({kind}", ident(&t.ident));
    if detail >= Detail::Core {
        if let Some(c) = t.comment.as_deref().filter(|c| !c.trim().is_empty()) {
            let _ = write!(out, "{}{}", if kind.is_empty() { " -- " } else { ": " }, prose(c, 120));
        }
    }
    out.push('\n');
    let mut rest: Vec<String> = Vec::new();
    for c in &t.columns {
        if !keep(c) {
            rest.push(ident(&c.ident));
            continue;
        }
        let _ = write!(out, "#   {}: {}", ident(&c.ident), ident(&c.data_type));
        if detail >= Detail::Core {
            if let Some(d) = c.comment.as_deref().filter(|d| !d.trim().is_empty()) {
                let _ = write!(out, ", ({})", prose(d, 120));
            }
            if let Some(v) = categorical_values(c) {
                let _ = write!(out, ", VALUES ({})", v.join(", "));
            }
        }
        if detail >= Detail::Full {
            if let Some(s) = sample_suffix(c, short) {
                out.push_str(&s);
            }
        }
        if t.primary_key.iter().any(|k| k == &c.name) {
            out.push_str(", PRIMARY_KEY");
        }
        out.push('\n');
    }
    if !rest.is_empty() {
        let _ = writeln!(out, "#   other columns: {}", rest.join(", "));
    }
    out.push_str("# )\n");
}

/// The complete set of values when the column is categorical, as SQL literals.
pub fn categorical_values(c: &Column) -> Option<Vec<String>> {
    if !c.enum_values.is_empty() && c.enum_values.len() <= MAX_CATEGORICAL_VALUES * 2 {
        return Some(c.enum_values.iter().map(|v| literal(v, "S")).collect());
    }
    let s = c.stats.as_ref()?;
    let categorical = s.distinct > 0
        && s.distinct as usize <= MAX_CATEGORICAL_VALUES
        && s.values.len() == s.distinct as usize
        && matches!(c.category.as_str(), "S" | "B" | "E" | "N");
    // Numbers are only categorical in tiny domains with a full sample (codes, flags).
    if !categorical || (c.category == "N" && !(s.complete && s.distinct <= 3)) {
        return None;
    }
    Some(s.values.iter().map(|v| literal(v, &c.category)).collect())
}

/// What the schema prompt says of a column's values: `, VALUES (…)`, or its samples or range.
pub fn values_note(c: &Column) -> Option<String> {
    match categorical_values(c) {
        Some(v) => Some(format!(", VALUES ({})", v.join(", "))),
        None => sample_suffix(c, false),
    }
}

/// Samples or range of a column; `short`: one sample text, cut at SHORT_VALUE_CHARS.
fn sample_suffix(c: &Column, short: bool) -> Option<String> {
    if categorical_values(c).is_some() {
        return None;
    }
    let s = c.stats.as_ref()?;
    match c.category.as_str() {
        "S" if !s.values.is_empty() => {
            let ex: Vec<String> = if short {
                s.values.iter().take(1).map(|v| literal(&cut(v, SHORT_VALUE_CHARS), "S")).collect()
            } else {
                s.values.iter().take(SAMPLE_TEXTS).map(|v| literal(v, "S")).collect()
            };
            Some(format!(", e.g. ({})", ex.join(", ")))
        }
        "N" | "D" => match (&s.min, &s.max) {
            (Some(lo), Some(hi)) if lo != hi => {
                Some(format!(", range [{}, {}]", literal(lo, &c.category), literal(hi, &c.category)))
            }
            _ => None,
        },
        _ => None,
    }
}

/// A value as the model should write it: numbers and booleans bare, everything else a quoted
/// literal (render::literal); a "number" holding an unsafe character (a type's output function
/// wrote it) is quoted too.
fn literal(v: &str, category: &str) -> String {
    let v = cut(v, MAX_VALUE_CHARS);
    match category {
        _ if has_unsafe(&v) => render::literal(&v),
        "N" => v,
        "B" => match v.as_str() {
            "t" => "true".into(),
            "f" => "false".into(),
            _ => v,
        },
        _ => render::literal(&v),
    }
}

#[cfg(test)]
pub(crate) mod tests;
