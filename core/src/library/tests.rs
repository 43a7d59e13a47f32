use super::*;
use crate::model::http::{ErrorKind, Service};
use crate::model::llm::Completion;
use crate::schema::tests::sample_schema;
use std::collections::HashMap;
use std::time::Duration;

/// Answers each request with the next scripted text (or error).
struct Script(Vec<Result<String, LlmError>>);

impl Llm for Script {
    fn chat(&mut self, _req: ChatRequest) -> Result<Completion, LlmError> {
        let content = if self.0.is_empty() { Ok(String::new()) } else { self.0.remove(0) }?;
        Ok(Completion {
            content,
            finish_reason: Some("stop".into()),
            prompt_tokens: Some(100),
            completion_tokens: Some(20),
            cached_tokens: None,
            choices: 1,
            same_request: false,
            latency: Duration::from_millis(1),
            attempts: 1,
            confidence: None,
            grammar: None,
        })
    }
}

/// A database whose queries return what `results` says (by SQL); a query not there fails.
#[derive(Default)]
struct Db {
    results: HashMap<String, (Vec<Row>, Vec<u32>)>,
    refuse: HashSet<String>,
    kept: Vec<(String, String, Vec<u32>)>,
    failed: Vec<String>,
}

impl Library for Db {
    fn run(&mut self, sql: &str) -> Option<(Vec<Row>, Vec<u32>)> {
        self.results.get(sql).cloned()
    }
    fn keep(&mut self, question: &str, sql: &str, reads: Vec<u32>) -> bool {
        if self.refuse.contains(sql) {
            return false;
        }
        self.kept.push((question.into(), sql.into(), reads));
        true
    }
    fn failed(&mut self, scope: &str, _error: &LlmError) {
        self.failed.push(scope.into());
    }
}

fn rows(v: &[&str]) -> Vec<Row> {
    v.iter().map(|s| vec![Some(s.to_string())]).collect()
}

fn answer(pairs: &[(&str, &str)]) -> String {
    pairs.iter().map(|(q, s)| format!("Question: {q}\n```sql\n{s}\n```\n")).collect()
}

fn job() -> Job {
    Job { per_table: 3, temperature: 0.7, schema_max_tokens: 3000 }
}

fn timeout() -> LlmError {
    LlmError { service: Service::Llm, kind: ErrorKind::Timeout { url: "u".into(), ms: 1 } }
}

#[test]
fn scopes_are_the_tables_then_each_pair_a_key_joins() {
    let s = sample_schema();
    assert_eq!(scopes(&s), vec![vec![0], vec![1], vec![0, 1]]);
    let pair = scope_schema(&s, &[0, 1]);
    assert_eq!(pair.foreign_keys.len(), 1);
    assert!(scope_schema(&s, &[0]).foreign_keys.is_empty());
}

#[test]
fn keeps_new_pairs_that_run_and_return_new_rows() {
    let mut db = Db::default();
    db.results.insert("SELECT count(*) FROM singer".into(), (rows(&["6"]), vec![1]));
    // The same rows over the same relation: nothing new.
    db.results.insert("SELECT count(singer_id) FROM singer".into(), (rows(&["6"]), vec![1]));
    // No rows, and no table read: no example.
    db.results.insert("SELECT name FROM singer WHERE false".into(), (vec![], vec![1]));
    db.results.insert("SELECT 1".into(), (rows(&["1"]), vec![]));
    let first = answer(&[
        ("How many singers?", "SELECT count(*) FROM singer"),
        ("How many singers again?", "SELECT count(singer_id) FROM singer"),
        ("Which singers, none?", "SELECT name FROM singer WHERE false"),
        ("One?", "SELECT 1"),
        ("Broken?", "SELECT nope FROM singer"),
    ]);
    let mut llm = Script(vec![Ok(first), Ok(String::new()), Ok(String::new())]);
    let out = generate(&job(), &sample_schema(), HashSet::new(), &mut llm, &mut db).expect("generated");
    assert_eq!(out.len(), 3);
    // Five written; at most 2 x per_table read; four ran (the broken one did not).
    assert_eq!((out[0].written, out[0].executed, out[0].kept), (5, 4, 1));
    assert_eq!(out[0].prompt_tokens, 100);
    assert_eq!(db.kept.len(), 1);
    assert_eq!(db.kept[0].0, "How many singers?");
    // The scope's table is among the relations the pair records.
    assert_eq!(db.kept[0].2, vec![1]);
}

#[test]
fn skips_sql_the_library_holds_and_what_the_host_refuses() {
    let mut db = Db::default();
    db.results.insert("SELECT count(*) FROM singer".into(), (rows(&["6"]), vec![1]));
    db.results.insert("SELECT max(singer_id) FROM singer".into(), (rows(&["6", "x"]), vec![1]));
    db.refuse.insert("SELECT max(singer_id) FROM singer".into());
    let held: HashSet<String> = [normal_form("select COUNT(*) from singer")].into_iter().collect();
    let a = answer(&[("How many?", "SELECT count(*) FROM singer"), ("Largest id?", "SELECT max(singer_id) FROM singer")]);
    let mut llm = Script(vec![Ok(a)]);
    let out = generate(&job(), &sample_schema(), held, &mut llm, &mut db).expect("generated");
    // The held one is not even run; the refused one ran but is not counted as kept.
    assert_eq!((out[0].written, out[0].executed, out[0].kept), (2, 1, 0));
    assert!(db.kept.is_empty());
}

#[test]
fn a_pair_kept_once_is_not_kept_again_in_another_scope() {
    let mut db = Db::default();
    db.results.insert("SELECT count(*) FROM singer".into(), (rows(&["6"]), vec![1]));
    db.results.insert("SELECT count(*) FROM \"Order Items\"".into(), (rows(&["2"]), vec![2]));
    let a = answer(&[("How many singers?", "SELECT count(*) FROM singer")]);
    let b = answer(&[("How many items?", "SELECT count(*) FROM \"Order Items\""), ("Singers?", "select count(*) from singer")]);
    let mut llm = Script(vec![Ok(a), Ok(b), Ok(String::new())]);
    let out = generate(&job(), &sample_schema(), HashSet::new(), &mut llm, &mut db).expect("generated");
    assert_eq!(out.iter().map(|r| r.kept).collect::<Vec<_>>(), vec![1, 1, 0]);
    // The second scope is "Order Items" alone: its table is what the pair records.
    assert_eq!(db.kept[1].2, vec![2]);
}

#[test]
fn a_failed_scope_is_reported_and_the_job_goes_on() {
    let mut db = Db::default();
    db.results.insert("SELECT count(*) FROM singer".into(), (rows(&["6"]), vec![1]));
    let mut llm = Script(vec![Err(timeout()), Ok(answer(&[("How many?", "SELECT count(*) FROM singer")])), Err(timeout())]);
    let out = generate(&job(), &sample_schema(), HashSet::new(), &mut llm, &mut db).expect("some scope answered");
    assert_eq!(db.failed, vec!["singer".to_string(), "singer + \"Order Items\"".to_string()]);
    assert_eq!(out.iter().map(|r| r.kept).sum::<i32>(), 1);
}

#[test]
fn every_scope_failing_is_an_error() {
    let mut db = Db::default();
    let mut llm = Script(vec![Err(timeout()), Err(timeout()), Err(timeout())]);
    assert!(generate(&job(), &sample_schema(), HashSet::new(), &mut llm, &mut db).is_err());
    assert_eq!(db.failed.len(), 3);
}
