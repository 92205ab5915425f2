//! `Receiver::ready_fd`: a plain thread (no runtime) waits on a channel
//! with its own `poll(2)` or epoll, level- and edge-triggered, while
//! threads, fibers of a current-thread runtime and worker fibers send; no
//! wait times out while a message is pending, and a drain leaves the fd
//! clear. Every flavor: the list (`unbounded`), the ring (`bounded(n)`),
//! the rendezvous (`bounded(0)`) and the locked buffered channel (a ring
//! too large to allocate up front).

use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fibra::channel::{ReadyFd, Receiver, Sender, TryRecvError, bounded, unbounded};

/// A wait that must not time out while a message is pending: long, so
/// that a loaded VM never fails it, and a lost wake-up still does.
const PATIENCE_MS: i32 = 10_000;

/// Makes a channel of one flavor.
type Make = fn() -> (Sender<u64>, Receiver<u64>);

/// The flavors, by name.
const FLAVORS: &[(&str, Make)] = &[
    ("unbounded", unbounded),
    ("bounded(4)", || bounded(4)),
    ("bounded(1)", || bounded(1)),
    ("bounded(0)", || bounded(0)),
    // A ring of this many slots would take more than 64 MiB: the locked
    // channel, buffered.
    ("bounded(huge)", || bounded(1 << 30)),
];

/// Whether `fd` is readable within `ms` (level: `poll(2)`).
fn readable(fd: RawFd, ms: i32) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n >= 0 {
            return n == 1;
        }
        assert_eq!(
            std::io::Error::last_os_error().kind(),
            std::io::ErrorKind::Interrupted
        );
    }
}

/// How the outer loop waits on the fd.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// `poll(2)`.
    Level,
    /// epoll with `EPOLLET`.
    Edge,
}

/// An outer loop's waiting: `poll` on the fd, or an epoll set holding it
/// edge-triggered.
struct Watcher {
    fd: RawFd,
    epoll: Option<RawFd>,
}

impl Watcher {
    fn new(fd: RawFd, mode: Mode) -> Watcher {
        let epoll = match mode {
            Mode::Level => None,
            Mode::Edge => Some(epoll_with(&[fd])),
        };
        Watcher { fd, epoll }
    }

    /// Whether an event came within `ms`.
    fn wait(&self, ms: i32) -> bool {
        match self.epoll {
            None => readable(self.fd, ms),
            Some(ep) => epoll_wait(ep, ms) > 0,
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        if let Some(ep) = self.epoll {
            // SAFETY: our epoll fd, closed once.
            unsafe { libc::close(ep) };
        }
    }
}

/// A new epoll set with `fds` added edge-triggered for reading, each with
/// its index as the event's data.
fn epoll_with(fds: &[RawFd]) -> RawFd {
    // SAFETY: a new epoll fd, closed by the caller.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    assert!(ep >= 0);
    for (i, &fd) in fds.iter().enumerate() {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: i as u64,
        };
        // SAFETY: valid fds and event.
        let rc = unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
    }
    ep
}

/// The number of events `epoll_wait` gave within `ms` (retried on EINTR).
fn epoll_wait(ep: RawFd, ms: i32) -> usize {
    let mut got = [libc::epoll_event { events: 0, u64: 0 }; 8];
    loop {
        // SAFETY: a valid buffer of 8 events.
        let n = unsafe { libc::epoll_wait(ep, got.as_mut_ptr(), 8, ms) };
        if n >= 0 {
            return n as usize;
        }
        assert_eq!(
            std::io::Error::last_os_error().kind(),
            std::io::ErrorKind::Interrupted
        );
    }
}

/// Where the messages come from.
#[derive(Clone, Copy, Debug)]
enum Feed {
    /// Plain threads.
    Threads,
    /// Fibers of a current-thread runtime that another thread runs.
    Fibers,
    /// Fibers of a runtime of two workers.
    Workers,
}

const SENDERS: u64 = 4;

