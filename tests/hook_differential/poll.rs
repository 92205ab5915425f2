//! `poll` and `ppoll`: the fds of a case (a [`PollWorld`]) and its pollfd
//! array (on the heap, at a page end, null or inaccessible), with every
//! kind of timeout.

use std::ptr;

use libc::{c_int, nfds_t, pollfd, sigset_t, timespec};

use crate::api::Api;
use crate::harness::{Case, Record, case};
use crate::mem::{ArrMem, Buf, Ts, const_ptr, inputs_after_call, mask_buf, mut_ptr, ts_buf};
use crate::net::{
    connect_to, epoll_with, eventfd, file, linger0, listener, pipe, socket, tcp_pair,
};
use crate::sys::{CLOSED, Fds, await_ready, call, closed_fd, raw_send, raw_write, with_late_write};

/// The fds of a poll case: each (fd, events), and an fd that a thread
/// writes to 30 ms after the call began, if the case wants one.
pub(crate) struct PollWorld {
    pub(crate) _fds: Fds,
    pub(crate) entries: Vec<(c_int, i16)>,
    pub(crate) late: Option<c_int>,
}

pub(crate) type MakePoll = fn() -> PollWorld;

pub(crate) fn pw(fds: Fds, entries: Vec<(c_int, i16)>) -> PollWorld {
    PollWorld {
        _fds: fds,
        entries,
        late: None,
    }
}

pub(crate) fn pw_none() -> PollWorld {
    pw(Fds::default(), vec![])
}

pub(crate) fn pw_ready() -> PollWorld {
    let mut f = Fds::default();
    let (r, w) = pipe(&mut f);
    raw_write(w, b"ready");
    pw(f, vec![(r, libc::POLLIN)])
}

pub(crate) fn pw_idle() -> PollWorld {
    let mut f = Fds::default();
    let (r, w) = pipe(&mut f);
    let mut world = pw(f, vec![(r, libc::POLLIN)]);
    world.late = Some(w);
    world
}

pub(crate) fn pw_idle_tcp() -> PollWorld {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    let mut world = pw(f, vec![(c, libc::POLLIN | libc::POLLPRI)]);
    world.late = Some(s);
    world
}

pub(crate) fn pw_hup() -> PollWorld {
    let mut f = Fds::default();
    let (r, w) = pipe(&mut f);
    f.close(w);
    pw(f, vec![(r, 0)])
}

pub(crate) fn pw_closed() -> PollWorld {
    pw(Fds::default(), vec![(closed_fd(), libc::POLLIN)])
}

pub(crate) fn pw_negative() -> PollWorld {
    let mut w = pw_ready();
    let r = w.entries[0].0;
    w.entries = vec![(-1, libc::POLLIN), (r, libc::POLLIN), (-5, libc::POLLOUT)];
    w
}

pub(crate) fn pw_file() -> PollWorld {
    let mut f = Fds::default();
    let fd = file(&mut f, b"x");
    pw(f, vec![(fd, libc::POLLIN | libc::POLLOUT)])
}

pub(crate) fn pw_tcp_closed() -> PollWorld {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    f.close(s);
    await_ready(c, libc::POLLRDHUP);
    pw(f, vec![(c, libc::POLLIN | libc::POLLRDHUP | libc::POLLOUT)])
}

pub(crate) fn pw_tcp_reset() -> PollWorld {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    linger0(s);
    f.close(s);
    await_ready(c, libc::POLLERR);
    pw(f, vec![(c, libc::POLLIN | libc::POLLOUT)])
}

pub(crate) fn pw_tcp_oob() -> PollWorld {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    raw_send(s, b"!", libc::MSG_OOB);
    await_ready(c, libc::POLLPRI);
    pw(f, vec![(c, libc::POLLPRI)])
}

pub(crate) fn pw_tcp_writable() -> PollWorld {
    let mut f = Fds::default();
    let (c, _) = tcp_pair(&mut f);
    pw(f, vec![(c, libc::POLLOUT | libc::POLLWRNORM)])
}

pub(crate) fn pw_listener() -> PollWorld {
    let mut f = Fds::default();
    let (l, a) = listener(&mut f);
    let c = socket(&mut f, libc::AF_INET, libc::SOCK_STREAM);
    connect_to(c, &a);
    await_ready(l, libc::POLLIN);
    pw(f, vec![(l, libc::POLLIN)])
}

pub(crate) fn pw_eventfd() -> PollWorld {
    let mut f = Fds::default();
    let fd = eventfd(&mut f, 3);
    pw(f, vec![(fd, libc::POLLIN | libc::POLLOUT)])
}

