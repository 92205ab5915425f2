//! Blocking the runtime: what stalls a thread's fibers, how fibra tells
//! you, and what to use instead.
//!
//! A fiber runs until it parks, and while it runs nothing else runs on its
//! thread. fibra's own calls park the fiber: the thread goes on with other
//! fibers until what the first waits for is ready. A call that blocks the
//! *thread* instead — the kernel puts the whole thread to sleep, or the
//! code never stops computing — stalls every fiber of that thread: their
//! timers fire late, their sockets go unread, until it returns. In tokio
//! the same mistake has the same effect; what differs is that fibra's
//! blocking calls look like std's, so std's are easy to mistake for them.
//!
//! # What blocks the thread, and what to use instead
//!
//! | Blocks the thread | Instead |
//! |---|---|
//! | `std::fs` (a slow disk, a network mount, a FIFO waiting for its writer) | [`fibra::fs`](crate::fs), the same shapes |
//! | `std::thread::sleep` | [`fibra::sleep`](crate::sleep) |
//! | a `std::sync::Mutex` held across a park (`fibra::sleep`, a socket read): the next fiber of the thread to lock it blocks the thread, and the holder can never run to unlock — a deadlock | [`fibra::sync::Mutex`](crate::sync::Mutex) (and `RwLock`, `Condvar`) |
//! | `std::sync::mpsc`'s `recv` whose sender is a fiber of the same thread: that fiber never runs — a hang | [`fibra::sync::mpsc`](crate::sync::mpsc) or [`fibra::channel`](crate::channel) |
//! | `std::net` sockets and `ToSocketAddrs` lookups | [`fibra::net`](crate::net) (host names resolve on the pool), or the `hook` feature |
//! | `Child::wait` | [`fibra::process::wait`](crate::process::wait) |
//! | a long CPU loop (parsing, hashing, compressing) | [`yield_now`](crate::yield_now) every few hundred microseconds, or the whole job in [`spawn_blocking`](crate::spawn_blocking) |
//! | a crate that makes its own std sockets or blocking calls (a sync database driver, an HTTP client) | [`spawn_blocking`](crate::spawn_blocking) around the call, or, for std sockets and `std::thread::sleep`, the `hook` cargo feature, which makes them park the fiber |
//! | any other blocking system call or library call (stdin, a C library's own wait) | [`spawn_blocking`](crate::spawn_blocking) |
//!
//! Outside a fiber all of these are fine: on a plain thread fibra's own
//! calls block the thread too.
//!
//! ```
//! use std::time::Duration;
//!
//! let path = std::env::temp_dir().join(format!("fibra-guide-blocking-{}", std::process::id()));
//! fibra::run(|| {
//!     let ticker = fibra::spawn(|| {
//!         for _ in 0..5 {
//!             fibra::sleep(Duration::from_millis(1)); // keeps ticking below
//!         }
//!     });
//!     // Not std::thread::sleep: that would hold up the ticker too.
//!     fibra::sleep(Duration::from_millis(2));
//!     // Not std::fs: the file calls go to the pool; this fiber parks.
//!     fibra::fs::write(&path, "settings").unwrap();
//!     let text = fibra::fs::read_to_string(&path).unwrap();
//!     // A blocking library call: on the pool.
//!     let len = fibra::spawn_blocking(move || text.len());
//!     // A long loop of our own: let the other fibers in now and then.
//!     let mut sum = 0u64;
//!     for i in 0..1_000_000u64 {
//!         sum = sum.wrapping_add(i);
//!         if i % 50_000 == 0 {
//!             fibra::yield_now();
//!         }
//!     }
//!     ticker.join().unwrap();
//!     assert_eq!((len, sum), (8, 499_999_500_000));
//! });
//! # std::fs::remove_file(&path).unwrap();
//! ```
//!
//! # How fibra tells you
//!
//! fibra does not stall silently. A watchdog thread notices a fiber that
//! has run without parking for longer than
//! [`stall_warning`](crate::runtime::Builder::stall_warning) (100 ms unless
//! set; `Duration::MAX` turns it off) and emits a `tracing` WARN, target
//! `fibra::stall`, naming the fiber (id, name, where it was spawned) and how
//! long it has run — *while it still runs*, so a fiber stuck for good is
//! named too — and another with the total when it parks. Install any
//! `tracing` subscriber to see them. The cost is one store per switch.
//!
//! A dump names such a fiber as well: [`Runtime::dump`](crate::Runtime::dump)
//! (or SIGQUIT after
//! [`dump_on_sigquit`](crate::runtime::dump_on_sigquit)) lists it as
//! running, and for how long.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicBool, Ordering};
//! use std::time::{Duration, Instant};
//!
//! let rt = fibra::Runtime::builder()
//!     .workers(1)
//!     .stall_warning(Duration::from_millis(50)) // WARN after 50 ms instead of 100
//!     .build()?;
//! let started = Arc::new(AtomicBool::new(false));
//! let flag = started.clone();
//! let blocker = rt.spawn(move || {
//!     flag.store(true, Ordering::Release);
//!     let until = Instant::now() + Duration::from_millis(400);
//!     while Instant::now() < until {} // the mistake: a loop that never parks
//! });
//! while !started.load(Ordering::Acquire) {
//!     std::thread::yield_now();
//! }
//! let dump = rt.dump().to_string(); // from this plain thread
//! assert!(dump.contains("[running for"), "{dump}");
//! blocker.join().unwrap();
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # The blocking pool
//!
//! [`spawn_blocking(f)`](crate::spawn_blocking) runs `f` on a pool of
//! threads shared by the whole process and parks the fiber until `f`
//! returns; `f`'s value comes back as the call's, and a panic in `f` is
//! re-raised in the fiber. The pool starts threads as work arrives, up to
//! [`max_blocking_threads`](crate::max_blocking_threads) (512 unless
//! [`set_max_blocking_threads`](crate::set_max_blocking_threads) says
//! otherwise; beyond that, calls queue), and an idle thread exits after
//! 10 s. Its threads are started by a thread of the pool's own, never by a
//! runtime's, so a burst of thousands of calls does not stall the fibers
//! around it. If the fiber is cancelled, or its [`timeout`](crate::timeout)
//! passes, while `f` runs, the fiber unwinds at once; `f` runs to its end
//! and its result is dropped.
//!
//! [`fibra::fs`](crate::fs) goes through the same pool, call by call; a
//! [`fibra::fs::File`](crate::fs::File) reads ahead 64 KiB per trip, so a
//! `BufReader` over it costs one trip per 64 KiB, not one per line.
//!
//! ```
//! use std::time::Duration;
//!
//! fibra::run(|| {
//!     let ticker = fibra::spawn(|| fibra::sleep(Duration::from_millis(5)));
//!     let hash = fibra::spawn_blocking(|| {
//!         std::thread::sleep(Duration::from_millis(20)); // stands for a slow library call
//!         0xfeed_u32
//!     });
//!     assert_eq!(hash, 0xfeed);
//!     assert!(ticker.is_finished()); // it ran while we waited
//! });
//! ```
//!
//! # Code you cannot change: the `hook` feature
//!
//! With the `hook` cargo feature, std's socket calls, `std::thread::sleep`,
//! name lookups and the `poll`/`select`/`epoll_wait` of C event loops park
//! the fiber instead of blocking the thread, so a sync client (the `redis`
//! crate, `ureq`, `mysql`, libpq, libcurl) runs in a fiber unchanged. Files
//! are not hooked: use [`fibra::fs`](crate::fs) or `spawn_blocking`. The
//! [crate docs](crate#the-hook-feature) list what is hooked and what is not.
//!
//! # Work that should wait its turn
//!
//! A fiber that should run only when nothing else is ready — housekeeping,
//! a background scan — can be spawned idle with
//! [`Builder::idle`](crate::Builder::idle): it never delays a ready fiber,
//! I/O or a timer.
//!
//! ```
//! use std::cell::Cell;
//! use std::rc::Rc;
//!
//! fibra::run(|| {
//!     let order = Rc::new(Cell::new(0));
//!     let o = order.clone();
//!     let background = fibra::Builder::new()
//!         .idle(true)
//!         .spawn(move || o.set(o.get() * 10 + 2))
//!         .unwrap();
//!     let o = order.clone();
//!     let urgent = fibra::spawn(move || o.set(o.get() * 10 + 1));
//!     urgent.join().unwrap();
//!     background.join().unwrap();
//!     assert_eq!(order.get(), 12); // the normal fiber first
//! });
//! ```
