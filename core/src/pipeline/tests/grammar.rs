//! The grammar (nl2sql.grammar): built from the names each prompt shows, sent with every request
//! that asks for SQL where the endpoint takes one, and nowhere else.

use super::*;

/// The scripted model, at an endpoint that takes a grammar.
struct Grammatical(Script);

impl Llm for Grammatical {
    fn chat(&mut self, req: ChatRequest) -> Result<Completion, LlmError> {
        let bytes = req.grammar.as_ref().map(|g| g.len());
        self.0.chat(req).map(|c| Completion { grammar: bytes, ..c })
    }
    fn takes_grammar(&self) -> bool {
        true
    }
}

#[test]
fn a_zero_shot_question_is_asked_under_the_grammar_of_its_prompt() {
    let mut llm = Grammatical(script(&["```sql\nSELECT count(*) FROM singer;\n```"]));
    let a = ask(&q("How many singers?"), &sample_schema(), &settings(), &mut llm, &mut FakeDb::default()).expect("answer");
    let sent = llm.0.seen[0].grammar.clone().expect("a grammar was sent");
    assert!(sent.starts_with("root ::= query-block\n") && sent.contains("relation ::= "), "{sent}");
    // the names the prompt shows; the prompt is the one a call without a grammar gets, and the
    // line on what to write where no column fits
    assert!(sent.contains("\"singer\"") && sent.contains("\\\"Order Items\\\""), "{sent}");
    let mut plain = script(&["```sql\nSELECT count(*) FROM singer;\n```"]);
    let _ = ask(&q("How many singers?"), &sample_schema(), &settings(), &mut plain, &mut FakeDb::default()).expect("answer");
    let with = &llm.0.prompts()[0][1].content;
    assert_eq!(with.replace(crate::prompt::generate::GRAMMAR_NOTHING_FITS, ""), plain.prompts()[0][1].content);
    assert_eq!(llm.0.prompts()[0][0], plain.prompts()[0][0]);
    let g = a.trace.grammar.clone().expect("traced");
    assert_eq!((g.bytes, g.not_built.as_deref()), (sent.len(), None));
    assert!(g.relations == sample_schema().tables.len() && g.columns > g.relations, "{g:?}");
    assert_eq!(a.trace.llm_calls[0].grammar_bytes, Some(sent.len()));
}

#[test]
fn an_endpoint_without_a_grammar_gets_the_prompt_it_got_before() {
    let mut llm = script(&["```sql\nSELECT count(*) FROM singer;\n```"]);
    let a = ask(&q("How many singers?"), &sample_schema(), &settings(), &mut llm, &mut FakeDb::default()).expect("answer");
    assert_eq!(llm.seen[0].grammar, None);
    assert!(a.trace.grammar.is_none() && a.trace.llm_calls[0].grammar_bytes.is_none());
}

#[test]
fn candidates_follow_the_chain_of_thought_form_and_corrections_the_query_form() {
    let mut llm = Grammatical(script(&[EXTRACTED, "#SQL: SELECT nickname FROM singer", "```sql\nSELECT name FROM singer\n```"]));
    let s = Settings { candidates: 1, first_wave: 1, ..full() };
    let _ = ask(&q("Names of singers?"), &sample_schema(), &s, &mut llm, &mut FakeDb::default());
    let seen = &llm.0.seen;
    // the extraction asks for no SQL: no grammar
    assert_eq!(seen[0].grammar, None);
    let g = seen[1].grammar.as_deref().expect("candidate grammar");
    assert!(g.starts_with("root ::= thought query-block\n"), "{g}");
    let correction = seen.get(2).and_then(|r| r.grammar.as_deref()).expect("correction grammar");
    assert!(correction.starts_with("root ::= query-block\n"), "{correction}");
}

#[test]
fn nothing_fits_is_written_under_the_grammar_and_refused_as_a_missing_name() {
    // Under a grammar the model cannot write `salary`; told how, it writes unknown_salary where
    // no column holds it, and that is the evidence abstention reads, by the name it stands for.
    let s = Settings { refuse_unrelated: true, max_corrections: 1, ..settings() };
    let answers = ["SELECT name, unknown_salary FROM singer", "SELECT s.name, s.unknown_salary FROM singer AS s"];
    let mut llm = Grammatical(Script { answers: answers.iter().map(|a| Ok(a.to_string())).collect(), seen: vec![] });
    let (e, trace) = ask(&q("What is the salary of each singer?"), &sample_schema(), &s, &mut llm, &mut FakeDb::default()).err().unwrap();
    assert!(matches!(&e, AskError::Missing { words, names, .. } if words == &["salary"] && names == &["unknown_salary"]), "{e:?}");
    assert_eq!(e.sqlstate().code(), "P0002");
    assert_eq!(trace.missing, ["unknown_salary"]);
    // the alignment left it as written (no "fix" to another column)
    assert!(trace.candidates.iter().all(|c| c.rules.is_empty()), "{:?}", trace.candidates);
    let prompt = &llm.0.prompts()[0][1].content;
    assert!(prompt.contains("write unknown_ and what it asks for"), "{prompt}");
    // Without a grammar the prompt says nothing of it.
    let mut plain = script(&["SELECT name FROM singer"]);
    let _ = ask(&q("What is the name of each singer?"), &sample_schema(), &settings(), &mut plain, &mut FakeDb::default());
    assert!(!plain.prompts()[0][1].content.contains("unknown_"));
    // A name no word of the question asked for stays a failure, reserved form or not.
    let mut llm = Grammatical(Script { answers: vec![Ok("SELECT unknown_colour FROM singer".into()), Ok("SELECT unknown_colour FROM singer WHERE true".into())], seen: vec![] });
    let (e, _) = ask(&q("Which singers come from France?"), &sample_schema(), &s, &mut llm, &mut FakeDb::default()).err().unwrap();
    assert!(matches!(&e, AskError::Failed { .. }), "{e:?}");
}
