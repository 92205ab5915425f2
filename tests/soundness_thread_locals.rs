//! Fibers and std's thread-locals: a fiber parked inside `LocalKey::with`
//! must not be resumed after the thread-local it borrows was destroyed.
//!
//! Each scenario runs in a child process, where reading a freed value may
//! crash rather than pass.

mod util;

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use util::{assert_child_ok, is_child};

/// Set when `Conn`'s value is destroyed.
static CONN_DESTROYED: AtomicBool = AtomicBool::new(false);
/// Counts code that ran with a borrow of `Conn` after it was destroyed.
static USED_AFTER_DESTROY: AtomicUsize = AtomicUsize::new(0);
/// Set when the runtime in `RT` is dropped.
static RUNTIME_DROPPED: AtomicBool = AtomicBool::new(false);

struct Conn {
    name: String,
}

impl Drop for Conn {
    fn drop(&mut self) {
        CONN_DESTROYED.store(true, Ordering::SeqCst);
        self.name.clear();
        self.name.push_str("destroyed");
    }
}

/// A runtime that says when it is dropped.
struct Held(fibra::Runtime);

impl Drop for Held {
    fn drop(&mut self) {
        RUNTIME_DROPPED.store(true, Ordering::SeqCst);
    }
}

thread_local! {
    static RT: Held = Held(fibra::Runtime::new().unwrap());
    static CONN: RefCell<Conn> = RefCell::new(Conn { name: "conn".into() });
}

/// The destructor of a fiber's frame, run if the fiber is unwound.
struct UsesConn<'a>(&'a RefCell<Conn>);

impl Drop for UsesConn<'_> {
    fn drop(&mut self) {
        if CONN_DESTROYED.load(Ordering::SeqCst) {
            USED_AFTER_DESTROY.fetch_add(1, Ordering::SeqCst);
        }
        // The read a real program would make (freed memory if `CONN` is gone).
        assert!(!self.0.borrow().name.is_empty());
    }
}

#[test]
fn a_runtime_dropped_at_thread_exit_leaks_fibers_that_borrow_a_dead_thread_local() {
    const NAME: &str =
        "a_runtime_dropped_at_thread_exit_leaks_fibers_that_borrow_a_dead_thread_local";
    if !is_child(NAME) {
        return assert_child_ok(NAME);
    }
    let parked = std::thread::spawn(|| {
        // `RT` is registered first (after its initializer), `CONN` inside
        // the fiber: std destroys `CONN` first, then `RT`, whose drop
        // would unwind the fiber into the freed `Conn`.
        RT.with(|rt| {
            rt.0.block_on(|| {
                fibra::spawn(|| {
                    CONN.with(|conn| {
                        let _uses = UsesConn(conn);
                        fibra::sleep(Duration::from_secs(3600));
                    })
                });
                fibra::yield_now(); // it parks, inside `CONN.with`
                1
            })
        })
    })
    .join()
    .unwrap();
    assert_eq!(parked, 1);
    assert!(CONN_DESTROYED.load(Ordering::SeqCst), "CONN was destroyed");
    assert!(RUNTIME_DROPPED.load(Ordering::SeqCst), "RT was dropped");
    assert_eq!(
        USED_AFTER_DESTROY.load(Ordering::SeqCst),
        0,
        "a fiber ran with a borrow of a destroyed thread-local"
    );
    println!("CHILD OK");
}

#[test]
fn a_runtime_dropped_at_thread_exit_with_nothing_borrowed_still_drops_cleanly() {
    const NAME: &str = "a_runtime_dropped_at_thread_exit_with_nothing_borrowed_still_drops_cleanly";
    if !is_child(NAME) {
        return assert_child_ok(NAME);
    }
    thread_local! {
        static OWN_RT: fibra::Runtime = fibra::Runtime::new().unwrap();
    }
    // Fibers that finished leave nothing to leak; the thread exits normally.
    let sum = std::thread::spawn(|| {
        OWN_RT.with(|rt| {
            rt.block_on(|| {
                let hs: Vec<_> = (0..10).map(|i| fibra::spawn(move || i)).collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum::<i32>()
            })
        })
    })
    .join()
    .unwrap();
    assert_eq!(sum, 45);
    println!("CHILD OK");
}

#[test]
fn driving_a_runtime_with_fibers_during_thread_local_destruction_panics() {
    const NAME: &str = "driving_a_runtime_with_fibers_during_thread_local_destruction_panics";
    if !is_child(NAME) {
        return assert_child_ok(NAME);
    }
    static REFUSED: AtomicBool = AtomicBool::new(false);
    struct DrivesAtExit(fibra::Runtime);
    impl Drop for DrivesAtExit {
        fn drop(&mut self) {
            let refused =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.0.block_on(|| ())))
                    .is_err();
            REFUSED.store(refused, Ordering::SeqCst);
        }
    }
    thread_local! {
        static DRIVER: RefCell<Option<DrivesAtExit>> = const { RefCell::new(None) };
    }
    std::thread::spawn(|| {
        // Registered before the runtime is first left with a fiber: it is
        // destroyed after fibra's sentinel.
        DRIVER.with(|d| {
            let rt = fibra::Runtime::new().unwrap();
            rt.block_on(|| drop(fibra::spawn(|| fibra::sleep(Duration::from_secs(3600)))));
            *d.borrow_mut() = Some(DrivesAtExit(rt));
        });
    })
    .join()
    .unwrap();
    assert!(
        REFUSED.load(Ordering::SeqCst),
        "block_on should have panicked"
    );
    println!("CHILD OK");
}
