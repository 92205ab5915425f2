//! Giving the CPU back: a runtime thread that has run a while without any
//! context switch lets the other threads waiting for its CPU have a turn.
//!
//! A busy runtime thread may never sleep: when its peer (a client, another
//! worker) runs on the other core and answers as fast as it is answered,
//! every poll finds an event. The kernel then lets the threads queued
//! behind it on its core wait until its time slice ends at a scheduler
//! tick (4 ms at `HZ=250`), and the connections those threads serve see
//! their latency jump by that much. The same pair of busy threads also
//! keeps the *other* core from the threads waiting there, which is why
//! fibra's two-worker echo p99 was two ticks (8 ms) where the runtime-free
//! epoll floor's, whose threads happen to sleep more often, was one.
//!
//! So before it polls, a runtime looks at the clock: once it has run
//! [`SHARE_AFTER_NS`] since it last gave up the CPU (slept, was preempted,
//! or yielded), it calls `sched_yield`, which hands the CPU to a waiting
//! thread if there is one, and costs a few hundred nanoseconds if not.
//! Whether the thread gave up the CPU is read from its own context-switch
//! counts (`getrusage(RUSAGE_THREAD)`), and only at those moments. When a
//! yield finds nobody waiting, the next look comes twice as late, up to
//! 16 times [`SHARE_AFTER_NS`], so a thread alone on its core pays next to
//! nothing for it.
//!
//! Even the clock is read only at every [`LOOK_EVERY`]th poll: at one
//! connection each round trip is a poll, and the read (a vDSO call) was a
//! few dozen instructions of each. A thread that has held its CPU for
//! [`SHARE_AFTER_NS`] has polled many more times than that in between (a
//! busy turn is a few microseconds); one that has slept meanwhile loses
//! nothing by being looked at late.
//!
//! And the counts are read only when the clock cannot tell: when the poll
//! that looks is one that may wait, the look comes after it, and a wait
//! that lasted [`SLEPT_NS`] or more gave the CPU up (it slept, or the
//! thread was preempted in it) without a `getrusage` to say so. A server
//! at one connection waits at every round trip, and its looks were one
//! system call in eight round trips, 4% more than the epoll floor makes
//! (`benches/peers/syscalls.sh`).

use crate::timer::clock;

/// How long a runtime thread runs without a context switch before it
/// offers its CPU to the threads waiting for it (ns).
pub(crate) const SHARE_AFTER_NS: u64 = 200_000;

/// Doublings of [`SHARE_AFTER_NS`] at most, while yields find nobody
/// waiting.
const MAX_BACKOFF: u32 = 4;

/// The clock is read at one poll in this many.
const LOOK_EVERY: u8 = 8;

/// A wait in the kernel at least this long gave the CPU up (ns): a poll
/// that finds events at once returns in a few microseconds at most, even
/// with a full buffer of events on a slow host.
const SLEPT_NS: u64 = 20_000;

/// A thread's record of when it last gave up its CPU.
pub(crate) struct CpuShare {
    /// When it was last seen to have given it up (ns, [`clock::now_ns`]).
    since: u64,
    /// Its context switches then.
    switches: u64,
    /// Doublings of the wait before the next look.
    backoff: u32,
    /// Polls until the clock is read again.
    countdown: u8,
}

impl Default for CpuShare {
    /// Not looked yet: the first look only takes the counts.
    fn default() -> CpuShare {
        CpuShare {
            since: 0,
            switches: u64::MAX,
            backoff: 0,
            countdown: 0,
        }
    }
}

impl CpuShare {
    /// What a poll that does not wait does (for the tests): yields the CPU
    /// if the thread has held it for long enough. Returns whether it
    /// yielded.
    #[cfg(test)]
    fn before_poll(&mut self) -> bool {
        self.due().is_some_and(|now| self.look(now))
    }

