//! Seeing inside, above the scheduler: what reads the scheduler's raw
//! snapshots (the watch word each runtime publishes at every switch, the
//! sampled stacks, the registry of runtimes) and makes something a user
//! reads of them: the CPU profiler ([`profile`]), the stall and
//! starvation watchdog ([`watchdog`]), the deadlock report ([`deadlock`]:
//! the scheduler finds, this tells), the naming of a dump's stacks
//! ([`dump_names`]) and the listing of a runtime held by one fiber
//! ([`held`], read as gdb reads a stopped process). The stack walking and
//! the sampler, and the fiber lists of a dump, still live in the
//! scheduler, and the collection of a dump across runtimes in `runtime/`
//! (it waits for their answers on `sync::mpsc`, a floor above this one);
//! they move here next (see DESIGN.md's layout).

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
