//! Every `nl2sql.*` setting, registered once in `_PG_init`, with typed accessors.
//!
//! Security rules:
//! - the endpoint URLs are SUSET, and a check hook refuses them from any role that is not a
//!   superuser even where PostgreSQL would allow it (GRANT SET ON PARAMETER), so no other role can
//!   point the configured key at a host of its own choosing;
//!   A URL stored before the library was loaded (by a role granted SET on it) is refused when
//!   used unless a superuser set it (secrets.rs);
//! - an API key is never taken from a setting: every place a setting can be made is readable by
//!   another role (world-readable catalogs, pg_settings for pg_read_all_settings, the statement
//!   text in pg_stat_activity, pg_stat_statements and the log). The key settings exist only to
//!   refuse a key with a clear error. A key comes from a key file only the server's OS user can
//!   read (nl2sql.llm_api_key_file) or from the server's environment.

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting, PostgresGucEnum};
use std::ffi::CString;
use std::time::Duration;

mod checks;
use checks::*;

static LLM_URL: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static LLM_MODEL: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static LLM_API_KEY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static LLM_TIMEOUT_MS: GucSetting<i32> = GucSetting::<i32>::new(120_000);
static LLM_MAX_RETRIES: GucSetting<i32> = GucSetting::<i32>::new(2);
static LLM_MAX_TOKENS: GucSetting<i32> = GucSetting::<i32>::new(1024);
static STATEMENT_TIMEOUT_MS: GucSetting<i32> = GucSetting::<i32>::new(5_000);
static MAX_ROWS: GucSetting<i32> = GucSetting::<i32>::new(1_000);
static MAX_CORRECTIONS: GucSetting<i32> = GucSetting::<i32>::new(1);
static SCHEMA_MAX_TOKENS: GucSetting<i32> = GucSetting::<i32>::new(3_000);
static SAMPLE_ROWS: GucSetting<i32> = GucSetting::<i32>::new(1_000);
static ALLOWED_FUNCTIONS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static EMBEDDING_URL: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static EMBEDDING_MODEL: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static EMBEDDING_API_KEY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static EMBEDDING_TIMEOUT_MS: GucSetting<i32> = GucSetting::<i32>::new(60_000);
static EMBEDDING_BATCH: GucSetting<i32> = GucSetting::<i32>::new(64);
static USE_VALUES: GucSetting<bool> = GucSetting::<bool>::new(true);
static PROFILE_ROWS: GucSetting<i32> = GucSetting::<i32>::new(10_000);
static PROFILE_TIMEOUT_MS: GucSetting<i32> = GucSetting::<i32>::new(10_000);
static USE_INFERRED_RELATIONSHIPS: GucSetting<bool> = GucSetting::<bool>::new(true);
static VALUE_THRESHOLD: GucSetting<f64> = GucSetting::<f64>::new(0.65);
static VALUE_TOP_K: GucSetting<i32> = GucSetting::<i32>::new(5);
static INDEX_MAX_VALUE_LENGTH: GucSetting<i32> = GucSetting::<i32>::new(200);
static INDEX_MAX_AVG_LENGTH: GucSetting<i32> = GucSetting::<i32>::new(80);
static INDEX_MAX_DISTINCT: GucSetting<i32> = GucSetting::<i32>::new(2_000_000);
static INDEX_HNSW_M: GucSetting<i32> = GucSetting::<i32>::new(4);
static INDEX_HNSW_EF_CONSTRUCTION: GucSetting<i32> = GucSetting::<i32>::new(8);
static INDEX_BUILD_MEMORY_MB: GucSetting<i32> = GucSetting::<i32>::new(1024);
static SEARCH_EF: GucSetting<i32> = GucSetting::<i32>::new(40);
static MODE: GucSetting<Mode> = GucSetting::<Mode>::new(Mode::Full);
static CANDIDATES: GucSetting<i32> = GucSetting::<i32>::new(5);
static TEMPERATURE: GucSetting<f64> = GucSetting::<f64>::new(0.7);
static AGREEMENT: GucSetting<i32> = GucSetting::<i32>::new(2);
static MIN_CONFIDENCE: GucSetting<f64> = GucSetting::<f64>::new(0.5);
static ALONE_CONFIDENCE: GucSetting<f64> = GucSetting::<f64>::new(0.0);
static USE_EXTRACTION: GucSetting<bool> = GucSetting::<bool>::new(true);
static EXTRACTION_MIN_TOKENS: GucSetting<i32> = GucSetting::<i32>::new(2_000);
static EXTRACTION_MAX_TOKENS: GucSetting<i32> = GucSetting::<i32>::new(8_000);
static LLM_N: GucSetting<bool> = GucSetting::<bool>::new(true);
static USE_CHAIN_OF_THOUGHT: GucSetting<bool> = GucSetting::<bool>::new(false);
static ALIGN_AGENT: GucSetting<bool> = GucSetting::<bool>::new(true);
static ALIGN_FUNCTION: GucSetting<bool> = GucSetting::<bool>::new(true);
static ALIGN_STYLE: GucSetting<bool> = GucSetting::<bool>::new(true);
static COLUMN_MATCHES: GucSetting<i32> = GucSetting::<i32>::new(5);
static EXAMPLES: GucSetting<i32> = GucSetting::<i32>::new(0);
static GENERATORS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"open_sql,create_table"));
static ALLOW_FOREIGN_TABLES: GucSetting<bool> = GucSetting::<bool>::new(false);
static SUPERUSER_ROLE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"pg_read_all_data"));
static MAX_RESULT_KB: GucSetting<i32> = GucSetting::<i32>::new(10_240);
static MAX_ANSWER_KB: GucSetting<i32> = GucSetting::<i32>::new(256);
static LLM_API_KEY_FILE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static EMBEDDING_API_KEY_FILE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static PRIVACY: GucSetting<bool> = GucSetting::<bool>::new(false);
static COLUMN_EMBEDDER: GucSetting<ColumnEmbedder> = GucSetting::<ColumnEmbedder>::new(ColumnEmbedder::Values);
static ON_LOW_CONFIDENCE: GucSetting<OnLowConfidence> = GucSetting::<OnLowConfidence>::new(OnLowConfidence::Notice);
static MAX_COST: GucSetting<f64> = GucSetting::<f64>::new(0.0);
static MAX_TOKENS_PER_CALL: GucSetting<i32> = GucSetting::<i32>::new(0);
static HISTORY: GucSetting<bool> = GucSetting::<bool>::new(true);
static AGENT_MAX_TURNS: GucSetting<i32> = GucSetting::<i32>::new(10);
static HISTORY_RETENTION_MIN: GucSetting<i32> = GucSetting::<i32>::new(30 * 24 * 60);

