//! Abstention before any query is written (nl2sql.refuse_unrelated): a question about nothing
//! the role's tables hold gets a refusal, not a query.
//!
//! The words of the question are matched against what the tables say of themselves (names,
//! descriptions, shown values, the instructions chosen for it, then the value index). When some
//! word is matched the question goes on. When none is, the model is asked, behind the schema a
//! generation shows (its cached start), whether the tables hold what the question asks about:
//! yes goes on (a paraphrase: "Who earns the most?" of a `salary` column), anything else
//! refuses (no, an error, another answer, a schema too wide to show whole, a token budget).
//!
//! After generation, a question none of whose queries ran is refused when the last one failed
//! on a name the tables lack that spells a word of the question nothing matched: asked for "the
//! salary of each singer" of `singer(name, age)`, the model writes `s.salary`, and the correction
//! still does. That is the model itself saying what the question wants and the tables do not
//! hold; its failure becomes a refusal saying so. The same holds when most of the model's first
//! answers (its samples, before any correction) failed so, even where a correction then ran:
//! the correction was told the name does not exist and answered with what does, which is
//! another question's answer.

use super::failure::AskError;
use super::trace::{cand_sql, estimate, ms, record, CandidateTrace, Trace};
use super::{Database, Llm, Question, Settings};
use crate::model::llm::ChatRequest;
use crate::prompt::refine::Failure;
use crate::schema::Schema;
use std::time::Instant;
use crate::prompt::answerable;
use crate::retrieval::coverage;
use crate::prompt::refine::FailureKind;
use std::collections::HashSet;

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
    // What the caller and the curators said: a word the hint or a chosen instruction holds is
    // defined there ("revenue" as price times quantity), not asked of the tables.
    for line in q.instructions.iter().chain(&q.hint) {
        vocabulary.add_text(line);
    }
    // The question's own words are checked (follow-ups never come here), against the hint too:
    // a hint's words would otherwise cover themselves.
    let mut found = coverage::coverage(&q.text, &vocabulary);
    // Values the question names (not under privacy): a stored value is something the tables hold.
    if found.unrelated() && !settings.privacy {
        for v in db.similar_values(&asked, &[], &schema.strangers()) {
            vocabulary.add_text(&v.value);
        }
        found = coverage::coverage(&q.text, &vocabulary);
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
        tables: readable(schema),
        confirmed: answerable == Some(false),
    })
}

/// The model's yes or no on whether the tables hold what the question asks about (with its hint
/// and instructions); None, without asking,
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
    let messages = answerable::messages(&rendered.text, &q.text, q.note().as_deref());
    let (fits, max_tokens) = trace.tokens.plan(estimate(&messages), 1, answerable::MAX_TOKENS);
    if fits == 0 {
        return None;
    }
    let secret = llm.secret().map(str::to_string);
    let waited = Instant::now();
    let reply = llm.chat(ChatRequest { messages: messages.clone(), temperature: 0.0, max_tokens, grammar: None, reask: false });
    trace.round_trips += 1;
    trace.llm_wait_ms += ms(waited.elapsed());
    record(trace, "answerable", &messages, &reply, secret.as_deref());
    reply.ok().and_then(|c| answerable::parse(&c.content))
}

/// The refusal of a question none of whose queries ran, when the last one (`sql`, the most
/// corrected) failed for want of a table or column (`failure`) and reads names the tables lack
/// that spell words of the question the schema did not cover (the coverage `unrelated`
/// recorded in `trace`); None otherwise.
pub(super) fn missing(schema: &Schema, trace: &Trace, sql: &str, failure: &Failure) -> Option<AskError> {
    if !matches!(failure.kind(), FailureKind::UndefinedColumn | FailureKind::UndefinedTable) {
        return None;
    }
    let (words, names) = asked_names(&known_names(schema), trace, sql)?;
    Some(AskError::Missing { words, names, sql: sql.to_string(), tables: readable(schema), sampled: None })
}

/// The refusal of a question most of whose sampled queries (the model's first answers, before
/// any correction) failed for want of a name the question asked for, whatever a correction
/// made of them afterwards: asked for "the salary of each singer", three of five samples read
/// `salary`, and the correction that drops it answers something else. More than half of the
/// samples must fail so, each on such a name; one sample (zero-shot) is the whole of them.
pub(super) fn asked_for(schema: &Schema, trace: &Trace) -> Option<AskError> {
    let samples: Vec<&CandidateTrace> = trace.candidates.iter().filter(|c| c.round == 0).collect();
    let mut words: Vec<String> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut first: Option<String> = None;
    let mut failed = 0;
    let known = known_names(schema);
    for c in &samples {
        crate::interrupt::check();
        let undefined = matches!(c.error_kind, Some(FailureKind::UndefinedColumn | FailureKind::UndefinedTable));
        let Some(sql) = cand_sql(Some(c)).filter(|_| undefined && !c.ok) else { continue };
        let Some((w, n)) = asked_names(&known, trace, &sql) else { continue };
        failed += 1;
        words.extend(w);
        names.extend(n);
        first.get_or_insert(sql);
    }
    if failed * 2 <= samples.len() {
        return None;
    }
    for v in [&mut words, &mut names] {
        v.sort();
        v.dedup();
    }
    Some(AskError::Missing { words, names, sql: first?, tables: readable(schema), sampled: Some((failed, samples.len())) })
}

/// The schema's table and column names, lowercase: what a query may read.
fn known_names(schema: &Schema) -> HashSet<String> {
    schema.tables.iter().flat_map(|t| std::iter::once(&t.name).chain(t.columns.iter().map(|c| &c.name))).map(|n| n.to_lowercase()).collect()
}

/// The names `sql` reads that are not among the `known` ones and that spell words of the
/// question the schema did not cover (the coverage recorded in `trace`), with those words, each
/// sorted; None when there are none.
fn asked_names(known: &HashSet<String>, trace: &Trace, sql: &str) -> Option<(Vec<String>, Vec<String>)> {
    let uncovered = &trace.coverage.as_ref()?.uncovered;
    if uncovered.is_empty() {
        return None;
    }
    let is_known = |n: &str| known.contains(&n.to_lowercase());
    let mut words: Vec<String> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for name in crate::sqlinfo::unknown_names(sql, &is_known) {
        crate::interrupt::check();
        // Written under a grammar as "nothing fits": the words are those of what follows.
        let folded = name.to_lowercase();
        let asked_for = folded.strip_prefix(crate::grammar::NOTHING_FITS).filter(|n| !n.is_empty()).unwrap_or(&folded);
        let mut spelled = coverage::Vocabulary::default();
        spelled.add_name(asked_for);
        let asked: Vec<&String> = uncovered.iter().filter(|w| spelled.covers(w)).collect();
        if !asked.is_empty() {
            words.extend(asked.into_iter().cloned());
            names.push(name);
        }
    }
    if names.is_empty() {
        return None;
    }
    words.sort();
    words.dedup();
    names.sort();
    names.dedup();
    Some((words, names))
}

/// The tables the role may read, as written in SQL (rendered: a name is another role's text):
/// what a refusal's HINT offers instead.
fn readable(schema: &Schema) -> Vec<String> {
    schema.tables.iter().map(|t| crate::render::ident(&t.ident)).collect()
}
