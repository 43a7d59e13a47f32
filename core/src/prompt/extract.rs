//! Extraction: one call at temperature 0 that names the columns a question needs, the values
//! it mentions, and what its answer returns (info alignment: the SELECT as phrases of the
//! question, in order). The answer is parsed leniently and resolved against the real schema.

use crate::model::llm::Message;
use crate::schema::Schema;
use serde::Serialize;

const TASK: &str = include_str!("text/extract_task.txt");

/// The messages of the extraction request: the whole schema, laid out as every other call;
/// `examples` is the few-shot section (possibly empty): queries of similar questions show
/// which columns such questions need.
pub fn messages(schema: &str, examples: &str, question: &str, hint: Option<&str>) -> Vec<Message> {
    crate::prompt::messages(schema, TASK, examples, question, hint)
}

/// What the model extracted, as it wrote it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Extraction {
    /// "table.column" or "column" names.
    pub columns: Vec<String>,
    /// Values the question mentions (the entities to look up).
    pub entities: Vec<String>,
    /// Columns the values were said to be in, as written.
    pub value_columns: Vec<String>,
    /// What the answer returns, in order.
    pub select: Vec<String>,
}

/// Items read from each line of the answer: a question needs a few, and a hostile or runaway
/// answer must not make the lookups that follow costly.
const MAX_ITEMS: usize = 64;
/// Characters kept of one item.
const MAX_ITEM_CHARS: usize = 200;

fn cap(s: String) -> String {
    match s.char_indices().nth(MAX_ITEM_CHARS) {
        Some((i, _)) => s[..i].to_string(),
        None => s,
    }
}

fn strip(s: &str) -> String {
    s.trim().trim_matches(|c| matches!(c, '`' | '*' | '.' | ',' | ';' | ' ')).trim().to_string()
}

fn unquote(s: &str) -> String {
    let t = s.trim();
    for (open, close) in [('\'', '\''), ('"', '"'), ('`', '`'), ('“', '”'), ('‘', '’')] {
        if let Some(inner) = t.strip_prefix(open).and_then(|r| r.strip_suffix(close)) {
            return inner.to_string();
        }
    }
    t.to_string()
}

/// The value of a "#name:" line, wherever it is in the answer (case-insensitive).
fn field<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
    answer.lines().find_map(|l| {
        let t = l.trim().trim_start_matches(['-', '*', ' ']);
        let rest = t.strip_prefix('#').unwrap_or(t);
        let (k, v) = rest.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then_some(v)
    })
}

/// Parses the extraction answer; missing lines give empty lists.
pub fn parse(answer: &str) -> Extraction {
    let mut e = Extraction::default();
    if let Some(cols) = field(answer, "columns") {
        e.columns =
            cols.split(',').map(strip).filter(|c| !c.is_empty() && !c.eq_ignore_ascii_case("none")).take(MAX_ITEMS).map(cap).collect();
    }
    let values = field(answer, "values").or_else(|| field(answer, "entities"));
    if let Some(values) = values {
        for part in values.split(';') {
            if e.entities.len() >= MAX_ITEMS {
                break;
            }
            let part = part.trim();
            if part.is_empty() || part.eq_ignore_ascii_case("none") {
                continue;
            }
            match part.split_once('=') {
                Some((col, val)) => {
                    let v = unquote(val.trim());
                    if !v.is_empty() {
                        e.value_columns.push(cap(strip(col)));
                        e.entities.push(cap(v));
                    }
                }
                None => e.entities.push(cap(unquote(part))),
            }
        }
    }
    if let Some(select) = field(answer, "select") {
        e.select = select.split(';').map(strip).filter(|s| !s.is_empty()).take(MAX_ITEMS).map(cap).collect();
    }
    e
}

/// A column of the schema: (table index, column index).
pub type ColumnRef = (usize, usize);

fn norm(ident: &str) -> String {
    ident.trim().trim_matches('"').to_lowercase()
}

/// The schema's columns by their normalised names, to read the extraction's names against:
/// built once per question, linear in the schema.
pub struct Columns<'a> {
    schema: &'a Schema,
    by_column: std::collections::HashMap<String, Vec<ColumnRef>>,
}

