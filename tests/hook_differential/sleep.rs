//! `nanosleep` and `clock_nanosleep`: relative and absolute requests on
//! every clock, invalid, null and inaccessible ones, and where the time
//! left goes.

use libc::{c_int, clockid_t, timespec};

use crate::api::Api;
use crate::harness::{Case, Record, case};
use crate::mem::{Buf, const_ptr, mut_ptr, ts_buf};
use crate::sys::call;

/// The time of `clock` in nanoseconds.
pub(crate) fn now_ns(clock: clockid_t) -> i128 {
    let mut ts = timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
}

/// A sleep's request: relative (seconds, nanoseconds), absolute `ms` from
/// now on the call's clock, null, or inaccessible.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Req {
    Rel(i64, i64),
    AbsIn(i64),
    Abs(i64, i64),
    Null,
    Bad,
}

/// Where the time left goes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Rem {
    Buf,
    Null,
    Bad,
}

pub(crate) fn do_sleep(api: &Api, clock: Option<(clockid_t, c_int)>, req: Req, rem: Rem) -> Record {
    let clk = clock.map_or(libc::CLOCK_MONOTONIC, |c| c.0);
    let start = now_ns(clk);
    let (target_ns, ts) = match req {
        Req::Rel(s, ns) => (
            start + s as i128 * 1_000_000_000 + ns as i128,
            Some((s, ns)),
        ),
        Req::AbsIn(ms) => {
            let t = start + ms as i128 * 1_000_000;
            (
                t,
                Some(((t / 1_000_000_000) as i64, (t % 1_000_000_000) as i64)),
            )
        }
        Req::Abs(s, ns) => (s as i128 * 1_000_000_000 + ns as i128, Some((s, ns))),
        Req::Null | Req::Bad => (0, None),
    };
    let reqb = match req {
        Req::Bad => Some(Buf::inaccessible()),
        _ => ts_buf(ts),
    };
    let rp = const_ptr::<timespec>(&reqb);
    let remb = match rem {
        Rem::Buf => Some(Buf::new(size_of::<timespec>())),
        Rem::Null => None,
        Rem::Bad => Some(Buf::inaccessible()),
    };
    let remp = mut_ptr::<timespec>(&remb);
    let req_before = match req {
        Req::Bad => None,
        _ => reqb.as_ref().map(Buf::bytes),
    };
    // SAFETY: our timespecs (or null, or inaccessible: the kernel says).
    let (r, e) = call(|| unsafe {
        match clock {
            None => (api.nanosleep)(rp, remp),
            Some((c, flags)) => (api.clock_nanosleep)(c, flags, rp, remp),
        }
    });
    let end = now_ns(clk);
    let mut rec = Record::new(r, e);
    if let Some(b) = &remb {
        rec = rec.out("rem", b.bytes());
    }
    if let (Some(b), Some(before)) = (&reqb, &req_before) {
        rec = rec.flag("req_intact", b.bytes() == *before);
    }
    if r == 0 && ts.is_some() {
        rec = rec.flag("slept_at_least_the_time_asked", end >= target_ns);
    }
    rec
}

pub(crate) fn nanosleep_cases() -> Vec<Case> {
    [
        ("zero", Req::Rel(0, 0), Rem::Buf),
        ("1 ns", Req::Rel(0, 1), Rem::Buf),
        ("1 ms", Req::Rel(0, 1_000_000), Rem::Buf),
        ("20 ms", Req::Rel(0, 20_000_000), Rem::Buf),
        ("20 ms, no rem", Req::Rel(0, 20_000_000), Rem::Null),
        ("1 ms, inaccessible rem", Req::Rel(0, 1_000_000), Rem::Bad),
        ("tv_nsec 10^9", Req::Rel(0, 1_000_000_000), Rem::Buf),
        ("tv_nsec -1", Req::Rel(0, -1), Rem::Buf),
        ("tv_sec -1", Req::Rel(-1, 0), Rem::Buf),
        (
            "tv_sec -1, tv_nsec 10^9",
            Req::Rel(-1, 1_000_000_000),
            Rem::Buf,
        ),
        ("null request", Req::Null, Rem::Buf),
        ("inaccessible request", Req::Bad, Rem::Buf),
    ]
    .into_iter()
    .map(|(name, req, rem)| case(name, move |api| do_sleep(api, None, req, rem)))
    .collect()
}

