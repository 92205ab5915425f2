//! The channel's flavors, as crossbeam-channel's: each `Sender` and
//! `Receiver` holds one of them (`sender.rs`, `receiver.rs`).
//!
//! - `bounded(n)` for n ≥ 1, whose slots fit in one allocation: the
//!   [`Array`](lockfree::Array), a ring of slots with no lock;
//! - `unbounded()`: the [`List`](lockfree::List), a linked list of blocks
//!   of slots with no lock; the two share `lockfree/` (the claims, the
//!   lines of waiters, the messages given back) and its loom models;
//! - `bounded(0)`, a rendezvous, and a bounded channel too large for a
//!   ring: [`Zero`](zero::Zero), a queue under a lock with the waiters
//!   beside it, where a message is handed from sender to receiver;
//! - the channels that no sender feeds: `after`/`at` and `tick`
//!   (`timers.rs`), and `never` (no storage at all).

pub(crate) mod lockfree;
pub(crate) mod timers;
pub(crate) mod zero;
