//! The receivers that no sender feeds: [`At`] (`after` and `at`: one
//! message, the instant it was due), [`Tick`] (`tick`: the instant of each
//! period, ticks nobody took dropped) and the `never` receiver's waiting.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::channel::err::{RecvTimeoutError, TryRecvError};
use crate::scheduler::park::park_current;
use crate::scheduler::wait_on::WaitOn;
use crate::timer::clock;

/// Parks the caller until `until` (ns; `None`: until it is cancelled, or
/// for ever on a plain thread).
pub(crate) fn sleep_until(until: Option<u64>) {
    loop {
        if until.is_some_and(|u| u <= clock::now_ns()) {
            return;
        }
        park_current(until, WaitOn::Sleep);
    }
}

/// The channel of `at(when)` and `after(d)`: one message, delivered once
/// across all clones of the receiver, at `when`.
#[derive(Debug)]
pub(crate) struct At {
    pub(crate) when: u64,
    delivered: AtomicBool,
}

impl At {
    pub(crate) fn new(when: u64) -> At {
        At {
            when,
            delivered: AtomicBool::new(false),
        }
    }

    /// The message, if due and not taken yet (taking it).
    pub(crate) fn try_recv(&self) -> Result<u64, TryRecvError> {
        if clock::now_ns() >= self.when && !self.delivered.swap(true, Ordering::AcqRel) {
            Ok(self.when)
        } else {
            Err(TryRecvError::Empty)
        }
    }

    /// Waits for the message until `deadline`; once it was taken, nothing
    /// comes again.
    pub(crate) fn recv(&self, deadline: Option<u64>) -> Result<u64, RecvTimeoutError> {
        loop {
            if !self.delivered.load(Ordering::Acquire) {
                match self.try_recv() {
                    Ok(when) => return Ok(when),
                    Err(_) if deadline.is_some_and(|d| d < self.when) => {}
                    Err(_) => {
                        sleep_until(Some(self.when));
                        continue;
                    }
                }
            }
            sleep_until(deadline);
            return Err(RecvTimeoutError::Timeout);
        }
    }

    /// Makes the message takeable again (a `select` chose it and then gave
    /// it up).
    pub(crate) fn undeliver(&self) {
        self.delivered.store(false, Ordering::Release);
    }

    /// When the message can be taken (for a `select`'s deadline).
    pub(crate) fn due(&self) -> Option<u64> {
        (!self.delivered.load(Ordering::Relaxed)).then_some(self.when)
    }

    pub(crate) fn len(&self) -> usize {
        usize::from(clock::now_ns() >= self.when && !self.delivered.load(Ordering::Relaxed))
    }
}

/// The channel of `tick(period)`: at each period its instant, to whichever
/// receiver takes it; ticks that nobody took are not kept.
#[derive(Debug)]
pub(crate) struct Tick {
    next: AtomicU64,
    period: u64,
}

impl Tick {
    pub(crate) fn new(period: u64) -> Tick {
        Tick {
            next: AtomicU64::new(clock::now_ns().saturating_add(period)),
            period,
        }
    }

    /// The due tick (its scheduled instant), taken; the next is due a
    /// period from now: the schedule restarts at the receipt.
    pub(crate) fn try_recv(&self) -> Result<u64, TryRecvError> {
        loop {
            let now = clock::now_ns();
            let next = self.next.load(Ordering::Acquire);
            if now < next {
                return Err(TryRecvError::Empty);
            }
            let after = now.saturating_add(self.period);
            if self
                .next
                .compare_exchange(next, after, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return Ok(next);
            }
        }
    }

    /// Takes the next tick (waiting for it) unless `deadline` comes first;
    /// the one after is due a period after this one, or after now if this
    /// one is late (so a timely receiver's ticks do not drift).
    pub(crate) fn recv(&self, deadline: Option<u64>) -> Result<u64, RecvTimeoutError> {
        loop {
            let next = self.next.load(Ordering::Acquire);
            if let Some(d) = deadline
                && d < next
            {
                sleep_until(Some(d));
                return Err(RecvTimeoutError::Timeout);
            }
            let now = clock::now_ns();
            let after = next.max(now).saturating_add(self.period);
            if self
                .next
                .compare_exchange(next, after, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                sleep_until(Some(next));
                return Ok(next);
            }
        }
    }

    pub(crate) fn due(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }

    pub(crate) fn len(&self) -> usize {
        usize::from(clock::now_ns() >= self.due())
    }
}
