//! Abstention: by the question's words and the model's yes or no before generation, and by the
//! names the failed queries read after it.

use super::*;

#[test]
fn a_question_about_nothing_the_schema_holds_is_refused_when_the_model_confirms() {
    let s = Settings { refuse_unrelated: true, ..settings() };
    let mut db = FakeDb::default();
    let mut llm = Script { answers: vec![Ok("No.".into()), Ok("SELECT count(*) FROM singer".into())], seen: vec![] };
    let (e, trace) = ask(&q("Which planet is the largest in the solar system?"), &sample_schema(), &s, &mut llm, &mut db).err().unwrap();
    assert!(matches!(&e, AskError::Unrelated { words, confirmed: true, .. } if words == &["planet", "solar", "system"]), "{e:?}");
    assert_eq!(e.sqlstate().code(), "P0002");
    let detail = e.detail().unwrap_or_default();
    assert!(detail.starts_with("The model, shown the tables") && detail.contains("\"planet\", \"solar\", \"system\""), "{detail}");
    assert!(e.hint().unwrap().starts_with("The role may read singer"), "{:?}", e.hint());
    // One call, the answerability question behind the schema; nothing generated or run.
    let prompts = llm.prompts();
    assert_eq!(prompts.len(), 1);
    assert!(prompts[0][1].content.contains("# singer (") && prompts[0][1].content.contains("Answer with one word: yes or no."));
    assert!(db.executed.is_empty());
    // The value index was asked before the model.
    assert_eq!(db.lookups, vec!["Which planet is the largest in the solar system?".to_string()]);
    assert!(trace.coverage.unwrap().covered.is_empty());
    assert_eq!(trace.answerable, Some(false));
    assert_eq!(trace.llm_calls.iter().map(|c| c.stage).collect::<Vec<_>>(), ["answerable"]);
}

#[test]
fn the_models_yes_overrules_the_words_and_nothing_else_does() {
    let s = Settings { refuse_unrelated: true, ..settings() };
    let question = q("Which planet is the largest in the solar system?");
    // Yes: a paraphrase the words missed goes on to its query.
    let mut llm = Script { answers: vec![Ok("yes".into()), Ok("SELECT count(*) FROM singer".into())], seen: vec![] };
    let a = ask(&question, &sample_schema(), &s, &mut llm, &mut FakeDb::default()).map_err(|e| e.0).unwrap();
    assert_eq!(a.trace.answerable, Some(true));
    assert_eq!(llm.prompts().len(), 2);
    // Neither yes nor no, or a failed call: no word matched, refused on the words alone.
    for answer in [Ok("SELECT 1".to_string()), Err(timed_out())] {
        let mut llm = Script { answers: vec![answer, Ok("SELECT count(*) FROM singer".into())], seen: vec![] };
        let (e, trace) = ask(&question, &sample_schema(), &s, &mut llm, &mut FakeDb::default()).err().unwrap();
        assert!(matches!(&e, AskError::Unrelated { confirmed: false, .. }), "{e:?}");
        assert!(e.detail().unwrap_or_default().starts_with("No table, column"));
        assert_eq!(trace.answerable, None);
    }
    // Some words matched, one not ("salary"): answered, the model not asked about it.
    let mut llm = Script { answers: vec![Ok("SELECT count(*) FROM singer".into())], seen: vec![] };
    let a = ask(&q("What is the average salary of singers?"), &sample_schema(), &s, &mut llm, &mut FakeDb::default()).map_err(|e| e.0).unwrap();
    assert_eq!(a.trace.coverage.map(|c| c.uncovered), Some(vec!["salary".to_string()]));
    assert_eq!(a.trace.answerable, None);
    assert!(!llm.prompts().iter().any(|p| p[1].content.contains("yes or no")));
    // A token budget: the words alone decide, no call spent on it.
    let budget = Settings { token_budget: Some(100_000), ..s.clone() };
    let mut llm = Script { answers: vec![Ok("yes".into())], seen: vec![] };
    let (e, _) = ask(&question, &sample_schema(), &budget, &mut llm, &mut FakeDb::default()).err().unwrap();
    assert!(matches!(&e, AskError::Unrelated { confirmed: false, .. }) && llm.prompts().is_empty(), "{e:?}");
}

