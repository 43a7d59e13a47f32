//! Runs untrusted SQL: an internal subtransaction, read-only, with a timeout that fires for the
//! running statement, row and byte caps, least privilege, and always a rollback. The outer
//! transaction survives every failure; a real cancel from the user is passed on after the rollback.
//!
//! What runs is exactly what was checked: PostgreSQL parses, analyses and rewrites the text once,
//! as the role that will run it, with the session's settings (policy.rs checks that tree), and
//! this very tree is planned and executed here. The text is never parsed a second time, so no
//! escape, quoting mode or search_path trick can make the executed query differ from the checked one.
//!
//! The database a question's run sees, built on this, is database.rs.

pub mod database;
mod domains;
mod watchdog;

use crate::gucs;
use crate::pg::errors::{self, is_cancel, report_of};
use crate::pg::receiver::Receiver;
use crate::pg::{hooks, policy, role};
use nl2sql_core::error::{Report, SqlState};
use nl2sql_core::pipeline::Rejected;
use nl2sql_core::safety::policy::Scope;
use nl2sql_core::prompt::ran;
use nl2sql_core::prompt::refine::Failure;
use nl2sql_core::{ColumnInfo, Execution};
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use std::collections::HashMap;
use std::ffi::CString;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};
use watchdog::{repost_cancel, withdraw_cancel, Watchdog};

thread_local! {
    /// Whether the last generated query's error was raised while PostgreSQL read it (parsed,
    /// analysed, rewrote it) by the parser or the rewriter itself, not by a function reading ran
    /// (an input function, a domain's CHECK: the type cache may have folded one with a row's
    /// value earlier, and then no code but built-in functions runs).
    static RAISED_READING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Registers the sandbox's catalog callbacks; once per backend (_PG_init).
pub fn install() {
    domains::install();
}

/// The caps of one execution.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub timeout: Duration,
    pub max_rows: usize,
    pub max_bytes: usize,
    /// Plans the planner estimates above this are not executed (nl2sql.max_cost; None: no limit).
    pub max_cost: Option<f64>,
}

impl Limits {
    /// nl2sql.statement_timeout, nl2sql.max_rows, nl2sql.max_result_bytes.
    pub fn from_settings() -> Limits {
        Limits {
            timeout: gucs::statement_timeout(),
            max_rows: gucs::max_rows(),
            max_bytes: gucs::max_result_bytes(),
            max_cost: gucs::max_cost(),
        }
    }
}

/// Runs `f` in a read-only internal subtransaction that is always rolled back, cancelling it
/// when it runs longer than `timeout`.
pub fn isolated<T>(timeout: Duration, f: impl FnOnce() -> T) -> Result<T, Failure> {
    // Everything `f` allocates (parse trees, plans, the executor's state) goes with the
    // subtransaction, also when it fails: results come back as Rust values.
    let (result, ending) = watched(Some(timeout), false, true, || {
        prepare_sandbox();
        f()
    });
    timed(result, ending, timeout)
}

/// [`kept`] within `timeout` (None: no limit): a subtransaction kept when `f` succeeds, rolled
/// back when it raises an error or runs too long. For reads of a table whose owner's code
/// (policies, output functions) runs: one table's trouble, a timeout included, is that table's;
/// statement_timeout, also when her code caught its cancel, ends the statement.
pub fn kept_within<T>(timeout: Option<Duration>, f: impl FnOnce() -> T) -> Result<T, Failure> {
    // Without a time of ours, `watched` never reports our timeout.
    let (result, ending) = watched(timeout, true, false, f);
    timed(result, ending, timeout.unwrap_or_default())
}

/// Runs `f` in a subtransaction kept when it succeeds, for a read of a table whose owner's code
/// runs in the caller's own statement (an explicit build or refresh of her table): her errors
/// end the caller's statement (the value index raises them as its own, naming her table:
/// values::in_named_read); a cancel that is not ours (statement_timeout, the
/// caller's) ends the statement even when her code caught it, and nothing `f` did is kept then.
pub fn in_statement<T>(f: impl FnOnce() -> T) -> T {
    match watched(None, true, false, f).0 {
        Ok(v) => v,
        Err(e) => e.rethrow(),
    }
}

