//! `close`, `dup2` and `dup3`: pipes, sockets (one a fiber waited on: a
//! new socket at its number, or a pipe dup'ed onto it, must work as
//! itself), files, epoll fds, closed, negative and huge fds.

use libc::{c_int, socklen_t, timeval};

use crate::api::Api;
use crate::harness::{Case, Record, case, errno_name};
use crate::net::{dup_at, epoll_with, file, pipe, tcp_pair, timeo};
use crate::sys::{Fds, await_ready, call, closed_fd, drain, is_open, later, raw_write};

/// Fd numbers the fd cases use as targets (free in a child process).
pub(crate) const AT_NEW: c_int = 1500;
pub(crate) const AT_SOCK: c_int = 1501;

/// A TCP pair whose client is at [`AT_SOCK`], after a `recv` that found
/// nothing for 20 ms (in a fiber it parked: the socket is registered with
/// the runtime's reactor).
pub(crate) fn waited_on_socket(api: &Api, f: &mut Fds) -> (c_int, c_int) {
    let (c, s) = tcp_pair(f);
    let c2 = dup_at(f, c, AT_SOCK);
    f.close(c);
    timeo(c2, libc::SO_RCVTIMEO, 20);
    let mut b = [0u8; 8];
    // SAFETY: our buffer.
    let r = unsafe { (api.recv)(c2, b.as_mut_ptr().cast(), b.len(), 0) };
    assert_eq!(r, -1);
    timeo(c2, libc::SO_RCVTIMEO, 0);
    (c2, s)
}

