//! A question's run in the database: the session's settings, the sandboxed database the
//! pipeline sees (sandbox/database.rs), the model, the history row and the session's last trace.

use crate::gucs;
use crate::pg::sandbox::database::Sandboxed;
use crate::pg::{catalog, errors, history, model, role, session};
use nl2sql_core::align::Rules;
use nl2sql_core::error::Report;
use nl2sql_core::prompt::refine;
use nl2sql_core::pipeline::{self, Answer, AskError, Llm, Mode, Previous, Question, Settings, Trace};
use nl2sql_core::render;
use serde_json::Value;

/// The earlier question of a follow-up: a call of the caller's history, or one passed as text.
pub fn follow_up(follows: Option<i64>, question: Option<&str>, sql: Option<&str>) -> Option<Previous> {
    match (follows, question, sql) {
        (None, None, None) => None,
        (Some(id), None, None) => Some(history::previous(id)),
        (None, q, s) => Some(Previous { question: q.unwrap_or_default().to_string(), sql: s.unwrap_or_default().to_string(), history_id: None }),
        (Some(_), ..) => errors::raise(
            &Report::new(nl2sql_core::error::SqlState::InvalidParameterValue, "a follow-up names its earlier call or passes it, not both")
                .hint("Pass follows => a history id, or previous_question and previous_sql."),
        ),
    }
}

/// Runs the pipeline, raising its errors as PostgreSQL errors.
/// The answer comes with the API key, for scrubbing what goes back to the caller (an endpoint
/// could echo the key into an answer).
pub fn answer(question: &str, hint: Option<&str>, previous: Option<Previous>) -> (Answer, Option<String>) {
    let (result, secret) = run(question, hint, previous);
    match result {
        Ok(a) => {
            unsure(&a.trace);
            (a, secret)
        }
        Err((e, _)) => errors::raise(&Report::from_diagnostic(&e).redact(secret.as_deref())),
    }
}

pub fn scrub_text(text: String, secret: Option<&str>) -> String {
    match secret.filter(|s| s.len() >= 4 && text.contains(*s)) {
        Some(s) => text.replace(s, "***"),
        None => text,
    }
}

/// Runs the pipeline for a question with the session's settings; keeps its trace for
/// nl2sql.last_trace(). Bad input and a missing endpoint raise; what the pipeline finds wrong
/// comes back as the error. The second value is the API key, for scrubbing.
/// Everything runs as the role generated SQL runs as (role.rs): a superuser's question is
/// answered as nl2sql.superuser_role, from the schema that role may read.
// One call a question: the size of the error (it carries the trace) does not matter.
#[allow(clippy::result_large_err)]
pub fn run(question: &str, hint: Option<&str>, previous: Option<Previous>) -> (Result<Answer, (AskError, Trace)>, Option<String>) {
    let asked_at = history::now();
    let q = Question { text: question.to_string(), hint: hint.map(str::to_string), previous, ..Default::default() };
    if let Err(e) = pipeline::validate(&q) {
        errors::raise(&e);
    }
    let owner = session::who();
    let mut model = model::from_settings().unwrap_or_else(|e| errors::raise(&e.report(None)));
    let secret = model.secret().map(str::to_string);
    let settings = settings();
    let mut db = Sandboxed::default();
    // A follow-up's prompt carries the earlier call's query, which may quote what it was shown.
    if let Some(id) = q.previous.as_ref().and_then(|p| p.history_id) {
        db.saw_relations(history::shown(id));
    }
    // Under nl2sql.privacy nothing is sampled: no rows are read for the prompt at all.
    let mut result = role::as_exec_role(|| {
        let schema = catalog::for_prompt(settings.privacy);
        db.saw(schema.tables.iter().filter(|t| t.columns.iter().any(|c| c.stats.is_some())).map(|t| t.oid));
        pipeline::ask(&q, &schema, &settings, &mut model, &mut db)
    });
    if gucs::on_low_confidence() == gucs::OnLowConfidence::Error {
        result = result.and_then(|a| pipeline::abstain_below(a, gucs::min_confidence()));
    }
    // The history row: the chosen query, or the error the caller is about to get.
    let (sql, error) = match &result {
        Ok(a) => (Some(scrub_text(a.sql.clone(), secret.as_deref())), None),
        Err((e, _)) => {
            let r = Report::from_diagnostic(e).redact(secret.as_deref());
            // The message without what it quoted from a row (which administrators reading the
            // history may not read): a failed query's error as a correction prompt tells it.
            let seen = format!("{question}\n{}", hint.unwrap_or_default());
            let message = match e {
                AskError::Failed { sql, failure } => refine::history_message(failure, sql.as_deref().unwrap_or_default(), &seen)
                    .map(|m| scrub_text(format!("generated query failed: {m}"), secret.as_deref())),
                // nl2sql's own words: counts, limits, the question's words, the role's tables.
                AskError::Abstained { .. } | AskError::OverBudget { .. } | AskError::EmptyQuestion | AskError::QuestionTooLong { .. } | AskError::HintTooLong { .. } | AskError::NoTables => {
                    Some(r.message.clone())
                }
                _ => None,
            }
            .unwrap_or_else(|| refine::without_data(&r.message, &seen));
            (None, Some((r.sqlstate.code().to_string(), message)))
        }
    };
    let trace = match &mut result {
        Ok(a) => &mut a.trace,
        Err((_, t)) => t,
    };
    match history::record(history::Entry::of(asked_at, question, hint, trace, sql.as_deref(), error, db.shown())) {
        Ok(id) => trace.history_id = Some(id),
        Err(why) => trace.history_skipped = Some(why),
    }
    let trace = &*trace;
    if trace.tables_omitted > 0 {
        note!(
            "the schema has {} tables; only {} fit in nl2sql.schema_max_tokens",
            trace.tables_shown + trace.tables_omitted,
            trace.tables_shown
        );
    }
    session::keep_trace(owner, serde_json::to_value(trace).ok().map(|v| scrub(v, secret.as_deref())));
    (result, secret)
}

