//! [`Select`]'s readiness waits: `try_ready`, `ready`, `ready_timeout`
//! and `ready_deadline` say which operation can go ahead without
//! completing it. They watch each channel (a `Kind::Watch` entry, woken by
//! every change that readies its side) instead of registering to be
//! chosen, and park as a select does (`parking.rs`).

use std::time::{Duration, Instant};

use crate::channel::context::{OnUnwind, Selected};
use crate::channel::err::{ReadyTimeoutError, TryReadyError};
use crate::channel::select::Select;
use crate::channel::select::parking::Parking;
use crate::timer::clock;

impl Select<'_> {
    /// The index of an operation that can go ahead now, without
    /// completing it (another thread may still take its chance first).
    ///
    /// # Errors
    ///
    /// None can.
    pub fn try_ready(&mut self) -> Result<usize, TryReadyError> {
        self.ready_or_give_way(Some(0)).ok_or(TryReadyError)
    }

    /// Waits until an operation can go ahead; its index.
    pub fn ready(&mut self) -> usize {
        self.ready_until(None)
            .expect("a wait without deadline returns an operation")
    }

    /// [`ready`](Select::ready), waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// None could go ahead in time.
    pub fn ready_timeout(&mut self, timeout: Duration) -> Result<usize, ReadyTimeoutError> {
        self.ready_or_give_way(Some(clock::after_ns(timeout)))
            .ok_or(ReadyTimeoutError)
    }

    /// [`ready`](Select::ready), waiting at most until `deadline`.
    ///
    /// # Errors
    ///
    /// None could go ahead in time.
    pub fn ready_deadline(&mut self, deadline: Instant) -> Result<usize, ReadyTimeoutError> {
        self.ready_or_give_way(Some(clock::instant_ns(deadline)))
            .ok_or(ReadyTimeoutError)
    }

    /// [`Select::ready_until`] with a deadline, counted for fairness when
    /// nothing was ready (see `scheduler::fair`).
    fn ready_or_give_way(&mut self, deadline: Option<u64>) -> Option<usize> {
        let ready = self.ready_until(deadline);
        if ready.is_none() {
            // A loop of these waiting for a fiber of this thread lets it run.
            crate::scheduler::fair::futile();
        }
        ready
    }

    /// The readiness loop: as [`Select::run`], with watchers.
    fn ready_until(&mut self, deadline: Option<u64>) -> Option<usize> {
        // Made at the first wait only: a select that finds an operation
        // ready on its first try looks at nothing else.
        let mut parking: Option<Parking> = None;
        loop {
            let order = self.order();
            for i in order.iter() {
                if self.ops[i].handle.get().is_ready() {
                    return Some(self.ops[i].index);
                }
            }
            if deadline.is_some_and(|d| d <= clock::now_ns()) {
                // Once more before giving up: see `run`.
                let ready = order.iter().find(|&i| self.ops[i].handle.get().is_ready());
                return ready.map(|i| self.ops[i].index);
            }
            let parking = &*parking.get_or_insert_with(|| self.parking());
            let cx = parking.context();
            let mut watched = 0;
            let mut ready = None;
            for (i, op) in self.ops.iter().enumerate() {
                if !op.handle.get().watch(i, &cx) {
                    ready = Some(i);
                    break;
                }
                watched += 1;
            }
            let ops = &self.ops;
            let unwatch = || {
                for (i, op) in ops.iter().enumerate().take(watched) {
                    op.handle.get().unwatch(i, &cx);
                }
            };
            let selected = if ready.is_some() {
                cx.abort()
            } else {
                let on_unwind = OnUnwind::new(&cx, |_| unwatch());
                let selected = parking.wait(&cx, self.earliest(deadline), &"select ready");
                on_unwind.defuse();
                selected
            };
            unwatch();
            match (selected, ready) {
                (Selected::Operation(i), _) | (_, Some(i)) => return Some(self.ops[i].index),
                _ => {}
            }
        }
    }
}
