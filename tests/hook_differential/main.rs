#![cfg(feature = "hook")]
//! A differential test of every libc entry point the `hook` feature
//! defines (`src/hook`): each call is made with the same inputs, on fds and
//! peers made fresh for it, in three places, and the answers must be the
//! same. The places:
//!
//! - `glibc`: glibc's own function, found with `dlsym(RTLD_NEXT)` (the
//!   executable defines the hook; the next definition is glibc's), on a
//!   plain thread with no fibra runtime;
//! - `fiber`: the hook (the symbol the linker binds `libc::select` and the
//!   others to) inside a fiber of a fibra runtime;
//! - `thread`: the hook on a plain thread, where it makes the raw call.
//!
//! What is compared (a `Record`, `harness.rs`): the return value, `errno`
//! (set to a sentinel before the call, so "left untouched" is compared
//! too), every byte the call may write (each output followed by canary
//! bytes, and small fd sets, pollfd arrays and event arrays at the very end
//! of a page whose next page is inaccessible, so a read or write past them
//! faults: `mem.rs`), the bytes a call must leave alone, and what the peer
//! of a socket received. Bytes derived from time (the time left that
//! `select` writes) are compared within a tolerance.
//!
//! Each test covers one family of functions (a module each, below). It
//! runs each place in a child process of its own (this test binary again,
//! with `FIBRA_CHILD`, `DIFF_PLACE` and `DIFF_FROM` set; see
//! `util::is_child`): fd numbers, signal dispositions and a case that
//! crashes stay in there. The child prints one record per case. A child
//! that dies in a case (a fault) or hangs in it (silent for 15 s, then
//! killed) is recorded as that case's answer, `NO ANSWER: the child died:
//! signal: 11 (SIGSEGV); stderr: ...` or `NO ANSWER: hung: ...`, and a new
//! child goes on with the next case; a case that panics answers `NO
//! ANSWER: panic: ...` (`the fiber failed: ...` in a fiber). A NO ANSWER
//! agrees only with the same NO ANSWER.
//!
//! Reading a report: every place's record of a case is compared with
//! glibc's, and each that differs is printed (as it is found, and again in
//! the message the test fails with), the function and the case's name
//! (what it is made of and the arguments it is given) first, then both
//! records:
//!
//! ```text
//! MISMATCH write: "udp connected, length 0" (fiber vs glibc)
//!     glibc:  ret=0 errno=untouched input_intact="yes" peer="<0>|idle"
//!     fiber:  ret=0 errno=untouched input_intact="yes" peer="|idle"
//! MISMATCH clock_nanosleep: "thread cputime, 1 ms" (thread vs glibc)
//!     glibc:  ret=22 errno=untouched rem=[eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeea5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5] req_intact="yes"
//!     thread:  ret=95 errno=untouched rem=[eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeea5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5] req_intact="yes"
//! ```
//!
//! `ret` is the return value, `errno` its name and number or `untouched`
//! (the sentinel is still there). Then each named output: text in quotes,
//! else hex in brackets (`ee`: a byte the call did not write, `a5`: a
//! canary byte), long ones as their length, first bytes and hash; a
//! timing value as `name~Nus(<=bound)`; and `peer=`, what the peer
//! received (`<n>` before each datagram, then how reading it ended:
//! `|idle`, `|eof`, `|err=...`). In these two (from the test's first
//! runs; the first is fixed since), glibc's `write` of 0 bytes sent an
//! empty datagram and the hook in a fiber sent none, and glibc's
//! `clock_nanosleep` said EINVAL (22) where the hook said EOPNOTSUPP (95).
//! A case that differs in the fiber and on the thread is reported
//! twice. After each function a line counts the cases that agree in every
//! place, and after each test a line counts all its cases and mismatches.
//!
//! Run it (about 15 s; `-- --nocapture` shows the reports and counts of
//! tests that pass too):
//!
//! ```text
//! cargo test --features hook --test hook_differential -- --nocapture
//! ```
//!
//! and one test by adding its name (`... -- --nocapture data_reads`). A
//! place's raw records, one `DIFF-REC <case number> <record>` line per
//! case: `FIBRA_CHILD=data_reads DIFF_PLACE=fiber DIFF_FROM=0` in the
//! environment of `target/debug/deps/hook_differential-<hash> data_reads
//! --exact --nocapture`.
//!
//! The `eintr_` tests check that a signal whose handler has no
//! `SA_RESTART` interrupts a waiting call (`EINTR`), as it does in glibc.

