//! Where the read side of the data calls reads from: sockets of every
//! kind and state, pipes, files, eventfds, directories and bad fds, made
//! fresh for each call.

use std::thread;
use std::time::Duration;

use libc::c_int;

use crate::harness::Record;
use crate::net::{
    bound, directory, eventfd, file, linger0, listener, local, nonblock, pipe, port_of, sa, sa_len,
    send_fd, set_opt, shutdown, socket, tcp_pair, timeo, udp_pair, unix_pair,
};
use crate::sys::{BOUND_MS, Fds, await_ready, closed_fd, drain, later, raw_send, raw_write};

/// Where a read-like call reads from, made fresh for each call.
pub(crate) struct Src {
    fds: Fds,
    pub(crate) fd: c_int,
    /// What is left is read after the call (`Some(datagrams)`), or not.
    left: Option<bool>,
    /// The port the data comes from (recorded as `PP`).
    pub(crate) from_port: u16,
    late: Option<thread::JoinHandle<()>>,
}

impl Src {
    fn new(fds: Fds, fd: c_int, left: Option<bool>) -> Src {
        Src {
            fds,
            fd,
            left,
            from_port: 0,
            late: None,
        }
    }

    pub(crate) fn finish(mut self, rec: Record) -> Record {
        if let Some(t) = self.late.take() {
            t.join().unwrap();
        }
        let rec = match self.left {
            Some(dgram) => rec.out("left", drain(self.fd, 0, dgram)),
            None => rec,
        };
        drop(self.fds);
        rec
    }
}

pub(crate) type MakeSrc = fn() -> Src;

pub(crate) fn s_tcp_data() -> Src {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    raw_write(s, b"hello, differential world");
    await_ready(c, libc::POLLIN);
    Src::new(f, c, Some(false))
}

pub(crate) fn s_tcp_data_eof() -> Src {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    raw_write(s, b"bye");
    f.close(s);
    await_ready(c, libc::POLLRDHUP);
    Src::new(f, c, Some(false))
}

pub(crate) fn s_tcp_eof() -> Src {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    f.close(s);
    await_ready(c, libc::POLLRDHUP);
    Src::new(f, c, Some(false))
}

pub(crate) fn s_tcp_shut_wr() -> Src {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    shutdown(s, libc::SHUT_WR);
    await_ready(c, libc::POLLRDHUP);
    Src::new(f, c, Some(false))
}

pub(crate) fn s_tcp_reset() -> Src {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    linger0(s);
    f.close(s);
    await_ready(c, libc::POLLERR);
    Src::new(f, c, Some(false))
}

pub(crate) fn s_tcp_shut_rd() -> Src {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    raw_write(s, b"unread");
    await_ready(c, libc::POLLIN);
    shutdown(c, libc::SHUT_RD);
    Src::new(f, c, Some(false))
}

pub(crate) fn s_tcp_nonblock() -> Src {
    let mut f = Fds::default();
    let (c, _) = tcp_pair(&mut f);
    nonblock(c);
    Src::new(f, c, Some(false))
}

pub(crate) fn s_tcp_timeo() -> Src {
    let mut f = Fds::default();
    let (c, _) = tcp_pair(&mut f);
    timeo(c, libc::SO_RCVTIMEO, 30);
    Src::new(f, c, Some(false))
}

pub(crate) fn s_tcp_late() -> Src {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    let mut src = Src::new(f, c, Some(false));
    src.late = Some(later(s, b"late data", 30));
    src
}

pub(crate) fn s_udp() -> Src {
    let mut f = Fds::default();
    let (a, b) = udp_pair(&mut f);
    raw_send(b, b"datagram one", 0);
    raw_send(b, b"datagram two", 0);
    await_ready(a, libc::POLLIN);
    let mut src = Src::new(f, a, Some(true));
    src.from_port = port_of(&local(b));
    src
}

pub(crate) fn s_udp_empty() -> Src {
    let mut f = Fds::default();
    let (a, b) = udp_pair(&mut f);
    raw_send(b, b"", 0);
    await_ready(a, libc::POLLIN);
    let mut src = Src::new(f, a, Some(true));
    src.from_port = port_of(&local(b));
    src
}

pub(crate) fn s_udp_nonblock() -> Src {
    let mut f = Fds::default();
    let (a, _) = udp_pair(&mut f);
    nonblock(a);
    Src::new(f, a, Some(true))
}

