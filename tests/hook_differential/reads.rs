//! The read side of the data calls: `read`, `readv`, `recv` and
//! `recvfrom` (`recvmsg` is in `recvmsg.rs`), each on every source of
//! `sources.rs` and with the arguments and flags of its own.

use std::ptr;
use std::time::Instant;

use libc::{c_int, iovec, socklen_t};

use crate::api::Api;
use crate::harness::{Case, Record, case};
use crate::mem::Buf;
use crate::net::{addr_room, norm_addr};
use crate::sources::{
    MakeSrc, Src, read_sources, s_file, s_pipe, s_tcp_data, s_tcp_data_bound, s_tcp_data_eof,
    s_tcp_empty_bound, s_tcp_nonblock, s_tcp_oob, s_tcp_part_eof_timeo, s_tcp_part_timeo,
    s_tcp_timeo, s_tcp_two_late, s_udp, s_udp_errqueue, s_unix_dgram, s_unix_seqpacket,
    s_unix_stream,
};
use crate::sys::{PROMPT_MS, call, elapsed_ms};

/// A buffer of `len` bytes, or (`None`) an inaccessible one of 16.
pub(crate) fn out_buf(len: Option<usize>) -> (Buf, usize) {
    match len {
        Some(n) => (Buf::new(n), n),
        None => (Buf::inaccessible(), 16),
    }
}

/// Buffers of `lens` bytes (each followed by canary bytes), and iovecs
/// over them.
pub(crate) fn iov_bufs(lens: &[usize]) -> (Vec<Buf>, Vec<iovec>) {
    let bufs: Vec<Buf> = lens.iter().map(|&n| Buf::new(n)).collect();
    let iov = bufs
        .iter()
        .map(|b| iovec {
            iov_base: b.cast(),
            iov_len: b.len,
        })
        .collect();
    (bufs, iov)
}

/// Each of `bufs` (and its canary bytes) as `iov0`, `iov1`, ...
pub(crate) fn record_iov_bufs(mut rec: Record, bufs: &[Buf]) -> Record {
    for (i, b) in bufs.iter().enumerate() {
        rec = rec.out(&format!("iov{i}"), b.bytes());
    }
    rec
}

pub(crate) fn do_read(api: &Api, src: Src, len: Option<usize>) -> Record {
    let (buf, n) = out_buf(len);
    // SAFETY: `buf` is valid for `n` bytes (or inaccessible: EFAULT).
    let (r, e) = call(|| unsafe { (api.read)(src.fd, buf.cast(), n) });
    src.finish(Record::new(r, e).out("buf", buf.bytes()))
}

/// readv into buffers of `parts` bytes; `cnt` iovecs passed (`None`: all;
/// beyond `parts` the iovecs are empty); `null`: the iovec array is null.
pub(crate) fn do_readv(
    api: &Api,
    src: Src,
    parts: &[usize],
    cnt: Option<c_int>,
    null: bool,
) -> Record {
    let (bufs, mut iov) = iov_bufs(parts);
    let cnt = cnt.unwrap_or(iov.len() as c_int);
    iov.resize(
        (cnt.max(0) as usize).max(iov.len()),
        iovec {
            iov_base: ptr::null_mut(),
            iov_len: 0,
        },
    );
    let before: Vec<(usize, usize)> = iov
        .iter()
        .map(|v| (v.iov_base as usize, v.iov_len))
        .collect();
    let iovp = if null { ptr::null() } else { iov.as_ptr() };
    // SAFETY: the iovecs point to our buffers (or are empty).
    let (r, e) = call(|| unsafe { (api.readv)(src.fd, iovp, cnt) });
    let rec = record_iov_bufs(Record::new(r, e), &bufs);
    let after: Vec<(usize, usize)> = iov
        .iter()
        .map(|v| (v.iov_base as usize, v.iov_len))
        .collect();
    src.finish(rec.flag("iovecs_intact", before == after))
}

