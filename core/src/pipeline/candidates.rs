//! Stages 6 to 8 of the full path, for one question: candidates asked in waves that stop once
//! they agree (or once the first generator's answer stands alone), each aligned, checked and run
//! as it arrives; failed ones corrected while nothing returned rows; the vote among what ran.

use super::failure::AskError;
use super::stages::{evaluate, normal_form};
use super::trace::{cand_sql, estimate, ms, record, traced, CandidateTrace, Trace};
use super::vote::{self, Ballot};
use super::{results, Database, Generator, Llm, Rejected, Settings};
use crate::align::Context;
use crate::error::{Diagnostic, Report};
use crate::model::answer::extract_sql;
use crate::model::llm::{ChatRequest, LlmError, Message};
use crate::prompt::refine::{self, Failure};
use crate::safety::guard::{self, GuardError};
use crate::schema::Schema;
use crate::Execution;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

/// A candidate of the full path and its result.
#[derive(Default)]
struct Pool {
    /// Executed candidates, by trace index: (normal form, execution).
    executed: Vec<(usize, String, Execution)>,
    /// Failed candidates, by trace index, with their conversation for the correction round.
    failed: Vec<(usize, Vec<Message>, String, Failure)>,
    /// Normal forms of failed and refused candidates, by trace index: the same query again is
    /// neither run nor corrected twice.
    failed_forms: Vec<(usize, String)>,
    refused: Option<(String, GuardError)>,
    /// The last failure, with the SQL that failed, for the error when nothing succeeds.
    last: Option<(Option<String>, Failure)>,
    /// The conversation that produced each executed candidate, by trace index (for the
    /// correction of an empty result).
    conversations: HashMap<usize, Vec<Message>>,
    /// Candidates already sent back for correction.
    corrected: HashSet<usize>,
    /// Failed candidates a round left out (more than it corrects at once).
    skipped: HashSet<usize>,
}

/// A generator's prompt and the grammar its answer follows (None: asked without one).
pub(super) type Prompt = (Generator, Vec<Message>, Option<Arc<String>>);

/// One question's candidates: the prompts they are asked with, and what they are run, judged
/// and traced with.
pub(super) struct Asking<'a> {
    pub prompts: &'a [Prompt],
    /// The grammar of the corrections, which answer with the query alone.
    pub correction: Option<Arc<String>>,
    pub settings: &'a Settings,
    pub llm: &'a mut dyn Llm,
    pub db: &'a mut dyn Database,
    pub schema: &'a Schema,
    pub cx: Context<'a>,
    pub trace: &'a mut Trace,
    pub secret: Option<&'a str>,
}

