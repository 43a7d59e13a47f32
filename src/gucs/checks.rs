//! The check and show hooks of the nl2sql.* settings (their settings! tables name them).

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::GucSetting;
use std::ffi::{c_char, c_void, CStr, CString};

/// Hands PostgreSQL the message, detail and hint of a refused setting.
pub(super) unsafe fn refuse(message: &CStr, detail: &CStr, hint: &CStr) -> bool {
    pg_sys::GUC_check_errmsg_string = pg_sys::pstrdup(message.as_ptr());
    pg_sys::GUC_check_errdetail_string = pg_sys::pstrdup(detail.as_ptr());
    pg_sys::GUC_check_errhint_string = pg_sys::pstrdup(hint.as_ptr());
    false
}

/// An API key is never taken from a setting: wherever a setting can be made, another role can
/// read it — ALTER DATABASE/ROLE … SET and function SET clauses in world-readable catalogs,
/// postgresql.conf and ALTER SYSTEM through pg_settings (pg_read_all_settings), and a SET
/// statement's text through pg_stat_activity and pg_stat_statements (pg_read_all_stats) and the
/// server log. The settings remain only to refuse a key with a clear error.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn check_key(newval: *mut *mut c_char, _extra: *mut *mut c_void, _source: pg_sys::GucSource::Type) -> bool {
    if newval.is_null() || (*newval).is_null() || *(*newval) == 0 {
        return true;
    }
    refuse(
        c"an API key cannot be set where other roles can read it",
        c"Settings are stored in catalogs every role can read (ALTER DATABASE/ROLE ... SET, a function's SET clause), shown to members of pg_read_all_settings (postgresql.conf, ALTER SYSTEM), or kept as statement text in pg_stat_activity, pg_stat_statements and the server log (SET).",
        c"Put the key in a file only the server's OS user can read and name it in nl2sql.llm_api_key_file (nl2sql.embedding_api_key_file), or in the server's environment (NL2SQL_LLM_API_KEY); remove this setting, and rotate the key.",
    )
}

/// A key is never shown back, not even to the session that set it (a role it SET ROLE to
/// later, or a member of pg_read_all_settings, would see it).
fn masked(key: &GucSetting<Option<CString>>) -> *const c_char {
    if super::string(key).is_some() { c"********".as_ptr() } else { c"".as_ptr() }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn show_llm_key() -> *const c_char {
    masked(&super::endpoints::LLM_API_KEY)
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn show_embedding_key() -> *const c_char {
    masked(&super::endpoints::EMBEDDING_API_KEY)
}

/// An endpoint URL is set only by superusers, even where GRANT SET ON PARAMETER would let
/// another role: whoever sets the URL receives the key.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn check_url(newval: *mut *mut c_char, _extra: *mut *mut c_void, source: pg_sys::GucSource::Type) -> bool {
    if newval.is_null() || (*newval).is_null() || *(*newval) == 0 {
        return true;
    }
    // Whoever sets it, the value is shown to every role (SHOW, pg_settings): no credential in
    // it, and nothing that makes every request go elsewhere than meant.
    let url = CStr::from_ptr(*newval).to_string_lossy();
    if let Some(what) = nl2sql_core::model::http::url_carries(&url) {
        let message = CString::new(format!("an nl2sql endpoint URL cannot carry {what}")).unwrap_or_default();
        return refuse(
            &message,
            c"Every role can read a setting's value with SHOW; the service's path (/chat/completions, /embeddings) is appended to the URL.",
            c"Give the URL as scheme://host:port/path, and the key in nl2sql.llm_api_key_file (nl2sql.embedding_api_key_file) or the server's environment.",
        );
    }
    use pg_sys::GucSource::*;
    let interactive = matches!(source, PGC_S_SESSION | PGC_S_CLIENT | PGC_S_TEST);
    if interactive && pg_sys::IsTransactionState() && !pg_sys::superuser() {
        return refuse(
            c"only superusers may set an nl2sql endpoint URL",
            c"The configured API key is sent to this URL.",
            c"Ask a superuser to set it, for example with ALTER ROLE ... SET.",
        );
    }
    true
}


#[pg_guard]
pub(super) unsafe extern "C-unwind" fn check_generators(newval: *mut *mut c_char, _extra: *mut *mut c_void, _source: pg_sys::GucSource::Type) -> bool {
    if newval.is_null() || (*newval).is_null() {
        return true;
    }
    let value = CStr::from_ptr(*newval).to_string_lossy();
    let names: Vec<&str> = value.split(',').map(str::trim).collect();
    if names.iter().all(|n| nl2sql_core::pipeline::Generator::parse(n).is_some()) {
        return true;
    }
    refuse(
        c"invalid value for nl2sql.generators",
        c"Each comma-separated name must be open_sql or create_table.",
        c"For example: SET nl2sql.generators = 'open_sql,create_table'.",
    )
}
