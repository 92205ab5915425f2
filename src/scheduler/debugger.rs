//! Every live runtime's scheduler, where a debugger finds them: the way in
//! for gdb's `info fibers` and `fiber N bt` (`src/runtime/gdb_fibers.py`,
//! embedded in every binary that links fibra; see the "In gdb" section of
//! [`fibra::runtime`](crate::runtime)).
//!
//! A debugger that stops a process sees memory, not thread-locals it can
//! trust or a registry behind a lock it may not take: it needs one global,
//! found by its symbol, that leads to each runtime's fiber records. That is
//! [`FIBRA_0_1_RUNTIMES`]: the address and length of an array that gives,
//! for every live runtime, the address of its [`Core`] and the kernel's id
//! of its thread (the LWP gdb lists, in a core file too, where threads have
//! no names), kept in step with a `Vec` under a lock by [`register`] (when
//! a runtime is made, on its thread) and [`unregister`] (when it is
//! closed). Nothing else touches it: a spawn, a park and a switch cost what
//! they did.
//!
//! Rust code never reads the addresses back (they are numbers here), so a
//! `Core` that went away without [`unregister`] (a worker thread that
//! panicked out of its loop) leaves a stale entry a debugger may misread,
//! and nothing worse.

use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use crate::scheduler::core::Core;

/// What the debugger reads: `cores` points at `len` [`Entry`]s, one per
/// live runtime. Both are
/// rewritten, under [`LIVE`]'s lock, after each change of [`LIVE`]; a
/// debugger that stops the process in the middle of one may see the old
/// array or the new one, and the script checks what it reads.
///
/// The symbol's name carries the crate's version (as the assembly's do),
/// so that two versions of fibra linked into one program do not clash.
#[repr(C)]
pub(crate) struct Runtimes {
    cores: AtomicPtr<Entry>,
    len: AtomicUsize,
}

/// One runtime, as the debugger reads it: two words.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// The address of its `Core` (`fibra::scheduler::core::Core` in the
    /// debug info).
    core: usize,
    /// Its thread's id in the kernel (`gettid`).
    tid: usize,
}

/// The debugger's way in (see [`Runtimes`]).
#[unsafe(no_mangle)]
#[used]
pub(crate) static FIBRA_0_1_RUNTIMES: Runtimes = Runtimes {
    cores: AtomicPtr::new(std::ptr::null_mut()),
    len: AtomicUsize::new(0),
};

/// The live runtimes, whose buffer [`FIBRA_0_1_RUNTIMES`] mirrors.
static LIVE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

fn update(change: impl FnOnce(&mut Vec<Entry>)) {
    let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    change(&mut live);
    // Emptied first, so that a debugger never pairs the old length with a
    // smaller new array.
    FIBRA_0_1_RUNTIMES.len.store(0, Ordering::Release);
    FIBRA_0_1_RUNTIMES
        .cores
        .store(live.as_mut_ptr(), Ordering::Release);
    FIBRA_0_1_RUNTIMES.len.store(live.len(), Ordering::Release);
}

/// Lists `core`, at the address it keeps until [`unregister`] (boxed in
/// its `Runtime`, or in a worker thread's frame). Called on the thread
/// that runs it.
pub(crate) fn register(core: &Core) {
    // SAFETY: `gettid` has no preconditions and cannot fail.
    let tid = unsafe { libc::gettid() };
    let entry = Entry {
        core: std::ptr::from_ref(core).addr(),
        tid: tid as usize,
    };
    update(|live| live.push(entry));
}

/// Takes `core` off the list (its runtime is closing).
pub(crate) fn unregister(core: &Core) {
    let addr = std::ptr::from_ref(core).addr();
    update(|live| live.retain(|e| e.core != addr));
}
