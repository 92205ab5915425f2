//! The names the scheduler hands out and gets back: a fiber's slot
//! ([`Key`]) and one park of one fiber ([`WakeToken`]). The reactor and the
//! timer wheel keep tokens and return them when what a fiber waits for
//! happens; they need nothing else of the scheduler. So the names live here,
//! with the reactor, the lower of the two: the scheduler polls the reactor,
//! and the reactor knows the scheduler only by these.

/// A fiber's slot in its runtime.
pub(crate) type Key = u32;

/// Names one park of one fiber; see "Park tokens" in `scheduler/core.rs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WakeToken {
    pub(crate) key: Key,
    pub(crate) park: u64,
}
