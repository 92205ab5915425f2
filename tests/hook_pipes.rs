//! The `hook` feature parks reads and writes on pollable fds that are not
//! sockets — pipes, a child's stdout, eventfds, pseudo-terminals — as it
//! does on sockets: twenty fibers of one thread each waiting 300 ms take
//! about 300 ms in all, and a ticker fiber keeps ticking. Files are left
//! to the kernel.
#![cfg(feature = "hook")]

mod util;

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// How long each fiber's call waits: calls that blocked the thread would
/// stall the ticker that long each, twenty in turn. 300 ms, not 100, so
/// that [`util::assert_parked`]'s bounds (a quarter and half of the twenty
/// waits) leave room for the freezes of a shared 2-core VM, up to a second.
const WAIT: Duration = Duration::from_millis(300);
const FIBERS: usize = 20;

/// [`util::assert_parked`] with `FIBERS` fibers waiting `WAIT`.
fn assert_parked(what: &str, one: impl Fn(usize) + Clone + 'static) {
    util::assert_parked(what, FIBERS, WAIT, one)
}

#[test]
fn pipe_reads_park() {
    assert_parked("pipe read", |i| {
        let (mut r, mut w) = std::io::pipe().unwrap();
        thread::spawn(move || {
            thread::sleep(WAIT);
            w.write_all(format!("pipe {i}").as_bytes()).unwrap();
        });
        let mut got = String::new();
        r.read_to_string(&mut got).unwrap();
        assert_eq!(got, format!("pipe {i}"));
    });
}

#[test]
fn a_child_s_stdout_is_read_parked() {
    assert_parked("child stdout", |i| {
        // One spawn at a time (a spawn blocks the thread for a few ms, a
        // debug build's more on a slow host): the ticker runs in between,
        // and measures the reads.
        fibra::sleep(Duration::from_millis(8) * i as u32);
        let mut child = Command::new("sh")
            .args([
                "-c",
                &format!("sleep {}; echo child {i}", WAIT.as_secs_f64()),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, format!("child {i}\n"));
        assert!(fibra::process::wait(&mut child).unwrap().success());
    });
}

/// A blocking pipe write that fills the pipe parks until the reader (a
/// slow plain thread) has made room, and every byte arrives in order.
///
/// The reader takes 16 KiB every 50 ms, so the mebibyte, through a 64 KiB
/// pipe, takes at least 60 x 50 ms = 3 s to write: a write that blocked
/// the thread would stall the ticker that long. The bound is half of it,
/// five `WAIT`s, room for a shared VM's freezes of up to a second (it was
/// 75 ms against a 2 ms reader's ~128 ms, which a loaded machine's turns
/// come near).
#[test]
fn a_pipe_write_that_fills_the_pipe_parks() {
    const LEN: usize = 1 << 20;
    // Made before the ticker runs: a debug build takes tens of ms for it.
    let data: std::sync::Arc<Vec<u8>> = (0..LEN)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into();
    let (took, gap) = util::side_by_side(FIBERS, move |i| {
        if i > 0 {
            return; // one writer; the others only keep the count
        }
        let (mut r, mut w) = std::io::pipe().unwrap();
        let reader = thread::spawn(move || {
            let mut got = Vec::with_capacity(LEN);
            let mut buf = [0u8; 16 * 1024];
            loop {
                thread::sleep(Duration::from_millis(50));
                match r.read(&mut buf).unwrap() {
                    0 => return got,
                    n => got.extend_from_slice(&buf[..n]),
                }
            }
        });
        w.write_all(&data).unwrap();
        drop(w);
        let data = data.clone();
        let same = fibra::spawn_blocking(move || reader.join().unwrap() == *data);
        assert!(same, "the bytes differ");
    });
    println!("pipe write: {took:?}, longest ticker gap {gap:?}");
    assert!(gap < WAIT * 5, "the ticker stalled {gap:?}");
}

#[test]
fn eventfd_reads_park() {
    assert_parked("eventfd read", |_| {
        // SAFETY: a new eventfd, owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: `fd` is ours alone.
        let efd = std::sync::Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        let writer = efd.clone();
        thread::spawn(move || {
            thread::sleep(WAIT);
            let one = 7u64;
            // SAFETY: 8 bytes of `one`.
            unsafe { libc::write(writer.as_raw_fd(), (&raw const one).cast(), 8) };
        });
        let mut value = 0u64;
        // SAFETY: 8 bytes of `value`.
        let n = unsafe { libc::read(efd.as_raw_fd(), (&raw mut value).cast(), 8) };
        assert_eq!(n, 8);
        assert_eq!(value, 7);
    });
}

/// A pseudo-terminal (a character device the kernel may read only
/// blocking) parks too: until `poll` says it is readable.
#[test]
fn pty_reads_park() {
    // SAFETY: posix_openpt and friends on a new master fd (checked).
    let master = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY) };
    if master < 0 {
        eprintln!("SKIPPED: no pseudo-terminals here");
        return;
    }
    // SAFETY: our master fd.
    unsafe { libc::close(master) };
    assert_parked("pty read", |_| {
        // SAFETY: as above; the slave's name is copied out at once.
        let (master, slave) = unsafe {
            let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
            assert!(m >= 0);
            assert_eq!(libc::grantpt(m), 0);
            assert_eq!(libc::unlockpt(m), 0);
            let mut name = [0 as libc::c_char; 128];
            assert_eq!(libc::ptsname_r(m, name.as_mut_ptr(), name.len()), 0);
            let s = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY);
            assert!(s >= 0);
            (OwnedFd::from_raw_fd(m), OwnedFd::from_raw_fd(s))
        };
        thread::spawn(move || {
            thread::sleep(WAIT);
            let mut m = std::fs::File::from(master);
            m.write_all(b"line\n").unwrap();
            thread::sleep(Duration::from_secs(1)); // kept open meanwhile
        });
        let mut buf = [0u8; 64];
        let mut s = std::fs::File::from(slave);
        let n = s.read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"line\n");
    });
}

/// A pipe the user made non-blocking still says `WouldBlock` at once, and
/// a file is read by the kernel as before.
#[test]
fn nonblocking_pipes_and_files_are_left_as_they_are() {
    fibra::run(|| {
        let (mut r, _w) = std::io::pipe().unwrap();
        // SAFETY: F_SETFL on our pipe.
        unsafe { libc::fcntl(r.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        let start = Instant::now();
        let err = r.read(&mut [0u8; 8]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WouldBlock);
        assert!(start.elapsed() < WAIT);
        let text = std::fs::read_to_string("Cargo.toml").unwrap();
        assert!(text.contains("[package]"));
    });
}
