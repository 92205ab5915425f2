//! A call the kernel completes while the current fiber parks (a hooked
//! `connect` or `accept`, see `reactor/completions.rs`): the door to the
//! reactor's ring from above, as `readiness` is the door to its fds.
//!
//! The ground rules are `readiness`'s: each borrow of `Local` is short, on
//! the runtime's thread, and ends before anything that may run user code
//! (waking another fiber is traced after its borrow).
//!
//! A [`Completion`] names memory of its caller's that the kernel reads or
//! writes until the op completes, so it never ends before: dropped early
//! (the caller gave up on it), it cancels the op and parks, regardless of
//! cancellation, until the kernel says the op is over.

use std::io;

use crate::reactor::OpKey;
use crate::reactor::token::WakeToken;
use crate::scheduler::core::Core;
use crate::scheduler::core::record::Wake;
use crate::scheduler::park::park_regardless;
use crate::scheduler::wait_on::WaitOn;

/// An op in the reactor's ring, for the current fiber.
pub(crate) struct Completion<'a> {
    core: &'a Core,
    key: OpKey,
    /// What the fiber is shown as waiting on while it parks for the op.
    on: WaitOn,
}

impl<'a> Completion<'a> {
    /// Submits `connect(fd, addr, len)`. `Err` when the runtime has no
    /// ring (the kernel refused io_uring): then the caller waits some other
    /// way.
    ///
    /// # Safety
    ///
    /// `addr` is valid for `len` bytes (or is what the caller wants the
    /// kernel's EFAULT for) for as long as the `Completion` lives.
    pub(crate) unsafe fn connect(
        core: &'a Core,
        fd: i32,
        addr: *const libc::sockaddr,
        len: libc::socklen_t,
    ) -> io::Result<Completion<'a>> {
        let token = core.current_token();
        // SAFETY: the borrow: see the ground rules (token read before it,
        // the reactor makes only syscalls). The op: the caller's contract,
        // and the op ends before this `Completion` does (see `Drop`).
        let key = unsafe { core.local().reactor.submit_connect(fd, addr, len, token)? };
        Ok(Completion {
            core,
            key,
            on: WaitOn::Fd(fd, crate::reactor::Interest::WRITABLE),
        })
    }

    /// Submits `accept4(fd, addr, len, flags)`; `Err` as for `connect`.
    ///
    /// # Safety
    ///
    /// `addr` and `len` are null, or valid for accept4(2) (or what the
    /// caller wants the kernel's EFAULT for), while the `Completion` lives.
    pub(crate) unsafe fn accept(
        core: &'a Core,
        fd: i32,
        addr: *mut libc::sockaddr,
        len: *mut libc::socklen_t,
        flags: i32,
    ) -> io::Result<Completion<'a>> {
        let token = core.current_token();
        // SAFETY: as in `connect`.
        let key = unsafe {
            core.local()
                .reactor
                .submit_accept(fd, addr, len, flags, token)?
        };
        Ok(Completion {
            core,
            key,
            on: WaitOn::Fd(fd, crate::reactor::Interest::READABLE),
        })
    }

    /// What the fiber waits on, for its park (a dump shows it).
    pub(crate) fn wait_on(&self) -> WaitOn {
        self.on
    }

    /// The op's result (a non-negative answer, or `-errno`), once the
    /// kernel completed it. Reads the ring's queued completions first, so
    /// one the kernel made during the submission is seen without a park;
    /// the other fibers whose completions it finds are woken.
    pub(crate) fn result(&self) -> Option<i32> {
        let mut woken: Vec<WakeToken> = Vec::new();
        let result = {
            // SAFETY: the ground rules: short, on the runtime's thread, no
            // user code (the reactor reaps with syscalls only).
            let l = unsafe { self.core.local() };
            if l.reactor.op_result(self.key).is_none() {
                l.reactor.reap(false, &mut woken);
            }
            l.reactor.op_result(self.key)
        };
        let me = self.core.current_token().key;
        for token in woken {
            // (Our own token: we run, and read the result just now.)
            if token.key != me {
                self.core.wake(token, Wake::Unparked);
            }
        }
        result
    }

    /// Makes the op's completion wake the current fiber's next park.
    pub(crate) fn rearm(&self) {
        let token = self.core.current_token();
        // SAFETY: the ground rules (token read before the borrow).
        unsafe { self.core.local() }
            .reactor
            .retoken_op(self.key, token);
    }

    /// Asks the kernel to end the op early; its completion still must be
    /// waited for (it says `-ECANCELED` if the cancellation won).
    pub(crate) fn cancel(&self) {
        // SAFETY: the ground rules.
        unsafe { self.core.local() }.reactor.cancel_op(self.key);
    }

    /// Parks until the op's completion, whatever wakes the fiber meanwhile
    /// (a cancellation, a timeout, a signal): for a caller that cancelled
    /// the op and must not return before the kernel is done with it.
    pub(crate) fn finish(&self) -> i32 {
        loop {
            if let Some(r) = self.result() {
                return r;
            }
            self.rearm();
            park_regardless(self.core, None, self.on);
        }
    }
}

impl Drop for Completion<'_> {
    fn drop(&mut self) {
        if self.result().is_none() {
            // Given up on: the kernel may still touch the caller's memory,
            // so this frame waits for the end.
            self.cancel();
            self.finish();
        }
        // SAFETY: the ground rules.
        unsafe { self.core.local() }.reactor.release_op(self.key);
    }
}
