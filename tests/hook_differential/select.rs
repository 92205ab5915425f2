//! `select` and `pselect`: fds at fixed numbers (see [`select_world`]),
//! fd sets sized for nfds (at a page end, where a read or write past them
//! faults), and every kind of timeout.

use std::ptr;

use libc::{c_int, fd_set, sigset_t, timespec, timeval};

use crate::api::Api;
use crate::harness::{Case, Record, case};
use crate::mem::{Buf, const_ptr, inputs_after_call, mask_buf, mut_ptr, ts_buf};
use crate::net::{dup_at, pipe, tcp_pair};
use crate::sys::{Fds, await_ready, call, is_open, raw_send, raw_write, with_late_write};

// The fd numbers the select cases put their fds at (a child process has
// nothing there), so the sets' bits are the same in every place.
/// A pipe's read end with data (and copies at 63, 64, 1023 and 1024).
pub(crate) const AT_READY: c_int = 40;
/// A pipe's read end, empty (a thread may write to it 30 ms in).
pub(crate) const AT_IDLE: c_int = 41;
/// That pipe's write end (writable).
pub(crate) const AT_WRITE: c_int = 42;
/// A TCP socket with urgent data (the except set).
pub(crate) const AT_OOB: c_int = 43;
/// Nothing.
pub(crate) const AT_NONE: c_int = 44;

/// The fds of the select cases, at their numbers.
pub(crate) fn select_world() -> Fds {
    let mut f = Fds::default();
    let (r, w) = pipe(&mut f);
    raw_write(w, b"ready");
    for at in [AT_READY, 63, 64, 1023, 1024] {
        dup_at(&mut f, r, at);
    }
    let (r2, w2) = pipe(&mut f);
    dup_at(&mut f, r2, AT_IDLE);
    dup_at(&mut f, w2, AT_WRITE);
    let (c, s) = tcp_pair(&mut f);
    raw_send(s, b"!", libc::MSG_OOB);
    await_ready(c, libc::POLLPRI);
    dup_at(&mut f, c, AT_OOB);
    assert!(!is_open(AT_NONE));
    f
}

/// One fd set of a case: its size in bytes, where it is, its bits.
#[derive(Clone, Debug)]
pub(crate) struct SetSpec {
    bytes: usize,
    page_end: bool,
    bits: Vec<c_int>,
}

pub(crate) fn heap_set(bits: &[c_int]) -> Option<SetSpec> {
    Some(SetSpec {
        bytes: size_of::<fd_set>(),
        page_end: false,
        bits: bits.to_vec(),
    })
}

pub(crate) fn end_set(bytes: usize, bits: &[c_int]) -> Option<SetSpec> {
    Some(SetSpec {
        bytes,
        page_end: true,
        bits: bits.to_vec(),
    })
}

/// A select or pselect case: nfds, the three sets, the timeout (seconds
/// and microseconds; pselect's is the same in nanoseconds), whether a
/// thread writes to [`AT_WRITE`] 30 ms in.
#[derive(Clone, Debug)]
pub(crate) struct Sel {
    nfds: c_int,
    sets: [Option<SetSpec>; 3],
    tv: Option<(i64, i64)>,
    late: bool,
}

pub(crate) fn sel(nfds: c_int, sets: [Option<SetSpec>; 3], tv: Option<(i64, i64)>) -> Sel {
    Sel {
        nfds,
        sets,
        tv,
        late: false,
    }
}

pub(crate) fn set_bufs(c: &Sel) -> Vec<Option<Buf>> {
    c.sets
        .iter()
        .map(|s| {
            s.as_ref().map(|s| {
                let b = if s.page_end {
                    Buf::at_page_end(s.bytes)
                } else {
                    Buf::zeroed(s.bytes)
                };
                for &fd in &s.bits {
                    set_bit(&b, fd);
                }
                b
            })
        })
        .collect()
}

