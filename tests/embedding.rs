//! The contract an outer loop relies on: the runtime's fd never lies
//! (after `block_on`, after `spawn` from outside, for an edge-triggered
//! watcher with more events than one turn takes), `turn_with_budget`
//! bounds a turn and leaves the rest ready, `spawn` on the current-thread
//! runtime takes closures that are not `Send`, and `drop(rt)` returns even
//! when a fiber catches its cancellation while another is mid-unwind.

mod util;
mod warnings;

use std::cell::{Cell, RefCell};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use util::bounded;

/// Waits up to `ms` for `fd` to turn readable.
fn readable(fd: i32, ms: i32) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, ms) == 1 }
}

/// Fibers that `block_on` spawned, or woke, and left ready make the fd
/// readable: an outer loop waiting on it calls `turn` next. Before, it
/// slept its whole timeout with the work pending.
#[test]
fn the_fd_is_readable_after_block_on_leaves_ready_fibers() {
    let rt = fibra::Runtime::new().unwrap();
    let ran = Rc::new(Cell::new(false));
    let r = ran.clone();
    rt.block_on(|| {
        fibra::spawn(move || r.set(true));
    });
    assert!(!ran.get());
    assert!(
        readable(rt.as_raw_fd(), 1000),
        "a fiber is ready but the fd stayed quiet"
    );
    rt.turn(Some(Duration::ZERO));
    assert!(ran.get());
    // And quiet once nothing is left to do.
    assert!(!readable(rt.as_raw_fd(), 50), "nothing to do, yet readable");

    // A fiber woken inside `block_on` (parked before it, on a channel).
    let (tx, rx) = fibra::channel::unbounded::<u32>();
    let got = rt.spawn(move || rx.recv().unwrap());
    rt.turn(Some(Duration::ZERO)); // it parks on the channel
    assert!(!readable(rt.as_raw_fd(), 50));
    rt.block_on(|| tx.send(5).unwrap());
    assert!(
        readable(rt.as_raw_fd(), 1000),
        "a fiber woken in block_on is ready but the fd stayed quiet"
    );
    rt.turn(Some(Duration::ZERO));
    assert_eq!(rt.block_on(|| got.join().unwrap()), 5);
}

/// `spawn` from outside the runtime makes the fd readable.
#[test]
fn the_fd_is_readable_after_a_spawn_from_outside() {
    let rt = fibra::Runtime::new().unwrap();
    rt.spawn(|| ());
    rt.turn(Some(Duration::ZERO));
    assert!(!readable(rt.as_raw_fd(), 50));
    let h = rt.spawn(|| 3);
    assert!(readable(rt.as_raw_fd(), 1000));
    rt.turn(Some(Duration::ZERO));
    assert!(h.is_finished());
}

/// An outer epoll that watches the runtime's fd edge-triggered (mio's
/// way) hears of every event, though 3 000 sockets turn readable at once
/// and one turn takes at most 1 024 events: a turn that leaves events
/// behind gives the fd a new edge. Before, the outer wait slept its whole
/// timeout with the rest pending.
#[test]
fn an_edge_triggered_outer_watcher_hears_of_every_event() {
    bounded(Duration::from_secs(120), || {
        const N: usize = 3000;
        let rt = fibra::Runtime::new().unwrap();
        let mut peers = Vec::new();
        let done = Rc::new(Cell::new(0usize));
        for _ in 0..N {
            let (a, b) = fibra::net::UnixStream::pair().unwrap();
            let done = done.clone();
            rt.spawn(move || {
                let mut a = a;
                let mut byte = [0u8; 1];
                a.read_exact(&mut byte).unwrap();
                done.set(done.get() + 1);
            });
            peers.push(b);
        }
        // Every fiber parks on its socket (registered with the reactor).
        while rt.turn(Some(Duration::ZERO)) > 0 {}
        assert_eq!(done.get(), 0);
        // SAFETY: a new epoll instance, closed below.
        let outer = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: 1,
        };
        // SAFETY: valid fds and event.
        assert_eq!(
            unsafe { libc::epoll_ctl(outer, libc::EPOLL_CTL_ADD, rt.as_raw_fd(), &mut ev) },
            0
        );
        for p in &mut peers {
            p.write_all(b"x").unwrap();
        }
        let mut turns = 0;
        while done.get() < N {
            let mut got = [libc::epoll_event { events: 0, u64: 0 }; 4];
            // SAFETY: a valid buffer of 4 events.
            let n = unsafe { libc::epoll_wait(outer, got.as_mut_ptr(), 4, 5000) };
            assert!(
                n > 0,
                "{} of {N} fibers done after {turns} turns, and the edge-triggered \
                 outer wait heard nothing for 5 s",
                done.get()
            );
            rt.turn(Some(Duration::ZERO));
            turns += 1;
        }
        // SAFETY: our epoll fd, closed once.
        unsafe { libc::close(outer) };
        println!("{N} sockets in {turns} outer wake-ups");
    });
}

