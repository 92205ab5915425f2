//! What a waiting operation leaves in a channel: a [`Context`] (one per
//! wait, shared by every operation of a `select`), and an [`Entry`] per
//! operation in the [`Waker`](crate::channel::waker::Waker) of waiting
//! receivers or senders of each channel it waits on.
//!
//! # The protocol
//!
//! A waiter makes a `Context` on its stack, registers an `Entry` pointing at
//! it in each channel it waits on (under that channel's lock), parks, and
//! unregisters every entry before the context goes out of scope, on every
//! way out, unwinding included ([`OnUnwind`] does it for an unwind).
//!
//! A notifier (a sender that finds a waiting receiver, say) holds the
//! line's lock, removes the entry and moves the context out of `WAITING`
//! with a compare-exchange; only one notifier can win, so one operation of
//! a `select` completes. Every selection takes two steps: `claim`
//! (`WAITING` → `CLAIMED`), then `finish` (`CLAIMED` → the selected
//! operation, release). In between, a hand-over writes the waiter's packet,
//! and the notifier makes the unparker it will wake the waiter with (the
//! context keeps a fiber's without a reference count, which may be taken only
//! while the claim pins the waiter: see `RawUnparker`). A notifier never
//! parks between the two, so a waiter that finds its context `CLAIMED`
//! (from another thread) spins a moment for `finish`. The notifier wakes
//! the waiter after releasing the lock: nothing of the waiter's stack is
//! touched after `finish`.
//!
//! A waiter that gives up (its deadline passed, it is cancelled, a `select`
//! whose other operation was chosen) aborts: `WAITING` → `ABORTED`. If that
//! fails a notifier won: the waiter honours the selection (takes the
//! message, or passes it on when it is unwinding).

use crate::channel::backoff::Backoff;
pub(crate) use crate::channel::selection::Selected;
use crate::channel::selection::Selection;
use crate::scheduler::park::{
    Halted, Parked, RawUnparker, Unparker, check_unwind, park_current, park_without_unwind,
};
use crate::scheduler::wait_on::WaitOn;
use crate::timer::clock;

/// One wait: a fiber or thread parked on one or several operations.
pub(crate) struct Context {
    state: Selection,
    /// What wakes the waiter: its next park, or (a thread waiting on fds
    /// too) the eventfd it polls. A fiber's is kept without a reference
    /// count: a notifier makes the real unparker while its claim pins the
    /// waiter (`Entry::finish`). One per wait, whatever the number of its
    /// entries.
    unparker: RawUnparker,
}

impl Context {
    /// A wait of the calling fiber or thread, woken at its next park.
    #[inline]
    pub(crate) fn new() -> Context {
        Context {
            state: Selection::new(),
            unparker: RawUnparker::current(),
        }
    }

    /// A wait woken by `unparker` (not the calling context's next park).
    pub(crate) fn with_unparker(unparker: Unparker) -> Context {
        Context {
            state: Selection::new(),
            unparker: RawUnparker::Other(unparker),
        }
    }

    /// What wakes the waiter, for a wake-up that does not select (a join
    /// finishing): counted, to be kept anywhere.
    pub(crate) fn unparker(&self) -> Unparker {
        match &self.unparker {
            RawUnparker::Other(unparker) => unparker.clone(),
            RawUnparker::Fiber(_) => Unparker::current(),
        }
    }

    /// Takes the context for a hand-over (see the module docs); `finish`
    /// must follow without a park in between.
    #[inline]
    pub(crate) fn claim(&self) -> bool {
        self.state.claim()
    }

    /// Ends a hand-over begun by `claim`: the waiter may look now.
    #[inline]
    pub(crate) fn finish(&self, selected: Selected) {
        self.state.finish(selected);
    }

    /// Whether a hand-over holds the context (between `claim` and
    /// `finish`).
    #[inline]
    fn is_claimed(&self) -> bool {
        self.state.is_claimed()
    }

