//! `fibra::Group`: fibers that end together. Real fibers and real timers;
//! the timings are generous (a loaded machine stretches them), and each
//! test proves an order or a count, not a speed.

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fibra::Group;

const HOUR: Duration = Duration::from_secs(3600);

/// Counts its drops into a shared counter: a member's destructors ran.
struct Dropped(Rc<Cell<usize>>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

/// The same, for members on several threads.
struct DroppedSync(Arc<AtomicUsize>);

impl Drop for DroppedSync {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The fds this process has open.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// This process's resident memory, in bytes (`VmRSS`).
fn resident() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// Set in the child process [`ten_thousand_members_...`] runs itself in.
const ALONE: &str = "FIBRA_GROUP_TEST_ALONE";

#[test]
fn ten_thousand_members_are_cancelled_at_the_deadline_with_every_destructor_run_and_no_fd_or_memory_left()
 {
    // The fds and the memory of the process are counted: other tests of
    // this binary, running alongside, would open and free their own. So
    // the test runs again in a process of its own, alone.
    if std::env::var_os(ALONE).is_none() {
        let name = "ten_thousand_members_are_cancelled_at_the_deadline_with_every_destructor_run_and_no_fd_or_memory_left";
        let mut child = std::process::Command::new(std::env::current_exe().unwrap());
        child
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(ALONE, "1");
        if cfg!(fibra_asan) {
            // ASan keeps freed memory in a quarantine (256 MiB by default),
            // which the resident count would read as kept by the members.
            child.env(
                "ASAN_OPTIONS",
                "detect_leaks=0:handle_segv=0:quarantine_size_mb=0",
            );
        }
        let out = child.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "the test alone failed:\n{text}");
        assert!(
            text.contains("1 passed"),
            "the test alone did not run:\n{text}"
        );
        eprintln!("{text}");
        return;
    }
    // A first round fills what fibra and the allocator keep for the next
    // (pooled stacks, the allocator's free lists, the reactor's tables);
    // the second must leave the process as it found it.
    let rss_start = resident();
    ten_thousand_members_round();
    let (fds_before, rss_before) = (open_fds(), resident());
    ten_thousand_members_round();
    let (fds_after, rss_after) = (open_fds(), resident());
    eprintln!(
        "fds {fds_before} -> {fds_after}, resident {} KiB at the start, {} -> {} KiB",
        rss_start / 1024,
        rss_before / 1024,
        rss_after / 1024
    );
    assert_eq!(fds_after, fds_before, "fds left by the members");
    // Generous: what a round holds at its height is some 100 MiB (10 000
    // stacks and sockets); a leak of a member's stack or closure would be
    // tens of MiB.
    // (Under AddressSanitizer its shadow of the memory the round touched
    // stays too: twice the room.)
    const SLACK: usize = if cfg!(fibra_asan) { 16 << 20 } else { 8 << 20 };
    assert!(
        rss_after <= rss_before + SLACK,
        "memory left by the members: {} KiB more resident than before",
        (rss_after - rss_before) / 1024
    );
}

/// 10 000 members, each holding a socket of its own that it waits on for
/// ever, cancelled by their group's deadline alone.
fn ten_thousand_members_round() {
    const N: usize = 10_000;
    let fds_before = open_fds();
    fibra::run(|| {
        let dropped = Rc::new(Cell::new(0));
        let started = Instant::now();
        // Under AddressSanitizer spawning the 10 000 took over 2 s in CI:
        // the deadline came before the look below.
        let timeout = Duration::from_secs(if cfg!(fibra_asan) { 20 } else { 3 });
        let group = Group::with_timeout(timeout);
        for _ in 0..N {
            let guard = Dropped(dropped.clone());
            group.spawn(move || {
                let _guard = guard;
                // A socket of its own, which nothing is ever sent to.
                let socket = fibra::net::UnixDatagram::unbound().unwrap();
                socket.recv(&mut [0; 1]).unwrap();
            });
        }
        // Nobody waits on the group: the deadline alone cancels them.
        fibra::sleep(Duration::from_millis(300));
        // (Looked at only while the deadline is well ahead: a machine slow
        // enough to spawn them past it has nothing to show here.)
        if started.elapsed() + Duration::from_millis(500) < timeout {
            assert_eq!(dropped.get(), 0);
            let held = open_fds().saturating_sub(fds_before);
            assert!(
                held >= N,
                "every member holds its socket: {held} fds more than before"
            );
        }
        fibra::sleep_until(started + timeout + Duration::from_secs(2));
        assert_eq!(dropped.get(), N, "every member unwound at the deadline");
        assert_eq!(group.len(), N, "their results wait to be joined");
        let mut cancelled = 0;
        while let Some(result) = group.join_next() {
            assert!(result.unwrap_err().is_cancelled());
            cancelled += 1;
        }
        assert_eq!(cancelled, N);
        assert!(started.elapsed() >= timeout);
    });
    // (The first round may leave the few fds fibra makes once a process,
    // such as its watchdog's: the second is counted exactly, by the caller.)
    let left = open_fds().saturating_sub(fds_before);
    assert!(left < 10, "{left} fds more than before");
}

#[test]
fn the_first_error_cancels_the_rest_and_is_the_one_returned() {
    fibra::run(|| {
        let dropped = Rc::new(Cell::new(0));
        let group = Group::new();
        for _ in 0..10 {
            let guard = Dropped(dropped.clone());
            group.spawn(move || {
                let _guard = guard;
                fibra::sleep(HOUR);
                Ok(0)
            });
        }
        group.spawn(|| Ok(1));
        group.spawn(|| {
            fibra::sleep(Duration::from_millis(50));
            Err("first")
        });
        let guard = Dropped(dropped.clone());
        group.spawn(move || {
            let _guard = guard;
            fibra::sleep(Duration::from_millis(1500));
            Err("second") // never: cancelled by the first
        });
        let started = Instant::now();
        assert_eq!(group.try_join_all(), Err("first"));
        assert_eq!(dropped.get(), 11, "the rest unwound before it returned");
        assert!(started.elapsed() < Duration::from_millis(1500));
    });
}

#[test]
fn try_join_all_gives_the_values_in_spawn_order() {
    fibra::run(|| {
        let group = Group::new();
        for i in 0..5u64 {
            group.spawn(move || {
                fibra::sleep(Duration::from_millis(20 * (5 - i)));
                Ok::<_, ()>(i)
            });
        }
        assert_eq!(group.try_join_all(), Ok(vec![0, 1, 2, 3, 4]));
    });
}

#[test]
fn a_panic_in_a_member_resumes_from_try_join_all_after_the_rest_unwound() {
    fibra::run(|| {
        let dropped = Rc::new(Cell::new(0));
        let group = Group::new();
        for _ in 0..5 {
            let guard = Dropped(dropped.clone());
            group.spawn(move || {
                let _guard = guard;
                fibra::sleep(HOUR);
                Ok::<u8, String>(0)
            });
        }
        group.spawn(|| {
            fibra::sleep(Duration::from_millis(20));
            panic!("boom in a member")
        });
        let caught = panic::catch_unwind(AssertUnwindSafe(|| group.try_join_all()));
        let payload = caught.unwrap_err();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom in a member"));
        assert_eq!(dropped.get(), 5);
    });
}

#[test]
fn join_next_gives_members_in_the_order_they_finish() {
    fibra::run(|| {
        let group = Group::new();
        // Spawned 0..6, finishing 5, 4, ..., 0 (timers), with yields between.
        for i in 0..6u64 {
            group.spawn(move || {
                fibra::sleep(Duration::from_millis(60 * (6 - i)));
                i
            });
        }
        let order: Vec<_> = std::iter::from_fn(|| group.join_next())
            .map(Result::unwrap)
            .collect();
        assert_eq!(order, [5, 4, 3, 2, 1, 0]);

        // Without timers: each member yields as many times as its number.
        for i in [3, 0, 2, 1] {
            group.spawn(move || {
                for _ in 0..i {
                    fibra::yield_now();
                }
                i
            });
        }
        let order: Vec<_> = std::iter::from_fn(|| group.join_next())
            .map(Result::unwrap)
            .collect();
        assert_eq!(order, [0, 1, 2, 3]);
        assert!(group.is_empty());
    });
}

#[test]
fn a_member_spawns_into_its_own_group() {
    /// Spawns a binary tree of members `depth` deep into `group`.
    fn fan_out(group: Rc<Group<u32>>, depth: u32) -> u32 {
        if depth > 0 {
            for _ in 0..2 {
                let g = group.clone();
                group.spawn(move || fan_out(g, depth - 1));
            }
        }
        depth
    }
    fibra::run(|| {
        let group = Rc::new(Group::new());
        let g = group.clone();
        group.spawn(move || fan_out(g, 4));
        let mut seen = 0;
        while let Some(result) = group.join_next() {
            result.unwrap();
            seen += 1;
        }
        assert_eq!(seen, 31); // 1 + 2 + 4 + 8 + 16

        // A member that waits on its own group sees the others, then None
        // (no member but itself is left). This fiber leaves the group to it
        // meanwhile: two waiters would share the results.
        let g = group.clone();
        let done = Rc::new(Cell::new(false));
        let d = done.clone();
        group.spawn(move || {
            let h = g.clone();
            g.spawn(move || {
                h.spawn(|| 7);
                5
            });
            let mut got = Vec::new();
            while let Some(result) = g.join_next() {
                got.push(result.unwrap());
            }
            got.sort();
            assert_eq!(got, [5, 7]);
            d.set(true);
            0
        });
        while !done.get() {
            fibra::yield_now();
        }
        assert_eq!(group.join_next().unwrap().unwrap(), 0);
        assert!(group.join_next().is_none());
    });
}

#[test]
fn a_tree_of_depth_three_is_cancelled_from_its_root() {
    fibra::run(|| {
        let dropped = Rc::new(Cell::new(0));
        let root = Group::new();
        for _ in 0..3 {
            let dropped = dropped.clone();
            root.spawn(move || {
                let _guard = Dropped(dropped.clone());
                let child = Group::new();
                for _ in 0..3 {
                    let dropped = dropped.clone();
                    child.spawn(move || {
                        let _guard = Dropped(dropped.clone());
                        let grandchild = Group::new();
                        for _ in 0..3 {
                            let guard = Dropped(dropped.clone());
                            grandchild.spawn(move || {
                                let _guard = guard;
                                fibra::sleep(HOUR);
                            });
                        }
                        while let Some(r) = grandchild.join_next() {
                            assert!(r.unwrap_err().is_cancelled());
                        }
                    });
                }
                while let Some(r) = child.join_next() {
                    r.unwrap();
                }
            });
        }
        fibra::sleep(Duration::from_millis(50)); // all 39 are waiting
        assert_eq!(dropped.get(), 0);
        root.cancel();
        while let Some(r) = root.join_next() {
            assert!(r.unwrap_err().is_cancelled());
        }
        assert_eq!(dropped.get(), 3 + 9 + 27);
    });
}

#[test]
fn cancels_and_deadlines_reach_child_groups_that_left_their_member() {
    // The members that made the child groups have returned: nothing unwinds
    // into a child's owner; the root reaches the children itself.
    let escape =
        |root: &Group<()>, dropped: &Rc<Cell<usize>>, kept: &Rc<RefCell<Vec<Group<()>>>>| {
            for _ in 0..2 {
                let (dropped, kept) = (dropped.clone(), kept.clone());
                root.spawn(move || {
                    let child = Group::new();
                    for _ in 0..2 {
                        let guard = Dropped(dropped.clone());
                        child.spawn(move || {
                            let _guard = guard;
                            fibra::sleep(HOUR);
                        });
                    }
                    kept.borrow_mut().push(child);
                });
            }
        };
    fibra::run(|| {
        let dropped = Rc::new(Cell::new(0));
        let kept = Rc::new(RefCell::new(Vec::new()));

        let root = Group::new();
        escape(&root, &dropped, &kept);
        while let Some(r) = root.join_next() {
            r.unwrap();
        }
        fibra::sleep(Duration::from_millis(50));
        assert_eq!((kept.borrow().len(), dropped.get()), (2, 0));
        root.cancel();
        fibra::sleep(Duration::from_millis(200));
        assert_eq!(
            dropped.get(),
            4,
            "the root's cancel reached its children's members"
        );

        let root = Group::with_timeout(Duration::from_millis(300));
        escape(&root, &dropped, &kept);
        fibra::sleep(Duration::from_millis(100));
        assert_eq!(dropped.get(), 4);
        fibra::sleep(Duration::from_millis(1000));
        assert_eq!(
            dropped.get(),
            8,
            "the root's deadline reached its children's members"
        );
        for child in kept.borrow().iter() {
            while let Some(r) = child.join_next() {
                assert!(r.unwrap_err().is_cancelled());
            }
        }
    });
}

/// A member whose destructor itself parks: a drop that returned before its
/// end would be caught with the count short.
fn slow_unwinder(dropped: &Rc<Cell<usize>>) -> impl FnOnce() + 'static {
    struct Slow {
        _count: Dropped, // dropped after `drop` below, even if it unwinds
    }
    impl Drop for Slow {
        fn drop(&mut self) {
            fibra::sleep(Duration::from_millis(50));
        }
    }
    let guard = Slow {
        _count: Dropped(dropped.clone()),
    };
    move || {
        let _guard = guard;
        fibra::sleep(HOUR);
    }
}

