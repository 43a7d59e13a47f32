//! How the pure core honours a cancel in its loops over model output: the extension registers
//! PostgreSQL's interrupt check for the backend's thread, and the loops call [`check`]. On any
//! other thread, or in unit tests, nothing is registered and [`check`] does nothing.

use std::cell::Cell;

thread_local! {
    static CHECK: Cell<Option<fn()>> = const { Cell::new(None) };
}

/// Registers the interrupt check of the calling thread (the backend's main thread).
pub fn register(f: fn()) {
    CHECK.set(Some(f));
}

/// Runs the registered check; it may unwind (a cancel becomes an error).
pub fn check() {
    if let Some(f) = CHECK.get() {
        f();
    }
}

/// Calls [`check`] every `every` steps of a loop.
pub fn every(step: usize, every: usize) {
    if every > 0 && step.is_multiple_of(every) {
        check();
    }
}