impl Asking<'_> {
    /// Stages 6 to 8: the answer, or the last failure when nothing ran.
    pub(super) fn answer(mut self) -> Result<(String, Execution), AskError> {
        let mut pool = Pool::default();
        self.generate(&mut pool)?;
        self.correct(&mut pool);
        self.trace.corrections_skipped = pool.skipped.difference(&pool.corrected).count();
        vote_on(&mut pool, self.trace)
    }

    fn llm_error(&self, e: &LlmError) -> AskError {
        AskError::Llm(Report::from_diagnostic(e).redact(self.secret))
    }

    /// Which generator (by index into the prompts) at which temperature, wave by wave: with one
    /// generator, `first_wave` samples of it, then the rest; with several, each once at
    /// temperature 0 (their agreement is not sampling noise), then the rest in turn.
    fn waves(&self) -> Vec<Vec<(usize, f32)>> {
        let (settings, generators) = (self.settings, self.prompts.len());
        let n = settings.candidates.max(1);
        let temperature = if n == 1 { 0.0 } else { settings.temperature };
        if generators == 1 {
            let first = settings.first_wave.clamp(1, n);
            return vec![vec![(0, temperature); first], vec![(0, temperature); n - first]];
        }
        let mut first: Vec<(usize, f32)> = (0..generators).map(|g| (g, 0.0)).collect();
        let rest: Vec<(usize, f32)> =
            (0..n.saturating_sub(generators)).map(|i| (i % generators, settings.temperature.max(0.1))).collect();
        // No early stop (nl2sql.agreement = 0): every candidate at once.
        if settings.first_wave >= n {
            first.extend(rest);
            vec![first]
        } else {
            vec![first, rest]
        }
    }

    /// Stage 6, the candidates, in waves that stop once they agree (or once a first answer the
    /// model was sure of runs and returns rows); each aligned, checked and run as it arrives.
    fn generate(&mut self, pool: &mut Pool) -> Result<(), AskError> {
        let prompt_sizes: Vec<usize> = self.prompts.iter().map(|(_, m, _)| estimate(m)).collect();
        for (w, mut wave) in self.waves().into_iter().enumerate() {
            if wave.is_empty() {
                continue;
            }
            if w > 0 && agreed(pool, self.trace, self.settings) {
                self.trace.stopped_early = true;
                break;
            }
            // The token budget: as many of the wave as fit, each with the completion left to it.
            let largest = wave.iter().map(|&(g, _)| prompt_sizes[g]).max().unwrap_or(0);
            let (fits, max_tokens) = self.trace.tokens.plan(largest, wave.len(), self.settings.max_tokens);
            if fits < wave.len() {
                self.trace.tokens.cut.push(format!("{} of {} candidates in wave {}", wave.len() - fits, wave.len(), w + 1));
                wave.truncate(fits);
            }
            if wave.is_empty() {
                if w == 0 {
                    return Err(self.trace.tokens.over_budget(largest));
                }
                break;
            }
            let size = wave.len();
            let reask = self.trace.tokens.room_again(largest, size, max_tokens);
            self.trace.waves += 1;
            let mut errors = Vec::new();
            // nl2sql.alone_confidence: the first generator is asked alone, and an answer that runs
            // and returns rows, and that the model was sure enough of token by token, is the
            // answer. A threshold above 0 needs the endpoint's scores.
            let alone = self.settings.alone.filter(|&p| p <= 0.0 || self.llm.can_score());
            if let Some(threshold) = alone.filter(|_| w == 0 && size > 1 && self.prompts.len() > 1) {
                let (g, t) = wave.remove(0);
                match self.ask_alone(g, t, (max_tokens, reask), threshold, pool) {
                    Ok(true) => break,
                    Ok(false) => {}
                    // The endpoint itself is unreachable or refuses us: the others would fail alike.
                    Err(e) if e.is_the_endpoints() => return Err(self.llm_error(&e)),
                    Err(e) => errors.push(e),
                }
            }
            self.ask_wave(&wave, (max_tokens, reask), pool, &mut errors);
            // Every request of the first wave failed: the endpoint is down, say so.
            if w == 0 && errors.len() == size {
                return Err(self.llm_error(&errors[0]));
            }
        }
        Ok(())
    }

    /// The first generator asked alone (scored where the endpoint can); whether its answer
    /// stands alone: it ran, returned rows, and the model was sure enough of it.
    fn ask_alone(&mut self, g: usize, t: f32, (max_tokens, reask): (u32, bool), threshold: f32, pool: &mut Pool) -> Result<bool, LlmError> {
        let prompts = self.prompts;
        let waited = Instant::now();
        let req = ChatRequest { messages: prompts[g].1.clone(), temperature: t, max_tokens, grammar: prompts[g].2.clone(), reask };
        let reply = if self.llm.can_score() { self.llm.chat_scored(req) } else { self.llm.chat(req) };
        self.trace.round_trips += 1;
        self.trace.llm_wait_ms += ms(waited.elapsed());
        let (generator, messages, _) = &prompts[g];
        record(self.trace, "generate", messages, &reply, self.secret);
        let c = reply?;
        let at = self.trace.candidates.len();
        self.consider(&c.content, 0, None, Some(generator.name()), messages.clone(), pool);
        let Some(cand) = self.trace.candidates.get_mut(at) else { return Ok(false) };
        cand.confidence = c.confidence;
        let sure = threshold < 1.0 && (threshold <= 0.0 || c.confidence.is_some_and(|p| p >= threshold));
        if sure && cand.ok && cand.rows.is_some_and(|r| r > 0) {
            self.trace.alone = c.confidence;
            self.trace.stopped_early = true;
            return Ok(true);
        }
        Ok(false)
    }

    /// One wave's requests at once: one generator's samples in one request where the endpoint
    /// takes n; each answer considered as it comes, each failure kept in `errors`.
    fn ask_wave(&mut self, wave: &[(usize, f32)], (max_tokens, reask): (u32, bool), pool: &mut Pool, errors: &mut Vec<LlmError>) {
        let prompts = self.prompts;
        let waited = Instant::now();
        let replies = match wave {
            [] => return,
            [(g, t), ..] if wave.iter().all(|x| x == &(*g, *t)) => {
                self.llm.sample(ChatRequest { messages: prompts[*g].1.clone(), temperature: *t, max_tokens, grammar: prompts[*g].2.clone(), reask }, wave.len())
            }
            _ => self.llm.chat_many(
                wave.iter().map(|&(g, t)| ChatRequest { messages: prompts[g].1.clone(), temperature: t, max_tokens, grammar: prompts[g].2.clone(), reask }).collect(),
            ),
        };
        self.trace.round_trips += 1;
        self.trace.llm_wait_ms += ms(waited.elapsed());
        for (reply, &(g, _)) in replies.into_iter().zip(wave) {
            let (generator, messages, _) = &prompts[g];
            record(self.trace, "generate", messages, &reply, self.secret);
            match reply {
                Ok(c) => self.consider(&c.content, 0, None, Some(generator.name()), messages.clone(), pool),
                Err(e) => errors.push(e),
            }
        }
    }

    /// Stage 7, corrections by error type, concurrently, while no candidate returned rows. Where
    /// one did, the vote decides among what ran: measured on both benchmarks, a correction then
    /// never turned a wrong answer right, and cost a model call per failed candidate.
    fn correct(&mut self, pool: &mut Pool) {
        // As many corrections at once as the first wave asked candidates: past what the endpoint
        // serves together they queue, and on the local model a queued correction costs a whole
        // generation while, measured, it mostly writes the failed query again.
        let width = self.waves().first().map_or(1, Vec::len).max(1);
        for round in 1..=self.settings.max_corrections {
            if pool.executed.iter().any(|(_, _, e)| !e.rows.is_empty()) {
                break;
            }
            // Nothing returned rows: the empty ones are worth another look too, once each, unless
            // two sampled answers ran (the same query or not), all empty. Then the empty result
            // is taken as the answer: measured on spider-pg (five runs), such corrections wrote
            // the same query again 39 times of 44 and never one that returned rows. Failed
            // candidates are still corrected, and a correction's empty result does not count.
            let agreed = self.trace.candidates.iter().filter(|c| c.round == 0 && c.ok).count() >= 2;
            self.trace.empty_agreed |= agreed;
            for (i, _, e) in pool.executed.iter().filter(|_| !agreed) {
                if e.rows.is_empty() && !pool.corrected.contains(i) {
                    let conv = pool.conversations.get(i).cloned().unwrap_or_else(|| self.prompts[0].1.clone());
                    let raw = self.trace.candidates.get(*i).map(|c| c.raw.clone()).unwrap_or_default();
                    pool.failed.push((*i, conv, raw, Failure::Empty));
                }
            }
            let mut failed = to_correct(std::mem::take(&mut pool.failed), width);
            if failed.is_empty() {
                break;
            }
            pool.skipped.extend(failed.iter().skip(width).map(|(i, ..)| *i));
            failed.truncate(width);
            let mut convs: Vec<Vec<Message>> = failed.iter().map(|(_, conv, raw, f)| refine::correction(conv.clone(), raw, f, self.settings.privacy)).collect();
            // The token budget: as many corrections as fit, the first failures first.
            let largest = convs.iter().map(|m| estimate(m)).max().unwrap_or(0);
            let (fits, max_tokens) = self.trace.tokens.plan(largest, convs.len(), self.settings.max_tokens);
            if fits < convs.len() {
                self.trace.tokens.cut.push(format!("{} of {} corrections in round {round}", convs.len() - fits, convs.len()));
                convs.truncate(fits);
                failed.truncate(fits);
            }
            if convs.is_empty() {
                break;
            }
            pool.corrected.extend(failed.iter().map(|(i, ..)| *i));
            let reask = self.trace.tokens.room_again(largest, convs.len(), max_tokens);
            let reqs = convs.iter().map(|m| ChatRequest { messages: m.clone(), temperature: 0.0, max_tokens, grammar: self.correction.clone(), reask }).collect();
            let waited = Instant::now();
            let replies = self.llm.chat_many(reqs);
            self.trace.round_trips += 1;
            self.trace.llm_wait_ms += ms(waited.elapsed());
            for ((reply, conv), (parent, ..)) in replies.into_iter().zip(convs).zip(failed) {
                record(self.trace, "correct", &conv, &reply, self.secret);
                if let Ok(c) = reply {
                    let generator = self.trace.candidates.get(parent).and_then(|p| p.generator);
                    self.consider(&c.content, round, Some(parent), generator, conv, pool);
                }
            }
        }
    }

    /// Evaluates one answer into the pool: duplicates of an executed candidate add its weight
    /// without running again.
    fn consider(&mut self, content: &str, round: u32, corrects: Option<usize>, generator: Option<&'static str>, conversation: Vec<Message>, pool: &mut Pool) {
        let index = self.trace.candidates.len();
        let mut cand = CandidateTrace { round, corrects, generator, raw: traced(content), ..Default::default() };
        // Same query as an executed candidate: a vote for it, no second run.
        if let Some(text) = extract_sql(content) {
            if guard::check(&text).is_ok() {
                let form = normal_form(&text);
                if let Some((first, _, _)) = pool.executed.iter().find(|(i, f, _)| {
                    *f == form || self.trace.candidates.get(*i).and_then(|c| c.sql.as_deref()).is_some_and(|s| normal_form(s) == form)
                }) {
                    cand.sql = Some(text);
                    cand.duplicate_of = Some(*first);
                    cand.ok = true;
                    self.trace.candidates.push(cand);
                    return;
                }
                if let Some((first, _)) = pool.failed_forms.iter().find(|(_, f)| *f == form) {
                    cand.sql = Some(text);
                    cand.duplicate_of = Some(*first);
                    cand.error = self.trace.candidates.get(*first).and_then(|c| c.error.clone());
                    cand.error_kind = self.trace.candidates.get(*first).and_then(|c| c.error_kind);
                    self.trace.candidates.push(cand);
                    return;
                }
            }
        }
        let (sql, outcome) = evaluate(content, self.settings, self.db, self.schema, self.cx, &mut cand);
        cand.sql = sql.clone();
        match outcome {
            Ok(execution) => {
                cand.ran(&execution);
                let form = normal_form(&cand_sql(Some(&cand)).unwrap_or_default());
                self.trace.candidates.push(cand);
                pool.executed.push((index, form, execution));
                pool.conversations.insert(index, conversation);
            }
            Err(Rejected::Refused(error)) => {
                cand.error = Some(error.message());
                if let Some(s) = &sql {
                    pool.failed_forms.push((index, normal_form(s)));
                }
                self.trace.candidates.push(cand);
                if pool.refused.is_none() {
                    pool.refused = Some((sql.unwrap_or_default(), error));
                }
            }
            Err(Rejected::Failed(failure)) => {
                cand.error = Some(failure.summary());
                cand.error_kind = Some(failure.kind());
                if let Failure::Execution(r) | Failure::Analysis(r) = &failure {
                    cand.sqlstate = Some(r.sqlstate.code().to_string());
                }
                let failed_sql = cand_sql(Some(&cand));
                if let Some(s) = &cand.sql {
                    pool.failed_forms.push((index, normal_form(s)));
                }
                self.trace.candidates.push(cand);
                pool.last = Some((failed_sql, failure.clone()));
                pool.failed.push((index, conversation, content.to_string(), failure));
            }
        }
    }
}