// The harness and the tools of every case.
mod api;
mod harness;
mod mem;
mod net;
mod sys;
#[path = "../util/mod.rs"]
mod util;

// The families of cases.
mod connection;
mod eintr;
mod epoll;
mod fds;
mod poll;
mod reads;
mod recvmsg;
mod resolve;
mod select;
mod sends;
mod siginterrupt;
mod signals;
mod sleep;
mod sources;
mod writes;

use eintr::SockWait;
use epoll::EpFn;
use harness::{Function, differential};

/// The read side of the data calls — `read`, `readv`, `recv`, `recvfrom`
/// and `recvmsg` — answer as glibc's do in a fiber and on a plain thread:
/// on sockets of every kind (data, end of stream, reset, empty with and
/// without a timeout, data arriving late, every `MSG_*` flag the hooks
/// look at), on pipes, files, eventfds, directories and bad fds; the
/// bytes read, what is left to read after the call, the address and
/// control data written, and nothing written past the buffers.
#[test]
fn data_reads() {
    differential(
        "data_reads",
        vec![
            Function::new("read", reads::read_cases()),
            Function::new("readv", reads::readv_cases()),
            Function::new("recv", reads::recv_cases()),
            Function::new("recvfrom", reads::recvfrom_cases()),
            Function::new("recvmsg", recvmsg::recvmsg_cases()),
        ],
    );
}

/// The write side of the data calls — `write` and `writev` — answer as
/// glibc's do in a fiber and on a plain thread, and the peer receives the
/// same bytes: on sockets of every kind (a closed, reset or shut down
/// connection, full buffers with and without a timeout or a reader that
/// drains them later, large writes: a blocking write returns when all is
/// written), on pipes, files, eventfds and bad fds; lengths 0 and 1, bad
/// buffers and iovec counts.
#[test]
fn data_writes() {
    differential(
        "data_writes",
        vec![
            Function::new("write", writes::write_cases()),
            Function::new("writev", writes::writev_cases()),
        ],
    );
}

/// The send calls — `send`, `sendto` and `sendmsg` — answer as glibc's do
/// in a fiber and on a plain thread, and the peer receives the same
/// bytes: on sockets of every kind (a closed, reset or shut down
/// connection, full buffers with and without a timeout or a reader that
/// drains them later, large sends, every `MSG_*` flag the hooks look at,
/// addresses good and bad, passed fds), and on non-sockets and bad fds.
#[test]
fn data_sends() {
    differential(
        "data_sends",
        vec![
            Function::new("send", sends::send_cases()),
            Function::new("sendto", sends::sendto_cases()),
            Function::new("sendmsg", sends::sendmsg_cases()),
        ],
    );
}

/// `accept`, `accept4` and `connect` answer as glibc's do in a fiber and
/// on a plain thread: a pending connection taken (its address, cut or
/// not, the new fd's flags, and that it is connected), none pending with
/// a non-blocking listener or a timeout, one arriving later, a reset one,
/// listeners shut down or not listening, non-sockets and bad fds; connect
/// to listening and closed loopback ports (ECONNREFUSED), unix addresses,
/// datagram sockets, AF_UNSPEC, bad addresses and lengths.
#[test]
fn accept_connect() {
    differential(
        "accept_connect",
        vec![
            Function::new("accept", connection::accept_cases(false)),
            Function::new("accept4", connection::accept_cases(true)),
            Function::new("connect", connection::connect_cases()),
        ],
    );
}

/// `poll` and `ppoll` answer as glibc's do in a fiber and on a plain
/// thread: the count, every `revents`, the pollfds' other fields left
/// alone and nothing written past the array (at a page end too); ready,
/// hung-up, closed (POLLNVAL), negative, file, socket (RDHUP, reset,
/// urgent data, writable, pending connection), eventfd and epoll fds; no
/// fds; zero, short, infinite, huge, negative and invalid timeouts; a
/// signal mask; an fd written while the call waits. `ppoll`'s timeout and
/// mask must come back exactly as they were (they are const).
#[test]
fn poll_family() {
    differential(
        "poll_family",
        vec![
            Function::new("poll", poll::poll_cases()),
            Function::new("ppoll", poll::ppoll_cases()),
        ],
    );
}