pub(crate) fn s_unix(ty: c_int) -> Src {
    let mut f = Fds::default();
    let (a, b) = unix_pair(&mut f, ty);
    raw_write(b, b"unix one");
    raw_write(b, b"unix two");
    await_ready(a, libc::POLLIN);
    Src::new(f, a, Some(ty != libc::SOCK_STREAM))
}

pub(crate) fn s_unix_stream() -> Src {
    s_unix(libc::SOCK_STREAM)
}

pub(crate) fn s_unix_dgram() -> Src {
    s_unix(libc::SOCK_DGRAM)
}

pub(crate) fn s_unix_seqpacket() -> Src {
    s_unix(libc::SOCK_SEQPACKET)
}

pub(crate) fn s_pipe() -> Src {
    let mut f = Fds::default();
    let (r, w) = pipe(&mut f);
    raw_write(w, b"pipe data");
    Src::new(f, r, Some(false))
}

pub(crate) fn s_pipe_eof() -> Src {
    let mut f = Fds::default();
    let (r, w) = pipe(&mut f);
    raw_write(w, b"last");
    f.close(w);
    Src::new(f, r, Some(false))
}

pub(crate) fn s_pipe_nonblock() -> Src {
    let mut f = Fds::default();
    let (r, _) = pipe(&mut f);
    nonblock(r);
    Src::new(f, r, Some(false))
}

pub(crate) fn s_pipe_late() -> Src {
    let mut f = Fds::default();
    let (r, w) = pipe(&mut f);
    let mut src = Src::new(f, r, Some(false));
    src.late = Some(later(w, b"late pipe data", 30));
    src
}

pub(crate) fn s_file() -> Src {
    let mut f = Fds::default();
    let fd = file(&mut f, b"the file's contents");
    Src::new(f, fd, Some(false))
}

pub(crate) fn s_file_end() -> Src {
    let mut f = Fds::default();
    let fd = file(&mut f, b"");
    Src::new(f, fd, Some(false))
}

pub(crate) fn s_eventfd() -> Src {
    let mut f = Fds::default();
    let fd = eventfd(&mut f, 7);
    Src::new(f, fd, None)
}

pub(crate) fn s_dir() -> Src {
    let mut f = Fds::default();
    let fd = directory(&mut f);
    Src::new(f, fd, None)
}

pub(crate) fn s_pipe_wr() -> Src {
    let mut f = Fds::default();
    let (_, w) = pipe(&mut f);
    Src::new(f, w, None)
}

pub(crate) fn s_listener() -> Src {
    let mut f = Fds::default();
    let (l, _) = listener(&mut f);
    Src::new(f, l, None)
}

pub(crate) fn s_unconnected() -> Src {
    let mut f = Fds::default();
    let fd = socket(&mut f, libc::AF_INET, libc::SOCK_STREAM);
    Src::new(f, fd, None)
}

pub(crate) fn s_closed() -> Src {
    Src::new(Fds::default(), closed_fd(), None)
}

pub(crate) fn s_minus1() -> Src {
    Src::new(Fds::default(), -1, None)
}

/// Stream data that comes in two parts, 20 and 40 ms late.
pub(crate) fn s_tcp_two_late() -> Src {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    let mut src = Src::new(f, c, Some(false));
    src.late = Some(thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        raw_write(s, b"first, ");
        thread::sleep(Duration::from_millis(20));
        raw_write(s, b"second");
    }));
    src
}

/// Part of the data asked for, the peer still open, a 30 ms timeout.
pub(crate) fn s_tcp_part_timeo() -> Src {
    let s = s_tcp_data();
    timeo(s.fd, libc::SO_RCVTIMEO, 30);
    s
}

/// Part of the data asked for and the end of the stream; a 300 ms timeout
/// bounds a call that would wait for more.
pub(crate) fn s_tcp_part_eof_timeo() -> Src {
    let s = s_tcp_data_eof();
    timeo(s.fd, libc::SO_RCVTIMEO, BOUND_MS);
    s
}

/// Stream data, a 300 ms timeout (bounding a call that should not wait).
pub(crate) fn s_tcp_data_bound() -> Src {
    let s = s_tcp_data();
    timeo(s.fd, libc::SO_RCVTIMEO, BOUND_MS);
    s
}