/// The failed candidates in the order they are worth correcting: the first of each distinct
/// failure (the same missing column twice is one correction's worth), then the others, each
/// group in the order they failed.
fn to_correct<T>(failed: Vec<(usize, T, String, Failure)>, width: usize) -> Vec<(usize, T, String, Failure)> {
    if failed.len() <= width {
        return failed;
    }
    let mut seen = HashSet::new();
    // An error raised while the query ran counts as the model is told it, not by its words.
    let key = |f: &Failure| match f {
        Failure::Execution(r) => crate::prompt::ran::error_text(r.sqlstate.code(), &r.message),
        _ => f.summary(),
    };
    let (first, rest): (Vec<_>, Vec<_>) = failed.into_iter().partition(|(.., f)| seen.insert(key(f)));
    first.into_iter().chain(rest).collect()
}

/// Stage 8, the vote among the candidates that ran; with none, the last failure.
fn vote_on(pool: &mut Pool, trace: &mut Trace) -> Result<(String, Execution), AskError> {
    let ballots: Vec<Ballot> = ballots(pool, trace);
    trace.samples = samples(trace);
    if let Some(outcome) = vote::vote(&ballots, samples(trace)) {
        let winner = outcome.winner;
        trace.confidence = Some(outcome.confidence);
        trace.vote = Some(outcome);
        if let Some((_, _, exec)) = pool.executed.iter().find(|(i, _, _)| *i == winner) {
            let sql = cand_sql(trace.candidates.get(winner)).unwrap_or_default();
            return Ok((sql, exec.clone()));
        }
    }
    // Nothing ran: the last failure (the most corrected attempt), a refusal only when every
    // candidate was refused.
    match (pool.last.take(), pool.refused.take()) {
        (Some((sql, failure)), _) => Err(AskError::Failed { sql, failure }),
        (None, Some((sql, error))) => Err(AskError::Refused { sql, error }),
        (None, None) => Err(AskError::Failed { sql: None, failure: Failure::Syntax(GuardError::NoStatement) }),
    }
}

