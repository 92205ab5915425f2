//! A signal whose handler has no `SA_RESTART` interrupts a waiting call
//! (`EINTR`) in a fiber, as it does glibc's: each case waits (an idle
//! fd, a sleep, a socket timeout of [`WAIT_MS`]) while a thread sends
//! SIGUSR1 50 ms in.

use std::mem;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use libc::{c_int, c_void, epoll_event, iovec, msghdr, pollfd, sighandler_t, timespec, timeval};

use crate::api::Api;
use crate::epoll::{EpFn, ew_idle_quiet};
use crate::harness::{Case, Record, case};
use crate::mem::Buf;
use crate::net::{fill, listener, pipe, tcp_pair, timeo, unix_pair};
use crate::poll::pw_idle_quiet;
use crate::select::{AT_IDLE, fd_set_of, select_world};
use crate::signals::action;
use crate::sys::{Fds, call, elapsed_ms, raw_write};

/// How many times the EINTR handler ran.
pub(crate) static EINTR_HITS: AtomicUsize = AtomicUsize::new(0);

pub(crate) extern "C" fn on_sigusr1(_: c_int) {
    EINTR_HITS.fetch_add(1, Ordering::SeqCst);
}

/// How long an EINTR case's call waits unless interrupted.
pub(crate) const WAIT_MS: i64 = 1000;

/// When the signal comes: long enough that the call is waiting by then on
/// a loaded machine (three child processes at once, each a runtime), well
/// before 3/4 of [`WAIT_MS`], which tells an interrupted call.
const SIGNAL_AFTER_MS: u64 = 250;

/// [`WAIT_MS`] as a timespec.
fn wait_ts() -> timespec {
    timespec {
        tv_sec: WAIT_MS / 1000,
        tv_nsec: 0,
    }
}

/// Makes `call` (which waits [`WAIT_MS`] unless interrupted) with a
/// handler without SA_RESTART for SIGUSR1 (installed through `api`), and
/// a thread that sends SIGUSR1 to this thread (in a fiber: the thread
/// running its runtime) [`SIGNAL_AFTER_MS`] in, then runs `release` if
/// the call has not returned within 2 s (to end a wait that has no
/// timeout).
pub(crate) fn interrupted(
    api: &Api,
    release: Option<Box<dyn FnOnce() + Send>>,
    call: impl FnOnce() -> Record,
) -> Record {
    let a = action(on_sigusr1 as *const () as sighandler_t, 0, &[]);
    // SAFETY: a valid action whose handler only counts.
    unsafe { (api.sigaction)(libc::SIGUSR1, &a, ptr::null_mut()) };
    let target = libc_pthread_self();
    let before = EINTR_HITS.load(Ordering::SeqCst);
    let (done, wait) = mpsc::channel::<()>();
    let killer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(SIGNAL_AFTER_MS));
        // SAFETY: the target thread waits for this thread to end (join
        // below) before it goes on, so it is alive.
        unsafe { libc::pthread_kill(target, libc::SIGUSR1) };
        if wait.recv_timeout(Duration::from_millis(2000)).is_err()
            && let Some(r) = release
        {
            r();
        }
    });
    let t = Instant::now();
    let rec = call();
    let took = elapsed_ms(t);
    let _ = done.send(());
    killer.join().unwrap();
    rec.int("handler_runs", EINTR_HITS.load(Ordering::SeqCst) - before)
        .flag(
            "returned_before_its_timeout",
            took < (WAIT_MS as u128) * 3 / 4,
        )
}

pub(crate) fn libc_pthread_self() -> libc::pthread_t {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() }
}

