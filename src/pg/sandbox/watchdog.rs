//! The watchdog of a watched run (sandbox.rs's `watched`): a helper thread that cancels the
//! running statement when a deadline comes, the way pg_cancel_backend does, and again every
//! [`RESEND`] until stopped; and the count of the cancels others sent meanwhile.
//!
//! A table owner's code may catch query_canceled (PL/pgSQL's `EXCEPTION WHEN query_canceled`),
//! whoever sent it. Our own cancels are sent again until her code gives up; a cancel someone
//! else sent (the caller's pg_cancel_backend, a client's cancel request) is told from ours by
//! who sent the signal: while a watched run is on, SIGINT goes first through a handler of ours
//! that counts the signals not sent by this backend's watchdog, then on to PostgreSQL's own.

use pgrx::prelude::*;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

#[derive(Default)]
struct State {
    done: bool,
    /// A cancel was sent (for a deadline, or again after someone else's).
    fired: bool,
    /// Our own deadline had come when one was.
    ours: bool,
}

/// A helper thread that cancels the running statement when the time is up: SIGINT to this
/// backend, and again every [`RESEND`] until stopped, so that a cancel the running code
/// swallowed (PL/pgSQL may catch query_canceled once), or one an inner run took for its own
/// timeout, does not end the bound; from the first cancel someone else sends, likewise. It
/// never calls into PostgreSQL.
pub(super) struct Watchdog {
    state: Arc<(Mutex<State>, Condvar)>,
    handle: Option<thread::JoinHandle<()>>,
    /// Others' cancels counted when the run began.
    foreign_at_start: u64,
    /// Cancels every watchdog of this backend had sent when the run began.
    sent_at_start: u64,
    /// Whether this run counts others' cancels (SIGINT goes through our handler).
    listening: Option<Listening>,
}

/// How often a watchdog that fired cancels again.
const RESEND: Duration = Duration::from_millis(100);
/// How often a watchdog looks whether someone else has sent a cancel.
const POLL: Duration = Duration::from_millis(100);

impl Watchdog {
    /// A watchdog that cancels after `timeout` (ours) or `statement` (shortly after the
    /// statement's deadline), whichever comes first, or from the first cancel someone else
    /// sends; with none of them possible, one that never does (no thread). Its clock is
    /// monotonic: which deadline came is told by ours alone.
    pub(super) fn start(timeout: Option<Duration>, statement: Option<Duration>) -> Watchdog {
        let state = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let listening = Listening::begin();
        let foreign_at_start = FOREIGN.load(Ordering::SeqCst);
        let sent_at_start = SENT.load(Ordering::SeqCst);
        let first = [timeout, statement].into_iter().flatten().min();
        if first.is_none() && listening.is_none() {
            return Watchdog { state, handle: None, foreign_at_start, sent_at_start, listening };
        }
        let started = Instant::now();
        let ours_at = timeout.map(|t| started + t);
        let shared = Arc::clone(&state);
        // SAFETY: pthread_self has no preconditions; this is the backend's main thread.
        let main = unsafe { libc::pthread_self() };
        let counting = listening.is_some();
        // No signal ever runs PostgreSQL's handlers on this thread.
        let handle = nl2sql_core::model::llm::spawn_without_signals("nl2sql-watchdog".into(), move || {
            let (lock, cv) = &*shared;
            let mut deadline = first.map(|f| started + f);
            let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
            while !st.done {
                let now = Instant::now();
                // Someone else's cancel: from now on, whatever deadline was ahead.
                if counting && !st.fired && FOREIGN.load(Ordering::SeqCst) != foreign_at_start {
                    deadline = Some(now);
                }
                if deadline.is_some_and(|d| now >= d) {
                    st.fired = true;
                    st.ours |= ours_at.is_some_and(|at| now >= at);
                    SENT.fetch_add(1, Ordering::SeqCst);
                    // SAFETY: a signal to the backend's main thread, which outlives this
                    // one (it joins it): PostgreSQL's SIGINT handler runs there, never on a
                    // thread an extension started.
                    unsafe { libc::pthread_kill(main, libc::SIGINT) };
                    deadline = Some(now + RESEND);
                    continue;
                }
                let wait = deadline.map_or(POLL, |d| (d - now).min(POLL));
                st = match cv.wait_timeout(st, wait) {
                    Ok((g, _)) => g,
                    Err(e) => e.into_inner().0,
                };
            }
        })
        .ok();
        if handle.is_none() {
            alert!("nl2sql could not start its timeout thread; this call's time limit is not enforced");
        }
        Watchdog { state, handle, foreign_at_start, sent_at_start, listening }
    }

