//! The part of a runtime other threads may touch: a queue of messages and
//! the `mio::Waker` that interrupts the runtime's `epoll_wait`.
//!
//! An unpark from another thread cannot touch the run queue (it belongs to
//! the runtime's thread), so it queues a message here; the runtime drains the
//! queue when it next polls. The `woken` flag coalesces wake-ups: only the
//! first message after a drain writes the eventfd.
//!
//! Memory ordering: a message pushed before `unpark` returns is seen by the
//! runtime's drain (the mutex orders them), so whatever the sender wrote
//! before unparking (Release) is visible to the fiber after its park returns
//! (Acquire), as with `std::thread::park`.

use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::thread::ThreadId;

use crate::reactor::WAKER;
use crate::reactor::token::{Key, WakeToken};
use crate::scheduler::callout::callout;
use crate::scheduler::core::job::Job;
use crate::scheduler::fiber_id::FiberId;
use crate::scheduler::fiber_info::Section;
use crate::scheduler::watch::Watch;

/// What a dump request runs with the runtime's fibers (see `runtime::dump`).
pub(crate) type DumpAnswer = Box<dyn FnOnce(Section) + Send>;

pub(crate) enum Remote {
    Unpark(WakeToken),
    Cancel(Key, FiberId),
    /// Answer with the runtime's fibers (see `runtime::dump`).
    Dump(DumpAnswer),
    /// Start a fiber sent from another thread (`runtime::Handle::spawn`
    /// into a current-thread runtime). Dropped unrun (the runtime is
    /// gone or closing), its join handle says cancelled.
    Start(Job),
}

pub(crate) struct Shared {
    queue: Mutex<Queue>,
    /// Set by the first message after a drain; the runtime clears it.
    woken: AtomicBool,
    waker: mio::Waker,
    /// The thread the runtime runs on.
    pub(crate) owner: ThreadId,
    /// That thread's name, for dumps.
    pub(crate) thread_name: String,
    /// The errno of the last failed [`Shared::wake_fd`] (0: none), for the
    /// runtime to report at its next poll: `wake_fd` is called where the
    /// runtime's state is borrowed (a wake-up queues a fiber), and a log
    /// line is a subscriber's code, which must not run there.
    wake_error: AtomicI32,
    /// What the watchdog and dumps read while the runtime runs (see
    /// `scheduler::watch`).
    pub(crate) watch: Watch,
    /// The fibers alive and ready as a current-thread runtime last
    /// published them (at every poll), for a `Handle` on another thread;
    /// a worker's are in its pool slot.
    alive: AtomicUsize,
    ready: AtomicUsize,
}

struct Queue {
    messages: Vec<Remote>,
    /// The runtime has been dropped: messages go nowhere.
    closed: bool,
}

impl Shared {
    pub(crate) fn new(registry: &mio::Registry, root: FiberId) -> io::Result<Shared> {
        Ok(Shared {
            watch: Watch::new(root),
            alive: AtomicUsize::new(0),
            ready: AtomicUsize::new(0),
            queue: Mutex::new(Queue {
                messages: Vec::new(),
                closed: false,
            }),
            woken: AtomicBool::new(false),
            wake_error: AtomicI32::new(0),
            waker: mio::Waker::new(registry, WAKER)?,
            owner: std::thread::current().id(),
            thread_name: std::thread::current().name().map_or_else(
                || format!("{:?}", std::thread::current().id()),
                str::to_owned,
            ),
        })
    }

    /// Queues a message for the runtime and wakes it. Does nothing once the
    /// runtime is gone (its fibers have all finished by then).
    pub(crate) fn send(&self, msg: Remote) {
        {
            let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            if q.closed {
                return;
            }
            q.messages.push(msg);
        }
        if !self.woken.swap(true, Ordering::AcqRel) {
            self.wake_fd();
        }
    }

    /// Makes the runtime's epoll fd readable (and its `epoll_wait` return).
    /// A failure is kept for [`Shared::take_wake_error`], not logged here.
    pub(crate) fn wake_fd(&self) {
        // mio writes its eventfd through libc's `write`: as a callout, the
        // `hook` feature's `write` leaves it the one system call it is.
        if let Err(e) = callout(|| self.waker.wake()) {
            let errno = e.raw_os_error().unwrap_or(libc::EIO);
            self.wake_error.store(errno, Ordering::Relaxed);
        }
    }

    /// The error of a failed [`Shared::wake_fd`] since the last call.
    /// Whether a wake-up of this runtime failed since the last
    /// [`Shared::take_wake_error`].
    #[inline]
    pub(crate) fn has_wake_error(&self) -> bool {
        self.wake_error.load(Ordering::Relaxed) != 0
    }

    pub(crate) fn take_wake_error(&self) -> Option<io::Error> {
        if !self.has_wake_error() {
            return None;
        }
        let errno = self.wake_error.swap(0, Ordering::Relaxed);
        (errno != 0).then(|| io::Error::from_raw_os_error(errno))
    }

    /// Whether a message was sent since the runtime last took its messages
    /// (it will, woken): a relaxed load, for `pool/quiet.rs`.
    pub(crate) fn has_news(&self) -> bool {
        self.woken.load(Ordering::Relaxed)
    }

    /// Whether messages may be waiting; clears the flag (the caller drains).
    pub(crate) fn take_woken(&self) -> bool {
        self.woken.load(Ordering::Relaxed) && self.woken.swap(false, Ordering::AcqRel)
    }

    /// Whether messages wait to be drained: read under the queue's lock,
    /// which orders it after a drain (see `pool/quiet.rs`).
    pub(crate) fn has_messages(&self) -> bool {
        let q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        !q.messages.is_empty()
    }

    /// Moves the queued messages into `into`.
    pub(crate) fn drain(&self, into: &mut Vec<Remote>) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        into.append(&mut q.messages);
    }

    /// The runtime is gone: drop what is queued and refuse what comes.
    /// Dropped after the lock is released: a fiber sent to start holds a
    /// user's closure, whose `Drop` may send here again.
    pub(crate) fn close(&self) {
        let messages = {
            let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            q.closed = true;
            std::mem::take(&mut q.messages)
        };
        drop(messages);
    }

    /// Publishes a current-thread runtime's figures (see [`Shared::figures`]).
    pub(crate) fn publish(&self, alive: usize, ready: usize) {
        // Stored only when they change, as a worker's are.
        if self.alive.load(Ordering::Relaxed) != alive {
            self.alive.store(alive, Ordering::Relaxed);
        }
        if self.ready.load(Ordering::Relaxed) != ready {
            self.ready.store(ready, Ordering::Relaxed);
        }
    }

    /// A current-thread runtime's fibers alive, and of those ready, as it
    /// last published them.
    pub(crate) fn figures(&self) -> (usize, usize) {
        let alive = self.alive.load(Ordering::Relaxed);
        (alive, self.ready.load(Ordering::Relaxed).min(alive))
    }
}
