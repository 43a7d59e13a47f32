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
    // the names the prompt shows; the prompt is the one a call without a grammar gets
    assert!(sent.contains("\"singer\"") && sent.contains("\\\"Order Items\\\""), "{sent}");
    let mut plain = script(&["```sql\nSELECT count(*) FROM singer;\n```"]);
    let _ = ask(&q("How many singers?"), &sample_schema(), &settings(), &mut plain, &mut FakeDb::default()).expect("answer");
    assert_eq!(llm.0.prompts()[0], plain.prompts()[0]);
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