/// `select` and `pselect` answer as glibc's do in a fiber and on a plain
/// thread: the count, the three sets as written back, nothing read or
/// written past a set sized for nfds (8 bytes for nfds up to 64, at the
/// end of a page before an inaccessible one: a hook that copies a whole
/// 128-byte `fd_set` faults there), `select`'s time left (within a
/// tolerance), `pselect`'s timeout and mask left alone; nfds 0, 1, 64,
/// 65, 1024, 1025, 2000 and -1, null sets, ready, idle, writable, urgent
/// and closed fds, zero, short, null, huge, negative and unnormalized
/// timeouts, a signal mask, an fd written while the call waits.
#[test]
fn select_family() {
    differential(
        "select_family",
        vec![
            Function::new("select", select::select_cases()),
            Function::new("pselect", select::pselect_cases()),
        ],
    );
}

/// `epoll_wait`, `epoll_pwait` and `epoll_pwait2` answer as glibc's do in
/// a fiber and on a plain thread: the count, the events written (and
/// nothing past them, at a page end too), a second call after the first
/// (level, edge and one-shot modes), the timeout and mask left alone;
/// ready, idle, hung-up, nested and socket fds; max 0, -1, 1 and huge; bad
/// epoll fds; zero, short, infinite, negative, huge and invalid timeouts;
/// a signal mask; an fd written while the call waits.
#[test]
fn epoll_family() {
    differential(
        "epoll_family",
        vec![
            Function::new("epoll_wait", epoll::epoll_cases(EpFn::Wait)),
            Function::new("epoll_pwait", epoll::epoll_cases(EpFn::Pwait)),
            Function::new("epoll_pwait2", epoll::epoll_cases(EpFn::Pwait2)),
        ],
    );
}

/// `nanosleep` and `clock_nanosleep` answer as glibc's do in a fiber and
/// on a plain thread: the result (clock_nanosleep's error number, errno
/// left alone), rem left alone, at least the time asked slept; zero,
/// short, absolute (future and past), invalid and null requests, every
/// clock (monotonic, realtime, boottime, TAI, CPU clocks, raw, coarse,
/// invalid ids), unknown flags.
#[test]
fn sleep_family() {
    differential(
        "sleep_family",
        vec![
            Function::new("nanosleep", sleep::nanosleep_cases()),
            Function::new("clock_nanosleep", sleep::clock_nanosleep_cases()),
        ],
    );
}

/// `getaddrinfo`, `getnameinfo`, `gethostbyname` and `gethostbyname_r`
/// answer as glibc's do in a fiber (where the hooks run them on the
/// blocking pool) and on a plain thread: the result, every field of the
/// answer, `errno` and `h_errno` (and a result pointer left alone on
/// failure); names from /etc/hosts, numeric ones, invalid ones and the
/// error cases of each function's arguments (flags, families, buffer
/// sizes). No network: the one name that goes to the resolver fails at
/// once. Four lookups at once in fibers of one thread must each read back
/// their own answer, as they do one after another.
#[test]
fn resolve_family() {
    differential(
        "resolve_family",
        vec![
            Function::new("getaddrinfo", resolve::getaddrinfo_cases()),
            Function::new("getnameinfo", resolve::getnameinfo_cases()),
            Function::new("gethostbyname", resolve::gethostbyname_cases()),
            Function::new("gethostbyname_r", resolve::gethostbyname_r_cases()),
        ],
    );
}

/// `close`, `dup2` and `dup3` answer as glibc's do in a fiber and on a
/// plain thread, and leave the fd table as glibc's do: pipes, sockets
/// (one a fiber waited on: a new socket at its number, or a pipe dup'ed
/// onto it, must work as itself), files, epoll fds, closed, negative and
/// huge fds, an fd onto itself, close-on-exec and bad flags.
#[test]
fn fd_family() {
    differential(
        "fd_family",
        vec![
            Function::new("close", fds::close_cases()),
            Function::new("dup2", fds::dup_cases(false)),
            Function::new("dup3", fds::dup_cases(true)),
        ],
    );
}