/// A budgeted turn stops resuming fibers once its budget has passed (it
/// never interrupts one), leaves the rest ready with the fd readable, and
/// the ones it left run first in the next turn.
#[test]
fn turn_with_budget_stops_between_fibers_and_leaves_the_rest_first() {
    let rt = fibra::Runtime::new().unwrap();
    let order = Rc::new(RefCell::new(Vec::new()));
    for i in 0..50 {
        let order = order.clone();
        rt.spawn(move || {
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(2) {} // 2 ms of work
            order.borrow_mut().push(i);
        });
    }
    let start = Instant::now();
    let ran = rt.turn_with_budget(Some(Duration::ZERO), Duration::from_millis(10));
    let took = start.elapsed();
    assert!(
        (1..50).contains(&ran),
        "a 10 ms budget resumed {ran} fibers of 2 ms"
    );
    // Generous: one fiber more than the budget holds, on a slow machine.
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(
        readable(rt.as_raw_fd(), 0),
        "fibers are left, yet the fd is quiet"
    );
    // A fiber spawned now goes behind the ones the budget left.
    let late = order.clone();
    rt.spawn(move || late.borrow_mut().push(99));
    let mut turns = 1;
    while rt.fibers() > 0 {
        rt.turn_with_budget(Some(Duration::ZERO), Duration::from_millis(10));
        turns += 1;
    }
    let mut expected: Vec<i32> = (0..50).collect();
    expected.push(99);
    assert_eq!(*order.borrow(), expected, "in {turns} turns");
}

/// A budget spent before the first fiber (here: none at all) still
/// resumes one per turn, so a loop whose turns all come late moves on.
#[test]
fn a_spent_budget_still_resumes_one_fiber_a_turn() {
    let rt = fibra::Runtime::new().unwrap();
    let ran = Rc::new(Cell::new(0));
    for _ in 0..3 {
        let ran = ran.clone();
        rt.spawn(move || ran.set(ran.get() + 1));
    }
    for turn in 1..=3 {
        assert_eq!(rt.turn_with_budget(Some(Duration::ZERO), Duration::ZERO), 1);
        assert_eq!(ran.get(), turn);
    }
    assert_eq!(rt.fibers(), 0);
}

/// A budget never starves I/O and timers: they are polled at the start of
/// every turn. A sleeper among fibers that always have work wakes on time.
#[test]
fn a_budget_never_starves_timers() {
    let rt = fibra::Runtime::new().unwrap();
    let stop = Rc::new(Cell::new(false));
    for _ in 0..20 {
        let stop = stop.clone();
        rt.spawn(move || {
            while !stop.get() {
                let start = Instant::now();
                while start.elapsed() < Duration::from_micros(500) {}
                fibra::yield_now();
            }
        });
    }
    let s = stop.clone();
    let sleeper = rt.spawn(move || {
        let start = Instant::now();
        fibra::sleep(Duration::from_millis(50));
        s.set(true);
        start.elapsed()
    });
    let start = Instant::now();
    while !sleeper.is_finished() {
        rt.turn_with_budget(Some(Duration::ZERO), Duration::from_millis(2));
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the sleeper starved"
        );
    }
    while rt.fibers() > 0 {
        rt.turn(Some(Duration::ZERO));
    }
    let slept = rt.block_on(|| sleeper.join().unwrap());
    assert!(slept >= Duration::from_millis(50), "{slept:?}");
}

