//! The monotonic clock behind every deadline, in plain nanoseconds.
//!
//! Deadlines inside fibra are `u64` nanoseconds of `CLOCK_MONOTONIC`, the
//! clock `std::time::Instant` reads on Linux and the clock our timerfd is set
//! on, so a deadline can go to the kernel as an absolute time without
//! conversion error.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Nanoseconds of `CLOCK_MONOTONIC` now.
#[inline]
pub(crate) fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One reading of both clocks, taken once, to translate `Instant`s.
fn anchor() -> &'static (Instant, u64) {
    static ANCHOR: OnceLock<(Instant, u64)> = OnceLock::new();
    ANCHOR.get_or_init(|| (Instant::now(), now_ns()))
}

/// The nanosecond time of an `Instant`.
pub(crate) fn instant_ns(t: Instant) -> u64 {
    let &(base, base_ns) = anchor();
    match t.checked_duration_since(base) {
        Some(after) => base_ns.saturating_add(duration_ns(after)),
        None => base_ns.saturating_sub(duration_ns(base - t)),
    }
}

/// The `Instant` of a nanosecond time (the inverse of [`instant_ns`]).
pub(crate) fn ns_instant(ns: u64) -> Instant {
    let &(base, base_ns) = anchor();
    if ns >= base_ns {
        base.checked_add(Duration::from_nanos(ns - base_ns))
            .unwrap_or(base)
    } else {
        base.checked_sub(Duration::from_nanos(base_ns - ns))
            .unwrap_or(base)
    }
}

/// The nanosecond time `d` from now, saturating far in the future.
pub(crate) fn after_ns(d: Duration) -> u64 {
    now_ns().saturating_add(duration_ns(d))
}

pub(crate) fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_translate_consistently() {
        let a = Instant::now();
        let ns = now_ns();
        let diff = instant_ns(a).abs_diff(ns);
        assert!(diff < 50_000_000, "clocks disagree by {diff} ns");
        let later = a + Duration::from_millis(5);
        assert_eq!(instant_ns(later) - instant_ns(a), 5_000_000);
    }
}
