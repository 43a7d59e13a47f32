//! nl2sql.history (sql/history.sql): one row per call, written as the extension owner with
//! parameters only; feedback on a call; the purge; the earlier question of a follow-up.
//!
//! PostgreSQL has no autonomous transactions: a row is written in the caller's transaction. So
//! that a rolled-back call (one that raised an error, or whose transaction or savepoint the
//! caller rolled back) is not lost, the backend keeps the rows it wrote until their
//! (sub)transaction commits; rows of an aborted one are written again by the session's next
//! call (a session that ends first loses them). Writing never fails a question and takes no
//! lock another session waits for (an INSERT into one table); on a hot standby and in a
//! read-only transaction the row is skipped, and the trace says why.

use crate::gucs;
use crate::pg::errors::fail;
use crate::pg::{examples, owner, sandbox, spi};
use nl2sql_core::error::{Report, SqlState};
use nl2sql_core::pipeline::{Previous, Trace};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::time::{SystemTime, UNIX_EPOCH};

/// One call, as its history row holds it.
#[derive(Debug, Clone)]
pub struct Entry {
    pub asked_by: pg_sys::Oid,
    /// Seconds since the epoch at the start of the call.
    pub asked_at: f64,
    pub question: String,
    pub hint: Option<String>,
    pub follows: Option<i64>,
    pub mode: String,
    pub sql: Option<String>,
    pub confidence: Option<f64>,
    pub candidates: i32,
    pub vote: Option<String>,
    pub prompt_tokens: i32,
    pub completion_tokens: i32,
    pub latency_ms: f64,
    pub sqlstate: Option<String>,
    pub error: Option<String>,
    /// The relations whose rows the call's prompts showed the model (samples, stored values,
    /// query results), sorted.
    pub shown: Vec<pg_sys::Oid>,
}

impl Entry {
    /// The row of a call from its trace; `sql` the chosen query, `error` (SQLSTATE, message
    /// without what it quoted from a row) when it failed, `shown` the relations whose rows its prompts showed.
    pub fn of(
        asked_at: f64,
        question: &str,
        hint: Option<&str>,
        trace: &Trace,
        sql: Option<&str>,
        error: Option<(String, String)>,
        shown: Vec<pg_sys::Oid>,
    ) -> Entry {
        let vote = trace.vote.as_ref().map(|v| {
            serde_json::Value::Array(
                v.groups
                    .iter()
                    .map(|g| serde_json::json!({"votes": g.votes, "rows": g.rows, "cost": g.cost, "fastest_ms": g.fastest_ms}))
                    .collect(),
            )
            .to_string()
        });
        let clamp = |n: usize| n.min(i32::MAX as usize) as i32;
        let error = error.map(|(state, message)| (state, nl2sql_core::prompt::refine::prefix(&message, MAX_ERROR_BYTES).to_string()));
        Entry {
            asked_by: owner::caller(),
            asked_at,
            question: question.to_string(),
            hint: hint.map(str::to_string),
            follows: trace.follows.as_ref().and_then(|p| p.history_id),
            mode: trace.mode.and_then(|m| serde_json::to_value(m).ok()).and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
            sql: sql.map(str::to_string),
            confidence: trace.confidence,
            candidates: clamp(trace.samples.max(trace.candidates.iter().filter(|c| c.round == 0).count())),
            vote,
            prompt_tokens: clamp(trace.tokens.prompt),
            completion_tokens: clamp(trace.tokens.completion),
            latency_ms: trace.wall_ms,
            sqlstate: error.as_ref().map(|e| e.0.clone()),
            error: error.map(|e| e.1),
            shown,
        }
    }
}

/// Seconds since the epoch, now.
pub fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

