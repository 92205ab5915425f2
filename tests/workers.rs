//! Runtimes of several workers: fibers spread over worker threads, never
//! migrate once started, unstarted ones are taken by idle workers, and
//! dropping the runtime unwinds what is left on every worker.

mod util;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use fibra::net::{TcpListener, TcpStream};
use fibra::runtime::Workers;
use util::SyncDropCount;

fn two_workers() -> fibra::Runtime<Workers> {
    fibra::Runtime::builder().workers(2).build().unwrap()
}

fn worker_name() -> String {
    thread::current().name().unwrap_or("?").to_owned()
}

/// Spins (without parking) until `flag` is set or `limit` passes: long
/// work that keeps a worker's thread busy.
fn busy_until(flag: &AtomicBool, limit: Duration) {
    let start = Instant::now();
    while !flag.load(Ordering::SeqCst) && start.elapsed() < limit {
        std::hint::spin_loop();
    }
}

#[test]
fn two_hundred_fibers_over_two_workers_never_change_thread() {
    let rt = two_workers();
    let (tx, rx) = fibra::sync::mpsc::channel::<u32>();
    let resumes = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..200u32)
        .map(|i| {
            let tx = tx.clone();
            let resumes = resumes.clone();
            rt.spawn(move || {
                let me = thread::current().id();
                let name = worker_name();
                // Rc and thread-locals stay valid: the fiber stays put.
                let local = Rc::new(i);
                for round in 0..10u32 {
                    match round % 3 {
                        0 => fibra::yield_now(),
                        1 => fibra::sleep(Duration::from_micros(1000 + u64::from(i % 7) * 300)),
                        _ => tx.send(i).unwrap(),
                    }
                    assert_eq!(
                        thread::current().id(),
                        me,
                        "fiber {i} moved in round {round}"
                    );
                    resumes.fetch_add(1, Ordering::Relaxed);
                }
                assert_eq!(*local, i);
                name
            })
        })
        .collect();
    drop(tx);
    let names: Vec<String> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(resumes.load(Ordering::Relaxed), 200 * 10);
    assert_eq!(rx.iter().count(), 200 * 3);
    let workers: HashSet<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(
        workers,
        HashSet::from(["fibra-worker-0", "fibra-worker-1"]),
        "both workers ran fibers"
    );
}

#[test]
fn spawn_inside_a_fiber_stays_on_its_worker_without_send() {
    let rt = two_workers();
    for worker in 0..2 {
        let (outer, inner) = rt
            .spawn_on(worker, || {
                let shared = Rc::new(std::cell::Cell::new(0)); // !Send
                let s = shared.clone();
                let h = fibra::spawn(move || {
                    s.set(7);
                    worker_name()
                });
                let inner = h.join().unwrap();
                assert_eq!(shared.get(), 7);
                (worker_name(), inner)
            })
            .join()
            .unwrap();
        assert_eq!(outer, format!("fibra-worker-{worker}"));
        assert_eq!(inner, outer);
    }
}

#[test]
fn block_on_runs_on_a_worker_borrows_and_reraises_panics() {
    let rt = two_workers();
    let mut seen = Vec::new();
    let name = rt.block_on(|| {
        seen.push(1);
        fibra::sleep(Duration::from_millis(1));
        worker_name()
    });
    assert!(name.starts_with("fibra-worker-"), "ran on {name}");
    assert_eq!(seen, [1]);

    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(|| panic!("boom in block_on"))
    }))
    .unwrap_err();
    assert_eq!(*err.downcast::<&str>().unwrap(), "boom in block_on");
    // The runtime, and the worker the panic ran on, carry on.
    assert_eq!(rt.block_on(|| 5), 5);
}

#[test]
fn a_panicking_fiber_does_not_take_its_worker_down() {
    let rt = two_workers();
    for worker in 0..2 {
        let err = rt
            .spawn_on(worker, || panic!("fiber panics"))
            .join()
            .unwrap_err();
        assert!(err.is_panic());
    }
    for worker in 0..2 {
        assert_eq!(
            rt.spawn_on(worker, worker_name).join().unwrap(),
            format!("fibra-worker-{worker}")
        );
    }
}

#[test]
fn zero_workers_is_an_error() {
    let err = fibra::Runtime::builder().workers(0).build().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("workers(0)"), "{err}");
}

