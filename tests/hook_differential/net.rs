//! What the cases are made of: addresses, sockets of every kind
//! connected on loopback, pipes, files, eventfds, epoll fds, socket
//! options, and fds passed with `SCM_RIGHTS`. Set up with plain libc
//! calls or the kernel's, never through the calls under test.

use std::ffi::{CString, c_char};
use std::mem;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use libc::{c_int, c_void, epoll_event, iovec, msghdr, sockaddr, socklen_t, timeval};

use crate::mem::{Buf, CANARY, FILL};
use crate::sys::{Fds, drain, ok, raw_write};

pub(crate) fn sin(ip: [u8; 4], port: u16) -> libc::sockaddr_in {
    // SAFETY: all-zero is a valid sockaddr_in.
    let mut a: libc::sockaddr_in = unsafe { mem::zeroed() };
    a.sin_family = libc::AF_INET as libc::sa_family_t;
    a.sin_port = port.to_be();
    a.sin_addr.s_addr = u32::from_ne_bytes(ip);
    a
}

/// The IPv6 loopback address (::1) with `port` (host order).
pub(crate) fn sin6_loopback(port: u16) -> libc::sockaddr_in6 {
    // SAFETY: all-zero is a valid sockaddr_in6.
    let mut six: libc::sockaddr_in6 = unsafe { mem::zeroed() };
    six.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    six.sin6_port = port.to_be();
    six.sin6_addr.s6_addr[15] = 1;
    six
}

pub(crate) fn sa<T>(a: &T) -> *const sockaddr {
    (a as *const T).cast()
}

pub(crate) fn sa_len<T>() -> socklen_t {
    size_of::<T>() as socklen_t
}

/// Room for an address a call writes (128 bytes, or an inaccessible
/// page), and its length (`len` before the call).
pub(crate) fn addr_room(len: socklen_t, inaccessible: bool) -> (Buf, Buf) {
    let addr = if inaccessible {
        Buf::inaccessible()
    } else {
        Buf::new(128)
    };
    let alen = Buf::new(size_of::<socklen_t>());
    alen.put(0, len);
    (addr, alen)
}

/// `fd`'s own address.
pub(crate) fn local(fd: c_int) -> libc::sockaddr_in {
    // SAFETY: all-zero is a valid sockaddr_in.
    let mut a: libc::sockaddr_in = unsafe { mem::zeroed() };
    let mut len = sa_len::<libc::sockaddr_in>();
    // SAFETY: `a` and `len` are valid, `len` its size.
    let r = unsafe { libc::getsockname(fd, (&raw mut a).cast(), &mut len) };
    ok(r, "getsockname");
    a
}

/// The port of a sockaddr_in, host order.
pub(crate) fn port_of(a: &libc::sockaddr_in) -> u16 {
    u16::from_be(a.sin_port)
}

/// A sockaddr as recorded: its bytes, with an AF_INET port replaced by
/// `PP` when it is `port` (an ephemeral port, different in every run).
pub(crate) fn norm_addr(b: &[u8], port: u16) -> Vec<u8> {
    let mut v = b.to_vec();
    if v.len() > 2 && u16::from_ne_bytes([v[0], v[1]]) == libc::AF_UNIX as u16 {
        // An abstract name of ours holds the pid: `U` for each byte.
        for x in &mut v[2..] {
            if *x != FILL && *x != CANARY {
                *x = b'U';
            }
        }
    }
    if v.len() >= 4 && u16::from_ne_bytes([v[0], v[1]]) == libc::AF_INET as u16 {
        let p = u16::from_be_bytes([v[2], v[3]]);
        if p == port && port != 0 {
            v[2] = b'P';
            v[3] = b'P';
        }
    }
    v
}

/// The abstract unix address `name` and its length.
pub(crate) fn unix_addr(name: &str) -> (libc::sockaddr_un, socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_un.
    let mut a: libc::sockaddr_un = unsafe { mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (i, b) in name.bytes().enumerate() {
        a.sun_path[i + 1] = b as c_char;
    }
    (a, (2 + 1 + name.len()) as socklen_t)
}

pub(crate) fn socket(fds: &mut Fds, domain: c_int, ty: c_int) -> c_int {
    // SAFETY: socket(2) reads no memory of ours.
    fds.keep(unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, 0) })
}

/// A socket of type `ty` bound to 127.0.0.1, any port.
pub(crate) fn bound(fds: &mut Fds, ty: c_int) -> (c_int, libc::sockaddr_in) {
    let fd = socket(fds, libc::AF_INET, ty);
    let a = sin([127, 0, 0, 1], 0);
    // SAFETY: a valid sockaddr_in of the size given.
    ok(
        unsafe { libc::bind(fd, sa(&a), sa_len::<libc::sockaddr_in>()) },
        "bind",
    );
    (fd, local(fd))
}

