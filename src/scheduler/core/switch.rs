//! Switching, parking and waking: every context switch of a runtime.

use super::*;
use crate::timer::wheel::TimerKey;

impl Core {
    // ----- switching ----------------------------------------------------

    /// Suspends `from` and resumes `to`.
    ///
    /// Inlined into its callers (the park and yield paths, themselves
    /// inlined into theirs), so the switch resumes straight into the code
    /// that parked. The switch neither calls nor returns (see "No call, no
    /// return" in `asm/x86_64.S`): the CPU's return stack keeps the calls
    /// of whichever context ran last, so a context that resumes and returns
    /// through frames of its own that the other context did not come
    /// through mispredicts each of those returns (about 20 cycles). A frame
    /// of this function's own between the switch and its caller would be
    /// one more such return, and cost its call, return and six register
    /// saves and restores on every switch (its callers expect r12–r15
    /// kept, which the switch does not keep): 1.1 ns of a 16.2 ns yield on
    /// the Zen 4 host (`TARGETS=switch` in `benches/peers`, the medians of
    /// five runs). (A fiber's final switch is made by its trampoline
    /// instead: see [`Core::exit_current`].)
    ///
    /// Each frame between a blocking call and the switch costs the same,
    /// unless the other context came through the very same frames (many
    /// fibers waiting in the same `read`). That is why the park path
    /// (`park_current`, `park`, [`Core::park_raw`]) is inlined into its
    /// callers, and why the root parks by switching straight to the next
    /// fiber instead of through [`Core::run_root`]'s loop, from the very
    /// switch a fiber's park makes: a root that parked one frame deeper
    /// than the fiber it ping-pongs with put every return of both out of
    /// step (a `sync::mpsc` round trip between the root and a fiber took
    /// 208 ns against 128 ns between two fibers, with the same
    /// instructions; 1.6×).
    ///
    /// The caller has chosen `to` (marked running, out of the run queue)
    /// and settled `from`'s state (parked, queued, or done) with no borrow
    /// kept: the subscriber's `exit` for `from`'s span runs first, and
    /// whatever it does (spawn, wake, cancel: see `callback.rs`) leaves
    /// both as they are.
    #[inline(always)]
    pub(super) fn switch_to(&self, from: Key, to: Key) {
        self.exit_span(from);
        let (save, load) = self.hand_over(from, to);
        // `load` was saved by `to`'s own last switch out (or built by
        // `init_stack`) and `to` has not run since; records own their stacks
        // until removed, so it is mapped. `save` points at `sp` in the
        // record of `from`, in the slab as it is now: `hand_over` took it
        // after the last callback, and no user code runs between there and
        // the store `arch::switch` makes through it, so the slab cannot
        // have grown (and moved) in between. Once `from` is switched out,
        // the pointer is dead: the slab may move, and whoever switches back
        // reads `from`'s `sp` through the slab as it is then.
        // SAFETY: as argued above; nothing unwinds across the switch.
        let arg = unsafe { arch::switch(save, load, 0) };
        // Resumed: some context switched back to `from`.
        self.after_switch(arg);
        self.enter_span(from);
    }

