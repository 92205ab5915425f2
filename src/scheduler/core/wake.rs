//! The scheduler's state seen from a wake-up: the running and root
//! records, park tokens, the run queue's door (`push_ready`), waking a
//! park and cancelling a fiber.

use super::*;

/// Bytes below a stack's header, where the fiber's outermost frames keep
/// what its loop reads on every turn (a connection, say).
const TOP_BYTES: usize = 512;

impl Local {
    /// The record of the running context.
    ///
    /// Without a bounds check: `current` always names a live record. It is
    /// set to the root (never removed) or to a fiber taken from the run
    /// queue, whose record was checked there, and a fiber's record is
    /// removed only after its final switch (by `reap`, in the context that
    /// runs next, so never the current one's).
    #[inline(always)]
    pub(crate) fn running(&mut self) -> &mut Record {
        debug_assert!(self.fibers.get(self.current).is_some());
        // SAFETY: `current` is in bounds, as argued above.
        unsafe { self.fibers.get_unchecked_mut(self.current) }
    }

    /// The root's record, which is never removed.
    #[inline(always)]
    pub(crate) fn root(&mut self) -> &mut Record {
        debug_assert!(self.fibers.get(ROOT).is_some());
        // SAFETY: the root's slot is the first one made and never vacated.
        unsafe { self.fibers.get_unchecked_mut(ROOT) }
    }

    pub(super) fn next_park(&mut self) -> u64 {
        self.park_seq += 1;
        self.park_seq
    }

    /// Starts loading what the contexts after the one being switched to
    /// touch first: the stack of `next`, which runs after it (see
    /// `arch::prefetch_frame`; its record, read here for the stack pointer,
    /// was prefetched by the call before), and the record of `after`, which
    /// runs after `next`. Not for the context switching out: a yield's own
    /// stack is in cache.
    ///
    /// A thousand connections' fibers each run once in a thousand trips,
    /// with the kernel's TCP work in between: each comes back cold.
    ///
    /// Out of line: most pops find an empty queue or only the yielder behind
    /// them, and the fast path of a switch stays as small as it was.
    #[inline(never)]
    pub(super) fn prefetch(&self, next: Key, after: Option<Key>) {
        if let Some(rec) = self.fibers.get(next) {
            // (For a fiber not yet started, `sp` is its deferred start, just
            // as worth loading, and the top of its stack is where its first
            // frame is about to be written.)
            arch::prefetch_frame(rec.sp);
            if !rec.running_header.is_null() {
                arch::prefetch::<TOP_BYTES>(
                    rec.running_header.cast::<u8>().wrapping_sub(TOP_BYTES),
                );
            }
        }
        if let Some(slot) = after.and_then(|key| self.fibers.slot_addr(key)) {
            // Its first line: all that its switch and park touch (see
            // `Record`, which is aligned to a line).
            arch::prefetch_line(slot);
        }
    }

    /// Queues a fiber that became ready. When the runtime is not being
    /// driven, its fd must turn readable for an outer loop to notice.
    /// (An idle fiber alone is not work for an outer loop: see
    /// `Runtime::turn`.)
    pub(super) fn push_ready(&mut self, key: Key, idle: bool, shared: &Shared) {
        if idle {
            self.idle_queue.push_back(key);
            return;
        }
        if !self.entered && self.run_queue.is_empty() {
            shared.wake_fd();
        }
        self.run_queue.push_back(key);
    }

    /// Wakes the park named by `token` with `reason`; returns whether it
    /// woke it. Emits no trace event (that would be a subscriber's
    /// code under the caller's borrow): [`Core::wake`] does, after it.
    #[inline]
    pub(super) fn wake_fiber(&mut self, token: WakeToken, reason: Wake, shared: &Shared) -> bool {
        self.wake_fiber_inline(token, reason, shared)
    }

