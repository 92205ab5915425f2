//! A running context's stack, sampled from another thread while it runs:
//! where a stalled fiber is *now*, for the stall warning and for a dump of
//! a runtime it holds.
//!
//! ## How
//!
//! The sampler (the watchdog, or a dump) sends the runtime's thread a
//! real-time signal of fibra's own ([`signal`]), marked as fibra's by its
//! `si_value` so that any other sender's signal of that number goes to the
//! handler installed before ours, if any. The handler checks that it runs
//! on the thread asked for and that the runtime's watch word is still the
//! one the sampler saw (the stalled context runs, no switch has begun:
//! every switch stores another word first), copies the interrupted
//! registers from its ucontext into a static slot, and spins on the slot's
//! state word. The sampler then walks the stopped thread's live stack
//! from those registers with the same fake-frame trick as a parked
//! fiber's (`interrupted.rs`), into a buffer on its own stack, and
//! releases the handler. The addresses are named afterwards, once the
//! thread runs again.
//!
//! ## Why it cannot deadlock or corrupt the sampled thread
//!
//! - The handler is async-signal-safe: atomics, plain stores, `gettid` and
//!   `clock_gettime` (which preserve `errno`, saved anyway); no lock, no
//!   allocation, nothing of Rust's runtime.
//! - While the thread is held, the sampler takes no lock it might hold and
//!   allocates nothing: the walk is libgcc's `_Unwind_Backtrace` through
//!   the `backtrace` crate's `trace_unsynchronized` (no lock of its own),
//!   into a fixed buffer. libgcc 12 finds unwind info with glibc's
//!   `_dl_find_object` (glibc ≥ 2.35), which is lock-free and
//!   async-signal-safe, instead of `dl_iterate_phdr`, which takes the
//!   loader's lock that the stopped thread may hold (in `dlopen`, or in a
//!   panic's own unwind). Checked on Debian 12 (libgcc 12.2, glibc 2.36):
//!   `_Unwind_Find_FDE` calls `_dl_find_object` straight away, and takes
//!   its `object_mutex` only once a frame table has been registered at run
//!   time (`__register_frame`, which JIT compilers call); such a process
//!   could stop its sample forever on that lock, a risk this design takes
//!   and names.
//! - The stopped stack is read only, and only while it is stopped: a state
//!   word decides by compare-and-swap which side wins. The handler gives up
//!   after [`HOLD`] if the walk has not begun (then the sampler discards
//!   it); once the sampler has moved the word to "walking", the handler
//!   waits for "done", however long (the walk is bounded by `MAX_FRAMES`
//!   frames and takes microseconds). The sampler gives up if the signal is
//!   not taken within [`DELIVERY`] (blocked, or the thread is in the
//!   kernel uninterruptibly).
//! - Where it cannot be done, the stack is left out and the warning says
//!   why ([`Sampled::Missing`]).
//!
//! A signal ends some system calls early, whatever `SA_RESTART` says
//! (`nanosleep`, `poll`, `epoll_wait`, socket calls with a timeout: they
//! return `EINTR`), as any profiler's signals and Go's preemption signals
//! do; std's `sleep` and `read_exact` resume by themselves. It is sent
//! once per stall warning, to a thread that is already holding up every
//! fiber of its runtime.
//!
//! ## Why not framehop or a DWARF unwinder of our own
//!
//! Both would read the stack through a callback that could bound every
//! read to the stack's range, which libgcc does not offer: a frame whose
//! unwind info is wrong could make it read an unmapped address. But both
//! need the loaded modules and their unwind sections, which are read from
//! the loader (its lock again) or kept up to date by hooks, and framehop
//! would add a crate and its own unwind-info parsing for a walk that
//! libgcc, which every panic already uses, does here without a lock.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::scheduler::stack_trace::walk::{MAX_FRAMES, RawStack};
use crate::scheduler::stack_trace::{Sampled, signal};
use crate::scheduler::watch::{NOT_SIGNALLED, Watch};
use interrupted::Regs;

mod interrupted;