    /// Everything of a switch from `from` to `to` but the switch itself and
    /// the calls into a subscriber: returns where to save `from`'s stack
    /// pointer and `to`'s. Runs no user code, so the pointers it returns
    /// stay valid until the switch that uses them.
    #[inline(always)]
    fn hand_over(&self, from: Key, to: Key) -> (*mut *mut u8, *mut u8) {
        // SAFETY: on the runtime's thread; the borrow ends before the switch,
        // and nothing in it calls out.
        let l = unsafe { self.local() };
        // `from` is the running context and `to` was taken from the run
        // queue (its record checked there) or is the root, and a record is
        // removed only after its context's final switch, by `reap` in the
        // context that runs after it — neither of these: both keys are in
        // bounds, which is all `get_unchecked` asks.
        // SAFETY: as argued above.
        if first_frame::deferred(unsafe { l.fibers.get_unchecked(to) }.sp).is_some() {
            Self::build_first_frame(l, to);
        }
        // SAFETY: as argued above.
        let (from_rec, load, header, meta) = unsafe {
            let from_rec: *mut Record = l.fibers.get_unchecked_mut(from);
            let to_rec = l.fibers.get_unchecked(to);
            (from_rec, to_rec.sp, to_rec.running_header, to_rec.meta)
        };
        // `from`'s run ends: its time on the thread goes to its `Meta`,
        // if the runtime counts (see `scheduler::cpu_time`).
        if l.count_time {
            let now = crate::scheduler::cpu_time::now();
            // `from` runs (it is the one switching out): its `meta` is
            // live and written (its first switch built it, or it is the
            // root's in `Shared`); only this thread writes its count.
            // SAFETY: as argued just above; `from_rec` is in bounds.
            unsafe { (*(*from_rec).meta).add_run(now.wrapping_sub(l.switched_at)) };
            l.switched_at = now;
        }
        l.current = to;
        l.resumed += u64::from(to != ROOT);
        // The watchdog's one store per switch (see `scheduler::watch`).
        self.shared.watch.publish(meta);
        // The stack `from` runs on (its own, or a generator's it is inside)
        // is kept for when it runs again. Nothing below pushes on it before
        // the switch does (see `overflow::set_running`).
        let from_header = overflow::set_running::<{ arch::SWITCH_PUSHES }>(header);
        // `from_rec` points into the slab as it is now: nothing above can
        // grow it (no user code runs in here).
        // SAFETY: as argued just above; `from` is in bounds (see there).
        unsafe { (*from_rec).running_header = from_header };
        // SAFETY: as above.
        let save: *mut *mut u8 = unsafe { &raw mut (*from_rec).sp };
        (save, load)
    }

    /// Runs in the resumed context right after every switch: frees the
    /// fiber that just finished, if that switch was its last.
    #[inline(always)]
    pub(crate) fn after_switch(&self, arg: usize) {
        if arg != 0 {
            self.reap((arg - 1) as Key);
        }
    }

    #[cold]
    fn reap(&self, key: Key) {
        // SAFETY: on the runtime's thread; the finished fiber no longer runs.
        // The borrow ends before the span is dropped (the subscriber's
        // `try_close`, which may spawn into the slot just freed).
        let l = unsafe { self.local() };
        let rec = &mut l.fibers[key];
        debug_assert_eq!(rec.state, State::Done);
        let span = rec.span.take();
        // The stack holds the fiber's `Meta`, and the record its name: a
        // watchdog may be reading them (see `scheduler::watch`).
        self.shared.watch.wait_unread(rec.meta);
        if let Some(stack) = l.fibers.vacate(key) {
            l.spare.give_back(stack);
        }
        if let Some(span) = span {
            self.close_span(span);
        }
    }

    /// The next context a fiber hands control to: the head of the run
    /// queue, or the root once the budget is spent; `None` when no other
    /// fiber is ready. Every call counts against the budget, even one that
    /// finds nothing, so a fiber yielding alone still lets the root poll.
    #[inline(always)]
    fn next_from_fiber(l: &mut Local) -> Option<Key> {
        if l.budget == 0 {
            return Some(ROOT);
        }
        l.budget -= 1;
        while let Some(key) = l.run_queue.pop_front() {
            let rec = &mut l.fibers[key];
            if rec.state == State::Ready {
                rec.state = State::Running;
                if let Some(after) = l.run_queue.front()
                    && after != l.current
                {
                    l.prefetch(after, l.run_queue.second());
                }
                return Some(key);
            }
            // Stale: the root left the loop by unwinding (`Enter::drop`).
        }
        None
    }

