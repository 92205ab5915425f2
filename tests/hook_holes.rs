//! The holes a fourth audit found where the `hook` feature meets libc
//! (issue 61), each as a proof of concept in our own words: every test
//! here failed before its fix. (The two in the stall sampler's signal, and
//! the lost signals, are in `tests/signal_holes.rs`: they need no hook.)
#![cfg(feature = "hook")]

mod util;

use std::ffi::{CStr, CString};
use std::os::fd::AsRawFd;
use std::time::Duration;

use libc::{c_char, c_int, hostent};

unsafe extern "C" {
    /// glibc's (the `libc` crate leaves it out); the hook's with the feature.
    fn gethostbyname(name: *const c_char) -> *mut hostent;
}

/// Two pages, the second inaccessible: `end()` is the last byte before it.
struct PageEnd {
    base: *mut u8,
    page: usize,
}

impl PageEnd {
    fn new() -> PageEnd {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        // SAFETY: a fresh anonymous mapping, checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        // SAFETY: the second page of our own mapping.
        let r =
            unsafe { libc::mprotect(base.cast::<u8>().add(page).cast(), page, libc::PROT_NONE) };
        assert_eq!(r, 0);
        PageEnd {
            base: base.cast(),
            page,
        }
    }

    /// `bytes` bytes ending at the inaccessible page.
    fn tail(&self, bytes: usize) -> *mut u8 {
        self.base.wrapping_add(self.page - bytes)
    }
}

impl Drop for PageEnd {
    fn drop(&mut self) {
        // SAFETY: our own mapping, no longer used.
        unsafe { libc::munmap(self.base.cast(), 2 * self.page) };
    }
}

fn pipe() -> (c_int, c_int) {
    let mut fds = [0; 2];
    // SAFETY: a valid array for two fds.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    (fds[0], fds[1])
}

fn close(fd: c_int) {
    // SAFETY: our own fd.
    unsafe { libc::close(fd) };
}

/// Bit `fd` of an 8-byte set (fds below 64), as the kernel numbers them.
fn bit(fd: c_int) -> u64 {
    1 << fd
}