/// Whether the executed candidates already agree enough to stop sampling: `nl2sql.agreement`
/// of them return the same rows; or, where none returned rows, the prompts of that many
/// generators (two at least) wrote one query, which ran and returned none. That empty result is
/// the answer, as the correction round takes it: measured on spider-pg (two runs), where the
/// first wave's two prompts wrote the same query and it returned no rows (11 questions),
/// the empty result was the right one every time, and the second wave (3 to 13 s each) kept it
/// or replaced it with a wrong one. Samples of one prompt may share a wrong literal, and two
/// different queries, both empty, are no agreement: there the second wave goes on.
fn agreed(pool: &Pool, trace: &Trace, settings: &Settings) -> bool {
    let ballots = ballots(pool, trace);
    if ballots.iter().all(|b| b.rows.is_empty()) {
        return ballots.iter().any(|b| generators_of(trace, b.candidate) >= settings.agreement.max(2));
    }
    vote::vote(&ballots, samples(trace))
        .and_then(|o| o.groups.first().map(|g| g.votes >= settings.agreement && g.rows > 0))
        .unwrap_or(false)
}

/// How many generators' prompts have candidate `at` as their samples' answer.
fn generators_of(trace: &Trace, at: usize) -> usize {
    let mut seen = HashSet::new();
    for (j, c) in trace.candidates.iter().enumerate().filter(|(_, c)| c.round == 0) {
        if final_answer(trace, j) == Some(at) {
            seen.extend(c.generator);
        }
    }
    seen.len()
}