    /// Whether the context still waits (a notifier may choose it).
    #[inline]
    pub(crate) fn is_waiting(&self) -> bool {
        self.state.is_waiting()
    }

    /// The selection, once made: waits out a hand-over in progress.
    #[inline]
    pub(crate) fn selected(&self) -> Selected {
        self.state.selected()
    }

    /// Makes a wait that ended wait again: a readiness fd's watcher, which
    /// is registered anew each time it fired (`ready_cell.rs`). The caller
    /// has taken its entry out of its line under that line's lock (or
    /// never registered it): no notifier holds or can claim it now, and
    /// the registration that follows publishes the store.
    #[inline]
    pub(crate) fn reset(&self) {
        self.state.reset();
    }

    /// Gives up waiting: `Aborted`, or the selection a notifier made first.
    #[inline]
    pub(crate) fn abort(&self) -> Selected {
        self.state.abort()
    }
}

/// What a waiting operation offers a notifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A receiver's empty slot (`*mut Option<T>`), or a blocked sender's
    /// slot holding its message.
    Packet(*mut ()),
    /// A `select`'s send, whose message is made only once it is selected:
    /// selecting it reserves room for that message in a buffered channel;
    /// on a channel of capacity 0 it pairs the send with the receiver that
    /// selects it, which writes their promise into the slot (a
    /// `*mut PromiseSlot<T>`; null on a buffered channel).
    Lazy(*mut ()),
    /// A `ready` wait: selecting it only says the operation may go ahead.
    Watch,
    /// A wait on a channel without a lock (`flavors/lockfree/`): selecting it says
    /// its side may have changed, and the waiter tries again. One is woken
    /// per change, watchers all.
    Notify,
}

/// One waiting operation in a channel's line.
pub(crate) struct Entry {
    /// The wait's context: dereferenced only under the lock of the
    /// channel whose waker holds the entry (see `Entry::cx`).
    pub(super) cx: *const Context,
    pub(super) oper: usize,
    pub(super) kind: Kind,
}

impl Entry {
    #[inline]
    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    /// The entry's context.
    #[inline]
    pub(crate) fn cx(&self) -> &Context {
        // An entry is reachable only through its channel's lock, which
        // the caller holds (`&Entry` from a locked `Waker`).
        // SAFETY: its waiter unregisters it, under that lock, before its
        // context goes away (module docs): the context is alive.
        unsafe { &*self.cx }
    }

    /// Selects `selected` for the entry's wait if it still waits: claims
    /// and finishes it, and returns what wakes its waiter (after releasing
    /// the lock).
    pub(crate) fn select(&self, selected: Selected) -> Option<Unparker> {
        if !self.cx().claim() {
            return None;
        }
        // SAFETY: claimed just now and finished below.
        Some(unsafe { self.finish_claimed(selected) })
    }

    /// Ends the selection of an entry the caller claimed
    /// (`Context::claim`) and took out of its line, a hand-over written or
    /// not: selects the entry's own operation and returns what wakes its
    /// waiter (after releasing the lock).
    ///
    /// A claimed entry was claimed by its holder: an entry is claimed only
    /// in its line, under the line's lock, by whoever then takes it out
    /// (`Waker::take_first`); the waiter itself never claims.
    ///
    /// # Panics
    ///
    /// If the entry's context is not claimed.
    #[inline]
    pub(crate) fn finish(self) -> Unparker {
        assert!(
            self.cx().is_claimed(),
            "an entry is claimed before it is finished"
        );
        // SAFETY: claimed (asserted) by the caller, its holder (see above);
        // finished once, here: `self` is consumed.
        unsafe { self.finish_claimed(Selected::Operation(self.oper)) }
    }

