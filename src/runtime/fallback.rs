//! The fallback reactor (feature `futures-io`): where an async task's
//! waker goes when it polls a socket, or a [`Sleep`](crate::Sleep), on a
//! thread without a fibra runtime (a tokio worker, a thread in
//! `futures::executor::block_on`).
//!
//! It is a fibra runtime on a thread of its own, `fibra-io`, started on
//! first use and kept for the life of the process. One fiber there takes
//! requests from a channel and registers their wakers with its reactor
//! exactly as a poll on that thread would; the reactor wakes them from its
//! poll loop. Requests from one thread arrive in the order they were sent,
//! so a socket's `forget` (sent before its fd is closed) always comes
//! after its registrations, and before those of a later socket that reuses
//! the fd number.

use std::os::fd::RawFd;
use std::sync::{Mutex, OnceLock};
use std::task::Waker;

use crate::io::Interest;
use crate::scheduler::context;
use crate::scheduler::readiness;
use crate::sync::mpsc;

enum Request {
    /// Wake `waker` when socket `uid` on `fd` is ready for `interest`.
    Socket {
        fd: RawFd,
        uid: u64,
        interest: Interest,
        waker: Waker,
    },
    /// Socket `uid` on `fd` is about to be closed.
    Forget { fd: RawFd, uid: u64 },
    /// Wake `waker` at `deadline` (CLOCK_MONOTONIC ns).
    Timer { deadline: u64, waker: Waker },
}

fn send(request: Request) {
    static SENDER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    let sender = SENDER.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        crate::scheduler::helper::spawn_quiet(|| {
            std::thread::Builder::new()
                .name("fibra-io".into())
                .spawn(move || super::run(move || serve(rx)))
        })
        .expect("fibra: cannot start the fallback reactor's thread");
        Mutex::new(tx)
    });
    let sender = sender.lock().unwrap_or_else(|e| e.into_inner());
    // The receiver lives as long as the process: the send cannot fail.
    let _ = sender.send(request);
}

/// The fallback thread's one fiber.
fn serve(rx: mpsc::Receiver<Request>) {
    let core = context::expect("the fallback reactor");
    for request in rx.iter() {
        match request {
            Request::Socket {
                fd,
                uid,
                interest,
                waker,
            } => {
                // Re-armed too: the task said `WouldBlock` before this
                // request reached us, and this thread's poll may have taken
                // the socket's edge in between (a reply that came at once),
                // with no waker to wake; `EPOLL_CTL_MOD` reports it again.
                if readiness::register_task(core, fd, uid, interest, &waker).is_err()
                    || readiness::rearm_socket(core, fd, uid).is_err()
                {
                    // The fd is gone (closed before we got here) or cannot
                    // be watched: let the task poll again and see.
                    waker.wake();
                }
            }
            Request::Forget { fd, uid } => readiness::deregister_socket(core, fd, uid),
            Request::Timer { deadline, waker } => {
                if let Err(waker) = readiness::add_task_timer(core, deadline, waker) {
                    waker.wake(); // no timer: a spurious wake, not a hang
                }
            }
        }
    }
}

/// Registers a task's waker for socket `uid` on `fd` (see the module docs).
pub(crate) fn register(fd: RawFd, uid: u64, interest: Interest, waker: Waker) {
    send(Request::Socket {
        fd,
        uid,
        interest,
        waker,
    });
}

/// Socket `uid` on `fd` is about to be closed: forget its registration.
pub(crate) fn forget(fd: RawFd, uid: u64) {
    send(Request::Forget { fd, uid });
}

/// Wakes `waker` at `deadline`. Not cancellable: a sleep dropped earlier
/// gets one spurious wake-up at its deadline, which wakers tolerate.
pub(crate) fn timer(deadline: u64, waker: Waker) {
    send(Request::Timer { deadline, waker });
}
