//! Calls out of the scheduler: other people's code that runs while the
//! scheduler holds its own state (a tracing subscriber's callback, the
//! `mio::Waker`'s write, a hooked signal handler's trampoline). With the
//! `hook` feature, a hooked blocking call made there blocks the thread
//! instead of parking: [`callout`] counts the calls out on this thread, and
//! the hooks ask [`in_callout`]. A thread-local count that knows nothing of
//! a runtime, so that the core and the part of a runtime other threads
//! touch (`shared.rs`) both stand on it.

#[cfg(feature = "hook")]
thread_local! {
    static CALLOUT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Runs `f`, other people's code that the scheduler calls while it holds
/// its own state (a tracing subscriber's callback). With the `hook`
/// feature, a blocking call made there blocks the thread instead of parking
/// (see [`in_callout`]); without it this is just `f()`.
#[inline(always)]
pub(crate) fn callout<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(feature = "hook")]
    {
        struct Leave;
        impl Drop for Leave {
            fn drop(&mut self) {
                CALLOUT.with(|c| c.set(c.get() - 1));
            }
        }
        CALLOUT.with(|c| c.set(c.get() + 1));
        let _leave = Leave;
        f()
    }
    #[cfg(not(feature = "hook"))]
    f()
}

/// Whether the scheduler is calling out (see [`callout`]): a hooked call
/// must not park there, in the middle of a park or a switch.
#[cfg(feature = "hook")]
#[inline]
pub(crate) fn in_callout() -> bool {
    CALLOUT.with(std::cell::Cell::get) != 0
}