/// The current-thread runtime's `spawn` takes a closure that is not `Send`.
#[test]
fn current_thread_spawn_takes_what_is_not_send() {
    let rt = fibra::Runtime::new().unwrap();
    let counter = Rc::new(Cell::new(0));
    for _ in 0..10 {
        let c = counter.clone();
        rt.spawn(move || c.set(c.get() + 1));
    }
    rt.run();
    assert_eq!(counter.get(), 10);
}

/// Something whose drop parks, as a graceful close does.
struct SlowClose(Arc<AtomicUsize>);

impl Drop for SlowClose {
    fn drop(&mut self) {
        fibra::sleep(Duration::from_millis(300));
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A fiber that catches its cancellation (an FFI boundary does) and parks
/// again is cancelled again, even while another fiber is suspended in the
/// middle of its own unwind (its destructor parks): `drop(rt)` returns,
/// and every destructor ran. Before, the catcher's second park was taken
/// for a destructor's and nothing cancelled it: the drop hung.
#[test]
fn drop_returns_when_a_fiber_catches_its_cancellation() {
    bounded(Duration::from_secs(60), || {
        let closed = Arc::new(AtomicUsize::new(0));
        let caught = Arc::new(AtomicUsize::new(0));
        let rt = fibra::Runtime::new().unwrap();
        // Cancelled first: its unwind parks in `SlowClose::drop`.
        let c = closed.clone();
        rt.spawn(move || {
            let _close = SlowClose(c);
            fibra::sleep(Duration::from_secs(3600));
        });
        // Catches the cancellation, then parks again.
        let k = caught.clone();
        rt.spawn(move || {
            let r = std::panic::catch_unwind(|| fibra::sleep(Duration::from_secs(3600)));
            assert!(r.is_err(), "the first park was not cancelled");
            drop(r);
            k.fetch_add(1, Ordering::SeqCst);
            fibra::sleep(Duration::from_secs(3600)); // cancelled again
            unreachable!("the second park returned");
        });
        rt.turn(Some(Duration::ZERO)); // both park
        let start = Instant::now();
        drop(rt);
        assert_eq!(caught.load(Ordering::SeqCst), 1);
        assert_eq!(
            closed.load(Ordering::SeqCst),
            1,
            "the slow close did not finish"
        );
        assert!(start.elapsed() < Duration::from_secs(30));
    });
}

/// A plain blocking call on the thread that owns a runtime with live
/// fibers, made outside the runtime, is told once it has blocked for the
/// runtime's `stall_warning`: here a `recv` whose sender is one of those
/// fibers, which cannot run. (Another thread ends the wait, so the test
/// does.)
#[test]
fn a_thread_that_blocks_its_own_runtime_is_told() {
    warnings::capture();
    let (tx, rx) = fibra::channel::unbounded::<u32>();
    let rescue = tx.clone();
    let rescuer = std::thread::spawn(move || {
        let seen = warnings::wait_for(
            "fibra::stall",
            &["blocks-own-runtime"],
            Duration::from_secs(20),
        );
        rescue.send(2).unwrap();
        seen
    });
    let owner = std::thread::Builder::new()
        .name("blocks-own-runtime".into())
        .spawn(move || {
            let rt = fibra::Runtime::builder()
                .stall_warning(Duration::from_millis(200))
                .build()
                .unwrap();
            rt.spawn(move || tx.send(1).unwrap()); // cannot run meanwhile
            let got = rx.recv().unwrap(); // blocks the runtime's own thread
            rt.run();
            (got, rx.recv().unwrap())
        })
        .unwrap();
    let (first, then) = owner.join().unwrap();
    let seen = rescuer.join().unwrap();
    assert_eq!((first, then), (2, 1), "the fiber cannot have sent first");
    assert!(!seen.is_empty(), "no warning");
    let w = &seen[0];
    assert_eq!(w.level, tracing::Level::WARN);
    assert!(w.fields.contains("1 live fibers"), "{w:?}");
    assert!(w.fields.contains("channel"), "{w:?}");
}
