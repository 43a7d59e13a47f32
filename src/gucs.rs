//! Every `nl2sql.*` setting, registered once in `_PG_init`, with typed accessors.
//!
//! Security rule: the endpoint URL and the API key are SUSET. Only a superuser can change them, in
//! postgresql.conf, with ALTER SYSTEM, or per database / per role (`ALTER ROLE … SET nl2sql.llm_url`),
//! so no other role can point the configured key at a host of its own choosing. The key is also
//! SUPERUSER_ONLY and NO_SHOW_ALL: other roles cannot read it with SHOW, current_setting() or pg_settings.

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::ffi::CString;
use std::time::Duration;

static LLM_URL: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static LLM_MODEL: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static LLM_API_KEY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static LLM_TIMEOUT_MS: GucSetting<i32> = GucSetting::<i32>::new(120_000);
static LLM_MAX_RETRIES: GucSetting<i32> = GucSetting::<i32>::new(2);
static LLM_MAX_TOKENS: GucSetting<i32> = GucSetting::<i32>::new(1024);
static STATEMENT_TIMEOUT_MS: GucSetting<i32> = GucSetting::<i32>::new(5_000);
static MAX_ROWS: GucSetting<i32> = GucSetting::<i32>::new(1_000);
static MAX_CORRECTIONS: GucSetting<i32> = GucSetting::<i32>::new(1);
static SCHEMA_MAX_TOKENS: GucSetting<i32> = GucSetting::<i32>::new(8_000);
static SAMPLE_ROWS: GucSetting<i32> = GucSetting::<i32>::new(1_000);
static ALLOWED_FUNCTIONS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

/// Environment variables read for the API key when `nl2sql.llm_api_key` is empty, in order.
pub const API_KEY_ENV: [&str; 2] = ["NL2SQL_LLM_API_KEY", "OPENAI_API_KEY"];

pub fn init() {
    GucRegistry::define_string_guc(
        c"nl2sql.llm_url",
        c"Base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:8080/v1.",
        c"Requests go to <url>/chat/completions. Settable only by superusers.",
        &LLM_URL,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"nl2sql.llm_model",
        c"Model name sent with every chat completion request.",
        c"Left out of the request when empty (llama.cpp serves one model and ignores it).",
        &LLM_MODEL,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"nl2sql.llm_api_key",
        c"Bearer token for the LLM endpoint; falls back to NL2SQL_LLM_API_KEY, then OPENAI_API_KEY.",
        c"Settable and readable only by superusers; never printed in any message.",
        &LLM_API_KEY,
        GucContext::Suset,
        GucFlags::SUPERUSER_ONLY | GucFlags::NO_SHOW_ALL,
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
        c"Token budget of the schema part of a prompt; detail, then tables, are dropped beyond it.",
        c"",
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

/// The API key from the setting, else from the server's environment.
pub fn llm_api_key() -> Option<String> {
    string(&LLM_API_KEY).or_else(|| {
        API_KEY_ENV
            .iter()
            .find_map(|v| std::env::var(v).ok().map(|k| k.trim().to_string()).filter(|k| !k.is_empty()))
    })
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