pub(crate) fn listener(fds: &mut Fds) -> (c_int, libc::sockaddr_in) {
    let (l, a) = bound(fds, libc::SOCK_STREAM);
    // SAFETY: listen(2) reads no memory.
    ok(unsafe { libc::listen(l, 16) }, "listen");
    (l, a)
}

pub(crate) fn connect_to(fd: c_int, a: &libc::sockaddr_in) {
    // SAFETY: a valid sockaddr_in of the size given.
    let r = unsafe { libc::connect(fd, sa(a), sa_len::<libc::sockaddr_in>()) };
    ok(r, "connect");
}

/// A connected TCP pair on loopback: (client, server).
pub(crate) fn tcp_pair(fds: &mut Fds) -> (c_int, c_int) {
    let (l, a) = listener(fds);
    let c = socket(fds, libc::AF_INET, libc::SOCK_STREAM);
    connect_to(c, &a);
    // SAFETY: no address wanted.
    let s =
        fds.keep(unsafe { libc::accept4(l, ptr::null_mut(), ptr::null_mut(), libc::SOCK_CLOEXEC) });
    fds.close(l);
    (c, s)
}

/// Two UDP sockets on loopback connected to each other.
pub(crate) fn udp_pair(fds: &mut Fds) -> (c_int, c_int) {
    let (a, aa) = bound(fds, libc::SOCK_DGRAM);
    let (b, ba) = bound(fds, libc::SOCK_DGRAM);
    connect_to(a, &ba);
    connect_to(b, &aa);
    (a, b)
}

pub(crate) fn unix_pair(fds: &mut Fds, ty: c_int) -> (c_int, c_int) {
    let mut sv = [0; 2];
    // SAFETY: `sv` holds two ints.
    ok(
        unsafe { libc::socketpair(libc::AF_UNIX, ty | libc::SOCK_CLOEXEC, 0, sv.as_mut_ptr()) },
        "socketpair",
    );
    (fds.keep(sv[0]), fds.keep(sv[1]))
}

/// A unix stream socket bound to a fresh abstract address (listening if
/// `listen`), and that address.
pub(crate) fn unix_bound(fds: &mut Fds, listen: bool) -> (c_int, libc::sockaddr_un, socklen_t) {
    static N: AtomicUsize = AtomicUsize::new(0);
    let fd = socket(fds, libc::AF_UNIX, libc::SOCK_STREAM);
    let (a, len) = unix_addr(&format!(
        "fibra-hook-differential-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    // SAFETY: a valid sockaddr_un of the length given.
    ok(unsafe { libc::bind(fd, sa(&a), len) }, "bind unix");
    if listen {
        // SAFETY: listen(2) reads no memory.
        ok(unsafe { libc::listen(fd, 16) }, "listen unix");
    }
    (fd, a, len)
}

pub(crate) fn pipe(fds: &mut Fds) -> (c_int, c_int) {
    let mut p = [0; 2];
    // SAFETY: `p` holds two ints.
    ok(
        unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) },
        "pipe2",
    );
    (fds.keep(p[0]), fds.keep(p[1]))
}

/// A regular file holding `data`, at offset 0 (unlinked already).
pub(crate) fn file(fds: &mut Fds, data: &[u8]) -> c_int {
    static N: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "fibra-hook-differential-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let c = CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    let fd = fds.keep(unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
            0o600,
        )
    });
    // SAFETY: a NUL-terminated path.
    unsafe { libc::unlink(c.as_ptr()) };
    assert_eq!(raw_write(fd, data), data.len() as isize);
    // SAFETY: lseek reads no memory.
    unsafe { libc::lseek(fd, 0, libc::SEEK_SET) };
    fd
}

pub(crate) fn directory(fds: &mut Fds) -> c_int {
    // SAFETY: a NUL-terminated path.
    fds.keep(unsafe {
        libc::open(
            c"/tmp".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })
}

pub(crate) fn eventfd(fds: &mut Fds, v: u32) -> c_int {
    // SAFETY: eventfd reads no memory.
    fds.keep(unsafe { libc::eventfd(v, libc::EFD_CLOEXEC) })
}

/// An epoll fd watching `regs` (fd, events, data).
pub(crate) fn epoll_with(f: &mut Fds, regs: &[(c_int, u32, u64)]) -> c_int {
    // SAFETY: epoll_create1 reads no memory.
    let ep = f.keep(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) });
    for &(fd, events, data) in regs {
        let mut e = epoll_event { events, u64: data };
        // SAFETY: a valid epoll_event.
        ok(
            unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut e) },
            "epoll_ctl",
        );
    }
    ep
}

