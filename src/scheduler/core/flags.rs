//! The flags of a fiber's record that the fast paths of park and yield
//! test with one compare.

/// The flags of a [`Record`](super::record::Record) that the fast paths of park and yield test
/// with one compare: none is set on a plain fiber.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Flags(u8);

impl Flags {
    pub(crate) const NONE: Flags = Flags(0);
    const CANCELLED: u8 = 1;
    /// An idle fiber: queued in `Local::idle_queue`, run only when no other
    /// fiber is ready.
    const IDLE: u8 = 2;

    pub(crate) fn new(cancelled: bool) -> Flags {
        Flags(if cancelled { Flags::CANCELLED } else { 0 })
    }

    #[inline(always)]
    pub(crate) fn cancelled(self) -> bool {
        self.0 & Flags::CANCELLED != 0
    }

    #[inline(always)]
    pub(crate) fn idle(self) -> bool {
        self.0 & Flags::IDLE != 0
    }

    pub(super) fn set_cancelled(&mut self) {
        self.0 |= Flags::CANCELLED;
    }

    pub(super) fn set_idle(&mut self) {
        self.0 |= Flags::IDLE;
    }
}