/// Zero-shot with refuse_unrelated, the model answering `answers` in turn.
fn missing_case(question: &str, answers: &[&str], refuse: bool) -> Result<Answer, (AskError, Trace)> {
    let s = Settings { refuse_unrelated: refuse, max_corrections: 1, ..settings() };
    let mut llm = Script { answers: answers.iter().map(|a| Ok(a.to_string())).collect(), seen: vec![] };
    ask(&q(question), &sample_schema(), &s, &mut llm, &mut FakeDb::default())
}

#[test]
fn a_query_failing_on_the_name_the_question_asked_for_is_a_refusal() {
    let both = ["SELECT name, salary FROM singer", "SELECT s.name, s.salary FROM singer AS s"];
    let (e, trace) = missing_case("What is the salary of each singer?", &both, true).err().unwrap();
    assert!(matches!(&e, AskError::Missing { words, names, .. } if words == &["salary"] && names == &["salary"]), "{e:?}");
    assert_eq!(e.sqlstate().code(), "P0002");
    assert_eq!(e.message(), "nl2sql abstains: the tables do not hold what the question asks about");
    let detail = e.detail().unwrap_or_default();
    assert!(detail.starts_with("No table, column or description the role may read matches \"salary\"") && detail.ends_with("Generated SQL: SELECT s.name, s.salary FROM singer AS s"), "{detail}");
    assert!(e.hint().unwrap().starts_with("The role may read singer"), "{:?}", e.hint());
    assert_eq!(trace.missing, ["salary"]);
    assert_eq!(trace.candidates.len(), 2);
}

#[test]
fn other_failures_stay_failures() {
    let both = ["SELECT name, salary FROM singer", "SELECT s.name, s.salary FROM singer AS s"];
    // The setting off: the failure as it was.
    let (e, trace) = missing_case("What is the salary of each singer?", &both, false).err().unwrap();
    assert!(matches!(&e, AskError::Failed { .. }) && e.sqlstate().code() == "42703", "{e:?}");
    assert!(trace.missing.is_empty());
    // A name the tables lack that no word of the question asked for: a misspelling of one they hold.
    let typo = ["SELECT nme FROM singer", "SELECT nme FROM singer WHERE true"];
    let (e, _) = missing_case("Which singers come from France?", &typo, true).err().unwrap();
    assert!(matches!(&e, AskError::Failed { .. }), "{e:?}");
    // The question has an unmatched word, the failing name is not it.
    let (e, _) = missing_case("Which singers sing loudly?", &typo, true).err().unwrap();
    assert!(matches!(&e, AskError::Failed { .. }), "{e:?}");
    // The last query failed on another name: not the last query's refusal, but the one sample's
    // (it read "salary").
    let other = ["SELECT name, salary FROM singer", "SELECT nme FROM singer"];
    let (e, trace) = missing_case("What is the salary of each singer?", &other, true).err().unwrap();
    assert!(matches!(&e, AskError::Missing { sampled: Some((1, 1)), .. }) && trace.missing == ["salary"], "{e:?}");
    // A correction that runs is an answer when the first query failed on a name the question
    // did not ask for.
    let fixed = ["SELECT nme FROM singer", "SELECT name FROM singer"];
    let a = missing_case("What is the salary of each singer?", &fixed, true).map_err(|e| e.0).unwrap();
    assert_eq!(a.sql, "SELECT name FROM singer");
    assert!(a.trace.missing.is_empty());
}

#[test]
fn a_correction_that_drops_what_was_asked_for_is_no_answer() {
    // Zero-shot: the one sample read "salary"; the correction, told it does not exist, answered
    // with what does. That answers another question: refused.
    let fixed = ["SELECT name, salary FROM singer", "SELECT name FROM singer"];
    let (e, trace) = missing_case("What is the salary of each singer?", &fixed, true).err().unwrap();
    assert!(matches!(&e, AskError::Missing { names, sampled: Some((1, 1)), .. } if names == &["salary"]), "{e:?}");
    let detail = e.detail().unwrap_or_default();
    assert!(detail.contains("and 1 of the model's 1 first queries read \"salary\", which no table") && detail.ends_with("Generated SQL: SELECT name, salary FROM singer"), "{detail}");
    assert_eq!(trace.missing, ["salary"]);
    assert!(trace.candidates[1].ok, "the correction ran");
    // The setting off: the correction's answer, as before.
    let a = missing_case("What is the salary of each singer?", &fixed, false).map_err(|e| e.0).unwrap();
    assert_eq!(a.sql, "SELECT name FROM singer");
    // A follow-up rests on the earlier question: never refused.
    let s = Settings { refuse_unrelated: true, max_corrections: 1, ..settings() };
    let follow = Question { previous: Some(Previous { question: "Who sings?".into(), sql: "SELECT name FROM singer".into(), history_id: None }), ..q("What is the salary of each singer?") };
    let mut llm = script(&fixed);
    assert!(ask(&follow, &sample_schema(), &s, &mut llm, &mut FakeDb::default()).is_ok());
}

