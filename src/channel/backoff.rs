//! Short waits without a waiter list: a thread's spin before it parks and
//! the spin after losing a race for a position ([`Backoff`]), and the wait
//! for another party's few instructions between claiming a slot and
//! filling it ([`Pause`]).

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use crate::scheduler::context;
use crate::scheduler::park::{park_current, park_regardless};
use crate::scheduler::wait_on::WaitOn;
use crate::timer::clock;

/// A short wait that doubles: a thread's before it parks (`snooze`: spins,
/// then yields of the thread; it says whether to try once more), or a
/// retry's after a lost compare-exchange on a position (`spin`: spins
/// only, up to 64). Parties that lost to each other come back at different
/// times; a retry after one fixed spin kept the contended line moving
/// between cores (four threads sending into one `unbounded()`: 1.45×
/// crossbeam-channel's time a message, whose `Backoff` has both too).
#[derive(Default)]
pub(crate) struct Backoff {
    step: u32,
}

/// Whether the process may run on one CPU only (its affinity mask, as
/// `taskset -c 0` or a one-CPU container leaves it), read once. A spin
/// waits for another thread to move: with one CPU that thread cannot run
/// while this one spins, so the waits below yield at once instead.
/// (A mask narrowed after the first wait is not seen: spinning then
/// costs time, never correctness.)
#[inline]
pub(crate) fn one_cpu() -> bool {
    // 0: not read yet; 1: one CPU; 2: more.
    static ONE: AtomicU8 = AtomicU8::new(0);
    match ONE.load(Ordering::Relaxed) {
        0 => {
            let one = allowed_cpus() == 1;
            ONE.store(if one { 1 } else { 2 }, Ordering::Relaxed);
            one
        }
        v => v == 1,
    }
}

/// How many CPUs this thread may run on (at least 1).
#[cold]
fn allowed_cpus() -> u32 {
    // SAFETY: a zeroed cpu_set_t is an empty set, which sched_getaffinity
    // fills (or leaves alone on failure, which counts as one CPU here, the
    // safe side: yields instead of spins).
    let count = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return 1;
        }
        libc::CPU_COUNT(&set)
    };
    count.max(1) as u32
}

impl Backoff {
    const SPIN_STEPS: u32 = 6;
    /// A waiting thread's `snooze` yields its CPU up to 256 times (as
    /// kanal's waits do) before it parks, where crossbeam's yields 4
    /// times: a partner on another core that comes within a few hundred
    /// microseconds then hands over without a futex sleep and wake-up on
    /// either side. Between threads on two cores (`benches/peers`,
    /// `channels`, medians of 3-5, 2026-12-07): bounded(0) spsc 13 393
    /// ±59 % -> 575 ±5 % ns a message (kanal 362, crossbeam 23 080),
    /// bounded(1) spsc 1 614 ±84 % -> 506 ±7 %, bounded(0) select_rx
    /// 1 834 ±215 % -> 716 ±6 %; the buffered and unbounded rows within
    /// their spreads. A thread that waits long burns those yields once
    /// per wait (a few hundred microseconds of CPU), then sleeps.
    const YIELD_STEPS: u32 = Self::SPIN_STEPS + 256;

    #[inline]
    pub(crate) fn spin(&mut self) {
        // (In a loom model, one yield: loom's scheduler is the other party.)
        #[cfg(loom)]
        let spins = 1;
        // On one CPU, a lost race is retried at once: whoever won has
        // moved on already, and spinning only delays the retry.
        #[cfg(not(loom))]
        let spins = if one_cpu() {
            0
        } else {
            1u32 << self.step.min(Self::SPIN_STEPS)
        };
        for _ in 0..spins {
            crate::atomic::spin_loop();
        }
        if self.step <= Self::SPIN_STEPS {
            self.step += 1;
        }
    }

    pub(crate) fn snooze(&mut self) -> bool {
        if cfg!(loom) {
            // In a model the wait parks at once (through loom): a spin
            // would only multiply the interleavings to explore.
            return false;
        }
        if self.step <= Self::SPIN_STEPS && one_cpu() {
            // The other party needs this CPU: straight to the yields.
            self.step = Self::SPIN_STEPS + 1;
        }
        if self.step <= Self::SPIN_STEPS {
            for _ in 0..1u32 << self.step {
                std::hint::spin_loop();
            }
        } else if self.step <= Self::YIELD_STEPS {
            std::thread::yield_now();
        } else {
            return false;
        }
        self.step += 1;
        true
    }
}

/// A wait for another party that is between two steps it always takes
/// (a sender that claimed a slot and is writing it, a receiver reading
/// one): spins first; then, in a fiber, yields to the fibers of its thread
/// (the other party may be one of them: a `select`'s send whose message is
/// being made), or yields the thread; and after long, sleeps in short
/// slices, so a party that takes its time (a message made by code that
/// waits) costs no busy core.
/// The sleep of a long [`Pause`].
const SLICE: Duration = Duration::from_micros(100);

#[derive(Default)]
pub(crate) struct Pause {
    step: u32,
    /// Neither a cancellation nor a `fibra::timeout` ends the pause (the
    /// caller holds a claim it must complete).
    uncancellable: bool,
}

impl Pause {
    const SPIN_STEPS: u32 = 6;
    const YIELD_STEPS: u32 = 200;

    /// A pause that cancellation does not unwind (see the field).
    pub(crate) fn uncancellable() -> Pause {
        Pause {
            step: 0,
            uncancellable: true,
        }
    }

    pub(crate) fn pause(&mut self) {
        // In a loom model, a yield to loom's scheduler: the other party is
        // one of its threads, and a loop that only spins never ends there.
        // (`spin_loop` is that yield in a model.)
        if cfg!(loom) {
            crate::atomic::spin_loop();
        } else {
            self.wait();
        }
        self.step = self.step.saturating_add(1);
    }

    fn wait(&self) {
        if self.step < Self::SPIN_STEPS && !one_cpu() {
            for _ in 0..1u32 << self.step {
                std::hint::spin_loop();
            }
        } else if let Some(core) = context::current() {
            let on = WaitOn::Sync(&"channel slot being filled");
            // A short timed park nobody ends early.
            let until = clock::now_ns() + SLICE.as_nanos() as u64;
            match (self.step < Self::YIELD_STEPS, self.uncancellable) {
                (true, false) => crate::fiber::yield_now(),
                (true, true) => core.yield_now(),
                (false, false) => {
                    park_current(Some(until), on);
                }
                (false, true) => park_regardless(core, Some(until), on),
            }
        } else if self.step < Self::YIELD_STEPS {
            std::thread::yield_now();
        } else {
            std::thread::sleep(SLICE);
        }
    }
}
