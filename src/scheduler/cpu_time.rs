//! How long each fiber has run, for `FiberInfo::cpu_time`, in a runtime
//! built with `runtime::Builder::cpu_time(true)`: the CPU's time-stamp
//! counter is read at every switch, and the ticks since the switch before
//! are added to the `Meta` of the context switched out (see
//! `core/switch.rs`).
//!
//! Off by default, because the read is not free: on the development VM a
//! `rdtsc` takes about 14 ns (a `clock_gettime` 38 ns, a coarse one 8 ns,
//! a thread's CPU clock 780 ns), and a yield round trip went from 23–28 ns
//! to 34–46 ns with it (`benches/switch.rs`, the two builds alternated).
//! Off, a switch pays one test of a flag in a cache line it reads anyway.
//!
//! What it counts is the time from the switch into a fiber to the switch
//! out of it: the CPU time of its code, plus any time its thread spent
//! blocked in a call that does not park (which a stall warning tells) or
//! preempted by the kernel. The ticks become nanoseconds by the ratio of
//! the counter to `CLOCK_MONOTONIC` since the first runtime was made;
//! a CPU whose counter does not tick at a constant rate (no invariant TSC)
//! reports no time at all.

use std::sync::OnceLock;
use std::time::Duration;

use crate::timer::clock;

/// The time-stamp counter now.
#[inline(always)]
pub(crate) fn now() -> u64 {
    // SAFETY: `rdtsc` exists on every x86_64 CPU; it reads a counter and
    // has no other effect.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// The counter and the monotonic clock read together once, the first time
/// a runtime that counts is made: the base of the ratio between them.
fn anchor() -> (u64, u64) {
    static ANCHOR: OnceLock<(u64, u64)> = OnceLock::new();
    *ANCHOR.get_or_init(|| (now(), clock::now_ns()))
}

/// Sets the anchor, if not yet set (a runtime that counts is being made).
pub(crate) fn start() {
    anchor();
}

/// Whether the counter ticks at a constant rate, whatever the CPU's power
/// state (CPUID leaf 0x8000_0007, EDX bit 8: "invariant TSC").
fn invariant() -> bool {
    static INVARIANT: OnceLock<bool> = OnceLock::new();
    // (`__cpuid` is a safe function in newer Rust than the oldest we build
    // with.)
    #[allow(unused_unsafe)]
    *INVARIANT.get_or_init(|| {
        // SAFETY: `cpuid` exists on every x86_64 CPU; asking for a leaf
        // above the highest one returns zeros rather than faulting.
        let max = unsafe { core::arch::x86_64::__cpuid(0x8000_0000) }.eax;
        max >= 0x8000_0007
            // SAFETY: as above, and the leaf exists (checked).
            && unsafe { core::arch::x86_64::__cpuid(0x8000_0007) }.edx & (1 << 8) != 0
    })
}

/// `ticks` of the counter as a duration; `None` where the counter's rate
/// is not constant.
pub(crate) fn to_duration(ticks: u64) -> Option<Duration> {
    if !invariant() {
        return None;
    }
    let (t0, n0) = anchor();
    // Too short a base makes a rough ratio: wait until the anchor is at
    // least a millisecond old (only the first dumps of a process can).
    let (mut t1, mut n1) = (now(), clock::now_ns());
    while n1.saturating_sub(n0) < 1_000_000 {
        std::hint::spin_loop();
        (t1, n1) = (now(), clock::now_ns());
    }
    let ticks_per = u128::from(t1.wrapping_sub(t0).max(1));
    let ns = u128::from(ticks) * u128::from(n1 - n0) / ticks_per;
    Some(Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_millisecond_of_ticks_reads_as_about_a_millisecond() {
        start();
        let (t0, n0) = (now(), clock::now_ns());
        while clock::now_ns() - n0 < 20_000_000 {
            std::hint::spin_loop();
        }
        let ticks = now() - t0;
        if let Some(d) = to_duration(ticks) {
            // Generous: a descheduled thread stretches both clocks alike.
            assert!(
                d >= Duration::from_millis(15) && d <= Duration::from_millis(200),
                "{d:?}"
            );
        }
    }
}
