//! `epoll_wait`, `epoll_pwait` and `epoll_pwait2`: epoll fds watching
//! ready, idle, hung-up, nested and socket fds (an [`EpWorld`]), room for
//! the events at a page end or inaccessible, and every kind of timeout.

use std::ptr;

use libc::{c_int, epoll_event, sigset_t, timespec};

use crate::api::Api;
use crate::harness::{Case, Record, case, errno_name};
use crate::mem::{ArrMem, Buf, Ts, const_ptr, inputs_after_call, mask_buf, ts_buf};
use crate::net::{epoll_with, pipe, tcp_pair};
use crate::sys::{Fds, await_ready, call, closed_fd, raw_write, with_late_write};

/// An epoll case's fds: the epoll fd, and an fd a thread writes to 30 ms
/// in (if the case wants it).
pub(crate) struct EpWorld {
    fds: Fds,
    pub(crate) epfd: c_int,
    late: Option<c_int>,
}

pub(crate) type MakeEp = fn() -> EpWorld;

fn ew(fds: Fds, epfd: c_int) -> EpWorld {
    EpWorld {
        fds,
        epfd,
        late: None,
    }
}

pub(crate) const IN: u32 = libc::EPOLLIN as u32;

pub(crate) fn ew_ready_with(events: u32) -> EpWorld {
    let mut f = Fds::default();
    let (r, w) = pipe(&mut f);
    raw_write(w, b"x");
    let epfd = epoll_with(&mut f, &[(r, events, 0x1111_2222_3333_4444)]);
    ew(f, epfd)
}

pub(crate) fn ew_ready() -> EpWorld {
    ew_ready_with(IN)
}

pub(crate) fn ew_et() -> EpWorld {
    ew_ready_with(IN | libc::EPOLLET as u32)
}

pub(crate) fn ew_oneshot() -> EpWorld {
    ew_ready_with(IN | libc::EPOLLONESHOT as u32)
}

pub(crate) fn ew_idle() -> EpWorld {
    let mut f = Fds::default();
    let (r, w) = pipe(&mut f);
    let epfd = epoll_with(&mut f, &[(r, IN, 0x2222)]);
    let mut world = ew(f, epfd);
    world.late = Some(w);
    world
}

pub(crate) fn ew_idle_quiet() -> EpWorld {
    let mut w = ew_idle();
    w.late = None;
    w
}

pub(crate) fn ew_two_ready() -> EpWorld {
    let mut f = Fds::default();
    let (r1, w1) = pipe(&mut f);
    let (r2, w2) = pipe(&mut f);
    raw_write(w1, b"1");
    raw_write(w2, b"2");
    let epfd = epoll_with(
        &mut f,
        &[(r1, IN, 0x1111), (r2, IN | libc::EPOLLOUT as u32, 0x3333)],
    );
    ew(f, epfd)
}

pub(crate) fn ew_hup() -> EpWorld {
    let mut f = Fds::default();
    let (r, w) = pipe(&mut f);
    f.close(w);
    let epfd = epoll_with(&mut f, &[(r, IN, 0x4444)]);
    ew(f, epfd)
}

pub(crate) fn ew_empty() -> EpWorld {
    let mut f = Fds::default();
    let epfd = epoll_with(&mut f, &[]);
    ew(f, epfd)
}

pub(crate) fn ew_nested() -> EpWorld {
    let mut inner = ew_ready();
    let epfd = epoll_with(&mut inner.fds, &[(inner.epfd, IN, 0x5555)]);
    inner.epfd = epfd;
    inner
}

pub(crate) fn ew_tcp() -> EpWorld {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    raw_write(s, b"data");
    f.close(s);
    await_ready(c, libc::POLLRDHUP);
    let ev = IN | libc::EPOLLOUT as u32 | libc::EPOLLRDHUP as u32 | libc::EPOLLPRI as u32;
    let epfd = epoll_with(&mut f, &[(c, ev, 0x6666)]);
    ew(f, epfd)
}

pub(crate) fn ew_closed() -> EpWorld {
    ew(Fds::default(), closed_fd())
}

