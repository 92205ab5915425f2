//! A fiber's record, as the scheduler keeps it in its slab
//! ([`Records`](crate::scheduler::core::records::Records)): its saved stack
//! pointer, stack, park state and what it waits for, and the small types
//! of its fields ([`State`], [`Wake`], [`TimeoutScope`]).
//!
//! The fields the rest of the runtime must not touch are `pub(super)`:
//! only the scheduler (`scheduler::core` and its files) reads and writes them.

use std::num::NonZeroU64;
use std::ptr;
use std::sync::Arc;

use super::flags::Flags;
use crate::scheduler::fiber_id::FiberId;
use crate::scheduler::wait_on::StoredWait;
use crate::scheduler::watch::Meta;
use crate::stack::{Stack, StackHeader};

/// `Record::waiting_until` of a park without a deadline.
pub(super) const NO_DEADLINE: u64 = u64::MAX;

/// One byte in memory, whose value is the state's (`State::Parked as u8`):
/// what a debugger reads (`observe::debugger`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum State {
    /// In the run queue.
    Ready,
    Running,
    Parked,
    /// Finished; its record waits for `after_switch` to remove it.
    Done,
    /// Not a fiber: a free slot of [`Records`](crate::scheduler::core::records::Records).
    Vacant,
}

/// Why a park ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    Unparked,
    TimedOut,
    Cancelled,
}

/// The innermost `fibra::timeout` around the running code of a fiber.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TimeoutScope {
    pub(crate) deadline: u64,
    /// Non-zero, so that an `Option<TimeoutScope>` takes no tag word.
    pub(crate) id: NonZeroU64,
}

/// Laid out by hand in two cache lines: the first holds every field that a
/// plain fiber's park, wake-up and switch read or write (so a trip of a
/// socket-bound fiber, whose record comes back cold when there are many,
/// touches one line of it); the second holds what a dump, an exit, a
/// `fibra::timeout` or a tracing subscriber uses, which `flags` stands for
/// on the fast paths (`Flags::TIMEOUT`, `Flags::SPAN`). Aligned to a line,
/// so that each half is one line.
#[repr(C, align(64))]
pub(crate) struct Record {
    // ---- the first line: park, wake-up, switch
    /// The saved stack pointer while the context is not running.
    pub(super) sp: *mut u8,
    /// The header of the stack the context runs on, for the overflow
    /// report: its own stack's, or a generator's while it drives one
    /// (null: a thread's stack).
    pub(crate) running_header: *const StackHeader,
    /// Its identity for the watchdog (see `scheduler::watch`): at the top of
    /// its stack, or in `Shared` for the root.
    pub(crate) meta: *const Meta,
    /// The sequence number of the current (or next) park.
    pub(super) park: u64,
    /// Its deadline (ns), or `NO_DEADLINE` (a sentinel rather than an
    /// `Option`, which would take 8 more bytes).
    pub(super) waiting_until: u64,
    /// What its last park waited for, and until when (for dumps).
    pub(super) waiting_on: StoredWait,
    pub(crate) state: State,
    pub(super) wake: Wake,
    /// Woken with the current token before it parked.
    pub(super) notified: bool,
    /// Cancelled, idle, in a `fibra::timeout`, has a span: what the fast
    /// paths of park, yield and switch test at once.
    pub(crate) flags: Flags,
    /// We started unwinding this context (cancellation or a timeout) and
    /// it has not been seen outside a panic since; see `current_is_unwinding`.
    pub(super) unwinding: bool,
    // ---- the second line
    /// `None` for the root, which runs on the thread's stack.
    pub(crate) stack: Option<Stack>,
    pub(crate) id: FiberId,
    pub(crate) name: Option<Arc<str>>,
    /// Set and cleared with `Flags::TIMEOUT`: see `Core::set_timeout`.
    pub(crate) timeout: Option<TimeoutScope>,
    /// The fiber's tracing span, boxed and only when a subscriber wants it
    /// (`Flags::SPAN` says so): a `Span` is 40 bytes, and the record stays
    /// within 128 (two cache lines written at every spawn).
    pub(crate) span: Option<Box<tracing::Span>>,
}

impl Record {
    /// Where a debugger reads the fields the scheduler keeps to itself, in
    /// bytes from a record's address (`observe::debugger`).
    pub(crate) const SP_AT: usize = std::mem::offset_of!(Record, sp);
    pub(crate) const WAITING_ON_AT: usize = std::mem::offset_of!(Record, waiting_on);
    pub(crate) const WAITING_UNTIL_AT: usize = std::mem::offset_of!(Record, waiting_until);

    /// The record of a vacant slot (see [`Records`](crate::scheduler::core::records::Records)): it owns nothing.
    pub(crate) fn vacant() -> Record {
        Record {
            sp: ptr::null_mut(),
            meta: ptr::null(),
            stack: None,
            running_header: ptr::null(),
            park: 0,
            state: State::Vacant,
            wake: Wake::Unparked,
            notified: false,
            flags: Flags::NONE,
            unwinding: false,
            id: FiberId::VACANT,
            name: None,
            timeout: None,
            waiting_on: StoredWait::NONE,
            waiting_until: NO_DEADLINE,
            span: None,
        }
    }
}

impl Record {
    /// Where the fiber was spawned, from its `Meta` or, before its first
    /// run, from its deferred start (see `first_frame`).
    pub(super) fn spawned_at(&self) -> Option<&'static std::panic::Location<'static>> {
        if let Some(head) = super::first_frame::deferred(self.sp) {
            // A deferred `sp` stands for the fiber's deferred start until
            // the switch that first runs it replaces it; the start's memory
            // (a box, or its packet's room) is freed only after that, once
            // the fiber runs.
            // SAFETY: as argued just above.
            return Some(unsafe { (*head).location });
        }
        // A live record's `meta` points at its `Meta` (at the top of its
        // stack, which the record owns, written before its first run, or in
        // `Shared` for the root), whose `location` never changes; we are on
        // the runtime's thread.
        // SAFETY: as argued just above.
        unsafe { self.meta.as_ref() }.and_then(|m| m.location)
    }
}

// A spawn writes the whole record: keep it within two cache lines, and
// the fields of the fast paths within the first.
const _: () = assert!(size_of::<Record>() == 128);
const _: () = assert!(std::mem::offset_of!(Record, unwinding) < 64);
