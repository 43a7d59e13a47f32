//! Where API keys come from, and warnings about keys left where other roles can read them.

use nl2sql_core::error::{Report, SqlState};
use pgrx::prelude::*;
use std::cell::Cell;

/// Keys stored in catalogs every role can read: ALTER DATABASE/ROLE … SET, function SET clauses.
const EXPOSED_SQL: &str = include_str!("../../sql/queries/secrets_exposed_keys.sql");

thread_local! {
    static WARNED: Cell<bool> = const { Cell::new(false) };
}

/// Refuses an endpoint URL stored with ALTER ROLE/DATABASE … SET while a role that is not a
/// superuser may set it (GRANT SET ON PARAMETER): with the library not loaded, PostgreSQL
/// stores such a value without any check nl2sql could make, and records no setter — and
/// whoever sets the URL receives the key.
pub fn check_url_origin(setting: &str) -> Result<(), Report> {
    use pgrx::pg_sys::GucSource::*;
    let Some((source, _)) = crate::pg::session::setting_origin(setting) else { return Ok(()) };
    if !matches!(source, PGC_S_DATABASE | PGC_S_USER | PGC_S_DATABASE_USER) {
        return Ok(());
    }
    let delegated = Spi::connect(|c| {
        c.select(DELEGATED_SQL, Some(1), &[setting.into()])
            .ok()
            .and_then(|t| t.first().get::<bool>(1).ok().flatten())
            .unwrap_or(true)
    });
    if delegated {
        return Err(Report::new(SqlState::InsufficientPrivilege, format!("{setting} is stored where a role that is not a superuser may have set it"))
            .detail(format!("It comes from ALTER ROLE/DATABASE ... SET, and a role that is not a superuser holds SET on {setting}; the configured API key is sent to this URL."))
            .hint(format!("Have a superuser set it in postgresql.conf or with ALTER SYSTEM, or REVOKE SET ON PARAMETER {setting} from the roles that hold it.")));
    }
    Ok(())
}

/// Whether a role that is not a superuser (PUBLIC included) holds SET on the parameter $1.
const DELEGATED_SQL: &str = include_str!("../../sql/queries/secrets_check_url_origin.sql");

/// The key to send: from the key file, else from the first environment variable set.
pub fn key(file: Option<String>, file_setting: &str, env: &[&str]) -> Result<Option<String>, Report> {
    warn_exposed();
    if let Some(path) = file {
        return read_key_file(&path, file_setting).map(Some);
    }
    Ok(env.iter().find_map(|v| std::env::var(v).ok().map(|k| k.trim().to_string()).filter(|k| !k.is_empty())))
}

/// Reads a key file: an absolute path, a regular file no one but the server's OS user can read.
/// Errors never quote the file's content.
fn read_key_file(path: &str, setting: &str) -> Result<String, Report> {
    let bad = |why: String| {
        Report::new(SqlState::from_code("F0000"), format!("cannot use the key file named by {setting}"))
            .detail(why)
            .hint(format!("Point {setting} at a file owned by the server's OS user with mode 0600."))
    };
    if !path.starts_with('/') {
        return Err(bad(format!("\"{path}\" is not an absolute path.")));
    }
    let meta = std::fs::metadata(path).map_err(|e| bad(format!("\"{path}\": {}.", e.kind())))?;
    if !meta.is_file() {
        return Err(bad(format!("\"{path}\" is not a regular file.")));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(bad(format!("\"{path}\" can be read or written by users other than its owner.")));
        }
    }
    if meta.len() > 16 * 1024 {
        return Err(bad(format!("\"{path}\" is larger than 16 kB.")));
    }
    let text = std::fs::read_to_string(path).map_err(|e| bad(format!("\"{path}\": {}.", e.kind())))?;
    let key = text.trim();
    if key.is_empty() || key.contains(['\n', '\r']) {
        return Err(bad(format!("\"{path}\" must hold the key alone, on one line.")));
    }
    Ok(key.to_string())
}

/// Once per session: a WARNING when an API key sits in a catalog every role can read (set
/// before the library was loaded, when no check hook could refuse it).
fn warn_exposed() {
    if WARNED.get() {
        return;
    }
    WARNED.set(true);
    let Some((settings, functions)) = crate::pg::spi::read_row(EXPOSED_SQL, &[], |r| Some((r.get::<i32>(1).ok()??, r.get::<i32>(2).ok()??))) else { return };
    if settings + functions == 0 {
        return;
    }
    let place = match (settings > 0, functions > 0) {
        (true, true) => "pg_db_role_setting (ALTER DATABASE/ROLE ... SET) and pg_proc (a function's SET clause) hold",
        (true, false) => "pg_db_role_setting (ALTER DATABASE/ROLE ... SET) holds",
        _ => "pg_proc (a function's SET clause) holds",
    };
    pgrx::pg_sys::panic::ErrorReport::new(
        PgSqlErrorCode::ERRCODE_WARNING,
        "an nl2sql API key is stored where every role can read it",
        "nl2sql",
    )
    .set_detail(format!("{place} a value of nl2sql.llm_api_key or nl2sql.embedding_api_key; nl2sql does not use it."))
    .set_hint("Remove it (ALTER DATABASE ... RESET / ALTER ROLE ... RESET / ALTER FUNCTION ... RESET), rotate the key, and keep it in the server's environment or a key file.")
    .report(PgLogLevel::WARNING);
}

/// The model endpoint's API key: from nl2sql.llm_api_key_file, else from the server's environment.
pub fn llm_api_key() -> Result<Option<String>, Report> {
    key(crate::gucs::llm_api_key_file(), "nl2sql.llm_api_key_file", &crate::gucs::API_KEY_ENV)
}

/// The embeddings endpoint's key: from nl2sql.embedding_api_key_file, else from the server's
/// environment.
pub fn embedding_api_key() -> Result<Option<String>, Report> {
    key(crate::gucs::embedding_api_key_file(), "nl2sql.embedding_api_key_file", &crate::gucs::EMBEDDING_KEY_ENV)
}
