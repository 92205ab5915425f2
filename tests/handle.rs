//! `fibra::runtime::Handle`: the running runtime reached from its fibers and
//! from other threads, on both flavors — count, metrics, dump and spawn.

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fibra::runtime::Handle;

fn assert_send_sync_clone<T: Send + Sync + Clone>() {}

#[test]
fn a_handle_is_clone_send_and_sync() {
    assert_send_sync_clone::<Handle>();
}

#[test]
fn outside_a_runtime_there_is_no_current_handle() {
    assert!(Handle::try_current().is_none());
    let err = std::panic::catch_unwind(Handle::current).unwrap_err();
    let msg = err
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| err.downcast_ref::<String>().cloned())
        .unwrap();
    assert!(msg.contains("outside a fibra runtime"), "{msg}");
    // Nor on the owner's thread outside block_on: the runtime is not entered.
    let _rt = fibra::Runtime::new().unwrap();
    assert!(Handle::try_current().is_none());
}

#[test]
fn from_a_fiber_it_counts_dumps_and_spawns() {
    let rt = fibra::Runtime::new().unwrap();
    rt.block_on(|| {
        let handle = Handle::current();
        let sleepers: Vec<_> = (0..3)
            .map(|i| {
                fibra::Builder::new()
                    .name(format!("sleeper-{i}"))
                    .spawn(|| fibra::sleep(Duration::from_millis(200)))
                    .unwrap()
            })
            .collect();
        fibra::yield_now();
        assert_eq!(handle.fibers(), 3);
        let m = &handle.metrics()[0];
        assert_eq!((m.alive, m.parked), (3, 3));
        let dump = handle.dump().to_string();
        for i in 0..3 {
            assert!(dump.contains(&format!("\"sleeper-{i}\"")), "{dump}");
        }
        // A spawn from the runtime's own thread starts as fibra::spawn does.
        let h = handle.spawn(|| fibra::current().id());
        assert_eq!(handle.fibers(), 4);
        let id = h.join().unwrap();
        assert_ne!(id, fibra::current().id());
        for s in sleepers {
            s.join().unwrap();
        }
        assert_eq!(handle.fibers(), 0);
    });
}

