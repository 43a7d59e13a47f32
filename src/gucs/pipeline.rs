//! How a question is answered: the mode, the candidates and their vote, corrections, the schema
//! and extraction budgets, alignment rules, examples, the agent.

use super::checks::check_generators;
use super::{string, Mode, OnLowConfidence};
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::ffi::CString;

settings! {
    MODE: choice(Mode) = Mode::Full,
        c"nl2sql.mode", Userset, GucFlags::default(),
        c"Pipeline nl2sql() runs: full (extraction, n candidates, alignments, vote), zero_shot or interactive.",
        c"zero_shot: one generation from the whole schema, corrected up to nl2sql.max_corrections times; interactive: an agent that searches columns and values, asks for join paths and runs queries.";
    CANDIDATES: int = 5,
        c"nl2sql.candidates", Userset, GucFlags::default(),
        c"Candidate queries generated per question (n).",
        c"Requested concurrently, in two waves when nl2sql.agreement is above 0.",
        range(1, 32);
    TEMPERATURE: real = 0.7,
        c"nl2sql.temperature", Userset, GucFlags::default(),
        c"Sampling temperature of the candidates when more than one is generated.",
        c"Extraction, corrections and a single candidate always use 0.",
        range(0.0, 2.0);
    AGREEMENT: int = 2,
        c"nl2sql.agreement", Userset, GucFlags::default(),
        c"Agreeing candidates that stop sampling early (adaptive n); 0 never stops early.",
        c"The first wave asks for this many candidates; the rest of nl2sql.candidates only when they disagree.",
        range(0, 32);
    ALONE_CONFIDENCE: real = 0.0,
        c"nl2sql.alone_confidence", Userset, GucFlags::default(),
        c"The first generator's answer stands alone when it returns rows and every token of it was at least this probable to the model; 0: whenever it returns rows.",
        c"Asks the first generator alone; the others only when its answer fails, returns no rows or is less sure. Above 0 needs an endpoint that returns logprobs (llama.cpp's server, vLLM, OpenAI); 1 never lets it stand alone; nl2sql.agreement = 0 asks every generator at once.",
        range(0.0, 1.0);
    MIN_CONFIDENCE: real = 0.5,
        c"nl2sql.min_confidence", Userset, GucFlags::default(),
        c"Share of candidates that must agree; below it nl2sql() still answers but raises a NOTICE.",
        c"",
        range(0.0, 1.0);
    ON_LOW_CONFIDENCE: choice(OnLowConfidence) = OnLowConfidence::Notice,
        c"nl2sql.on_low_confidence", Userset, GucFlags::default(),
        c"What an answer below nl2sql.min_confidence does: notice (answer with a NOTICE) or error (abstain).",
        c"error raises SQLSTATE P0002 (no_data_found) with the candidates in DETAIL. Zero-shot answers have no confidence and never abstain.";
    REFUSE_UNRELATED: bool = false,
        c"nl2sql.refuse_unrelated", Userset, GucFlags::default(),
        c"Whether a question about nothing the role's tables hold is refused instead of answered.",
        c"Raises SQLSTATE P0002 (no_data_found): before any query is written when no word of the question names a table, column, description or stored value (unless the model, shown the tables, says they hold it), and after, when no query ran and the last one failed on a name the tables lack that spells a word of the question. nl2sql_explain shows the words covered and the names missing.";
    MAX_CORRECTIONS: int = 1,
        c"nl2sql.max_corrections", Userset, GucFlags::default(),
        c"Correction rounds after a generated query fails.",
        c"",
        range(0, 10);
    SCHEMA_MAX_TOKENS: int = 3_000,
        c"nl2sql.schema_max_tokens", Userset, GucFlags::default(),
        c"Token budget of the schema part of a prompt (estimated tokens).",
        c"A schema over it is shown in Open-SQL's variable-length form: the tables linked to the question in full, the others by name.",
        range(100, 1_000_000);
    SAMPLE_ROWS: int = 1_000,
        c"nl2sql.sample_rows", Userset, GucFlags::default(),
        c"Rows read per table for the example values and ranges shown to the model.",
        c"",
        range(0, 1_000_000);
    USE_EXTRACTION: bool = true,
        c"nl2sql.use_extraction", Userset, GucFlags::default(),
        c"Whether the full pipeline first extracts columns, values and the SELECT content.",
        c"Off: candidates see the whole schema (the ablation without extraction).";
    EXTRACTION_MIN_TOKENS: int = 3_000,
        c"nl2sql.extraction_min_tokens", Userset, GucFlags::default(),
        c"Smallest whole schema (estimated tokens) the full pipeline runs its extraction on.",
        c"A smaller schema goes whole to the candidates: one round trip less, no column left out, and a prompt that starts as every other on the database. The default is nl2sql.schema_max_tokens's: raise both together.",
        range(0, 1_000_000);
    EXTRACTION_MAX_TOKENS: int = 8_000,
        c"nl2sql.extraction_max_tokens", Userset, GucFlags::default(),
        c"Largest schema (estimated tokens) the extraction is shown whole when the candidates' is cut to nl2sql.schema_max_tokens.",
        c"The same prompt for every question, which an endpoint's cache keeps; a wider schema is linked by column and value search first.",
        range(0, 1_000_000);
    USE_CHAIN_OF_THOUGHT: bool = false,
        c"nl2sql.use_chain_of_thought", Userset, GucFlags::default(),
        c"Whether candidates are written with the structured chain of thought.",
        c"Off: candidates answer with the query only.";
    ALIGN_AGENT: bool = true,
        c"nl2sql.align_agent", Userset, GucFlags::default(),
        c"Whether names and values that do not exist are replaced by the real ones before execution.",
        c"";
    ALIGN_FUNCTION: bool = true,
        c"nl2sql.align_function", Userset, GucFlags::default(),
        c"Whether misplaced aggregates and redundant joins are rewritten before execution.",
        c"";
    ALIGN_STYLE: bool = true,
        c"nl2sql.align_style", Userset, GucFlags::default(),
        c"Whether ORDER BY ... LIMIT gets IS NOT NULL and unasked id columns leave the SELECT list.",
        c"";
    COLUMN_MATCHES: int = 5,
        c"nl2sql.column_matches", Userset, GucFlags::default(),
        c"Columns found by name similarity added to the extraction's choice.",
        c"The best this many, among those scoring at least 0.6 (nl2sql.search_columns).",
        range(0, 50);
    EXAMPLES: int = 0,
        c"nl2sql.examples", Userset, GucFlags::default(),
        c"Examples shown to the model as few-shot (k nearest by masked question); 0 shows none.",
        c"From nl2sql.examples: only those whose SQL reads what the role may read.",
        range(0, 20);
    INSTRUCTIONS: int = 5,
        c"nl2sql.instructions", Userset, GucFlags::default(),
        c"Curators' instructions shown beside a question, at most (chosen by its words and meaning); 0 shows none.",
        c"From nl2sql.instructions: only those about relations the role may read.",
        range(0, 20);
    GENERATORS: text = Some(c"open_sql,create_table"),
        c"nl2sql.generators", Userset, GucFlags::default(),
        c"Comma-separated prompts candidates are asked with: open_sql, create_table.",
        c"With more than one, the first wave asks each once at temperature 0, and later candidates take turns.",
        check(check_generators);
    MAX_TOKENS_PER_CALL: int = 0,
        c"nl2sql.max_tokens_per_call", Userset, GucFlags::default(),
        c"Most model tokens (prompt and completion) one question may use; 0 means no limit.",
        c"The pipeline plans within it: fewer candidates, no correction round; a question that cannot fit one candidate fails.",
        range(0, 100_000_000);
    AGENT_MAX_TURNS: int = 10,
        c"nl2sql.agent_max_turns", Userset, GucFlags::default(),
        c"Turns (one action each) the interactive agent may take before its last query that ran answers.",
        c"",
        range(1, 50);
}