/// The pipeline's settings from the nl2sql.* GUCs.
pub fn settings() -> Settings {
    let (agent, function, style) = gucs::alignments();
    let n = gucs::candidates();
    let agreement = gucs::agreement();
    Settings {
        mode: match gucs::mode() {
            gucs::Mode::Full => Mode::Full,
            gucs::Mode::ZeroShot => Mode::ZeroShot,
            gucs::Mode::Interactive => Mode::Interactive,
        },
        max_corrections: gucs::max_corrections(),
        max_tokens: gucs::llm_max_tokens(),
        schema_max_tokens: gucs::schema_max_tokens(),
        candidates: n,
        // No early stop: every candidate in the first wave.
        first_wave: if agreement == 0 { n } else { agreement.min(n) },
        agreement: if agreement == 0 { usize::MAX } else { agreement },
        temperature: gucs::temperature(),
        extraction: gucs::use_extraction(),
        extraction_min_tokens: gucs::extraction_min_tokens(),
        extraction_max_tokens: gucs::extraction_max_tokens(),
        chain_of_thought: gucs::use_chain_of_thought(),
        alignment: Rules { agent, function, style },
        column_matches: gucs::column_matches(),
        generators: gucs::generators(),
        examples: gucs::examples(),
        privacy: session::privacy(),
        token_budget: gucs::max_tokens_per_call(),
        agent_max_turns: gucs::agent_max_turns(),
        // No early stop (nl2sql.agreement = 0): no answer stands alone either.
        alone: (agreement > 0).then(gucs::alone_confidence),
        instructions: gucs::instructions(),
        refuse_unrelated: gucs::refuse_unrelated(),
    }
}

/// A NOTICE when the candidates agree less than nl2sql.min_confidence (nl2sql.on_low_confidence
/// = notice; with error the call abstained already).
fn unsure(trace: &Trace) {
    let (Some(confidence), Some(vote)) = (trace.confidence, trace.vote.as_ref()) else { return };
    let min = gucs::min_confidence();
    if confidence >= min {
        return;
    }
    let votes = vote.groups.first().map(|g| g.votes).unwrap_or(0);
    errors::notice(
        "nl2sql is unsure of this answer".into(),
        format!(
            "{votes} of {} candidates agree on its rows (confidence {confidence:.2}, nl2sql.min_confidence is {min:.2}).",
            trace.samples
        ),
        "Check the query, add a hint naming tables, columns or values, or see nl2sql_explain() for the other candidates.".into(),
    );
}

/// Replaces the API key wherever it appears, keys of objects included (a model could echo
/// what it was never sent; an endpoint's error body could hold it), and renders every string
/// with render::lines (a trace holds names, values and answers other roles and the model chose:
/// jsonb escapes line breaks and control characters, not separators or bidirectional overrides).
pub fn scrub(v: Value, secret: Option<&str>) -> Value {
    let secret = secret.filter(|s| s.len() >= 4);
    let text = |s: String| {
        let s = match secret {
            Some(k) if s.contains(k) => s.replace(k, "***"),
            _ => s,
        };
        render::lines(&s)
    };
    match v {
        Value::String(s) => Value::String(text(s)),
        Value::Array(a) => Value::Array(a.into_iter().map(|x| scrub(x, secret)).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, x)| (text(k), scrub(x, secret))).collect()),
        other => other,
    }
}
