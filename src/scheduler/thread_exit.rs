//! Knowing that this thread has begun to destroy its thread-locals, so
//! that a runtime dropped then does not resume fibers that may borrow one
//! of them (issue 24, hole 2).
//!
//! A fiber parked inside `LocalKey::with` holds a `&T` into that
//! thread-local. std destroys a thread's thread-locals at thread exit in
//! the reverse order of their registration (a key with a destructor is
//! registered when it is first used), and knows nothing of fibers: a
//! `Runtime` kept in a thread-local may be dropped after another
//! thread-local that one of its parked fibers borrows was destroyed.
//! Dropping the runtime would unwind that fiber, and its destructors would
//! read the freed value. So a runtime dropped once [`destroying`] is true
//! leaks its fibers and their stacks instead (`Core::abandon`), and one
//! driven then refuses if it has fibers (see `runtime::mod`).
//!
//! ## When the flag rises
//!
//! [`DESTROYING`] is set by the destructor of [`SENTINEL`], a thread-local
//! of ours, registered by [`arm`] when a runtime is left (the end of a
//! `block_on`, `run` or `turn`) with fibers alive — and only the first
//! time on a thread: a fiber can borrow a thread-local only while it runs,
//! inside such a period, so from the end of the first period that leaves a
//! fiber behind there may be borrows to protect.
//!
//! Why that moment. Let X be a thread-local that a parked fiber borrows
//! and H the thread-local whose destruction drops the runtime (directly or
//! by owning it).
//!
//! - If X was registered before the sentinel, X is destroyed after it: the
//!   flag is up before X goes, whenever the runtime is dropped.
//! - If H was registered before the sentinel, H is destroyed after it: the
//!   flag is up when the runtime is dropped, whatever X is.
//! - The case left: both X and H registered after the sentinel, H before
//!   X. That takes a runtime that was left with fibers alive, then moved
//!   into (or shared with) a thread-local first used after that, then
//!   entered again and given a fiber that borrows a thread-local first used
//!   later still. That is not detected. The usual shape — a runtime made
//!   by a `thread_local!` initializer, or stored in a thread-local before
//!   it is first driven — is covered by the second case. (Registering a
//!   new sentinel at every exit from a runtime would close the gap, but a
//!   registration is an allocation that lives until the thread exits: a
//!   `turn` loop would grow without bound.)
//!
//! Registering the sentinel when a runtime is *created* would be too
//! early: `thread_local! { static RT: Runtime = ... }` registers `RT`
//! after its initializer returns, so `RT` would be destroyed before the
//! sentinel, flag down.

use std::cell::Cell;

thread_local! {
    /// Whether the thread has begun destroying its thread-locals (as far
    /// as [`SENTINEL`] can tell). No destructor: readable to the end.
    static DESTROYING: Cell<bool> = const { Cell::new(false) };
    /// Raises [`DESTROYING`] when destroyed.
    static SENTINEL: Sentinel = const { Sentinel };
}

struct Sentinel;

impl Drop for Sentinel {
    fn drop(&mut self) {
        DESTROYING.with(|d| d.set(true));
    }
}

/// Registers the sentinel, if this thread has not yet; call when a runtime
/// is left with fibers alive.
pub(crate) fn arm() {
    // Touching it registers its destructor, once. Once destroyed, the flag
    // is already up: nothing to do.
    let _ = SENTINEL.try_with(|_| ());
}

/// Whether this thread has begun destroying its thread-locals, as far as
/// fibra can tell (see the module docs).
pub(crate) fn destroying() -> bool {
    DESTROYING.with(Cell::get)
}