    /// [`Local::wake_fiber`], always inlined: for the turn's wake-ups of
    /// fibers whose sockets are ready (see [`Core::wake_io`]).
    #[inline(always)]
    fn wake_fiber_inline(&mut self, token: WakeToken, reason: Wake, shared: &Shared) -> bool {
        let next_park = self.park_seq + 1;
        let Some(rec) = self.fibers.get_mut(token.key) else {
            return false;
        };
        if rec.park != token.park {
            return false; // that park has ended
        }
        match rec.state {
            State::Parked => {
                // Its stack is what it touches first when it runs, after
                // the rest of this turn: start loading it now. (A fiber
                // woken alone, one event a poll, runs next; the prefetch
                // at the switch would come too late to hide anything.)
                arch::prefetch_frame(rec.sp);
                if !rec.running_header.is_null() {
                    arch::prefetch::<TOP_BYTES>(
                        rec.running_header.cast::<u8>().wrapping_sub(TOP_BYTES),
                    );
                }
                rec.state = State::Ready;
                rec.wake = reason;
                rec.park = next_park;
                let idle = rec.flags.idle();
                self.park_seq = next_park;
                self.push_ready(token.key, idle, shared);
                true
            }
            State::Ready | State::Running => {
                if reason == Wake::Unparked {
                    rec.notified = true;
                }
                false
            }
            State::Done | State::Vacant => false,
        }
    }

    /// Marks fiber `id` in slot `key` cancelled and wakes it if it is
    /// parked; returns whether it woke it (for the caller's trace).
    pub(super) fn cancel(&mut self, key: Key, id: FiberId, shared: &Shared) -> bool {
        let Some(rec) = self.fibers.get_mut(key) else {
            return false;
        };
        if rec.id != id || rec.state == State::Done {
            return false;
        }
        rec.flags.set_cancelled();
        if rec.state != State::Parked {
            return false;
        }
        let token = WakeToken {
            key,
            park: rec.park,
        };
        self.wake_fiber(token, Wake::Cancelled, shared)
    }
}

impl Core {
    /// Wakes the park named by `token` with `reason`; returns whether it
    /// did. Traces the wake-up after its borrow of the state has ended.
    #[inline]
    pub(crate) fn wake(&self, token: WakeToken, reason: Wake) -> bool {
        // SAFETY: on the runtime's thread; short borrow, ended before the
        // trace event.
        let woken = unsafe { self.local() }.wake_fiber(token, reason, &self.shared);
        if woken {
            self.trace_unpark(token.key, reason);
        }
        woken
    }

    /// [`Core::wake`] of a fiber whose socket an event made ready: the wake
    /// inlined into the turn, which makes one of these per event.
    #[inline(always)]
    pub(super) fn wake_io(&self, token: WakeToken) {
        // SAFETY: on the runtime's thread; short borrow, ended before the
        // trace event.
        let woken = unsafe { self.local() }.wake_fiber_inline(token, Wake::Unparked, &self.shared);
        if woken {
            self.trace_unpark(token.key, Wake::Unparked);
        }
    }

    /// The trace event of a wake-up of the fiber in slot `key`.
    #[inline(always)]
    pub(super) fn trace_unpark(&self, key: Key, reason: Wake) {
        self.trace_fiber(key, move |id| {
            tracing::trace!(fiber = id.as_u64(), ?reason, "unpark");
        });
    }
}

impl Core {
    /// Marks the running context as parked, from now until `false`, in a
    /// call that a signal handler ends (see `scheduler::interrupt`).
    #[cfg_attr(not(feature = "hook"), allow(dead_code))] // (only hooked calls park so)
    pub(crate) fn set_interruptible(&self, on: bool) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let rec = l.running();
        if rec.flags.interruptible() != on {
            rec.flags.set_interruptible(on);
            if on {
                l.interruptible += 1;
            } else {
                l.interruptible -= 1;
            }
        }
    }

    /// After a poll: if a signal handler ran on this thread since the last
    /// look, wakes every context parked in a call it ends; each decides,
    /// from the count it took, how its call ends. Returns whether it woke
    /// any.
    #[inline]
    pub(super) fn deliver_interrupts(&self) -> bool {
        let now = crate::scheduler::interrupt::epoch().word();
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        if now == l.signals_seen {
            return false;
        }
        l.signals_seen = now;
        l.interruptible > 0 && self.interrupt_parked()
    }

    #[cold]
    #[inline(never)]
    fn interrupt_parked(&self) -> bool {
        let tokens: Vec<WakeToken> = {
            // SAFETY: on the runtime's thread; short borrow, ended before
            // the wake-ups (each traced).
            let l = unsafe { self.local() };
            l.fibers
                .iter()
                .filter(|(_, r)| r.flags.interruptible() && r.state == State::Parked)
                .map(|(key, r)| WakeToken { key, park: r.park })
                .collect()
        };
        let mut woke = false;
        for token in tokens {
            woke |= self.wake(token, Wake::Unparked);
        }
        woke
    }
}