/// Runs `f` in a subtransaction ([`subtransaction`]'s `keep` and `own_memory`) that a watchdog
/// cancels after `timeout` (None: never for a time of ours); true with the result when the
/// watchdog fired for our time. A run past its time is rolled back whatever `f` returned: her
/// code may catch every cancel and return normally. So is a run in which a cancel that is not
/// ours came (statement_timeout ran out, or someone else sent one: the caller's
/// pg_cancel_backend), whose cancel is raised again when her code caught it; the watchdog
/// cancels again from shortly after such a cancel too, so that her code catching it once does
/// not hold the statement up until our own time or the end of her code.
fn watched<T>(timeout: Option<Duration>, keep: bool, own_memory: bool, f: impl FnOnce() -> T) -> (Result<T, CaughtError>, Ending) {
    let running = statement_timer_running();
    // Fired already, its cancel not yet acted on: the statement has run out too.
    let armed = running || statement_timeout_indicated();
    let statement = if running {
        Some(statement_time_left() + STATEMENT_MARGIN)
    } else {
        armed.then_some(STATEMENT_MARGIN)
    };
    let mut dog = Watchdog::start(timeout, statement);
    // A cancel already pending (or one that came while the watchdog started) is the caller's:
    // raised here, before her code could catch it (the watchdog stops as it unwinds).
    pgrx::check_for_interrupts!();
    let (mut ours, mut outside, mut swallowed, mut f_cancelled) = (false, false, false, false);
    // The watchdog stops as soon as `f` is done, before the subtransaction is released or
    // rolled back, so that no cancel of ours lands in that (a cancel pending then is withdrawn).
    let result = subtransaction_then(keep, own_memory, f, |error| {
        let fired;
        (fired, ours) = dog.finish();
        f_cancelled = matches!(error, Some(CaughtError::PostgresError(e) | CaughtError::ErrorReport(e)) if is_cancel(e));
        if fired {
            // A cancel of ours may still be pending (the run ended before it landed, or the
            // watchdog sent it again after the one that ended the run): withdraw it so that it
            // cannot hit the release nor the next statement.
            withdraw_cancel();
        }
        // statement_timeout's timer stops when it fires (also while we withdrew ours: its
        // cancel may be the one withdrawn); someone else's cancel is counted as it lands.
        // Either is not ours to keep: unless that cancel ended `f` (it is then passed on), her
        // code caught it or we withdrew it: raise it again.
        outside = (armed && !statement_timer_running()) || dog.foreign_cancel();
        swallowed = outside && !f_cancelled;
        if swallowed {
            repost_cancel();
        }
        ours || outside
    });
    if swallowed {
        pgrx::check_for_interrupts!();
    }
    // A cancel is the running code's own only when it ended `f` (not the subtransaction's
    // release, where the caller's cancel may land too), no watchdog of ours sent one meanwhile
    // (this run's, or an enclosing run's when her code runs nl2sql), and our handler counted
    // others' cancels throughout.
    let own_cancel = f_cancelled && !dog.any_sent() && !outside && dog.counts_others();
    (result, Ending { timed_out: ours && !outside, own_cancel })
}

/// How a watched run ended, as far as cancels go.
#[derive(Clone, Copy)]
struct Ending {
    /// Our own time ran out (and no cancel came from outside).
    timed_out: bool,
    /// The cancel that ended `f` came neither from us nor from outside, as far as our handler
    /// could count them: the running code sent it to its own backend (her
    /// pg_cancel_backend(pg_backend_pid())), an error of hers like any other. False where our
    /// handler could not count others' cancels, where a watchdog of ours (this run's or an
    /// enclosing one's) sent a cancel meanwhile, and for a cancel raised while the
    /// subtransaction was released: any such cancel is passed on.
    own_cancel: bool,
}

