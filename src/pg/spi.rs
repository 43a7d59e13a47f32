//! SPI for nl2sql's own queries. Reads go through a read-only client, which never makes
//! PostgreSQL assign a transaction ID (pgrx's Spi::get_one and Spi::run mark the transaction
//! as writing, which a hot standby refuses): the read path uses only these. Writes go through
//! the `write*` functions, on maintenance paths only.

use nl2sql_core::error::{Report, SqlState};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi::SpiHeapTupleData;

fn failed(e: impl std::fmt::Display) -> ! {
    crate::pg::errors::raise(&Report::new(SqlState::InternalError, format!("nl2sql internal query failed: {e}")))
}

/// The first column of the first row, read-only; None when there is no row or it is NULL.
pub fn read<T: FromDatum + IntoDatum>(sql: &str, args: &[DatumWithOid]) -> Option<T> {
    read_row(sql, args, |r| r.get::<T>(1).ok().flatten())
}

/// The first row, read-only, turned into a value by `row`.
pub fn read_row<T>(sql: &str, args: &[DatumWithOid], row: impl Fn(&SpiHeapTupleData) -> Option<T>) -> Option<T> {
    Spi::connect(|c| match c.select(sql, Some(1), args) {
        Ok(t) => t.into_iter().next().and_then(|r| row(&r)),
        Err(e) => failed(e),
    })
}

/// Every row, read-only, each turned into a value by `row` (rows it returns None for are left out).
pub fn rows<T>(sql: &str, args: &[DatumWithOid], row: impl Fn(&SpiHeapTupleData) -> Option<T>) -> Vec<T> {
    Spi::connect(|c| match c.select(sql, None, args) {
        Ok(t) => t.filter_map(|r| row(&r)).collect(),
        Err(e) => failed(e),
    })
}

/// [`rows`], reading the catalog as committed now rather than by the statement's snapshot (the
/// transaction's, under REPEATABLE READ): what the parser and the type cache see. Only where the
/// (sub)transaction has no transaction ID (a sandbox's subtransaction): pgrx's client reads
/// read-only then, and a read-only SPI query runs with the snapshot pushed here; otherwise SPI
/// takes the transaction's.
pub fn rows_now<T>(sql: &str, args: &[DatumWithOid], row: impl Fn(&SpiHeapTupleData) -> Option<T>) -> Vec<T> {
    now(|| rows(sql, args, row))
}

/// Runs `f`, whose read-only queries read as committed now (see [`rows_now`]). The backend's
/// catalog caches, which privilege checks (has_table_privilege) read, take other sessions'
/// committed changes first: they would otherwise take them only where a lock is newly taken,
/// and a statement's second query takes none of the locks its first one holds.
pub fn now<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: invalidation messages taken in, as a lock would; a snapshot pushed and popped
    // around read-only queries; an error ends the (sub)transaction, whose abort pops it.
    unsafe {
        pg_sys::AcceptInvalidationMessages();
        pg_sys::PushActiveSnapshot(pg_sys::GetLatestSnapshot());
        let out = f();
        pg_sys::PopActiveSnapshot();
        out
    }
}

/// Runs a statement that writes (maintenance paths only).
pub fn write(sql: &str, args: &[DatumWithOid]) {
    write_rows(sql, args, |_| Some(()));
}

/// Runs a statement that writes; the first column of its first row.
pub fn write_one<T: FromDatum + IntoDatum>(sql: &str, args: &[DatumWithOid]) -> Option<T> {
    write_row(sql, args, |r| r.get::<T>(1).ok().flatten())
}

/// Runs a statement that writes (or locks rows); its first row, turned into a value by `row`.
pub fn write_row<T>(sql: &str, args: &[DatumWithOid], row: impl Fn(&SpiHeapTupleData) -> Option<T>) -> Option<T> {
    write_rows(sql, args, row).into_iter().next()
}

/// Runs a statement that writes (or locks rows); every row it returns, turned into values.
pub fn write_rows<T>(sql: &str, args: &[DatumWithOid], row: impl Fn(&SpiHeapTupleData) -> Option<T>) -> Vec<T> {
    Spi::connect_mut(|c| match c.update(sql, None, args) {
        Ok(t) => t.filter_map(|r| row(&r)).collect(),
        Err(e) => failed(e),
    })
}

/// Like set_local, for another extension's setting that an older version of it lacks: where it
/// cannot be set, nothing is (the reason is logged at DEBUG1). Before that extension's library
/// is loaded the value waits as a placeholder, applied when it loads.
pub fn set_local_quietly(name: &std::ffi::CStr, value: &str) {
    set_local_at(name, value, pg_sys::DEBUG1 as i32);
}

/// Sets a setting for the rest of the current GUC nest level or subtransaction (undone with
/// it), without a query.
pub fn set_local(name: &std::ffi::CStr, value: &str) {
    set_local_at(name, value, pg_sys::PGERROR as i32);
}

/// SET LOCAL of `name`; a failure is reported at `elevel` (below ERROR it returns).
fn set_local_at(name: &std::ffi::CStr, value: &str, elevel: i32) {
    let value = std::ffi::CString::new(value).unwrap_or_default();
    // SAFETY: SET LOCAL of a setting by name; at ERROR an invalid value raises.
    unsafe {
        pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_LOCAL,
            true,
            elevel,
            false,
        );
    }
}