/// Puts a copy of `fd` at number `at` (which must be free).
pub(crate) fn dup_at(f: &mut Fds, fd: c_int, at: c_int) -> c_int {
    // SAFETY: fcntl with int arguments reads no memory.
    let n = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, at) };
    assert_eq!(n, at, "fd {at} is taken (or the limit is below it)");
    f.keep(n)
}

pub(crate) fn nonblock(fd: c_int) {
    // SAFETY: fcntl with int arguments reads no memory.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        ok(
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK),
            "O_NONBLOCK",
        );
    }
}

pub(crate) fn set_opt<T: Copy>(fd: c_int, level: c_int, opt: c_int, v: T) {
    // SAFETY: `v` is a valid T of the size given.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&raw const v).cast(),
            size_of::<T>() as socklen_t,
        )
    };
    ok(r, "setsockopt");
}

pub(crate) fn timeo(fd: c_int, opt: c_int, ms: i64) {
    let tv = timeval {
        tv_sec: ms / 1000,
        tv_usec: (ms % 1000) * 1000,
    };
    set_opt(fd, libc::SOL_SOCKET, opt, tv);
}

/// A close of `fd` will reset the connection.
pub(crate) fn linger0(fd: c_int) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    set_opt(fd, libc::SOL_SOCKET, libc::SO_LINGER, l);
}

pub(crate) fn shutdown(fd: c_int, how: c_int) {
    // SAFETY: shutdown(2) reads no memory.
    ok(unsafe { libc::shutdown(fd, how) }, "shutdown");
}

/// Fills `fd`'s way out (a socket's send buffer and its peer's receive
/// buffer, a pipe) until it takes no more.
pub(crate) fn fill(fd: c_int) {
    // SAFETY: fcntl with int arguments reads no memory.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    unsafe { libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) };
    let chunk = vec![b'f'; 65536];
    let mut total = 0usize;
    for _ in 0..2 {
        loop {
            let n = raw_write(fd, &chunk);
            if n <= 0 {
                break;
            }
            total += n as usize;
            assert!(total < 256 << 20, "fill: no end");
        }
        thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: as above.
    unsafe { libc::fcntl(fd, libc::F_SETFL, fl) };
}

/// Sends `data` and `fd` (SCM_RIGHTS) on unix socket `sock`, raw.
pub(crate) fn send_fd(sock: c_int, data: &[u8], fd: c_int) {
    let mut iov = iovec {
        iov_base: data.as_ptr() as *mut c_void,
        iov_len: data.len(),
    };
    let mut control = [0u64; 8];
    // SAFETY: all-zero is a valid msghdr.
    let mut msg: msghdr = unsafe { mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE computes a size.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<c_int>() as u32) } as usize;
    // SAFETY: `msg` has room for one control message holding an int.
    unsafe {
        let cm = libc::CMSG_FIRSTHDR(&msg);
        (*cm).cmsg_level = libc::SOL_SOCKET;
        (*cm).cmsg_type = libc::SCM_RIGHTS;
        (*cm).cmsg_len = libc::CMSG_LEN(size_of::<c_int>() as u32) as usize;
        ptr::write_unaligned(libc::CMSG_DATA(cm).cast::<c_int>(), fd);
    }
    // SAFETY: a valid msghdr.
    let r = unsafe { libc::syscall(libc::SYS_sendmsg, sock, &msg as *const msghdr, 0) };
    assert!(r >= 0, "send_fd: {}", std::io::Error::last_os_error());
}

/// The fds SCM_RIGHTS messages in `control` (`len` bytes) carry: each
/// replaced in `bytes` (the control buffer as recorded) by `FD!!`, and
/// described (close-on-exec, what reading it gives) in the result; closed.
pub(crate) fn scrub_rights(control: &Buf, len: usize, bytes: &mut [u8]) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut off = 0usize;
    let hdr = size_of::<libc::cmsghdr>();
    while off + hdr <= len.min(control.len) {
        let cm: libc::cmsghdr = control.get(off);
        if cm.cmsg_len < hdr || off + cm.cmsg_len > len.min(control.len) {
            break;
        }
        if cm.cmsg_level == libc::SOL_SOCKET && cm.cmsg_type == libc::SCM_RIGHTS {
            let mut p = off + hdr;
            while p + 4 <= off + cm.cmsg_len {
                let fd: c_int = control.get(p);
                // SAFETY: F_GETFD reads no memory.
                let cloexec = unsafe { libc::fcntl(fd, libc::F_GETFD) } & libc::FD_CLOEXEC != 0;
                let content = drain(fd, 0, false);
                // SAFETY: an fd the call gave us.
                unsafe { libc::close(fd) };
                seen.extend(format!("fd(cloexec={cloexec}, ").bytes());
                seen.extend(content);
                seen.extend(b")");
                bytes[p..p + 4].copy_from_slice(b"FD!!");
                p += 4;
            }
        }
        off += (cm.cmsg_len + 7) & !7;
    }
    seen
}
