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
//! ## Guides
//!
//! Coming from somewhere? Each [guide] maps what you know onto fibra, with
//! examples that run:
//!
//! - [from std threads](guide::from_std_threads): `thread::spawn`, `scope`,
//!   `Mutex`, `mpsc`, `std::net`, one thread per core;
//! - [from tokio](guide::from_tokio): `#[tokio::main]`, `spawn`, `.await`,
//!   `select!`, `timeout`, `abort`, `spawn_blocking`, async crates;
//! - [from Go](guide::from_go): goroutines, channels and `select`,
//!   `context` deadlines, `WaitGroup`, `GOMAXPROCS`, the goroutine dump;
//! - [blocking the runtime](guide::blocking): what stalls a thread's
//!   fibers, the stall warning, the blocking pool;
//! - [thread-locals](guide::thread_locals): the one rule, `OnceLock` and
//!   `fiber_local!`;
//! - [embedding](guide::embedding): fibra's loop inside yours (`poll`,
//!   epoll, a frame loop, glib, libuv, calloop).
//!
//! ## The pieces
//!
//! - Running: [`run`], [`Runtime`] ([`block_on`](Runtime::block_on),
//!   [`run`](Runtime::run), [`turn`](Runtime::turn) for an outer loop, and its
//!   fd for `poll`).
//! - Fibers: [`spawn`], [`Builder`] (and [idle fibers](Builder::idle)),
//!   [`JoinHandle`], [`scope`], [`Group`] (fibers that end together),
//!   [`yield_now`], [`current`], [`try_current`], [`fiber_local!`].
//! - Seeing inside: a fiber that keeps its thread is named by a `tracing`
//!   WARN while it runs ([`stall_warning`](runtime::Builder::stall_warning));
//!   [`Runtime::dump`] lists every fiber; in gdb, `info fibers` and `fiber
//!   N bt` ([In gdb](runtime#in-gdb)).
//! - Time: [`sleep`], [`sleep_until`], [`timeout`].
//! - Channels: [`channel`] (crossbeam-channel's API: MPMC, `bounded(0)`
//!   rendezvous, timers) and [`select!`] over channels, sockets and
//!   fibers' ends; [`sync`] for std's shapes (`Mutex`, `mpsc`, ...).
//! - Kernel objects: [`io::wait`] on any fd, [`io::EventFd`].
//! - Files: [`fs`] (std::fs's shapes, on the blocking pool from a fiber);
//!   other blocking work: [`spawn_blocking`].
//!
//! - Unmodified blocking code (cargo feature `hook`, off by default):
//!   inside a fiber, std's socket calls and `std::thread::sleep` park the
//!   fiber instead of blocking the thread; see [below](#the-hook-feature).
//! - Async crates on fibra's reactor (cargo features `futures-io` and
//!   `tokio-io`): fibra's stream sockets implement `futures_io`'s and
//!   tokio's `AsyncRead`/`AsyncWrite`, so hyper, tokio-postgres,
//!   tokio-rustls or tokio-tungstenite run from fibers with
//!   [`block_on_future`], no tokio runtime needed; see
//!   [`net`'s docs](net#async-io).
//!
//! Every blocking call also works outside a runtime, where it blocks the
//! thread, so libraries can use them without knowing who calls.
//!
//! ## Guarantees
//!
//! - A fiber never moves to another thread: `Rc` and `RefCell` are safe
//!   across blocking calls, and so is a borrow of a thread-local made
//!   inside `LocalKey::with` — with one rule: a `thread_local!`
//!   initializer must not park the fiber (see [Thread-locals](#thread-locals)
//!   and the [guide](guide::thread_locals)).
//!   A runtime dropped while its thread destroys its thread-locals (one
//!   kept in a `thread_local!`) leaks its fibers instead of unwinding them
//!   into destroyed values.
//! - A panic in a fiber is caught at its root and returned by
//!   [`JoinHandle::join`]. Cancelling a fiber, a [`timeout`], or dropping its
//!   runtime unwinds it from where it blocks, so its destructors run.
//! - A `tracing` subscriber's callbacks (a fiber span's `enter`, `exit`,
//!   `try_close`, `new_span`, fibra's events) never run while fibra holds a
//!   reference into its own state: they may spawn, wake and log. They may
//!   not block there (a panic says so) nor unwind (the process aborts with
//!   a message).
//! - A switch preserves exactly the System V callee-saved state (rbx, rbp,
//!   r12–r15, rsp, MXCSR and x87 control words, each fiber keeping its own;
//!   a generator, entered like a call, shares its caller's, as a call
//!   does): the switch saves rbx, rbp, the FP words and its resume point,
//!   in inline assembly that declares r12–r15 clobbered, so the compiler
//!   saves those only where they hold something. It neither calls nor
//!   returns (its second half jumps to the other context's resume point),
//!   so the CPU's return stack stays each context's own. It carries CFI:
//!   `std::backtrace`, gdb and perf walk a fiber's stack and stop at its
//!   root.
//! - Every stack has a guard page. Overflowing it prints `fiber 'name' (id
//!   N) has overflowed its stack of K KiB` and aborts; it never corrupts
//!   memory. An overflow in the middle of a switch (the switch pushes its
//!   frame on the stack it leaves) is reported the same way: a switch reads
//!   the lowest byte it will push before it records the stack it goes to,
//!   so the fault comes while the stack it leaves is still the one
//!   recorded.
//! - On Linux ≥ 6.13 guards use `MADV_GUARD_INSTALL` and cost no extra
//!   mapping, so a million guarded fibers use 44 mappings, far under the
//!   default `vm.max_map_count` of 65 530. Older kernels have no
//!   `MADV_GUARD_INSTALL`: each guard page is an `mprotect` that splits the
//!   mapping, so under the default `vm.max_map_count` a process tops out
//!   near 32 000 live fibers. Beyond that, use Linux ≥ 6.13 or raise
//!   `vm.max_map_count` (`sysctl vm.max_map_count=2500000`).
//! - Your own SIGSEGV handler: fibra installs its handler (with
//!   `SA_ONSTACK`, on an alternate signal stack it gives every thread that
//!   runs fibers) when the first runtime or generator starts, and passes
//!   every fault that is not a fiber's guard page to the handler that was
//!   installed before it. So install yours *before* the first runtime
//!   starts and both work; one installed afterwards replaces fibra's, and a
//!   fiber's overflow is then yours to report (give it `SA_ONSTACK`, or it
//!   runs on the exhausted stack).
//! - CET shadow stacks are not supported: the switch does not switch shadow
//!   stacks. A runtime or generator created on a thread with a shadow stack
//!   active returns an `Unsupported` error that says so (Linux enables one
//!   only for binaries marked SHSTK-compatible, e.g. built with
//!   `-Zcf-protection=full`, and only when glibc is told to).
//! - A stream socket's `read` and `write` of one buffer make the system call
//!   themselves (`recvfrom`, `sendto` with `MSG_NOSIGNAL`), as Go does, not
//!   through libc: glibc's wrappers are cancellation points and cost two
//!   calls more each in a process of several threads. So a tool that
//!   interposes libc's `recv`/`send` with `LD_PRELOAD` does not see those
//!   calls (`strace` and `perf trace` do); vectored reads and writes and
//!   every other socket call still go through std and libc.
//! - A fiber that makes 128 socket calls in a row without blocking (its
//!   data always there) yields, and its thread polls for I/O, so it cannot
//!   starve the other fibers of its thread.
//! - Timers never fire early; timers due together fire in deadline order.
//! - Yield, park and unpark allocate nothing, take no lock and make no
//!   syscall on their own thread.
//!
//! ## Blocking the runtime
//!
//! A fiber runs until it parks, and while it runs nothing else runs on its
//! thread. fibra's calls park the fiber; a call that blocks the *thread*
//! instead (`std::fs`, `std::thread::sleep`, a `std::sync::Mutex` held
//! across a park, a long CPU loop, a crate's own blocking I/O) stalls every
//! fiber of that thread until it returns. Use [`fs`], [`sleep`], [`sync`],
//! [`yield_now`] or [`spawn_blocking`] (a pool of up to 512 threads, see
//! [`set_max_blocking_threads`]) instead, or the `hook` feature for std's
//! sockets. fibra does not stall silently: a fiber that runs without
//! parking for longer than [`stall_warning`](runtime::Builder::stall_warning)
//! (100 ms unless set) is named in a `tracing` WARN, target `fibra::stall`,
//! while it still runs, and listed as running in a [`Runtime::dump`] (or
//! a SIGQUIT dump after [`runtime::dump_on_sigquit`]). The
//! [blocking guide](guide::blocking) has the whole table, the watchdog and
//! the pool.
//!
//! ## The hook feature
//!
//! With `features = ["hook"]`, code written for std and for C clients runs
//! in fibers unchanged: a call that would block parks the fiber instead of
//! the thread. fibra defines, in the executable, the libc entry points that
//! std and C libraries call; the executable's definitions win over libc's
//! in a normal `cargo build` (no `LD_PRELOAD`, no linker flags). Outside a
//! fiber every hook makes the plain system call, at the cost of one
//! thread-local load.
//!
//! - **Sockets**: `read`, `write`, `readv`, `writev`, `recv`, `recvfrom`,
//!   `recvmsg`, `send`, `sendto`, `sendmsg`, `accept`, `accept4`,
//!   `connect`. Timeouts set with `set_read_timeout`/`set_write_timeout`
//!   hold (`WouldBlock`); a socket made non-blocking gets `WouldBlock` at
//!   once; a blocking write sends everything; a socket's `O_NONBLOCK` is
//!   never changed behind the program's back, so a `try_clone` on a plain
//!   thread sees what the program set (`accept` and `connect` are made by
//!   the runtime's io_uring while the fiber parks: no thread waits).
//! - **Closing**: `close`, `dup2` and `dup3` forget the fd's registration,
//!   so a reused fd number is never woken by mistake.
//! - **Other pollable fds**: `read`/`write` (and the vectored forms) on
//!   pipes, FIFOs, ttys and eventfds — a child's stdout read in a fiber
//!   parks.
//! - **Event-loop waits**: `poll`, `ppoll`, `select`, `pselect`,
//!   `epoll_wait`, `epoll_pwait`, `epoll_pwait2` park on their fds and
//!   deadline (a wait with a signal mask goes to the kernel).
//! - **Name resolution**: `getaddrinfo` (behind `ToSocketAddrs`),
//!   `getnameinfo`, `gethostbyname(_r)` run glibc's resolver on the
//!   blocking pool while the fiber parks.
//! - **Sleeping**: `nanosleep`/`clock_nanosleep` (behind
//!   `std::thread::sleep`) park on fibra's timers, for the full time.
//! - **Signals** end parked calls as they end the kernel's: a handler that
//!   runs on the thread makes a parked `select`/`poll`/`epoll_wait` or
//!   sleep fail with `EINTR` (a sleep says what was left), and a parked
//!   socket or pipe call too when the handler lacks `SA_RESTART` (or the
//!   socket has a timeout); `siginterrupt` is hooked.
//! - **Not hooked**: files (use [`fs`]); stdin, stdout and stderr; code
//!   that makes system calls without libc (rustix's `linux_raw` backend, a
//!   static C library); `splice`/`sendfile` in `io::copy`; fds closed by a
//!   raw system call; fd numbers from 4 Mi up.
//! - **Cancellation and timeouts** cannot unwind through C frames: a
//!   hooked call that waits when a [`JoinHandle::cancel`] or a [`timeout`]
//!   lands fails with `ECANCELED` or `ETIMEDOUT`, and the fiber unwinds at
//!   its next fibra park (see [`timeout`] for what it then returns).
//! - **`fork`** in a fiber: the child runs on as plain blocking code, with
//!   no runtime (it may start its own); it must `exec` or `_exit`, and is
//!   ended with a message if it returns into its copy of the parent's
//!   runtime, which shares the parent's epoll instance and timers. This
//!   holds without the feature too.
//! - **Signal handlers** never park or yield: handlers installed with
//!   `sigaction`/`signal` run marked as such, so a blocking call in one
//!   blocks the thread as the kernel's would, and a write to a nonblocking
//!   socket (the self-pipe trick) is just that write.
//! - **Embedded event loops** with thread-local state (tokio inside the
//!   sync `postgres` crate) park in their `epoll_wait` too; a second fiber
//!   of the thread entering the same loop meanwhile finds the first's state
//!   (tokio panics "Cannot start a runtime from within a runtime"). Give
//!   such a client [`spawn_blocking`].
//!
//! ```no_run
//! use std::io::{Read, Write};
//! use std::net::{TcpListener, TcpStream};
//!
//! // A server and clients written for std, unchanged. With the hook, each
//! // accept, read, write and connect parks its fiber. Without it, the
//! // server's first accept would block the thread, and with it the clients
//! // that were to connect: the stall the hook takes away (tests/hook.rs
//! // runs this shape with the feature on).
//! let listener = TcpListener::bind("127.0.0.1:0").unwrap();
//! let addr = listener.local_addr().unwrap();
//! fibra::run(move || {
//!     let server = fibra::spawn(move || {
//!         for _ in 0..3 {
//!             let (mut conn, _) = listener.accept().unwrap();
//!             fibra::spawn(move || {
//!                 let mut buf = [0u8; 5];
//!                 conn.read_exact(&mut buf).unwrap();
//!                 conn.write_all(&buf).unwrap();
//!             });
//!         }
//!     });
//!     let clients: Vec<_> = (0..3)
//!         .map(|_| fibra::spawn(move || {
//!             let mut s = TcpStream::connect(addr).unwrap();
//!             s.write_all(b"hello").unwrap();
//!             let mut back = [0u8; 5];
//!             s.read_exact(&mut back).unwrap();
//!             back
//!         }))
//!         .collect();
//!     for c in clients {
//!         assert_eq!(&c.join().unwrap(), b"hello");
//!     }
//!     server.join().unwrap();
//! });
//! ```
//!
//! ## Thread-locals
//!
//! The fibers of a thread share its thread-locals, and interleave: one may
//! park inside `KEY.with(..)` while another uses `KEY` too. Borrowing
//! inside `with` and parking there is fine. The one rule: **a
//! `thread_local!` initializer must not park** — no `fibra::sleep`, socket,
//! lock, channel, `join` or other blocking call of fibra's while the value
//! is being made, or a second fiber makes the value again and std drops
//! one that fiber still borrows. For a value that takes a blocking call to
//! make, keep a [`sync::OnceLock`] (or use [`sync::LazyLock`]): a fiber
//! that comes while another fills it waits, parked. For a value per fiber,
//! use [`fiber_local!`]. The [thread-locals guide](guide::thread_locals)
//! explains why, and shows each.
//!
#![deny(unsafe_op_in_unsafe_fn)]
// On docs.rs (every feature on): each item a feature adds says so.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]
// gdb's `info fibers` and `fiber N bt` are not a `#![debugger_visualizer]`,
// which rustc writes only with debug info: `observe/debugger.rs` puts
// them in every binary (see `runtime`'s docs, "In gdb"), but for an
// AddressSanitizer build, whose red zones would break that section.
#![cfg_attr(
    fibra_asan,
    debugger_visualizer(gdb_script_file = "observe/debugger/gdb_fibers.py")
)]

mod arch;
mod atomic;
mod blocking;
pub mod channel;
mod fiber;
pub mod fs;
mod future;
mod generator;
pub mod guide;
#[cfg(feature = "hook")]
mod hook;
pub mod io;
mod mem;
pub mod net;
mod observe;
pub mod process;
mod reactor;
mod report;
pub mod runtime;
mod scheduler;
pub mod signal;
mod stack;
pub mod sync;
mod time;
mod timer;

pub use blocking::{max_blocking_threads, set_max_blocking_threads, spawn_blocking};
pub use fiber::Group;
pub use fiber::{
    AccessError, Builder, Fiber, FiberId, FiberLocal, JoinError, JoinHandle, Scope,
    ScopedJoinHandle, current, scope, spawn, try_current, yield_now,
};
pub use future::block_on_future;
pub use generator::{Generator, Yielder};
pub use runtime::{Runtime, run};
pub use stack::{DEFAULT_STACK_SIZE, MAX_STACK_SIZE, MIN_STACK_SIZE};
#[cfg(feature = "futures-io")]
pub use time::Sleep;
pub use time::{Elapsed, sleep, sleep_until, timeout};

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