/// Starts `SENDERS` senders of `per` messages each: sender `k` sends
/// `k << 32 | i` for `i` in order. Every sender is gone once the returned
/// thread has ended.
fn start_senders(s: Sender<u64>, per: u64, from: Feed) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || match from {
        Feed::Threads => {
            let threads: Vec<_> = (0..SENDERS)
                .map(|k| {
                    let s = s.clone();
                    std::thread::spawn(move || {
                        for i in 0..per {
                            s.send(k << 32 | i).unwrap();
                        }
                    })
                })
                .collect();
            drop(s);
            for t in threads {
                t.join().unwrap();
            }
        }
        Feed::Fibers => {
            let rt = fibra::Runtime::new().unwrap();
            for k in 0..SENDERS {
                let s = s.clone();
                rt.spawn(move || {
                    for i in 0..per {
                        s.send(k << 32 | i).unwrap();
                        if i % 64 == 0 {
                            fibra::yield_now();
                        }
                    }
                });
            }
            drop(s);
            rt.run();
        }
        Feed::Workers => {
            let rt = fibra::runtime::Builder::new().workers(2).build().unwrap();
            let fibers: Vec<_> = (0..SENDERS)
                .map(|k| {
                    let s = s.clone();
                    rt.spawn(move || {
                        for i in 0..per {
                            s.send(k << 32 | i).unwrap();
                        }
                    })
                })
                .collect();
            drop(s);
            for f in fibers {
                f.join().unwrap();
            }
        }
    })
}

/// The outer loop: waits on the fd, drains with `try_recv` until `Empty`,
/// until the channel is disconnected; checks each sender's messages come
/// in order and all of them. No wait may time out while messages are
/// still to come (every sender sends until it is done).
fn serve(r: &Receiver<u64>, ready: &ReadyFd<u64>, mode: Mode, per: u64, what: &str) {
    let watcher = Watcher::new(ready.as_raw_fd(), mode);
    let mut next = vec![0u64; SENDERS as usize];
    let mut got = 0u64;
    'serve: loop {
        assert!(
            watcher.wait(PATIENCE_MS),
            "{what}: no readiness in {PATIENCE_MS} ms with {got} of {} messages in",
            SENDERS * per
        );
        loop {
            match r.try_recv() {
                Ok(m) => {
                    let (k, i) = ((m >> 32) as usize, m & 0xffff_ffff);
                    assert_eq!(i, next[k], "{what}: sender {k} out of order");
                    next[k] += 1;
                    got += 1;
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => break 'serve,
            }
        }
    }
    assert_eq!(got, SENDERS * per, "{what}: messages lost");
}

/// Every flavor, served by a plain thread in `mode`, fed from `from`.
fn every_flavor(mode: Mode, from: Feed, per: u64) {
    for &(name, make) in FLAVORS {
        let (s, r) = make();
        let ready = r.ready_fd().unwrap();
        let senders = start_senders(s, per, from);
        serve(
            &r,
            &ready,
            mode,
            per,
            &format!("{name}, {mode:?}, {from:?}"),
        );
        senders.join().unwrap();
    }
}

#[test]
fn level_poll_sees_every_message_from_threads() {
    every_flavor(Mode::Level, Feed::Threads, 2000);
}

#[test]
fn edge_epoll_sees_every_message_from_threads() {
    every_flavor(Mode::Edge, Feed::Threads, 2000);
}

#[test]
fn level_poll_sees_every_message_from_fibers_of_another_thread() {
    every_flavor(Mode::Level, Feed::Fibers, 2000);
}

#[test]
fn edge_epoll_sees_every_message_from_fibers_of_another_thread() {
    every_flavor(Mode::Edge, Feed::Fibers, 2000);
}

#[test]
fn level_poll_sees_every_message_from_worker_fibers() {
    every_flavor(Mode::Level, Feed::Workers, 2000);
}

#[test]
fn edge_epoll_sees_every_message_from_worker_fibers() {
    every_flavor(Mode::Edge, Feed::Workers, 2000);
}