/// How long after statement_timeout's deadline the watchdog cancels again, when the statement's
/// deadline comes before ours: its own cancel has landed by then.
const STATEMENT_MARGIN: Duration = Duration::from_millis(50);

unsafe extern "C" {
    /// utils/timeout.h: whether a timeout's timer is running (it stops when it fires).
    fn get_timeout_active(id: std::ffi::c_int) -> bool;
    /// utils/timeout.h: whether a timeout fired since its indicator was last reset.
    fn get_timeout_indicator(id: std::ffi::c_int, reset_indicator: bool) -> bool;
    /// utils/timeout.h: when a timeout's timer fires (set while it runs).
    fn get_timeout_finish_time(id: std::ffi::c_int) -> pg_sys::TimestampTz;
}

/// utils/timeout.h's STATEMENT_TIMEOUT, the fourth TimeoutId in every supported major.
const STATEMENT_TIMEOUT: std::ffi::c_int = 3;

/// Whether statement_timeout's timer runs for the current statement.
fn statement_timer_running() -> bool {
    // SAFETY: reads the timeout module's state for one of its fixed ids; no allocation.
    unsafe { get_timeout_active(STATEMENT_TIMEOUT) }
}

/// Whether statement_timeout fired and ProcessInterrupts has not yet said so.
fn statement_timeout_indicated() -> bool {
    // SAFETY: as above; the indicator is left as it is.
    unsafe { get_timeout_indicator(STATEMENT_TIMEOUT, false) }
}

/// The time left until statement_timeout's running timer fires.
fn statement_time_left() -> Duration {
    // SAFETY: as above; GetCurrentTimestamp only reads the clock.
    let micros = unsafe { get_timeout_finish_time(STATEMENT_TIMEOUT) - pg_sys::GetCurrentTimestamp() };
    Duration::from_micros(micros.max(0) as u64)
}

/// A watched run's outcome: a panic passed on; our timeout (whatever `f` returned once the
/// watchdog fired); an error of `f` as its report, or a cancel that came from outside (the
/// user's, the outer statement_timeout) passed on.
fn timed<T>(result: Result<T, CaughtError>, ending: Ending, timeout: Duration) -> Result<T, Failure> {
    match result {
        Err(panic @ CaughtError::RustPanic { .. }) => panic.rethrow(),
        _ if ending.timed_out => Err(Failure::Timeout { ms: timeout.as_millis() as u64 }),
        Ok(v) => Ok(v),
        Err(CaughtError::PostgresError(e)) | Err(CaughtError::ErrorReport(e)) => {
            if is_cancel(&e) && !ending.own_cancel {
                CaughtError::PostgresError(e).rethrow()
            }
            Err(Failure::Execution(report_of(&e)))
        }
    }
}

/// Checks one query on PostgreSQL's parse tree and executes that tree in the sandbox, as the
/// role generated SQL runs as (role.rs), keeping its rows as text within `limits`.
pub fn execute(sql: &str, limits: Limits) -> Result<Execution, Rejected> {
    execute_reading(sql, limits).map(|(e, _)| e)
}

/// [`execute`], with the relations the role needed SELECT on to run the query (policy::check).
pub fn execute_reading(sql: &str, limits: Limits) -> Result<(Execution, Vec<pg_sys::Oid>), Rejected> {
    let mut reads = Vec::new();
    execute_noting(sql, limits, &mut reads).map(|e| (e, reads))
}

