//! `accept`, `accept4` and `connect`: listeners with and without a
//! pending connection (a [`Lst`]), and connections to listening and
//! closed ports, unix addresses and bad ones.

use std::mem;
use std::ptr;
use std::thread;
use std::time::Duration;

use libc::{c_int, sockaddr, socklen_t};

use crate::api::Api;
use crate::harness::{Case, Record, case, errno_name};
use crate::mem::Buf;
use crate::net::{
    addr_room, bound, connect_to, linger0, listener, local, nonblock, norm_addr, pipe, port_of, sa,
    sa_len, sin, sin6_loopback, socket, tcp_pair, timeo, unix_addr, unix_bound, unix_pair,
};
use crate::sys::{
    BOUND_MS, Fds, await_ready, call, closed_fd, drain, is_open, ok, raw_poll, raw_send, raw_write,
};

/// A listener for an accept case, and its client if it has one.
pub(crate) struct Lst {
    fds: Fds,
    fd: c_int,
    client: Option<c_int>,
    client_port: u16,
    late: Option<thread::JoinHandle<()>>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum LstKind {
    Pending,
    PendingUnix,
    NoneNonblocking,
    NoneTimeout,
    Late,
    PendingNonblocking,
    ResetPending,
    ShutDown,
    NotListening,
    Udp,
    UnixDgram,
    Connected,
    Pipe,
    Closed,
    Minus1,
}

pub(crate) fn make_lst(kind: LstKind) -> Lst {
    let mut f = Fds::default();
    let mut client = None;
    let mut late = None;
    let mut reset_port = 0;
    let fd = match kind {
        LstKind::Pending | LstKind::PendingNonblocking | LstKind::ResetPending => {
            let (l, a) = listener(&mut f);
            let c = socket(&mut f, libc::AF_INET, libc::SOCK_STREAM);
            connect_to(c, &a);
            await_ready(l, libc::POLLIN);
            if matches!(kind, LstKind::PendingNonblocking) {
                nonblock(l);
            }
            if matches!(kind, LstKind::ResetPending) {
                reset_port = port_of(&local(c));
                linger0(c);
                f.close(c);
                thread::sleep(Duration::from_millis(10));
                timeo(l, libc::SO_RCVTIMEO, BOUND_MS);
            } else {
                client = Some(c);
            }
            l
        }
        LstKind::PendingUnix => {
            let (l, a, len) = unix_bound(&mut f, true);
            let c = socket(&mut f, libc::AF_UNIX, libc::SOCK_STREAM);
            // SAFETY: a valid sockaddr_un of the length given.
            ok(unsafe { libc::connect(c, sa(&a), len) }, "connect unix");
            client = Some(c);
            l
        }
        LstKind::NoneNonblocking => {
            let (l, _) = listener(&mut f);
            nonblock(l);
            l
        }
        LstKind::NoneTimeout => {
            let (l, _) = listener(&mut f);
            timeo(l, libc::SO_RCVTIMEO, 30);
            l
        }
        LstKind::Late => {
            let (l, a) = listener(&mut f);
            let c = socket(&mut f, libc::AF_INET, libc::SOCK_STREAM);
            client = Some(c);
            // Bound before the thread connects, so its port is known.
            let any = sin([127, 0, 0, 1], 0);
            // SAFETY: a valid sockaddr_in of the size given.
            ok(
                unsafe { libc::bind(c, sa(&any), sa_len::<libc::sockaddr_in>()) },
                "bind",
            );
            late = Some(thread::spawn(move || {
                thread::sleep(Duration::from_millis(30));
                // SAFETY: a valid sockaddr_in of the size given.
                unsafe {
                    libc::syscall(libc::SYS_connect, c, sa(&a), sa_len::<libc::sockaddr_in>())
                };
            }));
            l
        }
        LstKind::ShutDown => {
            let (l, _) = listener(&mut f);
            // SAFETY: shutdown(2) reads no memory.
            unsafe { libc::shutdown(l, libc::SHUT_RDWR) };
            l
        }
        LstKind::NotListening => bound(&mut f, libc::SOCK_STREAM).0,
        LstKind::Udp => {
            // (A timeout bounds a hook that would wait for a connection.)
            let u = bound(&mut f, libc::SOCK_DGRAM).0;
            timeo(u, libc::SO_RCVTIMEO, BOUND_MS);
            u
        }
        LstKind::UnixDgram => {
            let u = unix_pair(&mut f, libc::SOCK_DGRAM).0;
            timeo(u, libc::SO_RCVTIMEO, BOUND_MS);
            u
        }
        LstKind::Connected => {
            let c = tcp_pair(&mut f).0;
            timeo(c, libc::SO_RCVTIMEO, BOUND_MS);
            c
        }
        LstKind::Pipe => pipe(&mut f).0,
        LstKind::Closed => closed_fd(),
        LstKind::Minus1 => -1,
    };
    let client_port = match (kind, client) {
        (LstKind::PendingUnix, _) => 0,
        (_, None) => reset_port,
        (_, Some(c)) => port_of(&local(c)),
    };
    Lst {
        fds: f,
        fd,
        client,
        client_port,
        late,
    }
}

/// How accept is given its address arguments.
#[derive(Clone, Copy, Debug)]
pub(crate) enum AcAddr {
    Full,
    Short,
    Zero,
    Null,
    Bad,
}

/// What a new fd is: its flags, and whether a byte written on it reaches
/// `client`; then closed.
pub(crate) fn describe_new_fd(fd: c_int, client: Option<c_int>) -> Vec<u8> {
    // SAFETY: fcntl with int arguments reads no memory.
    let (fl, fdfl) = unsafe {
        (
            libc::fcntl(fd, libc::F_GETFL),
            libc::fcntl(fd, libc::F_GETFD),
        )
    };
    let mut s = format!(
        "nonblock={} cloexec={}",
        fl & libc::O_NONBLOCK != 0,
        fdfl & libc::FD_CLOEXEC != 0
    );
    if let Some(c) = client {
        raw_write(fd, b"hi");
        s += &format!(
            " client_got={}",
            String::from_utf8_lossy(&drain(c, 1000, false))
        );
    }
    // SAFETY: the fd the call gave us.
    unsafe { libc::close(fd) };
    s.into_bytes()
}

pub(crate) fn do_accept(api: &Api, kind: LstKind, arg: AcAddr, flags: Option<c_int>) -> Record {
    let mut l = make_lst(kind);
    let initial: socklen_t = match arg {
        AcAddr::Short => 4,
        AcAddr::Zero => 0,
        _ => 128,
    };
    let (addr, alen) = addr_room(initial, matches!(arg, AcAddr::Bad));
    let (ap, lp) = match arg {
        AcAddr::Null => (ptr::null_mut(), ptr::null_mut()),
        _ => (addr.cast(), alen.cast()),
    };
    // SAFETY: our buffers, of the lengths given (or null, or inaccessible).
    let (r, e) = call(|| unsafe {
        match flags {
            None => (api.accept)(l.fd, ap, lp),
            Some(fl) => (api.accept4)(l.fd, ap, lp, fl),
        }
    });
    if let Some(t) = l.late.take() {
        t.join().unwrap();
    }
    let new = if r >= 0 {
        describe_new_fd(r, l.client)
    } else {
        Vec::new()
    };
    let rec = Record::new(if r >= 0 { 0 } else { r }, e)
        .out("new_fd", new)
        .out("addr", norm_addr(&addr.bytes(), l.client_port))
        .out("addrlen", alen.bytes())
        .flag(
            "still_pending",
            l.fd >= 0 && raw_poll(l.fd, libc::POLLIN, 0) & libc::POLLIN != 0,
        );
    drop(l.fds);
    rec
}

pub(crate) fn accept_kinds() -> Vec<(&'static str, LstKind)> {
    vec![
        ("a connection pending", LstKind::Pending),
        ("a unix connection pending", LstKind::PendingUnix),
        ("none pending, non-blocking", LstKind::NoneNonblocking),
        ("none pending, SO_RCVTIMEO 30 ms", LstKind::NoneTimeout),
        ("a connection 30 ms later", LstKind::Late),
        (
            "a connection pending, non-blocking",
            LstKind::PendingNonblocking,
        ),
        ("the pending connection reset", LstKind::ResetPending),
        ("listener shut down", LstKind::ShutDown),
        ("bound, not listening", LstKind::NotListening),
        ("udp socket, SO_RCVTIMEO 300 ms", LstKind::Udp),
        (
            "unix datagram socket, SO_RCVTIMEO 300 ms",
            LstKind::UnixDgram,
        ),
        (
            "connected tcp socket, SO_RCVTIMEO 300 ms",
            LstKind::Connected,
        ),
        ("pipe", LstKind::Pipe),
        ("closed fd", LstKind::Closed),
        ("fd -1", LstKind::Minus1),
    ]
}

pub(crate) fn accept_cases(accept4: bool) -> Vec<Case> {
    let flags = accept4.then_some(0);
    let mut v = Vec::new();
    for (name, kind) in accept_kinds() {
        v.push(case(name, move |api| {
            do_accept(api, kind, AcAddr::Full, flags)
        }));
    }
    for arg in [AcAddr::Short, AcAddr::Zero, AcAddr::Null, AcAddr::Bad] {
        v.push(case(
            format!("a connection pending, address {arg:?}"),
            move |api| do_accept(api, LstKind::Pending, arg, flags),
        ));
    }
    if accept4 {
        for (name, fl) in [
            ("SOCK_NONBLOCK", libc::SOCK_NONBLOCK),
            ("SOCK_CLOEXEC", libc::SOCK_CLOEXEC),
            (
                "SOCK_NONBLOCK|SOCK_CLOEXEC",
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            ),
            ("invalid flags 1", 1),
            ("invalid flags -1", -1),
        ] {
            v.push(case(format!("a connection pending, {name}"), move |api| {
                do_accept(api, LstKind::Pending, AcAddr::Full, Some(fl))
            }));
            v.push(case(
                format!("none pending, non-blocking, {name}"),
                move |api| do_accept(api, LstKind::NoneNonblocking, AcAddr::Full, Some(fl)),
            ));
            v.push(case(
                format!("none pending, SO_RCVTIMEO 30 ms, {name}"),
                move |api| do_accept(api, LstKind::NoneTimeout, AcAddr::Full, Some(fl)),
            ));
        }
    }
    v
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Conn {
    Listening,
    ListeningAny,
    ListeningSndtimeo,
    ClosedPort,
    NonblockingListening,
    AlreadyConnected,
    AddrLen3,
    Inet6OnInet,
    UnspecUnconnected,
    UnspecConnected,
    Udp,
    UdpUnspec,
    UnixMissing,
    UnixNotListening,
    UnixListening,
    Pipe,
    Closed,
    Minus1,
    BadAddr,
    NullAddr,
    ListenerItself,
    RefusedTwice,
}

pub(crate) fn do_connect(api: &Api, kind: Conn) -> Record {
    let mut f = Fds::default();
    let (l, la) = listener(&mut f);
    // A port nothing listens on (kept bound so nothing else takes it).
    let (_, closed) = bound(&mut f, libc::SOCK_STREAM);
    let (ub, uaddr, ulen) = unix_bound(&mut f, true);
    let (_, unl, unl_len) = unix_bound(&mut f, false);
    let (peer_udp, peer_udp_addr) = bound(&mut f, libc::SOCK_DGRAM);
    let mut target = sin([127, 0, 0, 1], port_of(&la));
    let fd: c_int;
    let (mut addr, mut len): (*const sockaddr, socklen_t) =
        (sa(&target), sa_len::<libc::sockaddr_in>());
    let tcp = |f: &mut Fds| socket(f, libc::AF_INET, libc::SOCK_STREAM);
    let six = sin6_loopback(port_of(&la));
    // SAFETY: all-zero is a valid sockaddr.
    let mut unspec: sockaddr = unsafe { mem::zeroed() };
    unspec.sa_family = libc::AF_UNSPEC as libc::sa_family_t;
    let (missing, missing_len) = unix_addr("fibra-hook-differential-nobody-listens-here");
    let bad = Buf::inaccessible();
    match kind {
        Conn::Listening => fd = tcp(&mut f),
        Conn::ListeningAny => {
            fd = tcp(&mut f);
            target = sin([0, 0, 0, 0], port_of(&la));
            addr = sa(&target);
        }
        Conn::ListeningSndtimeo => {
            fd = tcp(&mut f);
            timeo(fd, libc::SO_SNDTIMEO, 30);
        }
        Conn::ClosedPort | Conn::RefusedTwice => {
            fd = tcp(&mut f);
            target = closed;
            addr = sa(&target);
        }
        Conn::NonblockingListening => {
            fd = tcp(&mut f);
            nonblock(fd);
        }
        Conn::AlreadyConnected => {
            fd = tcp(&mut f);
            connect_to(fd, &la);
        }
        Conn::AddrLen3 => {
            fd = tcp(&mut f);
            len = 3;
        }
        Conn::Inet6OnInet => {
            fd = tcp(&mut f);
            addr = sa(&six);
            len = sa_len::<libc::sockaddr_in6>();
        }
        Conn::UnspecUnconnected => {
            fd = tcp(&mut f);
            addr = &unspec;
            len = sa_len::<sockaddr>();
        }
        Conn::UnspecConnected => {
            fd = tcp(&mut f);
            connect_to(fd, &la);
            addr = &unspec;
            len = sa_len::<sockaddr>();
        }
        Conn::Udp => {
            fd = bound(&mut f, libc::SOCK_DGRAM).0;
            target = peer_udp_addr;
            addr = sa(&target);
        }
        Conn::UdpUnspec => {
            fd = bound(&mut f, libc::SOCK_DGRAM).0;
            connect_to(fd, &peer_udp_addr);
            addr = &unspec;
            len = sa_len::<sockaddr>();
        }
        Conn::UnixMissing => {
            fd = socket(&mut f, libc::AF_UNIX, libc::SOCK_STREAM);
            addr = sa(&missing);
            len = missing_len;
        }
        Conn::UnixNotListening => {
            fd = socket(&mut f, libc::AF_UNIX, libc::SOCK_STREAM);
            addr = sa(&unl);
            len = unl_len;
        }
        Conn::UnixListening => {
            fd = socket(&mut f, libc::AF_UNIX, libc::SOCK_STREAM);
            addr = sa(&uaddr);
            len = ulen;
        }
        Conn::Pipe => fd = pipe(&mut f).0,
        Conn::Closed => fd = closed_fd(),
        Conn::Minus1 => fd = -1,
        Conn::BadAddr => {
            fd = tcp(&mut f);
            addr = bad.cast();
        }
        Conn::NullAddr => {
            fd = tcp(&mut f);
            addr = ptr::null();
            len = 0;
        }
        Conn::ListenerItself => fd = l,
    }
    if matches!(kind, Conn::RefusedTwice) {
        // SAFETY: a valid address of the length given.
        unsafe { (api.connect)(fd, addr, len) };
    }
    // SAFETY: a valid address of the length given (or null, or
    // inaccessible: the kernel says so).
    let (r, e) = call(|| unsafe { (api.connect)(fd, addr, len) });
    let mut rec = Record::new(r, e);
    // What it did: the listener's queue, the socket's error and peer.
    let accepted = |lfd: c_int| {
        // (The listeners are blocking: only take what is there.)
        if raw_poll(lfd, libc::POLLIN, 0) & libc::POLLIN == 0 {
            return false;
        }
        // SAFETY: no address wanted.
        let n = unsafe {
            libc::syscall(
                libc::SYS_accept4,
                lfd,
                0,
                0,
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        };
        if n >= 0 {
            // SAFETY: the fd just accepted.
            unsafe { libc::close(n as c_int) };
        }
        n >= 0
    };
    if matches!(kind, Conn::NonblockingListening) {
        await_ready(fd, libc::POLLOUT);
    }
    rec = rec
        .flag("tcp_listener_accepted", accepted(l))
        .flag("unix_listener_accepted", accepted(ub));
    if fd >= 0 && is_open(fd) {
        let mut err: c_int = 0;
        let mut elen = size_of::<c_int>() as socklen_t;
        // SAFETY: an int and its length.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&raw mut err).cast(),
                &mut elen,
            )
        };
        let mut peer = Buf::new(128);
        let mut plen: socklen_t = 128;
        // SAFETY: our buffer and its length.
        let pr = unsafe { libc::getpeername(fd, peer.cast(), &mut plen) };
        if pr < 0 {
            peer = Buf::new(0);
        }
        let peer_port = if matches!(kind, Conn::Udp) {
            port_of(&peer_udp_addr)
        } else {
            port_of(&la)
        };
        rec = rec
            .int(
                "so_error",
                if r == 0 { errno_name(err) } else { "-".into() },
            )
            .out("peername", norm_addr(peer.data(), peer_port));
    }
    if matches!(kind, Conn::Udp) {
        raw_send(fd, b"after connect", 0);
        rec = rec.peer(drain(peer_udp, 1000, true));
    }
    drop(bad);
    rec
}

pub(crate) fn connect_cases() -> Vec<Case> {
    [
        ("a listening loopback port", Conn::Listening),
        ("a listening port at 0.0.0.0", Conn::ListeningAny),
        (
            "a listening port, SO_SNDTIMEO 30 ms",
            Conn::ListeningSndtimeo,
        ),
        ("a closed loopback port", Conn::ClosedPort),
        ("a closed loopback port, twice", Conn::RefusedTwice),
        ("non-blocking, a listening port", Conn::NonblockingListening),
        ("already connected", Conn::AlreadyConnected),
        ("address length 3", Conn::AddrLen3),
        (
            "an AF_INET6 address on an AF_INET socket",
            Conn::Inet6OnInet,
        ),
        ("AF_UNSPEC, unconnected", Conn::UnspecUnconnected),
        ("AF_UNSPEC, connected", Conn::UnspecConnected),
        ("udp, a loopback peer", Conn::Udp),
        ("udp, AF_UNSPEC", Conn::UdpUnspec),
        ("unix, nobody at the address", Conn::UnixMissing),
        ("unix, bound but not listening", Conn::UnixNotListening),
        ("unix, listening", Conn::UnixListening),
        ("pipe", Conn::Pipe),
        ("closed fd", Conn::Closed),
        ("fd -1", Conn::Minus1),
        ("inaccessible address", Conn::BadAddr),
        ("null address", Conn::NullAddr),
        ("a listening socket", Conn::ListenerItself),
    ]
    .into_iter()
    .map(|(name, kind)| case(name, move |api| do_connect(api, kind)))
    .collect()
}
