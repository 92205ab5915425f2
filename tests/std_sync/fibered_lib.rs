//! What the fibers mode points std's `thread` at: fibra's fibers. Every
//! test body runs in `fibra::run` (one thread), and the threads it spawns,
//! scopes and sleeps are fibers of that thread. The suite crate's library
//! (`fibered`), written into the scratch folder by `run.sh`; not part of
//! fibra.

/// Runs one test body as the root of a new runtime on this thread.
pub fn run(body: fn()) {
    fibra::run(body)
}

/// `std::thread`'s names the tests use, as fibers.
pub mod thread {
    pub use fibra::{JoinHandle, Scope, ScopedJoinHandle, scope, sleep, spawn, yield_now};
    pub use std::thread::{current, panicking};
}
