//! The pool's rules of stealing, on two workers without schedulers.

use super::*;

/// A pool of two workers, both running, with `n` jobs any worker may
/// take queued for worker 0.
fn two_running(n: u32) -> (WorkerLink<u32>, WorkerLink<u32>) {
    let pool = Arc::new(Pool::new(2));
    let (w0, w1) = (WorkerLink::new(pool.clone(), 0), WorkerLink::new(pool, 1));
    w0.run();
    w1.run();
    let slot = w0.slot();
    let mut inbox = slot.lock();
    inbox.shared.extend(0..n);
    slot.counts(&inbox);
    drop(inbox);
    (w0, w1)
}

fn past_steal_after() {
    std::thread::sleep(STEAL_AFTER + STEAL_AFTER / 2);
}

#[test]
fn a_worker_that_has_not_looked_for_steal_after_is_robbed_of_half() {
    let (_w0, w1) = two_running(10);
    assert!(w1.others_have_stealable());
    // First sight: its looks are counted from now.
    assert_eq!(w1.steal(), Err(()));
    assert_eq!(w1.steal(), Err(()), "robbed before STEAL_AFTER");
    past_steal_after();
    let stolen = w1.steal().unwrap().unwrap();
    assert_eq!(stolen, (0..5).collect::<Vec<_>>(), "half, the oldest first");
    assert_eq!(w1.slot().metrics.stolen.load(Ordering::Relaxed), 5);
}

#[test]
fn a_worker_that_looks_at_its_inbox_is_not_robbed() {
    // More jobs than a look takes: some are left after each look.
    let (w0, w1) = two_running(3 * JOB_BATCH as u32);
    assert_eq!(w1.steal(), Err(()));
    past_steal_after();
    // It looks (and takes a batch) just before the thief comes back.
    assert_eq!(w0.take_own().map(|jobs| jobs.len()), Some(JOB_BATCH));
    assert_eq!(w1.steal(), Err(()), "robbed a worker that had just looked");
    // It stops looking: robbed once STEAL_AFTER has passed since the
    // thief saw its last look.
    past_steal_after();
    assert_eq!(w1.steal().unwrap().map(|jobs| jobs.len()), Some(JOB_BATCH));
}

#[test]
fn a_sleeping_worker_is_not_robbed_nor_one_with_nothing_to_take() {
    let (w0, w1) = two_running(4);
    w0.go_idle();
    assert_eq!(w1.steal(), Err(()));
    past_steal_after();
    assert_eq!(w1.steal(), Err(()), "robbed a worker that sleeps");
    assert_eq!(w0.take_own().map(|jobs| jobs.len()), Some(4));
    assert!(!w1.others_have_stealable());
    assert_eq!(w1.steal(), Ok(None));
    // A worker's own inbox empty: a look takes nothing and builds no
    // vector.
    assert_eq!(w0.take_own(), None);
}

/// The look of `pool/quiet.rs` without schedulers: every worker quiet,
/// nothing queued, a fiber waiting, the time passed: a deadlock, told
/// once; anything else, none.
#[test]
fn a_deadlock_is_seen_only_when_every_worker_is_quiet_with_nothing_queued() {
    let pool = Arc::new(Pool::<u32>::new(2));
    let (w0, w1) = (
        WorkerLink::new(pool.clone(), 0),
        WorkerLink::new(pool.clone(), 1),
    );
    w0.enter_quiet(5, 1);
    assert_eq!(w0.look_quiet(0), Look::NotAll, "one worker is not quiet");
    w1.enter_quiet(7, 0);
    assert!(matches!(w1.look_quiet(u64::MAX / 2), Look::Wait(_)));
    let Look::Deadlocked {
        fibers,
        fingerprint,
        ..
    } = w1.look_quiet(0)
    else {
        panic!("not seen");
    };
    assert_eq!(fibers, 1);
    assert!(w1.tell_deadlock(fingerprint));
    assert!(!w0.tell_deadlock(fingerprint), "told twice");
    // A job queued for a worker, then taken by it (which clears its record).
    pool.submit(9, Some(1));
    assert_eq!(w0.look_quiet(0), Look::NotAll, "a job is queued");
    assert_eq!(w1.take_own(), Some(vec![9]));
    assert_eq!(w0.look_quiet(0), Look::NotAll, "a worker took a job");
    // Quiet again with the same count (the job changed nothing, say): the
    // same deadlock, already told.
    w1.enter_quiet(7, 0);
    assert!(
        matches!(w0.look_quiet(0), Look::Deadlocked { fingerprint: f, .. } if f == fingerprint)
    );
    // A new count is a new state.
    w1.leave_quiet();
    w1.enter_quiet(8, 0);
    let Look::Deadlocked {
        fingerprint: new, ..
    } = w0.look_quiet(0)
    else {
        panic!("not seen");
    };
    assert_ne!(new, fingerprint);
    // No fiber waits at all: nothing to tell.
    w0.leave_quiet();
    w0.enter_quiet(6, 0);
    assert_eq!(w0.look_quiet(0), Look::NotAll);
}
