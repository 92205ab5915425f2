//! The write side of the data calls: where a write-like call writes (a
//! [`Dst`], with what receives it), what it writes (a [`Payload`]), and
//! `write` and `writev` (the send calls are in `sends.rs`).

use std::ptr;
use std::thread;
use std::time::Duration;

use libc::{c_int, iovec};

use crate::api::Api;
use crate::harness::{Case, Record, case, digest};
use crate::mem::Buf;
use crate::net::{
    bound, directory, eventfd, file, fill, linger0, listener, nonblock, pipe, shutdown, socket,
    tcp_pair, timeo, udp_pair, unix_pair,
};
use crate::sys::{Fds, await_ready, call, closed_fd, drain, raw_poll, raw_read};

/// The payload of the write cases.
pub(crate) const DATA: &[u8] = b"payload: 0123456789";

/// The size of the large writes: more than the socket buffers take.
pub(crate) const BIG: usize = 8 << 20;

pub(crate) fn big_data() -> &'static [u8] {
    static DATA: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    DATA.get_or_init(|| (0..BIG).map(|i| (i * 7 % 251) as u8).collect())
}

/// The data a write case sends: `DATA`, `len` bytes of it, `BIG` bytes,
/// or an inaccessible buffer.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Payload {
    Data,
    Len(usize),
    Big,
    Bad,
}

impl Payload {
    pub(crate) fn buf(self) -> (Buf, usize) {
        match self {
            Payload::Data => (Buf::from(DATA), DATA.len()),
            Payload::Len(n) => (Buf::from(&DATA[..n]), n),
            Payload::Big => (Buf::from(big_data()), BIG),
            Payload::Bad => (Buf::inaccessible(), 16),
        }
    }
}

/// The payload still as it was (inputs are not written to).
pub(crate) fn intact(buf: &Buf, p: Payload) -> bool {
    match p {
        Payload::Data => buf.data() == DATA,
        Payload::Len(n) => buf.data() == &DATA[..n],
        Payload::Big => buf.data() == big_data(),
        Payload::Bad => true,
    }
}

/// What receives what a write-like call sends.
pub(crate) enum Peer {
    Nothing,
    Stream(c_int),
    Dgram(c_int),
    File(c_int),
    /// A thread reading the peer: all it got.
    All(thread::JoinHandle<Vec<u8>>),
    /// A thread reading the peer after a fill: the last bytes it got.
    Tail(thread::JoinHandle<Vec<u8>>),
}

/// Where a write-like call writes, made fresh for each call.
pub(crate) struct Dst {
    pub(crate) fds: Fds,
    pub(crate) fd: c_int,
    pub(crate) peer: Peer,
    /// The address sendto and sendmsg send to.
    pub(crate) to: Option<libc::sockaddr_in>,
}

impl Dst {
    fn new(fds: Fds, fd: c_int, peer: Peer) -> Dst {
        Dst {
            fds,
            fd,
            peer,
            to: None,
        }
    }

    pub(crate) fn finish(self, rec: Record) -> Record {
        let wait = if rec.ret > 0 { 200 } else { 0 };
        let peer = match self.peer {
            Peer::Nothing => Vec::new(),
            Peer::Stream(fd) => drain(fd, wait, false),
            Peer::Dgram(fd) => drain(fd, wait, true),
            Peer::File(fd) => {
                let mut b = vec![0u8; 4096];
                // SAFETY: `b` is valid for its length.
                let n = unsafe { libc::pread(fd, b.as_mut_ptr().cast(), b.len(), 0) };
                b.truncate(n.max(0) as usize);
                b
            }
            Peer::All(t) => digest(&t.join().unwrap()),
            Peer::Tail(t) => {
                let got = t.join().unwrap();
                got[got.len().saturating_sub(DATA.len())..].to_vec()
            }
        };
        let rec = rec.peer(peer);
        drop(self.fds);
        rec
    }
}

pub(crate) type MakeDst = fn() -> Dst;

