//! The epoll floor's echo server: the least an epoll server does per
//! round trip, what every runtime's echo server is measured against (see
//! `echo::server`, kinds `epoll-floor`, `epoll-floor-bufs` and
//! `epoll-floor-2w`).

/// Where the floor's server reads to.
#[derive(Clone, Copy)]
pub(crate) enum Buffers {
    /// One buffer for every connection: always in cache, the least memory
    /// any server can touch per round trip.
    Shared,
    /// A 16 KiB buffer per connection, as the fibra, tokio and may servers
    /// have (on the fiber's stack, in the task, on the coroutine's stack):
    /// the same program as theirs, minus the runtime. At 1 000
    /// connections that is 16 MiB of buffers, and each round trip touches
    /// a cold one.
    PerConnection,
}

/// The least an epoll server can do per round trip: one thread, one
/// edge-triggered registration per socket, no tasks, no timers, no
/// wake-ups; per readable event, `recv` until a short read (which, for a
/// stream socket, means it was drained) and `send` the bytes back. What a
/// runtime costs is what it adds to this.
pub(crate) fn serve(listener: std::net::TcpListener, buffers: Buffers) {
    use std::os::fd::{AsRawFd, IntoRawFd};
    listener.set_nonblocking(true).unwrap();
    let lfd = listener.as_raw_fd();
    // SAFETY: plain epoll calls on descriptors this function owns; the
    // buffers passed to recv/send are valid for their lengths.
    unsafe {
        let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
        assert!(ep >= 0);
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: lfd as u64,
        };
        assert_eq!(libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, lfd, &mut ev), 0);
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        let mut shared = vec![0u8; 16 * 1024];
        // Indexed by fd; a buffer is allocated at accept, as a task's is.
        let mut per_conn: Vec<Option<Box<[u8]>>> = Vec::new();
        // `TOUCH_PAGES=N`: after each wake-up, touch N more distinct pages
        // of memory (a byte each), to price what a runtime's larger
        // footprint per trip costs (see `footprint.sh`). 0 by default.
        let touch_pages: usize = std::env::var("TOUCH_PAGES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut touch = vec![0u8; touch_pages * 4096];
        // `SECOND_THREAD=1`: start a thread that only sleeps, as fibra's
        // watchdog mostly does: in a process of several threads the kernel
        // takes a reference on the file in every fd syscall.
        if std::env::var_os("SECOND_THREAD").is_some_and(|v| v == "1") {
            std::thread::spawn(|| {
                loop {
                    std::thread::park();
                }
            });
        }
        loop {
            let n = libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, -1);
            for page in touch.chunks_exact_mut(4096) {
                let byte = std::ptr::read_volatile(&page[0]);
                std::ptr::write_volatile(&mut page[0], byte.wrapping_add(1));
            }
            for ev in &events[..n.max(0) as usize] {
                let fd = ev.u64 as i32;
                if fd == lfd {
                    while let Ok((s, _)) = listener.accept() {
                        s.set_nonblocking(true).unwrap();
                        s.set_nodelay(true).unwrap();
                        let cfd = s.into_raw_fd();
                        if let Buffers::PerConnection = buffers {
                            if per_conn.len() <= cfd as usize {
                                per_conn.resize_with(cfd as usize + 1, || None);
                            }
                            per_conn[cfd as usize] = Some(vec![0u8; 16 * 1024].into());
                        }
                        let mut ev = libc::epoll_event {
                            events: (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
                            u64: cfd as u64,
                        };
                        libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, cfd, &mut ev);
                    }
                    continue;
                }
                let buf: &mut [u8] = match buffers {
                    Buffers::Shared => &mut shared,
                    Buffers::PerConnection => per_conn[fd as usize].as_mut().unwrap(),
                };
                let mut closed = false;
                loop {
                    let got = libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0);
                    if got <= 0 {
                        closed = got == 0 || *libc::__errno_location() != libc::EAGAIN;
                        break;
                    }
                    let mut sent = 0;
                    while sent < got as usize {
                        // The peer reads all the time: a full send buffer
                        // drains in a moment, so retrying is enough here.
                        let w = libc::send(
                            fd,
                            buf[sent..].as_ptr().cast(),
                            got as usize - sent,
                            libc::MSG_NOSIGNAL,
                        );
                        if w > 0 {
                            sent += w as usize;
                        } else if w < 0 && *libc::__errno_location() != libc::EAGAIN {
                            break;
                        }
                    }
                    if (got as usize) < buf.len() {
                        break; // drained: the next event says when there is more
                    }
                }
                if closed {
                    libc::close(fd); // also leaves the epoll set
                    if let Some(b) = per_conn.get_mut(fd as usize) {
                        *b = None;
                    }
                }
            }
        }
    }
}