    /// # Safety
    ///
    /// The entry's context was claimed by the caller and is not finished.
    #[inline]
    unsafe fn finish_claimed(&self, selected: Selected) -> Unparker {
        // SAFETY: claimed and not finished: the waiter does not end its
        // park until `finish` below. Made before it: after, the waiter (and
        // its context) may be gone.
        let unparker = unsafe { self.cx().unparker.pinned() };
        self.cx().finish(selected);
        unparker
    }
}

/// Parks the calling fiber or thread until `cx` is selected, or until
/// `deadline` (ns of the monotonic clock). Returns the selection, or
/// `Aborted` when the deadline passed or the park was woken for nothing (a
/// fiber's unparkers are then spent: the caller unregisters and starts its
/// wait again) — on a thread too when `any_wake` (the wait has operations
/// that wake it without selecting it: a join, an fd). A fiber cancelled (or
/// whose `fibra::timeout` expires) at the park unwinds — unless the wait was
/// served first, which then returns and leaves the unwind to the fiber's
/// next park: what a waiter was handed is kept, never handed back. The
/// caller's [`OnUnwind`] guard settles a wait that unwinds.
pub(crate) fn wait(
    cx: &Context,
    deadline: Option<u64>,
    on: &'static &'static str,
    any_wake: bool,
) -> Selected {
    // Looked up once: a started fiber never moves to another worker, so
    // its core is the same after each park.
    let core = crate::scheduler::context::current();
    if core.is_none() {
        // A thread spins a moment on its own context first, as
        // crossbeam's waits do: a partner that comes within microseconds
        // selects it without a sleep in the kernel and a wake-up after.
        // (A fiber parks at once: the others of its thread run.)
        let mut spin = Backoff::default();
        while spin.snooze() {
            let selected = cx.selected();
            if selected != Selected::Waiting {
                return selected;
            }
        }
    }
    loop {
        let selected = cx.selected();
        if selected != Selected::Waiting {
            return selected;
        }
        if deadline.is_some_and(|d| d <= clock::now_ns()) {
            return cx.abort();
        }
        let parked = match core {
            Some(core) => match park_without_unwind(core, deadline, WaitOn::Sync(on)) {
                Halted::Woken => Parked::Woken,
                Halted::TimedOut => Parked::TimedOut,
                Halted::Cancelled | Halted::Expired => {
                    // Served before the fiber ran (a message handed over,
                    // a send taken): the operation is done and returns;
                    // the cancel unwinds the fiber at its next park. So a
                    // message handed to a receiver never comes back.
                    let selected = cx.abort();
                    if selected != Selected::Aborted {
                        return selected;
                    }
                    check_unwind(core);
                    return Selected::Aborted;
                }
            },
            None => park_current(deadline, WaitOn::Sync(on)),
        };
        let selected = cx.selected();
        if selected != Selected::Waiting {
            return selected;
        }
        if any_wake || parked == Parked::TimedOut || core.is_some() {
            return cx.abort();
        }
        // A thread woken for nothing: its unparker stays good; park again.
    }
}

/// Settles a wait that ends by unwinding (a cancel or `fibra::timeout` at
/// its park): aborts it and runs `settle` with the selection — `Aborted`,
/// or what a notifier chose first, to be passed on — which must also
/// unregister what is still registered. Defused on the normal way out.
pub(crate) struct OnUnwind<'a, F: FnOnce(Selected)> {
    cx: &'a Context,
    settle: Option<F>,
}

impl<'a, F: FnOnce(Selected)> OnUnwind<'a, F> {
    pub(crate) fn new(cx: &'a Context, settle: F) -> OnUnwind<'a, F> {
        OnUnwind {
            cx,
            settle: Some(settle),
        }
    }

    pub(crate) fn defuse(mut self) {
        self.settle = None;
    }
}

impl<F: FnOnce(Selected)> Drop for OnUnwind<'_, F> {
    fn drop(&mut self) {
        if let Some(settle) = self.settle.take() {
            settle(self.cx.abort());
        }
    }
}