pub(crate) fn eintr_select(api: &Api) -> Record {
    let world = select_world();
    let set = fd_set_of(AT_IDLE);
    let tv = Buf::of(&timeval {
        tv_sec: WAIT_MS / 1000,
        tv_usec: 0,
    });
    let rec = interrupted(api, None, || {
        // SAFETY: our set and timeval.
        let (r, e) = call(|| unsafe {
            (api.select)(
                AT_IDLE + 1,
                set.cast(),
                ptr::null_mut(),
                ptr::null_mut(),
                tv.cast(),
            )
        });
        Record::new(r, e)
    });
    drop(world);
    rec
}

pub(crate) fn eintr_pselect(api: &Api) -> Record {
    let world = select_world();
    let set = fd_set_of(AT_IDLE);
    let ts = wait_ts();
    let rec = interrupted(api, None, || {
        // SAFETY: our set and timespec.
        let (r, e) = call(|| unsafe {
            (api.pselect)(
                AT_IDLE + 1,
                set.cast(),
                ptr::null_mut(),
                ptr::null_mut(),
                &ts,
                ptr::null(),
            )
        });
        Record::new(r, e)
    });
    drop(world);
    rec
}

pub(crate) fn eintr_poll(api: &Api, p: bool) -> Record {
    let w = pw_idle_quiet();
    let mut pfd = pollfd {
        fd: w.entries[0].0,
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = wait_ts();
    interrupted(api, None, || {
        // SAFETY: one pollfd of ours, our timespec.
        let (r, e) = call(|| unsafe {
            if p {
                (api.ppoll)(&mut pfd, 1, &ts, ptr::null())
            } else {
                (api.poll)(&mut pfd, 1, WAIT_MS as c_int)
            }
        });
        Record::new(r, e)
    })
}

pub(crate) fn eintr_epoll(api: &Api, which: EpFn) -> Record {
    let w = ew_idle_quiet();
    let mut ev = [epoll_event { events: 0, u64: 0 }; 4];
    let ts = wait_ts();
    interrupted(api, None, || {
        // SAFETY: room for 4 events, our timespec.
        let (r, e) = call(|| unsafe {
            match which {
                EpFn::Wait => (api.epoll_wait)(w.epfd, ev.as_mut_ptr(), 4, WAIT_MS as c_int),
                EpFn::Pwait => {
                    (api.epoll_pwait)(w.epfd, ev.as_mut_ptr(), 4, WAIT_MS as c_int, ptr::null())
                }
                EpFn::Pwait2 => (api.epoll_pwait2)(w.epfd, ev.as_mut_ptr(), 4, &ts, ptr::null()),
            }
        });
        Record::new(r, e)
    })
}

pub(crate) fn eintr_sleep(api: &Api, clock: bool) -> Record {
    let req = wait_ts();
    let mut rem = timespec {
        tv_sec: -1,
        tv_nsec: -1,
    };
    interrupted(api, None, || {
        // SAFETY: our timespecs.
        let (r, e) = call(|| unsafe {
            if clock {
                (api.clock_nanosleep)(libc::CLOCK_MONOTONIC, 0, &req, &mut rem)
            } else {
                (api.nanosleep)(&req, &mut rem)
            }
        });
        let left = rem.tv_sec as i128 * 1_000_000 + rem.tv_nsec as i128 / 1000;
        Record::new(r, e).approx("rem_us", left.max(0), WAIT_MS as i128 * 1000)
    })
}

/// The socket calls: each waits on an idle socket with a SO_RCVTIMEO (or
/// SO_SNDTIMEO) of [`WAIT_MS`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum SockWait {
    Read,
    Recv,
    Recvfrom,
    Recvmsg,
    Accept,
    Send,
    ReadPipe,
}

impl SockWait {
    /// The name of its case.
    fn case_name(self) -> &'static str {
        match self {
            SockWait::Accept => "no connection, SO_RCVTIMEO 1 s",
            SockWait::Send => "a full unix socket, SO_SNDTIMEO 1 s",
            SockWait::ReadPipe => "an idle pipe (written to after 1.5 s)",
            SockWait::Read | SockWait::Recv | SockWait::Recvfrom | SockWait::Recvmsg => {
                "idle tcp, SO_RCVTIMEO 1 s"
            }
        }
    }
}