#[test]
fn a_dropped_group_waits_for_its_members_to_unwind() {
    fibra::run(|| {
        let dropped = Rc::new(Cell::new(0));
        let group = Group::new();
        for _ in 0..20 {
            group.spawn(slow_unwinder(&dropped));
        }
        fibra::yield_now(); // they start sleeping
        drop(group);
        assert_eq!(dropped.get(), 20);

        // Dropped by a fiber that is being cancelled, as it unwinds.
        let d = dropped.clone();
        let owner = fibra::spawn(move || {
            let group = Group::new();
            for _ in 0..20 {
                group.spawn(slow_unwinder(&d));
            }
            fibra::sleep(HOUR);
        });
        fibra::sleep(Duration::from_millis(20));
        owner.cancel();
        assert!(owner.join().unwrap_err().is_cancelled());
        assert_eq!(dropped.get(), 40);

        // A `fibra::timeout` around code that owns a group bounds it.
        let d = dropped.clone();
        let started = Instant::now();
        let out = fibra::timeout(Duration::from_millis(100), move || {
            let group = Group::new();
            for _ in 0..20 {
                group.spawn(slow_unwinder(&d));
            }
            group.join_next()
        });
        assert!(out.is_err());
        assert_eq!(dropped.get(), 60);
        assert!(started.elapsed() < Duration::from_secs(60));
    });
}

