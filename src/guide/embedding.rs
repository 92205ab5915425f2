//! Embedding fibra in your own loop: a `poll(2)` or epoll loop, a game's
//! frame loop, glib, libuv, calloop.
//!
//! A program that already has a main loop keeps it. A current-thread
//! [`Runtime`](crate::Runtime) is driven one step at a time from that
//! loop, and its fd ([`AsRawFd`](std::os::fd::AsRawFd)) tells the loop
//! when the runtime has work. Everything else — fibers, sockets, timers,
//! channels — works as in [`fibra::run`](crate::run).
//!
//! # What each call guarantees
//!
//! | Call | Runs | Returns |
//! |---|---|---|
//! | [`turn(timeout)`](crate::Runtime::turn) | every fiber ready when it starts, once (one that yields goes to the next turn), plus those its one poll of I/O and timers (at most 1 024 events) readied; if none was ready, waits at most `timeout` first | how many times it resumed a fiber |
//! | [`turn_with_budget(timeout, budget)`](crate::Runtime::turn_with_budget) | the same, but resumes no fiber once `budget` has passed since it began (checked between fibers: one that runs long overruns it by its own time); the rest stay ready, first in line next turn | the same |
//! | [`block_on(f)`](crate::Runtime::block_on) | `f` as the root, and every fiber whenever `f` waits | when `f` does |
//! | [`run()`](crate::Runtime::run) | until no fiber is left | then |
//!
//! After any of them, and after [`Runtime::spawn`](crate::Runtime::spawn)
//! from outside, the runtime's fd is readable exactly when the runtime has
//! work: a ready fiber, an I/O event not yet handled, a due timer, a
//! wake-up from another thread. That holds for level-triggered watchers
//! (`poll`, `select`, epoll without `EPOLLET`) and edge-triggered ones
//! (epoll with `EPOLLET`, mio's kind): whenever a turn leaves work, the fd
//! gets a new edge. I/O and timers are polled at the start of every turn,
//! so no budget starves them.
//!
//! Two things do not mix with a loop of one's own on the runtime's thread:
//!
//! - A plain blocking call there, outside the runtime (a channel `recv`
//!   whose sender is one of its fibers, a `join`), stops the fibers until
//!   it returns: if one of them is to end it, it never will. fibra tells
//!   it (a `fibra::stall` warning after the runtime's `stall_warning`).
//!   Make the call in a fiber, or inside `block_on`.
//! - A runtime is its thread's: it is neither `Send` nor `Sync`. Other
//!   threads reach its fibers through what crosses threads: a
//!   [`fibra::channel`](crate::channel), an
//!   [`EventFd`](crate::io::EventFd), a [`JoinHandle`](crate::JoinHandle).
//!
//! # A `poll(2)` loop
//!
//! The runtime's fd beside the loop's own (here an eventfd another thread
//! writes): `poll` sleeps until one of them is ready.
//!
//! ```
//! use std::os::fd::AsRawFd;
//! use std::time::Duration;
//!
//! let rt = fibra::Runtime::new()?;
//! let done = std::rc::Rc::new(std::cell::Cell::new(false));
//! let d = done.clone();
//! rt.spawn(move || {
//!     fibra::sleep(Duration::from_millis(20));
//!     d.set(true);
//! });
//! let mine = fibra::io::EventFd::new(0)?; // the loop's own source
//! while !done.get() {
//!     let mut fds = [
//!         libc::pollfd { fd: rt.as_raw_fd(), events: libc::POLLIN, revents: 0 },
//!         libc::pollfd { fd: mine.as_raw_fd(), events: libc::POLLIN, revents: 0 },
//!     ];
//!     // SAFETY: two valid pollfds.
//!     unsafe { libc::poll(fds.as_mut_ptr(), 2, 1000) };
//!     if fds[0].revents != 0 {
//!         rt.turn(Some(Duration::ZERO));
//!     }
//!     if fds[1].revents != 0 {
//!         // ... the loop's own work ...
//!     }
//! }
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # An epoll loop, edge-triggered
//!
//! Add the runtime's fd once, with `EPOLLET` if the loop's other sources
//! use it; after each event, one turn. (`tests/embedding.rs` serves 3 000
//! sockets made ready at once this way, with no wait timing out while
//! work is left.)
//!
//! ```
//! use std::os::fd::AsRawFd;
//! use std::time::Duration;
//!
//! let rt = fibra::Runtime::new()?;
//! for i in 0..3 {
//!     rt.spawn(move || fibra::sleep(Duration::from_millis(10 * i)));
//! }
//! // SAFETY: a new epoll fd, closed below.
//! let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
//! let mut ev = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLET) as u32, u64: 0 };
//! // SAFETY: valid fds and event.
//! unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, rt.as_raw_fd(), &mut ev) };
//! while rt.fibers() > 0 {
//!     let mut got = [libc::epoll_event { events: 0, u64: 0 }; 8];
//!     // SAFETY: a valid buffer of 8 events.
//!     let n = unsafe { libc::epoll_wait(ep, got.as_mut_ptr(), 8, 1000) };
//!     assert!(n > 0, "work was left, yet no edge came");
//!     rt.turn(Some(Duration::ZERO));
//! }
//! // SAFETY: our epoll fd, closed once.
//! unsafe { libc::close(ep) };
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # A frame loop
//!
//! A game or a GUI owes its frames a fixed period. Start each frame on a
//! schedule (not when `poll` wakes), and give fibra the time left before
//! the next with `turn_with_budget`, sleeping on its fd when it has
//! nothing to do. `examples/game_loop.rs` is the whole loop; its `--demo`
//! prints the frame period's spread under load, with `turn` and with
//! `turn_with_budget`.
//!
//! ```
//! use std::os::fd::AsRawFd;
//! use std::time::{Duration, Instant};
//!
//! const FRAME: Duration = Duration::from_nanos(16_666_667);
//! let rt = fibra::Runtime::new()?;
//! rt.spawn(|| fibra::sleep(Duration::from_millis(30)));
//! let mut next = Instant::now();
//! for _frame in 0..5 {
//!     next += FRAME;
//!     // ... update and render ...
//!     while let Some(left) = next.checked_duration_since(Instant::now()) {
//!         if rt.turn_with_budget(Some(Duration::ZERO), left) == 0 {
//!             let mut pfd = libc::pollfd { fd: rt.as_raw_fd(), events: libc::POLLIN, revents: 0 };
//!             let ms = left.as_micros().div_ceil(1000) as i32;
//!             // SAFETY: one valid pollfd.
//!             unsafe { libc::poll(&mut pfd, 1, ms) };
//!         }
//!     }
//! }
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Other loops
//!
//! Each has a way to watch an fd and call back when it is readable; the
//! callback makes one turn, with no wait.
//!
//! - **glib's `GMainContext`**: a `GSource` with the runtime's fd added by
//!   `g_source_add_unix_fd` (`G_IO_IN`); `prepare` says "not ready yet"
//!   with a timeout of -1 (the fd carries timers too), `check` tests the
//!   fd's `revents`, `dispatch` calls `turn(Some(Duration::ZERO))` and
//!   returns `G_SOURCE_CONTINUE`. (glib polls level-triggered.)
//! - **libuv**: a `uv_poll_t` on the runtime's fd for `UV_READABLE`, whose
//!   callback makes one turn. A program that drives libuv itself with
//!   `uv_run(loop, UV_RUN_NOWAIT)` calls `turn(Some(Duration::ZERO))`
//!   beside it, and waits on both fds.
//! - **calloop**: a `Generic` source over the runtime's fd
//!   (`Interest::READ`, `Mode::Level`), whose callback makes one turn and
//!   returns `PostAction::Continue`; `Mode::Edge` works too.
//! - **tokio's `LocalSet`**: the closest tokio has to a runtime driven
//!   from outside is a `LocalSet` run inside `block_on`. The fibra shape is
//!   the other way round: fibra's runtime inside *your* loop. A tokio
//!   program that wants both runs fibra on a thread of its own
//!   (`fibra::run`) and talks to it over a [`fibra::channel`](crate::channel),
//!   whose `send` works from any thread.
//!
//! A loop of any of these kinds that wants a bounded slice for fibra
//! calls `turn_with_budget` instead of `turn`.