/// After the call: a recv (of the same place) on `fd`, whose data comes
/// 30 ms later from `writer`.
pub(crate) fn recv_late(api: &Api, fd: c_int, writer: c_int, data: &'static [u8]) -> Vec<u8> {
    // A bound on the wait, for a socket (a pipe has none: its data comes).
    let tv = timeval {
        tv_sec: 2,
        tv_usec: 0,
    };
    // SAFETY: a valid timeval of the size given (ENOTSOCK for a pipe).
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&raw const tv).cast(),
            size_of::<timeval>() as socklen_t,
        )
    };
    let t = later(writer, data, 30);
    let mut b = [0u8; 64];
    // SAFETY: our buffer.
    let (r, e) = call(|| unsafe { (api.read)(fd, b.as_mut_ptr().cast(), b.len()) });
    t.join().unwrap();
    if r < 0 {
        format!("read failed: {}", errno_name(e)).into_bytes()
    } else {
        b[..r as usize].to_vec()
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum CloseKind {
    Pipe,
    WaitedOnSocket,
    TcpUnread,
    TcpClean,
    File,
    Epoll,
    Twice,
    Closed,
    Minus1,
    Huge,
}

/// What a close case does after its call, and records.
pub(crate) type AfterClose = Box<dyn FnOnce(&mut Fds) -> Vec<u8>>;

pub(crate) fn do_close(api: &Api, kind: CloseKind) -> Record {
    let mut f = Fds::default();
    let mut peer = None;
    let mut after: Option<AfterClose> = None;
    let fd = match kind {
        CloseKind::Pipe => pipe(&mut f).0,
        CloseKind::WaitedOnSocket => {
            let (c, _) = waited_on_socket(api, &mut f);
            let api = *api;
            after = Some(Box::new(move |f: &mut Fds| {
                // A new socket at the same number, data 30 ms late.
                let (c2, s2) = tcp_pair(f);
                let c3 = dup_at(f, c2, AT_SOCK);
                f.close(c2);
                recv_late(&api, c3, s2, b"the new socket's data")
            }));
            c
        }
        CloseKind::TcpUnread | CloseKind::TcpClean => {
            let (c, s) = tcp_pair(&mut f);
            if matches!(kind, CloseKind::TcpUnread) {
                raw_write(s, b"unread");
                await_ready(c, libc::POLLIN);
            }
            peer = Some(s);
            c
        }
        CloseKind::File => file(&mut f, b"x"),
        CloseKind::Epoll => epoll_with(&mut f, &[]),
        CloseKind::Twice => {
            let (r, _) = pipe(&mut f);
            f.forget(r);
            // SAFETY: our fd.
            unsafe { (api.close)(r) };
            r
        }
        CloseKind::Closed => closed_fd(),
        CloseKind::Minus1 => -1,
        CloseKind::Huge => 1 << 30,
    };
    f.forget(fd);
    // SAFETY: close(2) reads no memory.
    let (r, e) = call(|| unsafe { (api.close)(fd) });
    let mut rec = Record::new(r, e).flag("open_after", fd >= 0 && is_open(fd));
    if let Some(s) = peer {
        rec = rec.peer(drain(s, 1000, false));
    }
    if let Some(a) = after {
        rec = rec.out("afterwards", a(&mut f));
    }
    rec
}

pub(crate) fn close_cases() -> Vec<Case> {
    [
        ("a pipe", CloseKind::Pipe),
        (
            "a socket a recv waited on, then a new one at its number",
            CloseKind::WaitedOnSocket,
        ),
        ("tcp with unread data (resets)", CloseKind::TcpUnread),
        ("tcp", CloseKind::TcpClean),
        ("a regular file", CloseKind::File),
        ("an epoll fd", CloseKind::Epoll),
        ("twice", CloseKind::Twice),
        ("a closed fd", CloseKind::Closed),
        ("fd -1", CloseKind::Minus1),
        ("fd 2^30", CloseKind::Huge),
    ]
    .into_iter()
    .map(|(name, kind)| case(name, move |api| do_close(api, kind)))
    .collect()
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum DupKind {
    /// A pipe's read end onto a free number.
    Free,
    /// A pipe's read end onto an open socket a recv waited on.
    OntoWaitedSocket,
    /// A pipe's read end onto an open pipe.
    OntoPipe,
    /// An fd onto itself.
    Itself,
    /// A closed fd onto itself.
    ClosedItself,
    /// A socket a recv waited on, onto itself; then waited on again.
    WaitedItself,
    /// A closed fd onto a free number.
    ClosedOld,
    /// Onto -1.
    NewMinus1,
    /// Onto 2^30.
    NewHuge,
    /// -1 onto a free number.
    OldMinus1,
}

pub(crate) fn do_dup(api: &Api, kind: DupKind, flags: Option<c_int>) -> Record {
    let mut f = Fds::default();
    let (r, w) = pipe(&mut f);
    raw_write(w, b"through the pipe");
    assert!(!is_open(AT_NEW));
    let mut socket_peer = None;
    let (old, new) = match kind {
        DupKind::Free => (r, AT_NEW),
        DupKind::OntoWaitedSocket => {
            let (c, s) = waited_on_socket(api, &mut f);
            f.forget(c);
            socket_peer = Some(s);
            (r, c)
        }
        DupKind::OntoPipe => {
            let (r2, _) = pipe(&mut f);
            let n = dup_at(&mut f, r2, AT_NEW);
            f.forget(n);
            (r, n)
        }
        DupKind::Itself => (r, r),
        DupKind::ClosedItself => (closed_fd(), closed_fd()),
        DupKind::WaitedItself => {
            let (c, s) = waited_on_socket(api, &mut f);
            socket_peer = Some(s);
            (c, c)
        }
        DupKind::ClosedOld => (closed_fd(), AT_NEW),
        DupKind::NewMinus1 => (r, -1),
        DupKind::NewHuge => (r, 1 << 30),
        DupKind::OldMinus1 => (-1, AT_NEW),
    };
    // SAFETY: dup2(2) and dup3(2) read no memory.
    let (ret, e) = call(|| unsafe {
        match flags {
            None => (api.dup2)(old, new),
            Some(fl) => (api.dup3)(old, new, fl),
        }
    });
    // The fd numbers differ between places: named by what they are.
    let named = if ret >= 0 && ret == new {
        "new".to_string()
    } else if ret >= 0 && ret == old {
        "old".to_string()
    } else {
        ret.to_string()
    };
    let mut rec = Record::new(ret.min(0), e).int("returned", named);
    if ret >= 0 {
        // SAFETY: F_GETFD reads no memory.
        let cloexec = unsafe { libc::fcntl(ret, libc::F_GETFD) } & libc::FD_CLOEXEC != 0;
        rec = rec.flag("cloexec", cloexec);
        if ret != old && ret != r {
            f.keep(ret);
        }
        let read_from = match kind {
            // Still the socket: a recv on it waits for its peer's data.
            DupKind::WaitedItself => {
                recv_late(api, ret, socket_peer.unwrap(), b"the socket's data")
            }
            // Now the pipe: a read on it, its data 30 ms late.
            _ => {
                drain(r, 0, false);
                recv_late(api, ret, w, b"late pipe data")
            }
        };
        rec = rec.out("read_from_new", read_from);
    }
    rec.flag("new_open_after", new >= 0 && is_open(new))
}

pub(crate) fn dup_cases(dup3: bool) -> Vec<Case> {
    let flags = dup3.then_some(0);
    let mut v: Vec<Case> = [
        ("a pipe onto a free number", DupKind::Free),
        (
            "a pipe onto a socket a recv waited on",
            DupKind::OntoWaitedSocket,
        ),
        ("a pipe onto an open pipe", DupKind::OntoPipe),
        ("an fd onto itself", DupKind::Itself),
        ("a closed fd onto itself", DupKind::ClosedItself),
        (
            "a socket a recv waited on, onto itself, then waited on",
            DupKind::WaitedItself,
        ),
        ("a closed fd onto a free number", DupKind::ClosedOld),
        ("onto -1", DupKind::NewMinus1),
        ("onto 2^30", DupKind::NewHuge),
        ("-1 onto a free number", DupKind::OldMinus1),
    ]
    .into_iter()
    .map(|(name, kind)| case(name, move |api| do_dup(api, kind, flags)))
    .collect();
    if dup3 {
        for (name, kind, fl) in [
            (
                "a pipe onto a free number, O_CLOEXEC",
                DupKind::Free,
                libc::O_CLOEXEC,
            ),
            (
                "a pipe onto a socket a recv waited on, O_CLOEXEC",
                DupKind::OntoWaitedSocket,
                libc::O_CLOEXEC,
            ),
            ("a pipe onto a free number, flags 1", DupKind::Free, 1),
            (
                "a pipe onto a free number, O_NONBLOCK",
                DupKind::Free,
                libc::O_NONBLOCK,
            ),
        ] {
            v.push(case(name, move |api| do_dup(api, kind, Some(fl))));
        }
    }
    v
}
