//! The OpenSearch-SQL path: extraction (on schemas above nl2sql.extraction_min_tokens), value
//! and column retrieval, the per-question schema, candidates in waves that stop early once they
//! agree, alignments, sandboxed execution, corrections by error type, and the vote.

use super::*;
use crate::schema::{estimate_tokens, Table};

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
}

/// The OpenSearch-SQL path.
pub(super) fn full(run: Run<'_>) -> Result<(String, Execution), AskError> {
    let Run { q, schema, settings, llm, db, trace, secret } = run;
    let secret = secret.as_deref();
    let Whole { linking, rendered: whole, wide, entire, owned } = whole_schema(q, schema, settings, db, trace);
    let schema = owned.as_ref().unwrap_or(schema);
    let (extraction, ex) = extract_columns(q, schema, &whole, settings, llm, db, trace, secret);
    let focus = focus_for_question(q, schema, &whole, &linking, wide, extraction, &ex, settings, db, trace);
    let rendered = render_for_candidates(schema, &whole, &linking, wide, entire, extraction, &focus, settings, db, trace);
    let prompts = prompts_for_candidates(q, schema, &rendered, &focus, &ex, settings, db, trace);
    // The alignments' context: an unqualified name several schemas hold is the linked one's
    // (the most relevant of them, by the linking's rank).
    let rank = |ident: &str| linking.rank.iter().position(|&i| schema.tables.get(i).is_some_and(|t| t.ident == ident)).unwrap_or(usize::MAX);
    let mut linked: Vec<String> = focus.schema.tables.iter().map(|t| t.ident.clone()).collect();
    linked.sort_by_cached_key(|t| rank(t));
    let said = q.said();
    let cx = Context { select: &ex.select, linked: &linked, question: &said };
    let mut pool = Pool::default();
    generate_candidates(&prompts, settings, llm, db, schema, cx, &mut pool, trace, secret)?;
    correct_failures(&prompts, settings, llm, db, schema, cx, &mut pool, trace, secret);
    vote_on(&mut pool, trace)
}

/// The schema before any model call, and how the question's tables are found in it.
struct Whole {
    /// On a wide schema: the columns retrieval linked to the question, tables ranked.
    linking: Linking,
    /// What the extraction (or, without one, the candidates) is shown.
    rendered: Rendered,
    /// The schema is wider than nl2sql.schema_max_tokens.
    wide: bool,
    /// ... yet the extraction sees all of it (nl2sql.extraction_max_tokens).
    entire: bool,
    /// The schema with the linked tables sampled, when the schema is shown around them.
    owned: Option<Schema>,
}

/// Stage 1, the schema: whole when it fits; a wide one linked to the question first.
fn whole_schema(q: &Question, schema: &Schema, settings: &Settings, db: &mut dyn Database, trace: &mut Trace) -> Whole {
    // A schema wider than nl2sql.schema_max_tokens: the extraction still sees it whole when it
    // fits nl2sql.extraction_max_tokens (the same prompt for every question, which an
    // endpoint's cache keeps). Wider still, Open-SQL's variable-length schema: the columns and
    // values retrieved for the question decide which tables keep their detail (such a schema
    // comes without samples: the linked tables are sampled here).
    let mut linking = Linking::default();
    let mut whole = schema.render(settings.schema_max_tokens);
    let wide = whole.detail < Detail::Full || whole.tables_omitted > 0;
    let mut entire = false;
    let mut owned = None;
    if wide {
        linking = link(q, schema, settings, db, trace);
        let r = settings.extraction.then(|| schema.render(settings.extraction_max_tokens));
        if let Some(r) = r.filter(|r| r.detail == Detail::Full && r.tables_omitted == 0) {
            whole = r;
            entire = true;
        } else {
            let s = sampled(schema, &linking.columns, settings, db);
            whole = s.render_linked(settings.schema_max_tokens, &linking);
            owned = Some(s);
        }
    }
    Whole { linking, rendered: whole, wide, entire, owned }
}