/// A thread that reads `fd` until `expect` bytes came or it was quiet for
/// 500 ms (10 s before the first byte): what it read.
pub(crate) fn reader(fd: c_int, expect: usize) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        while got.len() < expect {
            let quiet = if got.is_empty() { 10_000 } else { 500 };
            if raw_poll(fd, libc::POLLIN, quiet) == 0 {
                break;
            }
            match raw_read(fd, &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        got
    })
}

/// A thread that reads `fd` (a fill, then a write case's payload) until
/// what it read ends with [`DATA`], or it was quiet for 300 ms (2 s before
/// the first byte).
pub(crate) fn tail_reader(fd: c_int) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        while !got.ends_with(DATA) {
            let quiet = if got.is_empty() { 2000 } else { 300 };
            if raw_poll(fd, libc::POLLIN, quiet) == 0 {
                break;
            }
            match raw_read(fd, &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        got
    })
}

pub(crate) fn d_tcp() -> Dst {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    Dst::new(f, c, Peer::Stream(s))
}

pub(crate) fn d_tcp_peer_closed() -> Dst {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    f.close(s);
    await_ready(c, libc::POLLRDHUP);
    Dst::new(f, c, Peer::Nothing)
}

pub(crate) fn d_tcp_reset() -> Dst {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    linger0(s);
    f.close(s);
    await_ready(c, libc::POLLERR);
    Dst::new(f, c, Peer::Nothing)
}

pub(crate) fn d_tcp_shut_wr() -> Dst {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    shutdown(c, libc::SHUT_WR);
    Dst::new(f, c, Peer::Stream(s))
}

pub(crate) fn d_full(nonblocking: bool, timeout: bool, drained: bool) -> Dst {
    let mut f = Fds::default();
    let (a, b) = unix_pair(&mut f, libc::SOCK_STREAM);
    fill(a);
    if nonblocking {
        nonblock(a);
    }
    if timeout {
        timeo(a, libc::SO_SNDTIMEO, 30);
    }
    let peer = if drained {
        Peer::Tail(thread::spawn(move || {
            thread::sleep(Duration::from_millis(30));
            tail_reader(b).join().unwrap()
        }))
    } else {
        Peer::Nothing
    };
    Dst::new(f, a, peer)
}

pub(crate) fn d_full_blocking() -> Dst {
    d_full(false, false, false)
}

pub(crate) fn d_full_nonblock() -> Dst {
    d_full(true, false, false)
}

pub(crate) fn d_full_timeo() -> Dst {
    d_full(false, true, false)
}

pub(crate) fn d_full_drained() -> Dst {
    d_full(false, false, true)
}

pub(crate) fn d_udp() -> Dst {
    let mut f = Fds::default();
    let (a, b) = udp_pair(&mut f);
    Dst::new(f, a, Peer::Dgram(b))
}

pub(crate) fn d_udp_unconnected() -> Dst {
    let mut f = Fds::default();
    let (a, _) = bound(&mut f, libc::SOCK_DGRAM);
    let (b, ba) = bound(&mut f, libc::SOCK_DGRAM);
    let mut d = Dst::new(f, a, Peer::Dgram(b));
    d.to = Some(ba);
    d
}

/// A connected UDP socket, and the address of a third socket to send to.
pub(crate) fn d_udp_third() -> Dst {
    let mut f = Fds::default();
    let (a, _) = udp_pair(&mut f);
    let (c, ca) = bound(&mut f, libc::SOCK_DGRAM);
    let mut d = Dst::new(f, a, Peer::Dgram(c));
    d.to = Some(ca);
    d
}

pub(crate) fn d_unix(ty: c_int) -> Dst {
    let mut f = Fds::default();
    let (a, b) = unix_pair(&mut f, ty);
    let peer = if ty == libc::SOCK_STREAM {
        Peer::Stream(b)
    } else {
        Peer::Dgram(b)
    };
    Dst::new(f, a, peer)
}

pub(crate) fn d_unix_stream() -> Dst {
    d_unix(libc::SOCK_STREAM)
}

pub(crate) fn d_unix_dgram() -> Dst {
    d_unix(libc::SOCK_DGRAM)
}

pub(crate) fn d_unix_seqpacket() -> Dst {
    d_unix(libc::SOCK_SEQPACKET)
}

