//! Seeing inside, above the scheduler: what reads the scheduler's raw
//! snapshots (the watch word each runtime publishes at every switch, the
//! sampled stacks, the registry of runtimes) and makes something a user
//! reads of them: the CPU profiler ([`profile`]) and the stall and
//! starvation watchdog ([`watchdog`]). The stack walking and naming, the
//! deadlock reports and the fiber lists of a dump still live in the
//! scheduler, and the collection of a dump across runtimes in `runtime/`
//! (it waits for their answers on `sync::mpsc`, a floor above this one);
//! they move here next (see DESIGN.md's layout).

pub(crate) mod pprof;
pub(crate) mod profile;
pub(crate) mod watchdog;