/// Stage 2, extraction (on schemas above nl2sql.extraction_min_tokens): the columns, entities
/// and select list the model names. Whether it ran, and what it found.
#[allow(clippy::too_many_arguments)]
fn extract_columns(
    q: &Question,
    schema: &Schema,
    whole: &Rendered,
    settings: &Settings,
    llm: &mut dyn Llm,
    db: &mut dyn Database,
    trace: &mut Trace,
    secret: Option<&str>,
) -> (bool, Extraction) {
    // Extraction: columns, entities, and what the answer returns.
    let mut ex = Extraction::default();
    // A schema cut to fit nl2sql.schema_max_tokens always needs the extraction's choice.
    let extraction = settings.extraction && (whole.tokens > settings.extraction_min_tokens || whole.tables_omitted > 0);
    if settings.extraction && !extraction {
        trace.extraction_skipped = Some(format!(
            "the whole schema (~{} tokens) is within nl2sql.extraction_min_tokens ({})",
            whole.tokens, settings.extraction_min_tokens
        ));
    }
    let mut extraction_call = None;
    if extraction {
        // The extraction sees the examples nearest the question masked by the schema's names
        // (stored values are looked up after it).
        find_examples(q, schema, &[], settings, db, trace);
        let sections = examples::render(&trace.examples, false) + &q.follow_up();
        let messages = extract::messages(&whole.text, &sections, &q.text, q.hint.as_deref());
        // Under a token budget the extraction runs only when a candidate on the whole schema
        // (a prompt about as long as its own) still fits after it.
        let prompt = estimate(&messages);
        let after = Tokens { prompt: trace.tokens.prompt + prompt, completion: trace.tokens.completion + EXTRACTION_MAX_TOKENS as usize, ..trace.tokens.clone() };
        if trace.tokens.plan(prompt, 1, EXTRACTION_MAX_TOKENS).0 == 1 && after.plan(prompt, 1, settings.max_tokens).0 == 1 {
            extraction_call = Some(messages);
        } else {
            trace.tokens.cut.push("extraction".into());
            trace.extraction_skipped = Some("nl2sql.max_tokens_per_call leaves no room for it".into());
        }
    }
    let extraction = extraction_call.is_some();
    if let Some(messages) = extraction_call {
        let req = ChatRequest { messages: messages.clone(), temperature: 0.0, max_tokens: EXTRACTION_MAX_TOKENS };
        let waited = Instant::now();
        let reply = llm.chat(req);
        trace.round_trips += 1;
        trace.llm_wait_ms += ms(waited.elapsed());
        record(trace, "extract", &messages, &reply, secret);
        // Degrade, don't fail: without the extraction the candidates see the whole schema.
        match reply {
            Ok(c) => ex = extract::parse(&c.content),
            Err(e) => trace.extraction_failed = Some(Report::from_diagnostic(&e).redact(secret).message),
        }
    }
    (extraction, ex)
}

/// Stage 3, retrieval: stored values and columns similar to the question, and the
/// per-question schema (the extraction's columns, keys and join paths).
#[allow(clippy::too_many_arguments)]
fn focus_for_question(
    q: &Question,
    schema: &Schema,
    whole: &Rendered,
    linking: &Linking,
    wide: bool,
    extraction: bool,
    ex: &Extraction,
    settings: &Settings,
    db: &mut dyn Database,
    trace: &mut Trace,
) -> Focus {
    // Value retrieval for the question and the entities (split retrieval), column retrieval;
    // none under nl2sql.privacy (stored values would reach the prompt).
    if !settings.privacy {
        trace.values = similar_values(q, &ex.entities, schema, db);
        trace.values_skipped = db.skipped_value_columns();
    }
    let columns = extract::Columns::new(schema);
    let mut chosen = columns.resolve(&ex.columns);
    for c in columns.resolve(&ex.value_columns) {
        if !chosen.contains(&c) {
            chosen.push(c);
        }
    }
    let mut matched: Vec<(usize, usize)> = Vec::new();
    if extraction && settings.column_matches > 0 {
        let found = db.similar_columns(&q.text, settings.column_matches);
        matched.extend(found.iter().filter(|c| c.2 >= COLUMN_MATCH_MIN_SCORE).filter_map(|(oid, column, _)| column_at(schema, *oid, column)));
    }
    // Columns the retrieved values live in belong to the question too.
    let mut from_values = value_columns(schema, &trace.values);
    // ... when they are in a unit of the database the extraction chose from, or meant to: a
    // column it wrote with a table that lacks it keeps the units of the tables that have it.
    let set_aside = if extraction && !chosen.is_empty() {
        let names: Vec<String> = ex.columns.iter().chain(&ex.value_columns).cloned().collect();
        let mut units_of = chosen.clone();
        units_of.extend(columns.misplaced(&names));
        other_units(schema, &units_of, &mut matched, &mut from_values, trace)
    } else {
        Vec::new()
    };
    let focus = if extraction && !chosen.is_empty() {
        let mut all = chosen.clone();
        all.extend(matched.iter().copied());
        all.extend(from_values.iter().copied());
        all.sort_unstable();
        all.dedup();
        schema.focus(&all)
    } else if wide {
        // No choice on a wide schema: the linked tables (the CREATE TABLE prompt shows the
        // focus; a wide schema whole would not fit).
        schema.focus(&linking.columns)
    } else {
        Focus { schema: schema.clone(), ..Default::default() }
    };
    if extraction {
        let name = |&(t, c): &(usize, usize)| format!("{}.{}", schema.tables[t].ident, schema.tables[t].columns[c].ident);
        trace.extraction = Some(ExtractionTrace {
            parsed: ex.clone(),
            columns: chosen.iter().map(name).collect(),
            column_matches: matched.iter().map(name).collect(),
            set_aside,
            focus: focus.clone(),
            full_schema_tokens: whole.tokens,
        });
    }
    focus
}

