//! The root loop: polling for I/O, timers and messages from other threads.
//! A runtime's dump section is `dump.rs`, its end `shutdown.rs`.

use super::*;

impl Core {
    // ----- the root loop ------------------------------------------------

    /// Runs fibers on behalf of the root context until `until` holds.
    ///
    /// The root's own state tells why control came back: `Running` means it
    /// was resumed from the run queue (which ends `RootWoken`); otherwise a
    /// fiber found nothing to run, or spent the budget, and the root polls.
    pub(crate) fn run_root(&self, until: Until) {
        loop {
            // SAFETY: on the runtime's thread; re-borrowed every iteration,
            // never held across the switch below.
            let l = unsafe { self.local() };
            let root = l.root();
            // (Two tests and a call, not a `match`: a match of four arms
            // is a jump table, a line of read-only data more to fetch at
            // every turn of a server.)
            let done = if until == Until::RootWoken {
                // The root's turn came: it was popped from the run queue,
                // by a fiber or by this loop. Woken but still queued (Ready)
                // is not enough: it waits for its FIFO turn like any fiber.
                root.state == State::Running
            } else if until == Until::Stopped {
                self.worker.as_ref().is_some_and(WorkerLink::stopping)
            } else {
                Self::batch_or_fibers_done(l, until)
            };
            if done {
                return;
            }
            if l.run_queue.is_empty() && !l.idle_queue.is_empty() {
                // Idle fibers run only when nothing else is ready, and never
                // delay I/O or timers: poll without waiting first.
                self.poll(Some(std::time::Duration::ZERO));
                // SAFETY: re-borrowed after polling.
                let l = unsafe { self.local() };
                l.budget = BUDGET; // (it polled)
                if l.run_queue.is_empty()
                    && let Some(key) = l.idle_queue.pop_front()
                {
                    l.run_queue.push_back(key);
                }
                continue;
            }
            if l.run_queue.is_empty() {
                match &self.worker {
                    Some(worker) => self.wait_for_work(worker, l.closing),
                    None => self.wait_for_events(),
                }
                // A budget counts the fibers run since the last poll: the
                // next poll comes after a whole budget more, or when the
                // queue runs dry. (Counted on across this poll, a server
                // at one connection made a needless `epoll_wait` of no
                // timeout every 64 round trips.)
                // SAFETY: re-borrowed after polling.
                unsafe { self.local() }.budget = BUDGET;
                continue;
            }
            if until != Until::BatchDone && l.budget == 0 {
                // A budget's worth of fibers ran: look for I/O and timers
                // before the next budget.
                self.poll_between_batches();
                // SAFETY: re-borrowed after polling.
                let l = unsafe { self.local() };
                l.budget = BUDGET;
            }
            // SAFETY: re-borrowed after polling.
            let l = unsafe { self.local() };
            let Some(next) = l.run_queue.pop_front() else {
                continue;
            };
            let rec = &mut l.fibers[next];
            if rec.state != State::Ready {
                continue;
            }
            rec.state = State::Running;
            if next == ROOT {
                continue; // seen at the top of the loop
            }
            l.budget = l.budget.saturating_sub(1);
            self.switch_to(ROOT, next);
        }
    }

    /// Publishes that the root runs, after a wait or on entry (see
    /// `scheduler::watch`).
    pub(crate) fn publish_root_running(&self) {
        self.shared.watch.publish_busy();
    }