/// The race the re-arm closes: a message sent between the drain's last
/// `try_recv` and the clearing of the fd. Each of several sender threads
/// keeps one message in flight (it waits for the loop's reply before the
/// next), after a random pause, so that sends land at every point of the
/// loop's drain and re-arm; a message whose wake-up were lost would leave
/// every sender waiting, and the loop's wait would time out.
fn race(mode: Mode, rounds: u64) {
    const RACERS: usize = 6;
    for &(name, make) in FLAVORS {
        let (s, r) = make();
        let ready = r.ready_fd().unwrap();
        let (replies, racers): (Vec<_>, Vec<_>) = (0..RACERS)
            .map(|k| {
                let (reply, replied) = std::sync::mpsc::channel::<()>();
                let s = s.clone();
                let racer = std::thread::spawn(move || {
                    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ (k as u64 + 1);
                    for i in 0..rounds {
                        // xorshift: a pause of 0 to ~1 000 spins.
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        for _ in 0..seed % 1024 {
                            std::hint::spin_loop();
                        }
                        s.send((k as u64) << 32 | i).unwrap();
                        replied.recv().unwrap();
                    }
                });
                (reply, racer)
            })
            .unzip();
        drop(s);
        let watcher = Watcher::new(ready.as_raw_fd(), mode);
        let mut got = 0;
        'serve: loop {
            assert!(
                watcher.wait(PATIENCE_MS),
                "{name}, {mode:?}: a wake-up was lost ({got} of {} served)",
                RACERS as u64 * rounds
            );
            loop {
                match r.try_recv() {
                    Ok(m) => {
                        got += 1;
                        replies[(m >> 32) as usize].send(()).unwrap();
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => break 'serve,
                }
            }
        }
        assert_eq!(got, RACERS as u64 * rounds);
        for racer in racers {
            racer.join().unwrap();
        }
    }
}

#[test]
fn a_message_sent_during_the_rearm_keeps_the_fd_readable_level() {
    race(Mode::Level, 3000);
}

#[test]
fn a_message_sent_during_the_rearm_gives_a_new_edge() {
    race(Mode::Edge, 3000);
}

#[test]
fn a_drain_leaves_the_fd_clear_and_a_send_makes_it_readable_again() {
    for &(name, make) in FLAVORS {
        let (s, r) = make();
        let ready = r.ready_fd().unwrap();
        let fd = ready.as_raw_fd();
        assert!(!readable(fd, 0), "{name}: readable with nothing sent");
        // Three rounds: the fd follows the channel each time.
        for round in 0..3u64 {
            let sent = if name == "bounded(0)" {
                // A rendezvous holds nothing: a sender waits to hand over.
                let s = s.clone();
                let t = std::thread::spawn(move || s.send(round).unwrap());
                assert!(readable(fd, PATIENCE_MS), "{name}: a waiting sender");
                assert_eq!(r.try_recv(), Ok(round));
                t.join().unwrap();
                1
            } else {
                // Up to three, as many as the channel holds.
                let n = r.capacity().map_or(3, |c| c.min(3) as u64);
                for i in 0..n {
                    s.send(round * 10 + i).unwrap();
                }
                assert!(readable(fd, 0), "{name}: {n} messages in");
                for i in 0..n {
                    assert_eq!(r.try_recv(), Ok(round * 10 + i));
                }
                n
            };
            assert!(sent > 0);
            // The fd may stay readable until the drain sees `Empty`.
            assert_eq!(r.try_recv(), Err(TryRecvError::Empty));
            assert!(!readable(fd, 0), "{name}: readable after a drain");
        }
    }
}

#[test]
fn the_disconnection_makes_the_fd_readable_and_keeps_it_so() {
    for &(name, make) in FLAVORS {
        for leftover in [false, true] {
            if leftover && name == "bounded(0)" {
                continue; // a rendezvous keeps no message
            }
            let (s, r) = make();
            let ready = r.ready_fd().unwrap();
            if leftover {
                s.send(7).unwrap();
                assert!(readable(ready.as_raw_fd(), 0));
            }
            let dropper = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                drop(s);
            });
            if leftover {
                assert_eq!(r.try_recv(), Ok(7));
            }
            assert!(
                readable(ready.as_raw_fd(), PATIENCE_MS),
                "{name}: the last sender left, the fd stayed clear"
            );
            dropper.join().unwrap();
            assert_eq!(r.try_recv(), Err(TryRecvError::Disconnected));
            // Level: readable for good, as a socket at its end.
            assert!(readable(ready.as_raw_fd(), 0), "{name}: cleared");
            assert_eq!(r.try_recv(), Err(TryRecvError::Disconnected));
        }
    }
}

