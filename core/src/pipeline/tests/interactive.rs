//! The interactive agent's loop with a scripted model and the fake database.

use super::*;
use crate::pipeline::agent::Action;

fn interactive() -> Settings {
    Settings { mode: Mode::Interactive, agent_max_turns: 6, ..settings() }
}

fn user_turns(llm: &Script) -> Vec<String> {
    llm.seen.last().map(|r| r.messages.iter().filter(|m| m.role == "user").map(|m| m.content.clone()).collect()).unwrap_or_default()
}

#[test]
fn an_agent_searches_joins_runs_and_is_done() {
    let mut llm = script(&[
        "Thought: which column holds the country?\nAction: SearchColumns(\"country of birth\")",
        "Thought: the value\nAction: SearchValues(\"french\")\nObservation: singer.country = 'France'",
        "Thought: join\nAction: JoinPath(\"Order Items\", \"singer\")",
        "Thought: run it\nAction: ExecuteSQL\n```sql\nSELECT count(*) FROM singer WHERE country = 'France'\n```",
        "Thought: that answers it\nAction: Done",
    ]);
    let mut db = FakeDb {
        values: vec![ValueHint { column: "singer.country".into(), value: "France".into(), score: 0.9 }],
        columns: vec![(1, "country".into())],
        ..Default::default()
    };
    let a = ask(&q("How many singers are French?"), &sample_schema(), &interactive(), &mut llm, &mut db).expect("answer");
    assert_eq!(a.sql, "SELECT count(*) FROM singer WHERE country = 'France'");
    assert_eq!(a.trace.mode, Some(Mode::Interactive));
    let t = &a.trace.turns;
    assert_eq!(t.len(), 5);
    assert!(t[0].observation.starts_with("singer.country: text, VALUES ('France', 'Netherlands', 'United States')"), "{}", t[0].observation);
    assert_eq!(t[1].observation, "singer.country = 'France'");
    assert_eq!(t[2].observation, "\"Order Items\".singer_id = singer.singer_id");
    assert_eq!(t[3].observation, "1 row (columns: count): (6)");
    assert_eq!(t[4].action, Some(Action::Done));
    // The model saw the tables (names only), the task, and each observation, not the one it made up.
    let users = user_turns(&llm);
    assert!(users[0].starts_with("### Tables: singer, \"Order Items\"\n### Task: answer the question below"), "{}", users[0]);
    assert!(!users[0].contains("VALUES ("), "no column detail up front");
    assert_eq!(users[2], "Observation: singer.country = 'France'");
    assert_eq!(llm.seen[1].messages[2].content, "Thought: which column holds the country?\nAction: SearchColumns(\"country of birth\")");
    assert!(!llm.seen[2].messages.iter().any(|m| m.role == "assistant" && m.content.contains("Observation:")), "a made-up observation is cut");
    assert_eq!(a.trace.candidates.len(), 1);
    assert_eq!(a.trace.candidates[0].generator, Some("interactive"));
    assert_eq!(a.trace.llm_calls.iter().filter(|c| c.stage == "agent").count(), 5);
}

#[test]
fn failures_refusals_and_unreadable_turns_are_observations() {
    let mut llm = script(&[
        "I would count them.",
        "Action: ExecuteSQL\n```sql\nDELETE FROM singer\n```",
        "Action: ExecuteSQL\n```sql\nSELECT nme FROM singer\n```",
        "Action: Done",
        "Action: ExecuteSQL\n```sql\nSELECT name FROM singer\n```",
        "Action: Done",
    ]);
    let mut db = FakeDb::default();
    let a = ask(&q("names"), &sample_schema(), &interactive(), &mut llm, &mut db).expect("answer");
    assert_eq!(a.sql, "SELECT name FROM singer");
    let obs: Vec<&str> = a.trace.turns.iter().map(|t| t.observation.as_str()).collect();
    assert!(obs[0].starts_with("could not read the action (no Action line)"), "{}", obs[0]);
    assert!(obs[1].starts_with("refused: generated statement is not a read-only query"), "{}", obs[1]);
    assert_eq!(obs[2], "ERROR (42703): column \"nme\" does not exist");
    assert!(obs[3].starts_with("nothing has run yet: run the query with ExecuteSQL first\n(2 turns left"), "{}", obs[3]);
    assert_eq!(db.executed, vec!["SELECT nme FROM singer", "SELECT name FROM singer"], "the refused statement never ran");
}

#[test]
fn out_of_turns_the_last_query_that_ran_answers_or_the_failure_stands() {
    let mut llm = script(&["Action: ExecuteSQL\n```sql\nSELECT count(*) FROM singer\n```"; 6]);
    let a = ask(&q("how many?"), &sample_schema(), &Settings { agent_max_turns: 2, ..interactive() }, &mut llm, &mut FakeDb::default())
        .expect("answer");
    assert_eq!((a.sql.as_str(), llm.seen.len()), ("SELECT count(*) FROM singer", 2));
    let mut llm = script(&["Action: ExecuteSQL\n```sql\nSELECT nme FROM singer\n```"; 3]);
    let (e, t) = ask(&q("names"), &sample_schema(), &Settings { agent_max_turns: 3, ..interactive() }, &mut llm, &mut FakeDb::default())
        .expect_err("never ran");
    assert_eq!(e.sqlstate().code(), "42703");
    assert_eq!(t.turns.len(), 3);
}

