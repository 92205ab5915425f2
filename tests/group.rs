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

#[test]
fn ten_thousand_members_are_cancelled_at_the_deadline_with_every_destructor_run_and_no_fd_left() {
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
                // An fd of its own, which it waits on for ever.
                let fd = fibra::io::EventFd::new(0).unwrap();
                fd.read().unwrap();
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
                "every member holds its fd: {held} fds more than before"
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
    // Other tests of this binary run alongside and open a few fds; a
    // member's would be thousands.
    let left = open_fds().saturating_sub(fds_before);
    assert!(left < 100, "{left} fds more than before");
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