#[test]
fn a_group_made_inside_a_timeout_keeps_its_deadline() {
    fibra::run(|| {
        let dropped = Rc::new(Cell::new(0));
        let escaped = fibra::timeout(Duration::from_millis(200), || {
            let group = Group::new();
            let guard = Dropped(dropped.clone());
            group.spawn(move || {
                let _guard = guard;
                fibra::sleep(HOUR);
            });
            group
        })
        .unwrap();
        fibra::sleep(Duration::from_millis(50));
        assert_eq!(dropped.get(), 0);
        assert!(escaped.join_next().unwrap().unwrap_err().is_cancelled());
        assert_eq!(dropped.get(), 1);
    });
}

#[test]
fn members_spawned_into_a_cancelled_group_never_run() {
    fibra::run(|| {
        let ran = Rc::new(Cell::new(false));
        let group = Group::new();
        group.cancel();
        let r = ran.clone();
        group.spawn(move || r.set(true));
        assert!(group.join_next().unwrap().unwrap_err().is_cancelled());
        assert!(!ran.get());
    });
}

#[test]
fn members_run_on_two_workers_and_are_cancelled_from_a_thread() {
    let rt = fibra::Runtime::builder().workers(2).build().unwrap();
    let group: Arc<Group<String>> = Arc::new(Group::new());
    for worker in 0..2 {
        let group = group.clone();
        rt.spawn_on(worker, move || {
            for _ in 0..4 {
                group.spawn(|| std::thread::current().name().unwrap().to_owned());
            }
        })
        .join()
        .unwrap();
    }
    // Joined from this plain thread.
    let mut names: Vec<_> = std::iter::from_fn(|| group.join_next())
        .map(Result::unwrap)
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names, ["fibra-worker-0", "fibra-worker-1"]);

    // Members on both workers, cancelled from this thread.
    let dropped = Arc::new(AtomicUsize::new(0));
    for worker in 0..2 {
        let (group, dropped) = (group.clone(), dropped.clone());
        rt.spawn_on(worker, move || {
            for _ in 0..4 {
                let guard = DroppedSync(dropped.clone());
                group.spawn(move || {
                    let _guard = guard;
                    fibra::sleep(HOUR);
                    String::new()
                });
            }
        })
        .join()
        .unwrap();
    }
    assert_eq!(group.len(), 8);
    group.cancel();
    let mut cancelled = 0;
    while let Some(result) = group.join_next() {
        assert!(result.unwrap_err().is_cancelled());
        cancelled += 1;
    }
    assert_eq!((cancelled, dropped.load(Ordering::SeqCst)), (8, 8));

    // And dropped from this thread: it waits for both workers' members.
    for worker in 0..2 {
        let (group, dropped) = (group.clone(), dropped.clone());
        rt.spawn_on(worker, move || {
            let guard = DroppedSync(dropped.clone());
            group.spawn(move || {
                let _guard = guard;
                fibra::sleep(HOUR);
                String::new()
            });
        })
        .join()
        .unwrap();
    }
    let group = Arc::into_inner(group).unwrap();
    drop(group);
    assert_eq!(dropped.load(Ordering::SeqCst), 10);
}