    /// Ends the running fiber for good: returns its final switch, for its
    /// trampoline to make, to the context that runs next (which frees the
    /// fiber's stack).
    ///
    /// Made by the trampoline, with a jump, after this and the fiber's
    /// entry have returned: the fiber leaves the return stack as it found
    /// it, so the context that resumes (a `join` of this fiber, often)
    /// returns through its own frames predicted right (see "A fiber's
    /// first and last switch" in `asm/x86_64.S`).
    pub(crate) fn exit_current(&self) -> arch::FinalSwitch {
        if self.fork_gen != crate::scheduler::fork::generation() {
            // The fiber that forked ends in the child: the next would be
            // one of the parent's (see `scheduler::fork`).
            crate::scheduler::fork::forked_runtime();
        }
        // SAFETY: on the runtime's thread; the borrow ends before the
        // subscriber's callbacks below.
        let l = unsafe { self.local() };
        let me = l.current;
        let rec = l.running();
        rec.state = State::Done;
        let id = rec.id;
        let has_span = rec.span.is_some();
        l.live -= 1;
        let next = Core::next_from_fiber(l).unwrap_or(ROOT);
        // Done, and the next context chosen: the callbacks may spawn or
        // wake, which queues behind `next`.
        self.trace(move || tracing::trace!(fiber = id.as_u64(), "exit"));
        if has_span {
            self.exit_span_slow(me);
        }
        // Nothing resumes this context: where `hand_over` says to save it
        // is left unwritten.
        let (_, load_sp) = self.hand_over(me, next);
        arch::FinalSwitch {
            load_sp,
            arg: me as usize + 1,
        }
    }

    // ----- parking and waking -------------------------------------------

    /// The token the current context's next park will have.
    #[inline]
    pub(crate) fn current_token(&self) -> WakeToken {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        WakeToken {
            key: l.current,
            park: l.running().park,
        }
    }