/// Stage 4, the schema the candidates are shown.
#[allow(clippy::too_many_arguments)]
fn render_for_candidates(
    schema: &Schema,
    whole: &Rendered,
    linking: &Linking,
    wide: bool,
    entire: bool,
    extraction: bool,
    focus: &Focus,
    settings: &Settings,
    db: &mut dyn Database,
    trace: &mut Trace,
) -> Rendered {
    // On a wide schema the candidates see the extraction's own schema, whose tokens an
    // endpoint's cache holds (only what follows is read again: on a local model the prompt's
    // length is its latency), then the tables the extraction chose that it showed by name
    // only, in the focus's form: a table the extraction missed can still be written.
    if entire {
        // After an extraction on the entire schema: every table by name (the same lines for
        // every question), the focus's tables in full (OpenSearch-SQL's per-question schema).
        let mut columns: Vec<(usize, usize)> = Vec::new();
        for t in &focus.schema.tables {
            if let Some(ti) = schema.tables.iter().position(|x| x.ident == t.ident) {
                columns.extend(t.columns.iter().filter_map(|c| schema.tables[ti].columns.iter().position(|x| x.name == c.name).map(|ci| (ti, ci))));
            }
        }
        let linked = if columns.is_empty() { linking.clone() } else { Linking { columns, rank: linking.rank.clone() } };
        show_linked(trace, schema, &linked, settings)
    } else if wide {
        let more = extraction.then(|| also_for_question(whole, focus, schema, settings, db)).flatten();
        let mut r = whole.clone();
        if let Some(more) = more {
            r.text = format!("{}{ALSO_HEADER}{more}", r.text);
            r.tokens = estimate_tokens(&r.text);
        }
        shown(trace, r)
    } else {
        show_schema(trace, &focus.schema, settings)
    }
}

/// Stage 5, one prompt per generator, with the examples and values found.
#[allow(clippy::too_many_arguments)]
fn prompts_for_candidates(
    q: &Question,
    schema: &Schema,
    rendered: &Rendered,
    focus: &Focus,
    ex: &Extraction,
    settings: &Settings,
    db: &mut dyn Database,
    trace: &mut Trace,
) -> Vec<(Generator, Vec<Message>)> {
    // Examples (few-shot) for the candidates: the question masked by the schema's names and the
    // stored values found in it.
    let values: Vec<String> = trace.values.iter().map(|v| v.value.clone()).collect();
    find_examples(q, schema, &values, settings, db, trace);
    let shown_examples = examples::render(&trace.examples, settings.chain_of_thought);

    // One prompt per generator, the same sections in the same order.
    let generators: Vec<Generator> = if settings.generators.is_empty() { vec![Generator::OpenSql] } else { settings.generators.clone() };
    let values = retrieve::render_values(&trace.values);
    generators
        .iter()
        .map(|&g| {
            // The CREATE TABLE prompt asks plainly: no examples, no values. Its mistakes differ
            // from the other's, and it is the same prompt for every question on a database
            // (an endpoint's cache serves all of it but the question).
            let (text, examples, values) = match g {
                Generator::OpenSql => (rendered.text.clone(), shown_examples.as_str(), values.as_str()),
                Generator::CreateTable => (focus.schema.render_ddl(settings.schema_max_tokens).text, "", ""),
            };
            let sections = generate::sections(examples, values, if settings.chain_of_thought { &ex.select } else { &[] }) + &q.follow_up();
            (g, generate::query(g.layout(), &text, settings.chain_of_thought, &sections, &q.text, q.hint.as_deref()))
        })
        .collect()
}

