//! Interactive-T2S (nl2sql.mode = interactive): the model works with the database one action
//! a turn — SearchColumns, SearchValues, JoinPath, ExecuteSQL, Done — shown only the table
//! names, until it is done or nl2sql.agent_max_turns runs out. Every query it runs goes through
//! the same guard, alignment and sandbox as a candidate; the last query that ran is the answer.

use super::failure::AskError;
use super::stages::{column_at, evaluate, strangers_left_out};
use super::trace::{cand_sql, estimate, ms, record, traced, CandidateTrace, Trace};
use super::{Database, Rejected, Run, Settings, COLUMN_MATCH_MIN_SCORE};
use crate::align::Context;
use crate::error::{Diagnostic, Report};
use crate::model::llm::{ChatRequest, Message};
use crate::prompt::refine::Failure;
use crate::render;
use crate::safety::guard::GuardError;
use crate::schema::Schema;
use crate::Execution;
use std::time::Instant;
use crate::pipeline::agent::{self, Action, Turn};

/// Completion tokens for one turn (a thought and an action, or a query).
const TURN_MAX_TOKENS: u32 = 512;

pub(super) fn interactive(run: Run<'_>) -> Result<(String, Execution), AskError> {
    let Run { q, schema, settings, llm, db, trace, secret } = run;
    let (tables, omitted) = agent::table_list(schema, settings.schema_max_tokens);
    trace.schema_tokens = crate::schema::estimate_tokens(&tables);
    trace.tables_shown = schema.tables.len() - omitted;
    trace.tables_omitted = omitted;
    let mut messages =
        crate::prompt::messages_in(crate::prompt::Layout::TableNames, &tables, agent::TASK, &q.follow_up(), &q.text, q.note().as_deref());
    trace.schema = tables;
    let mut answer: Option<(String, Execution)> = None;
    let mut last_failure: Option<AskError> = None;
    for turn in 0..settings.agent_max_turns.max(1) {
        let prompt = estimate(&messages);
        let (fits, max_tokens) = trace.tokens.plan(prompt, 1, TURN_MAX_TOKENS.min(settings.max_tokens));
        if fits == 0 {
            trace.tokens.cut.push(format!("turns from {}", turn + 1));
            if turn == 0 {
                return Err(trace.tokens.over_budget(prompt));
            }
            break;
        }
        let waited = Instant::now();
        let reply = llm.chat(ChatRequest { messages: messages.clone(), temperature: 0.0, max_tokens, grammar: None, reask: false });
        trace.round_trips += 1;
        trace.llm_wait_ms += ms(waited.elapsed());
        record(trace, "agent", &messages, &reply, secret.as_deref());
        let completion = reply.map_err(|e| AskError::Llm(Report::from_diagnostic(&e).redact(secret.as_deref())))?;
        let own = agent::own_part(&completion.content).trim().to_string();
        let (thought, action) = agent::parse(&own);
        if action == Ok(Action::Done) && answer.is_some() {
            trace.turns.push(Turn { thought, action: action.ok(), observation: String::new() });
            break;
        }
        let observation = match &action {
            Err(why) => format!("could not read the action ({why}): write \"Thought: ...\" then \"Action: \" and one tool"),
            Ok(Action::SearchColumns(what)) => search_columns(schema, db, what),
            Ok(Action::SearchValues(what)) if settings.privacy => format!("no value search for {what:?}: nl2sql.privacy keeps stored values in the database"),
            Ok(Action::SearchValues(what)) => search_values(schema, db, what),
            Ok(Action::JoinPath(a, b)) => join_path(schema, a, b),
            Ok(Action::ExecuteSql(sql)) => {
                let (observation, ran) = execute(sql, turn as u32, settings, db, schema, &messages, trace);
                match ran {
                    Ok(done) => answer = Some(done),
                    Err(failed) => last_failure = Some(failed),
                }
                observation
            }
            Ok(Action::Done) => "nothing has run yet: run the query with ExecuteSQL first".into(),
        };
        // A small model repeats itself: say so, and say when the turns are running out.
        let repeated = trace.turns.iter().any(|t| t.action.as_ref() == action.as_ref().ok() && t.observation.starts_with(&observation));
        let left = settings.agent_max_turns.max(1) - turn - 1;
        let mut observation = observation;
        if repeated {
            observation.push_str("\n(You did this already and got the same answer: take another step.)");
        }
        if answer.is_none() && left > 0 && left <= 2 {
            observation.push_str(&format!("\n({left} turn{} left: run the query with ExecuteSQL now.)", if left == 1 { "" } else { "s" }));
        }
        let observation = agent::clip(observation);
        trace.turns.push(Turn { thought, action: action.ok(), observation: observation.clone() });
        messages.push(Message::assistant(crate::prompt::refine::prefix(&own, crate::model::answer::MAX_SQL_BYTES)));
        messages.push(Message::user(format!("Observation: {observation}")));
    }
    match (answer, last_failure) {
        (Some(done), _) => Ok(done),
        (None, Some(failed)) => Err(failed),
        (None, None) => Err(AskError::Failed { sql: None, failure: Failure::Syntax(GuardError::NoStatement) }),
    }
}

/// Columns one SearchColumns turn shows at most.
const AGENT_COLUMNS: usize = 10;

