//! # fibra — stackful fibers on an epoll reactor
//!
//! Write plain blocking code — `sleep`, `join`, waiting on an fd — and run a
//! million of them on one thread. Every task is a *fiber* with its own stack;
//! when it blocks, a hand-written x86_64 switch resumes another, and an epoll
//! reactor wakes it when what it waits for is ready. It is the Windows "await
//! a kernel handle" design (`async_await(handle)` + `async_run()`), done on
//! Linux without a handle limit.
//!
//! ```
//! use std::time::{Duration, Instant};
//!
//! let start = Instant::now();
//! let total = fibra::run(|| {
//!     let fibers: Vec<_> = (1..=1000u64)
//!         .map(|i| fibra::spawn(move || {
//!             fibra::sleep(Duration::from_millis(20)); // all sleep at once
//!             i
//!         }))
//!         .collect();
//!     fibers.into_iter().map(|f| f.join().unwrap()).sum::<u64>()
//! });
//! assert_eq!(total, 500_500);
//! assert!(start.elapsed() < Duration::from_secs(10)); // not 1000 × 20 ms
//! ```
//!
//! ## The pieces
//!
//! - Running: [`run`], [`Runtime`] ([`block_on`](Runtime::block_on),
//!   [`run`](Runtime::run), [`turn`](Runtime::turn) for an outer loop, and its
//!   fd for `poll`).
//! - Fibers: [`spawn`], [`Builder`], [`JoinHandle`], [`scope`],
//!   [`yield_now`], [`current`].
//! - Time: [`sleep`], [`sleep_until`], [`timeout`].
//! - Kernel objects: [`io::wait`] on any fd, [`io::EventFd`].
//!
//! - Unmodified blocking code (cargo feature `hook`, off by default):
//!   inside a fiber, std's socket calls and `std::thread::sleep` park the
//!   fiber instead of blocking the thread.
//!
//! Every blocking call also works outside a runtime, where it blocks the
//! thread, so libraries can use them without knowing who calls.
//!
//! ## Guarantees
//!
//! - A fiber never moves to another thread: `Rc`, `RefCell` and
//!   thread-locals are safe across blocking calls.
//! - A stack overflow in a fiber is reported (`fiber 'name' (id N) has
//!   overflowed its stack of K KiB`) and aborts; it never corrupts memory.
//! - A panic in a fiber is caught at its root and returned by
//!   [`JoinHandle::join`]. Cancelling a fiber, a [`timeout`], or dropping its
//!   runtime unwinds it from where it blocks, so its destructors run.
//! - Yield, park and unpark allocate nothing, take no lock and make no
//!   syscall on their own thread.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

mod arch;
mod blocking;
mod fiber;
mod future;
mod generator;
#[cfg(feature = "hook")]
mod hook;
pub mod io;
pub mod net;
pub mod process;
mod reactor;
pub mod runtime;
pub mod signal;
mod stack;
pub mod sync;
mod time;

pub use blocking::spawn_blocking;
pub use fiber::{
    Builder, Fiber, FiberId, JoinError, JoinHandle, Scope, ScopedJoinHandle, current, scope, spawn,
    yield_now,
};
pub use future::block_on_future;
pub use generator::{Generator, Yielder};
pub use runtime::{Runtime, run};
pub use stack::{DEFAULT_STACK_SIZE, MAX_STACK_SIZE, MIN_STACK_SIZE};
pub use time::{Elapsed, sleep, sleep_until, timeout};

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