/// Candidates sampled from the model (round 0): what confidence is a share of.
fn samples(trace: &Trace) -> usize {
    trace.candidates.iter().filter(|c| c.round == 0).count()
}

/// Where a sample's answer ended up: a duplicate goes to the candidate it duplicates, a
/// failed or empty one to its correction, until an executed candidate (or a dead end).
fn final_answer(trace: &Trace, start: usize) -> Option<usize> {
    let mut at = start;
    for _ in 0..=trace.candidates.len() {
        let c = trace.candidates.get(at)?;
        if let Some(d) = c.duplicate_of {
            at = d;
            continue;
        }
        let settled = c.ok && c.rows.is_some_and(|r| r > 0);
        match trace.candidates.iter().position(|x| x.corrects == Some(at)) {
            Some(fix) if !settled => at = fix,
            _ => return c.rows.is_some().then_some(at),
        }
    }
    None
}

/// One ballot an executed candidate; its weight is the samples whose answer it is.
fn ballots(pool: &Pool, trace: &Trace) -> Vec<Ballot> {
    let finals: Vec<Option<usize>> =
        (0..trace.candidates.len()).filter(|&i| trace.candidates[i].round == 0).map(|i| final_answer(trace, i)).collect();
    pool.executed
        .iter()
        .map(|(i, _, e)| Ballot {
            candidate: *i,
            rows: e.rows.clone(),
            ordered: cand_sql(trace.candidates.get(*i)).and_then(|s| results::orders_rows(&s)).unwrap_or(false),
            elapsed: e.elapsed,
            cost: e.cost,
            weight: finals.iter().filter(|f| **f == Some(*i)).count(),
        })
        .collect()
}