/// Values of nl2sql.column_embedder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PostgresGucEnum)]
pub enum ColumnEmbedder {
    /// The value index's embedder: built-in, or nl2sql.embedding_url.
    #[name = c"values"]
    Values,
    /// all-MiniLM-L6-v2, run inside the backend.
    #[name = c"minilm"]
    MiniLm,
}

/// Values of nl2sql.on_low_confidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PostgresGucEnum)]
pub enum OnLowConfidence {
    #[name = c"notice"]
    Notice,
    #[name = c"error"]
    Error,
}

/// Values of nl2sql.mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PostgresGucEnum)]
pub enum Mode {
    #[name = c"full"]
    Full,
    #[name = c"zero_shot"]
    ZeroShot,
    #[name = c"interactive"]
    Interactive,
}

/// Environment variables read for the embedding endpoint's key when its setting is empty.
pub const EMBEDDING_KEY_ENV: [&str; 2] = ["NL2SQL_EMBEDDING_API_KEY", "OPENAI_API_KEY"];

/// Environment variables read for the API key when `nl2sql.llm_api_key` is empty, in order.
pub const API_KEY_ENV: [&str; 2] = ["NL2SQL_LLM_API_KEY", "OPENAI_API_KEY"];

pub fn init() {
    // SAFETY: the hooks are #[pg_guard] functions of this file.
    unsafe {
        GucRegistry::define_string_guc_with_hooks(
            c"nl2sql.llm_url",
            c"Base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:8080/v1.",
            c"Requests go to <url>/chat/completions. Settable only by superusers.",
            &LLM_URL,
            GucContext::Suset,
            GucFlags::default(),
            Some(check_url),
            None,
            None,
        )
    };
    GucRegistry::define_string_guc(
        c"nl2sql.llm_model",
        c"Model name sent with every chat completion request.",
        c"Left out of the request when empty (llama.cpp serves one model and ignores it).",
        &LLM_MODEL,
        GucContext::Userset,
        GucFlags::default(),
    );
    // SAFETY: as above.
    unsafe {
        GucRegistry::define_string_guc_with_hooks(
            c"nl2sql.llm_api_key",
            c"Refused: the LLM endpoint's key comes from nl2sql.llm_api_key_file, NL2SQL_LLM_API_KEY or OPENAI_API_KEY.",
            c"A key is never taken from a setting: other roles can read settings and the statements that make them.",
            &LLM_API_KEY,
            GucContext::Suset,
            GucFlags::SUPERUSER_ONLY | GucFlags::NO_SHOW_ALL,
            Some(check_key),
            None,
            Some(show_llm_key),
        )
    };
    GucRegistry::define_string_guc(
        c"nl2sql.llm_api_key_file",
        c"File holding the LLM endpoint's bearer token, readable only by the server's OS user.",
        c"Absolute path; the file must not be readable by group or others. Read at every call, so a key can be rotated without a restart.",
        &LLM_API_KEY_FILE,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.llm_timeout",
        c"Time allowed for one LLM call, retries included.",
        c"",
        &LLM_TIMEOUT_MS,
        100,
        3_600_000,
        GucContext::Userset,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"nl2sql.llm_max_retries",
        c"Retries of an LLM call answered with HTTP 429 or 5xx, with exponential backoff.",
        c"",
        &LLM_MAX_RETRIES,
        0,
        10,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.llm_max_tokens",
        c"Most completion tokens one LLM answer may use.",
        c"",
        &LLM_MAX_TOKENS,
        16,
        65_536,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"nl2sql.llm_n",
        c"Whether the candidates of a wave are asked for in one request (OpenAI's n parameter).",
        c"An endpoint that refuses n (llama.cpp's server) or ignores it is sent one request per candidate, and no n again in this session.",
        &LLM_N,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.statement_timeout",
        c"Time allowed for executing one generated query.",
        c"",
        &STATEMENT_TIMEOUT_MS,
        1,
        3_600_000,
        GucContext::Userset,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"nl2sql.max_rows",
        c"Most rows fetched from a generated query.",
        c"",
        &MAX_ROWS,
        1,
        10_000_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.max_corrections",
        c"Correction rounds after a generated query fails.",
        c"",
        &MAX_CORRECTIONS,
        0,
        10,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.schema_max_tokens",
        c"Token budget of the schema part of a prompt (estimated tokens).",
        c"A schema over it is shown in Open-SQL's variable-length form: the tables linked to the question in full, the others by name.",
        &SCHEMA_MAX_TOKENS,
        100,
        1_000_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.sample_rows",
        c"Rows read per table for the example values and ranges shown to the model.",
        c"",
        &SAMPLE_ROWS,
        0,
        1_000_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"nl2sql.allowed_functions",
        c"Comma-separated volatile functions that generated SQL may call (besides random() and the like).",
        c"Administrative functions (pg_terminate_backend, set_config, pg_sleep, dblink, lo_*, pg_read_*, ...) stay forbidden. Settable only by superusers.",
        &ALLOWED_FUNCTIONS,
        GucContext::Suset,
        GucFlags::default(),
    );
    // SAFETY: as above.
    unsafe {
        GucRegistry::define_string_guc_with_hooks(
            c"nl2sql.embedding_url",
            c"Base URL of an OpenAI-compatible embeddings API; empty: the built-in embedder.",
            c"Requests go to <url>/embeddings. Settable only by superusers. Changing the embedder makes existing value indexes stale.",
            &EMBEDDING_URL,
            GucContext::Suset,
            GucFlags::default(),
            Some(check_url),
            None,
            None,
        )
    };
    GucRegistry::define_enum_guc(
        c"nl2sql.column_embedder",
        c"What embeds column descriptions for column search: values (the value index's embedder) or minilm.",
        c"minilm: the sentence model all-MiniLM-L6-v2 run inside the database, no network (its files under the share directory, see scripts/setup.sh). Settable only by superusers; nl2sql.refresh_value_indexes() embeds the descriptions.",
        &COLUMN_EMBEDDER,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"nl2sql.embedding_model",
        c"Model name sent with every embeddings request.",
        c"",
        &EMBEDDING_MODEL,
        GucContext::Suset,
        GucFlags::default(),
    );
    // SAFETY: as above.
    unsafe {
        GucRegistry::define_string_guc_with_hooks(
            c"nl2sql.embedding_api_key",
            c"Refused: the embeddings endpoint's key comes from nl2sql.embedding_api_key_file, NL2SQL_EMBEDDING_API_KEY or OPENAI_API_KEY.",
            c"A key is never taken from a setting: other roles can read settings and the statements that make them.",
            &EMBEDDING_API_KEY,
            GucContext::Suset,
            GucFlags::SUPERUSER_ONLY | GucFlags::NO_SHOW_ALL,
            Some(check_key),
            None,
            Some(show_embedding_key),
        )
    };
    GucRegistry::define_string_guc(
        c"nl2sql.embedding_api_key_file",
        c"File holding the embeddings endpoint's bearer token, readable only by the server's OS user.",
        c"",
        &EMBEDDING_API_KEY_FILE,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.embedding_timeout",
        c"Time allowed for one embeddings request, retries included.",
        c"",
        &EMBEDDING_TIMEOUT_MS,
        100,
        3_600_000,
        GucContext::Userset,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"nl2sql.embedding_batch",
        c"Texts sent in one embeddings request.",
        c"",
        &EMBEDDING_BATCH,
        1,
        2048,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"nl2sql.use_values",
        c"Whether nl2sql() shows the model stored values similar to words of the question.",
        c"Needs value indexes (nl2sql.create_value_index). Off: the ablation without value retrieval.",
        &USE_VALUES,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.profile_rows",
        c"Rows nl2sql.profile_relationships() reads of each table (a block sample of a larger one).",
        c"",
        &PROFILE_ROWS,
        100,
        10_000_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.profile_timeout",
        c"Time allowed for each read profiling makes of a table.",
        c"A table or a check that takes longer is left out, with a NOTICE.",
        &PROFILE_TIMEOUT_MS,
        100,
        3_600_000,
        GucContext::Userset,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_bool_guc(
        c"nl2sql.use_inferred_relationships",
        c"Whether keys and relationships profiling inferred are used like declared ones.",
        c"Relationships a DBA confirmed are used either way; off: the ablation without inference.",
        &USE_INFERRED_RELATIONSHIPS,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"nl2sql.value_threshold",
        c"Lowest similarity (0 to 1) of a retrieved value.",
        c"",
        &VALUE_THRESHOLD,
        0.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.value_top_k",
        c"Retrieved values shown to the model.",
        c"",
        &VALUE_TOP_K,
        0,
        100,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.index_max_value_length",
        c"Longer values are not indexed (their phrases still are not either).",
        c"",
        &INDEX_MAX_VALUE_LENGTH,
        1,
        10_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.index_max_avg_length",
        c"Columns whose values average more characters are free text and not indexed.",
        c"",
        &INDEX_MAX_AVG_LENGTH,
        1,
        10_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.index_max_distinct",
        c"Columns with more distinct values are not indexed.",
        c"",
        &INDEX_MAX_DISTINCT,
        1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.index_hnsw_m",
        c"HNSW m of value indexes built from now on.",
        c"",
        &INDEX_HNSW_M,
        2,
        100,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.index_hnsw_ef_construction",
        c"HNSW ef_construction of value indexes built from now on.",
        c"",
        &INDEX_HNSW_EF_CONSTRUCTION,
        4,
        1000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.index_build_memory",
        c"maintenance_work_mem used while building a value index, when larger than the current one.",
        c"",
        &INDEX_BUILD_MEMORY_MB,
        1,
        1_048_576,
        GucContext::Userset,
        GucFlags::UNIT_MB,
    );
    GucRegistry::define_int_guc(
        c"nl2sql.search_ef",
        c"hnsw.ef_search used by value and column search.",
        c"",
        &SEARCH_EF,
        1,
        1000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_enum_guc(
        c"nl2sql.mode",
        c"Pipeline nl2sql() runs: full (extraction, n candidates, alignments, vote), zero_shot or interactive.",
        c"zero_shot: one generation from the whole schema, corrected up to nl2sql.max_corrections times; interactive: an agent that searches columns and values, asks for join paths and runs queries.",
        &MODE,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.candidates",
        c"Candidate queries generated per question (n).",
        c"Requested concurrently, in two waves when nl2sql.agreement is above 0.",
        &CANDIDATES,
        1,
        32,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"nl2sql.temperature",
        c"Sampling temperature of the candidates when more than one is generated.",
        c"Extraction, corrections and a single candidate always use 0.",
        &TEMPERATURE,
        0.0,
        2.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.agreement",
        c"Agreeing candidates that stop sampling early (adaptive n); 0 never stops early.",
        c"The first wave asks for this many candidates; the rest of nl2sql.candidates only when they disagree.",
        &AGREEMENT,
        0,
        32,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"nl2sql.alone_confidence",
        c"The first generator's answer stands alone when it returns rows and every token of it was at least this probable to the model; 0: whenever it returns rows.",
        c"Asks the first generator alone; the others only when its answer fails, returns no rows or is less sure. Above 0 needs an endpoint that returns logprobs (llama.cpp's server, vLLM, OpenAI); 1 never lets it stand alone; nl2sql.agreement = 0 asks every generator at once.",
        &ALONE_CONFIDENCE,
        0.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"nl2sql.min_confidence",
        c"Share of candidates that must agree; below it nl2sql() still answers but raises a NOTICE.",
        c"",
        &MIN_CONFIDENCE,
        0.0,
        1.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"nl2sql.use_extraction",
        c"Whether the full pipeline first extracts columns, values and the SELECT content.",
        c"Off: candidates see the whole schema (the ablation without extraction).",
        &USE_EXTRACTION,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.extraction_min_tokens",
        c"Smallest whole schema (estimated tokens) the full pipeline runs its extraction on.",
        c"A smaller schema goes whole to the candidates: one round trip less, and a prompt that starts as every other on the database.",
        &EXTRACTION_MIN_TOKENS,
        0,
        1_000_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.extraction_max_tokens",
        c"Largest schema (estimated tokens) the extraction is shown whole when the candidates' is cut to nl2sql.schema_max_tokens.",
        c"The same prompt for every question, which an endpoint's cache keeps; a wider schema is linked by column and value search first.",
        &EXTRACTION_MAX_TOKENS,
        0,
        1_000_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"nl2sql.use_chain_of_thought",
        c"Whether candidates are written with the structured chain of thought.",
        c"Off: candidates answer with the query only.",
        &USE_CHAIN_OF_THOUGHT,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"nl2sql.align_agent",
        c"Whether names and values that do not exist are replaced by the real ones before execution.",
        c"",
        &ALIGN_AGENT,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"nl2sql.align_function",
        c"Whether misplaced aggregates and redundant joins are rewritten before execution.",
        c"",
        &ALIGN_FUNCTION,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"nl2sql.align_style",
        c"Whether ORDER BY ... LIMIT gets IS NOT NULL and unasked id columns leave the SELECT list.",
        c"",
        &ALIGN_STYLE,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.column_matches",
        c"Columns found by name similarity added to the extraction's choice.",
        c"The best this many, among those scoring at least 0.6 (nl2sql.search_columns).",
        &COLUMN_MATCHES,
        0,
        50,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.examples",
        c"Examples shown to the model as few-shot (k nearest by masked question); 0 shows none.",
        c"From nl2sql.examples: only those whose SQL reads what the role may read.",
        &EXAMPLES,
        0,
        20,
        GucContext::Userset,
        GucFlags::default(),
    );
    // SAFETY: the hook is a #[pg_guard] function of this file.
    unsafe {
        GucRegistry::define_string_guc_with_hooks(
            c"nl2sql.generators",
            c"Comma-separated prompts candidates are asked with: open_sql, create_table.",
            c"With more than one, the first wave asks each once at temperature 0, and later candidates take turns.",
            &GENERATORS,
            GucContext::Userset,
            GucFlags::default(),
            Some(check_generators),
            None,
            None,
        )
    };
    GucRegistry::define_string_guc(
        c"nl2sql.superuser_role",
        c"Role whose rights a superuser's questions run with; generated SQL never runs as a superuser.",
        c"Default pg_read_all_data: reads every table and is not a superuser. It must not be a superuser itself.",
        &SUPERUSER_ROLE,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"nl2sql.allow_foreign_tables",
        c"Whether generated SQL may read foreign tables (directly, or as partitions and inheritance children).",
        c"Reading one runs queries on another server as the user mapping says, and keeps its connection open. Settable only by superusers.",
        &ALLOW_FOREIGN_TABLES,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.max_result_bytes",
        c"Most bytes of text a generated query may return; enforced while rows arrive.",
        c"",
        &MAX_RESULT_KB,
        1,
        1_048_576,
        GucContext::Userset,
        GucFlags::UNIT_KB,
    );
    GucRegistry::define_int_guc(
        c"nl2sql.max_answer_bytes",
        c"Largest answer read from the model endpoint; larger answers are refused unread.",
        c"",
        &MAX_ANSWER_KB,
        1,
        65_536,
        GucContext::Userset,
        GucFlags::UNIT_KB,
    );
    operations();
    // Refuse unknown nl2sql.* settings (typos) from now on; before PostgreSQL 15, warn about them.
    #[cfg(not(any(feature = "pg13", feature = "pg14")))]
    unsafe {
        pgrx::pg_sys::MarkGUCPrefixReserved(c"nl2sql".as_ptr())
    };
    #[cfg(any(feature = "pg13", feature = "pg14"))]
    unsafe {
        pgrx::pg_sys::EmitWarningsOnPlaceholders(c"nl2sql".as_ptr())
    };
}

/// The settings of daily operation: privacy, abstention, cost and token limits, history.
fn operations() {
    GucRegistry::define_bool_guc(
        c"nl2sql.privacy",
        c"Whether no row data leaves the database: no samples, values, results or literals in any prompt.",
        c"Settable only by superusers (per role or database with ALTER ROLE/DATABASE ... SET): a role cannot turn it off.",
        &PRIVACY,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_enum_guc(
        c"nl2sql.on_low_confidence",
        c"What an answer below nl2sql.min_confidence does: notice (answer with a NOTICE) or error (abstain).",
        c"error raises SQLSTATE P0002 (no_data_found) with the candidates in DETAIL. Zero-shot answers have no confidence and never abstain.",
        &ON_LOW_CONFIDENCE,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"nl2sql.max_cost",
        c"Largest planner cost estimate of a generated query that is executed; 0 means no limit.",
        c"A candidate estimated above it is planned, not run, and the next candidate may win.",
        &MAX_COST,
        0.0,
        1e300,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.max_tokens_per_call",
        c"Most model tokens (prompt and completion) one question may use; 0 means no limit.",
        c"The pipeline plans within it: fewer candidates, no correction round; a question that cannot fit one candidate fails.",
        &MAX_TOKENS_PER_CALL,
        0,
        100_000_000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.agent_max_turns",
        c"Turns (one action each) the interactive agent may take before its last query that ran answers.",
        c"",
        &AGENT_MAX_TURNS,
        1,
        50,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"nl2sql.history",
        c"Whether every call is recorded in nl2sql.history.",
        c"Settable only by superusers: the history is also an audit trail.",
        &HISTORY,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"nl2sql.history_retention",
        c"How long nl2sql.purge_history() keeps history rows; 0 keeps them forever.",
        c"",
        &HISTORY_RETENTION_MIN,
        0,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_MIN,
    );
}

pub fn privacy() -> bool {
    PRIVACY.get()
}

pub fn column_embedder() -> ColumnEmbedder {
    COLUMN_EMBEDDER.get()
}

pub fn on_low_confidence() -> OnLowConfidence {
    ON_LOW_CONFIDENCE.get()
}

/// nl2sql.max_cost, None when 0.
pub fn max_cost() -> Option<f64> {
    Some(MAX_COST.get()).filter(|c| *c > 0.0)
}

/// nl2sql.max_tokens_per_call, None when 0.
pub fn max_tokens_per_call() -> Option<usize> {
    Some(MAX_TOKENS_PER_CALL.get()).filter(|t| *t > 0).map(|t| t as usize)
}

pub fn agent_max_turns() -> usize {
    AGENT_MAX_TURNS.get().max(1) as usize
}

pub fn history() -> bool {
    HISTORY.get()
}

/// nl2sql.history_retention in minutes, None when 0 (forever).
pub fn history_retention_minutes() -> Option<i64> {
    Some(HISTORY_RETENTION_MIN.get()).filter(|m| *m > 0).map(i64::from)
}

fn string(s: &GucSetting<Option<CString>>) -> Option<String> {
    s.get()
        .map(|c| c.to_string_lossy().trim().to_string())
        .filter(|v| !v.is_empty())
}

pub fn llm_url() -> Option<String> {
    string(&LLM_URL)
}

pub fn llm_model() -> Option<String> {
    string(&LLM_MODEL)
}

/// The file the API key is read from (secrets.rs reads it).
pub fn llm_api_key_file() -> Option<String> {
    string(&LLM_API_KEY_FILE)
}

fn ms(s: &GucSetting<i32>) -> Duration {
    Duration::from_millis(s.get().max(0) as u64)
}

pub fn llm_timeout() -> Duration {
    ms(&LLM_TIMEOUT_MS)
}

pub fn llm_max_retries() -> u32 {
    LLM_MAX_RETRIES.get().max(0) as u32
}

pub fn llm_max_tokens() -> u32 {
    LLM_MAX_TOKENS.get().max(1) as u32
}

pub fn statement_timeout() -> Duration {
    ms(&STATEMENT_TIMEOUT_MS)
}

pub fn max_rows() -> usize {
    MAX_ROWS.get().max(1) as usize
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

pub fn allowed_functions() -> Vec<String> {
    string(&ALLOWED_FUNCTIONS)
        .map(|s| s.split(',').map(|f| f.trim().to_string()).filter(|f| !f.is_empty()).collect())
        .unwrap_or_default()
}

pub fn embedding_url() -> Option<String> {
    string(&EMBEDDING_URL)
}

pub fn embedding_model() -> Option<String> {
    string(&EMBEDDING_MODEL)
}

/// The file the embeddings endpoint's key is read from (secrets.rs reads it).
pub fn embedding_api_key_file() -> Option<String> {
    string(&EMBEDDING_API_KEY_FILE)
}

pub fn embedding_timeout() -> Duration {
    ms(&EMBEDDING_TIMEOUT_MS)
}

pub fn embedding_batch() -> usize {
    EMBEDDING_BATCH.get().max(1) as usize
}

pub fn use_values() -> bool {
    USE_VALUES.get()
}

pub fn profile_rows() -> i32 {
    PROFILE_ROWS.get().max(100)
}

pub fn profile_timeout() -> Duration {
    Duration::from_millis(PROFILE_TIMEOUT_MS.get().max(1) as u64)
}

pub fn use_inferred_relationships() -> bool {
    USE_INFERRED_RELATIONSHIPS.get()
}

pub fn value_threshold() -> f32 {
    VALUE_THRESHOLD.get() as f32
}

pub fn value_top_k() -> usize {
    VALUE_TOP_K.get().max(0) as usize
}

pub fn index_max_value_length() -> i32 {
    INDEX_MAX_VALUE_LENGTH.get()
}

pub fn index_max_avg_length() -> i32 {
    INDEX_MAX_AVG_LENGTH.get()
}

pub fn index_max_distinct() -> i64 {
    INDEX_MAX_DISTINCT.get() as i64
}

pub fn index_hnsw_m() -> i32 {
    INDEX_HNSW_M.get()
}

pub fn index_hnsw_ef_construction() -> i32 {
    INDEX_HNSW_EF_CONSTRUCTION.get().max(2 * INDEX_HNSW_M.get())
}

pub fn index_build_memory_mb() -> i32 {
    INDEX_BUILD_MEMORY_MB.get()
}

pub fn search_ef() -> i32 {
    SEARCH_EF.get()
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

pub fn use_extraction() -> bool {
    USE_EXTRACTION.get()
}

pub fn extraction_min_tokens() -> usize {
    EXTRACTION_MIN_TOKENS.get().max(0) as usize
}

pub fn extraction_max_tokens() -> usize {
    EXTRACTION_MAX_TOKENS.get().max(0) as usize
}

pub fn llm_n() -> bool {
    LLM_N.get()
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

pub fn superuser_role() -> String {
    string(&SUPERUSER_ROLE).unwrap_or_else(|| "pg_read_all_data".into())
}

pub fn max_result_bytes() -> usize {
    (MAX_RESULT_KB.get().max(1) as usize).saturating_mul(1024)
}

pub fn max_answer_bytes() -> usize {
    (MAX_ANSWER_KB.get().max(1) as usize).saturating_mul(1024)
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

pub fn examples() -> usize {
    EXAMPLES.get().max(0) as usize
}


pub fn allow_foreign_tables() -> bool {
    ALLOW_FOREIGN_TABLES.get()
}
