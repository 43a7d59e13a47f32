//! The foundation's path: one generation from the whole schema, corrected in up to R rounds.

use super::failure::AskError;
use super::stages::{evaluate, grammar_for, link, sampled, show_linked, show_schema, similar_values};
use super::trace::{cand_sql, estimate, ms, record, traced, CandidateTrace};
use super::{Rejected, Run, Settings};
use crate::align::{Context, Rules};
use crate::grammar::Form;
use crate::error::{Diagnostic, Report};
use crate::model::llm::ChatRequest;
use crate::prompt::refine;
use crate::retrieval::retrieve;
use crate::schema::Detail;
use crate::{prompt::generate, Execution};
use std::time::Instant;

/// The foundation's path: one generation from the whole schema, corrected in up to R rounds.
pub(super) fn zero_shot(run: Run<'_>) -> Result<(String, Execution), AskError> {
    let Run { q, schema, settings, llm, db, trace, secret } = run;
    let mut rendered = show_schema(trace, schema, settings);
    let wide = rendered.detail < Detail::Full || rendered.tables_omitted > 0;
    if wide {
        // Linking looks the question's values up already.
        let linking = link(q, schema, settings, db, trace);
        rendered = show_linked(trace, &sampled(schema, &linking.columns, settings, db), &linking, settings);
    }
    if !settings.privacy {
        if !wide {
            trace.values = similar_values(q, &[], schema, db);
        }
        trace.values_skipped = db.skipped_value_columns();
    }
    let grammar = grammar_for(trace, llm.takes_grammar(), schema, &rendered.columns, Form::Query);
    let mut sections = retrieve::render_values(&trace.values) + &q.follow_up();
    if grammar.as_deref().is_some_and(|g| crate::grammar::offers_nothing_fits(g)) {
        sections.push_str(generate::GRAMMAR_NOTHING_FITS);
    }
    let mut messages = generate::zero_shot(&rendered.text, &sections, &q.text, q.note().as_deref());
    let mut round = 0u32;
    let mut last_failure: Option<AskError> = None;
    loop {
        let stage = if round == 0 { "generate" } else { "correct" };
        let prompt = estimate(&messages);
        let (fits, max_tokens) = trace.tokens.plan(prompt, 1, settings.max_tokens);
        if fits == 0 {
            return Err(match last_failure {
                // A correction that does not fit: the failure stands.
                Some(failed) => {
                    trace.tokens.cut.push("correction round".into());
                    failed
                }
                None => trace.tokens.over_budget(prompt),
            });
        }
        let reask = trace.tokens.room_again(prompt, 1, max_tokens);
        let req = ChatRequest { messages: messages.clone(), temperature: 0.0, max_tokens, grammar: grammar.clone(), reask };
        let waited = Instant::now();
        let reply = llm.chat(req);
        trace.round_trips += 1;
        trace.llm_wait_ms += ms(waited.elapsed());
        record(trace, stage, &messages, &reply, secret.as_deref());
        let completion = reply.map_err(|e| AskError::Llm(Report::from_diagnostic(&e).redact(secret.as_deref())))?;
        let corrects = (round > 0).then(|| trace.candidates.len().saturating_sub(1));
        let mut cand = CandidateTrace { round, corrects, raw: traced(&completion.content), ..Default::default() };
        // The foundation's path: no alignment rules.
        let plain = Settings { alignment: Rules::NONE, ..settings.clone() };
        let (sql, outcome) = evaluate(&completion.content, &plain, db, schema, Context::default(), &mut cand);
        cand.sql = sql.clone();
        match outcome {
            Ok(execution) => {
                cand.ran(&execution);
                trace.candidates.push(cand);
                let sql = cand_sql(trace.candidates.last()).unwrap_or_default();
                return Ok((sql, execution));
            }
            Err(Rejected::Refused(error)) => {
                cand.error = Some(error.message());
                trace.candidates.push(cand);
                return Err(AskError::Refused { sql: sql.unwrap_or_default(), error });
            }
            Err(Rejected::Failed(failure)) => {
                cand.error = Some(failure.summary());
                cand.error_kind = Some(failure.kind());
                trace.candidates.push(cand);
                if round >= settings.max_corrections {
                    return Err(AskError::Failed { sql, failure });
                }
                messages = refine::correction(messages, &completion.content, &failure, settings.privacy);
                last_failure = Some(AskError::Failed { sql, failure });
                round += 1;
            }
        }
    }
}

