//! The channel's side of a readiness fd ([`ReadyFd`](super::ReadyFd), in
//! `ready_fd.rs`): the [`ReadyCell`] every channel with a lock-free or
//! locked queue carries, and the [`Readiness`] it holds once a receiver
//! asked for an fd.
//!
//! # How the fd follows the channel
//!
//! A [`Readiness`] is an eventfd (its [`Bell`]) and a watcher: a context
//! registered as a `Kind::Watch` entry in the channel's line of waiting
//! receivers, as `Select::ready` registers one. Senders already wake the
//! watchers of that line whenever the receive side becomes ready — a
//! message queued, a sender waiting on a rendezvous, the disconnection —
//! so the fd costs a channel without one nothing, and one with it a wake-up
//! per arming, not per message. The watcher's waker rings the bell (writes
//! the eventfd). Being woken takes the watcher out of the line.
//!
//! A `try_recv` that finds the channel empty re-arms it
//! ([`ReadyCell::after_empty`]): it clears the eventfd, registers the
//! watcher again, and only then looks at the channel once more; if a
//! message came in between (after the drain's last `try_recv`, before the
//! watcher was back), the look sees it and rings the bell itself. A message
//! that comes after the look finds the watcher registered and rings it. So
//! the fd is never left clear while a receive would go ahead.
//!
//! # Ground rules
//!
//! - The cell's mutex serialises opening, closing and re-arming; notifiers
//!   never take it. Lock order: the cell's mutex, then the channel's lock
//!   (its line's or the locked channel's).
//! - The watcher's context lives in the `Arc<Readiness>` that the cell
//!   holds while the watcher may be in a line: the last `ReadyFd` going
//!   takes it out of the line (under the line's lock) before the cell lets
//!   the `Readiness` go. A notifier reaches the context only through the
//!   line, under its lock.
//! - A watcher is fired (claimed, finished, taken out of the line) within
//!   one hold of its line's lock; the bell is rung after that lock is
//!   released. A re-arm first takes the entry out of the line under that
//!   lock (gone already, or taken now): no notifier touches the context
//!   after that, and only then is it made to wait again.
//! - The bell's `rung` flag is raised after each write of the eventfd and
//!   lowered by a re-arm before it clears the eventfd. While the fd is
//!   open, a watcher that is not waiting is out of its line (fired), so
//!   "rung, or fired" says a re-arm is due; "waiting and not rung" says
//!   the watcher is in its line and the eventfd clear, save for the few
//!   instructions between a write and its flag.

use std::io;
use std::sync::Arc;
use std::task::{Wake, Waker};

// loom's in a model (`ready_cell/models.rs`).
use crate::atomic::{AtomicBool, Mutex, MutexGuard, Ordering};

use crate::channel::context::{Context, Selected};
use crate::io::EventFd;
use crate::scheduler::park::Unparker;

#[cfg(all(test, loom))]
mod models;

/// What a channel with a readiness fd lets [`ReadyCell`] do with it.
pub(crate) trait Watched {
    /// The channel's cell.
    fn cell(&self) -> &ReadyCell;
    /// Takes `watch` out of the receive side's line if it is there, makes
    /// it wait again ([`Context::reset`]), registers it as a watcher, and
    /// then returns whether a receive would go ahead now (a message, a
    /// sender waiting to hand one over, the disconnection).
    fn arm(&self, watch: &Context) -> bool;
    /// Takes `watch` out of the receive side's line, if it is there.
    fn disarm(&self, watch: &Context);
}

/// An eventfd that a watcher's waker rings.
pub(crate) struct Bell {
    efd: EventFd,
    /// Raised after each write, lowered by a re-arm before it clears the
    /// eventfd (module docs).
    rung: AtomicBool,
}

impl Bell {
    fn ring(&self) {
        // The counter fills only after 2^64 - 2 rings that nobody cleared;
        // a watcher rings once per arming. Readable either way.
        let _ = self.efd.write(1);
        self.rung.store(true, Ordering::Release);
    }

    /// Lowers the flag, then empties the eventfd.
    fn clear(&self) {
        self.rung.store(false, Ordering::Relaxed);
        let _ = self.efd.try_read();
    }

    pub(crate) fn efd(&self) -> &EventFd {
        &self.efd
    }
}

impl Wake for Bell {
    fn wake(self: Arc<Self>) {
        self.ring();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.ring();
    }
}