pub(crate) fn eintr_socket(api: &Api, kind: SockWait) -> Record {
    let mut f = Fds::default();
    let mut b = [0u8; 64];
    let bp = b.as_mut_ptr().cast::<c_void>();
    let rec = match kind {
        SockWait::Accept => {
            let (l, _) = listener(&mut f);
            timeo(l, libc::SO_RCVTIMEO, WAIT_MS);
            interrupted(api, None, || {
                // SAFETY: no address wanted.
                let (r, e) = call(|| unsafe { (api.accept)(l, ptr::null_mut(), ptr::null_mut()) });
                Record::new(r, e)
            })
        }
        SockWait::Send => {
            let (a, _) = unix_pair(&mut f, libc::SOCK_STREAM);
            fill(a);
            timeo(a, libc::SO_SNDTIMEO, WAIT_MS);
            interrupted(api, None, || {
                // SAFETY: our buffer.
                let (r, e) = call(|| unsafe { (api.send)(a, bp, b.len(), 0) });
                Record::new(r, e)
            })
        }
        SockWait::ReadPipe => {
            let (r, w) = pipe(&mut f);
            let release: Box<dyn FnOnce() + Send> = Box::new(move || {
                raw_write(w, b"released");
            });
            interrupted(api, Some(release), || {
                // SAFETY: our buffer.
                let (n, e) = call(|| unsafe { (api.read)(r, bp, 64) });
                Record::new(n, e)
            })
        }
        _ => {
            let (c, _) = tcp_pair(&mut f);
            timeo(c, libc::SO_RCVTIMEO, WAIT_MS);
            // SAFETY: all-zero is a valid msghdr.
            let mut m: msghdr = unsafe { mem::zeroed() };
            let mut iov = iovec {
                iov_base: bp,
                iov_len: 64,
            };
            m.msg_iov = &mut iov;
            m.msg_iovlen = 1;
            interrupted(api, None, || {
                // SAFETY: our buffer and msghdr.
                let (r, e) = call(|| unsafe {
                    match kind {
                        SockWait::Read => (api.read)(c, bp, 64),
                        SockWait::Recv => (api.recv)(c, bp, 64, 0),
                        SockWait::Recvfrom => {
                            (api.recvfrom)(c, bp, 64, 0, ptr::null_mut(), ptr::null_mut())
                        }
                        _ => (api.recvmsg)(c, &mut m, 0),
                    }
                });
                Record::new(r, e)
            })
        }
    };
    drop(f);
    rec
}

pub(crate) fn select_cases() -> Vec<Case> {
    vec![case("an idle pipe, 1 s", eintr_select)]
}

pub(crate) fn pselect_cases() -> Vec<Case> {
    vec![case("an idle pipe, 1 s", eintr_pselect)]
}

/// `poll`'s case, or (`ppoll`) ppoll's.
pub(crate) fn poll_cases(ppoll: bool) -> Vec<Case> {
    vec![case("an idle pipe, 1 s", move |api| eintr_poll(api, ppoll))]
}

pub(crate) fn epoll_cases(which: EpFn) -> Vec<Case> {
    vec![case("an idle pipe, 1 s", move |api| {
        eintr_epoll(api, which)
    })]
}

pub(crate) fn nanosleep_cases() -> Vec<Case> {
    vec![case("1 s", |api| eintr_sleep(api, false))]
}

pub(crate) fn clock_nanosleep_cases() -> Vec<Case> {
    vec![case("monotonic, 1 s", |api| eintr_sleep(api, true))]
}

/// A case for each of `kinds`.
pub(crate) fn socket_cases(kinds: &[SockWait]) -> Vec<Case> {
    kinds
        .iter()
        .map(|&kind| case(kind.case_name(), move |api| eintr_socket(api, kind)))
        .collect()
}