#[test]
fn a_rendezvous_is_readable_while_a_sender_waits_to_hand_over() {
    let (s, r) = bounded::<u32>(0);
    let ready = r.ready_fd().unwrap();
    let fd = ready.as_raw_fd();
    assert!(!readable(fd, 0));
    // A plain send that waits, from a thread.
    let handed = Arc::new(AtomicBool::new(false));
    let (s2, h) = (s.clone(), handed.clone());
    let t = std::thread::spawn(move || {
        s2.send(1).unwrap();
        h.store(true, Ordering::SeqCst);
    });
    assert!(readable(fd, PATIENCE_MS));
    assert!(
        !handed.load(Ordering::SeqCst),
        "a rendezvous send went alone"
    );
    assert_eq!(r.try_recv(), Ok(1));
    t.join().unwrap();
    assert!(handed.load(Ordering::SeqCst));
    assert_eq!(r.try_recv(), Err(TryRecvError::Empty));
    assert!(!readable(fd, 0));

    // A `select!` send (its message made only once chosen), from a fiber of
    // a runtime on another thread; the outer loop's `try_recv` pairs with it.
    let t = std::thread::spawn(move || {
        fibra::run(move || {
            fibra::select! {
                send(s, 2) -> sent => sent.unwrap(),
                default(Duration::from_secs(30)) => panic!("no receiver came"),
            }
        })
    });
    assert!(readable(fd, PATIENCE_MS), "a select's send waits");
    let mut got = None;
    while got.is_none() {
        match r.try_recv() {
            Ok(v) => got = Some(v),
            // The send is registered, but its fiber may be between arms.
            Err(TryRecvError::Empty) => assert!(readable(fd, PATIENCE_MS)),
            Err(TryRecvError::Disconnected) => panic!("disconnected first"),
        }
    }
    assert_eq!(got, Some(2));
    t.join().unwrap();
}

#[test]
fn every_ready_fd_of_a_channel_is_one_fd_and_the_last_drop_closes_it() {
    let (s, r) = unbounded::<u8>();
    let r2 = r.clone();
    let a = r.ready_fd().unwrap();
    let b = r2.ready_fd().unwrap();
    let c = r.ready_fd().unwrap();
    assert_eq!(a.as_raw_fd(), b.as_raw_fd());
    assert_eq!(a.as_raw_fd(), c.as_raw_fd());
    let fd = a.as_raw_fd();
    drop(a);
    drop(c);
    // One left: it still follows the channel, whichever receiver drains.
    s.send(1).unwrap();
    assert!(readable(fd, 0));
    assert_eq!(r.try_recv(), Ok(1));
    assert_eq!(r2.try_recv(), Err(TryRecvError::Empty));
    assert!(!readable(fd, 0));
    drop(b);
    // SAFETY: only asks whether `fd` is open (F_GETFD changes nothing).
    let open = unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1;
    assert!(!open, "the last ReadyFd closes its fd");
    // Senders and receivers work on, without an fd.
    s.send(2).unwrap();
    assert_eq!(r2.try_recv(), Ok(2));
    assert_eq!(r.try_recv(), Err(TryRecvError::Empty));
    // A new one starts readable when the channel has messages.
    s.send(3).unwrap();
    let d = r.ready_fd().unwrap();
    assert!(readable(d.as_raw_fd(), 0));
    assert_eq!(r.try_recv(), Ok(3));
    assert_eq!(r.try_recv(), Err(TryRecvError::Empty));
    assert!(!readable(d.as_raw_fd(), 0));
}

#[test]
fn a_ready_fd_outlives_the_receivers_and_says_disconnected() {
    let (s, r) = bounded::<u8>(2);
    let ready = r.ready_fd().unwrap();
    drop(r);
    assert!(readable(ready.as_raw_fd(), 0), "every receiver gone");
    assert!(s.send(1).is_err());
}

