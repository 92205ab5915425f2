//! Coming from tokio.
//!
//! In tokio a task is a future: it stops only at an `.await`, and the
//! compiler turns it into a state machine. In fibra a task is a fiber: a
//! closure with a stack of its own, which stops wherever it calls
//! something that waits. So the translation is mostly deletion: drop
//! `async` and `.await`, keep the logic. What you gain is ordinary Rust
//! inside tasks — borrows across waits, `Rc`, recursion, traits without
//! `async fn` — and no `Send` bound on what a fiber holds, since it never
//! moves to another thread.
//!
//! # The map
//!
//! | tokio | fibra | what differs |
//! |---|---|---|
//! | `#[tokio::main]`, `Runtime::block_on(async { .. })` | [`fibra::run(\|\| ..)`](crate::run), [`Runtime::block_on(\|\| ..)`](crate::Runtime::block_on) | `run` is a current-thread runtime |
//! | `Builder::new_multi_thread().worker_threads(n)` | [`Runtime::builder().workers(n)`](crate::runtime::Builder::workers) | a started fiber never changes thread; idle workers take only fibers not yet started |
//! | `tokio::spawn(async move { .. })` | [`fibra::spawn(move \|\| ..)`](crate::spawn) | no `Send`; `spawn_local` and `LocalSet` have nothing left to do |
//! | `.await` | (delete it) | the call itself waits, parking the fiber |
//! | `handle.abort()` | [`handle.cancel()`](crate::JoinHandle::cancel) | unwinds the fiber from the call it waits in |
//! | `JoinSet`, `CancellationToken` | [`fibra::Group`](crate::Group) | one type for both; see [below](#joinset-and-cancellationtoken-group) |
//! | `JoinError::is_cancelled`, `is_panic`, `into_panic` | [`JoinError`](crate::JoinError), the same names | |
//! | `tokio::task::yield_now().await` | [`fibra::yield_now()`](crate::yield_now) | |
//! | `spawn_blocking(f).await` | [`fibra::spawn_blocking(f)`](crate::spawn_blocking) | returns `f`'s value; a panic in `f` is re-raised |
//! | `tokio::time::sleep(d).await` | [`fibra::sleep(d)`](crate::sleep) | timers fire late by microseconds, not milliseconds |
//! | `tokio::time::timeout(d, fut).await` | [`fibra::timeout(d, \|\| ..)`](crate::timeout) | times out a closure, however deep it waits |
//! | `tokio::time::interval(d)` | [`fibra::channel::tick(d)`](crate::channel::tick) | a channel: also usable in `select!` |
//! | `tokio::select!` | [`fibra::select!`](crate::select) | arms on channels, a fiber's end and an fd; see below |
//! | `sync::mpsc::channel(n)`, `unbounded_channel()` | [`fibra::channel::bounded(n)`](crate::channel::bounded), [`unbounded()`](crate::channel::unbounded) | MPMC: the receiver clones too |
//! | `sync::oneshot` | [`fibra::sync::oneshot`](crate::sync::oneshot) | a `recv(rx)` arm of `select!` too |
//! | `sync::{Mutex, RwLock, Semaphore}`, `acquire_owned` | [`fibra::sync`](crate::sync), the same names | std's shapes: `lock()` returns a `LockResult` |
//! | `sync::Notify` | [`fibra::sync::Condvar`](crate::sync::Condvar) | |
//! | `task_local!` | [`fiber_local!`](crate::fiber_local) | no scope to enter: each fiber gets its own value on first use |
//! | `tokio::net` | [`fibra::net`](crate::net) | std's shapes, plus tokio's `readable`/`try_read`/`writable`/`try_write` |
//! | `tokio::fs` | [`fibra::fs`](crate::fs) | std's shapes, on a pool as in tokio |
//! | `tokio::signal::ctrl_c()` | [`fibra::signal::ctrl_c()`](crate::signal::ctrl_c) | |
//! | `tokio::process::Child::wait` | [`fibra::process::wait`](crate::process::wait) | on a std `Child` |
//! | crates on `AsyncRead`/`AsyncWrite` | the `tokio-io` feature | see [below](#async-crates) |
//!
//! tokio has `broadcast` and `watch` channels; fibra has none of its own
//! (`examples/chat.rs` broadcasts with a channel per listener).
//!
//! # A handler, translated
//!
//! A tokio connection handler reads `let n = stream.read(&mut buf).await?;`
//! — in a fiber it is `let n = stream.read(&mut buf)?;`, with
//! `std::io::Read` in scope instead of `AsyncReadExt`. Whole:
//!
//! ```
//! use std::io::{self, Read, Write};
//! use fibra::net::{TcpListener, TcpStream};
//!
//! // No `async fn`: the reads and writes park the fiber.
//! fn echo(mut stream: TcpStream) -> io::Result<()> {
//!     let mut buf = [0; 4096];
//!     loop {
//!         let n = stream.read(&mut buf)?;
//!         if n == 0 {
//!             return Ok(());
//!         }
//!         stream.write_all(&buf[..n])?;
//!     }
//! }
//!
//! fibra::run(|| -> io::Result<()> {
//!     let listener = TcpListener::bind("127.0.0.1:0")?;
//!     let addr = listener.local_addr()?;
//!     fibra::spawn(move || loop {
//!         let (stream, _) = listener.accept().unwrap();
//!         fibra::spawn(move || echo(stream));
//!     });
//!     let mut client = TcpStream::connect(addr)?;
//!     client.write_all(b"hi")?;
//!     let mut back = [0; 2];
//!     client.read_exact(&mut back)?;
//!     assert_eq!(&back, b"hi");
//!     Ok(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # `select!`, timeouts and cancellation
//!
//! [`fibra::select!`](crate::select) is crossbeam-channel's macro, not
//! tokio's: its arms name an operation instead of holding a future.
//! `recv(r) -> msg`, `send(s, v) -> res`, `join(handle) -> res` (a fiber
//! has finished), `io(fd, interest) -> ready` (a socket or fd is ready),
//! and `default` or `default(timeout)`. One arm runs; the other operations
//! simply did not happen, so there is no cancelled future to reason about.
//!
//! ```
//! use std::time::Duration;
//! use fibra::channel::{after, bounded};
//!
//! fibra::run(|| {
//!     let (tx, rx) = bounded::<u32>(1);
//!     let slow = fibra::spawn(|| fibra::sleep(Duration::from_secs(3600)));
//!     fibra::spawn(move || {
//!         fibra::sleep(Duration::from_millis(2));
//!         tx.send(7).unwrap();
//!     });
//!     let got = fibra::select! {
//!         recv(rx) -> v => v.ok(),
//!         join(slow) -> _ => None,
//!         recv(after(Duration::from_secs(5))) -> _ => None,
//!     };
//!     assert_eq!(got, Some(7));
//!     slow.cancel(); // tokio's abort: the loser is unwound, not leaked
//! });
//! ```
//!
//! [`fibra::timeout`](crate::timeout) bounds a whole closure, not one
//! future: wherever inside it the fiber waits when the deadline passes, it
//! is unwound from there (its destructors run) and `timeout` returns
//! `Err(Elapsed)`, which converts into an `io::Error` of kind `TimedOut`.
//!
//! ```
//! use std::time::Duration;
//!
//! fibra::run(|| {
//!     let late = fibra::timeout(Duration::from_millis(5), || {
//!         fibra::sleep(Duration::from_millis(1));
//!         fibra::sleep(Duration::from_secs(3600)); // the deadline lands here
//!         "never"
//!     });
//!     assert!(late.is_err());
//!     let io_err: std::io::Error = late.unwrap_err().into();
//!     assert_eq!(io_err.kind(), std::io::ErrorKind::TimedOut);
//!     assert_eq!(fibra::timeout(Duration::from_secs(1), || 42), Ok(42));
//! });
//! ```
//!
//! # `JoinSet` and `CancellationToken`: `Group`
//!
//! A [`fibra::Group`](crate::Group) is a `JoinSet` whose cancel reaches
//! its members wherever they wait, so it is the `CancellationToken` too:
//! a member needs no `select!` on `token.cancelled()`, since the sleep,
//! read or lock it waits in is unwound (its destructors run), as
//! `abort` does to a future at its `.await`.
//!
//! | tokio | [`Group`](crate::Group) | what differs |
//! |---|---|---|
//! | `JoinSet::new()`, `set.spawn(fut)` | [`Group::new()`](crate::Group::new), [`spawn(f)`](crate::Group::spawn) | methods take `&self`: a member may spawn into its own group |
//! | `set.join_next().await` | [`join_next()`](crate::Group::join_next) | the same `Option<Result<T, JoinError>>`, in the order members finish |
//! | `set.try_join_next()`, `len()`, `is_empty()` | [`try_join_next()`](crate::Group::try_join_next), the same names | |
//! | `select! { Some(res) = set.join_next() => .. }` | [`select! { group(set) -> res => .. }`](crate::select) | an empty group's arm is never ready, as the `Some` pattern disables tokio's |
//! | `set.abort_all()`, `token.cancel()` | [`cancel()`](crate::Group::cancel) | members spawned afterwards are cancelled before they run |
//! | `token.child_token()` | a group made inside a member of another: its child | the parent's cancel and deadline reach it, at any depth |
//! | `timeout(d, drain(&mut set))`, a token cancelled by a timer | [`Group::with_timeout(d)`](crate::Group::with_timeout), [`with_deadline`](crate::Group::with_deadline) | members still running at the deadline are cancelled |
//! | `try_join_all` of `futures`, on tasks | [`try_join_all()`](crate::Group::try_join_all) | the first `Err` cancels the rest |
//! | dropping a `JoinSet` aborts its tasks | dropping a `Group` cancels its members | and returns only once they have unwound: none outlives it |
//!
//! ```
//! use std::time::Duration;
//!
//! fibra::run(|| {
//!     let set = fibra::Group::new(); // JoinSet::new()
//!     for ms in [30, 10, 20] {
//!         set.spawn(move || {
//!             fibra::sleep(Duration::from_millis(ms));
//!             ms
//!         });
//!     }
//!     let mut done = Vec::new();
//!     while let Some(res) = set.join_next() {
//!         done.push(res.unwrap()); // as they finish
//!     }
//!     assert_eq!(done, [10, 20, 30]);
//! });
//! ```
//!
//! A token and its child token, as groups: cancelling the outer one
//! unwinds the worker and the sub-task it started, and each one's cleanup
//! runs before the drop of the group returns.
//!
//! ```
//! use std::time::Duration;
//! use fibra::channel::{Sender, unbounded};
//!
//! /// Says when it is dropped: a task's cleanup.
//! struct Cleanup(&'static str, Sender<&'static str>);
//! impl Drop for Cleanup {
//!     fn drop(&mut self) {
//!         let _ = self.1.send(self.0);
//!     }
//! }
//!
//! fibra::run(|| {
//!     let (cleaned, cleanups) = unbounded();
//!     let token = fibra::Group::new(); // CancellationToken::new(), and its tasks
//!     token.spawn(move || {
//!         let _cleanup = Cleanup("worker", cleaned.clone());
//!         let child = fibra::Group::new(); // token.child_token()
//!         child.spawn(move || {
//!             let _cleanup = Cleanup("sub-task", cleaned);
//!             // No select! on child.cancelled(): the cancel lands here.
//!             fibra::sleep(Duration::from_secs(3600));
//!         });
//!         child.join_next();
//!     });
//!     fibra::sleep(Duration::from_millis(1)); // they start, and wait
//!     token.cancel(); // token.cancel()
//!     drop(token); // returns once both have unwound
//!     let mut cleaned: Vec<_> = cleanups.try_iter().collect();
//!     cleaned.sort();
//!     assert_eq!(cleaned, ["sub-task", "worker"]);
//! });
//! ```
//!
//! A server's graceful shutdown on Ctrl-C (tokio's `ctrl_c`, a token, a
//! `TaskTracker`) is a group of connections: stop accepting, give the
//! connections in flight a grace period with a
//! [`fibra::timeout`](crate::timeout) around their
//! [`join_next`](crate::Group::join_next) loop, then
//! [`cancel`](crate::Group::cancel) the rest. See `examples/shutdown.rs`
//! (`cargo run --example shutdown`).
//!
//! # Limits on concurrency
//!
//! tokio's `Semaphore::acquire_owned` keeps its name: a permit that moves
//! into the fiber it limits.
//!
//! ```
//! use std::cell::Cell;
//! use std::rc::Rc;
//! use std::sync::Arc;
//! use std::time::Duration;
//! use fibra::sync::Semaphore;
//!
//! fibra::run(|| {
//!     let slots = Arc::new(Semaphore::new(2));
//!     let (now, most) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
//!     let jobs: Vec<_> = (0..6)
//!         .map(|_| {
//!             let permit = slots.clone().acquire_owned(); // waits for a free slot
//!             let (now, most) = (now.clone(), most.clone());
//!             fibra::spawn(move || {
//!                 now.set(now.get() + 1);
//!                 most.set(most.get().max(now.get()));
//!                 fibra::sleep(Duration::from_millis(1));
//!                 now.set(now.get() - 1);
//!                 drop(permit);
//!             })
//!         })
//!         .collect();
//!     jobs.into_iter().for_each(|j| j.join().unwrap());
//!     assert_eq!(most.get(), 2);
//! });
//! ```
//!
//! # Blocking work
//!
//! [`fibra::spawn_blocking`](crate::spawn_blocking) runs a closure on a
//! process-wide pool of threads (up to 512) and parks the fiber until it
//! returns; its value comes back directly, not through a handle. As in
//! tokio, a fiber that computes for long without waiting holds up its
//! thread; fibra names such a fiber in a `tracing` WARN while it runs. See
//! [blocking the runtime](super::blocking).
//!
//! # Futures, both ways
//!
//! [`fibra::block_on_future`](crate::block_on_future) drives any `Future`
//! from a fiber (the fiber parks while it is pending), and a fibra
//! [`JoinHandle`](crate::JoinHandle) is a `Future`, so async code can
//! await a fiber:
//!
//! ```
//! use std::time::Duration;
//!
//! // A fiber's result, awaited from tokio.
//! let fibers = fibra::Runtime::builder().workers(1).build()?;
//! let fiber = fibers.spawn(|| {
//!     fibra::sleep(Duration::from_millis(1));
//!     6 * 7
//! });
//! let tokio_rt = tokio::runtime::Builder::new_current_thread().build()?;
//! assert_eq!(tokio_rt.block_on(async { fiber.await.unwrap() }), 42);
//!
//! // A future, driven from a fiber.
//! let n = fibra::run(|| fibra::block_on_future(async { 1 + 1 }));
//! assert_eq!(n, 2);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Async crates
//!
//! Futures that do their own I/O through `AsyncRead`/`AsyncWrite` run on
//! fibra's reactor with a cargo feature: `futures-io` (hyper, anything over
//! `futures_io`) or `tokio-io` (tokio's traits only, no tokio runtime:
//! tokio-postgres, tokio-rustls, tokio-tungstenite). fibra's stream sockets
//! implement the traits; a fiber drives the future with `block_on_future`.
//! See [`net`'s docs](crate::net#async-io), `examples/hyper_hello.rs` and
//! `examples/tokio_postgres.rs`.
//!
//! Futures that need tokio's own runtime (`tokio::net`, `tokio::time`) still
//! need one: keep a tokio runtime beside fibra, spawn such work there and
//! await its handle from a fiber. Never hold a tokio `Handle::enter` guard
//! across a park: another fiber of the thread would run inside it.
//!
//! ```
//! use std::time::Duration;
//!
//! let tokio_rt = tokio::runtime::Builder::new_multi_thread()
//!     .worker_threads(1)
//!     .enable_time()
//!     .build()?;
//! let got = fibra::run(|| {
//!     let task = tokio_rt.spawn(async {
//!         tokio::time::sleep(Duration::from_millis(1)).await;
//!         "from tokio"
//!     });
//!     fibra::block_on_future(task).unwrap() // this fiber parks meanwhile
//! });
//! assert_eq!(got, "from tokio");
//! # Ok::<(), std::io::Error>(())
//! ```