/// How long the handler holds its thread waiting for the walk to begin.
const HOLD: Duration = Duration::from_millis(50);
/// How long the sampler waits for the thread to take the signal.
const DELIVERY: Duration = Duration::from_millis(100);
/// Marks a signal as a sample of fibra's: the high half of its
/// `si_value` (the low half is the sample's generation).
const MAGIC: u32 = 0x6669_6272; // "fibr"

// The slot's states: the low half of its state word, whose high half is
// the generation of the sample they belong to (`tagged`), so that a late
// signal of an earlier sample (one withdrawn after `DELIVERY`) can never
// take a later one's request, whatever thread it lands on. `IDLE` is the
// whole word 0.
/// (The whole word: no sample.)
const IDLE: u64 = 0;
/// The sampler has sent the signal.
const ARMED: u32 = 1;
/// The handler is checking the word and copying the registers.
const CAPTURING: u32 = 2;
/// The registers are in the slot; the handler waits for the walk.
const CAPTURED: u32 = 3;
/// The sampler walks: the handler waits for `DONE`, without a bound.
const WALKING: u32 = 4;
const DONE: u32 = 5;
/// The handler found another word: the context has stopped running.
const DECLINED: u32 = 6;
/// The handler waited [`HOLD`] without the walk beginning.
const GAVE_UP: u32 = 7;

/// The state word of `state` for the sample of `generation`.
const fn tagged(generation: u32, state: u32) -> u64 {
    (generation as u64) << 32 | state as u64
}

/// The one sample in flight (samplers take [`SAMPLERS`] first).
struct Slot {
    /// [`tagged`] states.
    state: AtomicU64,
    /// The last sample's generation (written by samplers only, under
    /// [`SAMPLERS`]).
    generation: AtomicU32,
    /// The thread asked for.
    tid: AtomicI32,
    /// Its runtime's watch word, and the value it must still have.
    word: AtomicPtr<AtomicUsize>,
    expect: AtomicUsize,
    /// Written by the handler in `CAPTURING`, read by the sampler after it
    /// moved `CAPTURED` to `WALKING`.
    regs: UnsafeCell<Regs>,
}

// SAFETY: `regs` is written and read on either side of the state word's
// Release/Acquire hand-over (see `Slot::regs`); the rest are atomics.
unsafe impl Sync for Slot {}

static SLOT: Slot = Slot {
    state: AtomicU64::new(0),
    generation: AtomicU32::new(0),
    tid: AtomicI32::new(0),
    word: AtomicPtr::new(std::ptr::null_mut()),
    expect: AtomicUsize::new(0),
    regs: UnsafeCell::new([0; 17]),
};

static SAMPLERS: Mutex<()> = Mutex::new(());

/// Samples the stack of the context running on thread `tid` while the
/// runtime's `word` still holds `expect` (a marked word: the watchdog saw
/// that context run without a switch). Blocks for at most about
/// [`DELIVERY`] + [`HOLD`] (+ the walk).
///
/// `during` is called once the stack is walked, while the thread is still
/// held (by the sample that walked; a sample that gives up calls it not at
/// all). It must take no lock and allocate nothing, as the walk (see the
/// module docs): the held thread may hold either.
pub(crate) fn sample_holding(
    tid: libc::pid_t,
    word: &AtomicUsize,
    expect: usize,
    during: &mut dyn FnMut(),
) -> Sampled {
    // A walk that cannot go past the stopped instruction (stopped in a
    // signal trampoline, say: another handler's return, under a storm of
    // signals) is no stack: a running context always has frames under
    // it. The context still runs, so it is sampled again, elsewhere.
    for _ in 0..ATTEMPTS {
        match sample_once(tid, word, expect, during) {
            Sampled::Stack(raw) if raw.ips.len() < 2 => continue,
            sampled => return sampled,
        }
    }
    Sampled::Missing("the unwinder could not walk past the instruction it stopped at")
}

/// How many samples [`sample_holding`] takes before it gives up on a walk of one
/// frame.
const ATTEMPTS: usize = 3;