/// The full path with three samples and no correction, the model answering `samples`.
fn sampled_case(samples: &[&str]) -> Result<Answer, (AskError, Trace)> {
    let s = Settings { refuse_unrelated: true, candidates: 3, first_wave: 3, max_corrections: 0, ..full() };
    let mut answers = vec![EXTRACTED];
    answers.extend_from_slice(samples);
    ask(&q("What is the salary of each singer?"), &sample_schema(), &s, &mut script(&answers), &mut FakeDb::default())
}

#[test]
fn most_samples_asking_for_a_missing_name_refuse_and_fewer_do_not() {
    // Two of three samples read "salary" (one as a duplicate of the other): refused, though the
    // third ran.
    let (e, _) = sampled_case(&["#SQL: SELECT name, salary FROM singer", "#SQL: SELECT name, salary FROM singer", "#SQL: SELECT name FROM singer"]).err().unwrap();
    assert!(matches!(&e, AskError::Missing { sampled: Some((2, 3)), .. }), "{e:?}");
    // DETAIL names what the failing first queries read and shows the first of them as such.
    let detail = e.detail().unwrap_or_default();
    assert!(detail.contains("2 of the model's 3 first queries read \"salary\"") && detail.ends_with("\nThe first of them: SELECT name, salary FROM singer"), "{detail}");
    // One of three: the others' answer stands.
    let a = sampled_case(&["#SQL: SELECT name, salary FROM singer", "#SQL: SELECT name FROM singer", "#SQL: SELECT name FROM singer"]).map_err(|e| e.0).unwrap();
    assert_eq!(a.sql, "SELECT name FROM singer");
    assert!(a.trace.missing.is_empty());
    // Two of three failed on a name the question did not ask for: the third's answer stands.
    let a = sampled_case(&["#SQL: SELECT nme FROM singer", "#SQL: SELECT nme, age FROM singer", "#SQL: SELECT name FROM singer"]).map_err(|e| e.0).unwrap();
    assert_eq!(a.sql, "SELECT name FROM singer");
}

#[test]
fn a_word_the_hint_defines_is_not_asked_of_the_tables() {
    // The hint says what "salary" is: a sample reading a `salary` column is the model's slip,
    // not the question asking for what the tables lack.
    let s = Settings { refuse_unrelated: true, max_corrections: 1, ..settings() };
    let question = Question { hint: Some("salary is age times 1000".into()), ..q("What is the salary of each singer?") };
    let mut llm = script(&["SELECT name, salary FROM singer", "SELECT name, age * 1000 FROM singer"]);
    let a = ask(&question, &sample_schema(), &s, &mut llm, &mut FakeDb::default()).map_err(|e| e.0).unwrap();
    assert_eq!(a.sql, "SELECT name, age * 1000 FROM singer");
    assert_eq!(a.trace.coverage.map(|c| c.uncovered), Some(vec![]));
    assert!(a.trace.missing.is_empty());
}

#[test]
fn a_hint_does_not_cover_a_question_about_something_else() {
    // The hint's words are held, the question's own are still checked against them and the
    // tables: "planet" is in neither.
    let s = Settings { refuse_unrelated: true, ..settings() };
    let question = Question { hint: Some("by diameter".into()), ..q("Which planet is the largest?") };
    let mut llm = script(&["no", "SELECT count(*) FROM singer"]);
    let (e, trace) = ask(&question, &sample_schema(), &s, &mut llm, &mut FakeDb::default()).err().unwrap();
    assert!(matches!(&e, AskError::Unrelated { words, .. } if words == &["planet"]), "{e:?}");
    assert_eq!(trace.coverage.map(|c| c.uncovered), Some(vec!["planet".to_string()]));
}
