//! A plain thread's park, and the handle that unparks it: std's, or loom's
//! when the crate is built for its models (`RUSTFLAGS="--cfg loom"`), so
//! that the primitives of `sync` can be checked on loom's threads: a
//! thread that waits parks through here (`park::park_thread`), and its
//! notifier wakes it through an `Unparker::Thread`.

#[cfg(not(loom))]
pub(crate) use std::thread::{Thread, current, park, park_timeout};

#[cfg(loom)]
pub(crate) use loom::thread::{Thread, current, park};

/// A timed park, in a model: loom has no clock, so it ends at once, as a
/// spurious wake-up does (which every caller allows: it looks again).
#[cfg(loom)]
pub(crate) fn park_timeout(_: std::time::Duration) {
    loom::thread::yield_now();
}