fn sample_once(
    tid: libc::pid_t,
    word: &AtomicUsize,
    expect: usize,
    during: &mut dyn FnMut(),
) -> Sampled {
    if let Err(why) = install() {
        return Sampled::Missing(why);
    }
    if tid == gettid() {
        return Sampled::Missing("the thread asking is the one to sample");
    }
    let _one = SAMPLERS.lock().unwrap_or_else(|e| e.into_inner());
    let slot = &SLOT;
    // A previous handler may still be on its way out (it stores `IDLE`).
    if !wait_until(DELIVERY, || slot.state.load(Ordering::Acquire) == IDLE) {
        return Sampled::Missing("a previous sample's handler has not returned");
    }
    slot.tid.store(tid, Ordering::Relaxed);
    slot.word
        .store(std::ptr::from_ref(word).cast_mut(), Ordering::Relaxed);
    slot.expect.store(expect, Ordering::Relaxed);
    let generation = slot.generation.load(Ordering::Relaxed).wrapping_add(1);
    slot.generation.store(generation, Ordering::Relaxed);
    let state = |s| tagged(generation, s);
    slot.state.store(state(ARMED), Ordering::Release);
    if let Err(why) = send(tid, generation) {
        slot.state.store(IDLE, Ordering::Release);
        return Sampled::Missing(why);
    }
    // Wait for the handler's answer; past the bound, withdraw the request
    // unless the handler has taken it meanwhile.
    let taken = wait_until(DELIVERY, || {
        slot.state.load(Ordering::Acquire) != state(ARMED)
    });
    if !taken
        && slot
            .state
            .compare_exchange(state(ARMED), IDLE, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        return Sampled::Missing(
            "its thread did not take the signal in time (signals blocked, or in the kernel)",
        );
    }
    // Taken: `CAPTURING` lasts a few instructions.
    while slot.state.load(Ordering::Acquire) == state(CAPTURING) {
        std::hint::spin_loop();
    }
    if slot
        .state
        .compare_exchange(
            state(CAPTURED),
            state(WALKING),
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_err()
    {
        // `DECLINED` or `GAVE_UP`: the handler has returned.
        let why = match slot.state.swap(IDLE, Ordering::AcqRel) as u32 {
            DECLINED => "it stopped running before the signal came",
            _ => "its thread gave up waiting for the walk",
        };
        return Sampled::Missing(why);
    }
    // SAFETY: `WALKING` was reached from `CAPTURED` (Acquire), so the
    // handler's copy of the registers is complete and nobody writes them
    // until the next sample.
    let regs = unsafe { *slot.regs.get() };
    let mut ips = [0usize; MAX_FRAMES];
    // The handler holds the thread, without a bound, until `DONE`: its
    // stack stays as the registers describe it and stays mapped (the
    // context cannot end while its thread is held).
    // SAFETY: as argued above.
    let (n, cut) = unsafe { interrupted::walk(&regs, &mut ips) };
    if n >= 2 {
        // (A walk of one frame is sampled again, and read again then.)
        during();
    }
    slot.state.store(state(DONE), Ordering::Release);
    // Nothing is allocated before the thread runs again.
    if n == 0 {
        return Sampled::Missing("the unwinder found no frame to start from");
    }
    Sampled::Stack(RawStack {
        ips: ips[..n].into(),
        cut,
    })
}

/// Spins, then sleeps in short steps, until `done` or `bound` has passed;
/// returns `done`'s last answer.
fn wait_until(bound: Duration, done: impl Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    let mut spins = 0u32;
    loop {
        if done() {
            return true;
        }
        if start.elapsed() >= bound {
            return done();
        }
        if spins < 1000 {
            spins += 1;
            std::hint::spin_loop();
        } else {
            // (Not `thread::sleep`: with the `hook` feature it parks a
            // fiber that samples, e.g. one taking a dump.)
            // SAFETY: sched_yield takes nothing and cannot fail.
            unsafe { libc::sched_yield() };
        }
    }
}

fn gettid() -> libc::pid_t {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t }
}