pub(crate) fn do_recv(
    api: &Api,
    src: Src,
    len: Option<usize>,
    flags: c_int,
    prompt: bool,
) -> Record {
    let (buf, n) = out_buf(len);
    let t = Instant::now();
    // SAFETY: `buf` is valid for `n` bytes (or inaccessible: EFAULT).
    let (r, e) = call(|| unsafe { (api.recv)(src.fd, buf.cast(), n, flags) });
    let mut rec = Record::new(r, e).out("buf", buf.bytes());
    if prompt {
        rec = rec.flag("returned_without_waiting", elapsed_ms(t) < PROMPT_MS);
    }
    src.finish(rec)
}

/// How recvfrom is given its address arguments.
#[derive(Clone, Copy, Debug)]
pub(crate) enum AddrArg {
    /// 128 bytes, length 128.
    Full,
    /// Length 4: the address is cut.
    Short,
    /// Length 0.
    Zero,
    /// No address, a length.
    NullAddr,
    /// An address, no length.
    NullLen,
    /// Neither.
    Neither,
}

pub(crate) fn do_recvfrom(api: &Api, src: Src, len: usize, flags: c_int, arg: AddrArg) -> Record {
    let buf = Buf::new(len);
    let initial: socklen_t = match arg {
        AddrArg::Short => 4,
        AddrArg::Zero => 0,
        _ => 128,
    };
    let (addr, alen) = addr_room(initial, false);
    let ap = match arg {
        AddrArg::NullAddr | AddrArg::Neither => ptr::null_mut(),
        _ => addr.cast(),
    };
    let lp = match arg {
        AddrArg::NullLen | AddrArg::Neither => ptr::null_mut(),
        _ => alen.cast(),
    };
    // SAFETY: our buffers, of the lengths given.
    let (r, e) = call(|| unsafe { (api.recvfrom)(src.fd, buf.cast(), len, flags, ap, lp) });
    let rec = Record::new(r, e)
        .out("buf", buf.bytes())
        .out("addr", norm_addr(&addr.bytes(), src.from_port))
        .out("addrlen", alen.bytes());
    src.finish(rec)
}

pub(crate) fn read_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for (name, make) in read_sources() {
        v.push(case(name, move |api| do_read(api, make(), Some(64))));
    }
    for (name, make) in [
        ("tcp with data", s_tcp_data as MakeSrc),
        ("udp, two datagrams", s_udp),
        ("pipe with data", s_pipe),
        ("regular file", s_file),
    ] {
        v.push(case(format!("{name}, length 0"), move |api| {
            do_read(api, make(), Some(0))
        }));
        v.push(case(format!("{name}, length 1"), move |api| {
            do_read(api, make(), Some(1))
        }));
    }
    v.push(case("tcp with data, inaccessible buffer", |api| {
        do_read(api, s_tcp_data(), None)
    }));
    v.push(case("pipe with data, inaccessible buffer", |api| {
        do_read(api, s_pipe(), None)
    }));
    v.push(case("tcp, data in two parts, 20 and 40 ms late", |api| {
        do_read(api, s_tcp_two_late(), Some(64))
    }));
    v
}

pub(crate) fn readv_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for (name, make) in read_sources() {
        v.push(case(name, move |api| {
            do_readv(api, make(), &[16, 0, 48], None, false)
        }));
    }
    for (name, make) in [
        ("tcp with data", s_tcp_data as MakeSrc),
        ("pipe with data", s_pipe),
        ("udp, two datagrams", s_udp),
    ] {
        v.push(case(format!("{name}, 2+3 bytes"), move |api| {
            do_readv(api, make(), &[2, 3], None, false)
        }));
        v.push(case(format!("{name}, no iovecs"), move |api| {
            do_readv(api, make(), &[16], Some(0), false)
        }));
        v.push(case(format!("{name}, count -1"), move |api| {
            do_readv(api, make(), &[16], Some(-1), false)
        }));
        v.push(case(format!("{name}, 1025 iovecs"), move |api| {
            do_readv(api, make(), &[16], Some(1025), false)
        }));
        v.push(case(format!("{name}, null iovec array"), move |api| {
            do_readv(api, make(), &[16], Some(1), true)
        }));
    }
    v
}

