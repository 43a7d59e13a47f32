//! Interactive-T2S: the model as an agent that looks up columns and values, asks for join
//! paths and runs queries, one action a turn, until it says it is done. This file reads the
//! model's turns and writes what the tools answer; pipeline/interactive.rs runs the loop.
//! A turn is hostile input like every answer: read once, linearly, with interrupts checked.

use crate::interrupt;
use crate::render::ident;
use crate::schema::{self, Schema};
use serde::Serialize;

/// The task and exemplars of the agent's prompt.
pub const TASK: &str = include_str!("../prompt/text/agent_task.txt");
/// Longest observation shown to the model, in bytes.
pub const MAX_OBSERVATION_BYTES: usize = 1_500;
/// Rows of a query's result an observation shows.
pub const SHOWN_ROWS: usize = 5;

/// One action of a turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "tool", content = "arguments")]
pub enum Action {
    SearchColumns(String),
    SearchValues(String),
    JoinPath(String, String),
    ExecuteSql(String),
    Done,
}

/// One turn as the trace keeps it.
#[derive(Debug, Clone, Serialize)]
pub struct Turn {
    pub thought: String,
    /// The action read from the turn (None: it could not be read).
    pub action: Option<Action>,
    pub observation: String,
}

/// The model's turn up to the end of its action: anything after it (an observation the model
/// made up, further turns) is cut.
pub fn own_part(reply: &str) -> &str {
    let mut seen_action = false;
    let mut offset = 0;
    for (i, line) in reply.split_inclusive('\n').enumerate() {
        interrupt::every(i, 1024);
        let t = line.trim_start();
        if seen_action && (starts_with_ci(t, "Observation:") || starts_with_ci(t, "Thought:") || starts_with_ci(t, "Action:")) {
            return &reply[..offset];
        }
        if starts_with_ci(t, "Action:") {
            seen_action = true;
        }
        offset += line.len();
    }
    reply
}

