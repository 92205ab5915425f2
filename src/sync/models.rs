//! loom models of `sync`'s primitives on plain threads, each checked
//! through every interleaving of its threads up to a preemption bound:
//! `RUSTFLAGS="--cfg loom" cargo test --release --lib -- loom`.
//!
//! Under `--cfg loom` a plain thread parks and is unparked through loom
//! (`scheduler/os_thread.rs`), the wait lists' locks and `served` flags
//! and the semaphore's word are loom's (`atomic.rs`, `waiters.rs`), so a
//! model runs the primitives' own code: the lock-free fast paths, the
//! queueing under the lock, the hand-off to the first waiter and its
//! wake-up. loom fails a model if every thread is parked (a lost wake-up),
//! if a cell is written by two threads without an order between them
//! (exclusion broken), or if an assertion fails.

use loom::sync::Arc;
use loom::thread;

use crate::atomic::{Cell, model};
use crate::sync::{Barrier, Condvar, Mutex, OnceLock, RwLock, Semaphore, WaitGroup};

/// A counter that only a lock may touch: loom checks every access.
struct Guarded(Cell<u32>);

// SAFETY: every access goes through loom's cell, which fails the model
// on two accesses without an order between them.
unsafe impl Sync for Guarded {}

impl Guarded {
    fn bump(&self) {
        // SAFETY: called under the lock the model checks (loom tells if not).
        self.0.with_mut(|n| unsafe { *n += 1 });
    }

    fn get(&self) -> u32 {
        // SAFETY: as above.
        self.0.with(|n| unsafe { *n })
    }
}

#[test]
fn loom_mutex_excludes_and_hands_over() {
    model(3, || {
        let lock = Arc::new((Mutex::new(()), Guarded(Cell::new(0))));
        let other = lock.clone();
        let t = thread::spawn(move || {
            let _held = other.0.lock().unwrap();
            other.1.bump();
        });
        {
            let _held = lock.0.lock().unwrap();
            lock.1.bump();
        }
        t.join().unwrap();
        let _held = lock.0.lock().unwrap();
        assert_eq!(lock.1.get(), 2);
    });
}

#[test]
fn loom_semaphore_a_release_wakes_its_waiter() {
    model(3, || {
        let sem = Arc::new(Semaphore::new(0));
        let waiter = sem.clone();
        let t = thread::spawn(move || waiter.acquire().forget());
        sem.add_permits(1);
        t.join().unwrap();
        assert_eq!(sem.available_permits(), 0);
    });
}

#[test]
fn loom_semaphore_a_waiter_comes_before_a_try() {
    // A permit added while a thread waits for it goes to that thread: a
    // `try_acquire` after it gets one only if the thread had not queued
    // yet (and then gives it back, so the thread is served).
    model(3, || {
        let sem = Arc::new(Semaphore::new(0));
        let waiter = sem.clone();
        let t = thread::spawn(move || waiter.acquire().forget());
        sem.add_permits(1);
        if let Some(permit) = sem.try_acquire() {
            drop(permit);
        }
        t.join().unwrap();
        assert_eq!(sem.available_permits(), 0);
    });
}

#[test]
fn loom_semaphore_two_waiters_each_get_their_permit() {
    model(2, || {
        let sem = Arc::new(Semaphore::new(0));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let sem = sem.clone();
                thread::spawn(move || sem.acquire().forget())
            })
            .collect();
        sem.add_permits(2);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(sem.available_permits(), 0);
    });
}

#[test]
fn loom_rwlock_a_writer_excludes_a_reader() {
    model(3, || {
        let lock = Arc::new((RwLock::new(()), Guarded(Cell::new(0))));
        let reader = lock.clone();
        let t = thread::spawn(move || {
            let _read = reader.0.read().unwrap();
            reader.1.get()
        });
        {
            let _write = lock.0.write().unwrap();
            lock.1.bump();
        }
        let seen = t.join().unwrap();
        assert!(seen == 0 || seen == 1);
    });
}

#[test]
fn loom_condvar_a_notify_is_not_lost() {
    model(3, || {
        let pair = Arc::new((Mutex::new(false), Condvar::new()));
        let setter = pair.clone();
        let t = thread::spawn(move || {
            *setter.0.lock().unwrap() = true;
            setter.1.notify_one();
        });
        let mut ready = pair.0.lock().unwrap();
        while !*ready {
            ready = pair.1.wait(ready).unwrap();
        }
        drop(ready);
        t.join().unwrap();
    });
}

#[test]
fn loom_once_lock_runs_one_initialiser() {
    model(3, || {
        let cell = Arc::new((OnceLock::new(), Guarded(Cell::new(0))));
        let other = cell.clone();
        let init = |c: &(OnceLock<u32>, Guarded)| {
            *c.0.get_or_init(|| {
                c.1.bump();
                7
            })
        };
        let t = thread::spawn(move || init(&other));
        assert_eq!(init(&cell), 7);
        assert_eq!(t.join().unwrap(), 7);
        assert_eq!(cell.1.get(), 1);
    });
}

#[test]
fn loom_barrier_releases_both_with_one_leader() {
    model(3, || {
        let barrier = Arc::new(Barrier::new(2));
        let other = barrier.clone();
        let t = thread::spawn(move || other.wait().is_leader());
        let mine = barrier.wait().is_leader();
        let theirs = t.join().unwrap();
        assert!(mine != theirs);
    });
}

#[test]
fn loom_wait_group_waits_for_every_member() {
    model(3, || {
        let done = Arc::new(Guarded(Cell::new(0)));
        let wg = WaitGroup::new();
        let member = wg.clone();
        let counter = done.clone();
        let t = thread::spawn(move || {
            counter.bump();
            drop(member);
        });
        wg.wait();
        // The member's work is seen: its drop was ordered before the end
        // of the wait.
        assert_eq!(done.get(), 1);
        t.join().unwrap();
    });
}

#[test]
fn loom_once_lock_wait_sees_the_value_set() {
    model(3, || {
        let cell = Arc::new(OnceLock::new());
        let setter = cell.clone();
        let t = thread::spawn(move || setter.set(11).unwrap());
        assert_eq!(*cell.wait(), 11);
        t.join().unwrap();
    });
}

#[test]
fn loom_mpsc_messages_cross_in_order() {
    // std's face on the locked flavor, unbounded: the sender never waits,
    // the receiver waits for each message and gets them in order.
    model(3, || {
        let (tx, rx) = crate::sync::mpsc::channel::<u32>();
        let t = thread::spawn(move || {
            tx.send(1).unwrap();
            tx.send(2).unwrap();
        });
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(rx.recv(), Ok(2));
        assert!(rx.recv().is_err());
        t.join().unwrap();
    });
}