pub fn mode() -> Mode {
    MODE.get()
}

pub fn candidates() -> usize {
    CANDIDATES.get().max(1) as usize
}

pub fn temperature() -> f32 {
    TEMPERATURE.get() as f32
}

pub fn agreement() -> usize {
    AGREEMENT.get().max(0) as usize
}

pub fn alone_confidence() -> f32 {
    ALONE_CONFIDENCE.get() as f32
}

pub fn min_confidence() -> f64 {
    MIN_CONFIDENCE.get()
}

pub fn on_low_confidence() -> OnLowConfidence {
    ON_LOW_CONFIDENCE.get()
}

pub fn max_corrections() -> u32 {
    MAX_CORRECTIONS.get().max(0) as u32
}

pub fn schema_max_tokens() -> usize {
    SCHEMA_MAX_TOKENS.get().max(1) as usize
}

pub fn sample_rows() -> i32 {
    SAMPLE_ROWS.get().max(0)
}

pub fn use_extraction() -> bool {
    USE_EXTRACTION.get()
}

pub fn extraction_min_tokens() -> usize {
    EXTRACTION_MIN_TOKENS.get().max(0) as usize
}

pub fn extraction_max_tokens() -> usize {
    EXTRACTION_MAX_TOKENS.get().max(0) as usize
}

pub fn use_chain_of_thought() -> bool {
    USE_CHAIN_OF_THOUGHT.get()
}

/// (agent, function, style)
pub fn alignments() -> (bool, bool, bool) {
    (ALIGN_AGENT.get(), ALIGN_FUNCTION.get(), ALIGN_STYLE.get())
}

pub fn column_matches() -> usize {
    COLUMN_MATCHES.get().max(0) as usize
}

pub fn examples() -> usize {
    EXAMPLES.get().max(0) as usize
}

pub fn refuse_unrelated() -> bool {
    REFUSE_UNRELATED.get()
}

pub fn instructions() -> usize {
    INSTRUCTIONS.get().max(0) as usize
}

/// nl2sql.generators, in order, without repeats (checked when set).
pub fn generators() -> Vec<nl2sql_core::pipeline::Generator> {
    let mut out = Vec::new();
    for g in string(&GENERATORS).unwrap_or_default().split(',').filter_map(nl2sql_core::pipeline::Generator::parse) {
        if !out.contains(&g) {
            out.push(g);
        }
    }
    out
}

/// nl2sql.max_tokens_per_call, None when 0.
pub fn max_tokens_per_call() -> Option<usize> {
    Some(MAX_TOKENS_PER_CALL.get()).filter(|t| *t > 0).map(|t| t as usize)
}

pub fn agent_max_turns() -> usize {
    AGENT_MAX_TURNS.get().max(1) as usize
}
