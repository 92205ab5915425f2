//! `Disconnected` is final: once a receive has been told a channel is
//! over, nothing comes out of it afterwards — not even a message that a
//! `select` had taken and gave back because its receiver unwound before
//! using it. That message goes down with the receiver that got it, as one
//! it had received would.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use fibra::channel::{Receiver, Select, Sender, TryRecvError, bounded, unbounded};

/// A message that counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A select on `r` takes the message; the sender goes; then another
/// receiver asks (a thread: on a bounded channel its receive waits for the
/// taken place to be completed) while the select's receiver unwinds
/// before it uses its message. Whatever the order: once the asker is told
/// `Disconnected`, the channel stays over, and the message is received or
/// dropped exactly once.
fn taken_then_given_back_after_the_end(s: Sender<Counted>, r: Receiver<Counted>) {
    let drops = Arc::new(AtomicUsize::new(0));
    s.send(Counted(drops.clone())).unwrap();
    let other = r.clone();
    let mut s = Some(s);
    let mut asker = None;
    let unwound = catch_unwind(AssertUnwindSafe(|| {
        let mut sel = Select::new();
        sel.recv(&r);
        let _op = sel.select();
        drop(s.take());
        // Only now the other receiver asks (before, it could take the
        // message the select waits for).
        asker = Some(std::thread::spawn(move || {
            loop {
                match other.try_recv() {
                    Ok(m) => {
                        drop(m);
                        break;
                    }
                    Err(TryRecvError::Disconnected) => break,
                    Err(TryRecvError::Empty) => std::thread::yield_now(),
                }
            }
            // Told: over for good.
            other
        }));
        // Let the asker reach the end, where it can (an unbounded channel
        // tells it while the message is taken).
        std::thread::sleep(std::time::Duration::from_millis(20));
        panic!("the select's receiver unwinds before it uses its message");
    }));
    assert!(unwound.is_err());
    let other = asker.take().expect("spawned").join().unwrap();
    assert_eq!(other.try_recv().err(), Some(TryRecvError::Disconnected));
    assert_eq!(r.try_recv().err(), Some(TryRecvError::Disconnected));
    assert!(other.recv().is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 1, "received or dropped, once");
}

#[test]
fn disconnected_is_final_after_a_select_gives_back_on_threads() {
    for _ in 0..20 {
        let (s, r) = bounded(1);
        taken_then_given_back_after_the_end(s, r);
        let (s, r) = bounded(4);
        taken_then_given_back_after_the_end(s, r);
        let (s, r) = unbounded();
        taken_then_given_back_after_the_end(s, r);
    }
}

/// The unbounded channel tells the end while the message is taken: the
/// message then goes down with the select's receiver.
#[test]
fn the_end_told_while_a_select_holds_the_last_message_stays() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (s, r) = unbounded();
    s.send(Counted(drops.clone())).unwrap();
    let other = r.clone();
    let unwound = catch_unwind(AssertUnwindSafe(|| {
        let mut sel = Select::new();
        sel.recv(&r);
        let _op = sel.select();
        drop(s);
        assert_eq!(other.try_recv().err(), Some(TryRecvError::Disconnected));
        panic!("unwinds");
    }));
    assert!(unwound.is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(other.try_recv().err(), Some(TryRecvError::Disconnected));
}

/// A rendezvous: the select is handed the message by a waiting sender,
/// which then goes; the end told meanwhile stays.
#[test]
fn a_rendezvous_end_stays_after_a_select_gives_back() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (s, r) = bounded::<Counted>(0);
    let d = drops.clone();
    let sender = std::thread::spawn(move || s.send(Counted(d)).is_ok());
    let other = r.clone();
    let unwound = catch_unwind(AssertUnwindSafe(|| {
        let mut sel = Select::new();
        sel.recv(&r);
        let _op = sel.select();
        assert!(sender.join().unwrap(), "handed over");
        assert_eq!(other.try_recv().err(), Some(TryRecvError::Disconnected));
        panic!("unwinds");
    }));
    assert!(unwound.is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(other.try_recv().err(), Some(TryRecvError::Disconnected));
}

/// The same in fibers of one thread: a fiber asks while the root holds
/// the message.
#[test]
fn disconnected_is_final_in_fibers() {
    let rt = fibra::Runtime::new().unwrap();
    rt.block_on(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let (s, r) = unbounded();
        s.send(Counted(drops.clone())).unwrap();
        let other = r.clone();
        let unwound = catch_unwind(AssertUnwindSafe(|| {
            let mut sel = Select::new();
            sel.recv(&r);
            let _op = sel.select();
            drop(s);
            let asker = fibra::spawn(move || {
                let told = other.try_recv().err();
                (told, other)
            });
            let (told, other) = asker.join().unwrap();
            assert_eq!(told, Some(TryRecvError::Disconnected));
            std::panic::resume_unwind(Box::new(other));
        }));
        let other = *unwound
            .unwrap_err()
            .downcast::<Receiver<Counted>>()
            .unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert_eq!(other.try_recv().err(), Some(TryRecvError::Disconnected));
    });
}