/// Sets `fd`'s bit in the fd set `b`, if `b` has room for it.
fn set_bit(b: &Buf, fd: c_int) {
    let byte = fd as usize / 8;
    if byte < b.len {
        b.data_mut()[byte] |= 1 << (fd % 8);
    }
}

/// An `fd_set` (on the heap, canary bytes after it) holding `fd` alone.
pub(crate) fn fd_set_of(fd: c_int) -> Buf {
    let set = Buf::zeroed(size_of::<fd_set>());
    set_bit(&set, fd);
    set
}

pub(crate) fn record_sets(mut rec: Record, bufs: &[Option<Buf>]) -> Record {
    for (name, b) in ["readfds", "writefds", "exceptfds"].iter().zip(bufs) {
        if let Some(b) = b {
            rec = rec.out(name, b.bytes());
        }
    }
    rec
}

/// The cases of both select and pselect.
pub(crate) fn sel_cases() -> Vec<(&'static str, Sel)> {
    let z = Some((0, 0));
    let ms20 = Some((0, 20_000));
    let s2 = Some((2, 0));
    let ready = || heap_set(&[AT_READY]);
    let empty8 = || end_set(8, &[]);
    let mut late = sel(AT_IDLE + 1, [heap_set(&[AT_IDLE]), None, None], s2);
    late.late = true;
    vec![
        (
            "nfds 0, no sets, zero timeout",
            sel(0, [None, None, None], z),
        ),
        ("nfds 0, no sets, 20 ms", sel(0, [None, None, None], ms20)),
        ("nfds 64, no sets, 20 ms", sel(64, [None, None, None], ms20)),
        (
            "nfds 0, empty 8-byte sets at a page end, 20 ms",
            sel(0, [empty8(), empty8(), empty8()], ms20),
        ),
        (
            "nfds 1, empty 8-byte sets at a page end, 20 ms",
            sel(1, [empty8(), empty8(), empty8()], ms20),
        ),
        (
            "nfds 1, empty 8-byte sets at a page end, zero timeout",
            sel(1, [empty8(), empty8(), empty8()], z),
        ),
        (
            "a ready pipe, no timeout",
            sel(AT_READY + 1, [ready(), None, None], None),
        ),
        (
            "a ready pipe, zero timeout",
            sel(AT_READY + 1, [ready(), None, None], z),
        ),
        (
            "a ready pipe, 20 ms",
            sel(AT_READY + 1, [ready(), None, None], ms20),
        ),
        (
            "a ready pipe, 2 s",
            sel(AT_READY + 1, [ready(), None, None], s2),
        ),
        (
            "a ready pipe, 8-byte set at a page end, zero timeout",
            sel(AT_READY + 1, [end_set(8, &[AT_READY]), None, None], z),
        ),
        (
            "a ready pipe, 8-byte set at a page end, 20 ms",
            sel(AT_READY + 1, [end_set(8, &[AT_READY]), None, None], ms20),
        ),
        (
            "an idle pipe, 20 ms",
            sel(AT_IDLE + 1, [heap_set(&[AT_IDLE]), None, None], ms20),
        ),
        (
            "an idle pipe, zero timeout",
            sel(AT_IDLE + 1, [heap_set(&[AT_IDLE]), None, None], z),
        ),
        (
            "an idle pipe, 8-byte set at a page end, 20 ms",
            sel(AT_IDLE + 1, [end_set(8, &[AT_IDLE]), None, None], ms20),
        ),
        ("an idle pipe written 30 ms later, 2 s", late),
        (
            "a writable pipe",
            sel(AT_WRITE + 1, [None, heap_set(&[AT_WRITE]), None], s2),
        ),
        (
            "urgent data in the except set",
            sel(AT_OOB + 1, [None, None, heap_set(&[AT_OOB])], s2),
        ),
        (
            "all three sets",
            sel(
                AT_OOB + 1,
                [
                    heap_set(&[AT_READY, AT_IDLE]),
                    heap_set(&[AT_WRITE]),
                    heap_set(&[AT_OOB, AT_IDLE]),
                ],
                s2,
            ),
        ),
        (
            "bits at and past nfds",
            sel(
                AT_READY + 1,
                [heap_set(&[AT_READY, AT_IDLE, 100, 1000]), None, None],
                s2,
            ),
        ),
        (
            "nfds 64, fd 63 ready, 8-byte sets at a page end, 20 ms",
            sel(64, [end_set(8, &[63]), empty8(), empty8()], ms20),
        ),
        (
            "nfds 64, fd 63 ready, 8-byte sets at a page end, zero timeout",
            sel(64, [end_set(8, &[63]), empty8(), empty8()], z),
        ),
        (
            "nfds 65, fd 64 ready, 16-byte sets at a page end, 20 ms",
            sel(
                65,
                [end_set(16, &[64]), end_set(16, &[]), end_set(16, &[])],
                ms20,
            ),
        ),
        (
            "nfds 1024, fd 1023 ready, 128-byte sets at a page end, 20 ms",
            sel(
                1024,
                [end_set(128, &[1023]), end_set(128, &[]), end_set(128, &[])],
                ms20,
            ),
        ),
        (
            "nfds 1025, fd 1024 ready, 136-byte sets at a page end, 20 ms",
            sel(
                1025,
                [end_set(136, &[1024]), end_set(136, &[]), end_set(136, &[])],
                ms20,
            ),
        ),
        (
            "nfds 2000, fd 1024 ready, 256-byte sets, 20 ms",
            sel(
                2000,
                [
                    Some(SetSpec {
                        bytes: 256,
                        page_end: false,
                        bits: vec![1024],
                    }),
                    None,
                    None,
                ],
                ms20,
            ),
        ),
        ("nfds -1", sel(-1, [ready(), None, None], ms20)),
        (
            "a closed fd in the read set, 20 ms",
            sel(AT_NONE + 1, [heap_set(&[AT_NONE]), None, None], ms20),
        ),
        (
            "a closed fd in the read set, zero timeout",
            sel(AT_NONE + 1, [heap_set(&[AT_NONE]), None, None], z),
        ),
        (
            "a ready pipe, tv_usec 1000000",
            sel(AT_READY + 1, [ready(), None, None], Some((0, 1_000_000))),
        ),
        (
            "a ready pipe, tv_usec -1",
            sel(AT_READY + 1, [ready(), None, None], Some((0, -1))),
        ),
        (
            "a ready pipe, tv_sec -1",
            sel(AT_READY + 1, [ready(), None, None], Some((-1, 0))),
        ),
        (
            "a ready pipe, a huge timeout",
            sel(
                AT_READY + 1,
                [ready(), None, None],
                Some((i64::MAX, 999_999)),
            ),
        ),
    ]
}