/// [`execute`], noting in `reads` the relations the query reads once PostgreSQL has checked it,
/// also when it then fails (an error raised while it ran may quote a row).
pub fn execute_noting(sql: &str, limits: Limits, reads: &mut Vec<pg_sys::Oid>) -> Result<Execution, Rejected> {
    let Ok(csql) = CString::new(sql) else {
        // nl2sql's own words, about the query's own text: told to the model as they are.
        return Err(Rejected::Failed(Failure::Analysis(Report::new(SqlState::SyntaxError, "generated SQL contains a NUL byte"))));
    };
    let allowed = gucs::allowed_functions();
    let foreign = gucs::allow_foreign_tables();
    hooks::take_refusal();
    hooks::take_other_code();
    RAISED_READING.set(false);
    let mut listed_at = None;
    // As the role generated SQL runs as, with the caller's search_path (role.rs).
    let outcome = role::as_exec_role(|| isolated(limits.timeout, || {
        // SAFETY: reads the current user id (the role generated SQL runs as, by now).
        let run_as = unsafe { pg_sys::GetUserId() };
        // Nothing the query's run reports reaches the caller (PostgreSQL's warnings quote
        // other roles' names; the model's query runs several times): errors.rs.
        role::as_role(run_as, role::RESTRICTED, || errors::unheard(|| {
            // The hooks judge from the first parse on: analysis and the typcache may evaluate
            // immutable functions before the tree is complete.
            hooks::with_scope(Scope::Generated, &allowed, HashMap::new(), || {
                let mut verdicts = HashMap::new();
                // The type cache keeps each domain's CHECK with its immutable calls folded into
                // constants, run when the session first used the domain, with that user's rights,
                // outside these hooks (a row's value may be the constant). Dropped, so that every
                // CHECK this query reaches, at any point (an array literal of the domain is read
                // while the query is parsed), is loaded again here, the hooks judging each call
                // that folding makes. What a CHECK of casts alone raises (no function to hook)
                // is told apart by its domain's entry being loaded again (domains.rs). Marked
                // outside the scope: nl2sql's own catalog read, no code of the query's.
                // SAFETY: in the subtransaction; fires pg_constraint's invalidation callbacks, as
                // a commit that changed one would (the type cache's marks its domain entries stale).
                let marks = hooks::suspended(|| unsafe { domains::mark() });
                listed_at = Some(marks.since());
                // SAFETY: inside the subtransaction; the tree lives in its memory context.
                let checked = PgTryBuilder::new(AssertUnwindSafe(|| unsafe { policy::check(&csql, &allowed, foreign, &mut verdicts) }))
                    .catch_others(|e| {
                        if let CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) = &e {
                            RAISED_READING.set(ran::raised_by_reader(r.file()) && !marks.reached());
                        }
                        e.rethrow()
                    })
                    .execute();
                let (query, read, named) = checked?;
                reads.extend(read);
                Ok(unsafe { run(query, &csql, limits) }.map(|mut e| {
                    e.named = named.into_iter().map(u32::from).collect();
                    e
                }))
            })
        }))
    }));
    match outcome {
        Ok(Ok(Ok(execution))) => Ok(execution),
        Ok(Ok(Err(costly))) => Err(Rejected::Failed(costly)),
        Ok(Err(refusal)) => Err(Rejected::Refused(refusal)),
        // The object-access hook stopped a function the tree check did not see coming.
        Err(failure) => match hooks::take_refusal() {
            Some(refusal) => Err(Rejected::Refused(refusal)),
            // Raised by PostgreSQL's parser or rewriter while it read the query (not by a
            // function reading ran), no function having been set up to run meanwhile (a domain
            // CHECK run while a literal is read, whichever file raised its error) nor any domain's
            // CHECK loaded (one of casts alone calls no function: domains.rs), and of a kind
            // reading raises: it quotes the query's text and the catalog's names (and what it
            // repeats of them is still only names the model wrote or was shown: scrub.rs).
            None => Err(Rejected::Failed(match failure {
                Failure::Execution(r)
                    if RAISED_READING.get()
                        && !hooks::take_other_code()
                        && ran::raised_reading(r.sqlstate.code())
                        && listed_at.is_some_and(domains::unchanged_since) =>
                {
                    Failure::Analysis(r)
                }
                other => other,
            })),
        },
    }
}