/// Sends the sample signal, marked with [`MAGIC`], to thread `tid` of this
/// process (`rt_tgsigqueueinfo`: a tid that has exited gives `ESRCH`, where
/// a stale `pthread_t` would be undefined behaviour).
fn send(tid: libc::pid_t, generation: u32) -> Result<(), &'static str> {
    // The kernel's siginfo for SI_QUEUE on x86_64: si_signo at 0, si_code
    // at 8, si_pid at 16, si_uid at 20, si_value at 24.
    let mut info = [0u64; 16];
    let sig = signal();
    // SAFETY: getpid and getuid cannot fail.
    let (pid, uid) = unsafe { (libc::getpid(), libc::getuid()) };
    info[0] = sig as u32 as u64;
    info[1] = libc::SI_QUEUE as u32 as u64;
    info[2] = pid as u32 as u64 | (uid as u64) << 32;
    info[3] = u64::from(MAGIC) << 32 | u64::from(generation);
    // SAFETY: `info` is a 128-byte siginfo the kernel reads; a queued
    // signal to a thread of our own process is allowed with any si_code.
    let rc = unsafe { libc::syscall(libc::SYS_rt_tgsigqueueinfo, pid, tid, sig, info.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err("the signal could not be sent to its thread")
    }
}

/// The disposition of [`signal`] before ours, for signals not ours.
struct Previous(UnsafeCell<std::mem::MaybeUninit<libc::sigaction>>);
// SAFETY: written once, before our handler is installed (which publishes
// it: sigaction is a system call), read only after.
unsafe impl Sync for Previous {}
static PREVIOUS: Previous = Previous(UnsafeCell::new(std::mem::MaybeUninit::uninit()));

/// Installs the handler once (`SA_SIGINFO | SA_RESTART`, every signal
/// blocked while it runs), keeping the previous disposition to chain to.
fn install() -> Result<(), &'static str> {
    static INSTALLED: OnceLock<Result<(), &'static str>> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        // Warm libgcc's one-time set-up (its register table, behind a
        // `pthread_once`) on this thread, so that no walk does it while
        // another thread is held.
        backtrace::trace(|_| false);
        let sig = signal();
        // SAFETY: sigaction with a null new action only reads the old one
        // into `PREVIOUS`, which nothing reads until the handler is in.
        let rc =
            unsafe { libc::sigaction(sig, std::ptr::null(), (*PREVIOUS.0.get()).as_mut_ptr()) };
        if rc != 0 {
            return Err("the sample signal's handler could not be read");
        }
        // SAFETY: a zeroed sigaction is valid; the fields are set below.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = handler as *const () as usize;
        // SA_ONSTACK: the handler's frame (3.4 KiB with AVX-512 state)
        // goes on the thread's alternate stack, which every thread that
        // runs fibers has (`stack::overflow::prepare_thread`), not on a
        // stalled fiber's stack, which may have less room left than that.
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
        // SAFETY: `sa_mask` is ours to fill.
        unsafe { libc::sigfillset(&mut action.sa_mask) };
        // SAFETY: a valid action whose handler is async-signal-safe.
        let rc = unsafe { libc::sigaction(sig, &action, std::ptr::null_mut()) };
        if rc != 0 {
            return Err("the sample signal's handler could not be installed");
        }
        Ok(())
    })
}

