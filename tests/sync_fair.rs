//! Fair without preemption, for `sync`: a fiber that polls a lock or a
//! cell, waiting for another fiber of its own thread to let go or set it,
//! lets that fiber run (`OnceLock::get`, `Mutex::try_lock`,
//! `RwLock::try_read` / `try_write`, `Semaphore::try_acquire`), as a
//! failed channel `try_recv` does (`scheduler/fair.rs`). Found by std's own
//! `sync_once_cell_does_not_leak_partially_constructed_boxes` run in fibers
//! (`tests/std_sync`). Each case runs on a thread of its own and must end
//! within a generous bound: before, each spun forever.

mod util;

use std::sync::Arc;
use std::time::Duration;

use fibra::sync::{Mutex, OnceLock, RwLock, Semaphore};

/// Runs `case` in a runtime on a thread of its own; fails if it has not
/// ended within 60 s (`util::bounded`: a hang leaves the thread behind).
fn ends(_case_name: &str, case: impl FnOnce() + Send + 'static) {
    util::bounded(Duration::from_secs(60), move || fibra::run(case));
}

#[test]
fn a_fiber_polling_once_lock_get_lets_the_setter_run() {
    ends("OnceLock::get", || {
        static CELL: OnceLock<u32> = OnceLock::new();
        let reader = fibra::spawn(|| {
            loop {
                if let Some(v) = CELL.get() {
                    return *v;
                }
            }
        });
        fibra::spawn(|| CELL.set(7).unwrap());
        assert_eq!(reader.join().unwrap(), 7);
    });
}

#[test]
fn a_fiber_spinning_on_try_lock_lets_the_holder_unlock() {
    ends("Mutex::try_lock", || {
        let m = Arc::new(Mutex::new(0));
        let held = m.clone();
        // The holder takes the lock first, then waits a turn.
        let holder = fibra::spawn(move || {
            let mut g = held.lock().unwrap();
            fibra::yield_now();
            *g = 1;
        });
        fibra::yield_now(); // the holder has the lock now
        let got = loop {
            if let Ok(g) = m.try_lock() {
                break *g;
            }
        };
        assert_eq!(got, 1);
        holder.join().unwrap();
    });
}

#[test]
fn a_fiber_spinning_on_try_read_and_try_write_lets_the_holder_go() {
    ends("RwLock::try_read/try_write", || {
        let l = Arc::new(RwLock::new(0));
        let held = l.clone();
        let writer = fibra::spawn(move || {
            let mut g = held.write().unwrap();
            fibra::yield_now();
            *g = 1;
        });
        fibra::yield_now();
        let read = loop {
            if let Ok(g) = l.try_read() {
                break *g;
            }
        };
        assert_eq!(read, 1);
        writer.join().unwrap();
        let held = l.clone();
        let reader = fibra::spawn(move || {
            let g = held.read().unwrap();
            fibra::yield_now();
            *g
        });
        fibra::yield_now();
        loop {
            if let Ok(mut g) = l.try_write() {
                *g = 2;
                break;
            }
        }
        assert_eq!(reader.join().unwrap(), 1);
    });
}

#[test]
fn a_fiber_spinning_on_try_acquire_lets_the_holder_release() {
    ends("Semaphore::try_acquire", || {
        let s = Arc::new(Semaphore::new(1));
        let held = s.clone();
        let holder = fibra::spawn(move || {
            let p = held.try_acquire().unwrap();
            fibra::yield_now();
            drop(p);
        });
        fibra::yield_now();
        loop {
            if s.try_acquire().is_some() {
                break;
            }
        }
        holder.join().unwrap();
    });
}