/// SearchColumns: the database's column search, else columns sharing a word with the query.
fn search_columns(schema: &Schema, db: &mut dyn Database, what: &str) -> String {
    let mut found: Vec<(usize, usize)> = Vec::new();
    let mut close = db.similar_columns(what, AGENT_COLUMNS, &schema.strangers());
    // The close ones; else the closest few, however far (a search by meaning scores lower).
    if close.iter().any(|c| c.2 >= COLUMN_MATCH_MIN_SCORE) {
        close.retain(|c| c.2 >= COLUMN_MATCH_MIN_SCORE);
    } else {
        close.truncate(AGENT_COLUMNS / 2);
    }
    found.extend(close.iter().filter_map(|(oid, column, _)| column_at(schema, *oid, column)));
    if found.is_empty() {
        found = agent::matching_columns(schema, what, 5);
    }
    if found.is_empty() {
        return format!("no column close to {what:?}");
    }
    found.iter().map(|&(t, c)| agent::describe_column(schema, t, c)).collect::<Vec<_>>().join("; ")
}

/// SearchValues: stored values close to the words, from the value index.
fn search_values(schema: &Schema, db: &mut dyn Database, what: &str) -> String {
    let found = strangers_left_out(schema, db.similar_values(what, &[], &schema.strangers()));
    if found.is_empty() {
        return format!("no stored value close to {what:?}");
    }
    found.iter().take(5).map(|v| format!("{} = {}", render::ident(&v.column), render::literal(&v.value))).collect::<Vec<_>>().join("; ")
}

/// JoinPath: the foreign keys joining two tables.
fn join_path(schema: &Schema, a: &str, b: &str) -> String {
    let (Some(x), Some(y)) = (agent::find_table(schema, a), agent::find_table(schema, b)) else {
        let missing = if agent::find_table(schema, a).is_none() { a } else { b };
        // A schema's name: its tables.
        let name = missing.trim().trim_matches('"');
        // Each name rendered (a table owner's line break or invisible character escaped).
        let in_schema: Vec<String> = schema.tables.iter().filter(|t| t.schema.eq_ignore_ascii_case(name)).map(|t| render::ident(&t.ident)).take(20).collect();
        if !in_schema.is_empty() {
            return format!("{name:?} is a schema, not a table; its tables: {}", in_schema.join(", "));
        }
        return format!("no table {missing:?}: use the names listed under Tables");
    };
    match schema.join_path(x, y) {
        Some(steps) if steps.is_empty() => format!("{} is one table: no join needed", render::ident(&schema.tables[x].ident)),
        Some(steps) => steps.join(" AND "),
        None => format!("no foreign keys join {} and {}", render::ident(&schema.tables[x].ident), render::ident(&schema.tables[y].ident)),
    }
}

/// ExecuteSQL: the query through the guard, the alignments and the sandbox, as a candidate of
/// its turn; the observation, and the answer or the failure.
fn execute(
    sql: &str,
    turn: u32,
    settings: &Settings,
    db: &mut dyn Database,
    schema: &Schema,
    messages: &[Message],
    trace: &mut Trace,
) -> (String, Result<(String, Execution), AskError>) {
    let content = format!("```sql\n{sql}\n```");
    let mut cand = CandidateTrace { round: turn, generator: Some("interactive"), raw: traced(sql), ..Default::default() };
    let (written, outcome) = evaluate(&content, settings, db, schema, Context::default(), &mut cand);
    cand.sql = written.clone();
    let result = match outcome {
        Ok(execution) => {
            cand.ran(&execution);
            let observation = rows_observation(&execution, settings.privacy);
            let chosen = cand_sql(Some(&cand)).unwrap_or_default();
            (observation, Ok((chosen, execution)))
        }
        Err(Rejected::Refused(error)) => {
            cand.error = Some(error.message());
            let observation = format!("refused: {} (nl2sql runs one read-only SELECT)", error.message());
            (observation, Err(AskError::Refused { sql: written.unwrap_or_default(), error }))
        }
        Err(Rejected::Failed(failure)) => {
            cand.error = Some(failure.summary());
            cand.error_kind = Some(failure.kind());
            let observation = match &failure {
                // Never the estimate: it comes from the column statistics, which cover rows the role
                // may not see (row-level security, a view's filter).
                Failure::Cost { max, .. } => format!("not run: its estimated cost exceeds nl2sql.max_cost ({max:.0})"),
                _ => crate::prompt::refine::error_text(&failure, sql, &crate::prompt::refine::seen(messages), settings.privacy).unwrap_or_else(|| failure.summary()),
            };
            (observation, Err(AskError::Failed { sql: written, failure }))
        }
    };
    trace.candidates.push(cand);
    result
}

/// A result as an observation: how many rows, the first few (none under nl2sql.privacy).
fn rows_observation(e: &Execution, private: bool) -> String {
    let n = e.rows.len();
    // A column's name is its table owner's, a value whoever wrote the row's: every invisible or
    // line-breaking character shown escaped.
    let columns = e.columns.iter().map(|c| render::visible(&c.name, false)).collect::<Vec<_>>().join(", ");
    // Under privacy not even the count: a query can turn a value into a number of rows.
    if private {
        let some = if n == 0 { "no rows" } else { "some rows (how many is withheld: nl2sql.privacy)" };
        return format!("{some} (columns: {columns})");
    }
    let count = if e.truncated { format!("more than {n} rows") } else if n == 1 { "1 row".into() } else { format!("{n} rows") };
    if n == 0 {
        return format!("{count} (columns: {columns})");
    }
    let shown: Vec<String> = e
        .rows
        .iter()
        .take(agent::SHOWN_ROWS)
        .map(|r| format!("({})", r.iter().map(|v| v.as_deref().map_or("NULL".into(), |v| render::visible(v, false))).collect::<Vec<_>>().join(", ")))
        .collect();
    format!("{count} (columns: {columns}): {}", shown.join(" "))
}