#[test]
fn spawn_in_names_members_and_sizes_their_stacks() {
    fibra::run(|| {
        let group = Group::new();
        for i in 0..3 {
            fibra::Builder::new()
                .name(format!("member-{i}"))
                .stack_size(128 * 1024)
                .spawn_in(&group, || fibra::current().name().unwrap().to_owned())
                .unwrap();
        }
        let err = fibra::Builder::new()
            .stack_size(0)
            .spawn_in(&group, String::new)
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(group.len(), 3);
        let mut names: Vec<_> = std::iter::from_fn(|| group.join_next())
            .map(Result::unwrap)
            .collect();
        names.sort();
        assert_eq!(names, ["member-0", "member-1", "member-2"]);
    });
}

#[test]
fn a_member_that_drops_its_own_group_cancels_and_waits_for_the_others_only() {
    fibra::run(|| {
        let dropped = Rc::new(Cell::new(0));
        let group = Rc::new(Group::new());
        for _ in 0..5 {
            group.spawn(slow_unwinder(&dropped));
        }
        let (g, d) = (group.clone(), dropped.clone());
        let last = Rc::new(Cell::new(usize::MAX));
        let l = last.clone();
        group.spawn(move || {
            fibra::sleep(Duration::from_millis(50));
            drop(g); // the last Rc: the group drops here, in its own member
            l.set(d.get());
        });
        drop(group);
        while last.get() == usize::MAX {
            fibra::sleep(Duration::from_millis(10));
        }
        assert_eq!(last.get(), 5, "the others unwound before the drop returned");
    });
}

#[test]
fn a_dropped_runtime_unwinds_groups_and_their_members() {
    let dropped = Rc::new(Cell::new(0));
    let rt = fibra::Runtime::new().unwrap();
    let d = dropped.clone();
    rt.spawn(move || {
        let group = Group::new();
        for _ in 0..10 {
            group.spawn(slow_unwinder(&d));
        }
        group.join_next();
    });
    rt.block_on(|| fibra::sleep(Duration::from_millis(20)));
    assert_eq!(dropped.get(), 0);
    drop(rt);
    assert_eq!(dropped.get(), 10);
}

#[test]
fn outside_the_runtime_that_runs_its_members_a_group_never_waits_for_ever() {
    let dropped = Rc::new(Cell::new(0));
    let rt = fibra::Runtime::new().unwrap();
    let group = Group::new();
    rt.block_on(|| {
        group.spawn(slow_unwinder(&dropped));
        fibra::yield_now(); // it starts sleeping
    });
    // This thread owns the runtime, which is not running: nothing would
    // run the member. join_next says so; the drop cancels and returns.
    let waited = panic::catch_unwind(AssertUnwindSafe(|| group.join_next()));
    assert!(waited.is_err());
    drop(group);
    assert_eq!(dropped.get(), 0);
    rt.block_on(|| fibra::sleep(Duration::from_millis(200)));
    assert_eq!(dropped.get(), 1, "it unwound when the runtime ran");
}

// ----- a group in `select!` ---------------------------------------------------

