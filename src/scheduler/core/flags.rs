//! The flags of a fiber's record that the fast paths of park, yield and
//! switch test with one compare.

/// The flags of a [`Record`](super::record::Record) that the fast paths of
/// park, yield and switch test with one compare: none is set on a plain
/// fiber.
///
/// Two of them stand for fields of the record's second cache line (its
/// `timeout` and `span`), so that a park, a wake-up and a switch of a
/// plain fiber read only the first (see `record.rs`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Flags(u8);

impl Flags {
    pub(crate) const NONE: Flags = Flags(0);
    const CANCELLED: u8 = 1;
    /// An idle fiber: queued in `Local::idle_queue`, run only when no other
    /// fiber is ready.
    const IDLE: u8 = 2;
    /// The record's `timeout` is `Some`: the fiber runs inside a
    /// `fibra::timeout`.
    const TIMEOUT: u8 = 4;
    /// The record's `span` is `Some`.
    const SPAN: u8 = 8;
    /// Parked in a hooked call that a signal handler ends (see
    /// `scheduler::interrupt`).
    const INTERRUPTIBLE: u8 = 16;

    /// The flags of a new fiber.
    pub(crate) fn new(cancelled: bool, has_span: bool) -> Flags {
        let mut bits = 0;
        if cancelled {
            bits |= Flags::CANCELLED;
        }
        if has_span {
            bits |= Flags::SPAN;
        }
        Flags(bits)
    }

    #[inline(always)]
    pub(crate) fn cancelled(self) -> bool {
        self.0 & Flags::CANCELLED != 0
    }

    #[inline(always)]
    pub(crate) fn idle(self) -> bool {
        self.0 & Flags::IDLE != 0
    }

    /// Cancelled, idle or inside a `fibra::timeout`: only then may a
    /// blocking call have to unwind the fiber, or a yield take the idle
    /// fibers' path.
    #[inline(always)]
    pub(crate) fn may_unwind(self) -> bool {
        self.0 & (Flags::CANCELLED | Flags::IDLE | Flags::TIMEOUT) != 0
    }

    /// Whether the record may have a tracing span: set with one, and not
    /// cleared when it is taken out (a fiber's end), so a caller that finds
    /// it set still looks at the span itself.
    #[inline(always)]
    pub(crate) fn has_span(self) -> bool {
        self.0 & Flags::SPAN != 0
    }

    #[inline(always)]
    pub(crate) fn interruptible(self) -> bool {
        self.0 & Flags::INTERRUPTIBLE != 0
    }

    #[cfg_attr(not(feature = "hook"), allow(dead_code))] // (only hooked calls park so)
    pub(super) fn set_interruptible(&mut self, on: bool) {
        if on {
            self.0 |= Flags::INTERRUPTIBLE;
        } else {
            self.0 &= !Flags::INTERRUPTIBLE;
        }
    }

    pub(super) fn set_cancelled(&mut self) {
        self.0 |= Flags::CANCELLED;
    }

    pub(super) fn set_idle(&mut self) {
        self.0 |= Flags::IDLE;
    }

    /// Says whether the record's `timeout` is `Some`.
    pub(super) fn set_timeout(&mut self, some: bool) {
        if some {
            self.0 |= Flags::TIMEOUT;
        } else {
            self.0 &= !Flags::TIMEOUT;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_alone_does_not_make_a_fiber_unwind() {
        let f = Flags::new(false, true);
        assert!(f.has_span() && !f.may_unwind() && !f.cancelled());
        assert_eq!(Flags::new(false, false), Flags::NONE);
    }

    #[test]
    fn each_of_cancelled_idle_and_timeout_may_unwind() {
        assert!(Flags::new(true, false).may_unwind());
        let mut f = Flags::NONE;
        f.set_idle();
        assert!(f.may_unwind() && f.idle());
        let mut f = Flags::new(false, true);
        f.set_timeout(true);
        assert!(f.may_unwind() && f.has_span());
        f.set_timeout(false);
        assert!(!f.may_unwind() && f.has_span());
    }
}
