//! Thread-locals: the one rule fibers add, and the tools that keep it.
//!
//! # The rule
//!
//! **A `thread_local!` initializer must not park the fiber.** No
//! `fibra::sleep`, socket, lock, channel, `join` or any other call of
//! fibra's that would park, directly or deep inside, while the value is
//! being made. Everything else about `thread_local!` works in fibers as it
//! does in threads.
//!
//! # Why
//!
//! The fibers of a thread share its thread-locals, and interleave: one may
//! park inside `KEY.with(..)` while another runs and uses `KEY` too. std's
//! `thread_local!` was written for code whose `with` calls nest on a
//! thread, and fibra keeps that sound wherever a library can:
//!
//! - Borrowing inside `with` and parking there is fine: the value stays
//!   where it is while the thread lives, and a fiber never moves to another
//!   thread, so the borrow stays valid.
//! - A runtime dropped while its thread destroys its thread-locals (a
//!   runtime kept in a `thread_local!`) leaks its fibers rather than resume
//!   one whose thread-local may be gone (see [`Runtime`](crate::Runtime)).
//!
//! The initializer is the one place a library cannot guard. If fiber A
//! parks inside the initializer of `KEY`, and fiber B then uses `KEY`, B
//! finds no value yet and runs the initializer again, stores its value,
//! and may park inside `with` holding a `&T` to it; when A's initializer
//! returns, std stores A's value and drops B's, which B still borrows: a
//! use after free, in safe code. std gives no way to see that a fiber is
//! inside an initializer and none to make a second initialisation wait. On
//! a plain thread, or in a `thread_local!` whose initializer never blocks,
//! nothing changes.
//!
//! Other stackful libraries meet the same hazard in other ways: `may` marks
//! its `spawn` `unsafe` for this family of problems and leaves the proof
//! to the caller; `corosensei` switches only through an explicit `Yielder`,
//! which a `thread_local!` initializer has no way to reach, so it never
//! meets the case — and its coroutines cannot block implicitly either.
//! fibra's calls do block implicitly (that is their point), so this rule
//! is the price, stated where users read it.
//!
//! # A value per thread, made by a blocking call
//!
//! A connection, a file, a fetched configuration: keep a
//! [`fibra::sync::OnceLock`](crate::sync::OnceLock) in the thread-local
//! instead of the value. Making the `OnceLock` does not park; filling it
//! does, inside `with`, which is allowed — and a second fiber that comes
//! meanwhile waits, parked, for the first one's value instead of making
//! its own.
//!
//! ```
//! use std::cell::Cell;
//! use std::time::Duration;
//! use fibra::sync::OnceLock;
//!
//! thread_local! {
//!     static CONNECTS: Cell<u32> = const { Cell::new(0) };
//!     // Not: static CONN: String = connect(); — that initializer parks.
//!     static CONN: OnceLock<String> = const { OnceLock::new() };
//! }
//!
//! fn connect() -> String {
//!     CONNECTS.with(|n| n.set(n.get() + 1));
//!     fibra::sleep(Duration::from_millis(5)); // the handshake
//!     "db:5432".to_string()
//! }
//!
//! fibra::run(|| {
//!     let users: Vec<_> = (0..3)
//!         .map(|_| fibra::spawn(|| CONN.with(|c| c.get_or_init(connect).clone())))
//!         .collect();
//!     for u in users {
//!         assert_eq!(u.join().unwrap(), "db:5432");
//!     }
//!     assert_eq!(CONNECTS.with(Cell::get), 1); // one connect for three users
//! });
//! ```
//!
//! For one value shared by the whole process, a `static`
//! [`OnceLock`](crate::sync::OnceLock) or
//! [`LazyLock`](crate::sync::LazyLock) does the same across threads and
//! runtimes.
//!
//! ```
//! use std::time::Duration;
//! use fibra::sync::LazyLock;
//!
//! static CONFIG: LazyLock<String> = LazyLock::new(|| {
//!     fibra::sleep(Duration::from_millis(5)); // fetching it...
//!     "retries=3".to_string()
//! });
//!
//! fibra::run(|| {
//!     let readers: Vec<_> = (0..3).map(|_| fibra::spawn(|| CONFIG.len())).collect();
//!     for r in readers {
//!         assert_eq!(r.join().unwrap(), 9);
//!     }
//! });
//! ```
//!
//! On a runtime of several workers, a value per worker can also be made
//! once by a fiber started there with `spawn_on`, and handed to the
//! worker's other fibers.
//!
//! # A value per fiber: `fiber_local!`
//!
//! What tokio calls a task-local and other runtimes a coroutine-local:
//! [`fiber_local!`](crate::fiber_local) gives each fiber its own value,
//! made on its first use and dropped when the fiber ends (or is
//! cancelled). Code that is not in a spawned fiber — `block_on`'s closure,
//! a plain thread — gets its thread's value.
//!
//! ```
//! use std::cell::RefCell;
//!
//! fibra::fiber_local! {
//!     static TRAIL: RefCell<Vec<&'static str>> = RefCell::new(Vec::new());
//! }
//!
//! fn note(step: &'static str) {
//!     TRAIL.with(|t| t.borrow_mut().push(step));
//! }
//!
//! fibra::run(|| {
//!     let a = fibra::spawn(|| {
//!         note("a1");
//!         fibra::yield_now(); // b runs here, with a trail of its own
//!         note("a2");
//!         TRAIL.with(|t| t.borrow().clone())
//!     });
//!     let b = fibra::spawn(|| {
//!         note("b1");
//!         TRAIL.with(|t| t.borrow().clone())
//!     });
//!     assert_eq!(a.join().unwrap(), ["a1", "a2"]);
//!     assert_eq!(b.join().unwrap(), ["b1"]);
//! });
//! ```
//!
//! A `fiber_local!` initializer may park: each fiber makes its own value,
//! so there is no second fiber to race with.
