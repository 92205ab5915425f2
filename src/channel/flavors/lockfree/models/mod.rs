//! loom models of the lock-free storages' hand-over, run through every
//! interleaving of their threads up to a preemption bound:
//! `RUSTFLAGS="--cfg loom" cargo test --release --lib -- loom`.
//!
//! Each thread claims, and yields to loom when the storage is not ready,
//! as a fiber would park: what the models check is the claim and publish
//! protocol itself. Every message is received once, in order from each
//! sender; holes are passed over; a disconnect is final (a receive that has
//! seen it never sees a message after); and (the list) every block is
//! freed once, by loom's own allocation tracking.

use loom::thread;

use super::{Claim, NoClaim, Slots};
use crate::atomic::model;

mod array;
mod list;
mod waits;

/// Claims a place for a send, yielding while there is no room; `None`
/// once disconnected.
fn claim_send<S: Slots>(slots: &S) -> Option<Claim> {
    loop {
        match slots.start_send(false) {
            Ok(claim) => return Some(claim),
            Err(NoClaim::NotReady) => thread::yield_now(),
            Err(NoClaim::Disconnected) => return None,
        }
    }
}

/// Sends `v`, yielding while there is no room; false once disconnected.
fn send<S: Slots<Message = u32>>(slots: &S, v: u32) -> bool {
    let Some(claim) = claim_send(slots) else {
        return false;
    };
    // SAFETY: a claim of this storage, made for this send, completed once.
    unsafe { slots.write(claim, v) };
    true
}

/// Receives, yielding while the storage is empty; `None` once it is
/// disconnected and drained. `wait_for_writers` as `Slots::start_recv`'s.
fn recv_with<S: Slots<Message = u32>>(slots: &S, wait_for_writers: bool) -> Option<u32> {
    loop {
        let mut freed = false;
        match slots.start_recv(wait_for_writers, &mut freed) {
            // SAFETY: a claim of this storage, made for this receive.
            Ok(claim) => return Some(unsafe { slots.read(claim) }),
            Err(NoClaim::NotReady) => thread::yield_now(),
            Err(NoClaim::Disconnected) => return None,
        }
    }
}

/// A receive as a receiver makes it (waiting for a claimed place's writer).
fn recv<S: Slots<Message = u32>>(slots: &S) -> Option<u32> {
    recv_with(slots, true)
}
