use super::*;
use crate::error::{Diagnostic, Report, SqlState};
use crate::prompt::refine::FailureKind;
use std::time::Duration;
use crate::align::Rules;
use crate::model::llm::Message;
use crate::schema::tests::{sample_schema, star_schema};
use crate::ColumnInfo;
use std::collections::HashMap;

/// A scripted model: answers in order, records what it was asked.
struct Script {
    answers: Vec<Result<String, LlmError>>,
    seen: Vec<ChatRequest>,
}

impl Llm for Script {
    fn chat(&mut self, req: ChatRequest) -> Result<Completion, LlmError> {
        self.seen.push(req);
        let a = if self.answers.is_empty() { Ok("no more answers scripted".to_string()) } else { self.answers.remove(0) }?;
        Ok(Completion {
            content: a,
            finish_reason: Some("stop".into()),
            prompt_tokens: Some(100),
            completion_tokens: Some(10),
            cached_tokens: None,
            choices: 1,
            same_request: false,
            latency: Duration::from_millis(5),
            attempts: 1,
            confidence: None,
            grammar: None,
        })
    }
    fn secret(&self) -> Option<&str> {
        Some("sk-secret-key")
    }
}

impl Script {
    fn prompts(&self) -> Vec<&Vec<Message>> {
        self.seen.iter().map(|r| &r.messages).collect()
    }
}

fn down() -> LlmError {
    crate::model::http::EndpointError {
        service: crate::model::http::Service::Llm,
        kind: crate::model::http::ErrorKind::Auth { url: "u".into(), status: 401, body: "key sk-secret-key".into() },
    }
}

/// A database where queries mentioning "nme" or "nickname" fail, "slow" times out, and chosen
/// queries return chosen rows (by default one row, "6").
#[derive(Default)]
struct FakeDb {
    executed: Vec<String>,
    volatile: Vec<String>,
    values: Vec<ValueHint>,
    columns: Vec<(u32, String)>,
    /// Exact SQL -> rows and elapsed milliseconds.
    results: HashMap<String, (Vec<Vec<Option<String>>>, u64)>,
    /// Literal (lowercase) -> stored spelling.
    stored: HashMap<String, String>,
    lookups: Vec<String>,
    skipped: Vec<String>,
    examples: Vec<Example>,
    /// Masked questions examples were searched by.
    masked: Vec<String>,
    /// Tables the pipeline asked to sample.
    sampled: Vec<usize>,
    instructions: Vec<crate::retrieval::instructions::Instruction>,
    /// Texts instructions were searched by.
    instructed: Vec<String>,
    /// Relation name -> OID, as the catalog finds it (None: the database cannot tell).
    catalog: Option<HashMap<String, u32>>,
    /// Exact SQL -> the relations PostgreSQL resolved when it ran.
    named: HashMap<String, Vec<u32>>,
}

impl ValueLookup for FakeDb {
    fn closest_value(&mut self, _table: u32, _column: &str, literal: &str) -> Option<String> {
        self.stored.get(&literal.to_lowercase()).filter(|s| s.as_str() != literal).cloned()
    }
}

impl Database for FakeDb {
    fn resolve(&mut self, names: &[(Option<String>, String)]) -> Option<Vec<Option<u32>>> {
        let catalog = self.catalog.as_ref()?;
        Some(names.iter().map(|(_, n)| catalog.get(n).copied()).collect())
    }
    fn execute(&mut self, sql: &str) -> Result<Execution, Rejected> {
        // The database's own policy: refused before anything runs.
        if let Some(f) = self.volatile.iter().find(|f| sql.contains(f.as_str())) {
            return Err(Rejected::Refused(GuardError::VolatileFunction(f.clone())));
        }
        self.executed.push(sql.to_string());
        for bad in ["nme", "nickname", "salary", "unknown_colour"] {
            if sql.contains(bad) {
                let msg = format!("column \"{bad}\" does not exist");
                // PostgreSQL finds an undefined column while it reads the query.
                return Err(Rejected::Failed(Failure::Analysis(Report::new(SqlState::from_code("42703"), msg))));
            }
        }
        if sql.contains("slow") {
            return Err(Rejected::Failed(Failure::Timeout { ms: 5000 }));
        }
        if sql.contains("costly") {
            return Err(Rejected::Failed(Failure::Cost { estimate: 48213.0, max: 100.0 }));
        }
        let (rows, ms) = self.results.get(sql).cloned().unwrap_or((vec![vec![Some("6".into())]], 1));
        Ok(Execution {
            columns: vec![ColumnInfo { name: "count".into(), type_oid: 20 }],
            rows,
            truncated: false,
            byte_limited: false,
            elapsed: Duration::from_millis(ms),
            cost: None,
            named: self.named.get(sql).cloned().unwrap_or_default(),
        })
    }
    fn similar_values(&mut self, text: &str, skip: &[String], _leave_out: &[u32]) -> Vec<ValueHint> {
        self.lookups.push(text.to_string());
        self.skipped = skip.to_vec();
        self.values.clone()
    }
    fn similar_columns(&mut self, _text: &str, k: usize, _leave_out: &[u32]) -> Vec<(u32, String, f32)> {
        self.columns.iter().take(k).map(|(t, c)| (*t, c.clone(), 0.8)).collect()
    }
    fn similar_examples(&mut self, masked: &str, k: usize) -> Vec<Example> {
        self.masked.push(masked.to_string());
        self.examples.iter().take(k).cloned().collect()
    }
    fn instructions(&mut self, question: &str) -> Vec<crate::retrieval::instructions::Instruction> {
        self.instructed.push(question.to_string());
        self.instructions.clone()
    }
    fn sample(&mut self, schema: &mut Schema, tables: &[usize]) {
        for &t in tables {
            self.sampled.push(t);
            for c in &mut schema.tables[t].columns {
                c.stats = Some(crate::schema::ColumnStats { values: vec![format!("sample of {}", c.name)], distinct: 99, ..Default::default() });
                c.category = "S".into();
            }
        }
    }
}

fn settings() -> Settings {
    Settings { max_tokens: 256, schema_max_tokens: 4000, ..Settings::zero_shot() }
}

/// The full path: n = 5 in waves of 3 and 2, three agreeing votes stop early.
fn full() -> Settings {
    Settings {
        mode: Mode::Full,
        max_corrections: 1,
        max_tokens: 256,
        schema_max_tokens: 4000,
        candidates: 5,
        first_wave: 3,
        agreement: 3,
        temperature: 0.7,
        extraction: true,
        extraction_min_tokens: 0,
        extraction_max_tokens: 0,
        chain_of_thought: true,
        alignment: Rules::ALL,
        column_matches: 3,
        generators: vec![Generator::OpenSql],
        examples: 0,
        privacy: false,
        token_budget: None,
        agent_max_turns: 10,
        alone: None,
        instructions: 0,
        refuse_unrelated: false,
    }
}

fn q(text: &str) -> Question {
    Question { text: text.into(), ..Default::default() }
}

fn script(answers: &[&str]) -> Script {
    Script { answers: answers.iter().map(|a| Ok(a.to_string())).collect(), seen: vec![] }
}

fn rows(v: &[&str]) -> Vec<Vec<Option<String>>> {
    v.iter().map(|x| vec![Some(x.to_string())]).collect()
}

const EXTRACTED: &str = "#columns: singer.singer_id\n#values: none\n#select: number of singers";

// --- zero-shot ---

#[test]
fn happy_path() {
    let mut llm = script(&["```sql\nSELECT count(*) FROM singer;\n```"]);
    let mut db = FakeDb::default();
    let a = ask(&q("How many singers?"), &sample_schema(), &settings(), &mut llm, &mut db).expect("answer");
    assert_eq!(a.sql, "SELECT count(*) FROM singer");
    assert_eq!(a.execution.rows, rows(&["6"]));
    assert_eq!(a.trace.llm_calls.len(), 1);
    assert_eq!(a.trace.mode, Some(Mode::ZeroShot));
    assert!(a.trace.schema_columns.contains(&"singer.name".to_string()));
    assert!(a.trace.schema_columns.contains(&"\"Order Items\".\"select\"".to_string()));
    assert!(llm.prompts()[0][1].content.contains("### Question: How many singers?"));
    assert_eq!(llm.seen[0].temperature, 0.0);
}

#[test]
fn similar_values_reach_the_prompt() {
    let mut llm = script(&["SELECT count(*) FROM singer WHERE country = 'France'"]);
    let mut db = FakeDb {
        values: vec![ValueHint { column: "singer.country".into(), value: "France".into(), score: 0.9 }],
        ..Default::default()
    };
    let a = ask(&q("How many singers are from frnace?"), &sample_schema(), &settings(), &mut llm, &mut db).expect("answer");
    let prompt = &llm.prompts()[0][1].content;
    assert!(prompt.contains("# singer.country: 'France'\n### Question: How many singers are from frnace?"), "{prompt}");
    assert_eq!(a.trace.values.len(), 1);
    // Words that name tables and columns are not looked up as values.
    for w in ["singer", "singers", "country", "countries"] {
        assert!(db.skipped.contains(&w.to_string()), "{w}: {:?}", db.skipped);
    }
    assert!(!db.skipped.contains(&"frnace".to_string()));
}

#[test]
fn correction_round_fixes_failed_candidate() {
    let mut llm = script(&["SELECT nme FROM singer", "SELECT name FROM singer"]);
    let mut db = FakeDb::default();
    let a = ask(&q("names"), &sample_schema(), &settings(), &mut llm, &mut db).expect("answer");
    assert_eq!(a.sql, "SELECT name FROM singer");
    assert_eq!(db.executed, vec!["SELECT nme FROM singer", "SELECT name FROM singer"]);
    let second = llm.prompts()[1];
    assert_eq!(second.len(), 4);
    assert!(second[3].content.contains("column \"nme\" does not exist"));
    assert_eq!(a.trace.candidates[0].error_kind, Some(FailureKind::UndefinedColumn));
    assert_eq!(a.trace.llm_calls[1].stage, "correct");
}

#[test]
fn gives_up_after_the_last_round() {
    let mut llm = script(&["SELECT nme FROM singer", "SELECT nme FROM singer"]);
    let (e, t) = ask(&q("names"), &sample_schema(), &settings(), &mut llm, &mut FakeDb::default()).expect_err("fails");
    assert_eq!(e.sqlstate().code(), "42703");
    assert!(e.message().starts_with("generated query failed: column"));
    assert!(e.detail().unwrap_or_default().contains("Generated SQL: SELECT nme FROM singer"));
    assert_eq!(t.candidates.len(), 2);
}