thread_local! {
    /// Rows written in the open transaction, with the subtransaction they were written in.
    static WRITTEN: RefCell<Vec<(pg_sys::SubTransactionId, Entry)>> = const { RefCell::new(Vec::new()) };
    /// Rows whose transaction rolled back, to write again at the next call.
    static PENDING: RefCell<VecDeque<Entry>> = const { RefCell::new(VecDeque::new()) };
    static CALLBACKS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Most rows kept for writing again (a session whose calls all roll back keeps the newest).
const MAX_PENDING: usize = 1_000;
/// Longest error message kept in a row.
const MAX_ERROR_BYTES: usize = 2_048;

#[pg_guard]
unsafe extern "C-unwind" fn on_xact(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    match event {
        XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT | XACT_EVENT_PREPARE => WRITTEN.with_borrow_mut(Vec::clear),
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT => {
            let lost = WRITTEN.with_borrow_mut(std::mem::take);
            keep(lost.into_iter().map(|(_, e)| e));
        }
        _ => {}
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn on_subxact(
    event: pg_sys::SubXactEvent::Type,
    my: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    if event != pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB {
        return;
    }
    // Subtransaction ids grow: what was written in this one or in its committed children is gone.
    let lost: Vec<Entry> = WRITTEN.with_borrow_mut(|w| {
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(w).into_iter().partition(|(s, _)| *s >= my);
        *w = kept;
        gone.into_iter().map(|(_, e)| e).collect()
    });
    keep(lost.into_iter());
}

fn keep(rows: impl Iterator<Item = Entry>) {
    PENDING.with_borrow_mut(|p| {
        p.extend(rows);
        let over = p.len().saturating_sub(MAX_PENDING);
        p.drain(..over);
    });
}

fn register_callbacks() {
    if !CALLBACKS.get() {
        // SAFETY: registered once per backend; the callbacks only move Rust values.
        unsafe {
            pg_sys::RegisterXactCallback(Some(on_xact), std::ptr::null_mut());
            pg_sys::RegisterSubXactCallback(Some(on_subxact), std::ptr::null_mut());
        }
        CALLBACKS.set(true);
    }
}

/// Records a call (and the rows of rolled-back calls before it); its id, or why it was not
/// recorded now. In a read-only transaction the row waits for the session's next call outside
/// one. Never raises, except for a cancel (rows not yet written stay queued).
pub fn record(entry: Entry) -> Result<i64, String> {
    if !gucs::history() {
        return Err("nl2sql.history is off".into());
    }
    // SAFETY: reads shared memory state and the transaction's read-only flag.
    if unsafe { pg_sys::RecoveryInProgress() } {
        return Err("hot standby: history is written on the primary only".into());
    }
    if unsafe { pg_sys::XactReadOnly } {
        keep(std::iter::once(entry));
        return Err("read-only transaction: recorded by the session's next call outside one".into());
    }
    register_callbacks();
    // One at a time, so that a cancel leaves the rest queued.
    while let Some(e) = PENDING.with_borrow_mut(VecDeque::pop_front) {
        check_for_interrupts!();
        if let Err(r) = insert(e) {
            alert!("nl2sql: a history row of an earlier call could not be written: {}", r.message);
        }
    }
    insert(entry).map_err(|r| format!("not recorded: {}", r.message))
}

fn insert(e: Entry) -> Result<i64, Report> {
    // SAFETY: reads the current subtransaction id.
    let level = unsafe { pg_sys::GetCurrentSubTransactionId() };
    let id = sandbox::kept(|| {
        owner::as_owner(|| {
            spi::write_one::<i64>(
                include_str!("../../sql/queries/history_insert.sql"),
                &[
                    e.asked_by.into(),
                    e.asked_at.into(),
                    e.question.as_str().into(),
                    e.hint.as_deref().into(),
                    e.follows.into(),
                    e.mode.as_str().into(),
                    e.sql.as_deref().into(),
                    e.confidence.into(),
                    e.candidates.into(),
                    e.vote.as_deref().into(),
                    e.prompt_tokens.into(),
                    e.completion_tokens.into(),
                    e.latency_ms.into(),
                    e.sqlstate.as_deref().into(),
                    e.error.as_deref().into(),
                    DatumWithOid::from(e.shown.clone()),
                ],
            )
        })
    })?
    .ok_or_else(|| Report::new(SqlState::InternalError, "no id returned"))?;
    WRITTEN.with_borrow_mut(|w| w.push((level, e)));
    Ok(id)
}

const NOT_YOURS: &str = "Each role sees, follows up and gives feedback on its own calls; members of nl2sql_admin on every call.";

/// A call of the caller's own (or any, for nl2sql_admin), read through row-level security.
struct Call {
    question: String,
    hint: Option<String>,
    sql: Option<String>,
    /// Feedback was given on it.
    given: bool,
    /// The relations whose rows its prompts showed the model.
    shown: Vec<pg_sys::Oid>,
}

fn own_call(id: i64) -> Call {
    spi::read_row(
        "SELECT question, hint, sql, feedback IS NOT NULL, shown::pg_catalog.oid[] FROM nl2sql.history WHERE id OPERATOR(pg_catalog.=) $1",
        &[id.into()],
        |r| {
            Some(Call {
                question: r.get::<String>(1).ok()??,
                hint: r.get::<String>(2).ok()?,
                sql: r.get::<String>(3).ok()?,
                given: r.get::<bool>(4).ok()??,
                shown: r.get::<Vec<pg_sys::Oid>>(5).ok()??,
            })
        },
    )
    .unwrap_or_else(|| {
        fail(SqlState::Other(*b"42704"), format!("history entry {id} does not exist"), Some(NOT_YOURS.into()), None)
    })
}

/// The relations whose rows a call of the caller's own showed the model (a follow-up's prompt
/// carries that call's query, which may quote them).
pub fn shown(id: i64) -> Vec<pg_sys::Oid> {
    own_call(id).shown
}

/// The earlier question and query of a follow-up given by history id.
pub fn previous(id: i64) -> Previous {
    let Call { question, sql, .. } = own_call(id);
    let Some(sql) = sql else {
        fail(
            SqlState::InvalidParameterValue,
            format!("history entry {id} has no query to follow up"),
            Some("That call failed.".into()),
            Some("Pass the earlier question and a query yourself: previous_question => ..., previous_sql => ...."),
        )
    };
    Previous { question, sql, history_id: Some(id) }
}

/// nl2sql.feedback(): records whether a call was right and, for a right answer or a corrected
/// query that runs for the caller, offers it to the examples library (disabled until a curator
/// enables it); the example's id.
pub fn feedback(id: i64, correct: bool, corrected: Option<&str>) -> Option<i64> {
    if unsafe { pg_sys::RecoveryInProgress() } {
        fail(
            SqlState::ReadOnlySqlTransaction,
            "cannot give feedback on a hot standby".into(),
            Some("History and examples are written on the primary.".into()),
            None,
        );
    }
    let corrected = corrected.map(str::trim).filter(|s| !s.is_empty());
    let Call { question, hint, sql, given, shown } = own_call(id);
    // Claimed first: of two concurrent feedbacks on one call, one waits and then finds it given.
    let claimed = !given
        && owner::as_owner(|| {
            spi::write_one::<i64>(
                "UPDATE nl2sql.history SET feedback = $2, feedback_at = pg_catalog.now()
                 WHERE id OPERATOR(pg_catalog.=) $1 AND feedback IS NULL RETURNING id",
                &[id.into(), correct.into()],
            )
        })
        .is_some();
    if !claimed {
        fail(
            SqlState::ObjectNotInPrerequisiteState,
            format!("feedback on history entry {id} was already given"),
            None,
            Some("A curator removes or enables the example it made with nl2sql.remove_example() or nl2sql.enable_example()."),
        );
    }
    let offered = match (correct, corrected) {
        (true, Some(_)) => fail(
            SqlState::InvalidParameterValue,
            "a correct answer takes no corrected query".into(),
            None,
            Some("Pass correct => false with the corrected query."),
        ),
        (true, None) => Some(sql.unwrap_or_else(|| {
            fail(
                SqlState::InvalidParameterValue,
                format!("history entry {id} has no query to confirm"),
                Some("That call failed.".into()),
                Some("Pass correct => false and the query that answers the question."),
            )
        })),
        (false, c) => c.map(str::to_string),
    };
    // Checked through the guard and the sandbox with the caller's rights, as add_example does.
    let example = offered.and_then(|q| examples::offer(&question, &q, hint.as_deref(), &shown));
    owner::as_owner(|| {
        spi::write(
            "UPDATE nl2sql.history SET corrected_sql = $2, example_id = $3 WHERE id OPERATOR(pg_catalog.=) $1",
            &[id.into(), corrected.into(), example.into()],
        )
    });
    example
}

/// Whether the caller administers nl2sql: a superuser or a member of nl2sql_admin.
fn is_admin() -> bool {
    let me = owner::caller();
    // SAFETY: a catalog lookup of the role.
    if unsafe { pg_sys::superuser_arg(me) } {
        return true;
    }
    spi::read::<bool>(
        "SELECT pg_catalog.to_regrole('nl2sql_admin') IS NOT NULL AND pg_catalog.pg_has_role($1, 'nl2sql_admin', 'MEMBER')",
        &[me.into()],
    )
    .unwrap_or(false)
}

/// nl2sql.purge_history(): deletes rows older than `older` (nl2sql.history_retention when
/// None); how many. Administrators only.
pub fn purge(older: Option<pgrx::datum::Interval>) -> i64 {
    if !is_admin() {
        fail(
            SqlState::InsufficientPrivilege,
            "permission denied to purge the history".into(),
            Some("Only members of nl2sql_admin and superusers purge nl2sql.history.".into()),
            Some("GRANT nl2sql_admin TO the role (or the scheduler's role) that purges it."),
        );
    }
    if unsafe { pg_sys::RecoveryInProgress() } {
        fail(SqlState::ReadOnlySqlTransaction, "cannot purge the history on a hot standby".into(), None, Some("Purge it on the primary."));
    }
    let minutes = gucs::history_retention_minutes();
    if older.is_none() && minutes.is_none() {
        note!("nl2sql.history_retention is 0: the history is kept forever");
        return 0;
    }
    let negative = spi::read::<bool>("SELECT $1::pg_catalog.interval OPERATOR(pg_catalog.<) '0'::pg_catalog.interval", &[older.into()]);
    if negative == Some(true) {
        fail(SqlState::InvalidParameterValue, "older_than must not be negative".into(), None, None);
    }
    let purged = owner::as_owner(|| {
        spi::write_one::<i64>(
            include_str!("../../sql/queries/history_purge.sql"),
            &[older.into(), minutes.unwrap_or(0).min(i32::MAX as i64).into()],
        )
    })
    .unwrap_or(0);
    note!("nl2sql: {purged} history rows purged");
    purged
}
