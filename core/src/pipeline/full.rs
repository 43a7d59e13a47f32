//! The OpenSearch-SQL path: extraction (on schemas above nl2sql.extraction_min_tokens), value
//! and column retrieval, the per-question schema and the prompts (stages 1 to 5, here); then
//! the candidates, their corrections and the vote (candidates.rs).

use super::candidates::{Asking, Prompt};
use super::failure::AskError;
use super::stages::{column_at, grammar_for, link, sampled, sampled_tables, show_linked, show_schema, shown, similar_values, value_columns};
use super::trace::{estimate, ms, record, ExtractionTrace, Trace};
use super::{Database, Generator, Llm, Question, Run, Settings, Tokens, COLUMN_MATCH_MIN_SCORE, EXTRACTION_MAX_TOKENS};
use crate::align::Context;
use crate::error::Report;
use crate::grammar::Form;
use crate::model::llm::ChatRequest;
use crate::prompt::examples;
use crate::prompt::extract::{self, Extraction};
use crate::prompt::generate;
use crate::retrieval::retrieve;
use crate::schema::{estimate_tokens, Detail, Focus, Linking, Rendered, Schema, Table};
use crate::Execution;
use std::collections::HashSet;
use std::time::Instant;

/// The OpenSearch-SQL path.
pub(super) fn full(run: Run<'_>) -> Result<(String, Execution), AskError> {
    let Run { q, schema, settings, llm, db, trace, secret } = run;
    let secret = secret.as_deref();
    let Whole { linking, rendered: whole, wide, entire, owned } = whole_schema(q, schema, settings, db, trace);
    let schema = owned.as_ref().unwrap_or(schema);
    let (extraction, ex) = extract_columns(q, schema, &whole, settings, llm, db, trace, secret);
    let focus = focus_for_question(q, schema, &whole, &linking, wide, extraction, &ex, settings, db, trace);
    let rendered = render_for_candidates(schema, &whole, &linking, wide, entire, extraction, &focus, settings, db, trace);
    let grammar_on = llm.takes_grammar();
    let (prompts, shown) = prompts_for_candidates(q, schema, &rendered, &focus, &ex, settings, grammar_on, db, trace);
    // Corrections answer with the query alone, under the grammar of the names every prompt
    // showed (a correction continues its candidate's conversation, whichever prompt began it).
    let correction = grammar_for(trace, grammar_on, schema, &shown, Form::Query);
    // The alignments' context: the tables linked to the question, which decide between tables
    // of one schema, and the tables the prompts showed when they showed the per-question
    // schema alone (not on a wide schema, whose prompts list every table), which decide
    // between schemas (never the rank: align/names.rs). Linked are the tables retrieval ranked
    // and those of a narrower per-question schema: a schema shown whole links none by being
    // shown.
    let rank = |ident: &str| linking.rank.iter().position(|&i| schema.tables.get(i).is_some_and(|t| t.ident == ident)).unwrap_or(usize::MAX);
    let narrowed = focus.schema.tables.len() < schema.tables.len();
    let mut linked: Vec<String> =
        focus.schema.tables.iter().filter(|t| narrowed || rank(&t.ident) != usize::MAX).map(|t| t.ident.clone()).collect();
    linked.sort_by_cached_key(|t| rank(t));
    // Narrowed, every table of the focus is linked: the same tables.
    let shown: Vec<String> = if narrowed && !wide { linked.clone() } else { Vec::new() };
    let said = q.said();
    let cx = Context { select: &ex.select, linked: &linked, shown: &shown, question: &said };
    Asking { prompts: &prompts, correction, settings, llm, db, schema, cx, trace, secret }.answer()
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
        let messages = extract::messages(&whole.text, &sections, &q.text, q.note().as_deref());
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
        let req = ChatRequest { messages: messages.clone(), temperature: 0.0, max_tokens: EXTRACTION_MAX_TOKENS, grammar: None, reask: false };
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
        let found = db.similar_columns(&q.text, settings.column_matches, &schema.strangers());
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
        let name = |&(t, c): &(usize, usize)| crate::render::visible(&format!("{}.{}", schema.tables[t].ident, schema.tables[t].columns[c].ident), false);
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

/// Stage 5, one prompt per generator, with the examples and values found; and the columns the
/// prompts show, together.
#[allow(clippy::too_many_arguments)]
fn prompts_for_candidates(
    q: &Question,
    schema: &Schema,
    rendered: &Rendered,
    focus: &Focus,
    ex: &Extraction,
    settings: &Settings,
    grammar_on: bool,
    db: &mut dyn Database,
    trace: &mut Trace,
) -> (Vec<Prompt>, Vec<String>) {
    // Examples (few-shot) for the candidates: the question masked by the schema's names and the
    // stored values found in it.
    let values: Vec<String> = trace.values.iter().map(|v| v.value.clone()).collect();
    find_examples(q, schema, &values, settings, db, trace);
    let shown_examples = examples::render(&trace.examples, settings.chain_of_thought);

    // One prompt per generator, the same sections in the same order.
    let generators: Vec<Generator> = if settings.generators.is_empty() { vec![Generator::OpenSql] } else { settings.generators.clone() };
    let values = retrieve::render_values(&trace.values);
    let mut shown_by_all: Vec<String> = Vec::new();
    let prompts = generators
        .iter()
        .map(|&g| {
            // The CREATE TABLE prompt asks plainly: no examples, no values. Its mistakes differ
            // from the other's, and it is the same prompt for every question on a database
            // (an endpoint's cache serves all of it but the question).
            let ddl;
            let (shown, examples, values) = match g {
                Generator::OpenSql => (rendered, shown_examples.as_str(), values.as_str()),
                Generator::CreateTable => {
                    ddl = focus.schema.render_ddl(settings.schema_max_tokens);
                    (&ddl, "", "")
                }
            };
            let mut sections = generate::sections(examples, values, if settings.chain_of_thought { &ex.select } else { &[] }) + &q.follow_up();
            // Each prompt's grammar allows the names it shows, in the form its task asks for.
            let form = if settings.chain_of_thought { Form::Thought } else { Form::Query };
            let grammar = grammar_for(trace, grammar_on, schema, &shown.columns, form);
            if grammar.as_deref().is_some_and(|g| crate::grammar::offers_nothing_fits(g)) {
                sections.push_str(generate::GRAMMAR_NOTHING_FITS);
            }
            shown_by_all.extend(shown.columns.iter().cloned());
            (g, generate::query(g.layout(), &shown.text, settings.chain_of_thought, &sections, &q.text, q.note().as_deref()), grammar)
        })
        .collect();
    (prompts, shown_by_all)
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
    let name = |&(t, c): &(usize, usize)| crate::render::visible(&format!("{}.{}", schema.tables[t].ident, schema.tables[t].columns[c].ident), false);
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