pub(crate) fn recv_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for (name, make) in read_sources() {
        v.push(case(name, move |api| {
            do_recv(api, make(), Some(64), 0, false)
        }));
    }
    let flagged: Vec<(&str, MakeSrc, usize, c_int, bool)> = vec![
        ("tcp with data, length 0", s_tcp_data, 0, 0, false),
        ("tcp with data, length 1", s_tcp_data, 1, 0, false),
        ("udp, two datagrams, length 1", s_udp, 1, 0, false),
        (
            "tcp with data, MSG_PEEK",
            s_tcp_data,
            64,
            libc::MSG_PEEK,
            false,
        ),
        (
            "udp, two datagrams, MSG_PEEK",
            s_udp,
            64,
            libc::MSG_PEEK,
            false,
        ),
        (
            "tcp with data, MSG_DONTWAIT",
            s_tcp_data,
            64,
            libc::MSG_DONTWAIT,
            false,
        ),
        (
            "tcp, SO_RCVTIMEO 30 ms, empty, MSG_DONTWAIT",
            s_tcp_timeo,
            64,
            libc::MSG_DONTWAIT,
            true,
        ),
        (
            "pipe with data, MSG_DONTWAIT",
            s_pipe,
            64,
            libc::MSG_DONTWAIT,
            false,
        ),
        (
            "tcp with data, MSG_WAITALL, less than there is",
            s_tcp_data,
            10,
            libc::MSG_WAITALL,
            false,
        ),
        (
            "tcp, peer wrote and closed, MSG_WAITALL",
            s_tcp_data_eof,
            64,
            libc::MSG_WAITALL,
            false,
        ),
        (
            "tcp with data, SO_RCVTIMEO 30 ms, MSG_WAITALL for more",
            s_tcp_part_timeo,
            64,
            libc::MSG_WAITALL,
            false,
        ),
        (
            "tcp, data in two parts, MSG_WAITALL for both",
            s_tcp_two_late,
            13,
            libc::MSG_WAITALL,
            false,
        ),
        (
            "tcp with data, MSG_WAITALL|MSG_DONTWAIT for more",
            s_tcp_data,
            64,
            libc::MSG_WAITALL | libc::MSG_DONTWAIT,
            false,
        ),
        (
            "udp, two datagrams, MSG_WAITALL",
            s_udp,
            64,
            libc::MSG_WAITALL,
            false,
        ),
        (
            "unix stream with data, MSG_WAITALL, less than there is",
            s_unix_stream,
            5,
            libc::MSG_WAITALL,
            false,
        ),
        (
            "unix seqpacket with data, MSG_WAITALL",
            s_unix_seqpacket,
            64,
            libc::MSG_WAITALL,
            false,
        ),
        (
            "tcp with data, MSG_PEEK|MSG_WAITALL, less than there is",
            s_tcp_data_bound,
            5,
            libc::MSG_PEEK | libc::MSG_WAITALL,
            true,
        ),
        (
            "tcp, peer wrote and closed, SO_RCVTIMEO 300 ms, MSG_PEEK|MSG_WAITALL for more",
            s_tcp_part_eof_timeo,
            64,
            libc::MSG_PEEK | libc::MSG_WAITALL,
            true,
        ),
        (
            "tcp, data in two parts, MSG_PEEK|MSG_WAITALL for both",
            s_tcp_two_late,
            13,
            libc::MSG_PEEK | libc::MSG_WAITALL,
            false,
        ),
        (
            "udp, two datagrams, MSG_TRUNC, length 4",
            s_udp,
            4,
            libc::MSG_TRUNC,
            false,
        ),
        (
            "tcp with data, MSG_TRUNC, length 5",
            s_tcp_data,
            5,
            libc::MSG_TRUNC,
            false,
        ),
        (
            "tcp with urgent data, MSG_OOB",
            s_tcp_oob,
            64,
            libc::MSG_OOB,
            false,
        ),
        ("tcp with urgent data", s_tcp_oob, 64, 0, false),
        (
            "tcp with data, MSG_OOB (none urgent)",
            s_tcp_data,
            64,
            libc::MSG_OOB,
            false,
        ),
        (
            "udp, two datagrams, MSG_OOB",
            s_udp,
            64,
            libc::MSG_OOB,
            false,
        ),
        (
            "tcp, SO_RCVTIMEO 300 ms, empty, MSG_ERRQUEUE",
            s_tcp_empty_bound,
            64,
            libc::MSG_ERRQUEUE,
            true,
        ),
        (
            "tcp with data, SO_RCVTIMEO 300 ms, MSG_ERRQUEUE",
            s_tcp_data_bound,
            64,
            libc::MSG_ERRQUEUE,
            true,
        ),
        (
            "udp with an error queued, MSG_ERRQUEUE",
            s_udp_errqueue,
            64,
            libc::MSG_ERRQUEUE,
            true,
        ),
        (
            "udp with an error queued, SO_RCVTIMEO 300 ms",
            s_udp_errqueue,
            64,
            0,
            true,
        ),
        (
            "tcp with data, MSG_CMSG_CLOEXEC",
            s_tcp_data,
            64,
            libc::MSG_CMSG_CLOEXEC,
            false,
        ),
    ];
    for (name, make, len, flags, prompt) in flagged {
        v.push(case(name, move |api| {
            do_recv(api, make(), Some(len), flags, prompt)
        }));
    }
    v.push(case("tcp with data, inaccessible buffer", |api| {
        do_recv(api, s_tcp_data(), None, 0, false)
    }));
    v.push(case("udp, two datagrams, inaccessible buffer", |api| {
        do_recv(api, s_udp(), None, 0, false)
    }));
    v
}

