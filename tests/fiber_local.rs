//! `fibra::fiber_local!`: one value per fiber, dropped when it ends.

mod util;

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

static DROPPED: AtomicUsize = AtomicUsize::new(0);

struct Counted(u32);

impl Drop for Counted {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}

fibra::fiber_local! {
    static VALUE: Cell<u32> = Cell::new(0);
    static COUNTED: Counted = Counted(5);
}

#[test]
fn values_are_per_fiber_and_dropped_at_the_end_and_on_cancel() {
    let before = DROPPED.load(Ordering::SeqCst);
    fibra::run(|| {
        let a = fibra::spawn(|| {
            VALUE.with(|v| v.set(1));
            COUNTED.with(|c| assert_eq!(c.0, 5));
            fibra::yield_now();
            VALUE.with(Cell::get)
        });
        let b = fibra::spawn(|| {
            VALUE.with(|v| v.set(2));
            fibra::yield_now();
            VALUE.with(Cell::get)
        });
        assert_eq!((a.join().unwrap(), b.join().unwrap()), (1, 2));
        assert_eq!(
            DROPPED.load(Ordering::SeqCst),
            before + 1,
            "dropped at its end"
        );
        // The root has the thread's value, untouched by the fibers.
        assert_eq!(VALUE.with(Cell::get), 0);

        let c = fibra::spawn(|| {
            COUNTED.with(|_| ());
            fibra::sleep(Duration::from_secs(60));
        });
        fibra::yield_now();
        c.cancel();
        assert!(c.join().unwrap_err().is_cancelled());
        assert_eq!(
            DROPPED.load(Ordering::SeqCst),
            before + 2,
            "dropped on cancel"
        );
    });
}

struct Reenter;

impl Drop for Reenter {
    fn drop(&mut self) {
        // During the fiber's teardown: no access, and no freed memory seen.
        assert!(VALUE.try_with(|_| ()).is_err());
        // Other fibra calls work from here.
        drop(fibra::spawn(|| ()));
    }
}

fibra::fiber_local!(static REENTER: Reenter = Reenter);

#[test]
fn a_destructor_that_uses_fiber_locals_gets_an_access_error() {
    fibra::run(|| {
        let h = fibra::spawn(|| {
            VALUE.with(|v| v.set(3));
            REENTER.with(|_| ());
        });
        h.join().unwrap();
    });
}

#[test]
fn an_initializer_may_park_and_use_other_keys() {
    fibra::fiber_local!(static SLOW: u32 = {
        fibra::sleep(Duration::from_millis(5));
        VALUE.with(|v| v.set(9));
        42
    });
    fibra::run(|| {
        let hs: Vec<_> = (0..3)
            .map(|_| fibra::spawn(|| (SLOW.with(|s| *s), VALUE.with(Cell::get))))
            .collect();
        for h in hs {
            assert_eq!(h.join().unwrap(), (42, 9));
        }
    });
}

#[test]
fn try_current_is_none_outside_a_runtime() {
    assert!(fibra::try_current().is_none());
    fibra::run(|| {
        let h = fibra::spawn(|| fibra::try_current().map(|f| f.id()));
        let id = h.fiber().id();
        assert_eq!(h.join().unwrap(), Some(id));
    });
}
