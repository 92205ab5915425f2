//! The send calls: `send`, `sendto` and `sendmsg`, each on every
//! destination of `writes.rs`, with the flags, addresses and control
//! messages of its own.

use std::mem;
use std::ptr;
use std::time::Instant;

use libc::{c_int, c_void, iovec, msghdr, sockaddr, socklen_t};

use crate::api::Api;
use crate::harness::{Case, Record, case, errno_name};
use crate::mem::Buf;
use crate::net::{pipe, port_of, sa, sa_len, scrub_rights, sin, sin6_loopback};
use crate::sys::{Fds, PROMPT_MS, call, elapsed_ms, errno, raw_poll, raw_write};
use crate::writes::{
    Dst, MakeDst, Payload, Peer, d_full_blocking, d_full_drained, d_full_timeo, d_pipe, d_tcp,
    d_tcp_big, d_tcp_reset, d_tcp_shut_wr, d_udp, d_udp_third, d_udp_unconnected, d_unix_stream,
    intact, split_iov, write_sinks,
};

pub(crate) fn do_send(api: &Api, dst: Dst, p: Payload, flags: c_int) -> Record {
    let (buf, n) = p.buf();
    let t = Instant::now();
    // SAFETY: `buf` is valid for `n` bytes (or inaccessible: EFAULT).
    let (r, e) = call(|| unsafe { (api.send)(dst.fd, buf.cast(), n, flags) });
    let mut rec = Record::new(r, e).flag("input_intact", intact(&buf, p));
    if flags & libc::MSG_DONTWAIT != 0 {
        rec = rec.flag("returned_without_waiting", elapsed_ms(t) < PROMPT_MS);
    }
    dst.finish(rec)
}

/// How sendto is given its address.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ToArg {
    /// None (null, 0).
    Null,
    /// The destination's address.
    Dest,
    /// The destination's address, length 3.
    Short,
    /// An AF_INET6 address (loopback, the destination's port).
    Inet6,
    /// Null, length 16.
    NullLen16,
    /// An inaccessible address.
    Bad,
}

pub(crate) fn do_sendto(api: &Api, dst: Dst, p: Payload, flags: c_int, to: ToArg) -> Record {
    let (buf, n) = p.buf();
    let dest = dst.to.unwrap_or_else(|| sin([127, 0, 0, 1], 9));
    let six = sin6_loopback(port_of(&dest));
    let bad = Buf::inaccessible();
    let (ap, alen): (*const sockaddr, socklen_t) = match to {
        ToArg::Null => (ptr::null(), 0),
        ToArg::Dest => (sa(&dest), sa_len::<libc::sockaddr_in>()),
        ToArg::Short => (sa(&dest), 3),
        ToArg::Inet6 => (sa(&six), sa_len::<libc::sockaddr_in6>()),
        ToArg::NullLen16 => (ptr::null(), 16),
        ToArg::Bad => (bad.cast(), 16),
    };
    // SAFETY: our buffer and address, of the lengths given.
    let (r, e) = call(|| unsafe { (api.sendto)(dst.fd, buf.cast(), n, flags, ap, alen) });
    let rec = Record::new(r, e).flag("input_intact", intact(&buf, p));
    dst.finish(rec)
}

/// The arguments of a sendmsg.
#[derive(Clone, Copy, Debug)]
pub(crate) enum SendArg {
    /// The payload in three iovecs (one empty), no address or control.
    Plain,
    /// As `Plain`, with the destination's address.
    Named,
    /// msg_iovlen 0.
    NoIov,
    /// msg_iovlen 1025.
    ManyIov,
    /// A pipe's read end (holding "in the pipe") in SCM_RIGHTS.
    Rights,
    /// A control message whose length runs past the control buffer.
    BadControl,
    /// A null msghdr.
    Null,
}