/// The signal handler: see the module docs.
extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, uc: *mut libc::c_void) {
    // SAFETY: errno is this thread's; restored below, whatever runs.
    let errno = unsafe { *libc::__errno_location() };
    // SAFETY: the kernel's siginfo for this signal (SA_SIGINFO), read at
    // the offsets of `send`, for a queued signal only.
    let value = unsafe {
        ((*info).si_code == libc::SI_QUEUE).then(|| info.cast::<u8>().add(24).cast::<u64>().read())
    };
    if let Some(value) = value
        && (value >> 32) as u32 == MAGIC
    {
        take(uc.cast(), value as u32);
    } else {
        // SAFETY: as the kernel called us; `PREVIOUS` was written before
        // this handler was installed.
        unsafe { chain(sig, info, uc) };
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Our signal of sample `generation`, on whichever thread it came:
/// capture, if that sample is still wanted (its request is the slot's)
/// and this is the thread it asked for.
fn take(uc: *const libc::ucontext_t, generation: u32) {
    let slot = &SLOT;
    let state = |s| tagged(generation, s);
    // The generation in the state word makes a late signal's claim fail
    // even when a later sample has armed the slot since: no ABA.
    if slot
        .state
        .compare_exchange(
            state(ARMED),
            state(CAPTURING),
            Ordering::Acquire,
            Ordering::Relaxed,
        )
        .is_err()
    {
        return; // late: withdrawn, or taken
    }
    // Read after the claim: the tid of this very sample (stored before
    // `ARMED`, Release; our CAS Acquire). It is always ours (the signal
    // was sent to that thread alone), unless the tid was reused.
    if slot.tid.load(Ordering::Relaxed) != gettid() {
        slot.state.store(state(ARMED), Ordering::Release);
        return;
    }
    // SAFETY: the sampler set `word` before `ARMED` (Release, our CAS
    // Acquire) and keeps its runtime alive until it sees a state past
    // `CAPTURING`.
    let word = unsafe { &*slot.word.load(Ordering::Relaxed) };
    if word.load(Ordering::Relaxed) != slot.expect.load(Ordering::Relaxed) {
        slot.state.store(state(DECLINED), Ordering::Release);
        return;
    }
    // SAFETY: only this handler writes `regs`, in `CAPTURING`; `uc` is the
    // kernel's, for this handler.
    unsafe { interrupted::copy_regs(uc, &mut *slot.regs.get()) };
    slot.state.store(state(CAPTURED), Ordering::Release);
    let deadline = now_ns().saturating_add(HOLD.as_nanos() as u64);
    loop {
        let now = slot.state.load(Ordering::Acquire);
        if now == state(CAPTURED)
            && now_ns() >= deadline
            && slot
                .state
                .compare_exchange(
                    state(CAPTURED),
                    state(GAVE_UP),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
        {
            return;
        }
        if now == state(DONE) {
            slot.state.store(IDLE, Ordering::Release);
            return;
        }
        // CAPTURED in time, or WALKING: held until DONE, unbounded.
        std::hint::spin_loop();
    }
}

/// `CLOCK_MONOTONIC` in ns: async-signal-safe.
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Hands a signal that is not ours to the disposition before ours.
///
/// # Safety
///
/// Called from our handler with its arguments, `PREVIOUS` written.
unsafe fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, uc: *mut libc::c_void) {
    // SAFETY: written before our handler was installed.
    let previous = unsafe { (*PREVIOUS.0.get()).assume_init_ref() };
    let f = previous.sa_sigaction;
    if f == libc::SIG_DFL || f == libc::SIG_IGN {
        // (The default of a real-time signal would end the process: a
        // stray one is dropped instead.)
        return;
    }
    if previous.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler, of the kind its flags say, called
        // as the kernel would.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(f) };
        f(sig, info, uc);
    } else {
        // SAFETY: as above, a plain handler.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(f) };
        f(sig);
    }
}

/// The stack of the context `word` names on `watch`'s runtime, sampled
/// while it runs, unless the runtime was built not to be signalled
/// (`Builder::stall_stacks(false)`): the one door to the sampling signal
/// for a runtime's thread.
pub(crate) fn of(watch: &Watch, word: usize) -> Sampled {
    of_holding(watch, word, &mut || {})
}

/// [`of`], with `during` called while the thread is held after the walk
/// (see [`sample_holding`]: no lock, no allocation).
pub(crate) fn of_holding(watch: &Watch, word: usize, during: &mut dyn FnMut()) -> Sampled {
    if !watch.sample_stacks() {
        return Sampled::Missing(NOT_SIGNALLED);
    }
    sample_holding(watch.tid, &watch.word, word, during)
}
