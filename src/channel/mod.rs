//! Channels that many fibers and threads send on and receive from, and
//! [`select!`](crate::select) to wait on several at once: Go's channels and
//! `select`, with crossbeam-channel's API name for name, so that a program
//! moves from crossbeam to fibra by changing its `use` lines.
//!
//! - [`unbounded`] and [`bounded`] make a channel; `bounded(0)` is a
//!   rendezvous, where a send waits for a receiver (Go's unbuffered
//!   channel). [`Sender`] and [`Receiver`] are both `Clone`: any number of
//!   producers and consumers (a worker pool shares one receiver).
//! - [`after`], [`at`], [`tick`] and [`never()`] are receivers that no sender
//!   feeds: a timeout, a deadline, a ticker, and an arm that is never
//!   ready (to switch a `select!` arm off).
//! - [`select!`](crate::select) waits on several operations and completes
//!   exactly one; [`select_biased!`](crate::select_biased) prefers the
//!   first ready arm; [`Select`] is the same, built at run time.
//!
//! In a fiber every wait parks the fiber (and is a point where
//! [`cancel`](crate::JoinHandle::cancel) and [`fibra::timeout`](crate::timeout)
//! take effect); on a plain thread it blocks the thread. Fibers of any
//! runtime and plain threads share channels freely. A message is never lost
//! or duplicated, also when a waiting fiber is cancelled at the moment it
//! is handed one: a wait that was served before the fiber ran again
//! completes (the `recv` returns the message, the `send` returns `Ok`), and
//! the cancel unwinds the fiber at its next park.
//!
//! As in crossbeam, a `select!` arm `send(s, expr)` evaluates `expr` only
//! once that send is chosen. On `bounded(0)` the chosen send is paired with
//! one receiver, which waits for that very message (and a `try_recv` that
//! pairs with it waits the moment the arm takes); nothing is ever buffered.
//! If the arm never completes the send (it panics), the receiver goes back
//! to waiting for another sender.
//!
//! A buffered channel (`bounded(n)`, n ≥ 1) is a ring without a lock and
//! an unbounded one a list of blocks without a lock, as crossbeam's: a
//! send or receive that finds room or a message takes no lock and parks no
//! one, and one that waits hands over as Go's channels do (a send to an
//! empty channel whose receiver waits gives the message straight to it). A
//! chosen `select!` send holds its slot while its expression runs; a
//! receive that reaches that slot waits for the message, so an expression
//! must not receive from the very channel it is sent on when nothing else
//! is queued there (it would wait for itself, as in crossbeam; `bounded(0)`
//! pairs instead and is fine). A capacity whose ring would take more than
//! 64 MiB is a locked channel, which grows as it fills.
//!
//! A fiber that polls without ever waiting (`try_recv`, `try_send`,
//! `try_iter`, `try_select`, `select!` with `default`, `try_ready` or a
//! zero-timeout `ready` in a loop) still lets the other fibers of its
//! thread run, as Go's preemption does: after 64 of its non-blocking calls
//! in a row have failed with no switch between them, the call yields once,
//! through the runtime's poll for I/O and timers, so the fiber it waits for
//! gets the thread even when that one waits on a socket or a sleep. The
//! yield is not a cancellation point. Waiting (`recv`, `select!`,
//! `recv_timeout`) is still the better loop: it costs nothing while
//! nothing comes.
//!
//! # Go's idioms
//!
//! A fan-in with a timeout and a quit channel, in one fiber:
//!
//! ```
//! use std::time::Duration;
//! use fibra::channel::{after, bounded, tick, unbounded};
//!
//! fibra::run(|| {
//!     let (jobs_s, jobs) = unbounded::<u32>();
//!     let (quit_s, quit) = bounded::<()>(0);
//!     let producer = fibra::spawn(move || {
//!         for i in 0..3 {
//!             jobs_s.send(i).unwrap();
//!             fibra::sleep(Duration::from_millis(2));
//!         }
//!         quit_s.send(()).unwrap();
//!     });
//!     let ticker = tick(Duration::from_millis(1));
//!     let (mut got, mut ticks) = (Vec::new(), 0);
//!     loop {
//!         fibra::select! {
//!             recv(jobs) -> job => got.push(job.unwrap()),
//!             recv(ticker) -> _ => ticks += 1,
//!             recv(quit) -> _ => break,
//!             recv(after(Duration::from_secs(5))) -> _ => panic!("stuck"),
//!         }
//!     }
//!     producer.join().unwrap();
//!     assert_eq!(got, [0, 1, 2]);
//!     assert!(ticks > 0);
//! });
//! ```

mod backoff;
mod context;
mod err;
mod flavors;
mod ready_cell;
mod ready_fd;
mod receiver;
mod select;
mod selection;
mod sender;
mod spin_lock;
mod waker;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use err::{
    ReadyTimeoutError, RecvError, RecvTimeoutError, SelectTimeoutError, SendError,
    SendTimeoutError, TryReadyError, TryRecvError, TrySelectError, TrySendError,
};
pub use ready_fd::ReadyFd;
pub use receiver::{IntoIter, Iter, Receiver, SelectRecv, TryIter};
// What `select!`'s arms take (see `select/arm.rs`).
#[doc(hidden)]
pub use select::{Arm, SelectArg, SelectFd};
pub use select::{Select, SelectedOperation};
pub use sender::Sender;

use crate::timer::clock;
use flavors::{lockfree, timers, zero};
use receiver::ReceiverFlavor;
use sender::SenderFlavor;