pub(crate) fn do_sendmsg(api: &Api, dst: Dst, p: Payload, flags: c_int, arg: SendArg) -> Record {
    let mut fds = Fds::default();
    let (buf, n) = p.buf();
    let count = if matches!(arg, SendArg::ManyIov) {
        1025
    } else {
        0
    };
    let mut iov = split_iov(&buf, n, count);
    let dest = dst.to.unwrap_or_else(|| sin([127, 0, 0, 1], 9));
    let control = Buf::zeroed(64);
    // SAFETY: all-zero is a valid msghdr.
    let mut m: msghdr = unsafe { mem::zeroed() };
    m.msg_iov = iov.as_mut_ptr();
    m.msg_iovlen = iov.len();
    m.msg_flags = 0x5a5a; // ignored by sendmsg
    match arg {
        SendArg::Named => {
            m.msg_name = (&raw const dest) as *mut c_void;
            m.msg_namelen = sa_len::<libc::sockaddr_in>();
        }
        SendArg::NoIov => m.msg_iovlen = 0,
        SendArg::Rights | SendArg::BadControl => {
            let (r, w) = pipe(&mut fds);
            raw_write(w, b"in the pipe");
            let hdr = libc::cmsghdr {
                cmsg_len: if matches!(arg, SendArg::Rights) {
                    // SAFETY: CMSG_LEN computes a size.
                    unsafe { libc::CMSG_LEN(size_of::<c_int>() as u32) as usize }
                } else {
                    200
                },
                cmsg_level: libc::SOL_SOCKET,
                cmsg_type: libc::SCM_RIGHTS,
            };
            control.put(0, hdr);
            control.put(size_of::<libc::cmsghdr>(), r);
            m.msg_control = control.cast();
            // SAFETY: CMSG_SPACE computes a size.
            m.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<c_int>() as u32) } as usize;
        }
        _ => {}
    }
    let msg = Buf::of(&m);
    let mp = if matches!(arg, SendArg::Null) {
        ptr::null()
    } else {
        msg.cast::<msghdr>().cast_const()
    };
    // SAFETY: a msghdr pointing to our buffers, of the lengths it says.
    let (r, e) = call(|| unsafe { (api.sendmsg)(dst.fd, mp, flags) });
    let rec = Record::new(r, e)
        .flag("input_intact", intact(&buf, p))
        .flag("msghdr_intact", msg.data() == Buf::of(&m).data());
    // The peer of a passed fd: what came with it.
    let rec = if matches!(arg, SendArg::Rights)
        && let Peer::Stream(peer) = dst.peer
    {
        let got = recv_rights(peer);
        let rec = rec.out("peer_rights", got);
        Dst {
            peer: Peer::Nothing,
            ..dst
        }
        .finish(rec)
    } else {
        dst.finish(rec)
    };
    drop(fds);
    rec
}

