//! The database schema as the model sees it, rendered in the Open-SQL format within a token budget.

use serde::{Deserialize, Serialize};
use std::fmt::Write;

mod budget;
pub use budget::Linking;

/// Tables and keys visible to the calling role.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Schema {
    #[serde(default)]
    pub tables: Vec<Table>,
    #[serde(default)]
    pub foreign_keys: Vec<ForeignKey>,
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
pub fn estimate_tokens(text: &str) -> usize {
    (text.chars().count() * 5).div_ceil(16)
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

impl Schema {
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

    /// Every table's name and its columns' names, as stored (unquoted).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tables.iter().flat_map(|t| std::iter::once(t.name.as_str()).chain(t.columns.iter().map(|c| c.name.as_str())))
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
        let names: usize = self.tables.iter().map(budget::name_line_chars).sum();
        let details: &[Detail] = if (names * 5).div_ceil(16) > max_tokens { &[] } else { &[Detail::Full, Detail::Core, Detail::Bare, Detail::Names] };
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
            let _ = writeln!(out, "CREATE TABLE {} ({kind}", t.ident);
            let mut lines: Vec<String> = Vec::with_capacity(t.columns.len() + 2);
            let single_key = t.primary_key.len() == 1;
            let fks: Vec<&ForeignKey> =
                self.foreign_keys.iter().filter(|fk| fk.table == t.ident && shown.contains(fk.ref_table.as_str())).collect();
            for c in &t.columns {
                let mut line = format!("  {} {}", c.ident, c.data_type);
                if single_key && t.primary_key[0] == c.name {
                    line.push_str(" PRIMARY KEY");
                } else if c.not_null {
                    line.push_str(" NOT NULL");
                }
                if let Some(fk) = fks.iter().find(|fk| fk.columns.len() == 1 && fk.columns[0] == c.ident) {
                    let _ = write!(line, " REFERENCES {} ({}){}", fk.ref_table, fk.ref_columns.join(", "), inferred_note(fk, " /* inferred */"));
                }
                lines.push(line);
            }
            if t.primary_key.len() > 1 {
                let key: Vec<&str> = t
                    .primary_key
                    .iter()
                    .map(|k| t.columns.iter().find(|c| &c.name == k).map(|c| c.ident.as_str()).unwrap_or(k.as_str()))
                    .collect();
                lines.push(format!("  PRIMARY KEY ({})", key.join(", ")));
            }
            for fk in fks.iter().filter(|fk| fk.columns.len() > 1) {
                lines.push(format!(
                    "  FOREIGN KEY ({}) REFERENCES {} ({}){}",
                    fk.columns.join(", "),
                    fk.ref_table,
                    fk.ref_columns.join(", "),
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
        let lhs: Vec<String> = fk.columns.iter().map(|c| format!("{}.{}", fk.table, c)).collect();
        let rhs: Vec<String> = fk.ref_columns.iter().map(|c| format!("{}.{}", fk.ref_table, c)).collect();
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
        let cols: Vec<&str> = t.columns.iter().map(|c| c.ident.as_str()).collect();
        let _ = writeln!(out, "# {}({}){kind}", t.ident, cols.join(", "));
        return;
    }
    render_columns(out, t, detail, false, |_| true);
}

/// One table in the Open-SQL form: the columns `keep` accepts at `detail` (`short`: one example
/// value, cut short), the others by name on one line.
fn render_columns(out: &mut String, t: &Table, detail: Detail, short: bool, keep: impl Fn(&Column) -> bool) {
    let kind = kind_note(&t.kind).map(|k| format!(" -- {k}")).unwrap_or_default();
    let _ = write!(out, "# {} ({kind}", t.ident);
    if detail >= Detail::Core {
        if let Some(c) = t.comment.as_deref().filter(|c| !c.trim().is_empty()) {
            let _ = write!(out, "{}{}", if kind.is_empty() { " -- " } else { ": " }, one_line(c, 120));
        }
    }
    out.push('\n');
    let mut rest: Vec<&str> = Vec::new();
    for c in &t.columns {
        if !keep(c) {
            rest.push(c.ident.as_str());
            continue;
        }
        let _ = write!(out, "#   {}: {}", c.ident, c.data_type);
        if detail >= Detail::Core {
            if let Some(d) = c.comment.as_deref().filter(|d| !d.trim().is_empty()) {
                let _ = write!(out, ", ({})", one_line(d, 120));
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

/// Undirected foreign-key graph of `schema`'s tables: (neighbour, foreign key) per table.
type FkGraph = Vec<Vec<(usize, usize)>>;

/// Breadth-first search from `sources` until `target`: each reached table's predecessor and the
/// foreign key that reached it.
fn breadth_first(graph: &FkGraph, sources: &[usize], target: usize) -> Vec<Option<(usize, usize)>> {
    let mut prev: Vec<Option<(usize, usize)>> = vec![None; graph.len()];
    let mut seen = vec![false; graph.len()];
    let mut queue: std::collections::VecDeque<usize> = sources.iter().copied().collect();
    for &t in sources {
        seen[t] = true;
    }
    let mut step = 0usize;
    while let Some(u) = queue.pop_front() {
        step += 1;
        crate::interrupt::every(step, 1024);
        if u == target {
            break;
        }
        for &(v, fk) in &graph[u] {
            if !seen[v] {
                seen[v] = true;
                prev[v] = Some((u, fk));
                queue.push_back(v);
            }
        }
    }
    prev
}

impl Schema {
    fn fk_graph(&self) -> FkGraph {
        // One pass over the tables, not one per foreign key: a schema may hold tens of thousands.
        let by_ident: std::collections::HashMap<&str, usize> =
            self.tables.iter().enumerate().map(|(i, t)| (t.ident.as_str(), i)).rev().collect();
        let index = |ident: &str| by_ident.get(ident).copied();
        let mut graph: FkGraph = vec![vec![]; self.tables.len()];
        for (fi, fk) in self.foreign_keys.iter().enumerate() {
            if let (Some(a), Some(b)) = (index(&fk.table), index(&fk.ref_table)) {
                graph[a].push((b, fi));
                graph[b].push((a, fi));
            }
        }
        graph
    }

    /// The units a question's tables come from, one number per table: the tables of one schema
    /// are one unit, and so are tables a foreign key links (across schemas too). A database
    /// with one schema is one unit; ten databases merged, a schema each, are ten.
    pub fn units(&self) -> Vec<usize> {
        fn root(parent: &mut [usize], mut x: usize) -> usize {
            while parent[x] != x {
                parent[x] = parent[parent[x]];
                x = parent[x];
            }
            x
        }
        let mut parent: Vec<usize> = (0..self.tables.len()).collect();
        let union = |parent: &mut Vec<usize>, a: usize, b: usize| {
            let (ra, rb) = (root(parent, a), root(parent, b));
            if ra != rb {
                parent[ra.max(rb)] = ra.min(rb);
            }
        };
        let mut first_of_schema: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for (i, t) in self.tables.iter().enumerate() {
            crate::interrupt::every(i, 1024);
            let first = *first_of_schema.entry(t.schema.as_str()).or_insert(i);
            union(&mut parent, first, i);
        }
        for (i, edges) in self.fk_graph().iter().enumerate() {
            for &(j, _) in edges {
                union(&mut parent, i, j);
            }
        }
        (0..self.tables.len()).map(|i| root(&mut parent, i)).collect()
    }

    /// The shortest chain of foreign keys joining table `from` to table `to` (Interactive-T2S's
    /// FindShortestPath on the table graph), as join conditions in order from `from`:
    /// `a.x = b.y`; empty for one table, None when no chain joins them.
    pub fn join_path(&self, from: usize, to: usize) -> Option<Vec<String>> {
        if from >= self.tables.len() || to >= self.tables.len() {
            return None;
        }
        let prev = breadth_first(&self.fk_graph(), &[to], from);
        let mut steps = Vec::new();
        let mut at = from;
        while at != to {
            let (next, fi) = prev[at]?;
            let fk = &self.foreign_keys[fi];
            let pairs: Vec<String> = fk
                .columns
                .iter()
                .zip(&fk.ref_columns)
                .map(|(c, r)| format!("{}.{} = {}.{}", fk.table, c, fk.ref_table, r))
                .collect();
            steps.push(pairs.join(" AND "));
            at = next;
        }
        Some(steps)
    }
}

/// The per-question schema and how it was grown from the chosen columns.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Focus {
    #[serde(skip)]
    pub schema: Schema,
    /// Tables added to join the chosen ones (the foreign-key path).
    pub path_tables: Vec<String>,
    /// Columns added: primary keys, join columns, columns sharing a name with a chosen one.
    pub added_columns: Vec<String>,
}

impl Schema {
    /// The per-question schema: the tables of the chosen columns and the shortest foreign-key
    /// paths joining them; in each, the chosen columns, primary keys, join columns and columns
    /// that share a name with a chosen one. Nothing chosen: the whole schema.
    pub fn focus(&self, chosen: &[(usize, usize)]) -> Focus {
        if chosen.is_empty() {
            return Focus { schema: self.clone(), ..Default::default() };
        }
        let graph = self.fk_graph();
        let mut wanted: Vec<usize> = Vec::new();
        for &(t, _) in chosen {
            if !wanted.contains(&t) {
                wanted.push(t);
            }
        }
        // Grow a tree from the first chosen table: join each other chosen table to it by a
        // shortest path (breadth-first from the whole tree). Unreachable tables stay apart.
        let mut tables: Vec<usize> = vec![wanted[0]];
        let mut used_fks: Vec<usize> = Vec::new();
        for &target in wanted.iter().skip(1) {
            if tables.contains(&target) {
                continue;
            }
            let prev = breadth_first(&graph, &tables, target);
            tables.push(target);
            let mut at = target;
            while let Some((u, fk)) = prev[at] {
                used_fks.push(fk);
                if tables.contains(&u) {
                    break;
                }
                tables.push(u);
                at = u;
            }
        }
        let chosen_names: Vec<&str> = chosen.iter().map(|&(t, c)| self.tables[t].columns[c].name.as_str()).collect();
        let mut focus = Focus::default();
        let mut out = Schema::default();
        for (ti, t) in self.tables.iter().enumerate() {
            if !tables.contains(&ti) {
                continue;
            }
            if !wanted.contains(&ti) {
                focus.path_tables.push(t.ident.clone());
            }
            let join_cols: Vec<&str> = used_fks
                .iter()
                .map(|&fi| &self.foreign_keys[fi])
                .flat_map(|fk| {
                    let mut cols: Vec<&str> = Vec::new();
                    if fk.table == t.ident {
                        cols.extend(fk.columns.iter().map(String::as_str));
                    }
                    if fk.ref_table == t.ident {
                        cols.extend(fk.ref_columns.iter().map(String::as_str));
                    }
                    cols
                })
                .collect();
            let mut table = t.clone();
            table.columns = t
                .columns
                .iter()
                .enumerate()
                .filter(|(ci, c)| {
                    let picked = chosen.contains(&(ti, *ci));
                    let keep = picked
                        || t.primary_key.contains(&c.name)
                        || join_cols.contains(&c.ident.as_str())
                        || chosen_names.contains(&c.name.as_str());
                    if keep && !picked {
                        focus.added_columns.push(format!("{}.{}", t.ident, c.ident));
                    }
                    keep
                })
                .map(|(_, c)| c.clone())
                .collect();
            out.tables.push(table);
        }
        let shown = |ident: &str, cols: &[String]| {
            out.tables.iter().find(|t| t.ident == ident).is_some_and(|t| cols.iter().all(|c| t.columns.iter().any(|x| &x.ident == c)))
        };
        out.foreign_keys = self
            .foreign_keys
            .iter()
            .filter(|fk| shown(&fk.table, &fk.columns) && shown(&fk.ref_table, &fk.ref_columns))
            .cloned()
            .collect();
        focus.schema = out;
        focus
    }
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

/// A value as the model should write it: numbers and booleans bare, everything else a quoted literal.
fn literal(v: &str, category: &str) -> String {
    let v = cut(v, MAX_VALUE_CHARS);
    match category {
        "N" => v,
        "B" => match v.as_str() {
            "t" => "true".into(),
            "f" => "false".into(),
            _ => v,
        },
        _ => format!("'{}'", v.replace('\'', "''")),
    }
}

fn one_line(s: &str, max: usize) -> String {
    cut(&s.split_whitespace().collect::<Vec<_>>().join(" "), max)
}

fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn sample_schema() -> Schema {
        serde_json::from_str(
            r#"{
          "tables": [
            {"oid": 1, "schema": "public", "name": "singer", "ident": "singer", "kind": "r", "comment": "People who sing",
             "columns": [
               {"name": "singer_id", "ident": "singer_id", "data_type": "integer", "category": "N", "comment": null, "not_null": true,
                "stats": {"values": ["1","2","3","4","5","6"], "distinct": 6, "complete": true, "min": "1", "max": "6"}},
               {"name": "name", "ident": "name", "data_type": "text", "category": "S", "comment": null,
                "stats": {"values": ["Joe Sharp","John Nizinik","Justin Brown","Rose White","Timbaland","Tribal King"], "distinct": 6, "complete": true}},
               {"name": "country", "ident": "country", "data_type": "text", "category": "S", "comment": "Country of birth",
                "stats": {"values": ["France","Netherlands","United States"], "distinct": 3, "complete": true}},
               {"name": "is_male", "ident": "is_male", "data_type": "boolean", "category": "B", "comment": null,
                "stats": {"values": ["f","t"], "distinct": 2, "complete": true}}
             ],
             "primary_key": ["singer_id"]},
            {"oid": 2, "schema": "public", "name": "Order Items", "ident": "\"Order Items\"", "kind": "r", "comment": null,
             "columns": [
               {"name": "singer_id", "ident": "singer_id", "data_type": "integer", "category": "N", "comment": null},
               {"name": "select", "ident": "\"select\"", "data_type": "text", "category": "S", "comment": null,
                "stats": {"values": ["it's"], "distinct": 1, "complete": true}}
             ],
             "primary_key": []}
          ],
          "foreign_keys": [{"table": "\"Order Items\"", "columns": ["singer_id"], "ref_table": "singer", "ref_columns": ["singer_id"]}]
        }"#,
        )
        .expect("valid sample schema")
    }

    #[test]
    fn renders_open_sql_format() {
        let r = sample_schema().render(10_000);
        assert_eq!(r.detail, Detail::Full);
        let expected = "\
# singer ( -- People who sing
#   singer_id: integer, range [1, 6], PRIMARY_KEY
#   name: text, e.g. ('Joe Sharp', 'John Nizinik', 'Justin Brown')
#   country: text, (Country of birth), VALUES ('France', 'Netherlands', 'United States')
#   is_male: boolean, VALUES (false, true)
# )
# \"Order Items\" (
#   singer_id: integer
#   \"select\": text, VALUES ('it''s')
# )
# FOREIGN KEYS:
# \"Order Items\".singer_id = singer.singer_id
";
        assert_eq!(r.text, expected);
    }

    #[test]
    fn renders_create_table_statements() {
        let r = sample_schema().render_ddl(10_000);
        let expected = "\
CREATE TABLE singer (
  singer_id integer PRIMARY KEY,
  name text,
  country text,
  is_male boolean
);
CREATE TABLE \"Order Items\" (
  singer_id integer REFERENCES singer (singer_id),
  \"select\" text
);
";
        assert_eq!(r.text, expected);
        let tiny = sample_schema().render_ddl(10);
        assert_eq!(tiny.tables_shown, 1);
        assert!(tiny.text.ends_with("-- ... 1 more tables not shown (schema larger than the prompt budget)\n"), "{}", tiny.text);
    }

    #[test]
    fn budget_drops_detail_then_tables() {
        let s = sample_schema();
        let full = s.render(10_000);
        let core = s.render(full.tokens - 1);
        assert!(core.detail < Detail::Full && core.tables_omitted == 0);
        // Names only (Open-SQL's shortest form) keeps every table where types no longer fit.
        let names = s.render_tables(&s.tables, Detail::Names, 0);
        let short = s.render(estimate_tokens(&names));
        assert_eq!((short.detail, short.tables_omitted), (Detail::Names, 0));
        assert!(short.text.starts_with("# singer(singer_id, name, country, is_male)\n"), "{}", short.text);
        let tiny = s.render(10);
        assert_eq!(tiny.detail, Detail::Names);
        assert_eq!(tiny.tables_shown, 1);
        assert!(tiny.text.contains("1 more tables not shown"));
        // A foreign key to a table not shown is not rendered.
        assert!(!tiny.text.contains("FOREIGN KEYS"));
    }

    #[test]
    fn tables_within_budget() {
        let s = sample_schema();
        assert_eq!(s.tables_within(10_000), 2);
        assert_eq!(s.tables_within(1), 1);
        let bare = s.render(10);
        assert!(s.tables_within(10) >= bare.tables_shown);
    }

    /// The star schema in schema `music`, and a second `singer` in schema `pop` (index 4):
    /// neither on the search path.
    pub fn two_schemas() -> Schema {
        let mut s = star_schema();
        for t in s.tables.iter_mut() {
            t.schema = "music".into();
            t.ident = format!("music.{}", t.name);
        }
        for fk in s.foreign_keys.iter_mut() {
            fk.table = format!("music.{}", fk.table);
            fk.ref_table = format!("music.{}", fk.ref_table);
        }
        let mut pop = s.tables[1].clone();
        pop.oid = 9;
        pop.schema = "pop".into();
        pop.ident = "pop.singer".into();
        s.tables.push(pop);
        s
    }

    /// concert_singer's shape: singer_in_concert joins singer and concert, concert has a stadium.
    pub fn star_schema() -> Schema {
        let t = |oid: u32, name: &str, cols: &[&str], pk: &[&str]| -> serde_json::Value {
            serde_json::json!({"oid": oid, "schema": "public", "name": name, "ident": name, "kind": "r", "comment": null,
                "columns": cols.iter().map(|c| serde_json::json!({"name": c, "ident": c, "data_type": "text", "comment": null})).collect::<Vec<_>>(),
                "primary_key": pk})
        };
        serde_json::from_value(serde_json::json!({
            "tables": [
                t(1, "concert", &["concert_id", "concert_name", "stadium_id", "year"], &["concert_id"]),
                t(2, "singer", &["singer_id", "name", "country", "age"], &["singer_id"]),
                t(3, "singer_in_concert", &["concert_id", "singer_id"], &["concert_id", "singer_id"]),
                t(4, "stadium", &["stadium_id", "name", "capacity"], &["stadium_id"]),
            ],
            "foreign_keys": [
                {"table": "concert", "columns": ["stadium_id"], "ref_table": "stadium", "ref_columns": ["stadium_id"]},
                {"table": "singer_in_concert", "columns": ["concert_id"], "ref_table": "concert", "ref_columns": ["concert_id"]},
                {"table": "singer_in_concert", "columns": ["singer_id"], "ref_table": "singer", "ref_columns": ["singer_id"]}
            ]
        }))
        .expect("valid star schema")
    }

    fn cols(s: &Schema) -> Vec<String> {
        s.tables.iter().flat_map(|t| t.columns.iter().map(move |c| format!("{}.{}", t.ident, c.ident))).collect()
    }

    #[test]
    fn focus_adds_keys_and_the_join_path() {
        let s = star_schema();
        // singer.name and stadium.capacity: the path goes through singer_in_concert and concert.
        let f = s.focus(&[(1, 1), (3, 2)]);
        assert_eq!(f.path_tables, vec!["concert", "singer_in_concert"]);
        assert_eq!(
            cols(&f.schema),
            vec![
                "concert.concert_id", "concert.stadium_id",
                "singer.singer_id", "singer.name",
                "singer_in_concert.concert_id", "singer_in_concert.singer_id",
                "stadium.stadium_id", "stadium.name", "stadium.capacity",
            ]
        );
        // stadium.name shares its name with the chosen singer.name.
        assert!(f.added_columns.contains(&"stadium.name".to_string()));
        assert_eq!(f.schema.foreign_keys.len(), 3);
    }

    #[test]
    fn units_are_schemas_and_tables_a_foreign_key_links() {
        assert_eq!(star_schema().units(), vec![0, 0, 0, 0]);
        // pop.singer is a schema of its own.
        assert_eq!(two_schemas().units(), vec![0, 0, 0, 0, 4]);
        // A foreign key across schemas makes them one unit.
        let mut s = two_schemas();
        s.foreign_keys.push(serde_json::from_value(serde_json::json!(
            {"table": "pop.singer", "columns": ["singer_id"], "ref_table": "music.singer", "ref_columns": ["singer_id"]})).expect("fk"));
        assert_eq!(s.units(), vec![0, 0, 0, 0, 0]);
    }

    #[test]
    fn focus_on_one_table_keeps_it_small() {
        let f = star_schema().focus(&[(1, 2)]);
        assert_eq!(cols(&f.schema), vec!["singer.singer_id", "singer.country"]);
        assert!(f.schema.foreign_keys.is_empty());
        assert_eq!(star_schema().focus(&[]).schema.tables.len(), 4);
    }

    #[test]
    fn numbers_are_rarely_categorical() {
        let s = sample_schema();
        assert!(categorical_values(&s.tables[0].columns[0]).is_none());
        assert_eq!(categorical_values(&s.tables[0].columns[3]).map(|v| v.len()), Some(2));
    }

    #[test]
    fn token_estimate_is_monotonic() {
        assert_eq!(estimate_tokens(""), 0);
        assert!(estimate_tokens("SELECT count(*) FROM singer") >= 7);
    }
}