pub(crate) fn pw_epoll() -> PollWorld {
    let mut f = Fds::default();
    let (r, w) = pipe(&mut f);
    raw_write(w, b"x");
    let ep = epoll_with(&mut f, &[(r, libc::EPOLLIN as u32, 1)]);
    pw(f, vec![(ep, libc::POLLIN)])
}

pub(crate) fn pw_duplicates() -> PollWorld {
    let mut w = pw_ready();
    let r = w.entries[0].0;
    w.entries = vec![(r, libc::POLLIN), (r, libc::POLLIN), (r, libc::POLLOUT)];
    w
}

pub(crate) fn pw_many() -> PollWorld {
    let mut f = Fds::default();
    let (idle, w1) = pipe(&mut f);
    let (r, w) = pipe(&mut f);
    raw_write(w, b"x");
    let mut entries = vec![(idle, libc::POLLIN); 63];
    entries.push((r, libc::POLLIN));
    let mut world = pw(f, entries);
    world.late = Some(w1);
    world
}

pub(crate) fn pw_mixed() -> PollWorld {
    let mut f = Fds::default();
    let (r, w) = pipe(&mut f);
    raw_write(w, b"x");
    let (idle, _) = pipe(&mut f);
    let fl = file(&mut f, b"y");
    pw(
        f,
        vec![
            (idle, libc::POLLIN),
            (r, libc::POLLIN | libc::POLLOUT),
            (w, libc::POLLOUT),
            (CLOSED, libc::POLLIN),
            (fl, libc::POLLIN),
            (-1, libc::POLLIN),
        ],
    )
}

pub(crate) fn poll_array(w: &PollWorld, mem: ArrMem) -> Option<Buf> {
    let n = w.entries.len() * size_of::<pollfd>();
    let b = match mem {
        ArrMem::Heap => Buf::zeroed(n),
        ArrMem::PageEnd => Buf::at_page_end(n),
        ArrMem::Null => return None,
        ArrMem::Bad => return Some(Buf::inaccessible()),
    };
    for (i, &(fd, events)) in w.entries.iter().enumerate() {
        b.put(
            i * size_of::<pollfd>(),
            pollfd {
                fd,
                events,
                revents: 0x5a5a,
            },
        );
    }
    Some(b)
}

pub(crate) fn poll_record(rec: Record, arr: &Option<Buf>, w: &PollWorld) -> Record {
    let Some(b) = arr.as_ref().filter(|b| b.len > 0) else {
        return rec;
    };
    let mut revents = Vec::new();
    let mut intact = true;
    for (i, &(fd, events)) in w.entries.iter().enumerate() {
        let p: pollfd = b.get(i * size_of::<pollfd>());
        revents.extend(format!("{:#x},", p.revents).bytes());
        intact &= p.fd == fd && p.events == events;
    }
    rec.out("revents", revents)
        .flag("fds_events_intact", intact)
        .out("canary", b.canary())
}

pub(crate) fn do_poll(
    api: &Api,
    make: MakePoll,
    mem: ArrMem,
    nfds: Option<nfds_t>,
    timeout: c_int,
) -> Record {
    let w = make();
    let arr = poll_array(&w, mem);
    let p = mut_ptr::<pollfd>(&arr);
    let n = nfds.unwrap_or(w.entries.len() as nfds_t);
    let (r, e) = with_late_write(w.late, || {
        // SAFETY: `n` pollfds of ours (or null/inaccessible: the kernel
        // says).
        call(|| unsafe { (api.poll)(p, n, timeout) })
    });
    poll_record(Record::new(r, e), &arr, &w)
}

pub(crate) fn do_ppoll(
    api: &Api,
    make: MakePoll,
    mem: ArrMem,
    nfds: Option<nfds_t>,
    ts: Ts,
    mask: bool,
) -> Record {
    let w = make();
    let arr = poll_array(&w, mem);
    let p = mut_ptr::<pollfd>(&arr);
    let n = nfds.unwrap_or(w.entries.len() as nfds_t);
    let tsb = ts_buf(ts);
    let tp = const_ptr::<timespec>(&tsb);
    let mb = mask_buf(mask);
    let mp = const_ptr::<sigset_t>(&mb);
    let (r, e) = with_late_write(w.late, || {
        // SAFETY: `n` pollfds of ours, a timespec and a mask of ours (or
        // null).
        call(|| unsafe { (api.ppoll)(p, n, tp, mp) })
    });
    let rec = poll_record(Record::new(r, e), &arr, &w);
    inputs_after_call(rec, &tsb, &mb)
}