pub(crate) fn s_tcp_empty_bound() -> Src {
    let mut f = Fds::default();
    let (c, _) = tcp_pair(&mut f);
    timeo(c, libc::SO_RCVTIMEO, BOUND_MS);
    Src::new(f, c, Some(false))
}

/// Normal data and an urgent byte (`!`).
pub(crate) fn s_tcp_oob() -> Src {
    let mut f = Fds::default();
    let (c, s) = tcp_pair(&mut f);
    raw_send(s, b"normal", 0);
    raw_send(s, b"!", libc::MSG_OOB);
    await_ready(c, libc::POLLPRI);
    Src::new(f, c, Some(false))
}

/// A UDP socket with an ICMP error queued (`IP_RECVERR`: a datagram sent
/// to a closed port), a 300 ms timeout.
pub(crate) fn s_udp_errqueue() -> Src {
    let mut f = Fds::default();
    let (a, _) = bound(&mut f, libc::SOCK_DGRAM);
    let (closed, closed_addr) = bound(&mut f, libc::SOCK_DGRAM);
    f.close(closed);
    set_opt(a, libc::IPPROTO_IP, libc::IP_RECVERR, 1 as c_int);
    timeo(a, libc::SO_RCVTIMEO, BOUND_MS);
    // SAFETY: a valid sockaddr_in of the size given.
    unsafe {
        libc::syscall(
            libc::SYS_sendto,
            a,
            b"x".as_ptr(),
            1,
            0,
            sa(&closed_addr),
            sa_len::<libc::sockaddr_in>(),
        )
    };
    await_ready(a, libc::POLLERR);
    let mut src = Src::new(f, a, Some(true));
    src.from_port = port_of(&closed_addr);
    src
}

/// A unix stream socket with "via fd" and a pipe's read end (holding
/// "in the pipe") passed with SCM_RIGHTS.
pub(crate) fn s_unix_rights() -> Src {
    let mut f = Fds::default();
    let (a, b) = unix_pair(&mut f, libc::SOCK_STREAM);
    let (r, w) = pipe(&mut f);
    raw_write(w, b"in the pipe");
    send_fd(b, b"via fd", r);
    await_ready(a, libc::POLLIN);
    Src::new(f, a, Some(false))
}

pub(crate) fn read_sources() -> Vec<(&'static str, MakeSrc)> {
    vec![
        ("tcp with data", s_tcp_data),
        ("tcp, peer wrote and closed", s_tcp_data_eof),
        ("tcp, peer closed", s_tcp_eof),
        ("tcp, peer shut down writing", s_tcp_shut_wr),
        ("tcp, peer reset", s_tcp_reset),
        ("tcp, own side shut down reading", s_tcp_shut_rd),
        ("tcp non-blocking, empty", s_tcp_nonblock),
        ("tcp, SO_RCVTIMEO 30 ms, empty", s_tcp_timeo),
        ("tcp, data 30 ms late", s_tcp_late),
        ("udp, two datagrams", s_udp),
        ("udp, empty datagram", s_udp_empty),
        ("udp non-blocking, empty", s_udp_nonblock),
        ("unix stream with data", s_unix_stream),
        ("unix datagram with data", s_unix_dgram),
        ("unix seqpacket with data", s_unix_seqpacket),
        ("pipe with data", s_pipe),
        ("pipe, writer closed", s_pipe_eof),
        ("pipe non-blocking, empty", s_pipe_nonblock),
        ("pipe, data 30 ms late", s_pipe_late),
        ("regular file", s_file),
        ("regular file at its end", s_file_end),
        ("eventfd", s_eventfd),
        ("directory", s_dir),
        ("pipe's write end", s_pipe_wr),
        ("listening socket", s_listener),
        ("unconnected tcp socket", s_unconnected),
        ("closed fd", s_closed),
        ("fd -1", s_minus1),
    ]
}

/// A UDP pair with IP_PKTINFO on before the datagrams are sent.
pub(crate) fn s_udp_pktinfo_fresh() -> Src {
    let mut f = Fds::default();
    let (a, b) = udp_pair(&mut f);
    set_opt(a, libc::IPPROTO_IP, libc::IP_PKTINFO, 1 as c_int);
    raw_send(b, b"with pktinfo", 0);
    await_ready(a, libc::POLLIN);
    let mut src = Src::new(f, a, Some(true));
    src.from_port = port_of(&local(b));
    src
}