/// A channel without a bound: sends never wait.
///
/// ```
/// let (s, r) = fibra::channel::unbounded();
/// for i in 0..1000 {
///     s.send(i).unwrap();
/// }
/// assert_eq!(r.len(), 1000);
/// assert_eq!(r.capacity(), None);
/// ```
pub fn unbounded<T>() -> (Sender<T>, Receiver<T>) {
    make(None)
}

/// A channel holding at most `cap` messages: a send to a full one waits.
/// `bounded(0)` holds none: a send waits until a receiver takes its
/// message (a rendezvous).
///
/// ```
/// use std::time::Duration;
///
/// fibra::run(|| {
///     let (s, r) = fibra::channel::bounded(0);
///     let taker = fibra::spawn(move || {
///         fibra::sleep(Duration::from_millis(5));
///         r.recv().unwrap()
///     });
///     s.send("hand over").unwrap(); // waits for the taker
///     assert_eq!(taker.join().unwrap(), "hand over");
/// });
/// ```
pub fn bounded<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    make(Some(cap))
}

/// A ring without a lock for a buffered channel whose slots fit
/// (`flavors/lockfree/array.rs`), the list of blocks for `unbounded()`
/// (`flavors/lockfree/list.rs`); the locked channel for `bounded(0)` and
/// capacities too large to allocate up front (`flavors/zero/`).
fn make<T>(cap: Option<usize>) -> (Sender<T>, Receiver<T>) {
    if let Some(cap) = cap
        && lockfree::ArraySlots::<T>::fits(cap)
    {
        let ring = Arc::new(lockfree::Array::new(lockfree::ArraySlots::new(cap)));
        return (
            Sender {
                flavor: SenderFlavor::Array(ring.clone()),
            },
            Receiver {
                flavor: ReceiverFlavor::Array(ring),
            },
        );
    }
    if cap.is_none() {
        let list = Arc::new(lockfree::List::new(lockfree::ListSlots::new()));
        return (
            Sender {
                flavor: SenderFlavor::List(list.clone()),
            },
            Receiver {
                flavor: ReceiverFlavor::List(list),
            },
        );
    }
    locked(cap)
}

/// A channel of the locked flavor (`flavors/zero/`) of capacity `cap`
/// (`None`: unbounded).
fn locked<T>(cap: Option<usize>) -> (Sender<T>, Receiver<T>) {
    let chan = Arc::new(zero::Zero::new(cap));
    (
        Sender {
            flavor: SenderFlavor::Zero(chan.clone()),
        },
        Receiver {
            flavor: ReceiverFlavor::Zero(chan),
        },
    )
}

/// An unbounded channel of the locked flavor, for `sync::mpsc::channel`:
/// a blocked receiver is handed each message straight into its wait under
/// one lock, where the list makes it claim the message again after its
/// wake-up. A ping-pong between two fibers (`cargo bench --bench sync --
/// channel_ping_pong`, against mpsc's own locked channel before it became
/// a face, three runs a side in one sitting): on the list 135–138 ns
/// against 121–126; on this flavor 127–131 ns against 130–137.
pub(crate) fn unbounded_locked<T>() -> (Sender<T>, Receiver<T>) {
    locked(None)
}

/// A receiver that gets one message, the `Instant` it was due, `duration`
/// from now: a timeout arm for [`select!`](crate::select).
///
/// ```
/// use std::time::Duration;
/// use fibra::channel::{after, unbounded};
///
/// let (_s, r) = unbounded::<u8>();
/// let timed_out = fibra::select! {
///     recv(r) -> _ => false,
///     recv(after(Duration::from_millis(5))) -> _ => true,
/// };
/// assert!(timed_out);
/// ```
pub fn after(duration: Duration) -> Receiver<Instant> {
    timer_at(clock::after_ns(duration))
}

/// A receiver that gets one message, `when`, at `when`.
pub fn at(when: Instant) -> Receiver<Instant> {
    timer_at(clock::instant_ns(when))
}

fn timer_at(ns: u64) -> Receiver<Instant> {
    Receiver {
        flavor: ReceiverFlavor::At(Arc::new(timers::At::new(ns)), |i| i),
    }
}

/// A receiver that gets the `Instant` of each period, `duration` apart; a
/// tick that nobody takes is dropped, and the next comes a period later.
///
/// ```
/// use std::time::Duration;
///
/// let ticks = fibra::channel::tick(Duration::from_millis(2));
/// let first = ticks.recv().unwrap();
/// let second = ticks.recv().unwrap();
/// assert!(second - first >= Duration::from_millis(2));
/// ```
pub fn tick(duration: Duration) -> Receiver<Instant> {
    Receiver {
        flavor: ReceiverFlavor::Tick(
            Arc::new(timers::Tick::new(clock::duration_ns(duration))),
            |i| i,
        ),
    }
}

/// A receiver that never gets a message: a [`select!`](crate::select) arm
/// switched off.
///
/// ```
/// use std::time::Duration;
/// use fibra::channel::{after, never, Receiver};
///
/// let maybe: Option<Receiver<u8>> = None;
/// let r = maybe.unwrap_or_else(never);
/// fibra::select! {
///     recv(r) -> _ => unreachable!(),
///     default(Duration::from_millis(1)) => {}
/// }
/// ```
pub fn never<T>() -> Receiver<T> {
    Receiver {
        flavor: ReceiverFlavor::Never,
    }
}
