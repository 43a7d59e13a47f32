//! The model and embedding endpoints: where requests go, how long they may take, how big an
//! answer may be. The URLs and key files are superuser-only (see gucs/mod.rs for why).

// The hooks through gucs (its `use checks::*`): checks.rs reads this table's key settings.
use super::{check_key, check_url, show_embedding_key, show_llm_key};
use super::{ms, string, ColumnEmbedder, Grammar};
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::ffi::CString;
use std::time::Duration;

/// Environment variables read for the embedding endpoint's key when its setting is empty.
pub const EMBEDDING_KEY_ENV: [&str; 2] = ["NL2SQL_EMBEDDING_API_KEY", "OPENAI_API_KEY"];

/// Environment variables read for the API key when `nl2sql.llm_api_key` is empty, in order.
pub const API_KEY_ENV: [&str; 2] = ["NL2SQL_LLM_API_KEY", "OPENAI_API_KEY"];

settings! {
    LLM_URL: text = None,
        c"nl2sql.llm_url", Suset, GucFlags::default(),
        c"Base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:8080/v1.",
        c"Requests go to <url>/chat/completions. Settable only by superusers.",
        check(check_url);
    LLM_MODEL: text = None,
        c"nl2sql.llm_model", Userset, GucFlags::default(),
        c"Model name sent with every chat completion request.",
        c"Left out of the request when empty (llama.cpp serves one model and ignores it).";
    LLM_API_KEY: text = None,
        c"nl2sql.llm_api_key", Suset, GucFlags::SUPERUSER_ONLY | GucFlags::NO_SHOW_ALL,
        c"Refused: the LLM endpoint's key comes from nl2sql.llm_api_key_file, NL2SQL_LLM_API_KEY or OPENAI_API_KEY.",
        c"A key is never taken from a setting: other roles can read settings and the statements that make them.",
        check(check_key),
        show(show_llm_key);
    LLM_API_KEY_FILE: text = None,
        c"nl2sql.llm_api_key_file", Suset, GucFlags::default(),
        c"File holding the LLM endpoint's bearer token, readable only by the server's OS user.",
        c"Absolute path; the file must not be readable by group or others. Read at every call, so a key can be rotated without a restart.";
    LLM_TIMEOUT_MS: int = 120_000,
        c"nl2sql.llm_timeout", Userset, GucFlags::UNIT_MS,
        c"Time allowed for one LLM call, retries included.",
        c"",
        range(100, 3_600_000);
    LLM_MAX_RETRIES: int = 2,
        c"nl2sql.llm_max_retries", Userset, GucFlags::default(),
        c"Retries of an LLM call answered with HTTP 429 or 5xx, with exponential backoff.",
        c"",
        range(0, 10);
    LLM_MAX_TOKENS: int = 1024,
        c"nl2sql.llm_max_tokens", Userset, GucFlags::default(),
        c"Most completion tokens one LLM answer may use.",
        c"",
        range(16, 65_536);
    LLM_N: bool = true,
        c"nl2sql.llm_n", Userset, GucFlags::default(),
        c"Whether the candidates of a wave are asked for in one request (OpenAI's n parameter).",
        c"An endpoint that refuses n (llama.cpp's server) or ignores it is sent one request per candidate, and no n again in this session.";
    LLM_GRAMMAR: choice(Grammar) = Grammar::Auto,
        c"nl2sql.grammar", Userset, GucFlags::default(),
        c"Whether generation requests carry a grammar of the names the prompt shows: off, auto, llama_cpp or vllm.",
        c"auto and llama_cpp send llama.cpp's \"grammar\" field, vllm sends \"structured_outputs\": {\"grammar\": ...}; an endpoint that refuses it is asked again without, and after a refusal with HTTP 400 or 422 (the request then working without) not sent one again in this session.";
    MAX_ANSWER_KB: int = 256,
        c"nl2sql.max_answer_bytes", Userset, GucFlags::UNIT_KB,
        c"Largest answer read from the model endpoint; larger answers are refused unread.",
        c"",
        range(1, 65_536);
    EMBEDDING_URL: text = None,
        c"nl2sql.embedding_url", Suset, GucFlags::default(),
        c"Base URL of an OpenAI-compatible embeddings API; empty: the built-in embedder.",
        c"Requests go to <url>/embeddings. Settable only by superusers. Changing the embedder makes existing value indexes stale.",
        check(check_url);
    EMBEDDING_MODEL: text = None,
        c"nl2sql.embedding_model", Suset, GucFlags::default(),
        c"Model name sent with every embeddings request.",
        c"";
    EMBEDDING_API_KEY: text = None,
        c"nl2sql.embedding_api_key", Suset, GucFlags::SUPERUSER_ONLY | GucFlags::NO_SHOW_ALL,
        c"Refused: the embeddings endpoint's key comes from nl2sql.embedding_api_key_file, NL2SQL_EMBEDDING_API_KEY or OPENAI_API_KEY.",
        c"A key is never taken from a setting: other roles can read settings and the statements that make them.",
        check(check_key),
        show(show_embedding_key);
    EMBEDDING_API_KEY_FILE: text = None,
        c"nl2sql.embedding_api_key_file", Suset, GucFlags::default(),
        c"File holding the embeddings endpoint's bearer token, readable only by the server's OS user.",
        c"";
    EMBEDDING_TIMEOUT_MS: int = 60_000,
        c"nl2sql.embedding_timeout", Userset, GucFlags::UNIT_MS,
        c"Time allowed for one embeddings request, retries included.",
        c"",
        range(100, 3_600_000);
    EMBEDDING_BATCH: int = 64,
        c"nl2sql.embedding_batch", Userset, GucFlags::default(),
        c"Texts sent in one embeddings request.",
        c"",
        range(1, 2048);
    COLUMN_EMBEDDER: choice(ColumnEmbedder) = ColumnEmbedder::Values,
        c"nl2sql.column_embedder", Suset, GucFlags::default(),
        c"What embeds column descriptions for column search: values (the value index's embedder) or minilm.",
        c"minilm: the sentence model all-MiniLM-L6-v2 run inside the database, no network (its files under the share directory, see scripts/setup.sh). Settable only by superusers; nl2sql.refresh_value_indexes() embeds the descriptions.";
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

pub fn llm_timeout() -> Duration {
    ms(&LLM_TIMEOUT_MS)
}

pub fn llm_max_retries() -> u32 {
    LLM_MAX_RETRIES.get().max(0) as u32
}

pub fn llm_max_tokens() -> u32 {
    LLM_MAX_TOKENS.get().max(1) as u32
}

pub fn llm_n() -> bool {
    LLM_N.get()
}

pub fn grammar() -> nl2sql_core::grammar::Mode {
    use nl2sql_core::grammar::Mode;
    match LLM_GRAMMAR.get() {
        Grammar::Off => Mode::Off,
        Grammar::Auto => Mode::Auto,
        Grammar::LlamaCpp => Mode::LlamaCpp,
        Grammar::Vllm => Mode::Vllm,
    }
}

pub fn max_answer_bytes() -> usize {
    (MAX_ANSWER_KB.get().max(1) as usize).saturating_mul(1024)
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

pub fn column_embedder() -> ColumnEmbedder {
    COLUMN_EMBEDDER.get()
}