/// A channel's readiness: its eventfd and the watcher that rings it.
///
/// # Invariant
///
/// While the cell that made it holds it, `watch` is in the channel's line
/// of receivers (waiting) or out of it (fired, or in the middle of a
/// re-arm under the cell's mutex); it is in no line once the cell let go.
pub(crate) struct Readiness {
    /// The waker of `watch` holds the bell, not the `Readiness`: no cycle.
    bell: Arc<Bell>,
    watch: Context,
}

impl Readiness {
    /// An eventfd and a watcher that is registered nowhere yet.
    pub(crate) fn new() -> io::Result<Readiness> {
        let bell = Arc::new(Bell {
            efd: EventFd::new(0)?,
            rung: AtomicBool::new(false),
        });
        let waker = Waker::from(bell.clone());
        Ok(Readiness {
            bell,
            watch: Context::with_unparker(Unparker::Waker(waker)),
        })
    }

    pub(crate) fn bell(&self) -> &Bell {
        &self.bell
    }

    /// Whether a re-arm is due: the bell was rung, or the watcher fired.
    fn due(&self) -> bool {
        self.bell.rung.load(Ordering::Acquire) || self.watch.selected() != Selected::Waiting
    }
}

/// The readiness fd of one channel: none until a receiver asks, then one
/// [`Readiness`] shared by every [`ReadyFd`](super::ReadyFd) made from the
/// channel's receivers, until the last goes.
pub(crate) struct ReadyCell {
    /// Whether the channel has a readiness fd: the one look an empty
    /// `try_recv` makes on a channel without one.
    on: AtomicBool,
    slot: Mutex<Option<Opened>>,
}

struct Opened {
    readiness: Arc<Readiness>,
    /// The live `ReadyFd`s that share it.
    handles: usize,
}

impl ReadyCell {
    pub(crate) fn new() -> ReadyCell {
        ReadyCell {
            on: AtomicBool::new(false),
            slot: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Opened>> {
        // Nothing under this lock panics halfway (the counts and the
        // registration are each one step).
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The channel's readiness, made and armed on the first call; one more
    /// handle on it. Each call is matched by one [`ReadyCell::close`].
    pub(crate) fn open<W: Watched>(&self, channel: &W) -> io::Result<Arc<Readiness>> {
        let mut slot = self.lock();
        if let Some(opened) = slot.as_mut() {
            opened.handles += 1;
            return Ok(opened.readiness.clone());
        }
        let readiness = Arc::new(Readiness::new()?);
        *slot = Some(Opened {
            readiness: readiness.clone(),
            handles: 1,
        });
        self.on.store(true, Ordering::Relaxed);
        if channel.arm(&readiness.watch) {
            readiness.bell.ring();
        }
        Ok(readiness)
    }

    /// One handle fewer; the last takes the watcher out of the line and
    /// lets the readiness go (the eventfd closes with the last `Arc`).
    pub(crate) fn close<W: Watched>(&self, channel: &W) {
        let mut slot = self.lock();
        let Some(opened) = slot.as_mut() else {
            debug_assert!(false, "a ReadyFd closed a cell it never opened");
            return;
        };
        opened.handles -= 1;
        if opened.handles == 0 {
            channel.disarm(&opened.readiness.watch);
            self.on.store(false, Ordering::Relaxed);
            let gone = slot.take();
            drop(slot);
            drop(gone);
        }
    }

    /// Called by `try_recv` when it found the channel empty: re-arms the
    /// readiness, if the channel has one and it fired or was rung.
    #[inline]
    pub(crate) fn after_empty<W: Watched>(&self, channel: &W) {
        if self.on.load(Ordering::Relaxed) {
            self.rearm(channel);
        }
    }

    #[cold]
    #[inline(never)]
    fn rearm<W: Watched>(&self, channel: &W) {
        let slot = self.lock();
        let Some(opened) = slot.as_ref() else {
            return;
        };
        let readiness = &opened.readiness;
        if !readiness.due() {
            // In its line, the eventfd clear (or about to be rung by a
            // notifier that fired it: its flag follows the write, and the
            // next empty `try_recv` clears it).
            return;
        }
        readiness.bell.clear();
        // Armed again before the look: a message sent after the drain's
        // last `try_recv` is seen by the look or rings the watcher.
        if channel.arm(&readiness.watch) {
            readiness.bell.ring();
        }
    }
}

impl Default for ReadyCell {
    fn default() -> ReadyCell {
        ReadyCell::new()
    }
}
