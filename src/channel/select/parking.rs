//! How a select parks ([`Parking`]): on its context alone, or — when it
//! waits on fds too — with the fds armed. In a fiber the fds go to the
//! runtime's reactor for the fiber's park, and any wake-up sends the
//! select back to look. On a plain thread the thread polls the fds and an
//! eventfd of the wait, which is what notifiers wake (a thread blocked in
//! poll(2) cannot be woken by `Thread::unpark`).

use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::task::{Wake, Waker};

use crate::channel::context::{Context, Selected, wait};
use crate::io::poll::{poll, pollfd};
use crate::io::{EventFd, Interest};
use crate::scheduler::context;
use crate::scheduler::park::Unparker;
use crate::scheduler::readiness::FdWaiter;
use crate::timer::clock;

pub(crate) struct Parking {
    fds: Vec<(RawFd, Interest)>,
    /// The wait has operations that wake it without choosing it.
    any_wake: bool,
    /// A thread waiting on fds: the eventfd notifiers write.
    bell: Option<Arc<Bell>>,
}

/// An eventfd that a notifier rings to wake a thread polling it.
struct Bell(EventFd);

impl Wake for Bell {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Full only after 2^64 - 2 rings nobody read: it is readable then.
        let _ = self.0.write(1);
    }
}

impl Parking {
    pub(crate) fn new(fds: Vec<(RawFd, Interest)>, any_wake: bool) -> Parking {
        // Without an eventfd (none left), the thread polls its fds in
        // slices and looks at its context between them.
        let bell = if !fds.is_empty() && context::current().is_none() {
            EventFd::new(0).ok().map(|efd| Arc::new(Bell(efd)))
        } else {
            None
        };
        Parking {
            fds,
            any_wake,
            bell,
        }
    }

    /// A context for one wait, woken the way this parking waits.
    pub(crate) fn context(&self) -> Context {
        match &self.bell {
            Some(bell) => Context::with_unparker(Unparker::Waker(Waker::from(bell.clone()))),
            None => Context::new(),
        }
    }

    /// Waits until `cx` is chosen, `deadline`, or (with `any_wake` or fds)
    /// any wake-up, which gives `Aborted`: the select looks again.
    pub(crate) fn wait(
        &self,
        cx: &Context,
        deadline: Option<u64>,
        on: &'static &'static str,
    ) -> Selected {
        if self.fds.is_empty() {
            return wait(cx, deadline, on, self.any_wake);
        }
        match context::current() {
            Some(core) => {
                // Armed for the park `wait` makes (the token is the same:
                // nothing parked since the context was made).
                let mut waiters = Vec::with_capacity(self.fds.len());
                for &(fd, interest) in &self.fds {
                    match FdWaiter::fd(core, fd, interest) {
                        Ok(Some(waiter)) => waiters.push(waiter),
                        // Always ready, or not pollable: look again now.
                        Ok(None) | Err(_) => return cx.abort(),
                    }
                }
                let selected = wait(cx, deadline, on, true);
                drop(waiters);
                selected
            }
            None => self.poll_on_thread(cx, deadline),
        }
    }

    fn poll_on_thread(&self, cx: &Context, deadline: Option<u64>) -> Selected {
        let mut pfds: Vec<libc::pollfd> = self
            .fds
            .iter()
            .map(|&(fd, interest)| pollfd(fd, interest))
            .collect();
        if let Some(bell) = &self.bell {
            pfds.push(pollfd(bell.0.as_raw_fd(), Interest::READABLE));
        }
        loop {
            let selected = cx.selected();
            if selected != Selected::Waiting {
                return selected;
            }
            let mut timeout_ms = match deadline {
                None => -1,
                Some(d) => {
                    let left = d.saturating_sub(clock::now_ns());
                    if left == 0 {
                        return cx.abort();
                    }
                    left.div_ceil(1_000_000).min(i32::MAX as u64) as i32
                }
            };
            if self.bell.is_none() && !(0..=10).contains(&timeout_ms) {
                timeout_ms = 10;
            }
            for pfd in &mut pfds {
                pfd.revents = 0;
            }
            if poll(&mut pfds, timeout_ms).is_err() {
                return cx.abort(); // the try phase reports the fd's error
            }
            if let Some(bell) = &self.bell {
                let _ = bell.0.try_read();
            }
            let selected = cx.selected();
            if selected != Selected::Waiting {
                return selected;
            }
            if pfds[..self.fds.len()].iter().any(|p| p.revents != 0) {
                return cx.abort();
            }
        }
    }
}
