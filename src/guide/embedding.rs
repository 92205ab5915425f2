//! Embedding fibra in your own loop: a `poll(2)` or epoll loop, a game's
//! frame loop, channels the loop waits on, glib, libuv, calloop.
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
//!   Make the call in a fiber, or inside `block_on`; or, for a channel,
//!   wait on its fd in the loop (see "Channels an outer loop waits on").
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
//! the next with `turn_with_budget(Some(left), left)`: it runs the ready
//! fibers until the frame's end, and when none is ready it waits on its
//! I/O and timers up to that end. That wait keeps its nanoseconds (with
//! `epoll_pwait2`, Linux 5.11 on; older kernels round it up to the
//! millisecond, as `poll(2)` must), so an idle frame starts on time, not
//! up to a millisecond late. `examples/game_loop.rs` is the whole loop;
//! its `--demo` prints the frame period's spread under load, with `turn`
//! and with `turn_with_budget`, and where the late frames come from.
//!
//! ```
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
//!         rt.turn_with_budget(Some(left), left);
//!     }
//! }
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! A frame loop that also waits on fds of its own (a window system's)
//! polls them beside the runtime's fd, as in the `poll(2)` loop above,
//! with a timeout to the frame's end, and turns with no wait
//! (`turn_with_budget(Some(Duration::ZERO), left)`); `ppoll` and
//! `epoll_pwait2` take that timeout in nanoseconds, `poll` and
//! `epoll_wait` in milliseconds.
//!
//! # Channels an outer loop waits on
//!
//! Fibers hand their results to the loop over a
//! [`fibra::channel`](crate::channel); the loop must not `recv` (a plain
//! blocking call, above), and need not `try_recv` after every turn: a
//! receiver's [`ready_fd`](crate::channel::Receiver::ready_fd) is an fd
//! that is readable whenever the channel has something for `try_recv` (a
//! message, a sender waiting on a rendezvous, the disconnection). Poll it
//! beside the runtime's fd; when it is readable, `try_recv` until
//! `Empty`. The `try_recv` that finds the channel empty clears the fd, and
//! looks once more in the same step, so a message sent meanwhile keeps it
//! readable: level-triggered, it is readable exactly while there is
//! something to take; edge-triggered (`EPOLLET`), each message after a
//! drain gives a new edge. Senders may be the runtime's own fibers, as
//! here, or anything else: other threads, other runtimes, workers.
//!
//! ```
//! use std::os::fd::AsRawFd;
//! use std::time::Duration;
//! use fibra::channel::{TryRecvError, unbounded};
//!
//! let rt = fibra::Runtime::new()?;
//! let (results, inbox) = unbounded::<String>();
//! for job in 0..3u64 {
//!     let results = results.clone();
//!     rt.spawn(move || {
//!         fibra::sleep(Duration::from_millis(10 * job)); // the fiber's work
//!         results.send(format!("job {job} done")).unwrap();
//!     });
//! }
//! drop(results); // the inbox disconnects when the last job is done
//! let inbox_fd = inbox.ready_fd()?;
//! let mut log = Vec::new();
//! 'frame: loop {
//!     let mut fds = [
//!         libc::pollfd { fd: rt.as_raw_fd(), events: libc::POLLIN, revents: 0 },
//!         libc::pollfd { fd: inbox_fd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
//!     ];
//!     // SAFETY: two valid pollfds.
//!     let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, 1000) };
//!     assert!(n > 0, "work was pending, yet poll slept");
//!     if fds[0].revents != 0 {
//!         rt.turn(Some(Duration::ZERO));
//!     }
//!     if fds[1].revents != 0 {
//!         loop {
//!             match inbox.try_recv() {
//!                 Ok(line) => log.push(line), // the loop's own handling
//!                 Err(TryRecvError::Empty) => break, // the fd is clear again
//!                 Err(TryRecvError::Disconnected) => break 'frame,
//!             }
//!         }
//!     }
//! }
//! assert_eq!(log, ["job 0 done", "job 1 done", "job 2 done"]);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! The fd is the channel's: every `ReadyFd` of its receivers is the same
//! fd, and the last one dropped closes it. It is an eventfd the senders
//! write when the channel goes from nothing to take to something, as they
//! wake a waiting receiver, once per drain; a channel nobody asked an fd
//! of pays nothing for it. A message that another receiver (a fiber with
//! a clone) takes first leaves one wake-up for nothing, cleared by the
//! `try_recv` that finds the channel empty. `tests/channel_fd.rs` proves
//! it with `poll` and `EPOLLET` epoll, senders on threads, on fibers of
//! another thread, on workers, and thousands of sends racing the drain.
//! In the loops below, the `ReadyFd` is one more fd, watched as the
//! runtime's is, whose callback drains the channel.
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
//!   returns `PostAction::Continue`; `Mode::Edge` works too. A channel's
//!   `ReadyFd` is one more `Generic` source, whose callback drains it.
//! - **tokio's `LocalSet`**: the closest tokio has to a runtime driven
//!   from outside is a `LocalSet` run inside `block_on`. The fibra shape is
//!   the other way round: fibra's runtime inside *your* loop. A tokio
//!   program that wants both runs fibra on a thread of its own
//!   (`fibra::run`) and talks to it over a [`fibra::channel`](crate::channel),
//!   whose `send` works from any thread.
//!
//! A loop of any of these kinds that wants a bounded slice for fibra
//! calls `turn_with_budget` instead of `turn`.
//!
//! ## Their words for fibra's four calls
//!
//! | fibra | glib | libuv | calloop | tokio |
//! |---|---|---|---|---|
//! | [`turn(Some(ZERO))`](crate::Runtime::turn): what is ready, no wait | `g_main_context_iteration(ctx, FALSE)`; a source's `dispatch` | `uv_run(loop, UV_RUN_NOWAIT)` | `EventLoop::dispatch(Some(ZERO), ..)`; a source's callback | (none: a `LocalSet` is only run inside `block_on`) |
//! | [`turn(None)`](crate::Runtime::turn): wait for something, then run it | `g_main_context_iteration(ctx, TRUE)` | `uv_run(loop, UV_RUN_ONCE)` | `EventLoop::dispatch(None, ..)` | |
//! | [`turn_with_budget(t, budget)`](crate::Runtime::turn_with_budget): the same, cut off at `budget` | a `dispatch` that returns `G_SOURCE_CONTINUE` with work left (the fd stays readable) | (none: a callback runs to its end) | a callback that returns with work left (`Mode::Level` calls it again) | (none; tokio's own coop budget is per task) |
//! | [`block_on(f)`](crate::Runtime::block_on): until `f` returns | `g_main_loop_run` until a callback quits it | `uv_run(UV_RUN_DEFAULT)` until a callback stops it | `EventLoop::block_on(future, ..)` | `LocalSet::block_on(&rt, future)`, `run_until` |
//! | [`run()`](crate::Runtime::run): until no fiber is left | `g_main_loop_run` | `uv_run(loop, UV_RUN_DEFAULT)`: until no handle is active | `EventLoop::run` until a `LoopSignal` stops it | awaiting the `LocalSet`: until no task is left |
//!
//! Where fibra sits inside their loop, only the first three are used:
//! `block_on` and `run` keep the thread until they return, as
//! `g_main_loop_run` and `uv_run(UV_RUN_DEFAULT)` do, and the outer loop's
//! own sources wait meanwhile. [`Runtime::spawn`](crate::Runtime::spawn)
//! is `spawn_local` (a closure that need not be `Send`), and a channel's
//! [`ReadyFd`](crate::channel::ReadyFd) is the shape of glib's `GSource`
//! for a queue, or calloop's channel source.
//!
//! ## calloop, whole
//!
//! `examples/calloop_loop.rs` is a calloop loop with three sources: the
//! runtime's fd (budgeted turns), a calloop timer, and a channel's
//! `ReadyFd`; the runtime's fibers serve TCP echo clients and tell the
//! loop of each answer through the channel. `tests/calloop_loop.rs` runs
//! it and checks that every client is answered, that the timer keeps its
//! period while the fibers work, that every message comes through the
//! fd's callback with no `try_recv` polling, and that the idle loop
//! sleeps (its wake-ups are its timer's). The core of it:
//!
//! ```
//! use std::os::fd::{AsRawFd, BorrowedFd};
//! use std::time::Duration;
//! use calloop::generic::Generic;
//! use calloop::{EventLoop, Interest, Mode, PostAction};
//! use fibra::channel::{TryRecvError, unbounded};
//!
//! let rt = fibra::Runtime::new()?;
//! let (results, inbox) = unbounded::<u64>();
//! for job in 1..=3u64 {
//!     let results = results.clone();
//!     rt.spawn(move || {
//!         fibra::sleep(Duration::from_millis(5 * job)); // the fiber's work
//!         results.send(job).unwrap();
//!     });
//! }
//! drop(results);
//!
//! // Declared after `rt`, so dropped before it.
//! let mut event_loop: EventLoop<'_, Vec<u64>> = EventLoop::try_new()?;
//! let handle = event_loop.handle();
//! // SAFETY: the runtime's fd is open while `rt` lives, and the loop that
//! // holds this borrow of it is dropped first.
//! let rt_fd = unsafe { BorrowedFd::borrow_raw(rt.as_raw_fd()) };
//! let runtime = &rt;
//! handle
//!     .insert_source(Generic::new(rt_fd, Interest::READ, Mode::Level), move |_, _, _| {
//!         runtime.turn_with_budget(Some(Duration::ZERO), Duration::from_millis(2));
//!         Ok(PostAction::Continue) // work left: the fd stays readable
//!     })
//!     .map_err(|e| e.error)?;
//! handle
//!     .insert_source(
//!         Generic::new(inbox.ready_fd()?, Interest::READ, Mode::Level),
//!         move |_, _, got: &mut Vec<u64>| loop {
//!             match inbox.try_recv() {
//!                 Ok(job) => got.push(job),
//!                 Err(TryRecvError::Empty) => return Ok(PostAction::Continue),
//!                 Err(TryRecvError::Disconnected) => return Ok(PostAction::Remove),
//!             }
//!         },
//!     )
//!     .map_err(|e| e.error)?;
//!
//! let mut got = Vec::new();
//! while got.len() < 3 {
//!     // ... the loop's other sources: a Wayland display, timers ...
//!     event_loop.dispatch(Some(Duration::from_secs(5)), &mut got)?;
//! }
//! assert_eq!(got, [1, 2, 3]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