pub(crate) fn poll_worlds() -> Vec<(&'static str, MakePoll, bool)> {
    // (name, world, whether it is ready at once)
    vec![
        ("a readable pipe", pw_ready, true),
        ("a hung-up pipe, no events", pw_hup, true),
        ("a closed fd (POLLNVAL)", pw_closed, true),
        ("negative fds and a readable pipe", pw_negative, true),
        ("a regular file", pw_file, true),
        ("tcp, peer closed, POLLRDHUP", pw_tcp_closed, true),
        ("tcp, peer reset", pw_tcp_reset, true),
        ("tcp with urgent data, POLLPRI", pw_tcp_oob, true),
        ("tcp writable", pw_tcp_writable, true),
        ("a listener with a pending connection", pw_listener, true),
        ("an eventfd", pw_eventfd, true),
        ("an epoll fd with an event", pw_epoll, true),
        ("one pipe three times", pw_duplicates, true),
        ("63 idle fds and a ready one", pw_many, true),
        ("pipes, a file, a closed and a negative fd", pw_mixed, true),
        ("an idle pipe", pw_idle_quiet, false),
        ("an idle tcp socket", pw_idle_tcp_quiet, false),
        ("no fds", pw_none, false),
    ]
}

pub(crate) fn poll_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for (name, make, ready) in poll_worlds() {
        v.push(case(format!("{name}, timeout 0"), move |api| {
            do_poll(api, make, ArrMem::Heap, None, 0)
        }));
        v.push(case(format!("{name}, timeout 20 ms"), move |api| {
            do_poll(api, make, ArrMem::Heap, None, 20)
        }));
        if ready {
            v.push(case(format!("{name}, timeout -1"), move |api| {
                do_poll(api, make, ArrMem::Heap, None, -1)
            }));
        }
    }
    for (name, make, mem, nfds, timeout) in [
        (
            "a readable pipe, timeout i32::MAX",
            pw_ready as MakePoll,
            ArrMem::Heap,
            None,
            i32::MAX,
        ),
        (
            "a readable pipe, timeout i32::MIN",
            pw_ready,
            ArrMem::Heap,
            None,
            i32::MIN,
        ),
        (
            "a readable pipe, timeout -5",
            pw_ready,
            ArrMem::Heap,
            None,
            -5,
        ),
        (
            "an idle pipe written 30 ms later, timeout 2 s",
            pw_idle,
            ArrMem::Heap,
            None,
            2000,
        ),
        (
            "an idle tcp socket written 30 ms later, timeout 2 s",
            pw_idle_tcp,
            ArrMem::Heap,
            None,
            2000,
        ),
        (
            "63 idle fds, one written 30 ms later, timeout 2 s",
            pw_many_late,
            ArrMem::Heap,
            None,
            2000,
        ),
        (
            "no fds, null array, timeout 0",
            pw_none,
            ArrMem::Null,
            None,
            0,
        ),
        (
            "no fds, null array, timeout 20 ms",
            pw_none,
            ArrMem::Null,
            None,
            20,
        ),
        (
            "a readable pipe at a page end, timeout 20 ms",
            pw_ready,
            ArrMem::PageEnd,
            None,
            20,
        ),
        (
            "an idle pipe at a page end, timeout 20 ms",
            pw_idle_quiet,
            ArrMem::PageEnd,
            None,
            20,
        ),
        (
            "an inaccessible array, timeout 20 ms",
            pw_ready,
            ArrMem::Bad,
            Some(1),
            20,
        ),
        (
            "nfds 2^40, timeout 20 ms",
            pw_ready,
            ArrMem::Heap,
            Some(1 << 40),
            20,
        ),
        (
            "nfds 0 of a readable pipe, timeout 20 ms",
            pw_ready,
            ArrMem::Heap,
            Some(0),
            20,
        ),
    ] {
        v.push(case(name, move |api| {
            do_poll(api, make, mem, nfds, timeout)
        }));
    }
    v
}

/// 63 idle fds and one more, written 30 ms later.
pub(crate) fn pw_many_late() -> PollWorld {
    let mut f = Fds::default();
    let (idle, _) = pipe(&mut f);
    let (r, w) = pipe(&mut f);
    let mut entries = vec![(idle, libc::POLLIN); 63];
    entries.push((r, libc::POLLIN));
    let mut world = pw(f, entries);
    world.late = Some(w);
    world
}

/// An idle TCP socket nobody writes to.
pub(crate) fn pw_idle_tcp_quiet() -> PollWorld {
    let mut w = pw_idle_tcp();
    w.late = None;
    w
}