    /// Stops the thread once (later calls, and a watchdog whose thread did not start: false,
    /// false); whether it cancelled, and whether our own deadline had come when it did.
    pub(super) fn finish(&mut self) -> (bool, bool) {
        let Some(h) = self.handle.take() else { return (false, false) };
        let (lock, cv) = &*self.state;
        {
            let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
            st.done = true;
            cv.notify_all();
        }
        let _ = h.join();
        let st = lock.lock().unwrap_or_else(|e| e.into_inner());
        (st.fired, st.ours)
    }

    /// Whether someone else sent this backend a cancel since the run began (counted only while
    /// our handler listens: false where it could not be installed).
    pub(super) fn foreign_cancel(&self) -> bool {
        self.listening.is_some() && FOREIGN.load(Ordering::SeqCst) != self.foreign_at_start
    }

    /// Whether this run counted others' cancels throughout: our handler listened from its start
    /// and still does (code the run loaded may have put another in front since).
    pub(super) fn counts_others(&self) -> bool {
        self.listening.is_some() && handler_installed()
    }

    /// Whether any watchdog of this backend sent a cancel since the run began: this run's, or
    /// an enclosing run's, whose cancels land in the runs nested in it (her code calling
    /// nl2sql), or a nested run's. Call after [`Watchdog::finish`].
    pub(super) fn any_sent(&self) -> bool {
        SENT.load(Ordering::SeqCst) != self.sent_at_start
    }
}

impl Drop for Watchdog {
    /// An error or panic that unwinds past `watched` still stops the thread, which would
    /// otherwise cancel a later statement.
    fn drop(&mut self) {
        if self.finish().0 {
            withdraw_cancel();
        }
    }
}

/// Marks a query cancel pending again, as PostgreSQL's SIGINT handler does: the next
/// CHECK_FOR_INTERRUPTS raises it.
pub(super) fn repost_cancel() {
    // SAFETY: plain writes of the sig_atomic_t flags PostgreSQL's SIGINT handler sets.
    unsafe {
        (&raw mut pg_sys::QueryCancelPending).write_volatile(1);
        (&raw mut pg_sys::InterruptPending).write_volatile(1);
    }
}

/// Clears a query cancel our watchdog sent. Once [`Watchdog::finish`] returned, the main thread
/// has handled every signal the watchdog sent it: each was sent while the watchdog held the lock
/// that `finish` takes after it, and `finish` then makes a system call (the condition
/// variable's wake), on whose return a pending signal is handled.
pub(super) fn withdraw_cancel() {
    // SAFETY: a plain write of the sig_atomic_t flag PostgreSQL's SIGINT handler sets.
    unsafe { (&raw mut pg_sys::QueryCancelPending).write_volatile(0) }
}

/// SIGINTs received while our handler listened that this backend's watchdog did not send.
static FOREIGN: AtomicU64 = AtomicU64::new(0);
/// SIGINTs this backend's watchdogs sent (counted before each is sent).
static SENT: AtomicU64 = AtomicU64::new(0);
/// The handler ours passes each SIGINT on to (PostgreSQL's), and whether it takes siginfo: the
/// disposition found the first time, and ever after (ours goes only in front of that one, so
/// that it never passes a signal on to a handler that passes it back).
static PASS_ON: AtomicUsize = AtomicUsize::new(0);
static PASS_ON_SIGINFO: AtomicBool = AtomicBool::new(false);
/// Whether this backend said that it could not put our handler in front.
static WARNED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Watched runs under way (they nest); the disposition ours replaced while any is.
    static LISTENERS: Cell<u32> = const { Cell::new(0) };
    static REPLACED: RefCell<Option<libc::sigaction>> = const { RefCell::new(None) };
}