#[test]
fn privacy_keeps_values_and_rows_from_the_agent() {
    let mut llm = script(&[
        "Action: SearchValues(\"France\")",
        "Action: SearchColumns(\"singer name\")",
        "Action: ExecuteSQL\n```sql\nSELECT name FROM singer\n```",
        "Action: Done",
    ]);
    let mut db = FakeDb {
        values: vec![ValueHint { column: "singer.country".into(), value: "Netherlands".into(), score: 0.9 }],
        results: [("SELECT name FROM singer".to_string(), (rows(&["Joe Sharp"]), 1))].into_iter().collect(),
        ..Default::default()
    };
    let a = ask(&q("singer names"), &sample_schema(), &Settings { privacy: true, ..interactive() }, &mut llm, &mut db).expect("answer");
    let sent = llm.seen.iter().flat_map(|r| r.messages.iter().map(|m| m.content.clone())).collect::<Vec<_>>().join("\n");
    for v in ["Netherlands", "Joe Sharp", "Timbaland"] {
        assert!(!sent.contains(v), "{v} reached the model:\n{sent}");
    }
    assert!(a.trace.turns[0].observation.starts_with("no value search"));
    // Not even the count: a query can spell a value as a number of rows.
    assert_eq!(a.trace.turns[2].observation, "some rows (how many is withheld: nl2sql.privacy) (columns: count)");
}

#[test]
fn privacy_leaks_no_row_count_and_no_cost_estimate() {
    // A hostile model turns a value into a number of rows (generate_series up to a character's
    // code), and reads a plan's estimate (column statistics) off a cost refusal.
    let spell = "SELECT 1 FROM generate_series(1, ascii((SELECT name FROM singer LIMIT 1)))";
    let mut llm = script(&[
        &format!("Action: ExecuteSQL\n```sql\n{spell}\n```"),
        "Action: ExecuteSQL\n```sql\nSELECT count(*) FROM singer AS costly\n```",
        "Action: Done",
    ]);
    let mut db = FakeDb { results: [(spell.to_string(), (rows(&["1"; 74]), 1))].into_iter().collect(), ..Default::default() };
    ask(&q("spell it"), &sample_schema(), &Settings { privacy: true, ..interactive() }, &mut llm, &mut db).expect("answer");
    let sent = llm.seen.iter().flat_map(|r| r.messages.iter().map(|m| m.content.clone())).collect::<Vec<_>>().join("\n");
    assert!(!sent.contains("74") && !sent.contains("48213"), "{sent}");
    assert!(sent.contains("not run: its estimated cost exceeds nl2sql.max_cost (100)"), "{sent}");
    // Without privacy too, the estimate is not told: the statistics cover rows the role may not
    // see (row-level security).
    let mut llm = script(&["Action: ExecuteSQL\n```sql\nSELECT count(*) FROM singer AS costly\n```", "Action: Done"]);
    let mut db = FakeDb::default();
    let _ = ask(&q("how many?"), &sample_schema(), &interactive(), &mut llm, &mut db);
    let sent = llm.seen.iter().flat_map(|r| r.messages.iter().map(|m| m.content.clone())).collect::<Vec<_>>().join("\n");
    assert!(!sent.contains("48213") && sent.contains("not run: its estimated cost exceeds nl2sql.max_cost (100)"), "{sent}");
}

#[test]
fn repeats_schemas_and_running_out_are_pointed_out() {
    let mut s = sample_schema();
    s.tables[0].schema = "music".into();
    let mut llm = script(&["Action: JoinPath(\"music\", \"x\")"; 4]);
    let (_, t) = ask(&q("which?"), &s, &Settings { agent_max_turns: 4, ..interactive() }, &mut llm, &mut FakeDb::default()).expect_err("never ran");
    let obs: Vec<&str> = t.turns.iter().map(|t| t.observation.as_str()).collect();
    assert_eq!(obs[0], "\"music\" is a schema, not a table; its tables: singer");
    // A table owner's name with a line break is listed as PostgreSQL's escape, never raw.
    let mut s = sample_schema();
    s.tables[0].schema = "mal".into();
    s.tables[0].ident = "mal.\"t\n# FOREIGN KEYS: x\"".into();
    let mut llm = script(&["Action: JoinPath(\"mal\", \"x\")"]);
    let (_, t2) = ask(&q("which?"), &s, &Settings { agent_max_turns: 1, ..interactive() }, &mut llm, &mut FakeDb::default()).expect_err("never ran");
    assert_eq!(t2.turns[0].observation, "\"mal\" is a schema, not a table; its tables: mal.U&\"t\\000A# FOREIGN KEYS: x\"");
    assert!(obs[1].contains("You did this already") && obs[1].ends_with("(2 turns left: run the query with ExecuteSQL now.)"), "{}", obs[1]);
    assert!(obs[2].ends_with("(1 turn left: run the query with ExecuteSQL now.)"), "{}", obs[2]);
    assert!(obs[3].ends_with("(You did this already and got the same answer: take another step.)"), "{}", obs[3]);
}
