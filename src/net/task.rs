//! An async task's waker in a runtime's reactor (feature `futures-io`):
//! what a socket's poll does on a thread with a runtime, and what the
//! fallback reactor's thread does for the others.

use std::io;
use std::os::fd::RawFd;
use std::task::Waker;

use crate::io::Interest;
use crate::runtime::core::Core;

/// Makes `waker` the task waker of socket `uid` on `fd` for `interest` (one
/// direction) in `core`'s reactor, registering the fd there if it is not
/// yet. Called on `core`'s thread.
///
/// The waker is user code: it is compared (pointers only) inside a borrow,
/// but cloned, and any clone dropped, outside; the reactor drops the waker
/// it replaces after its next poll.
#[cfg(feature = "futures-io")]
pub(crate) fn register_task(
    core: &Core,
    fd: RawFd,
    uid: u64,
    interest: Interest,
    waker: &Waker,
) -> io::Result<()> {
    // SAFETY: on the runtime's thread; short borrow; `will_wake` compares
    // pointers and runs no user code.
    if unsafe { core.local() }
        .reactor
        .task_will_wake(fd, uid, interest, waker)
    {
        return Ok(());
    }
    // User code (a waker's clone), with no borrow live.
    let mut waker = Some(waker.clone());
    let mut stale = Vec::new();
    let registered = {
        // SAFETY: on the runtime's thread; the borrow ends with this block
        // and runs no user code: the waker is moved, not dropped, in here.
        let reactor = &mut unsafe { core.local() }.reactor;
        reactor.socket(fd, uid, &mut stale).map(|key| {
            if let Some(waker) = waker.take() {
                reactor.set_task(key, interest, waker);
            }
        })
    };
    drop(waker); // on error, the clone: user code, no borrow live
    for t in stale {
        core.wake(t, crate::runtime::core::Wake::Unparked);
    }
    registered
}