pub(crate) fn ew_pipe() -> EpWorld {
    let mut f = Fds::default();
    let (r, w) = pipe(&mut f);
    raw_write(w, b"x");
    ew(f, r)
}

pub(crate) fn ew_minus1() -> EpWorld {
    ew(Fds::default(), -1)
}

/// Which of the three is called.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum EpFn {
    Wait,
    Pwait,
    Pwait2,
}

/// An epoll call: `max`, room for `cap` events (at a page end, or
/// inaccessible), a second call after it (timeout 0), the timeout in
/// milliseconds (a timespec for epoll_pwait2), a signal mask.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EpCall {
    max: c_int,
    cap: usize,
    mem: ArrMem,
    twice: bool,
    ms: c_int,
    ts: Ts,
    mask: bool,
}

pub(crate) fn ep(max: c_int, ms: c_int) -> EpCall {
    EpCall {
        max,
        cap: 8,
        mem: ArrMem::Heap,
        twice: false,
        ms,
        ts: if ms < 0 {
            None
        } else {
            Some((ms as i64 / 1000, (ms as i64 % 1000) * 1_000_000))
        },
        mask: false,
    }
}

pub(crate) fn do_epoll(api: &Api, which: EpFn, make: MakeEp, c: EpCall) -> Record {
    let w = make();
    let n = c.cap * size_of::<epoll_event>();
    let events = match c.mem {
        ArrMem::PageEnd => Buf::at_page_end(n),
        ArrMem::Bad => Buf::inaccessible(),
        ArrMem::Heap | ArrMem::Null => Buf::new(n),
    };
    let tsb = ts_buf(c.ts);
    let tp = const_ptr::<timespec>(&tsb);
    let mb = mask_buf(c.mask);
    let mp = const_ptr::<sigset_t>(&mb);
    let ev = events.cast::<epoll_event>();
    let once = |ms: c_int, tp: *const timespec| {
        // SAFETY: room for `cap` events of ours (`max` as the case says),
        // our timespec and mask (or null).
        call(|| unsafe {
            match which {
                EpFn::Wait => (api.epoll_wait)(w.epfd, ev, c.max, ms),
                EpFn::Pwait => (api.epoll_pwait)(w.epfd, ev, c.max, ms, mp),
                EpFn::Pwait2 => (api.epoll_pwait2)(w.epfd, ev, c.max, tp, mp),
            }
        })
    };
    let (r, e) = with_late_write(w.late, || once(c.ms, tp));
    let rec = Record::new(r, e).out("events", events.bytes());
    let mut rec = inputs_after_call(rec, &tsb, &mb);
    if c.twice {
        let zero = timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let (r2, e2) = once(0, &zero);
        rec = rec
            .int("second_call", format!("ret={r2} errno={}", errno_name(e2)))
            .out("events_after_second", events.bytes());
    }
    drop(w.fds);
    rec
}

pub(crate) fn epoll_worlds() -> Vec<(&'static str, MakeEp, bool)> {
    vec![
        ("one fd ready", ew_ready as MakeEp, true),
        ("two fds ready", ew_two_ready, true),
        ("a hung-up pipe", ew_hup, true),
        ("a nested epoll fd", ew_nested, true),
        ("tcp, data and the peer closed", ew_tcp, true),
        ("an idle pipe", ew_idle_quiet, false),
        ("nothing watched", ew_empty, false),
    ]
}

