//! The floor of any stackful design: the epoll floor's loop, but each
//! connection is a corosensei coroutine with its own stack and its 16 KiB
//! buffer on it, written as fibra's echo fiber is (read; on a short read
//! the socket is drained, so the next read waits for an event first). No
//! scheduler, no timers, no wake-up list: an event resumes the coroutine of
//! its fd directly. What this costs over the epoll floor is what any
//! runtime of stackful tasks pays (a stack's lines and two switches a
//! trip); what fibra costs over this is its runtime.

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::os::fd::{AsRawFd, IntoRawFd};

/// A connection: runs until the peer closes, suspending whenever its socket
/// has nothing to read.
type Conn = Coroutine<(), (), (), DefaultStack>;

fn connection(yielder: &Yielder<(), ()>, fd: i32) {
    let mut buf = [0u8; 16 * 1024];
    let mut drained = false;
    loop {
        if std::mem::take(&mut drained) {
            yielder.suspend(());
        }
        // SAFETY: `fd` is this coroutine's open socket; `buf` is valid for
        // its length.
        let got = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if got < 0 {
            // SAFETY: reads this thread's errno.
            if unsafe { *libc::__errno_location() } == libc::EAGAIN {
                drained = true;
                continue;
            }
            return;
        }
        if got == 0 {
            return;
        }
        let mut sent = 0;
        while sent < got as usize {
            // SAFETY: as above; the slice is within `buf`.
            let w = unsafe {
                libc::send(
                    fd,
                    buf[sent..].as_ptr().cast(),
                    got as usize - sent,
                    libc::MSG_NOSIGNAL,
                )
            };
            if w > 0 {
                sent += w as usize;
            } else if w < 0 && unsafe { *libc::__errno_location() } != libc::EAGAIN {
                return;
            }
        }
        drained = (got as usize) < buf.len();
    }
}

/// Serves until killed, on this thread.
pub fn serve(listener: std::net::TcpListener) {
    listener.set_nonblocking(true).unwrap();
    let lfd = listener.as_raw_fd();
    // Indexed by fd.
    let mut conns: Vec<Option<Conn>> = Vec::new();
    // SAFETY: plain epoll calls on descriptors this function owns.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    assert!(ep >= 0);
    let add = |fd: i32, events: i32| {
        let mut ev = libc::epoll_event {
            events: events as u32,
            u64: fd as u64,
        };
        // SAFETY: as above.
        assert_eq!(
            unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) },
            0
        );
    };
    add(lfd, libc::EPOLLIN | libc::EPOLLET);
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    loop {
        // SAFETY: as above; `events` is valid for its length.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, -1) };
        for ev in &events[..n.max(0) as usize] {
            let fd = ev.u64 as i32;
            if fd == lfd {
                while let Ok((s, _)) = listener.accept() {
                    s.set_nonblocking(true).unwrap();
                    s.set_nodelay(true).unwrap();
                    let cfd = s.into_raw_fd();
                    if conns.len() <= cfd as usize {
                        conns.resize_with(cfd as usize + 1, || None);
                    }
                    let stack = DefaultStack::new(64 * 1024).unwrap();
                    let conn = Coroutine::with_stack(stack, move |y: &Yielder<(), ()>, ()| {
                        connection(y, cfd)
                    });
                    conns[cfd as usize] = Some(conn);
                    add(cfd, libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLET);
                    resume(&mut conns, cfd);
                }
                continue;
            }
            resume(&mut conns, fd);
        }
    }
}

/// Runs `fd`'s coroutine to its next suspension; closes the socket when it
/// returns.
fn resume(conns: &mut [Option<Conn>], fd: i32) {
    let Some(conn) = conns[fd as usize].as_mut() else {
        return;
    };
    if let CoroutineResult::Return(()) = conn.resume(()) {
        conns[fd as usize] = None;
        // SAFETY: the coroutine is gone; the fd is ours (also leaves the
        // epoll set).
        unsafe { libc::close(fd) };
    }
}