    /// For a `turn` that found no normal fiber ready: runs each idle fiber
    /// ready now once (up to its next yield or park), polling for I/O and
    /// timers without waiting before each, and stops when a normal fiber is
    /// ready. Returns how many it ran.
    pub(crate) fn run_idle_once(&self) -> usize {
        // SAFETY: on the runtime's thread; short borrow.
        let ready = unsafe { self.local() }.idle_queue.len();
        let mut ran = 0;
        for _ in 0..ready {
            self.poll(Some(std::time::Duration::ZERO));
            // SAFETY: on the runtime's thread; short borrow, ended before
            // the fiber runs.
            let l = unsafe { self.local() };
            if !l.run_queue.is_empty() {
                break; // a normal fiber first, in the next turn
            }
            let Some(key) = l.idle_queue.pop_front() else {
                break;
            };
            // Through the run queue, as a batch of one: it runs to its next
            // yield (which queues it behind the other idle fibers) or park.
            l.run_queue.push_back(key);
            l.budget = 1;
            self.run_root(Until::BatchDone);
            ran += 1;
        }
        ran
    }

    /// Runs a `turn`'s batch: the fibers ready now, each once, in order
    /// (one that yields goes behind them, to the next batch). With a
    /// `deadline` (ns, `turn_with_budget`), no fiber but the first is
    /// resumed once the clock reads it (the first always is: turns that
    /// all come late still make progress): the batch goes one fiber at a
    /// time, back to the root after each (a budget of one), which checks
    /// the clock between them;
    /// the fibers left stay at the head of the run queue, first in the next
    /// batch. (Checking the clock where fibers hand over to each other
    /// would cost every switch of every runtime a test.)
    pub(crate) fn run_batch(&self, deadline: Option<u64>) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let batch = u32::try_from(l.run_queue.len()).unwrap_or(u32::MAX);
        let Some(deadline) = deadline else {
            l.budget = batch;
            self.run_root(Until::BatchDone);
            return;
        };
        for i in 0..batch {
            if !self.has_ready() || (i > 0 && clock::now_ns() >= deadline) {
                break;
            }
            // SAFETY: on the runtime's thread; short borrow.
            unsafe { self.local() }.budget = 1;
            self.run_root(Until::BatchDone);
        }
    }

    /// Fibers in the run queue.
    pub(crate) fn ready_count(&self) -> usize {
        // SAFETY: on the runtime's thread; short borrow.
        unsafe { self.local() }.run_queue.len()
    }

    /// Whether the runtime is being driven (`block_on`, `run`, `turn`,
    /// its drop) on this thread now.
    pub(crate) fn is_entered(&self) -> bool {
        // SAFETY: on the runtime's thread; short borrow.
        unsafe { self.local() }.entered
    }

    pub(crate) fn has_ready(&self) -> bool {
        // SAFETY: on the runtime's thread; short borrow.
        !unsafe { self.local() }.run_queue.is_empty()
    }

    /// The poll between two budgets of fibers, while fibers are ready. It
    /// skips `epoll_wait` when no fd is awaited: news from other threads is
    /// in `take_woken` and timers are checked without the kernel. (Events of
    /// the waker and the timerfd then stay queued in epoll, so the runtime's
    /// fd may look readable once more than needed: harmless.)
    fn poll_between_batches(&self) {
        // SAFETY: on the runtime's thread; short borrow.
        let skip_epoll = !unsafe { self.local() }.reactor.has_waiters();
        self.poll_with(Some(std::time::Duration::ZERO), skip_epoll);
    }

    /// One poll of the reactor (at most `timeout`; `None`: until an event),
    /// then due timers and messages from other threads. A poll that may
    /// sleep busy-polls first, if the runtime was built to (see
    /// `Builder::busy_poll`); the sleep is then shorter by the time spent.
    pub(crate) fn poll(&self, timeout: Option<std::time::Duration>) {
        let mut timeout = timeout;
        if self.busy_poll_ns != 0 && timeout != Some(std::time::Duration::ZERO) {
            let (spent, news) = self.busy_poll(timeout);
            if news {
                return;
            }
            timeout = timeout.map(|t| t.saturating_sub(spent));
        }
        self.poll_with(timeout, false);
    }

    /// Polls without sleeping until something happens (an event, a
    /// message, a timer: the caller's loop may be waiting for any of them,
    /// a worker's stop among others) or the busy-poll time (at most
    /// `timeout`) is up; returns the time spent and whether something
    /// happened.
    #[inline(never)]
    fn busy_poll(&self, timeout: Option<std::time::Duration>) -> (std::time::Duration, bool) {
        let limit = timeout.map_or(self.busy_poll_ns, |t| {
            self.busy_poll_ns
                .min(u64::try_from(t.as_nanos()).unwrap_or(u64::MAX))
        });
        let start = clock::now_ns();
        // Not running anything: the watchdog must not take the spin for a
        // stalled root.
        self.shared.watch.publish_idle();
        let mut now = start;
        let mut news = false;
        while !news && now - start < limit {
            news = self.poll_with(Some(std::time::Duration::ZERO), false) || self.has_ready();
            now = clock::now_ns();
        }
        self.publish_root_running();
        (std::time::Duration::from_nanos(now - start), news)
    }

    /// Whether [`Core::run_root`] is done, `until` being `NoFibers` or
    /// `BatchDone` (`Runtime::run` and a runtime's end; an outer event
    /// loop's turns). Out of line, so that `run_root` has no jump table: a
    /// root parked in `block_on` waits for `RootWoken` and a worker for
    /// `Stopped`, tested inline; a server under `Runtime::run` pays a call
    /// a turn instead of a page of read-only data.
    #[inline(never)]
    fn batch_or_fibers_done(l: &Local, until: Until) -> bool {
        match until {
            Until::NoFibers => l.live == 0,
            Until::BatchDone => l.budget == 0 || l.run_queue.is_empty(),
            Until::RootWoken | Until::Stopped => unreachable!("tested inline"),
        }
    }

    /// [`Core::poll_events`], then a worker's own business; returns
    /// whether anything happened.
    fn poll_with(&self, timeout: Option<std::time::Duration>, skip_epoll: bool) -> bool {
        let mut news = self.poll_events(timeout, skip_epoll);
        if let Some(worker) = &self.worker {
            // SAFETY: on the runtime's thread; short borrow.
            let l = unsafe { self.local() };
            if !l.closing {
                news |= self.start_own(worker);
            }
            let (alive, ready) = self.figures();
            worker.publish(alive, ready);
        } else {
            let (alive, ready) = self.figures();
            self.shared.publish(alive, ready);
        }
        news
    }

    /// Fibers alive, and of those the ones ready to run (for metrics; a
    /// fiber woken twice may count twice in `ready` until it runs).
    pub(crate) fn figures(&self) -> (usize, usize) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let root_ready = usize::from(l.fibers[ROOT].state == State::Ready);
        let ready = l.run_queue.len().saturating_sub(root_ready);
        (l.live, ready.min(l.live))
    }

    /// The body of [`Core::poll_with`] that every runtime shares; returns
    /// whether anything happened: an event, a message, a timer.
    fn poll_events(&self, timeout: Option<std::time::Duration>, skip_epoll: bool) -> bool {
        if self.fork_gen != crate::scheduler::fork::generation() {
            crate::scheduler::fork::forked_runtime(); // (see `scheduler::fork`)
        }
        let mut news = false;
        let zero = timeout == Some(std::time::Duration::ZERO);
        // For the watchdog: the runtime is not starved (`watchdog/starve.rs`).
        self.shared.watch.count_poll();
        // Held the CPU a while: let the threads waiting for it run (see
        // `share_cpu`), before a poll that does not wait, after one that
        // may have (a wait that finds events at once does not give the CPU
        // up; one that lasted did, and then no count needs reading).
        // SAFETY: on the runtime's thread; short borrow.
        let look = unsafe { self.local() }.cpu_share.due();
        let mut remote = self.shared.take_woken();
        if !zero {
            // The root may wait: a context the watchdog warned about (the
            // root itself, or a fiber that parked since) has stopped.
            self.stall_ended();
        }
        if !skip_epoll {
            let (polled, mut ready) = {
                // SAFETY: on the runtime's thread; no user code runs and no
                // switch happens while this borrow lives.
                let l = unsafe { self.local() };
                let mut timeout = timeout;
                if !zero
                    && l.timers
                        .next_expiration()
                        .is_none_or(|next| next > clock::now_ns() + IDLE_RELEASE_NS)
                {
                    // About to sleep for a while: a good moment to give back
                    // the memory of stacks that fibers left behind. (Not
                    // before a short sleep: a burst of fibers would pay for
                    // it.)
                    stack::release_pending();
                }
                if !zero && let Some(next) = l.timers.next_expiration() {
                    if next <= clock::now_ns() {
                        timeout = Some(std::time::Duration::ZERO);
                    } else {
                        l.reactor.arm_timer(next);
                    }
                }
                if remote {
                    timeout = Some(std::time::Duration::ZERO);
                }
                let mut ready = std::mem::take(&mut l.io_ready);
                let waits = timeout != Some(std::time::Duration::ZERO);
                if waits {
                    // Nothing runs while the thread waits: no stall.
                    self.shared.watch.publish_idle();
                } else if let Some(now) = look {
                    l.cpu_share.look(now);
                }
                let polled = l.reactor.poll(timeout, &mut ready);
                if waits {
                    self.publish_root_running();
                    if let Some(started) = look {
                        l.cpu_share.after_wait(started);
                    }
                }
                (polled, ready)
            };
            match polled {
                Ok(Polled {
                    remote: r,
                    any,
                    tasks,
                }) => {
                    news = any;
                    remote |= r && self.shared.take_woken();
                    // (Taken apart, so nothing is left to drop here: the
                    // task wakers, rare, leave out of line.)
                    if let Some(tasks) = tasks {
                        run_task_wakes(tasks);
                    }
                }
                Err(e) => self.epoll_failed(e),
            }
            // Each wake-up borrows the state on its own: it is traced (a
            // subscriber's code) after. (The vector is cleared after: a
            // `drain` is more code on the path of every turn.)
            for &token in &ready {
                self.wake_io(token);
            }
            ready.clear();
            // SAFETY: on the runtime's thread; short borrow.
            unsafe { self.local() }.io_ready = ready;
        }
        // What follows is rare or absent in most turns of a busy server
        // (messages from other threads, dump requests, a failed wake-up)
        // or has its own function (timers): out of line, so that the code
        // a turn runs stays a few cache lines (after each wait, the kernel
        // has left little of it in the caches).
        if skip_epoll && let Some(now) = look {
            // SAFETY: on the runtime's thread; short borrow.
            unsafe { self.local() }.cpu_share.look(now);
        }
        news |= self.deliver_interrupts();
        if self.shared.has_wake_error() {
            self.report_wake_error();
        }
        if remote {
            self.take_remote();
        }
        // The clock is read here only if something needs it: most turns of
        // a busy server have neither a timer nor a backlog of stacks.
        stack::release_stale_pending(clock::now_ns);
        // SAFETY: on the runtime's thread; short borrow.
        if !unsafe { self.local() }.timers.is_empty() {
            news |= self.fire_timers();
        }
        news |= remote;
        // Answered last (an answer may wake a fiber).
        if remote {
            self.answer_dumps();
        }
        news
    }

    #[cold]
    #[inline(never)]
    fn epoll_failed(&self, e: std::io::Error) {
        self.callback("event", || {
            let message = format!("epoll_wait failed: {e}");
            crate::report::tell(crate::report::Level::Error, "fibra", &message, None, || {
                tracing::error!(error = %e, "epoll_wait failed");
            });
        });
    }

    #[cold]
    #[inline(never)]
    fn report_wake_error(&self) {
        if let Some(e) = self.shared.take_wake_error() {
            self.callback("event", || {
                let message = format!("cannot wake a fibra runtime: {e}");
                crate::report::tell(crate::report::Level::Error, "fibra", &message, None, || {
                    tracing::error!(error = %e, "cannot wake a fibra runtime");
                });
            });
        }
    }

    /// Acts on the messages other threads queued (wake-ups, cancellations);
    /// keeps the dump requests among them for the end of the turn
    /// ([`Core::answer_dumps`]).
    #[inline(never)]
    fn take_remote(&self) {
        // SAFETY: on the runtime's thread; short borrow.
        let mut dumps = std::mem::take(&mut unsafe { self.local() }.dumps);
        // SAFETY: on the runtime's thread; short borrow.
        let mut msgs = std::mem::take(&mut unsafe { self.local() }.remote);
        if let Some(worker) = &self.worker {
            // Before the drain: a message may wake a fiber (`pool/quiet.rs`).
            worker.leave_quiet();
        }
        self.shared.drain(&mut msgs);
        for msg in msgs.drain(..) {
            match msg {
                Remote::Unpark(token) => {
                    self.wake(token, Wake::Unparked);
                }
                Remote::Cancel(key, id) => self.cancel(key, id),
                Remote::Dump(answer) => dumps.push(answer),
                Remote::Start(job) => {
                    // SAFETY: on the runtime's thread; short borrow, ended
                    // before the job runs.
                    let closing = unsafe { self.local() }.closing;
                    if closing {
                        drop(job); // its handle says cancelled
                    } else {
                        job.start(self);
                    }
                }
            }
        }
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        l.remote = msgs;
        l.dumps = dumps;
    }

    /// Wakes the fibers whose timers are due; returns whether any was.
    #[inline(never)]
    fn fire_timers(&self) -> bool {
        // SAFETY: on the runtime's thread; short borrow, ended before the
        // wake-ups.
        let l = unsafe { self.local() };
        let now = clock::now_ns();
        let mut fired = std::mem::take(&mut l.fired);
        l.timers.advance(now, &mut fired);
        let any = !fired.is_empty();
        for f in fired.drain(..) {
            self.wake(f.value, Wake::TimedOut);
        }
        // SAFETY: on the runtime's thread; short borrow.
        unsafe { self.local() }.fired = fired;
        any
    }

    /// Leaves the runtime to an outer loop: its fd must be readable when it
    /// has work, so arm the timerfd for the next timer and, if fibers are
    /// ready, wake the waker.
    pub(crate) fn prepare_outer_wait(&self) {
        stack::release_pending();
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        if let Some(next) = l.timers.next_expiration() {
            l.reactor.arm_timer(next);
        }
        // Work left for the next turn makes the fd readable with a new
        // edge (the waker's eventfd, in the epoll set): a ready fiber, or
        // events beyond what the last poll took, which an outer watcher
        // that is edge-triggered would otherwise never hear of.
        if !l.run_queue.is_empty() || l.reactor.events_left() {
            self.shared.wake_fd();
        }
    }

    /// The root waits or leaves: a stall the watchdog warned about (the
    /// root's own, or that of a fiber that has parked since) has ended, and
    /// is told with its total. A relaxed load when there is none.
    #[inline]
    pub(crate) fn stall_ended(&self) {
        if self
            .shared
            .watch
            .pending
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            self.stall_ended_slow();
        }
    }

    #[cold]
    #[inline(never)]
    fn stall_ended_slow(&self) {
        if let Some((running, total)) = self.shared.watch.take_ended(clock::now_ns()) {
            let thread = self.shared.thread_name.as_str();
            if let Some(tell) = crate::scheduler::watch::TELL_ENDED.get() {
                self.callback("event", || tell(thread, &running, total));
            }
        }
    }
}

/// Wakes and drops the task wakers a poll handed out (see `Polled`): out of
/// line, off the path of every turn of a runtime without async tasks.
#[cold]
#[inline(never)]
fn run_task_wakes(tasks: Box<crate::reactor::TaskWakes>) {
    drop(tasks);
}