#[test]
fn a_group_in_select_beside_a_channel_receiver_gives_every_member_and_message() {
    use fibra::channel::{after, unbounded};

    fibra::run(|| {
        let group = Group::new();
        // Members finishing 4, 3, 2, 1, 0 (timers 60 ms apart).
        for i in 0..5u64 {
            group.spawn(move || {
                fibra::sleep(Duration::from_millis(60 * (5 - i)));
                i
            });
        }
        // Messages sent between the members' ends.
        let (s, messages) = unbounded();
        fibra::spawn(move || {
            for m in 0..10 {
                s.send(m).unwrap();
                fibra::sleep(Duration::from_millis(25));
            }
        });
        let (mut got, mut ended) = (Vec::new(), Vec::new());
        let (mut messages_open, closed) = (true, fibra::channel::never());
        let start = Instant::now();
        // Until every member and every message is in (the sender's sleeps
        // add up on a loaded machine: its last may come after the members).
        while !group.is_empty() || messages_open {
            fibra::select! {
                recv(if messages_open { &messages } else { &closed }) -> m => match m {
                    Ok(m) => got.push(m),
                    Err(_) => messages_open = false,
                },
                group(group) -> member => ended.push(member.unwrap()),
                recv(after(Duration::from_secs(30))) -> _ => panic!("stuck"),
            }
        }
        assert_eq!(ended, [4, 3, 2, 1, 0]); // the order they finished in
        // Each end woke the select: not its `after` (past which it would
        // also find them, in its last look before giving up).
        let took = start.elapsed();
        assert!(took < Duration::from_secs(10), "took {took:?} for 300 ms");
        assert_eq!(got, (0..10).collect::<Vec<_>>());
    });
}

#[test]
fn a_group_with_no_member_is_never_ready_until_one_is_spawned_and_finishes() {
    use fibra::channel::{Select, bounded, unbounded};

    // On a plain thread, outside any runtime.
    let group = Group::<u8>::new();
    let (_s, idle) = bounded::<u8>(0);
    let got = fibra::select! {
        recv(idle) -> _ => "message",
        group(group) -> _ => "member",
        default(Duration::from_millis(50)) => "nothing",
    };
    assert_eq!(got, "nothing");

    fibra::run(|| {
        let group = Rc::new(Group::new());
        let mut sel = Select::new();
        sel.group(&group);
        assert!(sel.try_ready().is_err());
        assert!(sel.try_select().is_err());

        // A member spawned into it while the select waits, by another
        // fiber, is the one it gets.
        let (spawned_s, spawned) = unbounded();
        let g = group.clone();
        fibra::spawn(move || {
            fibra::sleep(Duration::from_millis(20));
            g.spawn(|| 5);
            spawned_s.send(()).unwrap();
        });
        let got = fibra::select! {
            group(group) -> member => member.unwrap(),
            default(Duration::from_secs(30)) => panic!("not woken"),
        };
        assert_eq!(got, 5);
        assert_eq!(spawned.try_recv(), Ok(()));
        assert!(group.is_empty());

        // Once joined, it is empty again: not ready.
        let got = fibra::select! {
            group(group) -> _ => "member",
            default => "nothing",
        };
        assert_eq!(got, "nothing");

        // A member selecting on its own group waits for the others only.
        let own = Rc::new(Group::new());
        let g = own.clone();
        own.spawn(move || {
            fibra::select! {
                group(g) -> _ => "member",
                default(Duration::from_millis(50)) => "nothing",
            }
        });
        assert_eq!(own.join_next().unwrap().unwrap(), "nothing");
    });
}

#[test]
fn a_member_finishing_while_the_select_waits_wakes_it() {
    use fibra::channel::{Select, bounded, unbounded};

    fibra::run(|| {
        let group = Group::new();
        let (go_s, go) = bounded::<()>(0);
        group.spawn(move || {
            go.recv().unwrap(); // until the select below waits
            "done"
        });
        let (_s, idle) = unbounded::<u8>();
        let mut sel = Select::new();
        let member = sel.group(&group);
        sel.recv(&idle);
        assert!(sel.try_ready().is_err()); // nothing ready: the select waits
        let waiting = Rc::new(Cell::new(false));
        let w = waiting.clone();
        fibra::spawn(move || {
            fibra::sleep(Duration::from_millis(20));
            w.set(true);
            go_s.send(()).unwrap(); // the member finishes now
        });
        // Woken by the member's end, 20 ms on; not by the deadline, when
        // its last look before giving up would find the member too.
        let start = Instant::now();
        let op = sel.select_timeout(Duration::from_secs(30)).unwrap();
        assert!(start.elapsed() < Duration::from_secs(10), "not woken");
        assert!(waiting.get(), "chosen before the member could finish");
        assert_eq!(op.index(), member);
        assert_eq!(op.group(&group).unwrap(), "done");

        // The same for a readiness wait, and for a member that panics.
        let (go_s, go) = bounded::<()>(0);
        group.spawn(move || {
            go.recv().unwrap();
            panic!("boom")
        });
        fibra::spawn(move || {
            fibra::sleep(Duration::from_millis(20));
            go_s.send(()).unwrap();
        });
        let mut sel = Select::new();
        let member = sel.group(&group);
        sel.recv(&idle);
        let start = Instant::now();
        assert_eq!(sel.ready_timeout(Duration::from_secs(30)), Ok(member));
        assert!(start.elapsed() < Duration::from_secs(10), "not woken");
        assert!(group.try_join_next().unwrap().unwrap_err().is_panic());
    });
}