pub(crate) fn d_pipe() -> Dst {
    let mut f = Fds::default();
    let (r, w) = pipe(&mut f);
    Dst::new(f, w, Peer::Stream(r))
}

pub(crate) fn d_pipe_closed() -> Dst {
    let mut f = Fds::default();
    let (r, w) = pipe(&mut f);
    f.close(r);
    Dst::new(f, w, Peer::Nothing)
}

pub(crate) fn d_pipe_full(nonblocking: bool) -> Dst {
    let mut f = Fds::default();
    let (r, w) = pipe(&mut f);
    fill(w);
    if nonblocking {
        nonblock(w);
        return Dst::new(f, w, Peer::Nothing);
    }
    let peer = Peer::Tail(thread::spawn(move || {
        thread::sleep(Duration::from_millis(30));
        tail_reader(r).join().unwrap()
    }));
    Dst::new(f, w, peer)
}

pub(crate) fn d_pipe_full_nonblock() -> Dst {
    d_pipe_full(true)
}

pub(crate) fn d_pipe_full_drained() -> Dst {
    d_pipe_full(false)
}

pub(crate) fn d_file() -> Dst {
    let mut f = Fds::default();
    let fd = file(&mut f, b"");
    Dst::new(f, fd, Peer::File(fd))
}

pub(crate) fn d_eventfd() -> Dst {
    let mut f = Fds::default();
    let fd = eventfd(&mut f, 0);
    Dst::new(f, fd, Peer::Nothing)
}

pub(crate) fn d_pipe_rd() -> Dst {
    let mut f = Fds::default();
    let (r, _) = pipe(&mut f);
    Dst::new(f, r, Peer::Nothing)
}

pub(crate) fn d_dir() -> Dst {
    let mut f = Fds::default();
    let fd = directory(&mut f);
    Dst::new(f, fd, Peer::Nothing)
}

pub(crate) fn d_listener() -> Dst {
    let mut f = Fds::default();
    let (l, _) = listener(&mut f);
    Dst::new(f, l, Peer::Nothing)
}

pub(crate) fn d_unconnected() -> Dst {
    let mut f = Fds::default();
    let fd = socket(&mut f, libc::AF_INET, libc::SOCK_STREAM);
    Dst::new(f, fd, Peer::Nothing)
}

pub(crate) fn d_closed() -> Dst {
    Dst::new(Fds::default(), closed_fd(), Peer::Nothing)
}

pub(crate) fn d_minus1() -> Dst {
    Dst::new(Fds::default(), -1, Peer::Nothing)
}

/// A TCP socket whose peer a thread reads (all of `BIG`).
pub(crate) fn d_tcp_big() -> Dst {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    Dst::new(f, c, Peer::All(reader(s, BIG)))
}

pub(crate) fn write_sinks() -> Vec<(&'static str, MakeDst)> {
    vec![
        ("tcp", d_tcp),
        ("tcp, peer closed", d_tcp_peer_closed),
        ("tcp, peer reset", d_tcp_reset),
        ("tcp, own side shut down writing", d_tcp_shut_wr),
        ("unix stream, full, non-blocking", d_full_nonblock),
        ("unix stream, full, SO_SNDTIMEO 30 ms", d_full_timeo),
        ("unix stream, full, drained 30 ms later", d_full_drained),
        ("udp connected", d_udp),
        ("udp unconnected", d_udp_unconnected),
        ("unix stream", d_unix_stream),
        ("unix datagram", d_unix_dgram),
        ("unix seqpacket", d_unix_seqpacket),
        ("pipe", d_pipe),
        ("pipe, reader closed", d_pipe_closed),
        ("pipe, full, non-blocking", d_pipe_full_nonblock),
        ("pipe, full, drained 30 ms later", d_pipe_full_drained),
        ("regular file", d_file),
        ("eventfd", d_eventfd),
        ("pipe's read end", d_pipe_rd),
        ("directory", d_dir),
        ("listening socket", d_listener),
        ("unconnected tcp socket", d_unconnected),
        ("closed fd", d_closed),
        ("fd -1", d_minus1),
    ]
}