impl<'a> Columns<'a> {
    /// Every column but a stranger's (Table::is_strangers): whatever the extraction writes, it
    /// never links her table to the question (nor puts it first in the prompt).
    pub fn new(schema: &'a Schema) -> Columns<'a> {
        let mut by_column: std::collections::HashMap<String, Vec<ColumnRef>> = std::collections::HashMap::new();
        for (ti, t) in schema.tables.iter().enumerate().filter(|(_, t)| !t.is_strangers()) {
            for (ci, c) in t.columns.iter().enumerate() {
                by_column.entry(norm(&c.name)).or_default().push((ti, ci));
            }
        }
        Columns { schema, by_column }
    }

    /// The tables' columns of that name.
    fn of(&self, column: &str) -> &[ColumnRef] {
        self.by_column.get(column).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The columns one name refers to: schema.table names the one of that schema; else (no
    /// schema, or one that does not hold it) every table of that name; a bare column every
    /// table that has it.
    fn find(&self, name: &str) -> Vec<ColumnRef> {
        let schema = self.schema;
        let (table, column) = split(name);
        let holders = self.of(&column);
        let named = |tn: &str, qualified: bool| {
            holders
                .iter()
                .copied()
                .filter(|&(ti, _)| {
                    let t = &schema.tables[ti];
                    if qualified {
                        norm(&t.ident) == tn || format!("{}.{}", norm(&t.schema), norm(&t.name)) == tn
                    } else {
                        norm(&t.name) == tn || norm(&t.ident) == tn
                    }
                })
                .collect::<Vec<_>>()
        };
        match table {
            None => holders.to_vec(),
            Some(t) => {
                let full: Vec<String> = t.split('.').map(norm).collect();
                let exact = if full.len() > 1 { named(&full.join("."), true) } else { vec![] };
                if exact.is_empty() {
                    named(full.last().map(String::as_str).unwrap_or(""), false)
                } else {
                    exact
                }
            }
        }
    }

    /// The schema's columns that `names` ("table.column" or "column", quoted or not, any case)
    /// refer to; a bare column name refers to every table that has it.
    /// Linear in the names.
    pub fn resolve(&self, names: &[String]) -> Vec<ColumnRef> {
        let schema = self.schema;
        let mut each: Vec<Vec<ColumnRef>> = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            crate::interrupt::every(i + 1, 256);
            each.push(self.find(name));
        }
        // A table name several schemas hold: the copy in the schema the names that are not
        // ambiguous are all in (`singer.name` beside `song.year` that only one schema has).
        let schemas = |refs: &[ColumnRef]| {
            let mut s: Vec<&str> = refs.iter().map(|&(ti, _)| schema.tables[ti].schema.as_str()).collect();
            s.sort_unstable();
            s.dedup();
            s
        };
        let mut settled: Vec<&str> = each.iter().map(|r| schemas(r)).filter(|s| s.len() == 1).map(|s| s[0]).collect();
        settled.sort_unstable();
        settled.dedup();
        let mut out: Vec<ColumnRef> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for refs in each {
            let kept: Vec<ColumnRef> = match settled.as_slice() {
                [only] if schemas(&refs).len() > 1 && refs.iter().any(|&(ti, _)| schema.tables[ti].schema == *only) => {
                    refs.into_iter().filter(|&(ti, _)| schema.tables[ti].schema == *only).collect()
                }
                _ => refs,
            };
            for r in kept {
                if seen.insert(r) {
                    out.push(r);
                }
            }
        }
        out
    }

    /// The columns that `names` written with a table that has no such column may have meant:
    /// every table's column of that name (`singer.nationality` where only `people` has a
    /// `nationality`). Empty for names that resolve, and for bare names that match nothing.
    pub fn misplaced(&self, names: &[String]) -> Vec<ColumnRef> {
        let mut out: Vec<ColumnRef> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (i, name) in names.iter().enumerate() {
            crate::interrupt::every(i + 1, 256);
            let (table, column) = split(name);
            if table.is_some() && self.find(name).is_empty() {
                out.extend(self.of(&column).iter().copied().filter(|&c| seen.insert(c)));
            }
        }
        out
    }
}

/// "table.column" -> (Some(table), column), "column" -> (None, column), the column normalised.
fn split(name: &str) -> (Option<&str>, String) {
    match name.rsplit_once('.') {
        Some((t, c)) => (Some(t), norm(c)),
        None => (None, norm(name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::tests::sample_schema;

    fn resolve(schema: &Schema, names: &[String]) -> Vec<ColumnRef> {
        Columns::new(schema).resolve(names)
    }

    fn misplaced(schema: &Schema, names: &[String]) -> Vec<ColumnRef> {
        Columns::new(schema).misplaced(names)
    }

    #[test]
    fn misplaced_names_mean_the_tables_that_have_the_column() {
        let s = crate::schema::tests::two_schemas();
        // pop.singer has no capacity: music.stadium's; a name that resolves means nothing here.
        assert_eq!(misplaced(&s, &["pop.singer.capacity".into(), "pop.singer.name".into()]), vec![(3, 2)]);
        assert_eq!(misplaced(&s, &["singer.capacity".into(), "stadium.capacity".into()]), vec![(3, 2)]);
        // Bare names and names no table has: nothing.
        assert!(misplaced(&s, &["capacity".into(), "singer.nope".into()]).is_empty());
        // A common name: every table that has it.
        assert_eq!(misplaced(&s, &["concert.name".into()]).len(), 3);
    }

    #[test]
    fn parses_the_three_lines() {
        let a = "#columns: singer.name, singer.country\n#values: singer.country = 'France'; 'Joe'\n#select: name of the singer; country";
        let e = parse(a);
        assert_eq!(e.columns, vec!["singer.name", "singer.country"]);
        assert_eq!(e.entities, vec!["France", "Joe"]);
        assert_eq!(e.value_columns, vec!["singer.country"]);
        assert_eq!(e.select, vec!["name of the singer", "country"]);
    }

    #[test]
    fn tolerates_prose_bullets_case_and_missing_lines() {
        let a = "Sure.\n- #Columns: `singer.name`,\n* #VALUES: none\nThat is all.";
        let e = parse(a);
        assert_eq!(e.columns, vec!["singer.name"]);
        assert!(e.entities.is_empty() && e.select.is_empty());
        assert_eq!(parse("no format at all"), Extraction::default());
    }

    #[test]
    fn resolves_names_against_the_schema() {
        let s = sample_schema();
        let r = resolve(&s, &["SINGER.Name".into(), "\"Order Items\".\"select\"".into(), "singer_id".into(), "nope".into()]);
        assert_eq!(r, vec![(0, 1), (1, 1), (0, 0), (1, 0)]);
    }

    #[test]
    fn a_schema_in_the_name_picks_that_schema_s_table() {
        // singer in two schemas: music (index 1) and pop (index 4).
        let s = crate::schema::tests::two_schemas();
        assert_eq!(resolve(&s, &["pop.singer.name".into()]), vec![(4, 1)]);
        assert_eq!(resolve(&s, &["\"music\".singer.name".into()]), vec![(1, 1)]);
        assert_eq!(resolve(&s, &["singer.name".into()]), vec![(1, 1), (4, 1)]);
        // A schema that holds no such table: read as the table's name alone.
        assert_eq!(resolve(&s, &["jazz.singer.name".into()]), vec![(1, 1), (4, 1)]);
        // The other names settle which schema: concert is only music's.
        assert_eq!(resolve(&s, &["singer.name".into(), "concert.year".into()]), vec![(1, 1), (0, 3)]);
        // A bare column: every table of that schema that has it.
        assert_eq!(resolve(&s, &["name".into(), "concert.year".into()]), vec![(1, 1), (3, 1), (0, 3)]);
    }

    #[test]
    fn prompt_has_schema_question_and_hint() {
        let m = messages("# t (\n# )", "", "How many?", Some("hint"));
        assert_eq!(m[0].content, crate::prompt::system());
        assert!(m[1].content.contains("list what a query answering it needs"));
        assert!(m[1].content.ends_with("### Question: How many?\n### Note: hint\n"));
    }
}
