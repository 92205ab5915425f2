//! loom models of a readiness fd following its channel (`ready_cell.rs`):
//! a message sent while the receiver drains, on each flavor. Whatever the
//! interleaving, the fd is readable whenever the channel has something
//! for `try_recv` once the sender is done, and clear once a `try_recv`
//! has found the channel empty. (The eventfd is the real one: its write
//! and read are single steps of each thread, next to the `rung` flag loom
//! does see.)
//! (`RUSTFLAGS="--cfg loom" cargo test --release --lib -- loom`.)
//!
//! The bug these catch was planted and seen: with the re-arm's look at
//! the channel after registering the watcher ignored (`rearm` not ringing
//! when `arm` says a receive would go ahead), all three models fail: a
//! message sent while a re-arm had the watcher out of the line is left
//! behind a clear fd.

use std::os::fd::AsRawFd;

use loom::thread;

use crate::atomic::model;
use crate::channel::{ReadyFd, Receiver, Sender, bounded, unbounded, unbounded_locked};

/// Whether `fd` is readable now (a real `poll` that does not wait).
fn readable(fd: &ReadyFd<u8>) -> bool {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the call's duration.
    let n = unsafe { libc::poll(&mut pfd, 1, 0) };
    assert!(n >= 0, "poll: {}", std::io::Error::last_os_error());
    n == 1
}

/// A sender thread sends two messages while the receiver tries twice (the
/// first message fires the watcher, so the second may come while a re-arm
/// has it out of the line); then the fd tells the truth, a drain to `Empty` clears it, and the
/// last sender going (a disconnection is something for `try_recv` too)
/// makes it readable again.
fn sent_while_draining(make: fn() -> (Sender<u8>, Receiver<u8>)) {
    model(3, move || {
        let (s, r) = make();
        let last = s.clone();
        let fd = r.ready_fd().unwrap();
        let sender = thread::spawn(move || {
            s.send(1).unwrap();
            s.send(2).unwrap();
        });
        let mut got = 0;
        for _ in 0..2 {
            got += r.try_recv().is_ok() as usize;
        }
        sender.join().unwrap();
        if got < 2 {
            // A message is in the channel: the fd must say so.
            assert!(readable(&fd), "a message waits behind a clear fd");
        }
        while r.try_recv().is_ok() {
            got += 1;
        }
        assert_eq!(got, 2);
        // The try_recv that found the channel empty cleared the fd, and
        // nothing else can come in while `last` stays.
        assert!(!readable(&fd), "an empty channel behind a readable fd");
        drop(last);
        assert!(readable(&fd), "a disconnection behind a clear fd");
    });
}

#[test]
fn loom_ready_fd_list() {
    sent_while_draining(unbounded);
}

#[test]
fn loom_ready_fd_ring() {
    sent_while_draining(|| bounded(2));
}

#[test]
fn loom_ready_fd_locked() {
    sent_while_draining(unbounded_locked);
}
