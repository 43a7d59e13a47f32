//! Runs untrusted SQL: an internal subtransaction, read-only, with a timeout that fires for the
//! running statement, a row cap, the caller's own privileges, and always a rollback. The outer
//! transaction survives every failure; a real cancel from the user is passed on after the rollback.

use crate::pg::errors::report_of;
use nl2sql_core::error::{Report, SqlState};
use nl2sql_core::refine::Failure;
use nl2sql_core::{ColumnInfo, Execution};
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use std::ffi::{CStr, CString};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Runs `f` in a read-only internal subtransaction that is always rolled back, cancelling it
/// when it runs longer than `timeout`.
pub fn isolated<T>(timeout: Duration, f: impl FnOnce() -> T) -> Result<T, Failure> {
    let dog = Watchdog::start(timeout);
    // SAFETY: the same sequence PL/pgSQL uses for an exception block: remember the memory
    // context and resource owner, run inside the subtransaction, roll it back, restore both.
    let result = unsafe {
        let oldcxt = pg_sys::CurrentMemoryContext;
        let oldowner = pg_sys::CurrentResourceOwner;
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        pg_sys::MemoryContextSwitchTo(oldcxt);
        let r = PgTryBuilder::new(AssertUnwindSafe(|| {
            prepare_sandbox();
            Ok(f())
        }))
        .catch_others(Err)
        .execute();
        pg_sys::MemoryContextSwitchTo(oldcxt);
        pg_sys::RollbackAndReleaseCurrentSubTransaction();
        pg_sys::MemoryContextSwitchTo(oldcxt);
        pg_sys::CurrentResourceOwner = oldowner;
        r
    };
    let fired = dog.stop();
    let cancelled = matches!(&result, Err(CaughtError::PostgresError(e)) | Err(CaughtError::ErrorReport(e))
        if report_of(e).sqlstate == SqlState::QueryCanceled);
    if fired && !cancelled {
        // The statement ended before our cancel landed: withdraw it so it cannot hit the next one.
        withdraw_cancel();
    }
    match result {
        Ok(v) => Ok(v),
        Err(CaughtError::PostgresError(e)) | Err(CaughtError::ErrorReport(e)) => {
            let report = report_of(&e);
            if report.sqlstate == SqlState::QueryCanceled {
                if fired {
                    return Err(Failure::Timeout { ms: timeout.as_millis() as u64 });
                }
                // The user (or the outer statement_timeout) cancelled: not ours to swallow.
                CaughtError::PostgresError(e).rethrow()
            }
            Err(Failure::Execution(report))
        }
        Err(panic @ CaughtError::RustPanic { .. }) => panic.rethrow(),
    }
}

/// Executes one query in the sandbox and fetches at most `max_rows` rows as text.
pub fn execute(sql: &str, timeout: Duration, max_rows: usize) -> Result<Execution, Failure> {
    let Ok(csql) = CString::new(sql) else {
        return Err(Failure::Execution(Report::new(SqlState::SyntaxError, "generated SQL contains a NUL byte")));
    };
    isolated(timeout, || fetch(&csql, max_rows))?
}

/// Read-only, and dates printed in ISO style (the output part of DateStyle only, so the way
/// literals are read does not change). Both revert with the subtransaction.
fn prepare_sandbox() {
    Spi::connect(|_| {
        for stmt in [c"SET LOCAL transaction_read_only = on", c"SET LOCAL datestyle = 'ISO'"] {
            // SAFETY: constant utility statements on the connection Spi::connect opened.
            let rc = unsafe { pg_sys::SPI_execute(stmt.as_ptr(), false, 0) };
            if rc < 0 {
                error!("could not prepare the sandbox (SPI code {rc})");
            }
        }
    })
}