fn starts_with_ci(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.is_char_boundary(prefix.len()) && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// Reads a turn: its thought and its action, or why the action could not be read.
pub fn parse(reply: &str) -> (String, Result<Action, String>) {
    let reply = own_part(reply);
    let mut thought = String::new();
    let mut action_at = None;
    let mut offset = 0;
    for (i, line) in reply.split_inclusive('\n').enumerate() {
        interrupt::every(i, 1024);
        let t = line.trim_start();
        if starts_with_ci(t, "Action:") {
            action_at = Some(offset + (line.len() - t.len()) + "Action:".len());
            break;
        }
        let t = if starts_with_ci(t, "Thought:") { &t["Thought:".len()..] } else { t };
        thought.push_str(t.trim());
        thought.push(' ');
        offset += line.len();
    }
    let thought = thought.trim().to_string();
    let Some(at) = action_at else {
        // A query without an Action line is a query to run.
        return match crate::model::answer::extract_sql(reply) {
            Some(sql) if reply.contains("```") => (thought, Ok(Action::ExecuteSql(sql))),
            _ => (thought, Err("no Action line".into())),
        };
    };
    let rest = &reply[at..];
    let name_len = rest.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').map(char::len_utf8).sum::<usize>();
    let lead = rest.len() - rest.trim_start().len();
    let name = rest[lead..lead + name_len].to_ascii_lowercase();
    let after = &rest[lead + name_len..];
    let args = arguments(after);
    let one = |what: &str| args.first().cloned().ok_or_else(|| format!("{what} needs an argument in quotes"));
    let action = match name.as_str() {
        "searchcolumns" | "searchcolumn" => one("SearchColumns").map(Action::SearchColumns),
        "searchvalues" | "searchvalue" => one("SearchValues").map(Action::SearchValues),
        "joinpath" | "findshortestpath" => match args.as_slice() {
            [a, b, ..] => Ok(Action::JoinPath(a.clone(), b.clone())),
            _ => Err("JoinPath needs two tables".into()),
        },
        "executesql" => match crate::model::answer::extract_sql(after).filter(|_| after.contains("```")) {
            Some(sql) => Ok(Action::ExecuteSql(sql)),
            None => args.first().cloned().map(Action::ExecuteSql).ok_or_else(|| "ExecuteSQL needs the query in a ```sql block".into()),
        },
        "done" | "finish" => Ok(Action::Done),
        "" => Err("no tool named after Action:".into()),
        other => Err(format!("unknown tool {other}")),
    };
    (thought, action)
}

/// The quoted (or bare, comma-separated) arguments of `(…)` at the start of `text`; none when
/// no parenthesis opens there. Stops at the closing parenthesis outside quotes.
fn arguments(text: &str) -> Vec<String> {
    let t = text.trim_start();
    let Some(body) = t.strip_prefix('(') else { return Vec::new() };
    let mut args = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut chars = body.chars().enumerate().peekable();
    while let Some((i, c)) = chars.next() {
        interrupt::every(i, 4096);
        match quote {
            Some(q) if c == '\\' => {
                if let Some((_, n)) = chars.next() {
                    current.push(n);
                } else {
                    current.push(q);
                }
            }
            Some(q) if c == q => quote = None,
            Some(_) => current.push(c),
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == ',' || c == ')' => {
                let arg = current.trim();
                // `start="a"`: the name of a keyword argument is not part of it.
                let arg = arg.split_once('=').map_or(arg, |(k, v)| if k.trim().chars().all(|x| x.is_alphanumeric() || x == '_') { v.trim() } else { arg });
                if !arg.is_empty() {
                    args.push(arg.to_string());
                }
                current.clear();
                if c == ')' {
                    break;
                }
            }
            None => current.push(c),
        }
    }
    args
}

/// The tables as the agent's prompt lists them after its "### Tables: " heading: names only,
/// within `max_tokens` with the heading (the first that fit, and how many were left out).
pub fn table_list(schema: &Schema, max_tokens: usize) -> (String, usize) {
    let mut out = String::new();
    // Token units so far, heading included: the estimate of the whole without re-counting it.
    let mut units = schema::token_units("### Tables: ");
    let mut shown = 0;
    for (i, t) in schema.tables.iter().enumerate() {
        interrupt::every(i, 1024);
        let name = crate::render::ident(&t.ident);
        let piece = if shown == 0 { name } else { format!(", {name}") };
        let piece_units = schema::token_units(&piece);
        if (units + piece_units).div_ceil(schema::TOKEN_UNITS) > max_tokens {
            break;
        }
        out.push_str(&piece);
        units += piece_units;
        shown += 1;
    }
    let omitted = schema.tables.len() - shown;
    if omitted > 0 {
        out.push_str(&format!(" (and {omitted} more: SearchColumns finds them)"));
    }
    (out, omitted)
}

/// A table named as the model wrote it (`schema.table`, `table`, `table.column`, any case), as
/// its index in `schema`.
/// A bare name is a table's as written, else one of that name whose owner the caller trusts
/// (never another role's table off the search path, whatever sorts first).
pub fn find_table(schema: &Schema, name: &str) -> Option<usize> {
    let name = name.trim().trim_matches('"');
    let find = |n: &str| {
        let tables = &schema.tables;
        // its identifier exactly; else, in any case, with its schema or by its name alone, a
        // trusted one (another role's `"Sales".orders` is never taken for `sales.orders`)
        tables.iter().position(|t| t.ident == n).or_else(|| {
            tables.iter().position(|t| {
                crate::align::may_stand_for(t)
                    && (t.ident.eq_ignore_ascii_case(n) || format!("{}.{}", t.schema, t.name).eq_ignore_ascii_case(n) || t.name.eq_ignore_ascii_case(n))
            })
        })
    };
    if let Some(i) = find(name) {
        return Some(i);
    }
    // `table.column`: the table part.
    let (table, _) = name.rsplit_once('.')?;
    find(table)
}

/// A column as SearchColumns shows it: `table.column: type` and what the schema prompt would
/// say of its values.
pub fn describe_column(schema: &Schema, table: usize, column: usize) -> String {
    let t = &schema.tables[table];
    let c = &t.columns[column];
    let mut out = format!("{}.{}: {}", ident(&t.ident), ident(&c.ident), ident(&c.data_type));
    if let Some(note) = schema::values_note(c) {
        out.push_str(&note);
    }
    out
}

/// Columns whose name or table name shares a word with `query`, best first (the fallback when
/// the database's column search finds none); none of a stranger's table, whose names are hers.
pub fn matching_columns(schema: &Schema, query: &str, k: usize) -> Vec<(usize, usize)> {
    let words: Vec<String> = crate::text::words(&crate::text::fold(query)).map(str::to_string).collect();
    let mut scored: Vec<(usize, usize, usize)> = Vec::new();
    for (ti, t) in schema.tables.iter().enumerate() {
        interrupt::every(ti, 256);
        if t.is_strangers() {
            continue;
        }
        let table_words: Vec<String> = crate::text::words(&crate::text::fold(&t.name)).map(str::to_string).collect();
        for (ci, c) in t.columns.iter().enumerate() {
            let col = crate::text::fold(&c.name);
            // A column word that repeats its table's name (singer_id in singer) says nothing more.
            let hits = crate::text::words(&col)
                .filter(|w| !table_words.iter().any(|t| same_word(t, w)) && words.iter().any(|q| same_word(q, w)))
                .count()
                * 2
                + table_words.iter().filter(|w| words.iter().any(|q| same_word(q, w))).count();
            if hits > 0 {
                scored.push((hits, ti, ci));
            }
        }
    }
    scored.sort_by(|a, b| b.0.cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    scored.into_iter().take(k).map(|(_, t, c)| (t, c)).collect()
}

/// The same word, or its singular or plural.
fn same_word(a: &str, b: &str) -> bool {
    a == b || crate::retrieval::forms::singular(a).is_some_and(|s| s == b) || crate::retrieval::forms::singular(b).is_some_and(|s| s == a)
}

/// An observation as the model is shown it: at most MAX_OBSERVATION_BYTES.
pub fn clip(text: String) -> String {
    if text.len() <= MAX_OBSERVATION_BYTES {
        return text;
    }
    format!("{} … (cut)", crate::prompt::refine::prefix(&text, MAX_OBSERVATION_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_tool() {
        let (t, a) = parse("Thought: the city first.\nAction: SearchValues(\"Lyon\")\nObservation: made up\nThought: more");
        assert_eq!((t.as_str(), a), ("the city first.", Ok(Action::SearchValues("Lyon".into()))));
        assert_eq!(parse("Action: SearchColumns('product name')").1, Ok(Action::SearchColumns("product name".into())));
        assert_eq!(
            parse("Action: FindShortestPath(start=\"shop.customer\", end=\"shop.product\")").1,
            Ok(Action::JoinPath("shop.customer".into(), "shop.product".into()))
        );
        assert_eq!(parse("Action: JoinPath(singer, concert)").1, Ok(Action::JoinPath("singer".into(), "concert".into())));
        let (_, a) = parse("Thought: run it\nAction: ExecuteSQL\n```sql\nSELECT count(*) FROM singer WHERE name = 'a)b'\n```\nObservation: 1 row");
        assert_eq!(a, Ok(Action::ExecuteSql("SELECT count(*) FROM singer WHERE name = 'a)b'".into())));
        assert_eq!(parse("Action: ExecuteSQL(\"SELECT 'x' FROM t\")").1, Ok(Action::ExecuteSql("SELECT 'x' FROM t".into())));
        assert_eq!(parse("Thought: ok\nAction: Done.").1, Ok(Action::Done));
        // No Action line, but a query: run it.
        assert_eq!(parse("```sql\nSELECT 1\n```").1, Ok(Action::ExecuteSql("SELECT 1".into())));
    }

    #[test]
    fn unreadable_turns_say_why() {
        assert_eq!(parse("I think we should count.").1, Err("no Action line".into()));
        assert_eq!(parse("Action: DropTable(\"x\")").1, Err("unknown tool droptable".into()));
        assert_eq!(parse("Action: JoinPath(\"a\")").1, Err("JoinPath needs two tables".into()));
        assert_eq!(parse("Action: ExecuteSQL").1, Err("ExecuteSQL needs the query in a ```sql block".into()));
        // A huge unterminated argument is read once.
        let big = format!("Action: SearchValues(\"{}", "x".repeat(2_000_000));
        assert!(parse(&big).1.is_err() || matches!(parse(&big).1, Ok(Action::SearchValues(_))));
    }

    #[test]
    fn tables_columns_and_paths() {
        let s = crate::schema::tests::sample_schema();
        assert_eq!(find_table(&s, "SINGER"), Some(0));
        assert_eq!(find_table(&s, "singer.name"), Some(0));
        assert_eq!(find_table(&s, "\"Order Items\""), Some(1));
        assert_eq!(find_table(&s, "nothing"), None);
        assert_eq!(s.join_path(1, 0), Some(vec!["\"Order Items\".singer_id = singer.singer_id".to_string()]));
        assert_eq!(s.join_path(0, 0), Some(vec![]));
        let (list, omitted) = table_list(&s, 1000);
        assert_eq!((list.as_str(), omitted), ("singer, \"Order Items\"", 0));
        assert_eq!(table_list(&s, 7).1, 1);
        assert!(describe_column(&s, 0, 2).starts_with("singer.country: text"), "{}", describe_column(&s, 0, 2));
        assert_eq!(matching_columns(&s, "country of the singers", 3)[0], (0, 2));
    }
}

#[cfg(test)]
mod trust_tests {
    use super::find_table;
    use crate::schema::Schema;

    #[test]
    fn a_bare_name_is_never_an_untrusted_owners_table() {
        let t = crate::schema::tests::table_json;
        let mut hers = t(1, "customer", &["id"], &["id"]);
        hers["schema"] = "aaa".into();
        hers["ident"] = "aaa.customer".into();
        let ours = t(2, "customer", &["id"], &["id"]);
        let mut ledger = t(3, "ledger", &["id"], &["id"]);
        ledger["schema"] = "aaa".into();
        ledger["ident"] = "aaa.ledger".into();
        let s: Schema = serde_json::from_value(serde_json::json!({"tables": [hers, ours, ledger.clone()], "foreign_keys": []})).unwrap();
        assert_eq!(find_table(&s, "customer"), Some(1));
        assert_eq!(find_table(&s, "customer.id"), Some(1));
        assert_eq!(find_table(&s, "aaa.customer"), Some(0));
        assert_eq!(find_table(&s, "ledger"), None);
        assert_eq!(find_table(&s, "aaa.ledger"), Some(2));
        // another role's "Sales".orders, listed first, is not sales.orders in another case
        let mut planted = t(4, "orders", &["id"], &["id"]);
        planted["schema"] = "Sales".into();
        planted["ident"] = "\"Sales\".orders".into();
        let mut real = t(5, "orders", &["id"], &["id"]);
        real["schema"] = "sales".into();
        real["ident"] = "sales.orders".into();
        real["owner_trusted"] = true.into();
        let s2: Schema = serde_json::from_value(serde_json::json!({"tables": [planted, real], "foreign_keys": []})).unwrap();
        assert_eq!(find_table(&s2, "sales.orders"), Some(1));
        assert_eq!(find_table(&s2, "SALES.orders"), Some(1));
        assert_eq!(find_table(&s2, "orders"), Some(1));
        assert_eq!(find_table(&s2, "Sales.orders"), Some(1));
        // trusted: found by its name alone
        ledger["owner_trusted"] = true.into();
        let s: Schema = serde_json::from_value(serde_json::json!({"tables": [ledger], "foreign_keys": []})).unwrap();
        assert_eq!(find_table(&s, "ledger"), Some(0));
    }
}
