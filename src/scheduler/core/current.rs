//! What the running context asks about itself: its id, name, `Meta`,
//! `fibra::timeout` scope and the stack it runs on.

use super::*;

impl Core {
    /// Called first thing by a new fiber: enters its tracing span and tells
    /// its id and whether it was cancelled before it started.
    pub(crate) fn begin_current(&self) -> (FiberId, bool) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let me = l.current;
        let rec = l.running();
        if rec.span.is_none() {
            return (rec.id, rec.flags.cancelled());
        }
        self.enter_span_slow(me);
        // SAFETY: re-borrowed after the subscriber's `enter` (which may
        // even have cancelled this fiber: that counts).
        let rec = unsafe { self.local() }.running();
        (rec.id, rec.flags.cancelled())
    }

    /// The running context's id and name, for `fibra::current`.
    pub(crate) fn current_fiber(&self) -> (FiberId, Option<Arc<str>>) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let rec = l.running();
        (rec.id, rec.name.clone())
    }

    /// The running context's key.
    #[inline]
    pub(crate) fn current_key(&self) -> Key {
        // SAFETY: on the runtime's thread; short borrow.
        unsafe { self.local() }.current
    }

    /// The running context's id.
    pub(crate) fn current_id(&self) -> FiberId {
        // SAFETY: on the runtime's thread; short borrow.
        unsafe { self.local() }.running().id
    }

    /// Whether a fiber of this runtime has fiber-locals (see
    /// `fiber::local`): only then does a fiber's end look for its own.
    #[inline(always)]
    pub(crate) fn has_fiber_locals(&self) -> bool {
        // SAFETY: on the runtime's thread; short borrow.
        unsafe { self.local() }.fiber_locals != 0
    }

    /// Counts a map of fiber-locals made (1) or freed (-1).
    pub(crate) fn count_fiber_locals(&self, delta: isize) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        l.fiber_locals = l.fiber_locals.wrapping_add_signed(delta);
    }

    /// Whether the running fiber has ended (its trace events at the end).
    pub(crate) fn current_has_ended(&self) -> bool {
        // SAFETY: on the runtime's thread; short borrow.
        unsafe { self.local() }.running().state == State::Done
    }

    /// The running spawned fiber's `Meta` (`None` for the root), for its
    /// fiber-locals.
    pub(crate) fn current_meta(&self) -> Option<*const Meta> {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        (l.current != ROOT).then(|| l.running().meta)
    }

    /// Narrows the current context's `fibra::timeout` deadline; returns the
    /// previous scope for [`Core::restore_timeout`]. An outer deadline that
    /// comes first stays in force.
    pub(crate) fn set_timeout(&self, deadline: u64, id: NonZeroU64) -> Option<TimeoutScope> {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let rec = l.running();
        let previous = rec.timeout;
        if previous.is_none_or(|p| deadline < p.deadline) {
            rec.timeout = Some(TimeoutScope { deadline, id });
            rec.flags.set_timeout(true);
        }
        previous
    }

    pub(crate) fn restore_timeout(&self, previous: Option<TimeoutScope>) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let rec = l.running();
        rec.timeout = previous;
        rec.flags.set_timeout(previous.is_some());
    }
}