/// Plans and runs a checked query, as PostgreSQL runs a portal, into a receiver with caps; a
/// plan estimated above `limits.max_cost` is not run.
/// No parallel workers: the object-access hook must see every function the plan runs.
///
/// # Safety
/// `query` must come from policy::check in this subtransaction.
unsafe fn run(query: *mut pg_sys::Query, sql: &CString, limits: Limits) -> Result<Execution, Failure> {
    let plan = pg_sys::pg_plan_query(query, sql.as_ptr(), 0, std::ptr::null_mut());
    // The estimate reads the statistics of every relation planned (their most common values,
    // through leakproof operators), so it is told only once the role may read them all.
    crate::pg::compat::check_permissions(plan);
    let cost = if (*plan).planTree.is_null() { 0.0 } else { (*(*plan).planTree).total_cost };
    if let Some(max) = limits.max_cost.filter(|m| cost > *m) {
        return Err(Failure::Cost { estimate: cost, max });
    }
    let mut receiver = Receiver::new(limits.max_rows, limits.max_bytes);
    let started = Instant::now();
    pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
    let desc = pg_sys::CreateQueryDesc(
        plan,
        sql.as_ptr(),
        pg_sys::GetActiveSnapshot(),
        std::ptr::null_mut(),
        receiver.as_dest(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        0,
    );
    pg_sys::ExecutorStart(desc, 0);
    crate::pg::compat::executor_run(desc);
    pg_sys::ExecutorFinish(desc);
    pg_sys::ExecutorEnd(desc);
    pg_sys::FreeQueryDesc(desc);
    pg_sys::PopActiveSnapshot();
    let got = receiver.take();
    Ok(Execution {
        columns: got.columns.into_iter().map(|(name, type_oid)| ColumnInfo { name, type_oid }).collect(),
        rows: got.rows,
        truncated: got.row_cap || got.byte_cap,
        byte_limited: got.byte_cap,
        elapsed: started.elapsed(),
        cost: Some(cost),
        named: Vec::new(),
    })
}

/// Runs `f` in an internal subtransaction that is kept when it succeeds and rolled back when it
/// raises an error (Some and None); a real cancel and a panic are passed on, as [`kept`] does.
pub fn savepoint<T>(f: impl FnOnce() -> T) -> Option<T> {
    kept(f).ok()
}

/// Runs `f` in an internal subtransaction that is kept when it succeeds and rolled back when it
/// raises an error, which comes back as its report; a cancel and a panic go on.
pub fn kept<T>(f: impl FnOnce() -> T) -> Result<T, Report> {
    reported(subtransaction(true, false, f))
}

/// An error caught in a subtransaction as its report; a cancel and a panic go on.
fn reported<T>(r: Result<T, CaughtError>) -> Result<T, Report> {
    match r {
        Ok(v) => Ok(v),
        Err(e) => match e {
            CaughtError::PostgresError(ref r) | CaughtError::ErrorReport(ref r) if !is_cancel(r) => Err(report_of(r)),
            _ => e.rethrow(),
        },
    }
}

/// Runs `f` in an internal subtransaction, with the sequence PL/pgSQL uses for an exception
/// block: remember the memory context and resource owner, run inside, then release the
/// subtransaction (`keep` and `f` succeeded) or roll it back, and restore both. `own_memory`:
/// `f` allocates in the subtransaction's context, freed with it.
fn subtransaction<T>(keep: bool, own_memory: bool, f: impl FnOnce() -> T) -> Result<T, CaughtError> {
    subtransaction_then(keep, own_memory, f, |_| false)
}

/// [`subtransaction`], calling `settle` with `f`'s error, if any, once `f` is done and before the
/// subtransaction is released or rolled back (rolled back also when `f` succeeded, if `settle`
/// returns true: the result then comes from a rolled-back subtransaction). `settle` must neither
/// panic nor call into PostgreSQL: it runs in whatever state `f` left. As in PL/pgSQL, an error raised while the
/// subtransaction is released (a cancel, an error of a subtransaction callback) rolls it back
/// and is returned: the session is never left inside it.
fn subtransaction_then<T>(keep: bool, own_memory: bool, f: impl FnOnce() -> T, settle: impl FnOnce(Option<&CaughtError>) -> bool) -> Result<T, CaughtError> {
    // SAFETY: begin and end are paired on every path (errors are caught inside), and the
    // memory context and resource owner are restored as PL/pgSQL restores them.
    unsafe {
        let oldcxt = pg_sys::CurrentMemoryContext;
        let oldowner = pg_sys::CurrentResourceOwner;
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        pg_sys::MemoryContextSwitchTo(if own_memory { pg_sys::CurTransactionContext } else { oldcxt });
        let r = PgTryBuilder::new(AssertUnwindSafe(|| Ok(f()))).catch_others(Err).execute();
        let discard = settle(r.as_ref().err());
        pg_sys::MemoryContextSwitchTo(oldcxt);
        let r = match r {
            Ok(v) if keep && !discard => {
                let released = PgTryBuilder::new(|| {
                    pg_sys::ReleaseCurrentSubTransaction();
                    Ok(())
                })
                .catch_others(Err)
                .execute();
                match released {
                    Ok(()) => Ok(v),
                    Err(e) => {
                        pg_sys::MemoryContextSwitchTo(oldcxt);
                        pg_sys::RollbackAndReleaseCurrentSubTransaction();
                        Err(e)
                    }
                }
            }
            other => {
                pg_sys::RollbackAndReleaseCurrentSubTransaction();
                other
            }
        };
        pg_sys::MemoryContextSwitchTo(oldcxt);
        pg_sys::CurrentResourceOwner = oldowner;
        r
    }
}

/// Runs `f` in a subtransaction that is always rolled back, so that the locks it took are
/// released at once (a search must not hold a lock that a build's cleanup, or a standby's
/// replay of it, would wait for). `f` returns Rust values. An error becomes its report; a
/// cancel and a panic go on.
pub fn discarded<T>(f: impl FnOnce() -> T) -> Result<T, Report> {
    reported(subtransaction(false, false, f))
}

/// Runs trusted SQL text that reads user relations for the caller (sampling, value re-checks):
/// read-only, rolled back, within `timeout`, in the restricted security context, with every
/// function the executor starts judged by the Inspect policy.
pub fn inspect<T>(timeout: Duration, f: impl FnOnce() -> T) -> Result<T, Failure> {
    restricted(Scope::Inspect, timeout, f)
}

/// Runs nl2sql's own catalog queries for the caller with the Catalog policy (system functions
/// only, whatever the caller's search_path resolves to); they need no subtransaction.
pub fn catalog<T>(f: impl FnOnce() -> T) -> T {
    hooks::with_scope(Scope::Catalog, &[], HashMap::new(), f)
}

fn restricted<T>(scope: Scope, timeout: Duration, f: impl FnOnce() -> T) -> Result<T, Failure> {
    let allowed = gucs::allowed_functions();
    isolated(timeout, || {
        // SAFETY: reads the current user id.
        let me = unsafe { pg_sys::GetUserId() };
        role::as_role(me, role::RESTRICTED, || hooks::with_scope(scope, &allowed, HashMap::new(), || errors::unheard(f)))
    })
}

/// Read-only, dates printed in ISO style (the output part of DateStyle only, so the way
/// literals are read does not change), and no parallel workers: the object-access hook must
/// see every function a query runs, and workers do not run it. All revert with the subtransaction.
/// String literals are read with the session's standard_conforming_strings, as the caller will
/// run the text nl2sql() returns.
fn prepare_sandbox() {
    for (name, value) in [(c"transaction_read_only", "on"), (c"datestyle", "ISO"), (c"max_parallel_workers_per_gather", "0")] {
        crate::pg::spi::set_local(name, value);
    }
}