/// Stage 6, the candidates, in waves that stop once they agree (or once a first answer the
/// model was sure of runs and returns rows); each aligned, checked and run as it arrives.
#[allow(clippy::too_many_arguments)]
fn generate_candidates(
    prompts: &[(Generator, Vec<Message>)],
    settings: &Settings,
    llm: &mut dyn Llm,
    db: &mut dyn Database,
    schema: &Schema,
    cx: Context,
    pool: &mut Pool,
    trace: &mut Trace,
    secret: Option<&str>,
) -> Result<(), AskError> {
    let llm_error = |e: &LlmError| AskError::Llm(Report::from_diagnostic(e).redact(secret));
    let n = settings.candidates.max(1);
    let temperature = if n == 1 { 0.0 } else { settings.temperature };
    // Waves: with one generator, `first_wave` samples of it, then the rest; with several, each
    // once at temperature 0 (their agreement is not sampling noise), then the rest in turn.
    let waves: Vec<Vec<(usize, f32)>> = if prompts.len() == 1 {
        let first = settings.first_wave.clamp(1, n);
        vec![vec![(0, temperature); first], vec![(0, temperature); n - first]]
    } else {
        let mut first: Vec<(usize, f32)> = (0..prompts.len()).map(|g| (g, 0.0)).collect();
        let rest: Vec<(usize, f32)> =
            (0..n.saturating_sub(prompts.len())).map(|i| (i % prompts.len(), settings.temperature.max(0.1))).collect();
        // No early stop (nl2sql.agreement = 0): every candidate at once.
        if settings.first_wave >= n {
            first.extend(rest);
            vec![first]
        } else {
            vec![first, rest]
        }
    };
    let prompt_sizes: Vec<usize> = prompts.iter().map(|(_, m)| estimate(m)).collect();
    for (w, mut wave) in waves.into_iter().enumerate() {
        if wave.is_empty() {
            continue;
        }
        if w > 0 && agreed(pool, trace, settings) {
            trace.stopped_early = true;
            break;
        }
        // The token budget: as many of the wave as fit, each with the completion left to it.
        let largest = wave.iter().map(|&(g, _)| prompt_sizes[g]).max().unwrap_or(0);
        let (fits, max_tokens) = trace.tokens.plan(largest, wave.len(), settings.max_tokens);
        if fits < wave.len() {
            trace.tokens.cut.push(format!("{} of {} candidates in wave {}", wave.len() - fits, wave.len(), w + 1));
            wave.truncate(fits);
        }
        if wave.is_empty() {
            if w == 0 {
                return Err(trace.tokens.over_budget(largest));
            }
            break;
        }
        let size = wave.len();
        trace.waves += 1;
        let mut errors = Vec::new();
        // nl2sql.alone_confidence: the first generator is asked alone, and an answer that runs
        // and returns rows, and that the model was sure enough of token by token, is the answer.
        // A threshold above 0 needs the endpoint's scores.
        let alone = settings.alone.filter(|&p| p <= 0.0 || llm.can_score());
        if let Some(threshold) = alone.filter(|_| w == 0 && size > 1 && prompts.len() > 1) {
            let (g, t) = wave.remove(0);
            let waited = Instant::now();
            let req = ChatRequest { messages: prompts[g].1.clone(), temperature: t, max_tokens };
            let reply = if llm.can_score() { llm.chat_scored(req) } else { llm.chat(req) };
            trace.round_trips += 1;
            trace.llm_wait_ms += ms(waited.elapsed());
            let (generator, messages) = &prompts[g];
            record(trace, "generate", messages, &reply, secret);
            match reply {
                Ok(c) => {
                    let at = trace.candidates.len();
                    consider(&c.content, 0, None, Some(generator.name()), messages.clone(), settings, db, schema, cx, pool, trace);
                    if let Some(cand) = trace.candidates.get_mut(at) {
                        cand.confidence = c.confidence;
                        let sure = threshold < 1.0 && (threshold <= 0.0 || c.confidence.is_some_and(|p| p >= threshold));
                        if sure && cand.ok && cand.rows.is_some_and(|r| r > 0) {
                            trace.alone = c.confidence;
                            trace.stopped_early = true;
                            break;
                        }
                    }
                }
                // The endpoint itself is unreachable or refuses us: the others would fail alike.
                Err(e) if e.is_the_endpoints() => return Err(llm_error(&e)),
                Err(e) => errors.push(e),
            }
        }
        let waited = Instant::now();
        // One generator: its samples in one request where the endpoint takes n.
        let replies = if wave.iter().all(|&(g, t)| g == wave[0].0 && t == wave[0].1) {
            let req = ChatRequest { messages: prompts[wave[0].0].1.clone(), temperature: wave[0].1, max_tokens };
            llm.sample(req, wave.len())
        } else {
            let reqs =
                wave.iter().map(|&(g, t)| ChatRequest { messages: prompts[g].1.clone(), temperature: t, max_tokens }).collect();
            llm.chat_many(reqs)
        };
        trace.round_trips += 1;
        trace.llm_wait_ms += ms(waited.elapsed());
        for (reply, &(g, _)) in replies.into_iter().zip(&wave) {
            let (generator, messages) = &prompts[g];
            record(trace, "generate", messages, &reply, secret);
            match reply {
                Ok(c) => consider(
                    &c.content,
                    0,
                    None,
                    Some(generator.name()),
                    messages.clone(),
                    settings,
                    db,
                    schema,
                    cx,
                    pool,
                    trace,
                ),
                Err(e) => errors.push(e),
            }
        }
        // Every request of the first wave failed: the endpoint is down, say so.
        if w == 0 && errors.len() == size {
            return Err(llm_error(&errors[0]));
        }
    }
    Ok(())
}

