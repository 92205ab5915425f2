//! Guides: fibra explained from where you come from.
//!
//! These modules hold no code. Each is a chapter to read, and every example
//! in it is a doctest that runs.
//!
//! - [`from_std_threads`]: you write `std::thread` code, and want ten
//!   thousand of your threads on one. Nearly every name stays; what changes
//!   is a runtime around them.
//! - [`from_tokio`]: you write async Rust on tokio. The `.await`s go, and
//!   each tokio piece has a fibra twin (or a reason it has none).
//! - [`from_go`]: you write goroutines, channels and `select`. fibra's
//!   fibers and [`channel`](crate::channel) are the closest Rust gets,
//!   with a few differences worth knowing.
//! - [`blocking`]: what stalls a runtime's thread, how fibra tells you, and
//!   what to use instead.
//! - [`thread_locals`]: the one rule that fibers add to `thread_local!`,
//!   and the tools that make it easy to keep.
//! - [`embedding`]: fibra's loop inside yours (a `poll` or epoll loop, a
//!   game's frames, glib, libuv, calloop): what `turn`, `turn_with_budget`,
//!   `block_on` and the runtime's fd guarantee.
//!
//! The crate's front page has the [guarantees](crate#guarantees) and the
//! details of the [`hook` feature](crate#the-hook-feature).

pub mod blocking;
pub mod embedding;
pub mod from_go;
pub mod from_std_threads;
pub mod from_tokio;
pub mod thread_locals;