/// Hole 1: a set sized for its `nfds` — 8 bytes for fds below 64, as
/// libevent's select backend sizes them — that ends where the page ends.
/// The hook read and wrote all 128 bytes of an `fd_set`: SIGSEGV. Here a
/// select in a fiber that finds its fd ready at once, one that parks until
/// it is, and one that times out, all on such sets. (A child process: the
/// fault would take the whole test binary.)
#[test]
fn select_touches_only_the_words_of_its_nfds() {
    const NAME: &str = "select_touches_only_the_words_of_its_nfds";
    if !util::is_child(NAME) {
        util::assert_child_ok(NAME);
        return;
    }
    let (r, w) = pipe();
    assert!(r < 64 && w < 64, "fds {r} {w}: this test wants small fds");
    let nfds = r.max(w) + 1;
    let pages = [PageEnd::new(), PageEnd::new()];
    let rset = pages[0].tail(8).cast::<u64>();
    let wset = pages[1].tail(8).cast::<u64>();
    fibra::run(move || {
        // Writable at once.
        // SAFETY: our 8-byte sets, enough for `nfds` <= 64.
        let n = unsafe {
            rset.write(0);
            wset.write(bit(w));
            let mut tv = libc::timeval {
                tv_sec: 5,
                tv_usec: 0,
            };
            libc::select(
                nfds,
                rset.cast(),
                wset.cast(),
                std::ptr::null_mut(),
                &mut tv,
            )
        };
        assert_eq!(n, 1);
        // SAFETY: as above.
        assert_eq!(unsafe { wset.read() }, bit(w));
        // Readable after a park: another fiber writes 30 ms later.
        let writer = fibra::spawn(move || {
            fibra::sleep(Duration::from_millis(30));
            // SAFETY: one byte from a valid buffer to our pipe.
            assert_eq!(unsafe { libc::write(w, b"x".as_ptr().cast(), 1) }, 1);
        });
        // SAFETY: as above; a null timeout waits for ever.
        let n = unsafe {
            rset.write(bit(r));
            libc::select(
                nfds,
                rset.cast(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        writer.join().unwrap();
        assert_eq!(n, 1);
        // SAFETY: as above.
        assert_eq!(unsafe { rset.read() }, bit(r));
        let mut byte = 0u8;
        // SAFETY: one byte into a valid buffer.
        assert_eq!(unsafe { libc::read(r, (&raw mut byte).cast(), 1) }, 1);
        // A timeout, after parking: the set comes back empty.
        // SAFETY: as above.
        let n = unsafe {
            rset.write(bit(r));
            let mut tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 30_000,
            };
            libc::select(
                nfds,
                rset.cast(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut tv,
            )
        };
        assert_eq!(n, 0);
        // SAFETY: as above.
        assert_eq!(unsafe { rset.read() }, 0);
    });
    close(r);
    close(w);
    println!("CHILD OK");
}

/// Hole 1, its other half: the bytes after a small set are the caller's,
/// and the caller may change them while select waits (another fiber
/// does, here). The hook wrote back the 128 bytes it had copied when the
/// call began, over them.
#[test]
fn select_never_writes_stale_bytes_after_its_sets() {
    let (r, w) = pipe();
    assert!(r < 64, "fd {r}: this test wants small fds");
    // One word of set, then the caller's own data.
    let mem: &'static mut [u64; 16] = Box::leak(Box::new([0u64; 16]));
    let mem_addr = mem.as_mut_ptr() as usize;
    fibra::run(move || {
        let other = fibra::spawn(move || {
            fibra::sleep(Duration::from_millis(30));
            // SAFETY: the words after the set, which select must not touch.
            unsafe {
                let p = mem_addr as *mut u64;
                for i in 1..16 {
                    p.add(i).write(0xC0FFEE + i as u64);
                }
            }
            fibra::sleep(Duration::from_millis(30));
            // SAFETY: one byte from a valid buffer to our pipe.
            assert_eq!(unsafe { libc::write(w, b"x".as_ptr().cast(), 1) }, 1);
        });
        let set = mem_addr as *mut u64;
        // SAFETY: a one-word set for fds below 64; the sets are read and
        // written by select only up to `nfds`.
        let n = unsafe {
            set.write(bit(r));
            libc::select(
                r + 1,
                set.cast(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        other.join().unwrap();
        assert_eq!(n, 1);
        // SAFETY: our words.
        unsafe {
            assert_eq!(set.read(), bit(r));
            for i in 1..16 {
                assert_eq!(
                    set.add(i).read(),
                    0xC0FFEE + i as u64,
                    "word {i} after the set"
                );
            }
        }
    });
    close(r);
    close(w);
}

/// Hole 2: `gethostbyname`'s answer lives in glibc's one static `hostent`;
/// the lookup parks the fiber, so fibers of one thread overlap between
/// the call and the reading of its answer. Each of 100 fibers looks up its
/// own address, lets the others run, then reads its answer: every one
/// must read its own host.
#[test]
fn gethostbyname_answers_each_fiber_with_its_own_host() {
    let wrong = fibra::run(|| {
        let fibers: Vec<_> = (0..100)
            .map(|i| {
                fibra::spawn(move || {
                    let name = format!("127.0.{}.{}", i / 10, i % 10 + 1);
                    let c = CString::new(name.clone()).unwrap();
                    // SAFETY: a NUL-terminated name.
                    let h = unsafe { gethostbyname(c.as_ptr()) };
                    assert!(!h.is_null(), "no answer for {name}");
                    for _ in 0..5 {
                        fibra::yield_now();
                    }
                    // SAFETY: the answer is valid until this fiber's next call.
                    let (got, addr) = unsafe {
                        let h = &*h;
                        let got = CStr::from_ptr(h.h_name).to_string_lossy().into_owned();
                        assert_eq!(h.h_length, 4);
                        let first = *h.h_addr_list;
                        assert!(!first.is_null());
                        let a = std::slice::from_raw_parts(first.cast::<u8>(), 4);
                        (got, format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3]))
                    };
                    usize::from(got != name || addr != name)
                })
            })
            .collect();
        fibers.into_iter().map(|f| f.join().unwrap()).sum::<usize>()
    });
    assert_eq!(wrong, 0, "{wrong} of 100 lookups read another fiber's host");
}

/// Hole 3: `ppoll`'s timeout is `const`, and glibc hands the kernel a
/// copy; the hook gave the kernel the caller's, which it rewrote with the
/// time left. With a signal mask (the path that goes to the kernel), in a
/// fiber and on a plain thread.
#[test]
fn ppoll_leaves_its_timeout_alone() {
    fn check(place: &str) {
        let (r, w) = pipe();
        let mut pfd = libc::pollfd {
            fd: r,
            events: libc::POLLIN,
            revents: 0,
        };
        let timeout = libc::timespec {
            tv_sec: 0,
            tv_nsec: 20_000_000,
        };
        // SAFETY: an empty set is a valid mask.
        let mut mask: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: a valid set to fill.
        unsafe { libc::sigemptyset(&mut mask) };
        // SAFETY: one valid pollfd, a valid timeout and mask.
        let n = unsafe { libc::ppoll(&mut pfd, 1, &timeout, &mask) };
        assert_eq!(n, 0, "{place}");
        assert_eq!(
            (timeout.tv_sec, timeout.tv_nsec),
            (0, 20_000_000),
            "{place}: timeout rewritten"
        );
        close(r);
        close(w);
    }
    check("plain thread");
    fibra::run(|| check("fiber"));
}

/// Hole 3's kin: `pselect` and `select` as glibc's. `pselect` leaves its
/// timeout alone; `select` on a plain thread and in a fiber writes back
/// what is left (zero after a timeout).
#[test]
fn pselect_leaves_its_timeout_alone_and_select_writes_what_is_left() {
    fn check(place: &str) {
        let (r, w) = pipe();
        let timeout = libc::timespec {
            tv_sec: 0,
            tv_nsec: 20_000_000,
        };
        for masked in [false, true] {
            // SAFETY: an fd_set is plain data; FD_ZERO/FD_SET on our set.
            let mut set: libc::fd_set = unsafe { std::mem::zeroed() };
            // SAFETY: an empty set is a valid mask.
            let mut mask: libc::sigset_t = unsafe { std::mem::zeroed() };
            // SAFETY: our set and fd below FD_SETSIZE; a valid mask.
            let n = unsafe {
                libc::FD_SET(r, &mut set);
                libc::sigemptyset(&mut mask);
                let maskp = if masked {
                    &raw const mask
                } else {
                    std::ptr::null()
                };
                libc::pselect(
                    r + 1,
                    &mut set,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    &timeout,
                    maskp,
                )
            };
            assert_eq!(n, 0, "{place}");
            assert_eq!(
                (timeout.tv_sec, timeout.tv_nsec),
                (0, 20_000_000),
                "{place}: rewritten"
            );
        }
        // SAFETY: as above.
        let mut set: libc::fd_set = unsafe { std::mem::zeroed() };
        let mut tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 20_000,
        };
        // SAFETY: as above; a valid timeval.
        let n = unsafe {
            libc::FD_SET(r, &mut set);
            libc::select(
                r + 1,
                &mut set,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut tv,
            )
        };
        assert_eq!(n, 0, "{place}");
        assert_eq!(
            (tv.tv_sec, tv.tv_usec),
            (0, 0),
            "{place}: select's time left"
        );
        // A negative timeout: EINVAL, as glibc says.
        let mut tv = libc::timeval {
            tv_sec: -1,
            tv_usec: 0,
        };
        // SAFETY: as above.
        let n = unsafe {
            libc::select(
                r + 1,
                &mut set,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut tv,
            )
        };
        assert_eq!(n, -1, "{place}");
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EINVAL),
            "{place}"
        );
        close(r);
        close(w);
    }
    check("plain thread");
    fibra::run(|| check("fiber"));
}

/// `select` in a fiber over a real socket pair, as an event loop uses it:
/// the hook's sets are the kernel's answer.
#[test]
fn select_in_a_fiber_sees_a_socket_become_readable() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let client = std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        std::io::Write::write_all(&mut s, b"hi").unwrap();
        std::thread::sleep(Duration::from_millis(100));
    });
    let (s, _) = l.accept().unwrap();
    let fd = s.as_raw_fd();
    fibra::run(move || {
        let words = (fd as usize + 1).div_ceil(64);
        let mut set = vec![0u64; words];
        set[fd as usize / 64] |= 1 << (fd % 64);
        // SAFETY: a set of `words` words, enough for `fd + 1` fds.
        let n = unsafe {
            libc::select(
                fd + 1,
                set.as_mut_ptr().cast(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(n, 1);
        assert_eq!(set[fd as usize / 64], 1 << (fd % 64));
    });
    client.join().unwrap();
}