pub(crate) fn do_select(api: &Api, c: &Sel) -> Record {
    let world = select_world();
    let bufs = set_bufs(c);
    let tv = c.tv.map(|(s, u)| {
        Buf::of(&timeval {
            tv_sec: s,
            tv_usec: u,
        })
    });
    let tvp = mut_ptr::<timeval>(&tv);
    let (r, e) = with_late_write(c.late.then_some(AT_WRITE), || {
        // SAFETY: our sets, of at least the bytes nfds names (as the case
        // means it), and our timeval (or null).
        call(|| unsafe {
            (api.select)(
                c.nfds,
                mut_ptr(&bufs[0]),
                mut_ptr(&bufs[1]),
                mut_ptr(&bufs[2]),
                tvp,
            )
        })
    });
    let mut rec = record_sets(Record::new(r, e), &bufs);
    if let (Some(b), Some((s, u))) = (&tv, c.tv) {
        let after: timeval = b.get(0);
        let valid = s >= 0 && u >= 0;
        if valid {
            // (Linux writes the time left back on failure too.)
            let total = s as i128 * 1_000_000 + u as i128;
            let left = after.tv_sec as i128 * 1_000_000 + after.tv_usec as i128;
            rec = rec
                .approx("timeout_left_us", left, total)
                .flag("tv_usec_normal", (0..1_000_000).contains(&after.tv_usec))
                .out("timeout_canary", b.canary());
        } else {
            rec = rec.out("timeout", b.bytes());
        }
    }
    drop(world);
    rec
}