/// Receives (raw) what a sendmsg with SCM_RIGHTS sent to `fd`: the data,
/// and what the fd that came holds.
pub(crate) fn recv_rights(fd: c_int) -> Vec<u8> {
    if raw_poll(fd, libc::POLLIN, 1000) == 0 {
        return b"nothing came".to_vec();
    }
    let mut data = [0u8; 64];
    let mut iov = iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    let control = Buf::zeroed(64);
    // SAFETY: all-zero is a valid msghdr.
    let mut m: msghdr = unsafe { mem::zeroed() };
    m.msg_iov = &mut iov;
    m.msg_iovlen = 1;
    m.msg_control = control.cast();
    m.msg_controllen = 64;
    // SAFETY: a msghdr over our buffers.
    let n = unsafe {
        libc::syscall(
            libc::SYS_recvmsg,
            fd,
            &mut m as *mut msghdr,
            libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        return format!("recvmsg: {}", errno_name(errno())).into_bytes();
    }
    let mut out = data[..n as usize].to_vec();
    let mut cbytes = control.bytes();
    out.extend(b" + ");
    out.extend(scrub_rights(&control, m.msg_controllen, &mut cbytes));
    out
}

pub(crate) fn send_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for (name, make) in write_sinks() {
        v.push(case(name, move |api| {
            do_send(api, make(), Payload::Data, 0)
        }));
    }
    let flagged: Vec<(&str, MakeDst, Payload, c_int)> = vec![
        ("tcp, length 0", d_tcp, Payload::Len(0), 0),
        ("tcp, length 1", d_tcp, Payload::Len(1), 0),
        ("tcp, inaccessible buffer", d_tcp, Payload::Bad, 0),
        ("tcp, 8 MiB, the peer reading", d_tcp_big, Payload::Big, 0),
        (
            "tcp, MSG_DONTWAIT",
            d_tcp,
            Payload::Data,
            libc::MSG_DONTWAIT,
        ),
        (
            "unix stream, full, blocking, MSG_DONTWAIT",
            d_full_blocking,
            Payload::Data,
            libc::MSG_DONTWAIT,
        ),
        (
            "unix stream, full, drained 30 ms later, MSG_NOSIGNAL",
            d_full_drained,
            Payload::Data,
            libc::MSG_NOSIGNAL,
        ),
        (
            "tcp, own side shut down writing, MSG_NOSIGNAL",
            d_tcp_shut_wr,
            Payload::Data,
            libc::MSG_NOSIGNAL,
        ),
        (
            "tcp, peer reset, MSG_NOSIGNAL",
            d_tcp_reset,
            Payload::Data,
            libc::MSG_NOSIGNAL,
        ),
        ("tcp, MSG_OOB", d_tcp, Payload::Data, libc::MSG_OOB),
        (
            "udp connected, MSG_OOB",
            d_udp,
            Payload::Data,
            libc::MSG_OOB,
        ),
        ("tcp, MSG_EOR", d_tcp, Payload::Data, libc::MSG_EOR),
        (
            "udp connected, MSG_CONFIRM",
            d_udp,
            Payload::Data,
            libc::MSG_CONFIRM,
        ),
        (
            "udp connected, MSG_MORE",
            d_udp,
            Payload::Data,
            libc::MSG_MORE,
        ),
        (
            "tcp, MSG_WAITALL (no meaning for send)",
            d_tcp,
            Payload::Data,
            libc::MSG_WAITALL,
        ),
        (
            "tcp, MSG_ZEROCOPY without SO_ZEROCOPY",
            d_tcp,
            Payload::Data,
            libc::MSG_ZEROCOPY,
        ),
        ("udp connected, 8 MiB (too long)", d_udp, Payload::Big, 0),
    ];
    for (name, make, p, flags) in flagged {
        v.push(case(name, move |api| do_send(api, make(), p, flags)));
    }
    v
}