#[test]
fn an_idle_worker_takes_unstarted_fibers_from_a_busy_one() {
    let rt = two_workers();
    let release0 = Arc::new(AtomicBool::new(false));
    let release1 = Arc::new(AtomicBool::new(false));
    let started = Arc::new(Barrier::new(3));

    // Both workers busy in long work that never parks.
    let busy: Vec<_> = [(0, release0.clone()), (1, release1.clone())]
        .into_iter()
        .map(|(w, release)| {
            let started = started.clone();
            rt.spawn_on(w, move || {
                started.wait();
                // The limit only keeps a broken build from hanging.
                busy_until(&release, Duration::from_secs(20));
            })
        })
        .collect();
    started.wait();

    // No worker idle: the jobs go round-robin, half to worker 0's inbox.
    let jobs: Vec<_> = (0..20).map(|_| rt.spawn(worker_name)).collect();
    assert!(rt.metrics()[0].queued > 0, "{:?}", rt.metrics());

    // Worker 1 finishes its work and, idle, takes worker 0's jobs too,
    // while worker 0 stays stuck.
    release1.store(true, Ordering::SeqCst);
    let names: Vec<String> = jobs.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(!release0.load(Ordering::SeqCst));
    assert!(
        names.iter().all(|n| n == "fibra-worker-1"),
        "every job ran on the idle worker: {names:?}"
    );
    assert!(rt.metrics()[1].stolen > 0, "{:?}", rt.metrics());

    release0.store(true, Ordering::SeqCst);
    for h in busy {
        h.join().unwrap();
    }
}

/// Keeps worker 0 of `rt` busy in work that never parks, from when this
/// returns until the flag it returns is set (the handle joins that work).
fn occupy_worker_0(rt: &fibra::Runtime<Workers>) -> (Arc<AtomicBool>, fibra::JoinHandle<()>) {
    let release = Arc::new(AtomicBool::new(false));
    let started = Arc::new(Barrier::new(2));
    let blocker = {
        let (release, started) = (release.clone(), started.clone());
        rt.spawn_on(0, move || {
            started.wait();
            busy_until(&release, Duration::from_secs(20));
        })
    };
    started.wait();
    (release, blocker)
}

#[test]
fn a_fiber_cancelled_before_it_started_never_runs() {
    let rt = two_workers();
    let (release, blocker) = occupy_worker_0(&rt);
    let ran = Arc::new(AtomicBool::new(false));
    let queued = {
        let ran = ran.clone();
        rt.spawn_on(0, move || ran.store(true, Ordering::SeqCst))
    };
    queued.cancel();
    release.store(true, Ordering::SeqCst);
    assert!(queued.join().unwrap_err().is_cancelled());
    assert!(!ran.load(Ordering::SeqCst));
    blocker.join().unwrap();
}

#[test]
fn jobs_with_closures_over_a_quarter_of_the_stack_run_cancel_and_drop_whole() {
    // A job's start over a quarter of the stack waits in a box until its
    // first run (a spawn's goes after its join packet, but a job's packet
    // is made before it is known where it starts). Results, panics,
    // cancellation before the start and a dropped runtime must not tell.
    const SIZE: usize = fibra::DEFAULT_STACK_SIZE / 4 + 1024;
    let drops = SyncDropCount::default();
    let rt = fibra::Runtime::builder().workers(1).build().unwrap();
    let (release, blocker) = occupy_worker_0(&rt);
    // Queued behind the blocker: none starts before it is released.
    let jobs: Vec<_> = (0..6u8)
        .map(|i| {
            let big = [i; SIZE];
            let guard = drops.guard();
            rt.spawn_on(0, move || {
                let _g = guard;
                fibra::yield_now();
                if i == 4 {
                    panic!("big job failure");
                }
                big.iter().map(|&b| b as usize).sum::<usize>()
            })
        })
        .collect();
    jobs[2].cancel();
    release.store(true, Ordering::SeqCst);
    for (i, h) in jobs.into_iter().enumerate() {
        let outcome = h.join();
        match i {
            2 => assert!(outcome.unwrap_err().is_cancelled()),
            4 => {
                let err = outcome.unwrap_err();
                assert!(err.to_string().contains("big job failure"), "{err}");
            }
            _ => assert_eq!(outcome.unwrap(), i * SIZE),
        }
    }
    blocker.join().unwrap();
    assert_eq!(drops.get(), 6);
    // Dropped with big jobs never started: each closure is dropped.
    let parked = rt.spawn_on(0, || fibra::sleep(Duration::from_secs(60)));
    for _ in 0..3 {
        let guard = drops.guard();
        let big = [1u8; SIZE];
        drop(rt.spawn_on(0, move || {
            let _g = guard;
            big.len()
        }));
    }
    drop(parked);
    drop(rt);
    assert_eq!(drops.get(), 9);
}

