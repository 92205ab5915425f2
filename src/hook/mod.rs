//! Unmodified blocking code in fibers (cargo feature `hook`): std's socket
//! calls and `std::thread::sleep` park the fiber instead of blocking the
//! thread.
//!
//! ## How
//!
//! This module defines, with `#[no_mangle]`, the libc entry points that
//! std's blocking calls go through (`read`, `recv`, `connect`, `poll`,
//! `nanosleep`, ...). A symbol defined in the executable wins over the same
//! symbol in a shared library, so the linker binds std's calls (and those of
//! any crate or statically linked C code that calls them) to these
//! definitions, in a normal `cargo build`, without `LD_PRELOAD` or linker
//! flags. Every hook first checks one thread-local — is a fibra runtime
//! entered on this thread? — and if not makes the system call itself, as
//! libc's wrapper would ([`sys`]): outside fibers nothing changes, and the
//! non-fiber path stays async-signal-safe (no allocation, lock or lazily
//! initialized state).
//!
//! Inside a fiber (or a `block_on` closure), a call on a *blocking socket*
//! is first made non-blocking for this call only — `MSG_DONTWAIT` for the
//! `send`/`recv` family, `RWF_NOWAIT` (`preadv2`/`pwritev2`) for
//! `read`/`write` and the vectored forms, which the kernel turns into
//! exactly the same socket operation — so the socket's own mode, which
//! other threads and processes share, is never changed. Only when that says
//! `EAGAIN` does the hook look at the fd: a socket the user made
//! non-blocking gets `EAGAIN` at once (`O_NONBLOCK` read with `F_GETFL`, so
//! `fcntl`, `ioctl(FIONBIO)` and `dup`s are all seen as they are); otherwise
//! the fiber parks on the reactor, at most until the socket's
//! `SO_RCVTIMEO`/`SO_SNDTIMEO` (then `EAGAIN`, std's `WouldBlock`), and
//! tries again. A blocking `write`, `writev`, `send`, `sendto` (and
//! `sendmsg` on a stream) returns when all is sent, as the kernel's does;
//! `recv` with `MSG_WAITALL` on a stream
//! returns when the buffer is full (with `MSG_PEEK`: when that much can be
//! peeked), on a datagram socket with one datagram.
//!
//! `accept` and `connect` have no per-call flag, and the hooks never change
//! a socket's `O_NONBLOCK` behind the user's back (it belongs to the open
//! file description, which `try_clone`s, threads and processes share). In
//! a fiber the runtime's io_uring makes them (`IORING_OP_ACCEPT`,
//! `IORING_OP_CONNECT`, which never block whatever the socket's flags), and
//! the fiber parks until the kernel completes them: no thread waits, so
//! 10 000 connects in flight cost 10 000 parked fibers. Where io_uring is
//! refused (before Linux 5.7, a seccomp filter, `FIBRA_NO_IO_URING=1`)
//! `accept` parks until a connection is queued and then takes it, and
//! `connect` runs on the blocking pool (see `connection`).
//!
//! A hooked socket is registered with the reactor once (edge-triggered,
//! readable and writable) and stays so until `close`: the hook of `close`
//! (and of `dup2`/`dup3`) forgets the fd, in the table of [`fds`] and in
//! this thread's reactor, so a reused fd number is a new socket and never
//! gets a stale wake-up. Its registration carries an id from the one id
//! space of every socket registration in the process, `fibra::net`'s
//! included, so a socket closed on another thread (whose stale source this
//! reactor keeps) is never taken for a later socket of either kind.
//!
//! ## Signal handlers
//!
//! Nothing that runs in a signal handler touches the scheduler. A call that
//! does not block (a write to a non-blocking socket: the self-pipe trick)
//! neither parks nor yields — hooked calls spend no I/O budget, unlike
//! `fibra::net`'s — and every handler installed through `sigaction` or
//! `signal` runs marked as one ([`handlers`]), so a call in it that would
//! block blocks the thread, as the kernel's does, instead of parking the
//! interrupted fiber.
//!
//! ## Signals end parked calls as they end the kernel's
//!
//! A signal handler that runs on a thread while one of its fibers is
//! parked in a hooked call ends that call as it would end the kernel's
//! blocking call (signal(7)): `select`, `pselect`, `poll`, `ppoll`,
//! `epoll_wait` and its kin fail with `EINTR` (their sets and `revents`
//! left alone); `nanosleep` and `clock_nanosleep` fail with `EINTR` and
//! say how much time was left (`std::thread::sleep` then sleeps the rest);
//! a socket or pipe call fails with `EINTR` if the handler was installed
//! without `SA_RESTART` (or `siginterrupt` said so), or — for a socket —
//! if it has a timeout (`SO_RCVTIMEO`/`SO_SNDTIMEO`), and otherwise goes on
//! waiting; a call that moved some bytes returns them. A signal the thread
//! blocks ends nothing, and `signalfd` and `sigwait` users, who block
//! their signals, are not disturbed.
//!
//! Where the kernel interrupts the one call its thread is blocked in, a
//! handler here ends every hooked call parked on the fibers of the thread
//! it ran on: each of them is, for its caller, a thread blocked in a call.
//! A signal sent to the process runs its handler on a thread the kernel
//! picks among those that do not block it (fibra's own threads block
//! every signal a program may handle). Fibra's own stack sampler's signal
//! ends nothing.
//!
//! ## What is hooked
//!
//! Inside fibers, on sockets: `read`, `write`, `readv`, `writev`, `recv`,
//! `recvfrom`, `recvmsg`, `send`, `sendto`, `sendmsg`, `accept`,
//! `accept4`, `connect`; on the other fds epoll can watch (pipes and
//! FIFOs — a child's stdout —, ttys and pseudo-terminals, eventfds):
//! `read`, `write`, `readv`, `writev` (where the kernel has no per-call
//! non-blocking form for the fd, the fiber parks until `poll` says it is
//! ready, then makes the call); the waits of event loops on any pollable fds
//! (sockets, pipes, eventfds, epoll fds...: readiness has no blocking
//! mode): `poll` and `ppoll` (`POLLPRI` is waited for as itself), `select`
//! and `pselect`, `epoll_wait`, `epoll_pwait` and `epoll_pwait2` — those
//! with a signal mask excepted ([`select`]); `nanosleep` and `clock_nanosleep` (monotonic and realtime
//! clocks) on the timer wheel; name resolution (`getaddrinfo`,
//! `getnameinfo`, `gethostbyname`, `gethostbyname_r`) on the blocking pool
//! while the fiber parks ([`resolve`]). `close`, `dup2` and `dup3` are hooked
//! everywhere, to forget fds; `sigaction`, `signal` and `siginterrupt`
//! everywhere, to mark handlers.
//!
//! ## What is not
//!
//! - Files (regular files, directories, block devices): `read` and
//!   `write` on them call the kernel as before — readiness means nothing
//!   for a file, and file I/O belongs on the blocking pool: `fibra::fs`.
//!   Stdin, stdout and stderr (fds 0-2) are never parked on, whatever they
//!   are: std guards them with locks tied to the thread, which two fibers
//!   of one thread would share.
//! - C libraries that call the kernel directly (or resolve names with a
//!   resolver of their own: c-ares, a static glibc) block the thread, as
//!   do crates that make raw system calls (rustix's `linux_raw` backend), std's
//!   `io::copy` when it uses `splice`/`sendfile`, a wait with a signal
//!   mask (`ppoll`, `pselect`, `epoll_pwait`), and the `MSG_WAITALL` form
//!   of `recvmsg` on a stream.
//! - An embedded event loop that keeps its state in thread-locals (tokio
//!   inside the sync `postgres` crate) parks in its `epoll_wait` like any
//!   other; a second fiber of the thread entering the same kind of loop
//!   meanwhile finds the first one's state (tokio panics: "Cannot start a
//!   runtime from within a runtime"). Give such a client
//!   `fibra::spawn_blocking`, or its async form on fibra's reactor.
//! - A call that is made non-blocking by its caller (`MSG_DONTWAIT`, an
//!   `O_NONBLOCK` fd) is never parked.
//! - Cancellation and `fibra::timeout` cannot unwind out of a hook (std
//!   called it as a C function): a hooked socket call that would wait in a
//!   cancelled fiber fails with `ECANCELED`, one that outlives its
//!   `fibra::timeout` with `ETIMEDOUT` (a `connect` is aborted: the socket
//!   is left unconnected), and the fiber unwinds at its next fibra park
//!   point; a hooked sleep sleeps its full time whatever fibra asks of it,
//!   as std promises.
//! - Fds closed behind libc's back (a raw `close` system call, `fclose`)
//!   are not forgotten; fd numbers from 4 Mi up are left alone.
//!
//! ## Differences from glibc that remain
//!
//! The goal is none but timing; `tests/hook_differential` runs every hooked
//! function through glibc and through the hook, with valid, boundary and
//! invalid inputs, and compares what each returns and writes. What still
//! differs, on purpose or not yet mended:
//!
//! - A signal handler ends every hooked call parked on the fibers of the
//!   thread it ran on, where the kernel ends the one call its thread is
//!   blocked in (see above).
//! - Only where io_uring is refused: `connect` in a fiber holds a
//!   blocking-pool thread while it waits (many connects to a slow host hold
//!   as many threads), and `accept` parks until a connection is queued,
//!   then takes it with the blocking call, which blocks the thread if
//!   another thread took that connection first.
//! - Before Linux 6.1 (no `IORING_SETUP_DEFER_TASKRUN`), the kernel
//!   finishing a hooked `connect` or `accept` that waited flags the
//!   runtime's thread as if a signal were pending: a wait that blocks the
//!   thread then (an unhooked `epoll_wait` of an outer loop on the same
//!   thread) can fail with `EINTR` (see `reactor/uring.rs`).
//! - A wait with a signal mask (`ppoll`, `pselect`, `epoll_pwait`) blocks
//!   the thread, as do the calls in the list of what is not hooked.
//! - An unreadable timeout or request pointer given to `nanosleep`,
//!   `clock_nanosleep` or `epoll_pwait2` in a fiber faults (SIGSEGV) where
//!   the kernel fails with `EFAULT` (glibc's `select`, `pselect` and
//!   `ppoll` read theirs too, and fault the same).
//!
//! ## Cost
//!
//! Outside fibers: one thread-local load per hooked call (`close`: also a
//! load and a swap in the fd table). Inside fibers, a call that does not
//! wait costs what it did (the non-blocking form of the same system call;
//! the first call on an fd also asks the kernel whether it is a socket). A
//! call that waits costs two more system calls (`F_GETFL` and the socket's
//! timeout) before it parks, and no `epoll_ctl` after the first wait on the
//! socket. A `connect` or an `accept` costs `F_GETFL` and one
//! `io_uring_enter` (which makes the call; its completion is read from
//! memory), plus the socket's timeout if it waits; the ring (one per
//! runtime thread, made by the first of them) holds no thread. Without
//! io_uring, a `connect` costs a hand-over to a pool thread and back and
//! holds that thread while it waits (up to `set_max_blocking_threads`;
//! more queue).

mod call;
mod close;
mod connection;
mod fds;
mod handlers;
mod poll;
mod resolve;
mod select;
mod sleep;
mod socket;
mod sys;
mod wait;

use libc::c_int;

use crate::scheduler::callout;
use crate::scheduler::context;
use crate::scheduler::core::Core;

/// The runtime a hooked call may park in: a runtime is entered on this
/// thread (the caller is one of its fibers or a `block_on` closure), and
/// the scheduler is not calling out to a tracing subscriber. The one check
/// every hooked call makes outside fibers.
#[inline(always)]
fn parkable<'a>() -> Option<&'a Core> {
    let core = context::current()?;
    (!callout::in_callout()).then_some(core)
}

/// [`parkable`], for a call on `fd`; never for stdin, stdout and stderr,
/// which std guards with locks tied to the thread.
#[inline(always)]
fn parkable_fd<'a>(fd: c_int) -> Option<&'a Core> {
    if fd <= 2 { None } else { parkable() }
}