/// An idle pipe nobody writes to.
pub(crate) fn pw_idle_quiet() -> PollWorld {
    let mut w = pw_idle();
    w.late = None;
    w
}

/// A ppoll case: name, fds, array, nfds, timeout, mask.
pub(crate) type PpollRow = (&'static str, MakePoll, ArrMem, Option<nfds_t>, Ts, bool);

pub(crate) fn ppoll_cases() -> Vec<Case> {
    let mut v = Vec::new();
    let ms20 = Some((0, 20_000_000));
    for (name, make, ready) in poll_worlds() {
        v.push(case(format!("{name}, timeout 0"), move |api| {
            do_ppoll(api, make, ArrMem::Heap, None, Some((0, 0)), false)
        }));
        v.push(case(format!("{name}, timeout 20 ms"), move |api| {
            do_ppoll(api, make, ArrMem::Heap, None, ms20, false)
        }));
        if ready {
            v.push(case(format!("{name}, no timeout"), move |api| {
                do_ppoll(api, make, ArrMem::Heap, None, None, false)
            }));
        }
    }
    let cases: Vec<PpollRow> = vec![
        (
            "a readable pipe, timeout 20 ms, a signal mask",
            pw_ready,
            ArrMem::Heap,
            None,
            ms20,
            true,
        ),
        (
            "an idle pipe, timeout 20 ms, a signal mask",
            pw_idle_quiet,
            ArrMem::Heap,
            None,
            ms20,
            true,
        ),
        (
            "no fds, timeout 20 ms, a signal mask",
            pw_none,
            ArrMem::Null,
            None,
            ms20,
            true,
        ),
        (
            "a readable pipe, no timeout, a signal mask",
            pw_ready,
            ArrMem::Heap,
            None,
            None,
            true,
        ),
        (
            "a readable pipe, timeout i64::MAX s",
            pw_ready,
            ArrMem::Heap,
            None,
            Some((i64::MAX, 999_999_999)),
            false,
        ),
        (
            "a readable pipe, tv_nsec 10^9",
            pw_ready,
            ArrMem::Heap,
            None,
            Some((0, 1_000_000_000)),
            false,
        ),
        (
            "a readable pipe, tv_nsec -1",
            pw_ready,
            ArrMem::Heap,
            None,
            Some((0, -1)),
            false,
        ),
        (
            "a readable pipe, tv_sec -1",
            pw_ready,
            ArrMem::Heap,
            None,
            Some((-1, 0)),
            false,
        ),
        (
            "an idle pipe, tv_nsec 10^9",
            pw_idle_quiet,
            ArrMem::Heap,
            None,
            Some((0, 1_000_000_000)),
            false,
        ),
        (
            "an idle pipe written 30 ms later, timeout 2 s",
            pw_idle,
            ArrMem::Heap,
            None,
            Some((2, 0)),
            false,
        ),
        (
            "no fds, null array, timeout 20 ms",
            pw_none,
            ArrMem::Null,
            None,
            ms20,
            false,
        ),
        (
            "a readable pipe at a page end, timeout 20 ms",
            pw_ready,
            ArrMem::PageEnd,
            None,
            ms20,
            false,
        ),
        (
            "an idle pipe at a page end, timeout 20 ms",
            pw_idle_quiet,
            ArrMem::PageEnd,
            None,
            ms20,
            false,
        ),
        (
            "an inaccessible array, timeout 20 ms",
            pw_ready,
            ArrMem::Bad,
            Some(1),
            ms20,
            false,
        ),
        (
            "nfds 2^40, timeout 20 ms",
            pw_ready,
            ArrMem::Heap,
            Some(1 << 40),
            ms20,
            false,
        ),
    ];
    for (name, make, mem, nfds, ts, mask) in cases {
        v.push(case(name, move |api| {
            do_ppoll(api, make, mem, nfds, ts, mask)
        }));
    }
    v.push(case("a readable pipe, inaccessible timeout", |api| {
        let w = pw_ready();
        let arr = poll_array(&w, ArrMem::Heap);
        let p = mut_ptr::<pollfd>(&arr);
        let bad = Buf::inaccessible();
        // SAFETY: one pollfd of ours; the timeout is inaccessible on
        // purpose (glibc copies it: it faults, in a child process).
        let (r, e) = call(|| unsafe { (api.ppoll)(p, 1, bad.cast(), ptr::null()) });
        poll_record(Record::new(r, e), &arr, &w)
    }));
    v
}
