//! Coming from std threads.
//!
//! fibra's API is `std::thread`'s, with a runtime around it. A fiber is
//! like a thread that blocks by handing its thread to the next fiber
//! instead of sleeping in the kernel: a parked fiber holds about 4.5 KB of
//! memory, and a spawn and join take about 45 ns where a thread's take
//! about 25 µs (`benches/peers` in the repository). Threaded code stays
//! as it reads; what you change is mostly an import.
//!
//! # The map
//!
//! | std | fibra | what differs |
//! |---|---|---|
//! | `fn main` | [`fibra::run(\|\| ..)`](crate::run) | fibers live in a runtime; `run` returns when its closure does, and unwinds the fibers still alive |
//! | `thread::spawn(f)` | [`fibra::spawn(f)`](crate::spawn) | no `Send` bound: a fiber never leaves its thread |
//! | `thread::Builder` | [`fibra::Builder`](crate::Builder) | `name`, `stack_size`, and `idle` fibers |
//! | `handle.join()` | [`handle.join()`](crate::JoinHandle::join) | a [`JoinError`](crate::JoinError) says whether it panicked or was cancelled |
//! | — | [`handle.cancel()`](crate::JoinHandle::cancel) | unwinds the fiber from where it waits; its destructors run |
//! | `thread::scope` | [`fibra::scope`](crate::scope) | the same shape |
//! | `thread::sleep`, `yield_now`, `current` | [`fibra::sleep`](crate::sleep), [`yield_now`](crate::yield_now), [`current`](crate::current) | `std::thread::sleep` would stall the thread's other fibers |
//! | `std::sync::{Mutex, RwLock, Condvar, Barrier, Once, OnceLock, LazyLock}` | [`fibra::sync`](crate::sync), same names | a waiting fiber parks; fibers and threads may share them |
//! | `std::sync::mpsc` | [`fibra::sync::mpsc`](crate::sync::mpsc), or [`fibra::channel`](crate::channel) for MPMC | the same shapes; both are `select!` arms |
//! | `thread_local!` | still works, with [one rule](super::thread_locals); [`fiber_local!`](crate::fiber_local) for a value per fiber | |
//! | `std::net` | [`fibra::net`](crate::net), or std's own with the `hook` feature | the same methods and traits |
//! | `std::fs` | [`fibra::fs`](crate::fs) | each call on a pool thread while the fiber parks |
//! | `child.wait()` | [`fibra::process::wait(&mut child)`](crate::process::wait) | a pidfd the reactor watches |
//! | one thread per core | [`Runtime::builder().workers(n)`](crate::runtime::Builder::workers) | a scheduler per worker thread |
//!
//! Every blocking call of fibra's also works on a plain thread, where it
//! blocks the thread as std's would. So a library can use `fibra::sync` or
//! `fibra::net` without knowing whether a fiber or a thread calls it.
//!
//! # Spawning and joining
//!
//! The workers of a thread pool, as fibers. `std::thread::sleep` becomes
//! [`fibra::sleep`](crate::sleep), `std::sync::mpsc` becomes
//! [`fibra::sync::mpsc`](crate::sync::mpsc); the rest is as you would write
//! it with threads.
//!
//! ```
//! use std::time::Duration;
//! use fibra::sync::mpsc;
//!
//! fibra::run(|| {
//!     let (tx, rx) = mpsc::channel();
//!     let workers: Vec<_> = (0..4)
//!         .map(|id| {
//!             let tx = tx.clone();
//!             fibra::Builder::new()
//!                 .name(format!("worker-{id}"))
//!                 .spawn(move || {
//!                     fibra::sleep(Duration::from_millis(5)); // all four sleep at once
//!                     let me = fibra::current();
//!                     tx.send(me.name().unwrap().to_owned()).unwrap();
//!                     id * 10
//!                 })
//!                 .unwrap()
//!         })
//!         .collect();
//!     drop(tx); // the receiver's iterator ends when every sender is gone
//!     let mut names: Vec<String> = rx.iter().collect();
//!     names.sort();
//!     assert_eq!(names, ["worker-0", "worker-1", "worker-2", "worker-3"]);
//!     let sum: u32 = workers.into_iter().map(|w| w.join().unwrap()).sum();
//!     assert_eq!(sum, 60);
//! });
//! ```
//!
//! Because a fiber stays on the thread that spawned it, what it captures
//! needs no `Send`: an `Rc` does where threads would need an `Arc`.
//!
//! ```
//! use std::rc::Rc;
//! use fibra::sync::{Condvar, Mutex};
//!
//! fibra::run(|| {
//!     let pair = Rc::new((Mutex::new(false), Condvar::new()));
//!     let theirs = Rc::clone(&pair);
//!     fibra::spawn(move || {
//!         let (ready, cvar) = &*theirs;
//!         *ready.lock().unwrap() = true;
//!         cvar.notify_one();
//!     });
//!     let (ready, cvar) = &*pair;
//!     let mut guard = ready.lock().unwrap();
//!     while !*guard {
//!         guard = cvar.wait(guard).unwrap(); // parks this fiber; the other runs
//!     }
//! });
//! ```
//!
//! # Borrowing: `scope`
//!
//! [`fibra::scope`](crate::scope) is `std::thread::scope` for fibers: they
//! may borrow from the stack around them, and all are joined before it
//! returns.
//!
//! ```
//! let mut data = vec![1, 2, 3];
//! fibra::run(|| {
//!     let (head, tail) = data.split_at_mut(1);
//!     fibra::scope(|s| {
//!         s.spawn(|| head[0] *= 10);
//!         s.spawn(|| tail.iter_mut().for_each(|x| *x += 1));
//!     });
//! });
//! assert_eq!(data, [10, 3, 4]);
//! ```
//!
//! # Panics and cancellation
//!
//! A panic in a fiber ends that fiber only: it is caught at the fiber's
//! root and handed to whoever joins it, as with a thread. Unlike a thread, a
//! fiber can be cancelled: [`cancel`](crate::JoinHandle::cancel) unwinds it
//! from the call it waits in, running its destructors, and its `join` then
//! reports [`is_cancelled`](crate::JoinError::is_cancelled).
//!
//! ```
//! use std::cell::Cell;
//! use std::rc::Rc;
//! use std::time::Duration;
//!
//! struct Cleanup(Rc<Cell<bool>>);
//! impl Drop for Cleanup {
//!     fn drop(&mut self) {
//!         self.0.set(true);
//!     }
//! }
//!
//! fibra::run(|| {
//!     let failed = fibra::spawn(|| -> u32 { panic!("boom") });
//!     let err = failed.join().unwrap_err();
//!     assert!(err.is_panic());
//!
//!     let cleaned = Rc::new(Cell::new(false));
//!     let guard = Cleanup(cleaned.clone());
//!     let sleeper = fibra::spawn(move || {
//!         let _guard = guard;
//!         fibra::sleep(Duration::from_secs(3600));
//!     });
//!     fibra::yield_now(); // let it start and park in its sleep
//!     sleeper.cancel();
//!     assert!(sleeper.join().unwrap_err().is_cancelled());
//!     assert!(cleaned.get()); // its destructors ran
//! });
//! ```
//!
//! # Sockets
//!
//! [`fibra::net`](crate::net) has std's socket types with std's methods and
//! traits; a thread-per-connection server becomes a fiber-per-connection
//! one by changing its `use` line. A `std::net` socket converts with
//! `From`.
//!
//! ```
//! use std::io::{BufRead, BufReader, Write};
//! use fibra::net::{TcpListener, TcpStream};
//!
//! fibra::run(|| {
//!     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
//!     let addr = listener.local_addr().unwrap();
//!     fibra::spawn(move || {
//!         for conn in listener.incoming() {
//!             let conn = conn.unwrap();
//!             fibra::spawn(move || {
//!                 let mut lines = BufReader::new(&conn);
//!                 let mut line = String::new();
//!                 while lines.read_line(&mut line).unwrap() > 0 {
//!                     (&conn).write_all(line.to_uppercase().as_bytes()).unwrap();
//!                     line.clear();
//!                 }
//!             });
//!         }
//!     });
//!     let std_stream = std::net::TcpStream::connect(addr).unwrap(); // made by std...
//!     let mut client = TcpStream::from(std_stream); // ...used by fibra
//!     client.write_all(b"hello\n").unwrap();
//!     let mut reply = String::new();
//!     BufReader::new(&client).read_line(&mut reply).unwrap();
//!     assert_eq!(reply, "HELLO\n");
//! });
//! ```
//!
//! Code you cannot change — a crate that makes its own `std::net` sockets —
//! would block the thread in a fiber. The `hook` cargo feature makes std's
//! socket calls and `std::thread::sleep` park the fiber instead; see
//! [the crate docs](crate#the-hook-feature). With it, this runs as written:
//!
//! ```
//! # #[cfg(feature = "hook")] {
//! use std::io::{Read, Write};
//! use std::net::{TcpListener, TcpStream};
//!
//! fibra::run(|| {
//!     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
//!     let addr = listener.local_addr().unwrap();
//!     let server = fibra::spawn(move || {
//!         let (mut conn, _) = listener.accept().unwrap(); // parks, with the hook
//!         let mut buf = [0; 4];
//!         conn.read_exact(&mut buf).unwrap();
//!         conn.write_all(&buf).unwrap();
//!     });
//!     let mut client = TcpStream::connect(addr).unwrap();
//!     client.write_all(b"ping").unwrap();
//!     let mut back = [0; 4];
//!     client.read_exact(&mut back).unwrap();
//!     assert_eq!(&back, b"ping");
//!     server.join().unwrap();
//! });
//! # }
//! ```
//!
//! # Fibers and threads together
//!
//! `fibra::sync` and `fibra::channel` work between any mix of fibers and
//! threads: a plain thread may feed a fiber, or join one.
//!
//! ```
//! let (tx, rx) = fibra::sync::mpsc::channel();
//! let producer = std::thread::spawn(move || {
//!     for i in 0..3 {
//!         tx.send(i).unwrap(); // a plain thread
//!     }
//! });
//! let got: Vec<i32> = fibra::run(|| rx.iter().collect()); // a fiber parks meanwhile
//! producer.join().unwrap();
//! assert_eq!(got, [0, 1, 2]);
//! ```
//!
//! # Many cores
//!
//! [`fibra::run`](crate::run) runs every fiber on the calling thread. For
//! more cores, build a runtime of several workers: each is a thread with a
//! scheduler of its own. The runtime's `spawn` spreads fibers over them (it takes `Send` closures, since the fiber is
//! handed to another thread before it starts); a fiber's own
//! [`fibra::spawn`](crate::spawn) stays on its worker. A fiber that has
//! started never changes thread.
//!
//! ```
//! let rt = fibra::Runtime::builder().workers(2).build()?;
//! let handles: Vec<_> = (0..8u64).map(|i| rt.spawn(move || i * i)).collect();
//! // Joined from this plain thread, which blocks meanwhile.
//! let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
//! assert_eq!(sum, 140);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # What else to know
//!
//! - A fiber runs until it blocks in one of fibra's calls. A long
//!   computation, `std::fs` or a std `Mutex` held too long stalls the other
//!   fibers of its thread: see [blocking the runtime](super::blocking).
//! - Thread-locals are shared by the fibers of a thread; a `thread_local!`
//!   initializer must not block in a fibra call: see
//!   [thread-locals](super::thread_locals).
//! - A fiber's stack is 256 KiB of address space by default
//!   ([`DEFAULT_STACK_SIZE`](crate::DEFAULT_STACK_SIZE); only the pages it
//!   touches use memory), with a guard page below it. Deep recursion wants
//!   [`Builder::stack_size`](crate::Builder::stack_size).