pub(crate) fn clock_nanosleep_cases() -> Vec<Case> {
    let abs = libc::TIMER_ABSTIME;
    let list: Vec<(&str, clockid_t, c_int, Req, Rem)> = vec![
        (
            "monotonic, 20 ms",
            libc::CLOCK_MONOTONIC,
            0,
            Req::Rel(0, 20_000_000),
            Rem::Buf,
        ),
        (
            "realtime, 20 ms",
            libc::CLOCK_REALTIME,
            0,
            Req::Rel(0, 20_000_000),
            Rem::Buf,
        ),
        (
            "monotonic, zero",
            libc::CLOCK_MONOTONIC,
            0,
            Req::Rel(0, 0),
            Rem::Buf,
        ),
        (
            "monotonic, absolute, 20 ms from now",
            libc::CLOCK_MONOTONIC,
            abs,
            Req::AbsIn(20),
            Rem::Buf,
        ),
        (
            "realtime, absolute, 20 ms from now",
            libc::CLOCK_REALTIME,
            abs,
            Req::AbsIn(20),
            Rem::Buf,
        ),
        (
            "monotonic, absolute, time 0 (past)",
            libc::CLOCK_MONOTONIC,
            abs,
            Req::Abs(0, 0),
            Rem::Buf,
        ),
        (
            "realtime, absolute, time 0 (past)",
            libc::CLOCK_REALTIME,
            abs,
            Req::Abs(0, 0),
            Rem::Buf,
        ),
        (
            "monotonic, absolute, 20 ms ago",
            libc::CLOCK_MONOTONIC,
            abs,
            Req::AbsIn(-20),
            Rem::Buf,
        ),
        (
            "boottime, 10 ms",
            libc::CLOCK_BOOTTIME,
            0,
            Req::Rel(0, 10_000_000),
            Rem::Buf,
        ),
        (
            "tai, 10 ms",
            libc::CLOCK_TAI,
            0,
            Req::Rel(0, 10_000_000),
            Rem::Buf,
        ),
        (
            "process cputime, absolute, time 0",
            libc::CLOCK_PROCESS_CPUTIME_ID,
            abs,
            Req::Abs(0, 0),
            Rem::Buf,
        ),
        (
            "thread cputime, 1 ms",
            libc::CLOCK_THREAD_CPUTIME_ID,
            0,
            Req::Rel(0, 1_000_000),
            Rem::Buf,
        ),
        (
            "monotonic raw, 1 ms",
            libc::CLOCK_MONOTONIC_RAW,
            0,
            Req::Rel(0, 1_000_000),
            Rem::Buf,
        ),
        (
            "realtime coarse, 1 ms",
            libc::CLOCK_REALTIME_COARSE,
            0,
            Req::Rel(0, 1_000_000),
            Rem::Buf,
        ),
        ("clock 12345", 12345, 0, Req::Rel(0, 1_000_000), Rem::Buf),
        ("clock -1", -1, 0, Req::Rel(0, 1_000_000), Rem::Buf),
        (
            "monotonic, flags 2 (unknown), 1 ms",
            libc::CLOCK_MONOTONIC,
            2,
            Req::Rel(0, 1_000_000),
            Rem::Buf,
        ),
        (
            "monotonic, tv_nsec 10^9",
            libc::CLOCK_MONOTONIC,
            0,
            Req::Rel(0, 1_000_000_000),
            Rem::Buf,
        ),
        (
            "monotonic, tv_sec -1",
            libc::CLOCK_MONOTONIC,
            0,
            Req::Rel(-1, 0),
            Rem::Buf,
        ),
        (
            "monotonic, absolute, tv_sec -1",
            libc::CLOCK_MONOTONIC,
            abs,
            Req::Abs(-1, 0),
            Rem::Buf,
        ),
        (
            "realtime, absolute, tv_nsec -1",
            libc::CLOCK_REALTIME,
            abs,
            Req::Abs(0, -1),
            Rem::Buf,
        ),
        (
            "monotonic, null request",
            libc::CLOCK_MONOTONIC,
            0,
            Req::Null,
            Rem::Buf,
        ),
        (
            "monotonic, inaccessible request",
            libc::CLOCK_MONOTONIC,
            0,
            Req::Bad,
            Rem::Buf,
        ),
        (
            "monotonic, 1 ms, no rem",
            libc::CLOCK_MONOTONIC,
            0,
            Req::Rel(0, 1_000_000),
            Rem::Null,
        ),
        (
            "monotonic, 1 ms, inaccessible rem",
            libc::CLOCK_MONOTONIC,
            0,
            Req::Rel(0, 1_000_000),
            Rem::Bad,
        ),
    ];
    list.into_iter()
        .map(|(name, clock, flags, req, rem)| {
            case(name, move |api| {
                do_sleep(api, Some((clock, flags)), req, rem)
            })
        })
        .collect()
}
