//! Seeing inside, above the scheduler: what reads the scheduler's raw
//! snapshots (the watch word each runtime publishes at every switch, the
//! sections each runtime answers a dump with, the registry of runtimes)
//! and makes something a user reads of them:
//!
//! - the stall and starvation watchdog ([`watchdog`]) and the stack
//!   sampler it and dumps use ([`sample`]: a running context's stack,
//!   walked from the registers a signal took);
//! - stacks named ([`resolve`]; [`naming`] on threads of its own, for the
//!   watchdog; [`dump_names`] for a dump) and the [`Dump`](dump::Dump) a
//!   user holds, as it prints ([`dump`]);
//! - the deadlock report ([`deadlock`]: the scheduler finds, this tells)
//!   and the end of a stall (`watchdog::warn_ended`), handed up through
//!   hooks [`install`] sets as each runtime is built;
//! - the listing of a runtime held by one fiber ([`held`], read as gdb
//!   reads a stopped process) and gdb's registry and script
//!   ([`debugger`]);
//! - the CPU profiler ([`profile`], [`pprof`]).
//!
//! The walk of a parked fiber's stack stays in the scheduler, which does it
//! on its own thread while it answers a dump (`scheduler::stack_trace`);
//! the collection of a dump across runtimes is `runtime/dump.rs` (it waits
//! for their answers on `sync::mpsc`, a floor above this one).

pub(crate) mod deadlock;
pub(crate) mod debugger;
pub(crate) mod dump;
pub(crate) mod dump_names;
pub(crate) mod held;
pub(crate) mod naming;
pub(crate) mod pprof;
pub(crate) mod profile;
pub(crate) mod resolve;
pub(crate) mod sample;
pub(crate) mod watchdog;

/// Sets what this floor hands the scheduler: the panic hook that names
/// the fiber, the deadlock teller, and the teller of a stall's end.
/// Called as each runtime's scheduler is made (by the builder, and by each
/// worker), right after `Core::new`.
pub(crate) fn install() {
    watchdog::install_panic_hook();
    deadlock::install();
    let _ = crate::scheduler::watch::TELL_ENDED.get_or_init(|| watchdog::warn_ended);
}