fn fetch(sql: &CStr, max_rows: usize) -> Result<Execution, Failure> {
    Spi::connect(|_| {
        let started = Instant::now();
        let limit = (max_rows as libc::c_long).saturating_add(1);
        // SAFETY: read_only = true makes SPI refuse anything that is not read-only and use the
        // current snapshot; the tuple table is read before the connection closes.
        unsafe {
            let rc = pg_sys::SPI_execute(sql.as_ptr(), true, limit);
            if rc != pg_sys::SPI_OK_SELECT as i32 {
                return Err(Failure::Execution(Report::new(
                    SqlState::FeatureNotSupported,
                    format!("generated SQL is not a query (SPI code {rc})"),
                )));
            }
            let table = pg_sys::SPI_tuptable;
            if table.is_null() {
                return Ok(Execution { columns: vec![], rows: vec![], truncated: false, elapsed: started.elapsed() });
            }
            let tupdesc = (*table).tupdesc;
            let natts = (*tupdesc).natts;
            let mut columns = Vec::with_capacity(natts as usize);
            for i in 1..=natts {
                columns.push(ColumnInfo { name: take_cstring(pg_sys::SPI_fname(tupdesc, i)), type_oid: pg_sys::SPI_gettypeid(tupdesc, i).into() });
            }
            let processed = pg_sys::SPI_processed as usize;
            let keep = processed.min(max_rows);
            let mut rows = Vec::with_capacity(keep);
            for r in 0..keep {
                let tuple = *(*table).vals.add(r);
                let mut row = Vec::with_capacity(natts as usize);
                for i in 1..=natts {
                    let p = pg_sys::SPI_getvalue(tuple, tupdesc, i);
                    row.push(if p.is_null() { None } else { Some(take_cstring(p)) });
                }
                rows.push(row);
            }
            Ok(Execution { columns, rows, truncated: processed > max_rows, elapsed: started.elapsed() })
        }
    })
}

/// Copies a palloc'd C string into Rust and frees it.
unsafe fn take_cstring(p: *mut std::os::raw::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    let s = CStr::from_ptr(p).to_string_lossy().into_owned();
    pg_sys::pfree(p.cast());
    s
}

#[derive(Default)]
struct State {
    done: bool,
    fired: bool,
}

/// A helper thread that cancels the running statement when the time is up, the way
/// pg_cancel_backend does: SIGINT to this backend. It never calls into PostgreSQL.
struct Watchdog {
    state: Arc<(Mutex<State>, Condvar)>,
    handle: Option<thread::JoinHandle<()>>,
}

impl Watchdog {
    fn start(timeout: Duration) -> Watchdog {
        let state = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let shared = Arc::clone(&state);
        let handle = thread::Builder::new()
            .name("nl2sql-watchdog".into())
            .spawn(move || {
                nl2sql_core::llm::block_signals();
                let (lock, cv) = &*shared;
                let deadline = Instant::now() + timeout;
                let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
                while !st.done {
                    let now = Instant::now();
                    if now >= deadline {
                        st.fired = true;
                        // SAFETY: kill(2) on our own pid; the signal lands on the backend's main
                        // thread, the only one that does not block it.
                        unsafe { libc::kill(libc::getpid(), libc::SIGINT) };
                        break;
                    }
                    st = match cv.wait_timeout(st, deadline - now) {
                        Ok((g, _)) => g,
                        Err(e) => e.into_inner().0,
                    };
                }
            })
            .ok();
        if handle.is_none() {
            warning!("nl2sql could not start its timeout thread; nl2sql.statement_timeout is not enforced");
        }
        Watchdog { state, handle }
    }

    /// Stops the thread; true when it fired.
    fn stop(mut self) -> bool {
        let fired = {
            let (lock, cv) = &*self.state;
            let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
            st.done = true;
            cv.notify_all();
            st.fired
        };
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        fired
    }
}

/// Clears a query cancel our watchdog sent, once the signal has landed (it may still be in flight).
fn withdraw_cancel() {
    // SAFETY: plain reads and writes of the sig_atomic_t flags PostgreSQL's SIGINT handler sets.
    unsafe {
        let flag = &raw mut pg_sys::QueryCancelPending;
        let waited = Instant::now();
        while flag.read_volatile() == 0 && waited.elapsed() < Duration::from_millis(50) {
            thread::sleep(Duration::from_micros(200));
        }
        flag.write_volatile(0);
    }
}
