//! Coming from Go.
//!
//! A fiber is a goroutine that stays on its thread: it has a stack of its
//! own, blocks in ordinary calls, and a runtime multiplexes many of them
//! over epoll. [`fibra::channel`](crate::channel) and
//! [`fibra::select!`](crate::select) give Go's channels and `select`, with
//! crossbeam-channel's names. This chapter maps the Go you know.
//!
//! # The map
//!
//! | Go | fibra | what differs |
//! |---|---|---|
//! | `func main` | [`fibra::run(\|\| ..)`](crate::run) | returning from it unwinds the fibers still alive (Go kills them) |
//! | `go f()` | [`fibra::spawn(f)`](crate::spawn) | returns a handle to join or cancel; drop it to detach |
//! | a goroutine's panic kills the program | its panic goes to [`join`](crate::JoinHandle::join) | as if every goroutine had a `recover` at its root |
//! | `make(chan T)` | [`bounded(0)`](crate::channel::bounded) | a rendezvous, as in Go |
//! | `make(chan T, n)` | [`bounded(n)`](crate::channel::bounded) | |
//! | — | [`unbounded()`](crate::channel::unbounded) | |
//! | `ch <- v`, `v := <-ch` | `s.send(v)`, `r.recv()` | both return a `Result` |
//! | `close(ch)` | drop every `Sender` | receivers drain what is left, then get `Err` |
//! | `v, ok := <-ch` | `r.recv()` is `Err(RecvError)` when closed and empty | |
//! | send on a closed channel panics | `send` returns `Err` when every `Receiver` is gone | |
//! | `for v := range ch` | `for v in r.iter()` | |
//! | `var ch chan T` (nil: blocks forever) | [`never()`](crate::channel::never) | |
//! | `select { .. }` | [`fibra::select! { .. }`](crate::select) | see below |
//! | `time.After(d)`, `time.Tick(d)`, `time.NewTicker` | [`after(d)`](crate::channel::after), [`tick(d)`](crate::channel::tick) | channels, as in Go |
//! | `time.Sleep(d)` | [`fibra::sleep(d)`](crate::sleep) | |
//! | `context.WithTimeout` | [`fibra::timeout(d, \|\| ..)`](crate::timeout) | unwinds the closure wherever it waits; nothing to pass down |
//! | `cancel()` of a context | [`handle.cancel()`](crate::JoinHandle::cancel), or a dropped "done" channel | see below |
//! | `errgroup.WithContext`, `g.Go(f)`, `g.Wait()` | [`Group::new()`](crate::Group::new), [`spawn(f)`](crate::Group::spawn), [`try_join_all()`](crate::Group::try_join_all) | the first error unwinds the other members: no `ctx` for them to watch |
//! | a context shared by goroutines: `WithCancel`, `WithTimeout` | a [`Group`](crate::Group): [`cancel()`](crate::Group::cancel), [`with_timeout(d)`](crate::Group::with_timeout) | a group made inside a member is its child, as a derived context |
//! | `sync.WaitGroup` | [`fibra::sync::WaitGroup`](crate::sync::WaitGroup) | a clone per member, dropped when done: no counter to get wrong |
//! | `sync.Mutex`, `RWMutex`, `Cond`, `Once` | [`fibra::sync::{Mutex, RwLock, Condvar, Once}`](crate::sync) (and `OnceLock` for a value) | the lock owns the data it guards |
//! | `runtime.Gosched()` | [`fibra::yield_now()`](crate::yield_now) | |
//! | `GOMAXPROCS=n` | [`Runtime::builder().workers(n)`](crate::runtime::Builder::workers) | `fibra::run` is one thread |
//! | the goroutine dump on `SIGQUIT` | [`dump_on_sigquit()`](crate::runtime::dump_on_sigquit), [`rt.dump()`](crate::Runtime::dump) | see below |
//! | `net.Listen`, `net.Dial` | [`fibra::net`](crate::net) | std's shapes |
//!
//! # Goroutines and a worker pool
//!
//! Go's pattern of a job channel, workers ranging over it and a
//! `WaitGroup`, as fibers. The receiver clones (the channels are MPMC), so
//! every worker reads the one job channel; dropping the sender is `close`.
//!
//! ```
//! use fibra::channel::{bounded, unbounded};
//! use fibra::sync::WaitGroup;
//!
//! fibra::run(|| {
//!     let (jobs_tx, jobs) = bounded::<u64>(0); // make(chan uint64)
//!     let (results_tx, results) = unbounded();
//!     let wg = WaitGroup::new();
//!     for _ in 0..3 {
//!         let (jobs, results_tx, wg) = (jobs.clone(), results_tx.clone(), wg.clone());
//!         fibra::spawn(move || {
//!             for n in jobs.iter() {
//!                 // for n := range jobs
//!                 results_tx.send(n * n).unwrap();
//!             }
//!             drop(wg); // wg.Done()
//!         });
//!     }
//!     drop(results_tx);
//!     for n in 1..=5 {
//!         jobs_tx.send(n).unwrap();
//!     }
//!     drop(jobs_tx); // close(jobs)
//!     wg.wait(); // wg.Wait()
//!     let mut squares: Vec<u64> = results.iter().collect();
//!     squares.sort();
//!     assert_eq!(squares, [1, 4, 9, 16, 25]);
//! });
//! ```
//!
//! # `select`
//!
//! Go's `case v := <-ch:` is `recv(ch) -> v =>`, `case ch <- x:` is
//! `send(ch, x) -> res =>`, `default:` is `default =>`. A timeout is an
//! arm on [`after`](crate::channel::after), as in Go, or
//! `default(duration) =>`. Beyond Go, an arm may wait for a fiber's end,
//! `join(handle) -> res`, for the next member of a
//! [`Group`](crate::Group) to finish, `group(g) -> res` (see below), or for
//! a socket or fd to be ready, `io(fd, interest) -> ready`.
//!
//! ```
//! use std::time::Duration;
//! use fibra::channel::{after, bounded, tick, unbounded};
//!
//! fibra::run(|| {
//!     let (jobs_tx, jobs) = unbounded::<u32>();
//!     let (_quit_tx, quit) = bounded::<()>(0); // another fiber may say stop
//!     fibra::spawn(move || (0..3).for_each(|i| jobs_tx.send(i).unwrap()));
//!     let ticker = tick(Duration::from_millis(100)); // time.NewTicker
//!     let mut done = Vec::new();
//!     loop {
//!         fibra::select! {
//!             recv(jobs) -> job => match job {
//!                 Ok(job) => done.push(job),
//!                 Err(_) => break, // closed and drained
//!             },
//!             recv(ticker) -> _ => println!("still working"),
//!             recv(quit) -> _ => break,
//!             recv(after(Duration::from_secs(5))) -> _ => panic!("stuck"),
//!         }
//!     }
//!     assert_eq!(done, [0, 1, 2]);
//!
//!     // A send that must not wait: Go's select with a default case.
//!     let (tx, rx) = bounded::<u32>(1);
//!     let mut dropped = 0;
//!     for i in 0..3 {
//!         fibra::select! {
//!             send(tx, i) -> res => res.unwrap(),
//!             default => dropped += 1, // the buffer was full
//!         }
//!     }
//!     assert_eq!((rx.recv(), dropped), (Ok(0), 2));
//!
//!     // Waiting at most so long.
//!     let (_tx, idle) = bounded::<u32>(0);
//!     let got = fibra::select! {
//!         recv(idle) -> v => v.ok(),
//!         default(Duration::from_millis(5)) => None,
//!     };
//!     assert_eq!(got, None);
//! });
//! ```
//!
//! # Contexts: deadlines and cancellation
//!
//! Go threads a `context.Context` through every call so that a deadline or
//! a cancel reaches whatever is waiting. A fiber needs no such argument:
//! [`fibra::timeout`](crate::timeout) gives a closure a deadline, and
//! whatever inside it is waiting then (a sleep, a socket read, a channel, a
//! lock) is unwound, destructors and all; [`cancel`](crate::JoinHandle::cancel)
//! does the same to a whole fiber at once.
//!
//! ```
//! use std::time::Duration;
//! use fibra::channel::bounded;
//!
//! fibra::run(|| {
//!     // ctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
//!     let (_tx, reply) = bounded::<String>(0); // nobody ever answers
//!     let answer = fibra::timeout(Duration::from_millis(5), || reply.recv());
//!     assert!(answer.is_err()); // the deadline, not the channel, ended it
//!
//!     // cancel(): the fiber is unwound from whatever it waits on.
//!     let worker = fibra::spawn(move || reply.recv());
//!     fibra::yield_now();
//!     worker.cancel();
//!     assert!(worker.join().unwrap_err().is_cancelled());
//! });
//! ```
//!
//! Go's other idiom, `<-ctx.Done()` in a `select`, is a channel nobody
//! sends on: when its last sender is dropped, every fiber receiving on it
//! wakes at once, as closing a channel does in Go.
//!
//! ```
//! use std::time::Duration;
//! use fibra::channel::{bounded, tick};
//!
//! fibra::run(|| {
//!     let (stop, done) = bounded::<()>(0);
//!     let watchers: Vec<_> = (0..3)
//!         .map(|_| {
//!             let done = done.clone();
//!             fibra::spawn(move || {
//!                 let ticks = tick(Duration::from_millis(1));
//!                 let mut seen = 0;
//!                 loop {
//!                     fibra::select! {
//!                         recv(ticks) -> _ => seen += 1,
//!                         recv(done) -> _ => return seen, // ctx.Done()
//!                     }
//!                 }
//!             })
//!         })
//!         .collect();
//!     fibra::sleep(Duration::from_millis(5));
//!     drop(stop); // cancel(): all three wake
//!     for w in watchers {
//!         w.join().unwrap();
//!     }
//! });
//! ```
//!
//! # `errgroup`, and a context for many goroutines: `Group`
//!
//! Go ties goroutines together by hand: an `errgroup` (or a `WaitGroup`)
//! to wait for them, a `context` passed to each so that a cancel or a
//! deadline reaches it, and every one of them watching `ctx.Done()`. A
//! [`fibra::Group`](crate::Group) is all three: a set of member fibers
//! that end together. Its cancel, its deadline, and the first error of
//! [`try_join_all`](crate::Group::try_join_all) unwind each member from
//! wherever it waits, so a member's code has nothing to watch.
//!
//! | Go | [`Group`](crate::Group) |
//! |---|---|
//! | `g, ctx := errgroup.WithContext(ctx)` | `let g = Group::new();` |
//! | `g.Go(func() error { .. })` | `g.spawn(\|\| -> Result<T, E> { .. })` |
//! | `err := g.Wait()` | `g.try_join_all()`: `Err` of the first error, or every value, in spawn order |
//! | `ctx, cancel := context.WithCancel(ctx)` + goroutines that take it | `Group::new()`, their `spawn`s, `cancel()` |
//! | `context.WithTimeout(ctx, d)`, `WithDeadline` | [`Group::with_timeout(d)`](crate::Group::with_timeout), [`with_deadline`](crate::Group::with_deadline) |
//! | a context derived from another | a group made inside a member of another: its child; the parent's cancel and deadline reach it |
//! | `wg.Wait()`, results one at a time from a channel | [`join_next()`](crate::Group::join_next): each member's result as it finishes |
//! | `g.SetLimit(n)` | an [`acquire_owned`](crate::sync::Semaphore::acquire_owned) permit moved into each member |
//! | `case r := <-results:` beside other cases | a `group(g) -> r` arm of [`select!`](crate::select): the next member's result |
//!
//! An errgroup whose fetches run at once, where the first failure
//! cancels the others (here, a fetch that would take an hour):
//!
//! ```
//! use std::time::Duration;
//!
//! fn fetch(url: &str) -> Result<usize, String> {
//!     match url {
//!         "/slow" => fibra::sleep(Duration::from_secs(3600)),
//!         "/missing" => return Err(format!("{url}: 404")),
//!         _ => fibra::sleep(Duration::from_millis(1)),
//!     }
//!     Ok(url.len())
//! }
//!
//! fibra::run(|| {
//!     let g = fibra::Group::new(); // g, ctx := errgroup.WithContext(ctx)
//!     for url in ["/", "/about"] {
//!         g.spawn(move || fetch(url)); // g.Go(...)
//!     }
//!     assert_eq!(g.try_join_all(), Ok(vec![1, 6])); // g.Wait(), and the values
//!
//!     let g = fibra::Group::new();
//!     for url in ["/slow", "/missing"] {
//!         g.spawn(move || fetch(url));
//!     }
//!     // "/slow" is unwound from its sleep as soon as "/missing" fails.
//!     assert_eq!(g.try_join_all(), Err("/missing: 404".to_string()));
//! });
//! ```
//!
//! Cancellation flows down a tree of groups as it does down derived
//! contexts, with no `ctx` argument: a group made inside a member of
//! another is its child. Cancelling the root (or its deadline) unwinds
//! every member at every depth, and each one's destructors run:
//!
//! ```
//! use std::cell::Cell;
//! use std::rc::Rc;
//! use std::time::Duration;
//! use fibra::channel::bounded;
//!
//! /// Counts the fibers unwound.
//! struct Unwound(Rc<Cell<u32>>);
//! impl Drop for Unwound {
//!     fn drop(&mut self) {
//!         self.0.set(self.0.get() + 1);
//!     }
//! }
//!
//! fibra::run(|| {
//!     let unwound = Rc::new(Cell::new(0));
//!     let (started_tx, started) = bounded(2);
//!     let jobs = fibra::Group::new(); // ctx, cancel := context.WithCancel(ctx)
//!     let u = unwound.clone();
//!     jobs.spawn(move || {
//!         let _guard = Unwound(u.clone());
//!         let steps = fibra::Group::new(); // derived from it: a child group
//!         for _ in 0..2 {
//!             let (u, started_tx) = (u.clone(), started_tx.clone());
//!             steps.spawn(move || {
//!                 let _guard = Unwound(u);
//!                 started_tx.send(()).unwrap();
//!                 fibra::sleep(Duration::from_secs(3600));
//!             });
//!         }
//!         while let Some(step) = steps.join_next() {
//!             step.unwrap();
//!         }
//!     });
//!     started.recv().unwrap();
//!     started.recv().unwrap();
//!     jobs.cancel(); // cancel()
//!     assert!(jobs.join_next().unwrap().unwrap_err().is_cancelled());
//!     assert_eq!(unwound.get(), 3); // the member and both of its steps
//!
//!     // context.WithTimeout(ctx, 10*time.Millisecond), for a set of fibers
//!     let bounded_jobs = fibra::Group::with_timeout(Duration::from_millis(10));
//!     bounded_jobs.spawn(|| fibra::sleep(Duration::from_secs(3600)));
//!     assert!(bounded_jobs.join_next().unwrap().unwrap_err().is_cancelled());
//! });
//! ```
//!
//! For one call, [`fibra::timeout`](crate::timeout) is the
//! `WithTimeout` to reach for (above); it bounds the groups made inside it
//! too. A server's graceful shutdown — stop accepting, give the
//! connections in flight a grace period, cancel the rest — is a `Group`
//! of connections, a `fibra::timeout` around its
//! [`join_next`](crate::Group::join_next) loop, and a `cancel`: see
//! `examples/shutdown.rs` (`cargo run --example shutdown`).
//!
//! # `GOMAXPROCS` and where goroutines run
//!
//! [`fibra::run`](crate::run) is `GOMAXPROCS=1`: every fiber on the calling
//! thread. `Runtime::builder().workers(n)` gives `n` threads, each with a
//! scheduler, reactor and timers of its own. Unlike Go's scheduler, fibra
//! never moves a fiber that has started: that is what lets it hold `Rc`s
//! and borrow thread-locals across a wait. An idle worker takes fibers that
//! have not started yet from a busy one.
//!
//! ```
//! let rt = fibra::Runtime::builder().workers(2).build()?;
//! let total = rt.block_on(|| {
//!     // In a worker: fibra::spawn keeps the fiber on this worker.
//!     let parts: Vec<_> = (0..4u32).map(|i| fibra::spawn(move || i + 1)).collect();
//!     parts.into_iter().map(|p| p.join().unwrap()).sum::<u32>()
//! });
//! assert_eq!(total, 10);
//! assert_eq!(rt.workers(), 2);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Go hands a thread blocked in a system call's place to another; fibra
//! does not. A call that blocks the thread (a file read, a C library, a
//! long loop) holds up that worker's other fibers. fibra's own calls, and
//! [`fibra::fs`](crate::fs) and [`spawn_blocking`](crate::spawn_blocking),
//! never do: see [blocking the runtime](super::blocking).
//!
//! # The goroutine dump
//!
//! Go prints every goroutine on `SIGQUIT`. After
//! [`fibra::runtime::dump_on_sigquit()`](crate::runtime::dump_on_sigquit)
//! so does fibra (`kill -QUIT <pid>`, or Ctrl-\ in a terminal): one line
//! per fiber with its id, name, state, what it waits for, stack in use and
//! where it was spawned. [`Runtime::dump`](crate::Runtime::dump) gives the
//! same as a value.
//!
//! ```
//! use std::time::Duration;
//!
//! fibra::runtime::dump_on_sigquit()?; // as Go does, from now on
//!
//! let rt = fibra::Runtime::new()?;
//! rt.block_on(|| {
//!     let (_tx, rx) = fibra::channel::bounded::<()>(0);
//!     let _waiter = fibra::Builder::new()
//!         .name("waiter".into())
//!         .spawn(move || rx.recv())
//!         .unwrap();
//!     let _sleeper = fibra::spawn(|| fibra::sleep(Duration::from_secs(60)));
//!     fibra::yield_now(); // both start and park
//!     let dump = rt.dump().to_string();
//!     // A line of it: fiber 2 "waiter" [parked: channel receive] stack … B spawned at …
//!     assert!(dump.contains("\"waiter\" [parked: channel receive]"), "{dump}");
//!     assert!(dump.contains("[parked: sleep, "), "{dump}");
//! });
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Deadlocks and stalls, with no setup
//!
//! Go prints `fatal error: all goroutines are asleep - deadlock!` and exits
//! with status 2. fibra tells the same case — every fiber waiting on
//! fibra's locks, channels and joins, with no timer armed and no fd
//! registered, for ten times the stall threshold (1 s by default) — with
//! every fiber's stack, file and line. With no `tracing` subscriber set it
//! goes to stderr (`fibra WARN fibra::deadlock: ...`, the dump below), as
//! do the stall warnings; with one set, to it alone. By default the
//! runtime keeps waiting, since a plain thread may still wake a fiber;
//! [`on_deadlock(OnDeadlock::Exit)`](crate::runtime::Builder::on_deadlock)
//! exits with status 2, as Go does.
//!
//! ```
//! use fibra::runtime::OnDeadlock;
//!
//! let rt = fibra::Runtime::builder().on_deadlock(OnDeadlock::Exit).build()?;
//! rt.block_on(|| {
//!     // runtime.NumGoroutine(): the running runtime's handle, from any fiber.
//!     let handle = fibra::runtime::Handle::current();
//!     let h = fibra::spawn(|| ());
//!     assert_eq!(handle.fibers(), 1);
//!     h.join().unwrap();
//! });
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Stacks
//!
//! A goroutine's stack starts at a few kilobytes and grows by copying. A
//! fiber's stack cannot move (Rust code holds pointers into it), so it is
//! reserved whole: 256 KiB of address space by default, of which only the
//! touched pages cost memory, with a guard page below it. A fiber that
//! needs more asks for it with
//! [`Builder::stack_size`](crate::Builder::stack_size); one that overflows
//! is reported by name and the process aborts, never corrupting memory.