pub(crate) fn do_write(api: &Api, dst: Dst, p: Payload) -> Record {
    let (buf, n) = p.buf();
    // SAFETY: `buf` is valid for `n` bytes (or inaccessible: EFAULT).
    let (r, e) = call(|| unsafe { (api.write)(dst.fd, buf.cast(), n) });
    let rec = Record::new(r, e).flag("input_intact", intact(&buf, p));
    dst.finish(rec)
}

/// The `n` bytes of `buf` in three iovecs: the first 5 bytes (or fewer),
/// an empty one, the rest; then iovecs of its first byte, up to `count`
/// iovecs in all.
pub(crate) fn split_iov(buf: &Buf, n: usize, count: usize) -> Vec<iovec> {
    let a = n.min(5);
    let mut iov = vec![
        iovec {
            iov_base: buf.cast(),
            iov_len: a,
        },
        iovec {
            iov_base: ptr::null_mut(),
            iov_len: 0,
        },
        iovec {
            iov_base: buf.ptr().wrapping_add(a).cast(),
            iov_len: n - a,
        },
    ];
    if count > iov.len() {
        iov.resize(
            count,
            iovec {
                iov_base: buf.cast(),
                iov_len: 1,
            },
        );
    }
    iov
}

/// writev of `p` in three iovecs (see [`split_iov`]); `cnt` overrides the
/// count (more than 3: more iovecs); `null`: the iovec array is null.
pub(crate) fn do_writev(api: &Api, dst: Dst, p: Payload, cnt: Option<c_int>, null: bool) -> Record {
    let (buf, n) = p.buf();
    let cnt = cnt.unwrap_or(3);
    let iov = split_iov(&buf, n, cnt.max(0) as usize);
    let iovp = if null { ptr::null() } else { iov.as_ptr() };
    // SAFETY: iovecs over our buffer.
    let (r, e) = call(|| unsafe { (api.writev)(dst.fd, iovp, cnt) });
    let rec = Record::new(r, e).flag("input_intact", intact(&buf, p));
    dst.finish(rec)
}

pub(crate) fn write_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for (name, make) in write_sinks() {
        v.push(case(name, move |api| do_write(api, make(), Payload::Data)));
    }
    for (name, make) in [
        ("tcp", d_tcp as MakeDst),
        ("pipe", d_pipe),
        ("udp connected", d_udp),
        ("regular file", d_file),
    ] {
        v.push(case(format!("{name}, length 0"), move |api| {
            do_write(api, make(), Payload::Len(0))
        }));
        v.push(case(format!("{name}, length 1"), move |api| {
            do_write(api, make(), Payload::Len(1))
        }));
        v.push(case(format!("{name}, inaccessible buffer"), move |api| {
            do_write(api, make(), Payload::Bad)
        }));
    }
    v.push(case("eventfd, 8 bytes", |api| {
        do_write(api, d_eventfd(), Payload::Len(8))
    }));
    v.push(case("tcp, 8 MiB, the peer reading", |api| {
        do_write(api, d_tcp_big(), Payload::Big)
    }));
    v
}

pub(crate) fn writev_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for (name, make) in write_sinks() {
        v.push(case(name, move |api| {
            do_writev(api, make(), Payload::Data, None, false)
        }));
    }
    for (name, make) in [
        ("tcp", d_tcp as MakeDst),
        ("pipe", d_pipe),
        ("udp connected", d_udp),
    ] {
        v.push(case(format!("{name}, no iovecs"), move |api| {
            do_writev(api, make(), Payload::Data, Some(0), false)
        }));
        v.push(case(format!("{name}, count -1"), move |api| {
            do_writev(api, make(), Payload::Data, Some(-1), false)
        }));
        v.push(case(format!("{name}, 1025 iovecs"), move |api| {
            do_writev(api, make(), Payload::Data, Some(1025), false)
        }));
        v.push(case(format!("{name}, null iovec array"), move |api| {
            do_writev(api, make(), Payload::Data, Some(1), true)
        }));
        v.push(case(format!("{name}, inaccessible buffer"), move |api| {
            do_writev(api, make(), Payload::Bad, None, false)
        }));
    }
    v.push(case("tcp, 8 MiB, the peer reading", |api| {
        do_writev(api, d_tcp_big(), Payload::Big, None, false)
    }));
    v
}
