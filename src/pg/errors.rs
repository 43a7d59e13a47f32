//! Raises pipeline errors as PostgreSQL errors, and reads caught PostgreSQL errors back.

use nl2sql_core::error::{pack_sqlstate, unpack_sqlstate, Diagnostic, Report, SqlState};
use nl2sql_core::render;
use pgrx::pg_sys::panic::{CaughtError, ErrorReport, ErrorReportWithLevel};
use pgrx::prelude::*;
use std::panic::AssertUnwindSafe;

fn errcode(state: SqlState) -> PgSqlErrorCode {
    PgSqlErrorCode::from(pack_sqlstate(state.code()))
}

/// Raises `d` as an ERROR; never returns.
pub fn raise(d: &dyn Diagnostic) -> ! {
    report(d, PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}

/// Sends `d` as a WARNING.
pub fn warn(d: &dyn Diagnostic) {
    report(d, PgLogLevel::WARNING);
}

// Every message nl2sql sends passes here (ERROR, WARNING, NOTICE): its primary text on one line,
// its DETAIL and HINT with no unsafe character but their own line breaks (core's render). Names
// and values in them were rendered by their kind's function where they were put in.
fn report(d: &dyn Diagnostic, level: PgLogLevel) {
    let mut e = ErrorReport::new(errcode(d.sqlstate()), render::message(&d.message()), "nl2sql");
    if let Some(detail) = d.detail() {
        e = e.set_detail(render::lines(&detail));
    }
    if let Some(hint) = d.hint() {
        e = e.set_hint(render::lines(&hint));
    }
    e.report(level);
}

/// Sends `text` at `level` (NOTICE or WARNING), on one line: what the crate's `note!` and
/// `alert!` (src/lib.rs) do.
pub fn send(level: PgLogLevel, text: String) {
    let code = if level == PgLogLevel::WARNING { PgSqlErrorCode::ERRCODE_WARNING } else { PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION };
    ErrorReport::new(code, render::message(&text), "nl2sql").report(level);
}

/// Raises an ERROR with this SQLSTATE, message, detail and hint; never returns.
pub fn fail(state: SqlState, message: String, detail: Option<String>, hint: Option<&str>) -> ! {
    let mut r = Report::new(state, message);
    if let Some(d) = detail {
        r = r.detail(d);
    }
    if let Some(h) = hint {
        r = r.hint(h);
    }
    raise(&r)
}

/// Sends a NOTICE with a detail and a hint.
pub fn notice(message: String, detail: String, hint: String) {
    report(&Report::new(SqlState::from_code("01000"), message).detail(detail).hint(hint), PgLogLevel::NOTICE);
}

/// A caught PostgreSQL error as a report.
/// PostgreSQL's texts may quote a table owner's name as she wrote it (`column "a<LF>b" does not
/// exist`): every invisible or line-breaking character in them is shown escaped (a detail's and
/// a hint's own line breaks kept). Each text is cut to [`QUOTED_CHARS`] first: a table
/// owner's message may be as long as PostgreSQL allows, and escaping makes a character up to eight.
pub fn report_of(e: &ErrorReportWithLevel) -> Report {
    quoted(e, true)
}

/// A caught error's message as its [`report_of`] shows it.
pub fn message_shown(message: &str) -> String {
    render::visible(&render::cut(message, QUOTED_CHARS), false)
}

/// [`report_of`], the detail's and the hint's line breaks kept or escaped.
fn quoted(e: &ErrorReportWithLevel, keep_newlines: bool) -> Report {
    let shown = |text: &str| render::visible(&render::cut(text, QUOTED_CHARS), keep_newlines);
    let mut r = Report::new(state_of(e), message_shown(e.message()));
    r.detail = e.detail().map(shown);
    r.hint = e.hint().map(shown);
    r
}

/// A caught error of code a table's owner wrote (her policy, a function her table's types or
/// indexes call), raised where the caller named her table (`create_value_index`,
/// `refresh_value_indexes('her_table')`): her SQLSTATE, so that a retry or a handler keyed on it
/// still works (but for a cancel's or a lost connection's: 38000), under nl2sql's message naming the table; her message and detail only in the
/// DETAIL, each on one line, as what the read raised; her HINT left out. Her text never reads as
/// nl2sql's words (a message that starts "nl2sql:" and a HINT saying what to run).
pub fn of_table_owner(e: &ErrorReportWithLevel, table: &str) -> Report {
    // Her texts came through [`unheard`] already, cut to QUOTED_CHARS of hers and escaped (up to
    // eight characters each): cut again only past that, escaped again (which changes nothing
    // that is escaped already).
    let shown = |text: &str| render::visible(&render::cut(text, 9 * QUOTED_CHARS), false);
    let mut detail = format!("The read raised: {}", shown(e.message()));
    if let Some(d) = e.detail() {
        detail.push_str(&format!(" (its detail: {})", shown(d)));
    }
    // Not a SQLSTATE that tells the client its statement was cancelled or its connection is
    // going (57, 08): she would choose one to make a client or a pool act so.
    let hers = state_of(e);
    let state = if hers.code().starts_with("57") || hers.code().starts_with("08") { SqlState::from_code("38000") } else { hers };
    Report::new(state, format!("reading table {table} as its owner failed"))
        .detail(detail)
        .hint("The table owner's code (a row-level security policy, a function the table's types or indexes call) runs in this read: the error's text may be that code's, not nl2sql's.")
}

fn state_of(e: &ErrorReportWithLevel) -> SqlState {
    SqlState::from_code(&unpack_sqlstate(e.sql_error_code() as i32))
}

/// The most characters of a caught error's message, detail or hint that are passed on.
const QUOTED_CHARS: usize = 4000;

/// Runs `f`, which reads another role's table (her code, or PostgreSQL's words about her
/// objects, among what it runs) or runs a query the model wrote, with nothing it reports sent
/// to the client: her `RAISE NOTICE` or `WARNING`, and PostgreSQL's own warnings quoting her
/// names (a collation's version mismatch), go to the server log only, as `log_min_messages` says. Every setting `f` changes
/// is undone before anything is reported, so no `client_min_messages` of hers shows the caller
/// what follows. An error is raised again with every invisible or line-breaking character
/// escaped, its DETAIL and HINT on one line each, without CONTEXT lines (which name her
/// functions as she wrote them); a cancel goes on as it came.
pub fn unheard<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: whereToSendOutput is the backend's global; only elog reads it while `f` runs (SPI
    // sends rows to its own receiver), and it is put back before anything is reported. The GUC
    // nest level is popped on both paths, as a function's SET clause is.
    let (dest, nest) = unsafe { (pg_sys::whereToSendOutput, pg_sys::NewGUCNestLevel()) };
    // Output first: nothing between the two reports anything.
    let restore = move || unsafe {
        pg_sys::whereToSendOutput = dest;
        pg_sys::AtEOXact_GUC(false, nest);
    };
    unsafe { pg_sys::whereToSendOutput = pg_sys::CommandDest::DestNone };
    let out = PgTryBuilder::new(AssertUnwindSafe(f))
        .catch_others(|e| {
            restore();
            match e {
                // A line break of hers in a DETAIL or HINT would start a line of her own under
                // PostgreSQL's (`HINT:  ...`).
                CaughtError::PostgresError(ref r) | CaughtError::ErrorReport(ref r) if !is_cancel(r) => raise(&quoted(r, false)),
                _ => e.rethrow(),
            }
        })
        .execute();
    restore();
    out
}

/// Whether a caught error is a cancel to pass on: query_canceled (57014) raised where PostgreSQL
/// acts on an interrupt (ProcessInterrupts: a user's cancel, statement_timeout, the sandbox's
/// own timeout). Code of a table owner's run while nl2sql reads her table (a policy, an index
/// expression's function) may raise the same SQLSTATE, with `RAISE ... USING ERRCODE =
/// 'query_canceled'` or through a function of nl2sql's she calls with a timeout she set: that
/// is an error of her table, which a loop over every table survives, never the caller's cancel.
/// So is an endpoint's timeout inside such a loop: one table's failure, as an unreachable
/// endpoint is.
pub fn is_cancel(e: &ErrorReportWithLevel) -> bool {
    state_of(e) == SqlState::QueryCanceled && e.function_name() == Some("ProcessInterrupts")
}
