//! The handle's end of a join packet: registering a waiter, waiting,
//! polling, and taking the result.

use super::*;

/// The handle's end of a packet.
pub(crate) struct HandleEnd<T>(pub(super) NonNull<Packet<T>>);

// SAFETY: the state protocol serialises every access to the packet's cells;
// the result crosses threads, hence `T: Send`. `scope` is only dereferenced
// on the scope's own thread: a scoped packet's handle end lives inside a
// `ScopedJoinHandle`, which is `!Send` and `!Sync`, and its fiber end on the
// scope's runtime, which a started fiber never leaves.
unsafe impl<T: Send> Send for HandleEnd<T> {}
// SAFETY: as above; `&HandleEnd` only reads the state word.
unsafe impl<T: Send> Sync for HandleEnd<T> {}

/// What registering a waiter found.
pub(crate) enum Registered {
    /// The fiber will wake the waiter when it is done.
    Waiting,
    /// The fiber is done, or finishing: `done` comes without a wake-up.
    Finishing,
}

impl<T> HandleEnd<T> {
    pub(crate) fn packet(&self) -> &Packet<T> {
        // SAFETY: the handle's end keeps the packet alive until it is
        // dropped (see the invariant).
        unsafe { self.0.as_ref() }
    }

    /// Corrects where the fiber lives, before the handle is handed out.
    pub(crate) fn relocate(&mut self, at: FiberRef) {
        // SAFETY: `at` is read only by the handle's end, which `&mut self`
        // borrows exclusively; the fiber's end never touches it.
        unsafe { (*self.0.as_ptr()).at = at };
    }

    pub(crate) fn is_done(&self) -> bool {
        self.packet().done.load(Ordering::Acquire)
    }

    /// Publishes a waiter (replacing an earlier one), so that the fiber
    /// wakes it when done: `put` stores it into the slot it is given, and
    /// says whether it is a `join` inside the fiber's runtime (see
    /// [`LOCAL`]).
    ///
    /// `put` writes the slot itself, rather than return the waiter to be
    /// stored here: a waiter chosen among several kinds was otherwise built
    /// on the stack and copied with loads wider than the stores that had
    /// just written it, which the CPU cannot forward (a stall of a dozen
    /// cycles on every join).
    #[inline]
    pub(crate) fn register(&self, put: impl FnOnce(&mut Option<Unparker>) -> bool) -> Registered {
        let packet = self.packet();
        let mut state = packet.state.load(Ordering::Acquire);
        loop {
            if state & COMPLETING != 0 {
                return Registered::Finishing;
            }
            if state & WAITING == 0 {
                break;
            }
            // Take the slot back to put a newer waiter in (a future polled
            // again, maybe with another waker).
            match packet.state.compare_exchange_weak(
                state,
                state & !WAITING,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => state = now,
            }
        }
        // SAFETY: WAITING and COMPLETING are clear: the slot is ours.
        if put(unsafe { &mut *packet.waiter.get() }) {
            // The fiber runs in this runtime, so not before we park, and
            // nothing else reaches the packet: `state` cannot have changed
            // since we read it, and a plain store publishes the waiter.
            packet
                .state
                .store(state | WAITING | LOCAL, Ordering::Relaxed);
            return Registered::Waiting;
        }
        if set_once(&packet.state, WAITING) & COMPLETING != 0 {
            // The fiber got there first and will not look at the slot.
            return Registered::Finishing;
        }
        Registered::Waiting
    }

    /// Waits out the few instructions between `COMPLETING` and `done` (the
    /// fiber runs on another thread: on ours it cannot be caught between,
    /// as nothing parks there).
    pub(crate) fn finish_wait(&self) {
        let mut spins = 0u32;
        while !self.is_done() {
            if spins < 64 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// The result, once `done` was seen.
    pub(crate) fn take_result(&self) -> Result<T, JoinError> {
        debug_assert!(self.is_done());
        // SAFETY: `done` seen (Acquire): the fiber is gone, and the result
        // is the handle's alone.
        unsafe { (*self.packet().result.get()).take() }
            .expect("fibra: a JoinHandle was polled after it returned the result")
    }

    /// Waits for the result, parking with the waiter `waiter` makes.
    ///
    /// A waiter names one park (a fiber's wake token): after a wake-up
    /// that was not the fiber's completion — a cancel landing on a join
    /// made while unwinding, which parks plainly — the next park needs a
    /// waiter of its own, registered again, or the completion would go to
    /// the spent one and never arrive.
    #[inline]
    pub(crate) fn wait(
        &self,
        mut waiter: impl FnMut(&mut Option<Unparker>) -> bool,
        id: FiberId,
    ) -> Result<T, JoinError> {
        while !self.is_done() {
            match self.register(&mut waiter) {
                Registered::Waiting => {
                    park_current(None, WaitOn::Join(id));
                }
                Registered::Finishing => self.finish_wait(),
            }
        }
        self.take_result()
    }

    /// One poll of the result, for the `Future` impl.
    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<Result<T, JoinError>> {
        if !self.is_done() {
            let waker = |slot: &mut Option<Unparker>| {
                *slot = Some(Unparker::Waker(cx.waker().clone()));
                false // a future may move to any thread
            };
            match self.register(waker) {
                Registered::Waiting => return Poll::Pending,
                Registered::Finishing => self.finish_wait(),
            }
        }
        Poll::Ready(self.take_result())
    }
}

impl<T> Drop for HandleEnd<T> {
    fn drop(&mut self) {
        // Seeing `done` is enough (the fiber's last access was setting it),
        // so a joined handle frees the packet without a read-modify-write.
        if !self.is_done() {
            if set_once(&self.packet().state, HANDLE_GONE) & COMPLETING == 0 {
                return; // the fiber will see HANDLE_GONE and free it
            }
            // The fiber was already handing over: it will not free the
            // packet, and sets `done` in a moment.
            self.finish_wait();
        }
        // SAFETY: the fiber is gone: this end is the last owner.
        unsafe { free(self.0) };
    }
}