/// Stage 7, corrections by error type, concurrently, while no candidate returned rows. Where
/// one did, the vote decides among what ran: measured on both benchmarks, a correction then
/// never turned a wrong answer right, and cost a model call per failed candidate.
#[allow(clippy::too_many_arguments)]
fn correct_failures(
    prompts: &[(Generator, Vec<Message>)],
    settings: &Settings,
    llm: &mut dyn Llm,
    db: &mut dyn Database,
    schema: &Schema,
    cx: Context,
    pool: &mut Pool,
    trace: &mut Trace,
    secret: Option<&str>,
) {
    for round in 1..=settings.max_corrections {
        if pool.executed.iter().any(|(_, _, e)| !e.rows.is_empty()) {
            break;
        }
        // Nothing returned rows: the empty ones are worth another look too, once each.
        for (i, _, e) in &pool.executed {
            if e.rows.is_empty() && !pool.corrected.contains(i) {
                let conv = pool.conversations.get(i).cloned().unwrap_or_else(|| prompts[0].1.clone());
                let raw = trace.candidates.get(*i).map(|c| c.raw.clone()).unwrap_or_default();
                pool.failed.push((*i, conv, raw, Failure::Empty));
            }
        }
        let mut failed = std::mem::take(&mut pool.failed);
        if failed.is_empty() {
            break;
        }
        let mut convs: Vec<Vec<Message>> = failed.iter().map(|(_, conv, raw, f)| refine::correction(conv.clone(), raw, f, settings.privacy)).collect();
        // The token budget: as many corrections as fit, the first failures first.
        let largest = convs.iter().map(|m| estimate(m)).max().unwrap_or(0);
        let (fits, max_tokens) = trace.tokens.plan(largest, convs.len(), settings.max_tokens);
        if fits < convs.len() {
            trace.tokens.cut.push(format!("{} of {} corrections in round {round}", convs.len() - fits, convs.len()));
            convs.truncate(fits);
            failed.truncate(fits);
        }
        if convs.is_empty() {
            break;
        }
        pool.corrected.extend(failed.iter().map(|(i, ..)| *i));
        let reqs = convs.iter().map(|m| ChatRequest { messages: m.clone(), temperature: 0.0, max_tokens }).collect();
        let waited = Instant::now();
        let replies = llm.chat_many(reqs);
        trace.round_trips += 1;
        trace.llm_wait_ms += ms(waited.elapsed());
        for ((reply, conv), (parent, ..)) in replies.into_iter().zip(convs).zip(failed) {
            record(trace, "correct", &conv, &reply, secret);
            if let Ok(c) = reply {
                let generator = trace.candidates.get(parent).and_then(|p| p.generator);
                consider(&c.content, round, Some(parent), generator, conv, settings, db, schema, cx, pool, trace);
            }
        }
    }

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

/// A question's tables come from one unit of the database (Schema::units: a schema, tables a
/// foreign key links). On a database of several units, the columns the column search found and
/// the stored values found in units the extraction chose no column from are set aside (from
/// the per-question schema and from the prompts' values): the question "how many singers are
/// from each country?" finds a countries table of a car database too. A database of one unit
/// keeps everything. `chosen`: the columns whose units stay. The columns and values set
/// aside, as `table.column`.
fn other_units(
    schema: &Schema,
    chosen: &[(usize, usize)],
    matched: &mut Vec<(usize, usize)>,
    from_values: &mut Vec<(usize, usize)>,
    trace: &mut Trace,
) -> Vec<String> {
    let units = schema.units();
    let keep: HashSet<usize> = chosen.iter().map(|c| units[c.0]).collect();
    let name = |&(t, c): &(usize, usize)| format!("{}.{}", schema.tables[t].ident, schema.tables[t].columns[c].ident);
    // Set aside, once each; `from_values` holds every found value's column, named as the value
    // names it, so the values go with their columns.
    let mut aside: Vec<String> = Vec::new();
    let mut gone: HashSet<String> = HashSet::new();
    for list in [matched, from_values] {
        list.retain(|c| {
            let kept = keep.contains(&units[c.0]);
            if !kept {
                let n = name(c);
                if gone.insert(n.clone()) {
                    aside.push(n);
                }
            }
            kept
        });
    }
    trace.values.retain(|v| {
        let kept = !gone.contains(&v.column);
        if !kept {
            aside.push(format!("{} = '{}'", v.column, v.value));
        }
        kept
    });
    aside
}

/// Heading of the tables the candidates see in detail beyond the extraction's schema.
const ALSO_HEADER: &str = "# Also for this question:\n";

/// The focus's tables that `whole` shows by name only, in the focus's form (chosen columns,
/// keys and join columns), sampled, in the most detail that keeps the candidates' schema
/// within nl2sql.schema_max_tokens; None when there are none or there is no room.
fn also_for_question(whole: &Rendered, focus: &Focus, schema: &Schema, settings: &Settings, db: &mut dyn Database) -> Option<String> {
    let detailed: HashSet<&str> = whole.detailed.iter().map(|&t| schema.tables[t].ident.as_str()).collect();
    let missing: Vec<usize> = (0..focus.schema.tables.len()).filter(|&t| !detailed.contains(focus.schema.tables[t].ident.as_str())).collect();
    if missing.is_empty() {
        return None;
    }
    let sampled = sampled_tables(&focus.schema, missing.clone(), settings, db);
    let tables: Vec<Table> = missing.iter().map(|&t| sampled.tables[t].clone()).collect();
    let room = settings.schema_max_tokens;
    [Detail::Full, Detail::Core, Detail::Bare].into_iter().find_map(|detail| {
        let text = sampled.render_tables(&tables, detail, 0);
        (estimate_tokens(&format!("{}{ALSO_HEADER}{text}", whole.text)) <= room).then_some(text)
    })
}

/// The examples nearest the masked question, among those whose SQL the caller may read, into
/// the trace (none when nl2sql.examples is 0).
fn find_examples(q: &Question, schema: &Schema, values: &[String], settings: &Settings, db: &mut dyn Database, trace: &mut Trace) {
    if settings.examples == 0 {
        return;
    }
    let names = examples::Names::new(schema.names());
    let masked = examples::mask(&q.text, &names, values);
    let mut found = examples::pick(db.similar_examples(&masked, settings.examples * 2), settings.examples);
    // nl2sql.privacy: examples other roles wrote are their data (a question may name a value in
    // any case): only the built-in ones are shown, and without literals.
    if settings.privacy {
        found = found.iter().filter(|e| e.source == "builtin").filter_map(examples::without_data).collect();
    }
    trace.examples = found;
    trace.masked_question = Some(masked);
}

/// Whether the executed candidates already agree enough to stop sampling.
fn agreed(pool: &Pool, trace: &Trace, settings: &Settings) -> bool {
    let ballots = ballots(pool, trace);
    vote::vote(&ballots, samples(trace))
        .and_then(|o| o.groups.first().map(|g| g.votes >= settings.agreement && g.rows > 0))
        .unwrap_or(false)
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

/// Evaluates one answer into the pool: duplicates of an executed candidate add its weight
/// without running again.
#[allow(clippy::too_many_arguments)]
fn consider(
    content: &str,
    round: u32,
    corrects: Option<usize>,
    generator: Option<&'static str>,
    conversation: Vec<Message>,
    settings: &Settings,
    db: &mut dyn Database,
    schema: &Schema,
    cx: Context,
    pool: &mut Pool,
    trace: &mut Trace,
) {
    let index = trace.candidates.len();
    let mut cand = CandidateTrace { round, corrects, generator, raw: traced(content), ..Default::default() };
    // Same query as an executed candidate: a vote for it, no second run.
    if let Some(text) = extract_sql(content) {
        if guard::check(&text).is_ok() {
            let form = normal_form(&text);
            if let Some((first, _, _)) = pool.executed.iter().find(|(i, f, _)| {
                *f == form || trace.candidates.get(*i).and_then(|c| c.sql.as_deref()).is_some_and(|s| normal_form(s) == form)
            }) {
                cand.sql = Some(text);
                cand.duplicate_of = Some(*first);
                cand.ok = true;
                trace.candidates.push(cand);
                return;
            }
            if let Some((first, _)) = pool.failed_forms.iter().find(|(_, f)| *f == form) {
                cand.sql = Some(text);
                cand.duplicate_of = Some(*first);
                cand.error = trace.candidates.get(*first).and_then(|c| c.error.clone());
                cand.error_kind = trace.candidates.get(*first).and_then(|c| c.error_kind);
                trace.candidates.push(cand);
                return;
            }
        }
    }
    let (sql, outcome) = evaluate(content, settings, db, schema, cx, &mut cand);
    cand.sql = sql.clone();
    match outcome {
        Ok(execution) => {
            cand.ok = true;
            cand.rows = Some(execution.rows.len());
            cand.exec_ms = Some(ms(execution.elapsed));
            let form = normal_form(&cand_sql(Some(&cand)).unwrap_or_default());
            trace.candidates.push(cand);
            pool.executed.push((index, form, execution));
            pool.conversations.insert(index, conversation);
        }
        Err(Outcome_::Refused(error)) => {
            cand.error = Some(error.message());
            if let Some(s) = &sql {
                pool.failed_forms.push((index, normal_form(s)));
            }
            trace.candidates.push(cand);
            if pool.refused.is_none() {
                pool.refused = Some((sql.unwrap_or_default(), error));
            }
        }
        Err(Outcome_::Failed(failure)) => {
            cand.error = Some(failure.summary());
            cand.error_kind = Some(failure.kind());
            if let Failure::Execution(r) | Failure::Analysis(r) = &failure {
                cand.sqlstate = Some(r.sqlstate.code().to_string());
            }
            let failed_sql = cand_sql(Some(&cand));
            if let Some(s) = &cand.sql {
                pool.failed_forms.push((index, normal_form(s)));
            }
            trace.candidates.push(cand);
            pool.last = Some((failed_sql, failure.clone()));
            pool.failed.push((index, conversation, content.to_string(), failure));
        }
    }
}
