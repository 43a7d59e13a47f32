//! Abstention before any query is written (nl2sql.refuse_unrelated): a question about nothing
//! the role's tables hold gets a refusal, not a query.
//!
//! The words of the question are matched against what the tables say of themselves (names,
//! descriptions, shown values, the instructions chosen for it, then the value index). When some
//! word is matched the question goes on. When none is, the model is asked, behind the schema a
//! generation shows (its cached start), whether the tables hold what the question asks about:
//! yes goes on (a paraphrase: "Who earns the most?" of a `salary` column), anything else
//! refuses (no, an error, another answer, a schema too wide to show whole, a token budget).

use super::*;
use crate::prompt::answerable;
use crate::retrieval::coverage;

/// The refusal of a question the tables do not answer, or None; the coverage and the model's
/// word go into the trace either way.
pub(super) fn unrelated(
    q: &Question,
    schema: &Schema,
    settings: &Settings,
    llm: &mut dyn Llm,
    db: &mut dyn Database,
    trace: &mut Trace,
) -> Option<AskError> {
    let asked = q.asked();
    let mut vocabulary = coverage::Vocabulary::of_schema(schema);
    for line in &q.instructions {
        vocabulary.add_text(line);
    }
    let mut found = coverage::coverage(&asked, &vocabulary);
    // Values the question names (not under privacy): a stored value is something the tables hold.
    if found.unrelated() && !settings.privacy {
        for v in db.similar_values(&asked, &[]) {
            vocabulary.add_text(&v.value);
        }
        found = coverage::coverage(&asked, &vocabulary);
    }
    trace.coverage = Some(found.clone());
    // Some word matched: answered. (Asking the model whenever a word matches nothing would
    // catch columns the tables lack, but the local 1.5B model said no to about a third of the
    // benchmarks' answerable questions: see eval/RESULTS.md, Abstention.)
    if !found.unrelated() {
        return None;
    }
    let answerable = ask_model(q, schema, settings, llm, trace);
    trace.answerable = answerable;
    (answerable != Some(true)).then(|| AskError::Unrelated {
        words: found.uncovered,
        tables: schema.tables.iter().map(|t| t.ident.clone()).collect(),
        confirmed: answerable == Some(false),
    })
}

/// The model's yes or no on whether the tables hold what the question asks about (with its hint
/// and instructions, without the idioms' notes: they say how, not what); None, without asking,
/// when the schema does not fit the prompt whole (the model would say no of a table it was not
/// shown) or a token budget is set (the call would spend the answer's), and when the call fails
/// or gets another answer.
fn ask_model(q: &Question, schema: &Schema, settings: &Settings, llm: &mut dyn Llm, trace: &mut Trace) -> Option<bool> {
    if settings.token_budget.is_some() {
        return None;
    }
    let rendered = schema.render(settings.schema_max_tokens);
    if rendered.tables_omitted > 0 || rendered.detail < crate::schema::Detail::Core {
        return None;
    }
    let messages = answerable::messages(&rendered.text, &q.text, q.note_with(false).as_deref());
    let (fits, max_tokens) = trace.tokens.plan(estimate(&messages), 1, answerable::MAX_TOKENS);
    if fits == 0 {
        return None;
    }
    let secret = llm.secret().map(str::to_string);
    let waited = Instant::now();
    let reply = llm.chat(ChatRequest { messages: messages.clone(), temperature: 0.0, max_tokens });
    trace.round_trips += 1;
    trace.llm_wait_ms += ms(waited.elapsed());
    record(trace, "answerable", &messages, &reply, secret.as_deref());
    reply.ok().and_then(|c| answerable::parse(&c.content))
}