pub(crate) fn recvfrom_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for (name, make) in read_sources() {
        v.push(case(name, move |api| {
            do_recvfrom(api, make(), 64, 0, AddrArg::Full)
        }));
    }
    for arg in [
        AddrArg::Short,
        AddrArg::Zero,
        AddrArg::NullAddr,
        AddrArg::NullLen,
        AddrArg::Neither,
    ] {
        for (name, make) in [
            ("udp, two datagrams", s_udp as MakeSrc),
            ("tcp with data", s_tcp_data),
            ("unix datagram with data", s_unix_dgram),
        ] {
            v.push(case(format!("{name}, address {arg:?}"), move |api| {
                do_recvfrom(api, make(), 64, 0, arg)
            }));
        }
    }
    for (name, make, len, flags) in [
        (
            "udp, two datagrams, MSG_PEEK",
            s_udp as MakeSrc,
            64,
            libc::MSG_PEEK,
        ),
        (
            "udp, two datagrams, MSG_TRUNC, length 4",
            s_udp,
            4,
            libc::MSG_TRUNC,
        ),
        (
            "udp, two datagrams, MSG_WAITALL",
            s_udp,
            64,
            libc::MSG_WAITALL,
        ),
        (
            "tcp with data, MSG_WAITALL, less than there is",
            s_tcp_data,
            7,
            libc::MSG_WAITALL,
        ),
        (
            "tcp, data in two parts, MSG_WAITALL for both",
            s_tcp_two_late,
            13,
            libc::MSG_WAITALL,
        ),
        (
            "tcp non-blocking, empty, MSG_WAITALL",
            s_tcp_nonblock,
            8,
            libc::MSG_WAITALL,
        ),
        (
            "udp with an error queued, MSG_ERRQUEUE",
            s_udp_errqueue,
            64,
            libc::MSG_ERRQUEUE,
        ),
    ] {
        v.push(case(name, move |api| {
            do_recvfrom(api, make(), len, flags, AddrArg::Full)
        }));
    }
    v
}