    /// Called before each poll: whether this poll looks (the thread may
    /// have held its CPU for long enough), with the clock's reading then.
    /// The caller then looks, with [`CpuShare::look`] before a poll that
    /// does not wait, or [`CpuShare::after_wait`] after one that may have.
    #[inline]
    pub(crate) fn due(&mut self) -> Option<u64> {
        if self.countdown != 0 {
            self.countdown -= 1;
            return None;
        }
        self.countdown = LOOK_EVERY - 1;
        let now = clock::now_ns();
        (now.saturating_sub(self.since) >= SHARE_AFTER_NS << self.backoff).then_some(now)
    }

    /// A look after a poll that may have waited, and that started at
    /// `started` (the reading [`CpuShare::due`] returned): a wait of
    /// [`SLEPT_NS`] or more gave the CPU up, and counts as a context
    /// switch seen now. Otherwise (events were there at once) the thread
    /// is looked at as [`CpuShare::look`] does. Returns whether it yielded.
    #[cold]
    pub(crate) fn after_wait(&mut self, started: u64) -> bool {
        let now = clock::now_ns();
        if now.saturating_sub(started) < SLEPT_NS {
            return self.look(now);
        }
        // As a look that saw a switch, except that the counts are not
        // read: the next look that reads them only takes them (as after a
        // sleep, it could not yield anyway: the counts would differ).
        self.since = now;
        self.switches = u64::MAX;
        false
    }

    /// Yields the CPU if the thread has not given it up since the last
    /// look (its context switches have not changed), and notes when it
    /// last did. `now`: the clock's reading. Returns whether it yielded.
    #[cold]
    pub(crate) fn look(&mut self, now: u64) -> bool {
        let Some(switches) = thread_switches() else {
            // No counts: never yield on a guess.
            *self = CpuShare {
                since: now,
                ..CpuShare::default()
            };
            return false;
        };
        let mut yielded = false;
        let mut seen = switches;
        if switches == self.switches {
            // SAFETY: sched_yield takes no arguments and touches no memory
            // of ours.
            unsafe { libc::sched_yield() };
            yielded = true;
            seen = thread_switches().unwrap_or(switches);
            self.backoff = if seen == switches {
                (self.backoff + 1).min(MAX_BACKOFF) // nobody was waiting
            } else {
                0
            };
        }
        self.since = clock::now_ns();
        self.switches = seen;
        yielded
    }
}

