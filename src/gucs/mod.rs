//! Every `nl2sql.*` setting, registered once in `_PG_init`, with typed accessors.
//!
//! Each setting is declared once, in its group's `settings!` table (endpoints, sandbox, values,
//! pipeline, operations): its static, default, name, context, flags, descriptions, range and
//! hooks. The table registers it; the group's accessors below the table turn it into the type
//! the code uses. `tests/test_docs.py` checks the README's settings table against these names.
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

use pgrx::{GucSetting, PostgresGucEnum};
use std::ffi::CString;
use std::time::Duration;

/// One group's declarations: `NAME: kind = default, c"nl2sql.<name>", context, flags, c"short",
/// c"long"[, range(min, max)][, check(hook)][, show(hook)];` with kind `int`, `real`, `bool`,
/// `text` or `choice(Enum)`. Declares each static and a `register()` that defines them all.
macro_rules! settings {
    ($($var:ident: $kind:ident $(($ety:ty))? = $default:expr,
        $name:literal, $context:ident, $flags:expr,
        $short:literal,
        $long:literal
        $(, range($min:expr, $max:expr))?
        $(, check($check:expr))?
        $(, show($show:expr))?;)*) => {
        $(pub(super) static $var: GucSetting<settings!(@type $kind $($ety)?)> = GucSetting::<settings!(@type $kind $($ety)?)>::new($default);)*

        /// Registers this group's settings (from `_PG_init`).
        pub(super) fn register() {
            $(settings!(@define $kind, $var, $name, $short, $long, GucContext::$context, $flags,
                [$($min, $max)?], [$($check)?], [$($show)?]);)*
        }
    };
    (@type int) => { i32 };
    (@type real) => { f64 };
    (@type bool) => { bool };
    (@type text) => { Option<CString> };
    (@type choice $ety:ty) => { $ety };
    (@define int, $var:ident, $name:literal, $short:literal, $long:literal, $context:expr, $flags:expr, [$min:expr, $max:expr], [], []) => {
        GucRegistry::define_int_guc($name, $short, $long, &$var, $min, $max, $context, $flags)
    };
    (@define real, $var:ident, $name:literal, $short:literal, $long:literal, $context:expr, $flags:expr, [$min:expr, $max:expr], [], []) => {
        GucRegistry::define_float_guc($name, $short, $long, &$var, $min, $max, $context, $flags)
    };
    (@define bool, $var:ident, $name:literal, $short:literal, $long:literal, $context:expr, $flags:expr, [], [], []) => {
        GucRegistry::define_bool_guc($name, $short, $long, &$var, $context, $flags)
    };
    (@define choice, $var:ident, $name:literal, $short:literal, $long:literal, $context:expr, $flags:expr, [], [], []) => {
        GucRegistry::define_enum_guc($name, $short, $long, &$var, $context, $flags)
    };
    (@define text, $var:ident, $name:literal, $short:literal, $long:literal, $context:expr, $flags:expr, [], [], []) => {
        GucRegistry::define_string_guc($name, $short, $long, &$var, $context, $flags)
    };
    (@define text, $var:ident, $name:literal, $short:literal, $long:literal, $context:expr, $flags:expr, [], [$($check:expr)?], [$($show:expr)?]) => {
        // SAFETY: the hooks are #[pg_guard] functions of checks.rs.
        unsafe {
            GucRegistry::define_string_guc_with_hooks($name, $short, $long, &$var, $context, $flags,
                settings!(@hook $($check)?), None, settings!(@hook $($show)?))
        }
    };
    (@hook) => { None };
    (@hook $hook:expr) => { Some($hook) };
}

mod checks;
mod endpoints;
mod operations;
mod pipeline;
mod sandbox;
mod values;

use checks::*;
pub use endpoints::*;
pub use operations::*;
pub use pipeline::*;
pub use sandbox::*;
pub use values::*;

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

/// Values of nl2sql.grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PostgresGucEnum)]
pub enum Grammar {
    #[name = c"off"]
    Off,
    /// llama.cpp's form, nothing detected (as llama_cpp; every value but off falls back the same way).
    #[name = c"auto"]
    Auto,
    #[name = c"llama_cpp"]
    LlamaCpp,
    #[name = c"vllm"]
    Vllm,
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

pub fn init() {
    endpoints::register();
    sandbox::register();
    values::register();
    pipeline::register();
    operations::register();
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

fn ms(s: &GucSetting<i32>) -> Duration {
    Duration::from_millis(s.get().max(0) as u64)
}