pub(crate) fn do_pselect(api: &Api, c: &Sel, mask: bool) -> Record {
    let world = select_world();
    let bufs = set_bufs(c);
    let ts = ts_buf(c.tv.map(|(s, u)| (s, u.saturating_mul(1000))));
    let tp = const_ptr::<timespec>(&ts);
    let mb = mask_buf(mask);
    let mp = const_ptr::<sigset_t>(&mb);
    let (r, e) = with_late_write(c.late.then_some(AT_WRITE), || {
        // SAFETY: our sets, of at least the bytes nfds names (as the case
        // means it), our timespec and mask (or null).
        call(|| unsafe {
            (api.pselect)(
                c.nfds,
                mut_ptr(&bufs[0]),
                mut_ptr(&bufs[1]),
                mut_ptr(&bufs[2]),
                tp,
                mp,
            )
        })
    });
    let rec = record_sets(Record::new(r, e), &bufs);
    let rec = inputs_after_call(rec, &ts, &mb);
    drop(world);
    rec
}

pub(crate) fn select_cases() -> Vec<Case> {
    let mut v: Vec<Case> = sel_cases()
        .into_iter()
        .map(|(name, c)| case(name, move |api| do_select(api, &c)))
        .collect();
    v.push(case("a ready pipe, inaccessible timeout", |api| {
        do_select_bad_timeout(api, false)
    }));
    v
}

pub(crate) fn pselect_cases() -> Vec<Case> {
    let mut v: Vec<Case> = sel_cases()
        .into_iter()
        .map(|(name, c)| case(name, move |api| do_pselect(api, &c, false)))
        .collect();
    let ms20 = Some((0, 20_000));
    for (name, c) in [
        (
            "a ready pipe, 20 ms, a signal mask",
            sel(AT_READY + 1, [heap_set(&[AT_READY]), None, None], ms20),
        ),
        (
            "an idle pipe, 20 ms, a signal mask",
            sel(AT_IDLE + 1, [heap_set(&[AT_IDLE]), None, None], ms20),
        ),
        (
            "nfds 1, empty 8-byte sets at a page end, 20 ms, a signal mask",
            sel(1, [end_set(8, &[]), end_set(8, &[]), end_set(8, &[])], ms20),
        ),
        (
            "a ready pipe, no timeout, a signal mask",
            sel(AT_READY + 1, [heap_set(&[AT_READY]), None, None], None),
        ),
    ] {
        v.push(case(name, move |api| do_pselect(api, &c, true)));
    }
    v.push(case("a ready pipe, inaccessible timeout", |api| {
        do_select_bad_timeout(api, true)
    }));
    v
}

/// A ready pipe, the timeout an inaccessible pointer (glibc reads
/// select's and pselect's timeouts itself: it faults).
pub(crate) fn do_select_bad_timeout(api: &Api, p: bool) -> Record {
    let world = select_world();
    let set = fd_set_of(AT_READY);
    let bad = Buf::inaccessible();
    // SAFETY: our set; the timeout is inaccessible on purpose (the
    // kernel says EFAULT, or glibc faults: a child process holds it).
    let (r, e) = call(|| unsafe {
        if p {
            (api.pselect)(
                AT_READY + 1,
                set.cast(),
                ptr::null_mut(),
                ptr::null_mut(),
                bad.cast(),
                ptr::null(),
            )
        } else {
            (api.select)(
                AT_READY + 1,
                set.cast(),
                ptr::null_mut(),
                ptr::null_mut(),
                bad.cast(),
            )
        }
    });
    drop(world);
    Record::new(r, e).out("readfds", set.bytes())
}