pub(crate) fn epoll_cases(which: EpFn) -> Vec<Case> {
    let mut v = Vec::new();
    for (name, make, ready) in epoll_worlds() {
        let mut timeouts = vec![0, 20];
        if ready {
            timeouts.push(-1);
        }
        for ms in timeouts {
            v.push(case(format!("{name}, timeout {ms} ms"), move |api| {
                do_epoll(api, which, make, ep(8, ms))
            }));
        }
    }
    let twice = |mut c: EpCall| {
        c.twice = true;
        c
    };
    let at = |mut c: EpCall, mem: ArrMem, cap: usize| {
        c.mem = mem;
        c.cap = cap;
        c
    };
    let mut list: Vec<(&str, MakeEp, EpCall)> = vec![
        ("two fds ready, max 1", ew_two_ready, ep(1, 20)),
        (
            "two fds ready, max 1, twice",
            ew_two_ready,
            twice(ep(1, 20)),
        ),
        ("one fd ready, max 0", ew_ready, ep(0, 20)),
        ("one fd ready, max -1", ew_ready, ep(-1, 20)),
        ("one fd ready, max 2^30", ew_ready, ep(1 << 30, 20)),
        ("edge-triggered, twice", ew_et, twice(ep(8, 20))),
        ("level-triggered, twice", ew_ready, twice(ep(8, 20))),
        ("one-shot, twice", ew_oneshot, twice(ep(8, 20))),
        (
            "an idle pipe written 30 ms later, 2 s",
            ew_idle,
            ep(8, 2000),
        ),
        ("a closed epoll fd", ew_closed, ep(8, 20)),
        ("a pipe as the epoll fd", ew_pipe, ep(8, 20)),
        ("epoll fd -1", ew_minus1, ep(8, 20)),
        (
            "one fd ready, room for one event at a page end",
            ew_ready,
            at(ep(1, 20), ArrMem::PageEnd, 1),
        ),
        (
            "an idle pipe, room for one event at a page end",
            ew_idle_quiet,
            at(ep(1, 20), ArrMem::PageEnd, 1),
        ),
        (
            "one fd ready, inaccessible events",
            ew_ready,
            at(ep(1, 20), ArrMem::Bad, 0),
        ),
        (
            "an idle pipe, inaccessible events",
            ew_idle_quiet,
            at(ep(1, 20), ArrMem::Bad, 0),
        ),
    ];
    if which != EpFn::Pwait2 {
        list.extend([
            ("one fd ready, timeout -5", ew_ready as MakeEp, ep(8, -5)),
            ("one fd ready, timeout i32::MAX", ew_ready, ep(8, i32::MAX)),
            ("one fd ready, timeout i32::MIN", ew_ready, ep(8, i32::MIN)),
        ]);
    } else {
        let ts = |ts: Ts| EpCall { ts, ..ep(8, 0) };
        list.extend([
            ("one fd ready, no timeout", ew_ready as MakeEp, ts(None)),
            (
                "one fd ready, timeout i64::MAX s",
                ew_ready,
                ts(Some((i64::MAX, 999_999_999))),
            ),
            (
                "one fd ready, tv_nsec 10^9",
                ew_ready,
                ts(Some((0, 1_000_000_000))),
            ),
            ("one fd ready, tv_nsec -1", ew_ready, ts(Some((0, -1)))),
            ("one fd ready, tv_sec -1", ew_ready, ts(Some((-1, 0)))),
            (
                "an idle pipe, tv_nsec 10^9",
                ew_idle_quiet,
                ts(Some((0, 1_000_000_000))),
            ),
        ]);
    }
    if which != EpFn::Wait {
        let masked = |mut c: EpCall| {
            c.mask = true;
            c
        };
        list.extend([
            (
                "one fd ready, 20 ms, a signal mask",
                ew_ready as MakeEp,
                masked(ep(8, 20)),
            ),
            (
                "an idle pipe, 20 ms, a signal mask",
                ew_idle_quiet,
                masked(ep(8, 20)),
            ),
            (
                "one fd ready, no timeout, a signal mask",
                ew_ready,
                masked(ep(8, -1)),
            ),
        ]);
    }
    for (name, make, c) in list {
        v.push(case(name, move |api| do_epoll(api, which, make, c)));
    }
    if which == EpFn::Pwait2 {
        v.push(case("one fd ready, inaccessible timeout", |api| {
            let w = ew_ready();
            let events = Buf::new(8 * size_of::<epoll_event>());
            let bad = Buf::inaccessible();
            // SAFETY: room for 8 events; the timeout is inaccessible on
            // purpose (the kernel says EFAULT).
            let (r, e) = call(|| unsafe {
                (api.epoll_pwait2)(w.epfd, events.cast(), 8, bad.cast(), ptr::null())
            });
            Record::new(r, e).out("events", events.bytes())
        }));
    }
    v
}
