//! [`Sleep`]: a `Future` on the timer wheel, for async code (feature
//! `futures-io`): hyper's timer, say.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::scheduler::context;
use crate::scheduler::readiness;
use crate::scheduler::registry::RuntimeId;
use crate::timer::clock;
use crate::timer::wheel::TimerKey;

/// A future that completes once its deadline has passed: what
/// [`sleep`](crate::sleep) is to a fiber, for async code (hyper's
/// `rt::Timer`, a `select!` with a timeout). Feature `futures-io`.
///
/// Polled on a thread with a fibra runtime, it arms a timer in that
/// runtime's reactor, which wakes the task's `Waker` at the deadline; on a
/// thread without one, in the process's fallback reactor (see
/// [`net`](crate::net#async-io)). It never completes before its deadline.
///
/// ```
/// use std::time::{Duration, Instant};
///
/// fibra::run(|| {
///     let start = Instant::now();
///     fibra::block_on_future(fibra::Sleep::new(Duration::from_millis(10)));
///     assert!(start.elapsed() >= Duration::from_millis(10));
/// });
/// // On a plain thread too, with any executor.
/// let start = Instant::now();
/// fibra::block_on_future(fibra::Sleep::new(Duration::from_millis(10)));
/// assert!(start.elapsed() >= Duration::from_millis(10));
/// ```
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Sleep {
    deadline: Instant,
    /// `deadline` in CLOCK_MONOTONIC ns.
    deadline_ns: u64,
    armed: Armed,
}

#[derive(Debug)]
enum Armed {
    No,
    /// In the reactor of runtime `RuntimeId`.
    In(RuntimeId, TimerKey),
    /// In the fallback reactor, for this waker.
    Fallback(Waker),
}

impl Sleep {
    /// A sleep of `d` from now.
    ///
    /// ```
    /// let sleep = fibra::Sleep::new(std::time::Duration::from_secs(1));
    /// assert!(sleep.deadline() > std::time::Instant::now());
    /// ```
    pub fn new(d: Duration) -> Sleep {
        Sleep::until(Instant::now() + d)
    }

    /// A sleep until `deadline`.
    ///
    /// ```
    /// let at = std::time::Instant::now();
    /// assert_eq!(fibra::Sleep::until(at).deadline(), at);
    /// ```
    pub fn until(deadline: Instant) -> Sleep {
        Sleep {
            deadline,
            deadline_ns: clock::instant_ns(deadline),
            armed: Armed::No,
        }
    }

    /// When it completes.
    ///
    /// ```
    /// let at = std::time::Instant::now();
    /// assert_eq!(fibra::Sleep::until(at).deadline(), at);
    /// ```
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Moves the deadline (to an earlier or a later one).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let mut sleep = fibra::Sleep::new(Duration::from_secs(60));
    /// let soon = Instant::now() + Duration::from_millis(1);
    /// sleep.reset(soon);
    /// fibra::block_on_future(sleep);
    /// assert!(Instant::now() >= soon);
    /// ```
    pub fn reset(&mut self, deadline: Instant) {
        self.disarm();
        self.deadline = deadline;
        self.deadline_ns = clock::instant_ns(deadline);
    }

    /// Cancels the timer if it is in the reactor of this thread's runtime.
    /// One elsewhere is left to fire: a spurious wake-up, which wakers
    /// tolerate.
    fn disarm(&mut self) {
        if let Armed::In(id, key) = std::mem::replace(&mut self.armed, Armed::No)
            && let Some(core) = context::current()
            && core.id == id
        {
            readiness::cancel_task_timer(core, key);
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if clock::now_ns() >= this.deadline_ns {
            this.disarm();
            return Poll::Ready(());
        }
        match context::current() {
            Some(core) => {
                // A new timer each time: the waker may have changed (arming
                // and cancelling are O(1)).
                this.disarm();
                let waker = cx.waker().clone(); // user code, no borrow live
                match readiness::add_task_timer(core, this.deadline_ns, waker) {
                    Ok(key) => this.armed = Armed::In(core.id, key),
                    Err(waker) => {
                        // No timerfd (out of fds): the fallback's timer
                        // still works.
                        crate::runtime::fallback::timer(this.deadline_ns, waker.clone());
                        this.armed = Armed::Fallback(waker);
                    }
                }
            }
            None => {
                if !matches!(&this.armed, Armed::Fallback(w) if w.will_wake(cx.waker())) {
                    this.disarm();
                    let waker = cx.waker().clone();
                    crate::runtime::fallback::timer(this.deadline_ns, waker.clone());
                    this.armed = Armed::Fallback(waker);
                }
            }
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.disarm();
    }
}