#[test]
fn a_thread_spawns_onto_a_current_thread_runtime_and_wakes_it() {
    let rt = fibra::Runtime::new().unwrap();
    let handle = rt.handle();
    let thread = std::thread::current().id();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let h = std::thread::spawn(move || {
        handle.spawn(move || {
            r.fetch_add(1, Ordering::SeqCst);
            std::thread::current().id()
        })
    })
    .join()
    .unwrap();
    // Nothing runs until the runtime is driven, but its fd says it has work.
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    let mut pfd = libc::pollfd {
        fd: rt.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut pfd, 1, 10_000) };
    assert_eq!(
        n, 1,
        "the runtime's fd is not readable after a spawn from a thread"
    );
    rt.turn(Some(Duration::ZERO));
    // The fiber started on the runtime's own thread.
    assert_eq!(rt.block_on(|| h.join().unwrap()), thread);
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[test]
fn a_thread_blocked_on_a_join_sees_the_fiber_it_sent_finish() {
    // The runtime sleeps in turn(None) on its thread; another thread sends
    // fibers and joins them, blocking, while it is driven.
    let rt = fibra::Runtime::new().unwrap();
    let handle = rt.handle();
    let sender = std::thread::spawn(move || {
        let sum: u64 = (0..100u64)
            .map(|i| handle.spawn(move || i))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .sum();
        // Seen from this thread: the figures the runtime last published.
        (sum, handle.fibers())
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while !sender.is_finished() {
        assert!(Instant::now() < deadline, "the sender's fibers never ran");
        rt.turn(Some(Duration::from_millis(10)));
    }
    let (sum, _) = sender.join().unwrap();
    assert_eq!(sum, 4950);
}

#[test]
fn a_dump_asked_from_a_thread_is_answered_while_the_runtime_runs() {
    let rt = fibra::Runtime::new().unwrap();
    let handle = rt.handle();
    rt.block_on(|| {
        let (tx, rx) = fibra::channel::bounded::<()>(0);
        let waiter = fibra::Builder::new()
            .name("waiter".into())
            .spawn(move || rx.recv())
            .unwrap();
        fibra::yield_now();
        let asker = std::thread::spawn(move || (handle.dump().to_string(), handle.fibers()));
        // Wait without blocking the thread, so the runtime can answer.
        while !asker.is_finished() {
            fibra::sleep(Duration::from_millis(1));
        }
        let (dump, fibers) = asker.join().unwrap();
        assert!(
            dump.contains("\"waiter\" [parked: channel receive]"),
            "{dump}"
        );
        assert_eq!(fibers, 1, "published at the runtime's polls");
        drop(tx);
        waiter.join().unwrap().unwrap_err();
    });
}

#[test]
fn after_the_runtime_is_dropped_a_spawn_says_cancelled() {
    let rt = fibra::Runtime::new().unwrap();
    let handle = rt.handle();
    // One sent before the drop, never driven: dropped with the runtime.
    let before = std::thread::scope(|s| s.spawn(|| handle.spawn(|| 1)).join().unwrap());
    drop(rt);
    assert!(before.join().unwrap_err().is_cancelled());
    let after = std::thread::spawn(move || handle.spawn(|| 2))
        .join()
        .unwrap();
    assert!(after.join().unwrap_err().is_cancelled());
}

#[test]
fn on_workers_it_works_from_a_fiber_and_from_a_thread() {
    let rt = fibra::Runtime::builder().workers(2).build().unwrap();
    let inside = rt.block_on(|| {
        let handle = Handle::current();
        assert_eq!(handle.metrics().len(), 2);
        handle
    });
    let outside = rt.handle();
    for handle in [inside, outside] {
        let hs: Vec<_> = (0..8)
            .map(|i| {
                let h = handle.clone();
                std::thread::spawn(move || h.spawn(move || i * 2))
                    .join()
                    .unwrap()
            })
            .collect();
        let sum: i32 = hs.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, 56);
        // Parked until released after the dump, however slow the machine.
        let (release, parked_on) = fibra::channel::bounded::<()>(0);
        let sleeper = handle.spawn(move || parked_on.recv());
        // A worker's figures are those it last published: a fiber whose
        // join has returned may still be counted until its worker frees its
        // record and publishes again. Wait for the figures to settle.
        let deadline = Instant::now() + Duration::from_secs(30);
        let parked = |h: &Handle| h.metrics().iter().map(|m| m.parked).sum::<usize>();
        while parked(&handle) < 1 || handle.fibers() != 1 {
            assert!(
                Instant::now() < deadline,
                "the figures never settle: {} parked, {} fibers",
                parked(&handle),
                handle.fibers()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let dump = handle.dump();
        assert!(dump.is_complete(), "{dump}");
        assert_eq!(dump.fibers().count(), 1, "{dump}");
        drop(release);
        sleeper.join().unwrap().unwrap_err();
    }
}

#[test]
fn a_drop_that_spawns_while_the_runtime_closes_does_not_hang() {
    // A job's closure is dropped unrun when the runtime goes; its Drop may
    // spawn onto the same runtime again (the queue's lock is not held).
    struct SpawnOnDrop(Handle);
    impl Drop for SpawnOnDrop {
        fn drop(&mut self) {
            let h = self.0.spawn(|| ());
            assert!(h.join().unwrap_err().is_cancelled());
        }
    }
    let rt = fibra::Runtime::new().unwrap();
    let handle = rt.handle();
    let on_drop = SpawnOnDrop(rt.handle());
    let h = std::thread::spawn(move || {
        handle.spawn(move || {
            let _keep = &on_drop;
        })
    })
    .join()
    .unwrap();
    drop(rt);
    assert!(h.join().unwrap_err().is_cancelled());
}