#[test]
fn never_is_never_readable_and_timers_have_no_fd() {
    let r = fibra::channel::never::<u8>();
    let ready = r.ready_fd().unwrap();
    assert!(!readable(ready.as_raw_fd(), 20));
    for timer in [
        fibra::channel::after(Duration::from_millis(1)),
        fibra::channel::tick(Duration::from_millis(1)),
    ] {
        let err = timer.ready_fd().unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::Unsupported);
    }
}

#[test]
fn a_ready_fd_crosses_threads_as_its_channel_does() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<ReadyFd<u64>>();
    send_sync::<ReadyFd<Vec<String>>>();
}

/// A receiver shared with fibers of another thread (MPMC): each message is
/// taken once, by one side or the other; the outer loop never waits in
/// vain while messages are due to it, and ends on the disconnection.
#[test]
fn a_cloned_receiver_in_fibers_shares_the_messages() {
    for &(name, make) in FLAVORS {
        let (s, r) = make();
        let ready = r.ready_fd().unwrap();
        let r2 = r.clone();
        let fibers = std::thread::spawn(move || {
            fibra::run(move || {
                let takers: Vec<_> = (0..2)
                    .map(|_| {
                        let r2 = r2.clone();
                        fibra::spawn(move || r2.iter().count() as u64)
                    })
                    .collect();
                drop(r2);
                takers.into_iter().map(|t| t.join().unwrap()).sum::<u64>()
            })
        });
        let senders = start_senders(s, 2000, Feed::Threads);
        let mut outer = 0u64;
        'serve: loop {
            assert!(readable(ready.as_raw_fd(), PATIENCE_MS), "{name}");
            loop {
                match r.try_recv() {
                    Ok(_) => outer += 1,
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => break 'serve,
                }
            }
        }
        senders.join().unwrap();
        let inner = fibers.join().unwrap();
        assert_eq!(outer + inner, SENDERS * 2000, "{name}");
    }
}

/// The loop of the guide: one outer epoll, edge-triggered, on the
/// runtime's fd and a channel's, the channel fed by the runtime's own
/// fibers (in bursts, with pauses on timers); the loop turns the runtime
/// and handles the messages itself. No wait times out while fibers live
/// or messages are due.
#[test]
fn an_outer_loop_waits_on_the_runtime_and_a_channel_its_fibers_feed() {
    for &(name, make) in FLAVORS {
        let rt = fibra::Runtime::new().unwrap();
        let (s, r) = make();
        let ready = r.ready_fd().unwrap();
        for k in 0..SENDERS {
            let s = s.clone();
            rt.spawn(move || {
                for i in 0..200u64 {
                    s.send(k << 32 | i).unwrap();
                    if i % 50 == 49 {
                        fibra::sleep(Duration::from_millis(2));
                    }
                }
            });
        }
        drop(s);
        let ep = epoll_with(&[rt.as_raw_fd(), ready.as_raw_fd()]);
        let mut next = [0u64; SENDERS as usize];
        let mut got = 0;
        let mut disconnected = false;
        // The runtime may have work before any edge: one turn first.
        rt.turn(Some(Duration::ZERO));
        while !disconnected {
            assert!(
                epoll_wait(ep, PATIENCE_MS) > 0,
                "{name}: no event in {PATIENCE_MS} ms, {got} messages in, {} fibers",
                rt.fibers()
            );
            // Both, whichever woke: cheap when idle.
            rt.turn(Some(Duration::ZERO));
            loop {
                match r.try_recv() {
                    Ok(m) => {
                        let (k, i) = ((m >> 32) as usize, m & 0xffff_ffff);
                        assert_eq!(i, next[k]);
                        next[k] += 1;
                        got += 1;
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        disconnected = true;
                        break;
                    }
                }
            }
        }
        assert_eq!(got, SENDERS * 200, "{name}");
        assert_eq!(rt.fibers(), 0, "{name}");
        // SAFETY: our epoll fd, closed once.
        unsafe { libc::close(ep) };
    }
}
