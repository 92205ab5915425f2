//! Seeing inside, above the scheduler: what reads the scheduler's raw
//! snapshots (the watch word each runtime publishes at every switch, the
//! sampled stacks, the registry of runtimes) and makes something a user
//! reads of them. Today the CPU profiler ([`profile`]); the stack walking,
//! watchdog, dumps and deadlock reports still live in the scheduler and
//! move here next (see DESIGN.md's layout).

pub(crate) mod pprof;
pub(crate) mod profile;