#[test]
fn syntax_error_is_corrected() {
    let mut llm = script(&["I think you want the singers.", "SELECT name FROM singer"]);
    let a = ask(&q("names"), &sample_schema(), &settings(), &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!(a.sql, "SELECT name FROM singer");
}

#[test]
fn timeout_reported_as_query_canceled() {
    let s = Settings { max_corrections: 0, ..settings() };
    let mut llm = script(&["SELECT slow FROM singer"]);
    let (e, _) = ask(&q("x"), &sample_schema(), &s, &mut llm, &mut FakeDb::default()).expect_err("timeout");
    assert_eq!(e.sqlstate(), SqlState::QueryCanceled);
    assert!(e.message().contains("nl2sql.statement_timeout (5000 ms)"));
}

#[test]
fn unsafe_answers_are_refused_without_execution_or_correction() {
    for a in ["DROP TABLE singer", "WITH d AS (DELETE FROM singer RETURNING *) SELECT * FROM d", "SELECT pg_sleep(60)"] {
        let mut llm = script(&[a, "SELECT 1"]);
        let mut db = FakeDb::default();
        let (e, _) = ask(&q("x"), &sample_schema(), &settings(), &mut llm, &mut db).expect_err("refused");
        assert!(matches!(e, AskError::Refused { .. }), "{a}: {e:?}");
        assert!(db.executed.is_empty());
        assert_eq!(llm.seen.len(), 1);
    }
}

#[test]
fn what_the_database_refuses_is_final() {
    let mut db = FakeDb { volatile: vec!["my_udf".into()], ..Default::default() };
    let mut llm = script(&["SELECT my_udf()", "SELECT 1"]);
    let (e, _) = ask(&q("x"), &sample_schema(), &settings(), &mut llm, &mut db).expect_err("refused");
    assert_eq!(e.sqlstate().code(), "42501");
    // No correction round for a refusal.
    assert_eq!(llm.seen.len(), 1);
    assert!(db.executed.is_empty());
}

#[test]
fn llm_errors_are_scrubbed() {
    for s in [settings(), full()] {
        let mut llm = Script { answers: vec![Err(down()), Err(down()), Err(down()), Err(down())], seen: vec![] };
        let (e, _) = ask(&q("x"), &sample_schema(), &s, &mut llm, &mut FakeDb::default()).expect_err("auth");
        assert_eq!(e.sqlstate().code(), "28000");
        assert!(!format!("{e:?}").contains("sk-secret-key"));
    }
}

#[test]
fn bad_input() {
    let s = sample_schema();
    for settings in [settings(), full()] {
        let run = |text: &str, schema: &Schema| {
            let mut llm = script(&[]);
            ask(&q(text), schema, &settings, &mut llm, &mut FakeDb::default()).map(|_| ()).map_err(|(e, _)| e)
        };
        assert_eq!(run("  \n\t", &s), Err(AskError::EmptyQuestion));
        let big = "x".repeat(1 << 20);
        assert!(matches!(run(&big, &s), Err(AskError::QuestionTooLong { chars }) if chars == 1 << 20));
        assert_eq!(run("anything", &Schema::default()), Err(AskError::NoTables));
    }
}

// --- the full path ---

#[test]
fn three_agreeing_candidates_beat_two() {
    let mut db = FakeDb::default();
    db.results.insert("SELECT count(*) FROM singer WHERE is_male".into(), (rows(&["3"]), 1));
    db.results.insert("SELECT count(*) FROM singer".into(), (rows(&["6"]), 4));
    db.results.insert("SELECT count(singer_id) FROM singer".into(), (rows(&["6"]), 2));
    let mut llm = script(&[
        EXTRACTED,
        "#reason: count\n#SQL: SELECT count(*) FROM singer",
        "#SQL: SELECT count(*) FROM singer WHERE is_male",
        "#SQL: SELECT count(singer_id) FROM singer",
        "#SQL: SELECT count(*) FROM singer WHERE is_male",
        "```sql\nSELECT count(*)\nFROM singer;\n```",
    ]);
    let a = ask(&q("How many singers?"), &sample_schema(), &full(), &mut llm, &mut db).expect("answer");
    assert_eq!(a.execution.rows, rows(&["6"]));
    assert_eq!(a.sql, "SELECT count(singer_id) FROM singer", "the fastest of the winning group");
    let t = &a.trace;
    assert_eq!((t.waves, t.stopped_early, t.round_trips), (2, false, 3));
    assert_eq!(t.candidates.len(), 5);
    assert_eq!(t.candidates[3].duplicate_of, Some(1), "the same query is not run twice");
    assert_eq!(t.candidates[4].duplicate_of, Some(0));
    assert_eq!(db.executed.len(), 3);
    let v = t.vote.as_ref().expect("vote");
    assert_eq!((v.groups[0].votes, v.groups[1].votes), (3, 2));
    assert_eq!(t.confidence, Some(0.6));
    // Sampled at the configured temperature, extraction at 0.
    assert_eq!(llm.seen[0].temperature, 0.0);
    assert!(llm.seen[1..].iter().all(|r| r.temperature == 0.7));
    assert_eq!(t.llm_calls.iter().map(|c| c.stage).collect::<Vec<_>>(), ["extract", "generate", "generate", "generate", "generate", "generate"]);
}

#[test]
fn agreeing_first_wave_stops_sampling() {
    let mut llm = script(&[EXTRACTED, "#SQL: SELECT count(*) FROM singer", "#SQL: SELECT count(*) FROM singer", "#SQL: SELECT count(singer_id) FROM singer"]);
    let a = ask(&q("How many singers?"), &sample_schema(), &full(), &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!((a.trace.waves, a.trace.stopped_early, a.trace.round_trips), (1, true, 2));
    assert_eq!(llm.seen.len(), 4, "one extraction and one wave of three");
    assert_eq!(a.trace.confidence, Some(1.0));
}

#[test]
fn empty_results_lose_to_non_empty() {
    let mut db = FakeDb::default();
    db.results.insert("SELECT name FROM singer WHERE country = 'Fr'".into(), (vec![], 1));
    let s = Settings { alignment: Rules { agent: false, ..Rules::ALL }, ..full() };
    let mut llm = script(&[
        EXTRACTED,
        "#SQL: SELECT name FROM singer WHERE country = 'Fr'",
        "#SQL: SELECT name FROM singer WHERE country = 'Fr'",
        "#SQL: SELECT name FROM singer WHERE country = 'Fr'",
        "#SQL: SELECT name FROM singer",
        "#SQL: SELECT name FROM singer",
    ]);
    let a = ask(&q("Singers from France?"), &sample_schema(), &s, &mut llm, &mut db).expect("answer");
    assert_eq!(a.sql, "SELECT name FROM singer");
    let v = a.trace.vote.as_ref().expect("vote");
    assert_eq!((v.groups[0].votes, v.groups[1].votes, v.groups[1].rows), (2, 3, 0));
    assert_eq!(a.trace.waves, 2, "three empty answers do not stop sampling");
}

#[test]
fn only_empty_results_get_a_correction_round() {
    let mut db = FakeDb::default();
    db.results.insert("SELECT name FROM singer WHERE country = 'Fr'".into(), (vec![], 1));
    let s = Settings { candidates: 1, first_wave: 1, alignment: Rules { agent: false, ..Rules::ALL }, ..full() };
    let mut llm = script(&[EXTRACTED, "#SQL: SELECT name FROM singer WHERE country = 'Fr'", "#SQL: SELECT name FROM singer WHERE country = 'France'"]);
    let a = ask(&q("Singers from France?"), &sample_schema(), &s, &mut llm, &mut db).expect("answer");
    assert_eq!(a.sql, "SELECT name FROM singer WHERE country = 'France'");
    assert!(llm.prompts()[2][3].content.starts_with("That query returned no rows"));
    assert_eq!(a.trace.candidates[1].round, 1);
    assert_eq!(llm.seen[1].temperature, 0.0, "one candidate is generated greedily");
}

#[test]
fn two_different_queries_that_run_empty_are_the_answer_and_only_failures_are_corrected() {
    let mut db = FakeDb::default();
    db.results.insert("SELECT name FROM singer WHERE age > 90".into(), (vec![], 1));
    db.results.insert("SELECT name FROM singer WHERE age >= 91".into(), (vec![], 1));
    let s = Settings { candidates: 3, first_wave: 3, agreement: 3, alignment: Rules { agent: false, ..Rules::ALL }, ..full() };
    let mut llm = script(&[
        EXTRACTED,
        "#SQL: SELECT name FROM singer WHERE age > 90",
        "#SQL: SELECT name FROM singer WHERE age >= 91",
        "#SQL: SELECT nme FROM singer WHERE age > 90",
        "#SQL: SELECT name FROM singer WHERE age > 90",
    ]);
    let a = ask(&q("Singers older than 90?"), &sample_schema(), &s, &mut llm, &mut db).expect("answer");
    assert_eq!(a.sql, "SELECT name FROM singer WHERE age > 90");
    assert!(a.trace.empty_agreed);
    // One correction, of the failed candidate; neither empty one is sent back.
    let corrections: Vec<Option<usize>> = a.trace.candidates.iter().filter(|c| c.round == 1).map(|c| c.corrects).collect();
    assert_eq!(corrections, vec![Some(2)]);
    assert!(!llm.prompts().iter().any(|p| p.iter().any(|m| m.content.starts_with("That query returned no rows"))));
    assert_eq!(serde_json::to_value(&a.trace).unwrap()["empty_agreed"], true);
}

#[test]
fn the_same_query_sampled_twice_and_empty_is_the_answer() {
    let mut db = FakeDb::default();
    db.results.insert("SELECT name FROM singer WHERE age > 90".into(), (vec![], 1));
    let s = Settings { candidates: 2, first_wave: 2, agreement: 3, alignment: Rules { agent: false, ..Rules::ALL }, ..full() };
    let mut llm = script(&[EXTRACTED, "#SQL: SELECT name FROM singer WHERE age > 90", "#SQL: SELECT name FROM singer WHERE age > 90"]);
    let a = ask(&q("Singers older than 90?"), &sample_schema(), &s, &mut llm, &mut db).expect("answer");
    assert_eq!(a.sql, "SELECT name FROM singer WHERE age > 90");
    assert!(a.trace.empty_agreed);
    assert_eq!(llm.seen.len(), 3, "one extraction, two samples, no correction");
}

#[test]
fn one_query_two_prompts_wrote_that_returns_no_rows_ends_sampling() {
    let mut db = FakeDb::default();
    db.results.insert("SELECT name FROM singer WHERE age > 90".into(), (vec![], 1));
    db.results.insert("SELECT name FROM singer WHERE age >= 91".into(), (vec![], 1));
    let two = vec![Generator::OpenSql, Generator::CreateTable];
    let s = Settings { candidates: 4, agreement: 2, generators: two, alignment: Rules { agent: false, ..Rules::ALL }, ..full() };
    // Both prompts wrote the same query, empty: no second wave, and the empty result is the answer.
    let same = ["#SQL: SELECT name FROM singer WHERE age > 90", "SELECT name FROM singer WHERE age > 90", "#SQL: SELECT name FROM singer", "SELECT name FROM singer"];
    let mut llm = script(&[&[EXTRACTED][..], &same[..]].concat());
    let a = ask(&q("Singers older than 90?"), &sample_schema(), &s, &mut llm, &mut db).expect("answer");
    assert_eq!(a.sql, "SELECT name FROM singer WHERE age > 90");
    assert_eq!((a.trace.waves, a.trace.stopped_early, llm.seen.len()), (1, true, 3), "one extraction, one wave of two");
    assert!(a.trace.empty_agreed);
    // Two different queries, both empty: the second wave is asked, and its rows win.
    let other = ["#SQL: SELECT name FROM singer WHERE age > 90", "SELECT name FROM singer WHERE age >= 91", "#SQL: SELECT name FROM singer", "SELECT name FROM singer"];
    let mut llm = script(&[&[EXTRACTED][..], &other[..]].concat());
    let a = ask(&q("Singers older than 90?"), &sample_schema(), &s, &mut llm, &mut db).expect("answer");
    assert_eq!((a.trace.waves, a.trace.stopped_early), (2, false));
    assert_eq!(a.sql, "SELECT name FROM singer");
    // Two prompts are not the three nl2sql.agreement asks for.
    let three = Settings { agreement: 3, ..s.clone() };
    let mut llm = script(&[&[EXTRACTED][..], &same[..]].concat());
    let a = ask(&q("Singers older than 90?"), &sample_schema(), &three, &mut llm, &mut db).expect("answer");
    assert_eq!((a.trace.waves, a.sql.as_str()), (2, "SELECT name FROM singer"));
    // Samples of one prompt that wrote one empty query are no such agreement, whatever
    // nl2sql.agreement says (empty_results_lose_to_non_empty: three samples).
    let one = Settings { agreement: 1, first_wave: 2, generators: vec![Generator::OpenSql], ..s };
    let mut llm = script(&[&[EXTRACTED][..], &same[..]].concat());
    let a = ask(&q("Singers older than 90?"), &sample_schema(), &one, &mut llm, &mut db).expect("answer");
    assert_eq!((a.trace.waves, a.sql.as_str()), (2, "SELECT name FROM singer"));
}

#[test]
fn one_query_that_runs_empty_is_still_corrected_beside_a_failed_one() {
    let mut db = FakeDb::default();
    db.results.insert("SELECT name FROM singer WHERE country = 'Fr'".into(), (vec![], 1));
    let s = Settings { candidates: 2, first_wave: 2, agreement: 2, max_corrections: 1, alignment: Rules { agent: false, ..Rules::ALL }, ..full() };
    let mut llm = script(&[
        EXTRACTED,
        "#SQL: SELECT name FROM singer WHERE country = 'Fr'",
        "#SQL: SELECT nme FROM singer",
        "#SQL: SELECT name FROM singer WHERE country = 'France'",
        "#SQL: SELECT name FROM singer",
    ]);
    let a = ask(&q("Singers from France?"), &sample_schema(), &s, &mut llm, &mut db).expect("answer");
    assert!(!a.trace.empty_agreed);
    assert!(serde_json::to_value(&a.trace).unwrap().get("empty_agreed").is_none());
    let mut corrected: Vec<Option<usize>> = a.trace.candidates.iter().filter(|c| c.round == 1).map(|c| c.corrects).collect();
    corrected.sort();
    assert_eq!(corrected, vec![Some(0), Some(1)], "the empty one and the failed one");
}

#[test]
fn a_failing_call_does_not_lose_the_others() {
    let mut llm = Script {
        answers: vec![Ok(EXTRACTED.into()), Ok("#SQL: SELECT count(*) FROM singer".into()), Err(down()), Ok("#SQL: SELECT count(*) FROM singer".into())],
        seen: vec![],
    };
    let s = Settings { candidates: 3, agreement: 2, ..full() };
    let a = ask(&q("How many singers?"), &sample_schema(), &s, &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!(a.sql, "SELECT count(*) FROM singer");
    assert_eq!(a.trace.llm_calls.iter().filter(|c| c.error.is_some()).count(), 1);
    assert!(!format!("{:?}", a.trace).contains("sk-secret-key"), "traces are scrubbed too");
    assert_eq!(a.trace.confidence, Some(1.0), "confidence counts candidates, not failed calls");
}

#[test]
fn undefined_column_is_corrected_by_error_type() {
    let s = Settings { candidates: 1, first_wave: 1, ..full() };
    let mut llm = script(&[EXTRACTED, "#SQL: SELECT nickname FROM singer", "#reason: fixed\n#SQL: SELECT name FROM singer"]);
    let a = ask(&q("Singer nicknames?"), &sample_schema(), &s, &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!(a.sql, "SELECT name FROM singer");
    let fix = &llm.prompts()[2][3].content;
    assert!(fix.contains("column \"nickname\" does not exist") && fix.contains("Use only tables and columns listed above"), "{fix}");
    let c = &a.trace.candidates;
    assert_eq!((c[0].error_kind, c[0].sqlstate.as_deref(), c[1].round), (Some(FailureKind::UndefinedColumn), Some("42703"), 1));
}

#[test]
fn all_candidates_failing_reports_the_last_failure() {
    let s = Settings { candidates: 2, first_wave: 2, ..full() };
    let mut llm = script(&[EXTRACTED, "#SQL: SELECT nickname FROM singer", "#SQL: SELECT nickname, name FROM singer", "#SQL: SELECT nickname FROM singer", "#SQL: SELECT nickname FROM singer"]);
    let (e, t) = ask(&q("x"), &sample_schema(), &s, &mut llm, &mut FakeDb::default()).expect_err("fails");
    assert_eq!(e.sqlstate().code(), "42703");
    assert_eq!(t.candidates.len(), 4, "two candidates, each corrected once");
    assert_eq!(t.round_trips, 3);
}

#[test]
fn a_failed_query_written_twice_is_run_and_corrected_once() {
    let s = Settings { candidates: 2, first_wave: 2, ..full() };
    let mut llm = script(&[EXTRACTED, "#SQL: SELECT nickname FROM singer", "#SQL: SELECT  nickname  FROM singer;", "#SQL: SELECT name FROM singer"]);
    let mut db = FakeDb::default();
    let a = ask(&q("x"), &sample_schema(), &s, &mut llm, &mut db).expect("answer");
    assert_eq!(db.executed, vec!["SELECT nickname FROM singer", "SELECT name FROM singer"]);
    assert_eq!(a.trace.candidates[1].duplicate_of, Some(0));
    assert_eq!(a.trace.candidates[1].error_kind, Some(FailureKind::UndefinedColumn));
    assert_eq!(llm.seen.len(), 4, "one correction request");
}

#[test]
fn a_correction_carries_the_votes_of_the_samples_it_fixes() {
    // Five samples write the same failing query; one correction fixes it for all five.
    let s = Settings { agreement: 2, first_wave: 2, ..full() };
    let bad = "#SQL: SELECT nickname FROM singer";
    let mut llm = script(&[EXTRACTED, bad, bad, bad, bad, bad, "#SQL: SELECT name FROM singer"]);
    let mut db = FakeDb::default();
    let a = ask(&q("x"), &sample_schema(), &s, &mut llm, &mut db).expect("answer");
    assert_eq!(db.executed, vec!["SELECT nickname FROM singer", "SELECT name FROM singer"]);
    assert_eq!(a.trace.candidates[5].corrects, Some(0));
    assert_eq!(a.trace.confidence, Some(1.0));
    assert_eq!(a.trace.vote.as_ref().map(|v| v.groups[0].votes), Some(5));
}

#[test]
fn alignment_fixes_names_and_values_before_execution() {
    let mut db = FakeDb::default();
    db.stored.insert("france".into(), "France".into());
    let s = Settings { candidates: 1, first_wave: 1, ..full() };
    let mut llm = script(&[EXTRACTED, "#SQL: SELECT name FROM singers WHERE country = 'france'"]);
    let a = ask(&q("Singers from France?"), &sample_schema(), &s, &mut llm, &mut db).expect("answer");
    assert_eq!(db.executed, vec!["SELECT name FROM singer WHERE country = 'France'"]);
    assert_eq!(a.sql, "SELECT name FROM singer WHERE country = 'France'");
    let c = &a.trace.candidates[0];
    assert_eq!(c.sql.as_deref(), Some("SELECT name FROM singers WHERE country = 'france'"));
    assert!(c.rules.iter().any(|r| r.starts_with("agent: table")), "{:?}", c.rules);
    assert!(c.rules.iter().any(|r| r.starts_with("agent: value")), "{:?}", c.rules);
    // Off, the candidate runs as written.
    let s = Settings { alignment: Rules::NONE, ..s };
    let mut db = FakeDb::default();
    let mut llm = script(&[EXTRACTED, "#SQL: SELECT name FROM singers WHERE country = 'france'"]);
    ask(&q("Singers from France?"), &sample_schema(), &s, &mut llm, &mut db).expect("answer");
    assert_eq!(db.executed, vec!["SELECT name FROM singers WHERE country = 'france'"]);
}

#[test]
fn an_aligned_query_that_reads_a_relation_its_text_does_not_name_is_dropped() {
    let s = Settings { candidates: 1, first_wave: 1, ..full() };
    let aligned = "SELECT name FROM singer WHERE country = 'France'";
    let written = "SELECT name FROM singers WHERE country = 'france'";
    let run = |reads: Vec<u32>| {
        let mut db = FakeDb { catalog: Some(HashMap::from([("singer".to_string(), 1)])), ..FakeDb::default() };
        db.stored.insert("france".into(), "France".into());
        db.named.insert(aligned.into(), reads);
        let mut llm = script(&[EXTRACTED, &format!("#SQL: {written}")]);
        let a = ask(&q("Singers from France?"), &sample_schema(), &s, &mut llm, &mut db).expect("answer");
        (db.executed, a)
    };
    // PostgreSQL read singer, the relation the text names: the alignment stands.
    let (executed, a) = run(vec![1]);
    assert_eq!(executed, vec![aligned]);
    assert_eq!(a.sql, aligned);
    // It read another relation (a name printed one way and read another): the query as written runs.
    let (executed, a) = run(vec![1, 99]);
    assert_eq!(executed, vec![aligned, written]);
    assert_eq!(a.sql, written);
    let c = &a.trace.candidates[0];
    assert_eq!(c.aligned, None);
    assert!(c.rules.iter().any(|r| r.starts_with("alignment dropped")), "{:?}", c.rules);
}

#[test]
fn a_name_several_schemas_hold_is_the_one_the_narrowed_prompt_showed() {
    // singer in music and in pop, neither on the search path; the extraction chose pop's.
    let s = crate::schema::tests::two_schemas();
    let settings = Settings { candidates: 1, first_wave: 1, ..full() };
    let mut db = FakeDb::default();
    let mut llm = script(&["#columns: pop.singer.name\n#values: none\n#select: name", "#SQL: SELECT name FROM singer"]);
    let a = ask(&q("Which pop singers are there?"), &s, &settings, &mut llm, &mut db).expect("answer");
    assert_eq!(db.executed, vec!["SELECT name FROM pop.singer"]);
    assert!(a.trace.candidates[0].rules.contains(&"agent: table singer -> pop.singer".to_string()), "{:?}", a.trace.candidates[0].rules);
    // Too wide to show whole: every prompt lists both singers (the per-question schema, which
    // the extraction or retrieval chose from what each owner wrote, is not all it shows), so
    // neither is the one meant.
    for extraction_max_tokens in [10, 100_000] {
        let settings = Settings { candidates: 1, first_wave: 1, schema_max_tokens: 10, extraction_max_tokens, ..full() };
        let mut db = FakeDb::default();
        let mut llm = script(&["#columns: pop.singer.name\n#values: none\n#select: name", "#SQL: SELECT name FROM singer"]);
        let a = ask(&q("Which pop singers are there?"), &s, &settings, &mut llm, &mut db).expect("answer");
        assert_eq!(db.executed, vec!["SELECT name FROM singer"], "{extraction_max_tokens}");
        assert!(!a.trace.candidates[0].rules.iter().any(|r| r.starts_with("agent: table")), "{:?}", a.trace.candidates[0].rules);
    }
}

#[test]
fn a_schema_shown_whole_links_no_table_of_a_name_several_schemas_hold() {
    // singer in music and in pop, neither on the search path; the extraction is skipped, so
    // every table is shown and none was chosen: the name is left as written, never made the
    // first schema's (whoever created it).
    let s = crate::schema::tests::two_schemas();
    let settings = Settings { extraction_min_tokens: 10_000, candidates: 1, first_wave: 1, ..full() };
    let mut db = FakeDb::default();
    let mut llm = script(&["#SQL: SELECT name FROM singer"]);
    let a = ask(&q("Which singers are there?"), &s, &settings, &mut llm, &mut db).expect("answer");
    assert!(a.trace.extraction_skipped.is_some());
    assert_eq!(db.executed, vec!["SELECT name FROM singer"]);
    assert!(!a.trace.candidates[0].rules.iter().any(|r| r.starts_with("agent: table")), "{:?}", a.trace.candidates[0].rules);
    // A table of that name only one schema holds is still found (stadium is music's alone).
    let mut db = FakeDb::default();
    let mut llm = script(&["#SQL: SELECT name FROM stadium"]);
    ask(&q("Which stadiums are there?"), &s, &settings, &mut llm, &mut db).expect("answer");
    assert_eq!(db.executed, vec!["SELECT name FROM music.stadium"]);
    // The extraction kept both singers and nothing ranked them: neither is the one meant.
    let settings = Settings { candidates: 1, first_wave: 1, ..full() };
    let mut db = FakeDb::default();
    let mut llm = script(&["#columns: pop.singer.name, music.singer.name\n#values: none\n#select: name", "#SQL: SELECT name FROM singer"]);
    let a = ask(&q("Which singers are there?"), &s, &settings, &mut llm, &mut db).expect("answer");
    assert_eq!(db.executed, vec!["SELECT name FROM singer"]);
    assert!(!a.trace.candidates[0].rules.iter().any(|r| r.starts_with("agent: table")), "{:?}", a.trace.candidates[0].rules);
}

#[test]
fn extraction_narrows_the_schema_and_feeds_value_lookup() {
    let mut db = FakeDb { columns: vec![(4, "capacity".into()), (99, "gone".into())], ..Default::default() };
    let mut llm = script(&[
        "#columns: singer.name, concert.concert_name\n#values: singer.country = 'France'\n#select: singer name; concert name",
        "#SQL: SELECT 1",
        "#SQL: SELECT 1",
        "#SQL: SELECT 1",
    ]);
    let a = ask(&q("Which French singers sang in which concerts?"), &star_schema(), &full(), &mut llm, &mut db).expect("answer");
    let ex = a.trace.extraction.as_ref().expect("extraction");
    assert_eq!(ex.columns, vec!["singer.name", "concert.concert_name", "singer.country"]);
    assert_eq!(ex.column_matches, vec!["stadium.capacity"]);
    assert_eq!(ex.focus.path_tables, vec!["singer_in_concert"]);
    assert!(a.trace.schema_columns.contains(&"singer_in_concert.concert_id".to_string()));
    assert!(!a.trace.schema_columns.contains(&"singer.age".to_string()), "{:?}", a.trace.schema_columns);
    assert!(db.lookups[0].ends_with(" France"), "entities are looked up too: {:?}", db.lookups);
    let gen = &llm.prompts()[1][1].content;
    assert!(gen.contains("### The answer returns: singer name; concert name\n"), "{gen}");
    assert!(!gen.contains("age:"), "{gen}");
    assert!(a.trace.schema_tokens < ex.full_schema_tokens);
}

#[test]
fn without_extraction_the_whole_schema_is_used() {
    let s = Settings { extraction: false, chain_of_thought: false, candidates: 1, first_wave: 1, ..full() };
    let mut llm = script(&["SELECT count(*) FROM singer"]);
    let a = ask(&q("How many singers?"), &star_schema(), &s, &mut llm, &mut FakeDb::default()).expect("answer");
    assert!(a.trace.extraction.is_none());
    assert_eq!(a.trace.llm_calls.len(), 1);
    assert!(a.trace.schema_columns.contains(&"stadium.capacity".to_string()));
    assert!(!llm.prompts()[0][1].content.contains("#SQL-like"));
}

#[test]
fn a_small_schema_skips_extraction_and_shares_the_prefix_of_every_call() {
    let s = Settings { extraction_min_tokens: 10_000, candidates: 2, first_wave: 2, agreement: 2, ..full() };
    let mut llm = script(&["#SQL: SELECT count(*) FROM singer", "#SQL: SELECT count(*) FROM singer"]);
    let a = ask(&q("How many singers?"), &star_schema(), &s, &mut llm, &mut FakeDb::default()).expect("answer");
    assert!(a.trace.extraction.is_none());
    assert!(a.trace.extraction_skipped.as_deref().unwrap_or("").contains("nl2sql.extraction_min_tokens (10000)"));
    assert_eq!(a.trace.llm_calls.iter().filter(|c| c.stage == "extract").count(), 0);
    assert_eq!(a.trace.round_trips, 1);
    // The candidates' prompt starts as a zero-shot prompt on the same schema does, up to the task.
    let zero = crate::prompt::generate::zero_shot(&star_schema().render(4000).text, "", "other question", None);
    let gen = llm.prompts()[0];
    let schema_block = gen[1].content.find("### Task:").expect("task");
    // (the two tasks share their first sentence too)
    assert!(crate::prompt::shared_prefix(gen, &zero) > gen[0].content.len() + schema_block + "### Task: ".len());
    assert!(gen[1].content[schema_block..].contains("#SQL-like") && !zero[1].content.contains("#SQL-like"));
}

#[test]
fn a_schema_above_the_threshold_is_extracted_with_the_prefix_of_zero_shot() {
    let s = Settings { extraction_min_tokens: 1, ..full() };
    let mut llm = script(&[EXTRACTED, "#SQL: SELECT count(*) FROM singer", "#SQL: SELECT count(*) FROM singer", "#SQL: SELECT count(*) FROM singer"]);
    let a = ask(&q("How many singers?"), &star_schema(), &s, &mut llm, &mut FakeDb::default()).expect("answer");
    assert!(a.trace.extraction.is_some() && a.trace.extraction_skipped.is_none());
    let zero = crate::prompt::generate::zero_shot(&star_schema().render(4000).text, "", "How many singers?", None);
    let extraction = llm.prompts()[0];
    assert_eq!(extraction[0], zero[0]);
    assert!(crate::prompt::shared_prefix(extraction, &zero) > zero[0].content.len() + star_schema().render(4000).text.trim_end().len());
}

#[test]
fn candidates_are_asked_for_as_one_sample() {
    struct Sampler {
        inner: Script,
        samples: Vec<usize>,
    }
    impl Llm for Sampler {
        fn chat(&mut self, req: ChatRequest) -> Result<Completion, LlmError> {
            self.inner.chat(req)
        }
        fn sample(&mut self, req: ChatRequest, n: usize) -> Vec<Result<Completion, LlmError>> {
            self.samples.push(n);
            (0..n).map(|_| self.inner.chat(req.clone())).collect()
        }
    }
    let answers = [EXTRACTED, "#SQL: SELECT 1", "#SQL: SELECT 2", "#SQL: SELECT 3", "#SQL: SELECT 1", "#SQL: SELECT 1"];
    let mut llm = Sampler { inner: script(&answers), samples: vec![] };
    let mut db = FakeDb::default();
    db.results.insert("SELECT 2".into(), (rows(&["2"]), 1));
    db.results.insert("SELECT 3".into(), (rows(&["3"]), 1));
    let a = ask(&q("How many singers?"), &sample_schema(), &full(), &mut llm, &mut db).expect("answer");
    assert_eq!(llm.samples, vec![3, 2]);
    assert_eq!(a.trace.waves, 2);
}

#[test]
fn unparseable_extraction_falls_back_to_the_whole_schema() {
    let mut llm = script(&["I cannot help with that.", "#SQL: SELECT 1", "#SQL: SELECT 1", "#SQL: SELECT 1"]);
    let a = ask(&q("How many singers?"), &star_schema(), &full(), &mut llm, &mut FakeDb::default()).expect("answer");
    assert!(a.trace.schema_columns.contains(&"stadium.capacity".to_string()));
}

#[test]
fn one_unsafe_candidate_is_outvoted_not_run() {
    let mut db = FakeDb::default();
    let mut llm = script(&[EXTRACTED, "DROP TABLE singer", "#SQL: SELECT count(*) FROM singer", "#SQL: SELECT count(*) FROM singer", "#SQL: SELECT count(*) FROM singer", "#SQL: SELECT count(*) FROM singer"]);
    let a = ask(&q("How many singers?"), &sample_schema(), &full(), &mut llm, &mut db).expect("answer");
    assert_eq!(a.sql, "SELECT count(*) FROM singer");
    assert!(db.executed.iter().all(|s| !s.contains("DROP")));
    assert!(a.trace.candidates[0].error.is_some());
    // Every candidate unsafe: refused.
    let mut llm = script(&[EXTRACTED, "DROP TABLE singer", "DROP TABLE singer", "DROP TABLE singer", "DROP TABLE singer", "DROP TABLE singer"]);
    let (e, _) = ask(&q("x"), &sample_schema(), &full(), &mut llm, &mut FakeDb::default()).expect_err("refused");
    assert!(matches!(e, AskError::Refused { .. }), "{e:?}");
}

#[test]
fn ties_go_to_the_faster_candidate() {
    let mut db = FakeDb::default();
    db.results.insert("SELECT 1".into(), (rows(&["1"]), 9));
    db.results.insert("SELECT 2".into(), (rows(&["2"]), 2));
    let s = Settings { candidates: 2, first_wave: 2, max_corrections: 0, ..full() };
    let mut llm = script(&[EXTRACTED, "#SQL: SELECT 1", "#SQL: SELECT 2"]);
    let a = ask(&q("x"), &sample_schema(), &s, &mut llm, &mut db).expect("answer");
    assert_eq!(a.sql, "SELECT 2");
    assert_eq!(a.trace.confidence, Some(0.5));
}

#[test]
fn literals_differing_in_case_are_different_queries() {
    let s = Settings { candidates: 2, first_wave: 2, alignment: Rules { agent: false, ..Rules::ALL }, ..full() };
    let mut llm = script(&[
        EXTRACTED,
        "#SQL: SELECT name FROM singer WHERE country = 'france'",
        "#SQL: select NAME from SINGER where COUNTRY = 'France'",
    ]);
    let mut db = FakeDb::default();
    db.results.insert("SELECT name FROM singer WHERE country = 'france'".into(), (vec![], 1));
    let a = ask(&q("x"), &sample_schema(), &s, &mut llm, &mut db).expect("answer");
    assert_eq!(db.executed.len(), 2, "{:?}", db.executed);
    assert_eq!(a.sql, "select NAME from SINGER where COUNTRY = 'France'");
    // Keywords and unquoted names fold; quoted names and literals do not.
    assert_eq!(normal_form("SELECT \"Name\" FROM T WHERE x = 'A'"), normal_form("select \"Name\"\nfrom t where X = 'A';"));
    assert_ne!(normal_form("SELECT \"Name\" FROM t"), normal_form("SELECT name FROM t"));
}

#[test]
fn empty_results_are_corrected_once_each_with_their_own_conversation() {
    let s = Settings { candidates: 1, first_wave: 1, max_corrections: 3, alignment: Rules { agent: false, ..Rules::ALL }, ..full() };
    let mut db = FakeDb::default();
    db.results.insert("SELECT name FROM singer WHERE country = 'Fr'".into(), (vec![], 1));
    db.results.insert("SELECT name FROM singer WHERE country = 'FR'".into(), (vec![], 1));
    let mut llm = script(&[
        EXTRACTED,
        "#SQL: SELECT name FROM singer WHERE country = 'Fr'",
        "#SQL: SELECT name FROM singer WHERE country = 'FR'",
        "#SQL: SELECT name FROM singer WHERE country = 'France'",
    ]);
    let a = ask(&q("Singers from France?"), &sample_schema(), &s, &mut llm, &mut db).expect("answer");
    assert_eq!(a.sql, "SELECT name FROM singer WHERE country = 'France'");
    assert_eq!(llm.seen.len(), 4, "one extraction, one candidate, two corrections");
    // The second correction continues the first one's conversation.
    let second = llm.prompts()[3];
    assert_eq!(second.len(), 6);
    assert!(second[4].content.contains("'FR'"));
    let c = &a.trace.candidates;
    assert_eq!((c[1].corrects, c[2].corrects), (Some(0), Some(1)));
    // The sample's answer is the last correction: the empty ones it replaced have no votes.
    assert_eq!(a.trace.confidence, Some(1.0));
    assert_eq!(a.trace.samples, 1);
}

/// An extraction and three candidates that fail: two on the same missing column, one on another.
const THREE_FAILING: [&str; 4] = [EXTRACTED, "#SQL: SELECT nme FROM singer", "#SQL: SELECT nme, age FROM singer", "#SQL: SELECT nickname FROM singer"];

#[test]
fn a_round_corrects_as_many_as_the_first_wave_asked_distinct_failures_first() {
    let s = Settings { candidates: 3, first_wave: 2, agreement: 2, alignment: Rules { agent: false, ..Rules::ALL }, ..full() };
    let mut llm = script(&[&THREE_FAILING[..], &["SELECT name FROM singer", "SELECT age FROM singer"]].concat());
    let mut db = FakeDb::default();
    let a = ask(&q("names"), &sample_schema(), &s, &mut llm, &mut db).expect("answer");
    assert_eq!(llm.seen.len(), 6, "one extraction, three candidates, two corrections");
    let c = &a.trace.candidates;
    // The second "nme" failure is the one left: "nickname" is a failure of its own.
    let corrected: Vec<Option<usize>> = c.iter().filter(|c| c.round == 1).map(|c| c.corrects).collect();
    assert_eq!(corrected, vec![Some(0), Some(2)]);
    assert!(llm.prompts()[5].iter().any(|m| m.content.contains("column \"nickname\" does not exist")));
    assert_eq!(a.trace.corrections_skipped, 1);
    assert!(serde_json::to_value(&a.trace).unwrap()["corrections_skipped"] == 1);
}

#[test]
fn without_an_early_stop_every_failure_is_corrected_at_once() {
    let s = Settings { candidates: 3, first_wave: 3, agreement: usize::MAX, alignment: Rules { agent: false, ..Rules::ALL }, ..full() };
    let fixes = ["SELECT name FROM singer", "SELECT age FROM singer", "SELECT name, age FROM singer"];
    let mut llm = script(&[&THREE_FAILING[..], &fixes[..]].concat());
    let a = ask(&q("names"), &sample_schema(), &s, &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!(llm.seen.len(), 7, "one extraction, three candidates, three corrections");
    assert_eq!(a.trace.corrections_skipped, 0);
    assert!(serde_json::to_value(&a.trace).unwrap().get("corrections_skipped").is_none());
}

#[test]
fn an_execution_failure_is_reported_over_a_refusal() {
    let s = Settings { candidates: 2, first_wave: 2, max_corrections: 0, ..full() };
    let mut llm = script(&[EXTRACTED, "DROP TABLE singer", "#SQL: SELECT nickname FROM singer"]);
    let (e, _) = ask(&q("x"), &sample_schema(), &s, &mut llm, &mut FakeDb::default()).expect_err("fails");
    assert_eq!(e.sqlstate().code(), "42703");
}

#[test]
fn zero_shot_mode_runs_no_alignment() {
    let s = Settings { alignment: Rules::ALL, ..settings() };
    let mut llm = script(&["SELECT name FROM singers"]);
    let mut db = FakeDb::default();
    let _ = ask(&q("x"), &sample_schema(), &s, &mut llm, &mut db);
    assert_eq!(db.executed, vec!["SELECT name FROM singers"]);
}

// --- examples, generators, degrading ---

fn example(id: i64, question: &str, sql: &str) -> Example {
    Example { id, question: question.into(), sql: sql.into(), thought: None, hint: None, source: "builtin".into(), score: 0.9 }
}

/// Two generators, no extraction, n = 4, two agreeing votes stop.
fn diverse() -> Settings {
    Settings {
        extraction: false,
        chain_of_thought: false,
        candidates: 4,
        first_wave: 2,
        agreement: 2,
        generators: vec![Generator::OpenSql, Generator::CreateTable],
        examples: 2,
        ..full()
    }
}

#[test]
fn examples_are_found_by_the_masked_question_and_shown_to_the_open_sql_generator() {
    let mut db = FakeDb {
        examples: vec![
            example(7, "How many ships are from <value>?", "SELECT count(*) FROM ship WHERE flag = 'Norway'"),
            example(8, "List the names of ports", "SELECT name FROM port"),
        ],
        values: vec![ValueHint { column: "singer.country".into(), value: "France".into(), score: 1.0 }],
        ..Default::default()
    };
    let mut llm = script(&["SELECT count(*) FROM singer WHERE country = 'France'", "SELECT count(*) FROM singer WHERE country = 'France'"]);
    let a = ask(&q("How many singers are from France?"), &star_schema(), &diverse(), &mut llm, &mut db).expect("answer");
    assert_eq!(db.masked, vec!["How many <name> are from <value>"]);
    assert_eq!(a.trace.examples.iter().map(|e| e.id).collect::<Vec<_>>(), vec![7, 8]);
    let open_sql = &llm.prompts()[0][1].content;
    let ddl = &llm.prompts()[1][1].content;
    let shown = "### Examples: questions on other tables";
    assert!(open_sql.contains(shown) && !ddl.contains(shown), "{open_sql}\n{ddl}");
    assert!(open_sql.contains("```sql\nSELECT name FROM port\n```\n### Stored values"), "{open_sql}");
    // The CREATE TABLE generator shows no examples and no stored values.
    assert!(ddl.contains("CREATE TABLE singer (") && !ddl.contains("### Stored values"), "{ddl}");
}

#[test]
fn generators_are_asked_once_each_at_temperature_zero_then_take_turns() {
    let mut db = FakeDb::default();
    db.results.insert("SELECT count(*) FROM singer".into(), (rows(&["6"]), 1));
    db.results.insert("SELECT count(DISTINCT name) FROM singer".into(), (rows(&["5"]), 1));
    let mut llm = script(&[
        "SELECT count(*) FROM singer",
        "SELECT count(DISTINCT name) FROM singer",
        "SELECT count(DISTINCT name) FROM singer",
        "SELECT count(*) FROM singer WHERE true",
    ]);
    let a = ask(&q("How many singers?"), &star_schema(), &diverse(), &mut llm, &mut db).expect("answer");
    assert_eq!(llm.seen.iter().map(|r| r.temperature).collect::<Vec<_>>(), vec![0.0, 0.0, 0.7, 0.7]);
    assert!(llm.prompts()[1][1].content.starts_with("### Tables, as PostgreSQL CREATE TABLE statements:\nCREATE TABLE "));
    assert!(llm.prompts()[3][1].content.contains("CREATE TABLE"));
    let generators: Vec<_> = a.trace.candidates.iter().map(|c| c.generator.unwrap_or("-")).collect();
    assert_eq!(generators, vec!["open_sql", "create_table", "open_sql", "create_table"]);
    assert_eq!(a.trace.waves, 2);
    assert_eq!(a.sql, "SELECT count(*) FROM singer");
}

#[test]
fn generators_that_agree_stop_after_one_wave() {
    let mut llm = script(&["SELECT count(*) FROM singer", "SELECT count(*) FROM singer"]);
    let a = ask(&q("How many singers?"), &star_schema(), &diverse(), &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!(llm.seen.len(), 2);
    assert!(a.trace.stopped_early);
    assert_eq!(a.trace.confidence, Some(1.0));
}

/// A model that scores its answers: `scores[i]` is the confidence of the i-th scored answer.
struct Scored {
    inner: Script,
    scores: Vec<Option<f32>>,
    scored: usize,
    /// Whether the endpoint may score (not known to give no log probabilities).
    can: bool,
}

impl Llm for Scored {
    fn chat(&mut self, req: ChatRequest) -> Result<Completion, LlmError> {
        self.inner.chat(req)
    }
    fn chat_scored(&mut self, req: ChatRequest) -> Result<Completion, LlmError> {
        let confidence = self.scores.get(self.scored).copied().flatten();
        self.scored += 1;
        self.inner.chat(req).map(|c| Completion { confidence, ..c })
    }
    fn can_score(&self) -> bool {
        self.can
    }
    fn secret(&self) -> Option<&str> {
        self.inner.secret()
    }
}

fn scored(answers: &[&str], scores: &[Option<f32>]) -> Scored {
    Scored { inner: script(answers), scores: scores.to_vec(), scored: 0, can: true }
}

fn alone(p: f32) -> Settings {
    Settings { alone: Some(p), examples: 0, ..diverse() }
}

#[test]
fn a_sure_first_answer_stands_alone() {
    let mut llm = scored(&["SELECT count(*) FROM singer", "SELECT count(DISTINCT name) FROM singer"], &[Some(0.95)]);
    let a = ask(&q("How many singers?"), &star_schema(), &alone(0.9), &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!((llm.scored, llm.inner.seen.len()), (1, 1), "the other generator is not asked");
    assert_eq!(a.sql, "SELECT count(*) FROM singer");
    let t = &a.trace;
    assert_eq!((t.alone, t.stopped_early, t.waves, t.round_trips), (Some(0.95), true, 1, 1));
    assert_eq!(t.candidates[0].confidence, Some(0.95));
    // The vote's share stays what it is (one sample of one): the bar it passed was the model's.
    assert_eq!(t.confidence, Some(1.0));
}

#[test]
fn an_unsure_first_answer_asks_the_other_generators() {
    let mut llm = scored(&["SELECT count(*) FROM singer", "SELECT count(*) FROM singer"], &[Some(0.5)]);
    let a = ask(&q("How many singers?"), &star_schema(), &alone(0.9), &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!((llm.scored, llm.inner.seen.len()), (1, 2));
    assert!(llm.inner.prompts()[1][1].content.contains("CREATE TABLE"), "the second is the CREATE TABLE generator");
    let t = &a.trace;
    assert_eq!((t.alone, t.stopped_early, t.waves, t.round_trips), (None, true, 1, 2));
    assert_eq!(t.candidates.iter().map(|c| c.confidence).collect::<Vec<_>>(), [Some(0.5), None]);
    assert_eq!(t.confidence, Some(1.0));
}

#[test]
fn a_sure_answer_that_fails_returns_nothing_or_comes_unscored_does_not_stand_alone() {
    // Empty.
    let mut db = FakeDb::default();
    db.results.insert("SELECT name FROM singer WHERE country = 'Fr'".into(), (vec![], 1));
    let mut llm = scored(&["SELECT name FROM singer WHERE country = 'Fr'", "SELECT name FROM singer", "SELECT name FROM singer"], &[Some(0.99)]);
    let a = ask(&q("Singers from France?"), &star_schema(), &alone(0.9), &mut llm, &mut db).expect("answer");
    assert_eq!((a.trace.alone, a.sql.as_str()), (None, "SELECT name FROM singer"));
    assert!(llm.inner.seen.len() >= 3, "the other generator and the second wave are asked");
    // Not a query at all.
    let mut llm = scored(&["I do not know.", "SELECT count(*) FROM singer", "SELECT count(*) FROM singer"], &[Some(0.99)]);
    let a = ask(&q("How many singers?"), &star_schema(), &alone(0.9), &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!((a.trace.alone, a.sql.as_str()), (None, "SELECT count(*) FROM singer"));
    // An endpoint that gives no log probabilities.
    let mut llm = scored(&["SELECT count(*) FROM singer", "SELECT count(*) FROM singer"], &[None]);
    let a = ask(&q("How many singers?"), &star_schema(), &alone(0.9), &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!((a.trace.alone, llm.inner.seen.len(), a.trace.confidence), (None, 2, Some(1.0)));
}

fn timed_out() -> LlmError {
    crate::model::http::EndpointError { service: crate::model::http::Service::Llm, kind: crate::model::http::ErrorKind::Timeout { url: "u".into(), ms: 120_000 } }
}

#[test]
fn a_first_generator_that_times_out_leaves_the_others_one_that_is_down_fails_at_once() {
    let down_first = |first: LlmError| Scored {
        inner: Script { answers: vec![Err(first), Ok("SELECT count(*) FROM singer".into())], seen: vec![] },
        scores: vec![],
        scored: 0,
        can: true,
    };
    // One answer lost (it took too long): the others are asked.
    let mut llm = down_first(timed_out());
    let a = ask(&q("How many singers?"), &star_schema(), &alone(0.9), &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!(a.sql, "SELECT count(*) FROM singer");
    assert_eq!((a.trace.candidates[0].generator, a.trace.alone), (Some("create_table"), None));
    // The endpoint refuses the key: asking the others would fail alike, so the question fails now.
    let mut llm = down_first(down());
    let (e, _) = ask(&q("How many singers?"), &star_schema(), &alone(0.9), &mut llm, &mut FakeDb::default()).expect_err("auth");
    assert_eq!((e.sqlstate().code(), llm.inner.seen.len()), ("28000", 1));
    assert!(!format!("{e:?}").contains("sk-secret-key"));
    // Every generator timing out: the endpoint's error.
    let mut llm = Scored { inner: Script { answers: vec![Err(timed_out()), Err(timed_out())], seen: vec![] }, scores: vec![], scored: 0, can: true };
    let (e, _) = ask(&q("How many singers?"), &star_schema(), &alone(0.9), &mut llm, &mut FakeDb::default()).expect_err("timeouts");
    assert_eq!((e.sqlstate().code(), llm.inner.seen.len()), ("57014", 2));
}

#[test]
fn an_endpoint_that_cannot_score_gets_the_whole_first_wave_at_once() {
    let mut llm = scored(&["SELECT count(*) FROM singer", "SELECT count(*) FROM singer"], &[Some(0.99)]);
    llm.can = false;
    let a = ask(&q("How many singers?"), &star_schema(), &alone(0.9), &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!((llm.scored, llm.inner.seen.len(), a.trace.round_trips, a.trace.alone), (0, 2, 1, None));
}

#[test]
fn alone_at_one_scores_the_first_answer_but_never_lets_it_stand_alone() {
    let mut llm = scored(&["SELECT count(*) FROM singer", "SELECT count(*) FROM singer"], &[Some(1.0)]);
    let a = ask(&q("How many singers?"), &star_schema(), &alone(1.0), &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!((llm.scored, llm.inner.seen.len(), a.trace.alone), (1, 2, None));
    assert_eq!(a.trace.candidates[0].confidence, Some(1.0));
}

#[test]
fn alone_off_asks_the_whole_first_wave_unscored() {
    let mut llm = scored(&["SELECT count(*) FROM singer", "SELECT count(*) FROM singer"], &[Some(0.99)]);
    let off = Settings { alone: None, ..alone(0.0) };
    let a = ask(&q("How many singers?"), &star_schema(), &off, &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!((llm.scored, llm.inner.seen.len(), a.trace.round_trips, a.trace.alone), (0, 2, 1, None));
}

#[test]
fn alone_at_zero_lets_any_first_answer_with_rows_stand_scored_or_not() {
    // However unsure the model was.
    let mut llm = scored(&["SELECT count(*) FROM singer", "SELECT count(DISTINCT name) FROM singer"], &[Some(0.05)]);
    let a = ask(&q("How many singers?"), &star_schema(), &alone(0.0), &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!((llm.inner.seen.len(), a.trace.stopped_early, a.trace.round_trips, a.trace.alone), (1, true, 1, Some(0.05)));
    // An endpoint that cannot score: asked alone all the same, unscored.
    let mut llm = scored(&["SELECT count(*) FROM singer", "SELECT count(DISTINCT name) FROM singer"], &[None]);
    llm.can = false;
    let a = ask(&q("How many singers?"), &star_schema(), &alone(0.0), &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!((llm.scored, llm.inner.seen.len(), a.trace.stopped_early, a.sql.as_str()), (0, 1, true, "SELECT count(*) FROM singer"));
    // No rows: the other generator is asked.
    let mut db = FakeDb::default();
    db.results.insert("SELECT name FROM singer WHERE country = 'Fr'".into(), (vec![], 1));
    let mut llm = scored(&["SELECT name FROM singer WHERE country = 'Fr'", "SELECT name FROM singer", "SELECT name FROM singer"], &[Some(0.99)]);
    let a = ask(&q("Singers from France?"), &star_schema(), &alone(0.0), &mut llm, &mut db).expect("answer");
    assert_eq!((a.trace.alone, a.sql.as_str()), (None, "SELECT name FROM singer"));
}

#[test]
fn a_failed_extraction_falls_back_to_the_whole_schema() {
    let mut llm = Script { answers: vec![Err(down()), Ok("#SQL: SELECT 1".into()), Ok("#SQL: SELECT 1".into()), Ok("#SQL: SELECT 1".into())], seen: vec![] };
    let a = ask(&q("How many singers?"), &star_schema(), &full(), &mut llm, &mut FakeDb::default()).expect("answer");
    let failed = a.trace.extraction_failed.as_deref().expect("the failure is traced");
    assert!(!failed.contains("sk-secret-key"), "{failed}");
    assert!(a.trace.schema_columns.contains(&"stadium.capacity".to_string()));
    assert_eq!(a.sql, "SELECT 1");
}

#[test]
fn a_lost_generator_leaves_the_other() {
    let mut llm = Script { answers: vec![Err(down()), Ok("SELECT count(*) FROM singer".into())], seen: vec![] };
    let s = Settings { candidates: 2, ..diverse() };
    let a = ask(&q("How many singers?"), &star_schema(), &s, &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!(a.sql, "SELECT count(*) FROM singer");
    assert_eq!(a.trace.candidates[0].generator, Some("create_table"));
}

// --- operations: privacy, token budget, follow-ups ---

fn sent(llm: &Script) -> String {
    llm.seen.iter().flat_map(|r| r.messages.iter().map(|m| m.content.clone())).collect::<Vec<_>>().join("\n")
}

#[test]
fn privacy_keeps_row_data_out_of_every_prompt() {
    let stored = ["Joe Sharp", "Timbaland", "France", "Netherlands", "Oslo", "48213"];
    let example = Example {
        id: 7,
        question: "Which stadiums in Oslo hold more than 48213?".into(),
        sql: "SELECT name FROM stadium WHERE location = 'Oslo' AND capacity > 48213".into(),
        thought: Some("Oslo is the location.".into()),
        hint: Some("Oslo".into()),
        source: "feedback".into(),
        score: 0.9,
    };
    for mode in [Settings { privacy: true, examples: 2, ..full() }, Settings { privacy: true, ..settings() }] {
        // The first candidate fails; its correction runs.
        let first: &[&str] = if mode.mode == Mode::Full { &[EXTRACTED] } else { &[] };
        let answers = [first, &["SELECT nme FROM singer WHERE country = 'Atlantis'", "SELECT count(*) FROM singer", "SELECT count(*) FROM singer", "SELECT count(*) FROM singer"]].concat();
        let mut llm = script(&answers);
        let builtin = Example { id: 1, source: "builtin".into(), sql: "SELECT name FROM book WHERE title = 'Oslo Nights'".into(), ..example.clone() };
        let mut db = FakeDb {
            values: vec![ValueHint { column: "singer.country".into(), value: "Netherlands".into(), score: 0.9 }],
            examples: vec![example.clone(), builtin],
            ..Default::default()
        };
        let a = ask(&q("How many singers are there?"), &sample_schema(), &mode, &mut llm, &mut db);
        assert!(a.is_ok(), "{a:?}");
        let text = sent(&llm);
        for v in stored {
            assert!(!text.contains(v), "{v} was sent ({:?}):\n{text}", mode.mode);
        }
        assert!(db.lookups.is_empty(), "the value index is not even searched");
        let a = a.expect("answer");
        assert!(a.trace.privacy);
        if mode.mode == Mode::Full {
            // Only the built-in example, its literal masked.
            assert_eq!(a.trace.examples.iter().map(|e| e.id).collect::<Vec<_>>(), vec![1]);
            assert!(text.contains("SELECT name FROM book WHERE title = '<value>'"), "{text}");
        }
    }
    // Without privacy the same run shows samples, values and the example's literals.
    let mut llm = script(&[EXTRACTED, "SELECT count(*) FROM singer", "SELECT count(*) FROM singer", "SELECT count(*) FROM singer"]);
    let mut db = FakeDb { examples: vec![example], ..Default::default() };
    ask(&q("How many singers are there?"), &sample_schema(), &Settings { examples: 2, ..full() }, &mut llm, &mut db).expect("answer");
    let text = sent(&llm);
    assert!(text.contains("France") && text.contains("Oslo"), "{text}");
}

#[test]
fn budget_plans_fewer_candidates_and_counts_usage() {
    let t = Tokens { budget: Some(1000), prompt: 100, completion: 0, cut: vec![] };
    assert_eq!(t.plan(200, 5, 1024), (3, 100), "900 left: three requests of 200 + 100");
    assert_eq!(t.plan(900, 1, 1024), (0, 0), "not even the least completion fits");
    assert_eq!(Tokens::default().plan(5000, 5, 256), (5, 256), "no budget: everything");
    assert!(Tokens::default().room_again(5000, 5, 256), "no budget: room to ask again");
    assert!(t.room_again(200, 1, 100), "900 left: one request of 300, twice");
    assert!(!t.room_again(200, 2, 100), "two of 300, twice, do not fit");

    // Each scripted answer reports 100 prompt and 10 completion tokens.
    let prompt = {
        let mut probe = script(&["SELECT count(*) FROM singer"]);
        ask(&q("How many singers?"), &sample_schema(), &Settings { candidates: 1, extraction: false, ..full() }, &mut probe, &mut FakeDb::default())
            .expect("answer");
        assert!(probe.seen[0].reask, "no budget: an answer at the limit may be asked again");
        estimate(&probe.seen[0].messages)
    };
    let budget = 2 * (prompt + MIN_COMPLETION_TOKENS) + 10;
    let mut llm = script(&["SELECT count(*) FROM singer"; 5]);
    let s = Settings { extraction: false, first_wave: 5, agreement: usize::MAX, token_budget: Some(budget), ..full() };
    let a = ask(&q("How many singers?"), &sample_schema(), &s, &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!(llm.seen.len(), 2, "two of five candidates fit");
    assert!(llm.seen.iter().all(|r| r.max_tokens as usize <= budget / 2 - prompt));
    // The budget has no room to ask any of them again (an answer at the limit under a grammar).
    assert!(llm.seen.iter().all(|r| !r.reask));
    assert_eq!((a.trace.tokens.prompt, a.trace.tokens.completion), (200, 20), "the endpoint's usage counts");
    assert_eq!(a.trace.tokens.cut, vec!["3 of 5 candidates in wave 1".to_string()]);

    // A budget below one candidate fails before any request, with its own SQLSTATE.
    let mut llm = script(&["SELECT 1"]);
    let s = Settings { token_budget: Some(prompt / 2), ..settings() };
    let (e, _) = ask(&q("How many singers?"), &sample_schema(), &s, &mut llm, &mut FakeDb::default()).expect_err("over budget");
    assert!(matches!(e, AskError::OverBudget { .. }));
    assert_eq!(e.sqlstate().code(), "53400");
    assert!(llm.seen.is_empty());
}

#[test]
fn budget_skips_the_correction_round_it_cannot_pay() {
    let prompt = {
        let mut probe = script(&["SELECT count(*) FROM singer"]);
        ask(&q("names"), &sample_schema(), &settings(), &mut probe, &mut FakeDb::default()).expect("answer");
        estimate(&probe.seen[0].messages)
    };
    let mut llm = script(&["SELECT nme FROM singer", "SELECT name FROM singer"]);
    let s = Settings { token_budget: Some(prompt + MIN_COMPLETION_TOKENS + 20), ..settings() };
    let (e, t) = ask(&q("names"), &sample_schema(), &s, &mut llm, &mut FakeDb::default()).expect_err("no correction");
    assert_eq!(llm.seen.len(), 1);
    assert!(matches!(e, AskError::Failed { .. }), "the failure stands: {e:?}");
    assert_eq!(t.tokens.cut, vec!["correction round".to_string()]);
}

#[test]
fn follow_up_carries_the_earlier_question_and_query() {
    let earlier = Previous { question: "How many singers are from France?".into(), sql: "SELECT count(*) FROM singer WHERE country = 'France'".into(), history_id: Some(3) };
    for s in [settings(), Settings { extraction_min_tokens: 0, ..full() }] {
        let mut llm = script(&[EXTRACTED, "SELECT count(*) FROM singer WHERE country = 'Netherlands'", "SELECT count(*) FROM singer WHERE country = 'Netherlands'", "SELECT count(*) FROM singer WHERE country = 'Netherlands'"]);
        let mut db = FakeDb::default();
        let question = Question { text: "and from the Netherlands?".into(), previous: Some(earlier.clone()), ..Default::default() };
        let a = ask(&question, &sample_schema(), &s, &mut llm, &mut db).expect("answer");
        for r in &llm.seen {
            let user = &r.messages[1].content;
            assert!(user.contains("### Earlier question: How many singers are from France?\n### Its query:\n```sql\nSELECT count(*) FROM singer WHERE country = 'France'\n```"), "{user}");
            assert!(user.ends_with("### Question: and from the Netherlands?\n"), "{user}");
        }
        assert_eq!(a.trace.follows.as_ref().and_then(|p| p.history_id), Some(3));
        assert!(db.lookups[0].contains("France"), "values are looked up for the earlier question too");
    }
    // The rules that read the question read the earlier question and query too (a follow-up
    // keeps the earlier query's tables), and the hint.
    let q = Question { text: "and the youngest?".into(), hint: Some("only pop".into()), previous: Some(Previous { question: "Singers who performed?".into(), sql: "SELECT name FROM singer JOIN singer_in_concert USING (singer_id)".into(), history_id: None }), ..Default::default() };
    let said = q.said();
    assert!(said.starts_with("and the youngest?") && said.contains("only pop") && said.contains("performed") && said.contains("singer_in_concert"), "{said}");
    let bad = Question { text: "and then?".into(), previous: Some(Previous { question: " ".into(), sql: "SELECT 1".into(), history_id: None }), ..Default::default() };
    assert_eq!(validate(&bad).expect_err("empty").sqlstate().code(), "22023");
}

#[test]
fn abstains_below_min_confidence_with_the_candidates_in_detail() {
    // Two of five agree on "6": confidence 0.4.
    let mut llm = Script {
        answers: [EXTRACTED, "SELECT count(*) FROM singer", "SELECT count(*) FROM singer", "SELECT 7", "SELECT 8", "SELECT 9"]
            .iter()
            .map(|a| Ok(a.to_string()))
            .collect(),
        seen: vec![],
    };
    let mut db = FakeDb::default();
    for (sql, r) in [("SELECT 7", "7"), ("SELECT 8", "8"), ("SELECT 9", "9")] {
        db.results.insert(sql.into(), (rows(&[r]), 1));
    }
    let s = Settings { first_wave: 5, agreement: usize::MAX, ..full() };
    let a = ask(&q("How many singers?"), &sample_schema(), &s, &mut llm, &mut db).expect("answer");
    assert_eq!(a.trace.confidence, Some(0.4));
    assert!(abstain_below(a.clone(), 0.4).is_ok(), "at the threshold: answered");
    let (e, trace) = abstain_below(a, 0.5).expect_err("abstains");
    assert_eq!(e.sqlstate().code(), "P0002");
    let detail = e.detail().expect("detail");
    assert!(detail.starts_with("5 candidates sampled"), "{detail}");
    assert!(detail.contains("2 votes, 1 row: SELECT count(*) FROM singer"), "{detail}");
    assert_eq!(trace.confidence, Some(0.4));
    // Zero-shot has no confidence: never withheld.
    let mut llm = script(&["SELECT count(*) FROM singer"]);
    let a = ask(&q("How many singers?"), &sample_schema(), &settings(), &mut llm, &mut FakeDb::default()).expect("answer");
    assert!(a.trace.confidence.is_none() && abstain_below(a, 1.0).is_ok());
}

/// star_schema() among `n` unrelated tables of twelve columns each.
fn wide_star(n: usize) -> Schema {
    let mut s = star_schema();
    for i in 0..n {
        let mut t = s.tables[3].clone();
        t.oid = 100 + i as u32;
        t.name = format!("ledger_{i}");
        t.ident = t.name.clone();
        t.columns = (0..12).map(|c| { let mut col = s.tables[3].columns[1].clone(); col.name = format!("entry_{c}"); col.ident = col.name.clone(); col }).collect();
        t.primary_key = vec![];
        s.tables.push(t);
    }
    s
}

#[test]
fn wide_schema_links_before_the_model_and_keeps_names() {
    let schema = wide_star(60);
    // Room for every name line (listed first, in schema order, for the model's cache) and the
    // per-question tables, not for every table in full.
    let s = Settings { schema_max_tokens: 2800, candidates: 1, first_wave: 1, ..full() };
    assert!(schema.render(2800).detail < crate::schema::Detail::Full, "the test needs a schema too wide to show whole");
    let mut db = FakeDb { columns: vec![(2, "country".into()), (2, "name".into())], ..Default::default() };
    let mut llm = script(&[
        "#columns: singer.name, concert.concert_name\n#values: singer.country = 'France'\n#select: singer name; concert name",
        "#SQL: SELECT 1",
    ]);
    let a = ask(&q("Which French singers sang in which concerts?"), &schema, &s, &mut llm, &mut db).expect("answer");
    // Retrieval linked singer's columns before any model call; only linked tables were sampled.
    assert_eq!(a.trace.linked, vec!["singer.country", "singer.name"]);
    assert!(db.sampled.contains(&1) && !db.sampled.contains(&10), "{:?}", db.sampled);
    // The extraction saw singer in full (sampled) and every other table by name.
    let extract = &llm.prompts()[0][1].content;
    assert!(extract.contains("#   country: text, e.g. ('sample of country')"), "{extract}");
    assert!(extract.contains("# All tables (names only):\n# concert(") && extract.contains("# ledger_59(entry_0,"), "{extract}");
    // The candidate saw the extraction's schema itself (an endpoint's cache holds it), then
    // the extraction's tables and the join path that it showed by name only, in full.
    let gen = &llm.prompts()[1][1].content;
    let cut = gen.find("# Also for this question:\n").expect("the chosen tables after the shared schema");
    assert!(extract.starts_with(&gen[..cut]) && extract[cut..].starts_with("### "), "{gen}");
    let also = &gen[cut..];
    assert!(also.contains("# singer_in_concert (\n") && also.contains("#   concert_name: text"), "{gen}");
    assert!(!also.contains("# singer (\n"), "singer is in the shared part already: {gen}");
    assert!(gen.contains("# stadium(stadium_id, name, capacity)"), "{gen}");
    assert!(a.trace.schema_tokens <= 2800);
    assert_eq!(a.trace.tables_omitted, 0);
    assert!(a.trace.schema_columns.contains(&"ledger_0.entry_3".to_string()));
}

#[test]
fn a_wide_schema_within_the_extraction_budget_goes_whole_to_the_extraction() {
    // Wider than nl2sql.schema_max_tokens, within nl2sql.extraction_max_tokens: the extraction
    // sees every table in full (a prompt the same for every question), the candidate every
    // table by name and the extraction's tables in full.
    let schema = wide_star(60);
    let s = Settings { schema_max_tokens: 2800, extraction_max_tokens: 1_000_000, candidates: 1, first_wave: 1, ..full() };
    let mut db = FakeDb { columns: vec![(2, "country".into())], ..Default::default() };
    let mut llm = script(&["#columns: singer.name, concert.concert_name\n#select: singer name", "#SQL: SELECT 1"]);
    let a = ask(&q("Which singers sang in which concerts?"), &schema, &s, &mut llm, &mut db).expect("answer");
    let extract = &llm.prompts()[0][1].content;
    assert!(extract.contains("# ledger_59 (\n") && !extract.contains("(names only)"), "{extract}");
    // Another question's extraction prompt is the same up to its task.
    let mut llm2 = script(&["#columns: stadium.stadium_id", "#SQL: SELECT 1"]);
    ask(&q("How many stadiums are there?"), &schema, &s, &mut llm2, &mut FakeDb::default()).expect("answer");
    let task = extract.find("\n### ").expect("a task after the schema");
    assert_eq!(&llm2.prompts()[0][1].content[..task], &extract[..task]);
    let gen = &llm.prompts()[1][1].content;
    assert!(gen.contains("# All tables (names only):\n") && gen.contains("# singer_in_concert (\n") && gen.contains("#   concert_name: text"), "{gen}");
    assert!(!gen.contains("# ledger_59 (\n"), "{gen}");
    assert!(a.trace.schema_tokens <= 2800 && a.trace.tables_omitted == 0);
    assert!(db.sampled.is_empty(), "the schema came sampled: {:?}", db.sampled);
}

#[test]
fn wide_schema_reads_no_rows_under_privacy() {
    // nl2sql.privacy: the linked tables are not sampled, in zero-shot and in the full pipeline.
    let schema = wide_star(60);
    for mode in [Mode::Full, Mode::ZeroShot] {
        let s = Settings { mode, schema_max_tokens: 2800, candidates: 1, first_wave: 1, privacy: true, ..full() };
        let mut db = FakeDb { columns: vec![(2, "country".into()), (2, "name".into())], ..Default::default() };
        let extraction = "#columns: singer.name, concert.concert_name\n#values: singer.country = 'France'\n#select: singer name";
        let mut llm = if mode == Mode::Full { script(&[extraction, "#SQL: SELECT 1"]) } else { script(&["#SQL: SELECT 1"]) };
        let a = ask(&q("Which French singers sang in which concerts?"), &schema, &s, &mut llm, &mut db).expect("answer");
        assert_eq!(a.trace.linked, vec!["singer.country", "singer.name"], "{mode:?}");
        assert!(db.sampled.is_empty(), "{mode:?}: {:?}", db.sampled);
        for p in llm.prompts() {
            assert!(!p.iter().any(|m| m.content.contains("sample of")), "{mode:?}");
        }
    }
}

#[path = "tests/interactive.rs"]
mod interactive;
#[path = "tests/abstain.rs"]
mod abstain;
#[path = "tests/grammar.rs"]
mod grammar;

#[test]
fn found_columns_and_values_of_units_the_extraction_chose_nothing_from_are_set_aside() {
    // music (four tables a foreign key links) and pop (a singer of its own): two units.
    let s = crate::schema::tests::two_schemas();
    let mut db = FakeDb {
        columns: vec![(9, "country".into()), (4, "capacity".into())],
        values: vec![
            ValueHint { column: "pop.singer.country".into(), value: "Chile".into(), score: 1.0 },
            ValueHint { column: "music.singer.country".into(), value: "France".into(), score: 1.0 },
        ],
        ..Default::default()
    };
    let mut llm = script(&["#columns: music.singer.country\n#values: none\n#select: country; number of singers", "#SQL: SELECT 1", "#SQL: SELECT 1", "#SQL: SELECT 1"]);
    let a = ask(&q("How many singers are from each country?"), &s, &full(), &mut llm, &mut db).expect("answer");
    let ex = a.trace.extraction.as_ref().expect("extraction");
    assert_eq!(ex.column_matches, vec!["music.stadium.capacity"]);
    assert_eq!(ex.set_aside, vec!["pop.singer.country".to_string(), "pop.singer.country = 'Chile'".to_string()]);
    assert!(ex.focus.schema.tables.iter().all(|t| t.schema == "music"), "{:?}", ex.focus.schema.tables.iter().map(|t| &t.ident).collect::<Vec<_>>());
    let gen = &llm.prompts()[1][1].content;
    assert!(gen.contains("'France'") && !gen.contains("'Chile'"), "{gen}");
    // A column written with a table that lacks it (pop.singer has no capacity): the units of
    // the tables that have one stay (music's stadium), so its found column is not set aside.
    let mut db = FakeDb { columns: vec![(4, "capacity".into())], ..Default::default() };
    let mut llm = script(&["#columns: pop.singer.name, pop.singer.capacity\n#values: none\n#select: name; capacity", "#SQL: SELECT 1", "#SQL: SELECT 1", "#SQL: SELECT 1"]);
    let a = ask(&q("Which singer sang at the largest stadium?"), &s, &full(), &mut llm, &mut db).expect("answer");
    let ex = a.trace.extraction.as_ref().expect("extraction");
    assert!(ex.set_aside.is_empty(), "{:?}", ex.set_aside);
    assert_eq!(ex.column_matches, vec!["music.stadium.capacity"]);
    // One unit (every table in one schema): nothing is set aside.
    let mut db = FakeDb { columns: vec![(4, "capacity".into())], ..Default::default() };
    let mut llm = script(&["#columns: singer.country\n#values: none\n#select: country", "#SQL: SELECT 1", "#SQL: SELECT 1", "#SQL: SELECT 1"]);
    let a = ask(&q("How many singers are from each country?"), &star_schema(), &full(), &mut llm, &mut db).expect("answer");
    assert!(a.trace.extraction.as_ref().expect("extraction").set_aside.is_empty());
    assert_eq!(a.trace.extraction.as_ref().expect("extraction").column_matches, vec!["stadium.capacity"]);
}

#[test]
fn failures_are_corrected_only_while_nothing_returned_rows() {
    // One of the two generators fails, the other returns rows: the vote decides, nothing is
    // sent back for correction (the second wave is asked, as they did not agree).
    let s = Settings { candidates: 2, examples: 0, ..diverse() };
    let mut llm = script(&["SELECT nickname FROM singer", "SELECT name FROM singer", "SELECT name FROM singer"]);
    let a = ask(&q("names"), &star_schema(), &s, &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!(a.sql, "SELECT name FROM singer");
    assert!(a.trace.llm_calls.iter().all(|c| c.stage != "correct"), "{:?}", a.trace.llm_calls.iter().map(|c| &c.stage).collect::<Vec<_>>());
    // Both fail: each is corrected.
    let mut llm = script(&["SELECT nickname FROM singer", "SELECT nickname AS n FROM singer", "SELECT name FROM singer", "SELECT name FROM singer"]);
    let a = ask(&q("names"), &star_schema(), &s, &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!(a.sql, "SELECT name FROM singer");
    assert_eq!(a.trace.llm_calls.iter().filter(|c| c.stage == "correct").count(), 2);
}

fn instruction(id: i64, text: &str) -> crate::retrieval::instructions::Instruction {
    crate::retrieval::instructions::Instruction { id, text: text.into(), sql: None, meaning: 0.1, sentence: false, words: 0.0, score: 0.0 }
}

#[test]
fn chosen_instructions_follow_the_question_in_every_mode() {
    let schema = sample_schema();
    for mode in [Mode::ZeroShot, Mode::Full, Mode::Interactive] {
        let mut db = FakeDb {
            instructions: vec![instruction(7, "A senior singer is one aged 60 or more"), instruction(8, "Weekend days are Saturday and Sunday")],
            ..Default::default()
        };
        let base = if mode == Mode::Full { full() } else { settings() };
        let s = Settings { mode, instructions: 3, agent_max_turns: 2, ..base };
        let mut llm = Script { answers: vec![Ok("```sql\nSELECT count(*) FROM singer WHERE age >= 60\n```".into()); 8], seen: vec![] };
        let question = Question { text: "How many senior singers?".into(), hint: Some("count them".into()), ..Default::default() };
        let trace = match ask(&question, &schema, &s, &mut llm, &mut db) {
            Ok(a) => a.trace,
            Err((_, t)) => t,
        };
        assert_eq!(db.instructed, vec!["How many senior singers?\ncount them".to_string()], "{mode:?}");
        assert_eq!(trace.instructions.iter().map(|i| i.id).collect::<Vec<_>>(), vec![7], "{mode:?}");
        // After the question and its hint, in every prompt of the run; the unrelated one nowhere.
        let prompts = llm.prompts();
        assert!(!prompts.is_empty());
        for p in prompts {
            let user = &p[1].content;
            assert!(user.contains("### Question: How many senior singers?\n### Note: count them\nA senior singer is one aged 60 or more\n"), "{mode:?}: {user}");
            assert!(!user.contains("Weekend"), "{mode:?}");
        }
    }
}

#[test]
fn no_instructions_are_searched_when_none_are_asked_for() {
    let mut db = FakeDb { instructions: vec![instruction(7, "A senior singer is one aged 60 or more")], ..Default::default() };
    let mut llm = Script { answers: vec![Ok("SELECT count(*) FROM singer".into())], seen: vec![] };
    let a = ask(&q("How many senior singers?"), &sample_schema(), &settings(), &mut llm, &mut db).map_err(|e| e.0).unwrap();
    assert!(db.instructed.is_empty() && a.trace.instructions.is_empty());
    assert!(!llm.prompts()[0][1].content.contains("senior singer is"));
}

#[test]
fn instructions_alone_make_a_note() {
    let mut db = FakeDb { instructions: vec![instruction(7, "A senior singer is one aged 60 or more")], ..Default::default() };
    let mut llm = Script { answers: vec![Ok("SELECT count(*) FROM singer".into())], seen: vec![] };
    let s = Settings { instructions: 1, ..settings() };
    ask(&q("How many senior singers?"), &sample_schema(), &s, &mut llm, &mut db).map_err(|e| e.0).unwrap();
    assert!(llm.prompts()[0][1].content.ends_with("### Question: How many senior singers?\n### Note: A senior singer is one aged 60 or more\n"));
}

#[test]
fn a_stored_value_or_an_instruction_makes_a_question_related() {
    let s = Settings { refuse_unrelated: true, instructions: 2, ..settings() };
    let question = q("Which planet is the largest in the solar system?");
    let answers = || vec![Ok("maybe".to_string()), Ok("SELECT count(*) FROM singer".to_string())];
    let mut db = FakeDb { values: vec![ValueHint { column: "singer.name".into(), value: "Solar Flare".into(), score: 0.9 }], ..Default::default() };
    let mut llm = Script { answers: answers(), seen: vec![] };
    let a = ask(&question, &sample_schema(), &s, &mut llm, &mut db).map_err(|e| e.0).unwrap();
    assert_eq!(a.trace.coverage.unwrap().covered, vec!["solar"]);
    let mut db = FakeDb { instructions: vec![instruction(3, "A planet is a singer with over a million records sold")], ..Default::default() };
    let mut llm = Script { answers: answers(), seen: vec![] };
    assert!(ask(&question, &sample_schema(), &s, &mut llm, &mut db).is_ok());
    // A question the schema covers looks no values up for this: the one lookup is the path's own.
    let mut db = FakeDb::default();
    let mut llm = Script { answers: vec![Ok("SELECT count(*) FROM singer".into())], seen: vec![] };
    let a = ask(&q("How many singers are there?"), &sample_schema(), &s, &mut llm, &mut db).map_err(|e| e.0).unwrap();
    assert_eq!(db.lookups.len(), 1);
    assert!(a.trace.coverage.unwrap().uncovered.is_empty());
}

#[test]
fn a_follow_up_is_never_refused_and_instructions_are_capped() {
    let s = Settings { refuse_unrelated: true, instructions: 5, ..settings() };
    let earlier = Previous { question: "How many singers?".into(), sql: "SELECT count(*) FROM singer".into(), history_id: None };
    let question = Question { text: "and on planet Mars?".into(), previous: Some(earlier), ..Default::default() };
    let mut llm = Script { answers: vec![Ok("SELECT count(*) FROM singer".into())], seen: vec![] };
    let a = ask(&question, &sample_schema(), &s, &mut llm, &mut FakeDb::default()).map_err(|e| e.0).unwrap();
    assert!(a.trace.coverage.is_none() && a.trace.answerable.is_none());
    // Long instructions: the best first, then only what fits.
    // (Each about a word of its own: one that only repeated another's words would not be chosen.)
    let long = |id: i64, about: &str| instruction(id, &format!("singer rule on {about}: {}", "x".repeat(1_400)));
    let mut db = FakeDb { instructions: vec![long(1, "alpha"), long(2, "beta"), long(3, "gamma")], ..Default::default() };
    let mut llm = Script { answers: vec![Ok("SELECT count(*) FROM singer".into())], seen: vec![] };
    let a = ask(&q("Which singer rule applies to alpha, beta or gamma?"), &sample_schema(), &s, &mut llm, &mut db).map_err(|e| e.0).unwrap();
    assert_eq!(a.trace.instructions.len(), 2);
    assert_eq!((a.trace.answerable, llm.prompts().len()), (None, 1));
}

#[test]
fn a_refusal_because_the_catalog_changed_says_to_ask_again() {
    let changed = AskError::Refused { sql: "SELECT 1".into(), error: crate::safety::guard::GuardError::CatalogChanged { reset: false } };
    assert_eq!(changed.sqlstate().code(), "40001");
    assert_eq!(changed.hint().as_deref(), Some("Ask again."));
    assert!(changed.detail().unwrap_or_default().starts_with("Another session altered or dropped an operator"));
    let locking = AskError::Refused { sql: "SELECT 1".into(), error: crate::safety::guard::GuardError::Locking };
    assert!(locking.hint().unwrap_or_default().starts_with("nl2sql only runs single read-only queries"));
}