/// Our SIGINT handler, while one watched run or more is under way: counts a signal another
/// process sent (this backend's own are our watchdog's and PostgreSQL's timeouts':
/// statement_timeout and lock_timeout signal the backend itself), then runs the handler it
/// replaced. Async-signal-safe: atomics and a call.
extern "C" fn counting_handler(signo: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to a SA_SIGINFO handler; MyProcPid is a plain
    // int set at the backend's start.
    let own = !info.is_null() && unsafe { (*info).si_pid() == pg_sys::MyProcPid };
    if !own {
        FOREIGN.fetch_add(1, Ordering::SeqCst);
    }
    let next = PASS_ON.load(Ordering::SeqCst);
    if next == 0 {
        return;
    }
    // SAFETY: `next` is the handler the disposition we replaced named (not SIG_DFL nor SIG_IGN:
    // we never replace those), called as its flags say it takes its arguments.
    unsafe {
        if PASS_ON_SIGINFO.load(Ordering::SeqCst) {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = std::mem::transmute(next);
            f(signo, info, context);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(next);
            f(signo);
        }
    }
}

/// Our handler as a disposition's `sa_sigaction`.
fn handler_address() -> usize {
    counting_handler as *const () as usize
}

/// Whether our handler is SIGINT's disposition now.
fn handler_installed() -> bool {
    // SAFETY: sigaction reads this process's disposition of SIGINT into a plain struct.
    unsafe {
        let mut now: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGINT, std::ptr::null(), &mut now) == 0 && now.sa_sigaction == handler_address()
    }
}

/// Our handler's hold on SIGINT for one watched run (nested runs share the outermost's).
pub(super) struct Listening;

impl Listening {
    /// Puts our handler in front of PostgreSQL's, unless a watched run already did; None when
    /// it cannot (no handler to pass on to, another one took SIGINT, or sigaction failed): a
    /// WARNING says so once per backend, for a caught cancel of yours is then lost again.
    fn begin() -> Option<Listening> {
        let listening = Listening::install();
        // The WARNING may raise a pending cancel (errfinish checks for interrupts): as the check
        // `watched` makes next would, before any subtransaction or thread.
        if listening.is_none() && !WARNED.swap(true, Ordering::SeqCst) {
            alert!("nl2sql cannot tell your cancels from its own in this session; a cancel that a table owner's code catches may be lost");
        }
        listening
    }

    fn install() -> Option<Listening> {
        // SAFETY: sigaction reads and sets this process's disposition of SIGINT from plain
        // structs; the handler we install passes every signal on to the one it replaced.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGINT, std::ptr::null(), &mut old) != 0 {
                return None;
            }
            if LISTENERS.get() > 0 {
                // An outer run's handler, unless someone replaced it since.
                if old.sa_sigaction != handler_address() {
                    return None;
                }
                LISTENERS.set(LISTENERS.get() + 1);
                return Some(Listening);
            }
            if old.sa_sigaction == libc::SIG_DFL || old.sa_sigaction == libc::SIG_IGN || old.sa_sigaction == handler_address() {
                return None;
            }
            let siginfo = old.sa_flags & libc::SA_SIGINFO != 0;
            match PASS_ON.load(Ordering::SeqCst) {
                0 => {
                    PASS_ON_SIGINFO.store(siginfo, Ordering::SeqCst);
                    PASS_ON.store(old.sa_sigaction, Ordering::SeqCst);
                }
                // Someone else's handler took SIGINT since: it may pass signals on to ours.
                first if first != old.sa_sigaction || PASS_ON_SIGINFO.load(Ordering::SeqCst) != siginfo => return None,
                _ => {}
            }
            let mut ours = old;
            ours.sa_sigaction = handler_address();
            ours.sa_flags = old.sa_flags | libc::SA_SIGINFO;
            if libc::sigaction(libc::SIGINT, &ours, std::ptr::null_mut()) != 0 {
                return None;
            }
            REPLACED.with_borrow_mut(|r| *r = Some(old));
        }
        LISTENERS.set(1);
        Some(Listening)
    }
}

impl Drop for Listening {
    /// The outermost run puts PostgreSQL's handler back, unless someone replaced ours meanwhile.
    fn drop(&mut self) {
        let left = LISTENERS.get().saturating_sub(1);
        LISTENERS.set(left);
        if left > 0 {
            return;
        }
        let Some(old) = REPLACED.with_borrow_mut(|r| r.take()) else { return };
        // SAFETY: as in `begin`; the disposition restored is the one read there.
        unsafe {
            let mut now: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGINT, std::ptr::null(), &mut now) == 0 && now.sa_sigaction == handler_address() {
                libc::sigaction(libc::SIGINT, &old, std::ptr::null_mut());
            }
        }
    }
}