/// `sigaction` and `signal` answer as glibc's do in a fiber and on a
/// plain thread (each place in a process of its own): the result, errno,
/// the old action as written back (the handler, flags, mask; nothing past
/// it), the action read back after, and what a handler sees when the
/// signal comes (its info, the signals blocked meanwhile); valid handlers
/// with every flag that matters, SIG_DFL, SIG_IGN, SIG_ERR, invalid
/// signal numbers (0, 65, -1, glibc's own 32 and 33, SIGKILL, SIGSTOP),
/// and `signal` after `siginterrupt`; `siginterrupt` itself (the flags
/// it leaves, what a later `signal` installs, bad signals).
#[test]
fn signal_family() {
    differential(
        "signal_family",
        vec![
            Function::new("sigaction", signals::sigaction_cases()),
            Function::new("signal", siginterrupt::signal_cases()),
            Function::new("siginterrupt", siginterrupt::siginterrupt_cases()),
        ],
    );
}

/// A signal whose handler has no SA_RESTART interrupts `select` and
/// `pselect` waiting in a fiber (EINTR), as it does glibc's.
#[test]
fn eintr_select_family() {
    differential(
        "eintr_select_family",
        vec![
            Function::new("select", eintr::select_cases()),
            Function::new("pselect", eintr::pselect_cases()),
        ],
    );
}

/// A signal whose handler has no SA_RESTART interrupts `poll` and `ppoll`
/// waiting in a fiber (EINTR), as it does glibc's.
#[test]
fn eintr_poll_family() {
    differential(
        "eintr_poll_family",
        vec![
            Function::new("poll", eintr::poll_cases(false)),
            Function::new("ppoll", eintr::poll_cases(true)),
        ],
    );
}

/// A signal whose handler has no SA_RESTART interrupts `epoll_wait`,
/// `epoll_pwait` and `epoll_pwait2` waiting in a fiber (EINTR), as it
/// does glibc's.
#[test]
fn eintr_epoll_family() {
    differential(
        "eintr_epoll_family",
        vec![
            Function::new("epoll_wait", eintr::epoll_cases(EpFn::Wait)),
            Function::new("epoll_pwait", eintr::epoll_cases(EpFn::Pwait)),
            Function::new("epoll_pwait2", eintr::epoll_cases(EpFn::Pwait2)),
        ],
    );
}

/// A signal whose handler has no SA_RESTART interrupts `nanosleep` and
/// `clock_nanosleep` in a fiber (EINTR, the time left in rem), as it does
/// glibc's.
#[test]
fn eintr_sleep_family() {
    differential(
        "eintr_sleep_family",
        vec![
            Function::new("nanosleep", eintr::nanosleep_cases()),
            Function::new("clock_nanosleep", eintr::clock_nanosleep_cases()),
        ],
    );
}

/// A signal whose handler has no SA_RESTART interrupts `recv`,
/// `recvfrom` and `recvmsg` waiting in a fiber on a socket with a receive
/// timeout (EINTR, which the kernel gives then whatever SA_RESTART says),
/// as it does glibc's.
#[test]
fn eintr_recv_family() {
    differential(
        "eintr_recv_family",
        vec![
            Function::new("recv", eintr::socket_cases(&[SockWait::Recv])),
            Function::new("recvfrom", eintr::socket_cases(&[SockWait::Recvfrom])),
            Function::new("recvmsg", eintr::socket_cases(&[SockWait::Recvmsg])),
        ],
    );
}

/// A signal whose handler has no SA_RESTART interrupts `read` (on a
/// socket with a timeout, on a pipe), `accept` and `send` waiting in a
/// fiber (EINTR), as it does glibc's.
#[test]
fn eintr_read_accept_send() {
    differential(
        "eintr_read_accept_send",
        vec![
            Function::new(
                "read",
                eintr::socket_cases(&[SockWait::Read, SockWait::ReadPipe]),
            ),
            Function::new("accept", eintr::socket_cases(&[SockWait::Accept])),
            Function::new("send", eintr::socket_cases(&[SockWait::Send])),
        ],
    );
}