pub(crate) fn sendto_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for (name, make) in write_sinks() {
        v.push(case(name, move |api| {
            do_sendto(api, make(), Payload::Data, 0, ToArg::Null)
        }));
    }
    let cases: Vec<(&str, MakeDst, Payload, c_int, ToArg)> = vec![
        (
            "udp unconnected, to the peer",
            d_udp_unconnected,
            Payload::Data,
            0,
            ToArg::Dest,
        ),
        (
            "udp unconnected, length 0, to the peer",
            d_udp_unconnected,
            Payload::Len(0),
            0,
            ToArg::Dest,
        ),
        (
            "udp unconnected, address length 3",
            d_udp_unconnected,
            Payload::Data,
            0,
            ToArg::Short,
        ),
        (
            "udp unconnected, an AF_INET6 address",
            d_udp_unconnected,
            Payload::Data,
            0,
            ToArg::Inet6,
        ),
        (
            "udp unconnected, null address of length 16",
            d_udp_unconnected,
            Payload::Data,
            0,
            ToArg::NullLen16,
        ),
        (
            "udp unconnected, inaccessible address",
            d_udp_unconnected,
            Payload::Data,
            0,
            ToArg::Bad,
        ),
        (
            "udp unconnected, MSG_DONTWAIT, to the peer",
            d_udp_unconnected,
            Payload::Data,
            libc::MSG_DONTWAIT,
            ToArg::Dest,
        ),
        (
            "udp connected, to a third socket",
            d_udp_third,
            Payload::Data,
            0,
            ToArg::Dest,
        ),
        ("tcp, with an address", d_tcp, Payload::Data, 0, ToArg::Dest),
        (
            "tcp, 8 MiB, the peer reading",
            d_tcp_big,
            Payload::Big,
            0,
            ToArg::Null,
        ),
        (
            "unix stream, full, blocking, MSG_DONTWAIT",
            d_full_blocking,
            Payload::Data,
            libc::MSG_DONTWAIT,
            ToArg::Null,
        ),
        (
            "unix stream, full, SO_SNDTIMEO 30 ms, with an address",
            d_full_timeo,
            Payload::Data,
            0,
            ToArg::Dest,
        ),
        (
            "tcp, own side shut down writing, MSG_NOSIGNAL",
            d_tcp_shut_wr,
            Payload::Data,
            libc::MSG_NOSIGNAL,
            ToArg::Null,
        ),
        (
            "pipe, with an address",
            d_pipe,
            Payload::Data,
            0,
            ToArg::Dest,
        ),
    ];
    for (name, make, p, flags, to) in cases {
        v.push(case(name, move |api| do_sendto(api, make(), p, flags, to)));
    }
    v
}

pub(crate) fn sendmsg_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for (name, make) in write_sinks() {
        v.push(case(name, move |api| {
            do_sendmsg(api, make(), Payload::Data, 0, SendArg::Plain)
        }));
    }
    let cases: Vec<(&str, MakeDst, Payload, c_int, SendArg)> = vec![
        (
            "udp unconnected, to the peer",
            d_udp_unconnected,
            Payload::Data,
            0,
            SendArg::Named,
        ),
        (
            "udp connected, to a third socket",
            d_udp_third,
            Payload::Data,
            0,
            SendArg::Named,
        ),
        ("tcp, no iovecs", d_tcp, Payload::Data, 0, SendArg::NoIov),
        (
            "tcp, 1025 iovecs",
            d_tcp,
            Payload::Data,
            0,
            SendArg::ManyIov,
        ),
        (
            "udp connected, 1025 iovecs",
            d_udp,
            Payload::Data,
            0,
            SendArg::ManyIov,
        ),
        (
            "unix stream, an fd passed",
            d_unix_stream,
            Payload::Data,
            0,
            SendArg::Rights,
        ),
        (
            "unix stream, a control message too long",
            d_unix_stream,
            Payload::Data,
            0,
            SendArg::BadControl,
        ),
        ("tcp, null msghdr", d_tcp, Payload::Data, 0, SendArg::Null),
        (
            "tcp, inaccessible buffer",
            d_tcp,
            Payload::Bad,
            0,
            SendArg::Plain,
        ),
        (
            "tcp, 8 MiB, the peer reading",
            d_tcp_big,
            Payload::Big,
            0,
            SendArg::Plain,
        ),
        (
            "unix stream, full, blocking, MSG_DONTWAIT",
            d_full_blocking,
            Payload::Data,
            libc::MSG_DONTWAIT,
            SendArg::Plain,
        ),
        (
            "tcp, own side shut down writing, MSG_NOSIGNAL",
            d_tcp_shut_wr,
            Payload::Data,
            libc::MSG_NOSIGNAL,
            SendArg::Plain,
        ),
        (
            "tcp, MSG_OOB",
            d_tcp,
            Payload::Data,
            libc::MSG_OOB,
            SendArg::Plain,
        ),
        (
            "udp connected, MSG_OOB",
            d_udp,
            Payload::Data,
            libc::MSG_OOB,
            SendArg::Plain,
        ),
    ];
    for (name, make, p, flags, arg) in cases {
        v.push(case(name, move |api| {
            do_sendmsg(api, make(), p, flags, arg)
        }));
    }
    v
}
