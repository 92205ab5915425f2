//! loom models of what a `select` gives back: a receive it was handed or
//! claimed but whose receiver unwound before using it. The end of a
//! channel is final however that give-back interleaves with the sender
//! going and another receiver being told `Disconnected`: nothing comes out
//! of a channel after a receive was told it is over, and the message is
//! received or dropped exactly once.
//! (`RUSTFLAGS="--cfg loom" cargo test --release --lib -- loom`.)
//!
//! The bug these catch was planted and seen: with `give_back` ignoring
//! the told end (`Returned::over`, `Inner::over`), every model below
//! fails.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use loom::thread;

use crate::atomic::model;
use crate::channel::{Receiver, Select, Sender, TryRecvError, bounded, unbounded};

/// A message that counts its drops (read only after every thread ended).
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Runs `f` as a receiver that unwinds holding a selected operation.
fn unwinding(f: impl FnOnce()) {
    let unwound = catch_unwind(AssertUnwindSafe(f));
    assert!(unwound.is_err(), "the receiver unwinds");
}

/// The message is sent and its sender goes; a select on `r` takes it;
/// another receiver asks (in a thread) while the select's receiver
/// unwinds. Once the asker is told `Disconnected`, the end stays.
fn given_back_while_another_asks(make: fn() -> (Sender<Counted>, Receiver<Counted>)) {
    model(2, move || {
        let drops = Arc::new(AtomicUsize::new(0));
        let (s, r) = make();
        s.send(Counted(drops.clone())).unwrap();
        drop(s);
        let other = r.clone();
        let mut sel = Select::new_biased();
        sel.recv(&r);
        let op = sel.select();
        let asker = thread::spawn(move || {
            let got = match other.try_recv() {
                Ok(m) => {
                    drop(m);
                    true
                }
                Err(TryRecvError::Disconnected) => false,
                Err(TryRecvError::Empty) => unreachable!("disconnected before"),
            };
            // Told (or served): over for good.
            assert_eq!(other.try_recv().err(), Some(TryRecvError::Disconnected));
            got
        });
        unwinding(move || {
            let _op = op;
            panic!("the select's receiver unwinds before it uses its message");
        });
        asker.join().unwrap();
        assert_eq!(r.try_recv().err(), Some(TryRecvError::Disconnected));
        assert_eq!(drops.load(Ordering::SeqCst), 1, "received or dropped, once");
    });
}

#[test]
fn loom_select_give_back_after_the_end_unbounded() {
    given_back_while_another_asks(unbounded);
}

#[test]
fn loom_select_give_back_after_the_end_bounded() {
    given_back_while_another_asks(|| bounded(1));
}

#[test]
fn loom_select_give_back_after_the_end_rendezvous() {
    // A sender thread hands the message to the select and goes; the
    // select's receiver is told the end by another receive of its own,
    // then unwinds: the message goes down with it.
    model(3, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let (s, r) = bounded::<Counted>(0);
        let d = drops.clone();
        let sender = thread::spawn(move || s.send(Counted(d)).is_ok());
        let other = r.clone();
        unwinding(|| {
            let mut sel = Select::new_biased();
            sel.recv(&r);
            let _op = sel.select();
            assert!(sender.join().unwrap(), "handed over");
            assert_eq!(other.try_recv().err(), Some(TryRecvError::Disconnected));
            panic!("unwinds");
        });
        assert_eq!(other.try_recv().err(), Some(TryRecvError::Disconnected));
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped with its receiver");
    });
}