/// The calling thread's context switches so far, voluntary and not.
fn thread_switches() -> Option<u64> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage writes a whole `rusage` into the pointer it is
    // given, which points at one; we read it only if the call succeeded.
    let usage = unsafe {
        if libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) != 0 {
            return None;
        }
        usage.assume_init()
    };
    u64::try_from(usage.ru_nvcsw)
        .ok()?
        .checked_add(u64::try_from(usage.ru_nivcsw).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    fn pin_to(cpu: usize) {
        // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes in it;
        // sched_setaffinity reads it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
                0
            );
        }
    }

    /// The CPU this thread may run on: the first one it is allowed.
    fn some_cpu() -> usize {
        // SAFETY: as in `pin_to`; sched_getaffinity writes the set.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
            (0..libc::CPU_SETSIZE as usize)
                .find(|&c| libc::CPU_ISSET(c, &set))
                .unwrap_or(0)
        }
    }

    #[test]
    fn a_thread_that_held_its_cpu_long_enough_lets_a_waiting_thread_run() {
        let cpu = some_cpu();
        let stop = Arc::new(AtomicBool::new(false));
        let spins = Arc::new(AtomicU64::new(0));
        let rival = {
            let (stop, spins) = (stop.clone(), spins.clone());
            std::thread::spawn(move || {
                pin_to(cpu);
                while !stop.load(Ordering::Relaxed) {
                    spins.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        pin_to(cpu);
        while spins.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now(); // the rival is up
        }
        let mut share = CpuShare::default();
        let mut got_a_turn = false;
        let (mut tries, mut yields) = (0, 0);
        for _ in 0..500 {
            tries += 1;
            // Hold the CPU for longer than SHARE_AFTER_NS, then look.
            share.since = clock::now_ns();
            share.switches = thread_switches().unwrap();
            share.backoff = 0; // (a yield that found the rival ineligible backs off)
            while clock::now_ns() - share.since < 2 * SHARE_AFTER_NS {
                std::hint::spin_loop();
            }
            let before = spins.load(Ordering::Relaxed);
            share.countdown = 0; // (this poll looks)
            let yielded = share.before_poll();
            yields += usize::from(yielded);
            // Switches during the spin itself (the rival preempting us)
            // skip the yield: that is a turn already given.
            if yielded && spins.load(Ordering::Relaxed) != before {
                assert_eq!(share.backoff, 0, "a yield that switched resets the wait");
                got_a_turn = true;
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        rival.join().unwrap();
        assert!(
            got_a_turn,
            "the rival never ran during a yield ({tries} tries, {yields} yields)"
        );
    }

    #[test]
    fn a_thread_that_gave_up_its_cpu_does_not_yield() {
        let mut share = CpuShare::default();
        assert!(!share.before_poll(), "the first look only takes the counts");
        // Just looked: not again before SHARE_AFTER_NS.
        assert!(!share.before_poll());
        // It sleeps (a context switch): the next look finds it and does not
        // yield.
        std::thread::sleep(std::time::Duration::from_micros(2 * SHARE_AFTER_NS / 1000));
        share.countdown = 0; // (this poll looks)
        assert!(!share.before_poll());
        assert_eq!(share.backoff, 0);
    }

    #[test]
    fn a_wait_that_slept_is_taken_for_a_switch_without_reading_the_counts() {
        let mut share = CpuShare::default();
        assert!(!share.before_poll(), "the first look only takes the counts");
        let counts = share.switches;
        assert_ne!(counts, u64::MAX);
        // A poll that looks and waits: the wait lasts longer than SLEPT_NS.
        share.since = 0;
        share.countdown = 0;
        let started = share.due().expect("the thread has held its CPU since 0");
        std::thread::sleep(std::time::Duration::from_nanos(2 * SLEPT_NS));
        assert!(!share.after_wait(started));
        assert!(share.since >= started + SLEPT_NS, "the sleep is noted");
        assert_eq!(share.switches, u64::MAX, "the counts were not read");
        // A wait that found events at once is looked at as before: here
        // the counts have not changed since they were taken, so the look
        // yields.
        share.since = 0;
        share.switches = thread_switches().unwrap();
        share.countdown = 0;
        let started = share.due().unwrap();
        let yielded = share.after_wait(started);
        assert_ne!(share.switches, u64::MAX, "the counts were read");
        // (Unless the thread was preempted in between, which the counts
        // show: then it does not yield.)
        assert!(yielded || share.switches != counts);
    }

    #[test]
    fn the_clock_is_read_at_one_poll_in_look_every() {
        let mut share = CpuShare::default();
        let mut yields_at_the_look = 0;
        for _ in 0..20 {
            share.countdown = 0;
            share.before_poll(); // a look: the countdown starts again
            // From here on, any look would yield: the thread "has held its
            // CPU" since time 0 with no context switch.
            let held = |share: &mut CpuShare| {
                share.since = 0;
                share.backoff = 0;
                share.switches = thread_switches().unwrap();
            };
            for poll in 1..LOOK_EVERY {
                held(&mut share);
                assert!(!share.before_poll(), "poll {poll} after a look looked");
            }
            held(&mut share);
            // (It does not yield if the thread was preempted in between.)
            yields_at_the_look += usize::from(share.before_poll());
        }
        assert!(
            yields_at_the_look > 0,
            "the look at poll {LOOK_EVERY} never came"
        );
    }
}
