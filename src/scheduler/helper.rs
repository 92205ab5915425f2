//! The threads fibra starts for itself (the watchdog, the blocking pool,
//! the symbol namer, the signal dispatcher...) take none of the process's
//! signals: each is started with every signal a program may handle
//! blocked, so a signal sent to the process reaches one of the program's
//! own threads, which may collect it (`sigwait`, `sigpending`,
//! `signalfd`) or run its handler there, as it would without fibra.
//!
//! A new thread inherits the mask of the thread that creates it, so the
//! mask is set around the creation (there is no moment at which the new
//! thread runs unmasked). Left unblocked: the faults a thread raises on
//! itself (`SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE`, `SIGTRAP`, `SIGSYS`:
//! blocking them does not stop them, it only loses their handlers: a
//! helper's stack overflow must still be reported), and the signal of
//! fibra's stack sampler, which only fibra sends, to one thread.

use crate::scheduler::stack_trace::signal as sample_signal;

/// The signals a thread raises on itself by faulting.
const FAULTS: [libc::c_int; 6] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGTRAP,
    libc::SIGSYS,
];

/// Runs `spawn` (which starts a helper thread) with the calling thread's
/// signals blocked as a helper's are to be, then restores the caller's
/// mask: the thread it starts inherits the blocked set.
pub(crate) fn spawn_quiet<R>(spawn: impl FnOnce() -> R) -> R {
    // SAFETY: sigset_t is plain data; sigfillset initializes it.
    let mut quiet: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `quiet` is a valid sigset to fill and edit.
    unsafe {
        libc::sigfillset(&mut quiet);
        for sig in FAULTS.into_iter().chain([sample_signal()]) {
            libc::sigdelset(&mut quiet, sig);
        }
    }
    // SAFETY: sigset_t is plain data, written by the call below.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid sets; glibc leaves out the signals it keeps for itself
    // (thread cancellation, setxid), which must stay deliverable.
    let blocked = unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &quiet, &mut old) } == 0;
    let r = spawn();
    if blocked {
        // SAFETY: the mask the caller had, read just above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    }
    r
}
