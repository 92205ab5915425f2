//! The clock and the timer wheel: plain data structures, no runtime in
//! them, at the bottom of the house.
//!
//! Every layer that computes a deadline reads [`clock`] (`u64` nanoseconds
//! of `CLOCK_MONOTONIC`); the scheduler keeps fibers' deadlines in a
//! [`wheel`] and the reactor keeps async tasks' timers in another. What a
//! user calls — `sleep`, `sleep_until`, `timeout`, `Sleep` — lives in
//! `time/`, above the scheduler, and parks through it.

pub(crate) mod clock;
pub(crate) mod wheel;