    /// Ends the current park epoch without parking: wake-ups sent with the
    /// token handed out for it become stale. For a waiter that took a token
    /// (see the ground rules) and then found it need not park after all,
    /// while its waker may still fire: that wake-up would otherwise make the
    /// next, unrelated park return at once.
    pub(crate) fn retire_token(&self) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let next_park = l.next_park();
        let rec = l.running();
        rec.park = next_park;
        rec.notified = false;
    }

    /// Parks the current context until it is woken with its token, or until
    /// `deadline` (ns). Neither unwinds nor looks at cancellation: see
    /// `scheduler::park` for the layer that does.
    ///
    /// Inlined: see [`Core::switch_to`] on frames above a switch.
    #[inline(always)]
    pub(crate) fn park_raw(&self, deadline: Option<u64>, on: WaitOn) -> Wake {
        // SAFETY: on the runtime's thread; the borrow ends before the trace
        // event and the switch.
        let l = unsafe { self.local() };
        if let Some(what) = l.in_callback {
            parked_in_callback(what);
        }
        let me = l.current;
        let next_park = l.next_park();
        let rec = l.running();
        if rec.notified {
            rec.notified = false;
            rec.park = next_park;
            return Wake::Unparked;
        }
        let token = WakeToken {
            key: me,
            park: rec.park,
        };
        rec.state = State::Parked;
        rec.waiting_on = StoredWait::new(on);
        rec.waiting_until = deadline.unwrap_or(NO_DEADLINE);
        // (Out of line, as the root's park below: the code of a fiber's
        // park without a deadline, which every socket wait is, stays a few
        // cache lines.)
        let timer = deadline.map(|d| Self::arm_park_timer(l, d, token));
        // The event is emitted once the next context is chosen: should the
        // subscriber wake this very park, the wake-up queues it like any
        // other, and the switch below still goes elsewhere.
        //
        // One switch for the root and a fiber alike: see `switch_to` on
        // frames above a switch. Only a root with nothing else to run (or
        // its budget spent) goes to its loop instead, `root_parked` below.
        let next = Core::next_from_fiber(l);
        self.trace_park(me);
        if me != ROOT || next.is_some_and(|next| next != ROOT) {
            self.switch_to(me, next.unwrap_or(ROOT));
        }
        if me == ROOT {
            self.root_parked();
        }
        // SAFETY: re-borrowed after the switch.
        let l = unsafe { self.local() };
        // We run again, so `current` is `me`.
        let wake = l.running().wake;
        if let Some(timer) = timer
            && wake != Wake::TimedOut
        {
            Self::cancel_park_timer(l, timer);
        }
        wake
    }

    /// The timer of a park with a deadline.
    #[inline(never)]
    fn arm_park_timer(l: &mut Local, deadline: u64, token: WakeToken) -> TimerKey {
        if l.timers.is_empty() {
            // Its first timer in a while (see `Wheel::catch_up`).
            l.timers.catch_up(clock::now_ns());
        }
        l.timers.insert(deadline, token)
    }

    #[inline(never)]
    fn cancel_park_timer(l: &mut Local, timer: TimerKey) {
        l.timers.cancel(timer);
    }

    /// The end of [`Core::park_raw`] for the root: back from a fiber (or
    /// never gone), it runs the loop until its own turn comes — unless it
    /// was resumed from the run queue, woken (`Running`). Out of line: a
    /// fiber's park path stays without the root's code in its cache lines.
    #[inline(never)]
    fn root_parked(&self) {
        // SAFETY: on the runtime's thread; the borrow ends at once.
        if unsafe { self.local() }.root().state != State::Running {
            self.run_root(Until::RootWoken);
        }
    }

    /// Whether the current context has been cancelled, runs under a
    /// `fibra::timeout`, or is an idle fiber: only then may a blocking call
    /// have to unwind it, or a yield take the idle fibers' path (a test of
    /// its flags, which say whether it has a timeout).
    #[inline]
    pub(crate) fn current_may_unwind(&self) -> bool {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let rec = l.running();
        rec.flags.may_unwind()
    }

    /// Whether the current context is itself unwinding.
    ///
    /// `std::thread::panicking()` cannot say: it is true on the whole thread
    /// while any context is suspended mid-unwind. It is the current context
    /// when we unwound it ourselves, or when the thread panics and no
    /// suspended context accounts for it. (Left undecided: a user panic in
    /// a fiber while another context is suspended mid-unwind; that fiber is
    /// then taken as not unwinding.)
    ///
    /// Inlined: every park asks, and the usual answer takes a load of a
    /// global and a store.
    #[inline]
    pub(crate) fn current_is_unwinding(&self) -> bool {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let rec = l.running();
        if !std::thread::panicking() {
            rec.unwinding = false; // caught since (or never started)
            return false;
        }
        rec.unwinding || l.unwinding_suspended == 0
    }

    pub(crate) fn mark_unwinding(&self, unwinding: bool) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        l.running().unwinding = unwinding;
    }

    /// The unwind of fiber `id` ended (its payload was dropped): if it is
    /// the running context, it no longer unwinds (see `park::CancelUnwind`).
    pub(crate) fn unwind_caught(&self, id: FiberId) {
        // SAFETY: on the runtime's thread; short borrow (a payload is
        // dropped by its catcher's code, or at a fiber's end, never while
        // fibra holds a borrow of its state).
        let l = unsafe { self.local() };
        let rec = l.running();
        if rec.id == id {
            rec.unwinding = false;
        }
    }

    /// Parks a context that is unwinding, counted as such while suspended.
    pub(crate) fn park_unwinding(&self, deadline: Option<u64>, on: WaitOn) -> Wake {
        self.count_unwinding_suspended(1);
        let wake = self.park_raw(deadline, on);
        self.count_unwinding_suspended(-1);
        wake
    }

    pub(crate) fn count_unwinding_suspended(&self, delta: isize) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        l.unwinding_suspended = l.unwinding_suspended.wrapping_add_signed(delta);
    }

    /// Counts a socket call of the current fiber; true when it has made
    /// [`IO_BUDGET`] of them since it was last switched in: it should
    /// yield.
    ///
    /// For `fibra::net`'s calls only, which are not async-signal-safe and
    /// so never run in a signal handler. Never for a hooked libc call: a
    /// signal handler may make one (a write to a non-blocking socket is
    /// the self-pipe trick), interrupting code of this runtime that holds
    /// its state, and it must neither borrow that state nor yield.
    #[inline]
    pub(crate) fn io_budget_spent(&self) -> bool {
        // SAFETY: on the runtime's thread, from a fiber's (or block_on's)
        // own code, never from a signal handler (see above): no borrow of
        // the state is live; this one ends within the function.
        let l = unsafe { self.local() };
        if l.io_since != l.resumed {
            l.io_since = l.resumed;
            l.io_calls = 0;
        }
        l.io_calls += 1;
        if l.io_calls <= IO_BUDGET {
            return false;
        }
        // Spent: the yield goes through the root, which polls for I/O
        // first, so fibers waiting on other sockets get their turn too.
        l.io_calls = 0;
        l.budget = 0;
        true
    }

    /// Puts the current context behind every ready fiber and runs them
    /// (an idle fiber: behind the ready idle ones).
    #[inline]
    pub(crate) fn yield_now(&self) {
        if self.current_may_unwind() && self.current_is_idle() {
            self.yield_idle();
        } else {
            self.yield_plain();
        }
    }

    /// Switches into fibers so far on this runtime: a count that moves
    /// whenever another fiber has run (see `scheduler::fair`).
    #[inline]
    pub(crate) fn switches(&self) -> u64 {
        // SAFETY: on the runtime's thread; short borrow.
        unsafe { self.local() }.resumed
    }

    /// Whether the current context may switch away now: not inside a
    /// subscriber's callback (see `callback.rs`).
    pub(crate) fn may_switch(&self) -> bool {
        // SAFETY: on the runtime's thread; short borrow.
        unsafe { self.local() }.in_callback.is_none()
    }

    /// Makes the current fiber's next yield go through the root, which
    /// polls for I/O and timers before it runs the ready fibers: for a
    /// fiber that waits, spinning, for one that waits on a socket.
    pub(crate) fn spend_budget(&self) {
        // SAFETY: on the runtime's thread; short borrow.
        unsafe { self.local() }.budget = 0;
    }

    /// Whether the current context is an idle fiber.
    pub(crate) fn current_is_idle(&self) -> bool {
        // SAFETY: on the runtime's thread; short borrow.
        unsafe { self.local() }.running().flags.idle()
    }

    /// [`Core::yield_now`] of a context that is not an idle fiber (the
    /// caller has seen [`Core::current_may_unwind`] or
    /// [`Core::current_is_idle`] false).
    ///
    /// Inlined: see [`Core::switch_to`] on frames above a switch.
    #[inline(always)]
    pub(crate) fn yield_plain(&self) {
        // SAFETY: on the runtime's thread; the borrow ends before the switch.
        let l = unsafe { self.local() };
        if let Some(what) = l.in_callback {
            parked_in_callback(what);
        }
        let me = l.current;
        if me == ROOT {
            l.root().state = State::Ready;
            l.run_queue.push_back(ROOT);
            self.run_root(Until::RootWoken);
            return;
        }
        // Take the next fiber first, then queue ourselves behind everything
        // (the same order as pushing first, without the push and pop when
        // we are alone).
        let Some(next) = Core::next_from_fiber(l) else {
            return; // nothing else is ready: carry on
        };
        l.running().state = State::Ready;
        l.run_queue.push_back(me);
        self.switch_to(me, next);
    }

    /// [`Core::yield_now`] of an idle fiber: it goes behind the other idle
    /// ones, by way of the root (which polls before it runs one again)
    /// when no normal fiber is ready.
    #[cold]
    #[inline(never)]
    pub(crate) fn yield_idle(&self) {
        // SAFETY: on the runtime's thread; the borrow ends before the switch.
        let l = unsafe { self.local() };
        if let Some(what) = l.in_callback {
            parked_in_callback(what);
        }
        let me = l.current;
        let next = Core::next_from_fiber(l).unwrap_or(ROOT);
        l.running().state = State::Ready;
        l.idle_queue.push_back(me);
        self.switch_to(me, next);
    }

    /// Requests cancellation of a fiber of this runtime; a parked fiber is
    /// woken so it can unwind.
    pub(crate) fn cancel(&self, key: Key, id: FiberId) {
        // SAFETY: on the runtime's thread; short borrow, ended before the
        // trace event.
        let woken = unsafe { self.local() }.cancel(key, id, &self.shared);
        if woken {
            self.trace_unpark(key, Wake::Cancelled);
        }
    }

    /// The trace event of the park of the context in slot `key`.
    #[inline(always)]
    fn trace_park(&self, key: Key) {
        self.trace_fiber(key, |id| tracing::trace!(fiber = id.as_u64(), "park"));
    }
}
