//! Raises pipeline errors as PostgreSQL errors, and reads caught PostgreSQL errors back.

use nl2sql_core::error::{Diagnostic, Report, SqlState};
use pgrx::pg_sys::panic::{ErrorReport, ErrorReportWithLevel};
use pgrx::prelude::*;

/// Packs a five-character SQLSTATE the way PostgreSQL's MAKE_SQLSTATE does.
fn pack(code: &str) -> i32 {
    code.bytes().take(5).enumerate().map(|(i, c)| ((c as i32 - b'0' as i32) & 0x3F) << (6 * i)).sum()
}

fn unpack(code: i32) -> String {
    (0..5).map(|i| (((code >> (6 * i)) & 0x3F) as u8 + b'0') as char).collect()
}

fn errcode(state: SqlState) -> PgSqlErrorCode {
    PgSqlErrorCode::from(pack(state.code()))
}

/// Raises `d` as an ERROR; never returns.
pub fn raise(d: &dyn Diagnostic) -> ! {
    let mut e = ErrorReport::new(errcode(d.sqlstate()), d.message(), "nl2sql");
    if let Some(detail) = d.detail() {
        e = e.set_detail(detail);
    }
    if let Some(hint) = d.hint() {
        e = e.set_hint(hint);
    }
    e.report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}

/// A caught PostgreSQL error as a report.
pub fn report_of(e: &ErrorReportWithLevel) -> Report {
    let state = SqlState::from_code(&unpack(e.sql_error_code() as i32));
    let mut r = Report::new(state, e.message());
    if let Some(d) = e.detail() {
        r = r.detail(d);
    }
    if let Some(h) = e.hint() {
        r = r.hint(h);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstate_packing_round_trips() {
        for code in ["42601", "57014", "08P01", "XX000", "22023"] {
            assert_eq!(unpack(pack(code)), code);
        }
        assert_eq!(pack("42601"), PgSqlErrorCode::ERRCODE_SYNTAX_ERROR as i32);
    }
}