#[test]
fn dropping_the_runtime_unwinds_the_fibers_parked_on_every_worker() {
    let rt = two_workers();
    let drops = SyncDropCount::default();
    let started = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for worker in 0..2 {
        for _ in 0..25 {
            let (guard, started) = (drops.guard(), started.clone());
            handles.push(rt.spawn_on(worker, move || {
                let _guard = guard;
                started.fetch_add(1, Ordering::SeqCst);
                fibra::sleep(Duration::from_secs(3600));
            }));
        }
        // Some parked on a channel that never gets a message, on each worker.
        let (tx, rx) = fibra::sync::mpsc::channel::<()>();
        let (guard, started) = (drops.guard(), started.clone());
        handles.push(rt.spawn_on(worker, move || {
            let _guard = guard;
            let _tx = tx;
            started.fetch_add(1, Ordering::SeqCst);
            let _ = rx.recv();
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while started.load(Ordering::SeqCst) < 52 {
        assert!(Instant::now() < deadline, "fibers did not start");
        thread::sleep(Duration::from_millis(1));
    }
    let metrics = rt.metrics();
    assert_eq!(metrics.len(), 2);
    drop(rt);
    assert_eq!(drops.get(), 52, "every fiber's destructors ran");
    for h in handles {
        assert!(h.join().unwrap_err().is_cancelled());
    }
}

#[test]
fn metrics_show_parked_fibers_per_worker() {
    let rt = two_workers();
    let gate = Arc::new(fibra::sync::Semaphore::new(0));
    let handles: Vec<_> = (0..6)
        .map(|_| {
            let gate = gate.clone();
            rt.spawn_on(1, move || drop(gate.acquire()))
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let m = &rt.metrics()[1];
        if m.parked == 6 {
            assert_eq!((m.alive, m.ready, m.queued), (6, 0, 0));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "metrics never showed 6 parked: {m:?}"
        );
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(rt.metrics()[0].alive, 0);
    assert_eq!(rt.fibers(), 6);
    gate.add_permits(6);
    for h in handles {
        h.join().unwrap();
    }
}

/// A 2-worker echo server, one `bind_reuse_port` listener per worker.
fn reuse_port_echo_server(rt: &fibra::Runtime<Workers>) -> (SocketAddr, Arc<Mutex<Vec<usize>>>) {
    let first = TcpListener::bind_reuse_port("127.0.0.1:0").unwrap();
    let addr = first.local_addr().unwrap();
    let accepted = Arc::new(Mutex::new(vec![0; rt.workers()]));
    let mut first = Some(first);
    for worker in 0..rt.workers() {
        let listener = match first.take() {
            Some(l) => l,
            None => TcpListener::bind_reuse_port(addr).unwrap(),
        };
        let accepted = accepted.clone();
        rt.spawn_on(worker, move || {
            loop {
                let (mut stream, _) = listener.accept().unwrap();
                accepted.lock().unwrap()[worker] += 1;
                fibra::spawn(move || {
                    let mut buf = [0u8; 4096];
                    loop {
                        match stream.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => stream.write_all(&buf[..n]).unwrap(),
                        }
                    }
                });
            }
        });
    }
    (addr, accepted)
}

#[test]
fn a_reuse_port_echo_server_accepts_on_both_workers() {
    let rt = two_workers();
    let (addr, accepted) = reuse_port_echo_server(&rt);
    // Clients in fibers of another runtime, on this thread.
    fibra::run(|| {
        let clients: Vec<_> = (0..64)
            .map(|c| {
                fibra::spawn(move || {
                    let mut stream = TcpStream::connect(addr).unwrap();
                    for round in 0..20u32 {
                        let msg = format!("client {c} round {round}\n");
                        stream.write_all(msg.as_bytes()).unwrap();
                        let mut back = vec![0; msg.len()];
                        stream.read_exact(&mut back).unwrap();
                        assert_eq!(back, msg.as_bytes());
                    }
                })
            })
            .collect();
        clients.into_iter().for_each(|h| h.join().unwrap());
    });
    let accepted = accepted.lock().unwrap().clone();
    assert_eq!(accepted.iter().sum::<usize>(), 64);
    assert!(
        accepted.iter().all(|&n| n > 0),
        "both workers accepted: {accepted:?}"
    );
}

#[test]
fn a_dump_lists_every_fiber_with_what_it_waits_for() {
    let rt = two_workers();
    let lock = Arc::new(fibra::sync::Mutex::new(()));
    let held = lock.clone();
    let (tx, rx) = fibra::sync::mpsc::channel::<()>();
    let (mut client, server) = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (c, l.accept().unwrap().0)
    };
    let parked = Arc::new(AtomicUsize::new(0));
    let named = |name: &str| fibra::Builder::new().name(name.to_owned());
    let p = parked.clone();
    let _holder = rt.spawn_on(0, move || {
        let _guard = held.lock().unwrap();
        p.fetch_add(1, Ordering::SeqCst);
        fibra::sleep(Duration::from_secs(3600));
    });
    while parked.load(Ordering::SeqCst) < 1 {
        thread::sleep(Duration::from_millis(1));
    }
    let p = parked.clone();
    let _others = rt.spawn_on(1, move || {
        let l = lock.clone();
        let _a = named("locker").spawn(move || drop(l.lock())).unwrap();
        let _b = named("receiver").spawn(move || rx.recv()).unwrap();
        let _c = named("reader")
            .spawn(move || {
                let mut s = TcpStream::from(server);
                s.read(&mut [0; 8])
            })
            .unwrap();
        let sleeper = named("sleeper")
            .spawn(|| fibra::sleep(Duration::from_secs(600)))
            .unwrap();
        p.fetch_add(1, Ordering::SeqCst);
        sleeper.join().unwrap()
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let dump = loop {
        let dump = rt.dump();
        if dump
            .fibers()
            .filter(|f| f.state == fibra::runtime::FiberState::Parked)
            .count()
            == 6
        {
            break dump;
        }
        assert!(Instant::now() < deadline, "not all parked:\n{dump}");
        thread::sleep(Duration::from_millis(2));
    };
    assert!(dump.is_complete());
    let text = dump.to_string();
    for line in [
        r#""locker" [parked: Mutex::lock]"#,
        r#""receiver" [parked: channel receive]"#,
        r#""reader" [parked: fd "#,
        r#""sleeper" [parked: sleep, "#,
        "[parked: join of fiber",
        "thread \"fibra-worker-0\": 1 fibers",
        "thread \"fibra-worker-1\": 5 fibers",
    ] {
        assert!(text.contains(line), "{line:?} missing from\n{text}");
    }
    let sleeper = dump
        .fibers()
        .find(|f| f.name.as_deref() == Some("sleeper"))
        .unwrap();
    let left = sleeper.deadline_in.unwrap();
    assert!(
        left > Duration::from_secs(500) && left <= Duration::from_secs(600),
        "{left:?}"
    );

    // From a fiber of a worker (block_on's closure borrows the runtime:
    // it is Sync), that worker answers for itself.
    let from_fiber = rt.block_on(|| rt.dump());
    assert!(from_fiber.is_complete());
    assert!(from_fiber.to_string().contains("[running]"), "{from_fiber}");
    client.write_all(b"x").unwrap();
    drop(tx);
}

#[test]
fn sigquit_prints_a_dump_when_asked_to() {
    const NAME: &str = "sigquit_prints_a_dump_when_asked_to";
    if util::is_child(NAME) {
        fibra::runtime::dump_on_sigquit().unwrap();
        let rt = two_workers();
        let h = fibra::Builder::new().name("patient".into());
        let _patient = rt.spawn_on(1, move || {
            h.spawn(|| fibra::sleep(Duration::from_secs(600)))
                .unwrap()
                .join()
        });
        // Asked once "patient" has parked (a dump is answered before the
        // jobs a worker has not started yet).
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !rt.dump().fibers().any(|f| {
            f.name.as_deref() == Some("patient") && f.state == fibra::runtime::FiberState::Parked
        }) {
            assert!(std::time::Instant::now() < deadline, "patient never parks");
            thread::sleep(Duration::from_millis(10));
        }
        // SAFETY: raising a signal fibra handles now.
        unsafe { libc::raise(libc::SIGQUIT) };
        // The parent reads the dump on stderr and ends this process.
        thread::sleep(Duration::from_secs(600));
        return;
    }
    fn told(text: &str) -> bool {
        text.contains("fibra: SIGQUIT: fiber dump")
            && text.contains(r#""patient" [parked: sleep"#)
            && text.contains("thread \"fibra-worker-0\": 0 fibers")
    }
    // The child has died once in a while with no output at all (here and
    // under AddressSanitizer in CI), a fault not understood yet: up to
    // three children, each failure reported.
    let mut failures = Vec::new();
    while !failures.iter().any(|text: &String| told(text)) {
        assert!(failures.len() < 3, "three children failed:\n{failures:#?}");
        // Naming the dump's stacks loads the debug info: seconds under
        // AddressSanitizer.
        failures.push(util::child_stderr_until(
            NAME,
            Duration::from_secs(90),
            told,
        ));
    }
}
