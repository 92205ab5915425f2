//! Async tasks' side of the reactor: a waker per socket direction, the
//! sleeps of `fibra::Sleep`, and the door through which their wakers leave
//! (see "Tasks" in the module docs).

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::task::Waker;

use mio::unix::SourceFd;

use super::Interest;
use super::timerfd::{new_timerfd, set_timerfd};
use super::{Reactor, TASK_TIMER, mio_token, to_mio};
use crate::timer::wheel::TimerKey;

/// Wakers handed out of the reactor, to be woken (`wake`) or dropped
/// (`drop`) where no borrow of fibra's state is live; see [`Polled`].
///
/// Dropping it wakes and drops them through the scheduler's door for user
/// code: its `Drop` is the scheduler's (`scheduler/core/callback.rs`), so the
/// reactor needs nothing of the scheduler.
#[derive(Default)]
pub(crate) struct TaskWakes {
    pub(crate) wake: Vec<Waker>,
    pub(crate) drop: Vec<Waker>,
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
        src.tasks = src.tasks | interest;
    }

    /// Re-arms socket `owner`'s registration of `fd` (`EPOLL_CTL_MOD`,
    /// which reports the readiness of the moment): for a task waker set
    /// after the poll that made its task register may already have
    /// consumed the edge (see `runtime::fallback`). Nothing if the socket
    /// is not registered here.
    #[cfg_attr(not(feature = "futures-io"), allow(dead_code))]
    pub(crate) fn rearm_socket(&mut self, fd: RawFd, owner: u64) -> io::Result<()> {
        let Some(key) = self.owned(fd, owner) else {
            return Ok(());
        };
        let src = &self.sources[key];
        self.poll.registry().reregister(
            &mut SourceFd(&fd),
            mio_token(key, src.generation),
            to_mio(src.interest),
        )
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
        if self.task_timers.is_empty() {
            // The first sleep in a while (see `Wheel::catch_up`).
            self.task_timers.catch_up(crate::timer::clock::now_ns());
        }
        self.task_timers.insert(deadline, waker)
    }

    /// Disarms a task's sleep (a stale key, of one that fired, is ignored);
    /// its waker is dropped after the next poll.
    #[cfg_attr(not(feature = "futures-io"), allow(dead_code))]
    pub(crate) fn cancel_task_timer(&mut self, key: TimerKey) {
        self.unneeded.extend(self.task_timers.cancel(key));
    }

    /// Sets the tasks' timerfd to their wheel's next expiration.
    #[cold]
    #[inline(never)]
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
