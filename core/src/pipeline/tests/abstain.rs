//! Abstention by the question's words and the model's yes or no, and the idioms' notes.

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

#[test]
fn idioms_the_question_calls_for_follow_it_and_are_traced() {
    use crate::prompt::idioms::Idioms;
    let mut dated = sample_schema();
    dated.tables[0].columns[0].category = "D".into();
    let ask_with = |schema: &Schema, idioms: Idioms, question: &str| {
        let s = Settings { alignment: Rules { idioms, ..Rules::NONE }, ..settings() };
        let mut llm = Script { answers: vec![Ok("SELECT count(*) FROM singer".into())], seen: vec![] };
        let a = ask(&q(question), schema, &s, &mut llm, &mut FakeDb::default()).map_err(|e| e.0).unwrap();
        (llm.prompts()[0][1].content.clone(), a.trace.idioms)
    };
    let (prompt, traced) = ask_with(&dated, Idioms::ALL, "What share of singers joined in the past 30 days?");
    assert_eq!(traced, ["dates", "ratios"]);
    let tail = prompt.split("### Question: What share of singers joined in the past 30 days?\n### Note: ").nth(1).unwrap_or_default();
    assert!(tail.starts_with("Dates relative to today count from CURRENT_DATE") && tail.contains("\nA ratio, rate or percentage"), "{prompt}");
    // Without a date or time column, no note on dates; switched off, none at all.
    let (_, traced) = ask_with(&sample_schema(), Idioms::ALL, "What share of singers joined in the past 30 days?");
    assert_eq!(traced, ["ratios"]);
    let (prompt, traced) = ask_with(&dated, Idioms::NONE, "What share of singers joined in the past 30 days?");
    assert!(traced.is_empty() && !prompt.contains("### Note"));
    // A question calling for none.
    let (prompt, traced) = ask_with(&dated, Idioms::ALL, "How many singers are there?");
    assert!(traced.is_empty() && !prompt.contains("### Note"));
}
