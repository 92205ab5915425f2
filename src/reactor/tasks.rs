//! Async tasks' side of the reactor: a waker per socket direction, the
//! sleeps of `fibra::Sleep`, and the door through which their wakers leave
//! (see "Tasks" in the module docs).

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::task::Waker;

use mio::unix::SourceFd;

use super::timerfd::{new_timerfd, set_timerfd};
use super::{Reactor, TASK_TIMER};
use crate::io::Interest;
use crate::time::wheel::TimerKey;

/// Wakers handed out of the reactor, to be woken (`wake`) or dropped
/// (`drop`) where no borrow of fibra's state is live; see [`Polled`].
#[derive(Default)]
pub(super) struct TaskWakes {
    pub(super) wake: Vec<Waker>,
    pub(super) drop: Vec<Waker>,
}

impl Drop for TaskWakes {
    fn drop(&mut self) {
        if self.wake.is_empty() && self.drop.is_empty() {
            return; // the common case: no task polls this runtime's sockets
        }
        let (wake, dropped) = (
            std::mem::take(&mut self.wake),
            std::mem::take(&mut self.drop),
        );
        let run = move || {
            drop(dropped);
            for waker in wake {
                waker.wake();
            }
        };
        // Through the scheduler's door for user code: a waker that parks
        // or panics in there is reported rather than left to corrupt a
        // poll half done.
        match crate::runtime::context::current() {
            Some(core) => core.callback("Waker::wake", run),
            None => run(),
        }
    }
}

impl Reactor {
    /// Whether `waker` is already the task waker of socket `owner` on `fd`
    /// for `interest` (one direction). Compares pointers: runs no user code.
    #[cfg_attr(not(feature = "futures-io"), allow(dead_code))]
    pub(crate) fn task_will_wake(
        &self,
        fd: RawFd,
        owner: u64,
        interest: Interest,
        waker: &Waker,
    ) -> bool {
        self.owned(fd, owner).is_some_and(|key| {
            let src = &self.sources[key];
            let slot = if interest.is_readable() {
                &src.reader
            } else {
                &src.writer
            };
            slot.as_ref().is_some_and(|w| w.will_wake(waker))
        })
    }

    /// Makes `waker` the task waker of the socket source `key` for
    /// `interest` (one direction); a waker it replaces is dropped after the
    /// next poll.
    #[cfg_attr(not(feature = "futures-io"), allow(dead_code))]
    pub(crate) fn set_task(&mut self, key: usize, interest: Interest, waker: Waker) {
        let src = &mut self.sources[key];
        let slot = if interest.is_readable() {
            &mut src.reader
        } else {
            &mut src.writer
        };
        self.unneeded.extend(slot.replace(waker));
    }

    /// Makes the timerfd of tasks' sleeps, if it is not there yet; call
    /// before [`Reactor::add_task_timer`].
    #[cfg_attr(not(feature = "futures-io"), allow(dead_code))]
    pub(crate) fn task_timers_ready(&mut self) -> io::Result<()> {
        if self.task_timerfd.is_none() {
            let fd = new_timerfd()?;
            self.poll.registry().register(
                &mut SourceFd(&fd.as_raw_fd()),
                TASK_TIMER,
                mio::Interest::READABLE,
            )?;
            self.task_timerfd = Some(fd);
        }
        Ok(())
    }

    /// Arms a sleep of an async task: `waker` is woken once `deadline`
    /// (absolute CLOCK_MONOTONIC ns) has passed. After
    /// [`Reactor::task_timers_ready`] said `Ok` (else the sleep fires only
    /// when something else wakes the reactor).
    #[cfg_attr(not(feature = "futures-io"), allow(dead_code))]
    pub(crate) fn add_task_timer(&mut self, deadline: u64, waker: Waker) -> TimerKey {
        debug_assert!(self.task_timerfd.is_some());
        self.task_timers.insert(deadline, waker)
    }

    /// Disarms a task's sleep (a stale key, of one that fired, is ignored);
    /// its waker is dropped after the next poll.
    #[cfg_attr(not(feature = "futures-io"), allow(dead_code))]
    pub(crate) fn cancel_task_timer(&mut self, key: TimerKey) {
        self.unneeded.extend(self.task_timers.cancel(key));
    }

    /// Sets the tasks' timerfd to their wheel's next expiration.
    pub(super) fn arm_task_timer(&mut self) {
        let (Some(fd), Some(at)) = (&self.task_timerfd, self.task_timers.next_expiration()) else {
            return;
        };
        if self.task_armed != Some(at) {
            set_timerfd(fd, at);
            self.task_armed = Some(at);
        }
    }
}
