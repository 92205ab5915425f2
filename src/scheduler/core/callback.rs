//! Calls into user code from inside the scheduler: a `tracing`
//! subscriber's callbacks for fiber spans and fibra's trace events.
//!
//! Every such call goes through [`Core::callback`], which is where the
//! ground rule "no user code runs while fibra holds a reference into its
//! own state" is kept:
//!
//! - The caller holds no borrow of [`Local`] (nor of a record) across the
//!   call: what the callback needs is copied out first (a span's id and
//!   dispatcher, a fiber id), and the caller re-borrows by key afterwards.
//!   The callback may therefore re-enter the runtime — spawn (which may
//!   grow the record slab and move every record), wake, cancel, log — and
//!   finds it consistent.
//! - The callback runs at a point where the running context's record says
//!   what is true of it (running; or parked, queued or done with the next
//!   context already chosen), so whatever it wakes or spawns is queued
//!   like any wake-up.
//! - It must not park or yield: a context switch from inside the scheduler
//!   would leave it half way through one of its own. [`Core::park_raw`]
//!   and [`Core::yield_now`] check [`Local::in_callback`] and panic with a
//!   message that names the callback.
//! - It must not unwind into the scheduler: a panic in it aborts the
//!   process, after a message that says which callback panicked.
//!
//! - With the `hook` feature, a hooked blocking call made in it blocks
//!   the thread instead of parking: [`callout`] counts the calls out, and
//!   the hooks ask [`in_callout`](crate::scheduler::callout::in_callout).
//!
//! All of it is out of line and only reached when tracing is on (a span
//! exists only when a subscriber wanted one, events are behind
//! `level_enabled!(TRACE)`), so the switch path pays one load and branch.

use std::io::Write;

use super::*;
use crate::scheduler::callout::callout;

impl Core {
    /// Runs `f`, user code, with no borrow of this runtime's state live;
    /// see the module docs. `what` names the callback in messages about
    /// its misuse.
    #[cold]
    #[inline(never)]
    pub(crate) fn callback<R>(&self, what: &'static str, f: impl FnOnce() -> R) -> R {
        /// Aborts if `f` unwinds: the scheduler's state around the call is
        /// not one a panic may leave it in (the middle of a switch, say).
        struct AbortOnUnwind(&'static str);
        impl Drop for AbortOnUnwind {
            fn drop(&mut self) {
                let _ = writeln!(
                    std::io::stderr(),
                    "fibra: a tracing subscriber panicked in `{}`, which fibra calls from \
                     inside its scheduler, where nothing may unwind; aborting",
                    self.0
                );
                std::process::abort();
            }
        }
        // SAFETY: on the runtime's thread; short borrow, ended before `f`.
        let outer = unsafe { self.local() }.in_callback.replace(what);
        let abort = AbortOnUnwind(what);
        // With the `hook` feature, a hooked blocking call made in there
        // blocks the thread instead of parking (which would panic here).
        let result = callout(f);
        std::mem::forget(abort);
        // SAFETY: re-borrowed after `f`, which may have borrowed it too.
        unsafe { self.local() }.in_callback = outer;
        result
    }

    /// Emits the trace event `event` makes, out of line, when TRACE is on:
    /// the paths that trace a fiber's life pay one load and branch for it,
    /// not the frame the event's call would need.
    ///
    /// Call with no borrow of the runtime's state live.
    #[inline(always)]
    pub(crate) fn trace(&self, event: impl FnOnce()) {
        if tracing::level_enabled!(tracing::Level::TRACE) {
            self.callback("event", event);
        }
    }

    /// [`Core::trace`] of an event about the context in slot `key`, whose
    /// id is read only when the event is enabled: it lies in the record's
    /// second cache line, which a plain fiber's park and wake-up do not
    /// touch (see `record.rs`).
    ///
    /// Call with no borrow of the runtime's state live.
    #[inline(always)]
    pub(crate) fn trace_fiber(&self, key: Key, event: impl FnOnce(FiberId)) {
        if tracing::level_enabled!(tracing::Level::TRACE) {
            self.trace_fiber_slow(key, event);
        }
    }

    #[cold]
    #[inline(never)]
    fn trace_fiber_slow(&self, key: Key, event: impl FnOnce(FiberId)) {
        // SAFETY: on the runtime's thread; short borrow, ended before the
        // subscriber is called.
        let id = unsafe { self.local() }.fibers.get(key).map(|rec| rec.id);
        if let Some(id) = id {
            self.callback("event", || event(id));
        }
    }

    /// Whether `key`'s record has a tracing span (a load and a compare).
    /// `key` names a live record: the running context, or one being
    /// switched out or back in (a record is removed only after its
    /// context's final switch, by `reap`).
    #[inline(always)]
    fn has_span(&self, key: Key) -> bool {
        // SAFETY: on the runtime's thread; short borrow. `key` is in
        // bounds, as said above, which is all `get_unchecked` asks.
        unsafe { self.local().fibers.get_unchecked(key) }
            .flags
            .has_span()
    }

    /// The dispatcher and id of `key`'s span, copied out of the record so
    /// that the subscriber is called with no borrow live (cloning either
    /// runs no user code: an `Arc` and an integer).
    fn span_parts(&self, key: Key) -> Option<(tracing::Dispatch, tracing::Id)> {
        // SAFETY: on the runtime's thread; short borrow, ended on return.
        let l = unsafe { self.local() };
        let span = l.fibers.get(key)?.span.as_deref()?;
        span.with_subscriber(|(id, dispatch)| (dispatch.clone(), id.clone()))
    }

    /// Tells the subscriber that `key`'s span is entered, if it has one:
    /// `key` runs (again).
    #[inline(always)]
    pub(crate) fn enter_span(&self, key: Key) {
        if self.has_span(key) {
            self.enter_span_slow(key);
        }
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn enter_span_slow(&self, key: Key) {
        if let Some((dispatch, id)) = self.span_parts(key) {
            self.callback("Subscriber::enter", || dispatch.enter(&id));
        }
    }

    /// Tells the subscriber that `key`'s span is exited, if it has one:
    /// `key` is about to be switched out.
    #[inline(always)]
    pub(crate) fn exit_span(&self, key: Key) {
        if self.has_span(key) {
            self.exit_span_slow(key);
        }
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn exit_span_slow(&self, key: Key) {
        if let Some((dispatch, id)) = self.span_parts(key) {
            self.callback("Subscriber::exit", || dispatch.exit(&id));
        }
    }

    /// Drops a finished fiber's span (the subscriber's `try_close`), taken
    /// out of its record first.
    #[cold]
    #[inline(never)]
    pub(crate) fn close_span(&self, span: Box<tracing::Span>) {
        self.callback("Subscriber::try_close", move || drop(span));
    }
}

/// The panic of a park or yield from inside a callback; see the module
/// docs. Raised before the park touches anything.
#[cold]
#[inline(never)]
#[track_caller]
pub(crate) fn parked_in_callback(what: &'static str) -> ! {
    panic!(
        "fibra: a tracing subscriber blocked (parked or yielded) in `{what}`, which fibra \
         calls from inside its scheduler; there a subscriber may spawn fibers, wake them \
         and log, but not block"
    )
}