#[test]
fn a_plain_thread_selecting_on_a_group_is_woken_by_members_on_workers() {
    use fibra::channel::unbounded;

    let rt = fibra::Runtime::builder().workers(2).build().unwrap();
    let group: Arc<Group<usize>> = Arc::new(Group::new());
    let (go_s, go) = unbounded::<()>();
    for worker in 0..2 {
        let (group, go) = (group.clone(), go.clone());
        rt.spawn_on(worker, move || {
            group.spawn(move || {
                go.recv().unwrap();
                worker
            });
        })
        .join()
        .unwrap();
    }
    let (_s, idle) = unbounded::<u8>();
    let mut ended = Vec::new();
    let start = Instant::now();
    while !group.is_empty() {
        // One member is let go a turn, as this thread is about to wait.
        let _ = go_s.send(());
        fibra::select! {
            recv(idle) -> _ => unreachable!(),
            group(group) -> member => ended.push(member.unwrap()),
            default(Duration::from_secs(30)) => panic!("stuck: {ended:?}"),
        }
    }
    ended.sort();
    assert_eq!(ended, [0, 1]);
    // Woken by each end, not by the default's deadline (past which the
    // select would find the members too, in its last look).
    let took = start.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn a_chosen_member_that_is_never_taken_goes_back_to_the_group() {
    use fibra::channel::{Select, bounded, unbounded};

    fibra::run(|| {
        let group = Group::new();
        group.spawn(|| 1);
        group.spawn(|| 2);
        fibra::yield_now(); // both finish
        let mut sel = Select::new();
        sel.group(&group);
        let dropped = panic::catch_unwind(AssertUnwindSafe(|| drop(sel.select())));
        assert!(dropped.is_err(), "dropping a selected operation panics");
        // The member it took is first again, then the other.
        let order: Vec<_> = std::iter::from_fn(|| group.join_next())
            .map(Result::unwrap)
            .collect();
        assert_eq!(order, [1, 2]);

        // Selects that time out, and one cancelled while it waits, leave
        // no waiter behind: the member's end later finds only the group's
        // own join.
        let (_s, idle) = unbounded::<u8>();
        let group = Rc::new(group);
        let (go_s, go) = bounded::<()>(0);
        group.spawn(move || {
            go.recv().unwrap();
            3
        });
        let (waits_s, waits) = unbounded();
        let g = group.clone();
        let selector = fibra::spawn(move || {
            for _ in 0..100 {
                fibra::select! {
                    recv(idle) -> _ => unreachable!(),
                    group(g) -> _ => unreachable!("the member waits"),
                    default(Duration::from_millis(1)) => {},
                }
            }
            waits_s.send(()).unwrap();
            fibra::select! {
                recv(idle) -> _ => unreachable!(),
                group(g) -> _ => unreachable!("cancelled first"),
            }
        });
        waits.recv().unwrap();
        fibra::yield_now(); // it parks in its last select
        selector.cancel();
        assert!(selector.join().unwrap_err().is_cancelled());
        go_s.send(()).unwrap();
        assert_eq!(group.join_next().unwrap().unwrap(), 3);
    });
}

/// What each member of a [`tree`] says of itself: its fiber, and the
/// group it was spawned into.
type Seen = Arc<std::sync::Mutex<Vec<(fibra::FiberId, fibra::runtime::GroupId)>>>;

/// A tree of groups of depth 3 under `root` (named `tag`): two members
/// that each make a child group `tag/c`, two members in each that make a
/// grandchild `tag/c/g` of two members that sleep. 14 members in all,
/// 7 groups; each member tells `seen` who it is, and in which group.
fn tree(root: &Group<()>, tag: &str, seen: &Seen) {
    fn member(seen: &Seen, group: fibra::runtime::GroupId) {
        seen.lock().unwrap().push((fibra::current().id(), group));
    }
    let rid = root.id();
    for _ in 0..2 {
        let (seen, tag) = (seen.clone(), tag.to_owned());
        root.spawn(move || {
            member(&seen, rid);
            let child = Group::new().named(format!("{tag}/c"));
            let cid = child.id();
            for _ in 0..2 {
                let (seen, tag) = (seen.clone(), tag.clone());
                child.spawn(move || {
                    member(&seen, cid);
                    let grandchild = Group::new().named(format!("{tag}/c/g"));
                    let gid = grandchild.id();
                    for _ in 0..2 {
                        let seen = seen.clone();
                        grandchild.spawn(move || {
                            member(&seen, gid);
                            fibra::sleep(HOUR);
                        });
                    }
                    while grandchild.join_next().is_some() {}
                });
            }
            while child.join_next().is_some() {}
        });
    }
}

/// Waits (generously) until all `n` members of the trees told `seen`.
fn wait_seen(seen: &Seen, n: usize) {
    let start = Instant::now();
    while seen.lock().unwrap().len() < n {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the members did not start"
        );
        if fibra::try_current().is_some() {
            fibra::sleep(Duration::from_millis(5));
        } else {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Checks that `dump` names each member of `seen` with its group, and
/// lists the trees rooted at groups named `tags`, as a tree.
fn check_tree_dump(dump: &fibra::runtime::Dump, seen: &Seen, tags: &[&str]) {
    let text = dump.to_string();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 14 * tags.len());
    for (fiber, group) in seen.iter() {
        let info = dump
            .fibers()
            .find(|f| f.id == *fiber)
            .unwrap_or_else(|| panic!("fiber {fiber} is missing:\n{text}"));
        assert_eq!(info.group, Some(*group), "{text}");
        assert!(
            text.contains(&format!("fiber {fiber} in group {group} [parked")),
            "fiber {fiber} is not shown in group {group}:\n{text}"
        );
    }
    let groups = dump.groups();
    assert_eq!(groups.len(), 7 * tags.len(), "{groups:#?}");
    let by_id = |id| groups.iter().find(|g| g.id == id).unwrap();
    for tag in tags {
        let root = groups
            .iter()
            .find(|g| g.name.as_deref() == Some(tag))
            .unwrap();
        assert_eq!((root.parent, root.members), (None, 2), "{root:?}");
        let children: Vec<_> = groups
            .iter()
            .filter(|g| g.parent == Some(root.id))
            .collect();
        assert_eq!(children.len(), 2, "{groups:#?}");
        for child in children {
            assert_eq!(child.name.as_deref(), Some(&*format!("{tag}/c")));
            assert_eq!(child.members, 2);
            assert!(!child.cancelled && child.deadline_in.is_none());
            let grandchildren: Vec<_> = groups
                .iter()
                .filter(|g| g.parent == Some(child.id))
                .collect();
            assert_eq!(grandchildren.len(), 2, "{groups:#?}");
            for grandchild in grandchildren {
                assert_eq!(grandchild.name.as_deref(), Some(&*format!("{tag}/c/g")));
                assert_eq!(grandchild.members, 2);
                assert_eq!(by_id(grandchild.parent.unwrap()).parent, Some(root.id));
                // Printed under its parent, one level deeper.
                let line = format!("\n      group {} \"{tag}/c/g\" [2 members]", grandchild.id);
                assert!(text.contains(&line), "no {line:?} in:\n{text}");
                assert_eq!(seen.iter().filter(|(_, g)| *g == grandchild.id).count(), 2);
            }
            let line = format!("\n    group {} \"{tag}/c\" [2 members]", child.id);
            assert!(text.contains(&line), "no {line:?} in:\n{text}");
        }
        let line = format!("\n  group {} \"{tag}\" [2 members]", root.id);
        assert!(text.contains(&line), "no {line:?} in:\n{text}");
    }
    assert!(
        text.starts_with(&format!("groups: {}\n", groups.len())),
        "{text}"
    );
}

#[test]
fn a_dump_from_a_fiber_shows_a_tree_of_depth_three_and_each_members_group() {
    fibra::run(|| {
        let seen = Seen::default();
        let root = Group::new().named("root");
        tree(&root, "root", &seen);
        wait_seen(&seen, 14);
        let dump = fibra::spawn(|| fibra::runtime::Handle::current().dump())
            .join()
            .unwrap();
        check_tree_dump(&dump, &seen, &["root"]);
        // A group with a deadline says how long is left; one cancelled
        // says so.
        let root_info = dump.groups().iter().find(|g| g.id == root.id()).unwrap();
        assert_eq!(root_info.made_by, Some(fibra::current().id()));
        root.cancel();
        while root.join_next().is_some() {}
        let timed = Group::with_timeout(HOUR).named("timed");
        timed.spawn(|| fibra::sleep(HOUR));
        fibra::yield_now();
        let dump = fibra::runtime::Handle::current().dump();
        let info = &dump.groups()[0];
        assert_eq!(info.id, timed.id());
        assert!(info.deadline_in.unwrap() > HOUR - Duration::from_secs(60));
        assert!(
            dump.to_string().contains("[1 member, deadline in "),
            "{dump}"
        );
        timed.cancel();
        let dump = fibra::runtime::Handle::current().dump();
        assert!(dump.groups()[0].cancelled);
        assert!(dump.to_string().contains("[1 member, cancelled]"), "{dump}");
    });
}

#[test]
fn a_dump_of_two_workers_from_outside_shows_each_workers_tree() {
    let rt = fibra::Runtime::builder().workers(2).build().unwrap();
    let seen = Seen::default();
    let (roots_s, roots) = std::sync::mpsc::channel();
    let owners: Vec<_> = (0..2)
        .map(|worker| {
            let (seen, roots_s) = (seen.clone(), roots_s.clone());
            rt.spawn_on(worker, move || {
                let tag = format!("root-{worker}");
                let root = Arc::new(Group::new().named(tag.clone()));
                tree(&root, &tag, &seen);
                roots_s.send(root.clone()).unwrap();
                while root.join_next().is_some() {}
            })
        })
        .collect();
    wait_seen(&seen, 28);
    let dump = rt.dump();
    assert!(dump.is_complete(), "{dump}");
    check_tree_dump(&dump, &seen, &["root-0", "root-1"]);
    // Each worker's members are listed under its thread.
    let text = dump.to_string();
    for roots in roots.iter().take(2) {
        roots.cancel();
    }
    for owner in owners {
        owner.join().unwrap();
    }
    assert!(text.contains("thread \"fibra-worker-1\""), "{text}");
}

/// Spins for `d` without parking: CPU-bound work.
fn spin(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[test]
fn spawn_anywhere_spreads_cpu_bound_members_over_both_workers() {
    let rt = fibra::Runtime::builder()
        .workers(2)
        .stall_warning(Duration::MAX) // (they are CPU-bound on purpose)
        .build()
        .unwrap();
    let (threads, order) = rt.block_on(|| {
        // All spawned by one fiber, on one worker.
        let group = Group::new();
        for _ in 0..16 {
            group.spawn_anywhere(|| {
                spin(Duration::from_millis(20));
                std::thread::current().name().unwrap().to_owned()
            });
        }
        let mut threads: Vec<_> = std::iter::from_fn(|| group.join_next())
            .map(Result::unwrap)
            .collect();
        threads.sort();
        threads.dedup();
        // And in the order they finish, wherever they ran.
        let group = Group::new();
        for i in 1..=3u64 {
            group.spawn_anywhere(move || {
                fibra::sleep(Duration::from_millis(150 * (4 - i)));
                i
            });
        }
        let order: Vec<_> = std::iter::from_fn(|| group.join_next())
            .map(Result::unwrap)
            .collect();
        (threads, order)
    });
    assert_eq!(threads, ["fibra-worker-0", "fibra-worker-1"]);
    assert_eq!(order, [3, 2, 1]);
}

#[test]
fn members_anywhere_are_cancelled_at_the_deadline_by_cancel_and_by_drop() {
    let rt = fibra::Runtime::builder().workers(2).build().unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    let sleeper = |dropped: &Arc<AtomicUsize>| {
        let guard = DroppedSync(dropped.clone());
        move || {
            let _guard = guard;
            fibra::sleep(HOUR);
            std::thread::current().name().unwrap().to_owned()
        }
    };

    // At the deadline.
    let d = dropped.clone();
    let took = rt.block_on(move || {
        let start = Instant::now();
        let group = Group::with_timeout(Duration::from_millis(300));
        for _ in 0..8 {
            group.spawn_anywhere(sleeper(&d));
        }
        while let Some(result) = group.join_next() {
            assert!(result.unwrap_err().is_cancelled());
        }
        start.elapsed()
    });
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert_eq!(dropped.load(Ordering::SeqCst), 8);

    // By `cancel` from a plain thread, and down to a child group made by a
    // member on another worker (which finds its group there).
    let group: Arc<Group<String>> = Arc::new(Group::new());
    let (g, d) = (group.clone(), dropped.clone());
    let (ready_s, ready) = std::sync::mpsc::channel();
    rt.block_on(move || {
        for _ in 0..8 {
            g.spawn_anywhere(sleeper(&d));
        }
        let (d, ready_s) = (d.clone(), ready_s.clone());
        g.spawn_anywhere(move || {
            let child = Group::new();
            child.spawn(sleeper(&d));
            ready_s.send(()).unwrap();
            while let Some(result) = child.join_next() {
                assert!(result.unwrap_err().is_cancelled());
            }
            "parent".to_owned()
        });
    });
    ready.recv_timeout(Duration::from_secs(20)).unwrap();
    group.cancel();
    let mut ended = 0;
    while let Some(result) = group.join_next() {
        match result {
            Ok(parent) => assert_eq!(parent, "parent"), // (cancelled after its child ended)
            Err(e) => assert!(e.is_cancelled()),
        }
        ended += 1;
    }
    assert_eq!(ended, 9);
    assert_eq!(dropped.load(Ordering::SeqCst), 8 + 8 + 1);

    // By the drop, from a fiber: it returns once they have all unwound.
    let d = dropped.clone();
    rt.block_on(move || {
        let group = Group::new();
        for _ in 0..8 {
            group.spawn_anywhere(sleeper(&d));
        }
        fibra::sleep(Duration::from_millis(50));
        drop(group);
        assert_eq!(d.load(Ordering::SeqCst), 8 + 8 + 1 + 8);
    });
}

#[test]
fn members_anywhere_that_never_start_still_end_their_group() {
    // A runtime dropped with members queued: those that did not start are
    // dropped unrun (and any that did are cancelled); either way the group
    // hears of their end, and its waits return.
    for _ in 0..3 {
        let rt = fibra::Runtime::builder()
            .workers(1)
            .stall_warning(Duration::MAX)
            .build()
            .unwrap();
        let group: Arc<Group<()>> = Arc::new(Group::new());
        let dropped = Arc::new(AtomicUsize::new(0));
        let (g, d) = (group.clone(), dropped.clone());
        let (queued_s, queued) = std::sync::mpsc::channel();
        let spinner = rt.spawn(move || {
            for _ in 0..4 {
                let guard = DroppedSync(d.clone());
                g.spawn_anywhere(move || {
                    let _guard = guard;
                    fibra::sleep(HOUR);
                });
            }
            queued_s.send(()).unwrap();
            // Holds the only worker until the runtime is dropped: it stops
            // without taking the members.
            spin(Duration::from_millis(300));
        });
        queued.recv().unwrap();
        drop(rt);
        assert!(spinner.join().is_ok());
        let mut ended = 0;
        while let Some(result) = group.join_next() {
            assert!(result.unwrap_err().is_cancelled());
            ended += 1;
        }
        assert_eq!((ended, dropped.load(Ordering::SeqCst)), (4, 4));
        drop(Arc::into_inner(group).unwrap());
    }
}
