//! The word a wait is chosen with: [`Selection`], the state of one
//! [`Context`](crate::channel::context::Context), and [`Selected`], what it
//! says once a wait has ended.
//!
//! A wait starts `WAITING`. A notifier takes it with `claim` (`WAITING` →
//! `CLAIMED`, a compare-exchange only one notifier wins), writes what it
//! hands over (a packet), and ends with `finish` (`CLAIMED` → the selected
//! operation, release), never parking in between. The waiter reads the word
//! with `selected` (acquire: what was handed over is seen whole) and
//! spins a moment when it finds `CLAIMED`. A waiter that gives up aborts
//! (`WAITING` → `ABORTED`); if a notifier claimed first, the abort returns
//! that notifier's selection instead, and the waiter honours it.
//!
//! Apart from the rest of the context (its unparker belongs to the
//! scheduler), so that loom can check it on plain threads: the models at
//! the end (`RUSTFLAGS="--cfg loom" cargo test --release --lib -- loom`).

use crate::atomic::{AtomicUsize, Ordering, spin_loop, yield_now};

const WAITING: usize = 0;
const CLAIMED: usize = 1;
const ABORTED: usize = 2;
const DISCONNECTED: usize = 3;
/// `OPERATION + i`: operation `i` of the wait was selected.
const OPERATION: usize = 4;

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Selected {
    /// Not yet.
    Waiting,
    /// The waiter gave up (or was woken for nothing), nothing selected.
    Aborted,
    /// A channel of the wait lost its other side.
    Disconnected,
    /// Operation `i` completed (a message handed over) or may go ahead (a
    /// send's room reserved, a readiness seen).
    Operation(usize),
}

impl Selected {
    #[inline]
    fn from_word(word: usize) -> Selected {
        match word {
            WAITING | CLAIMED => Selected::Waiting,
            ABORTED => Selected::Aborted,
            DISCONNECTED => Selected::Disconnected,
            i => Selected::Operation(i - OPERATION),
        }
    }

    fn word(self) -> usize {
        match self {
            Selected::Waiting => WAITING,
            Selected::Aborted => ABORTED,
            Selected::Disconnected => DISCONNECTED,
            Selected::Operation(i) => OPERATION + i,
        }
    }
}

/// The state word of one wait (see the module docs).
pub(crate) struct Selection {
    word: AtomicUsize,
}

impl Selection {
    #[inline]
    pub(crate) fn new() -> Selection {
        Selection {
            word: AtomicUsize::new(WAITING),
        }
    }

    /// Takes the wait for a hand-over; `finish` must follow without a park
    /// in between.
    #[inline]
    pub(crate) fn claim(&self) -> bool {
        self.word
            .compare_exchange(WAITING, CLAIMED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Ends a hand-over begun by `claim`: the waiter may look now.
    #[inline]
    pub(crate) fn finish(&self, selected: Selected) {
        self.word.store(selected.word(), Ordering::Release);
    }

    /// Whether a hand-over holds the wait (between `claim` and `finish`).
    #[inline]
    pub(crate) fn is_claimed(&self) -> bool {
        self.word.load(Ordering::Relaxed) == CLAIMED
    }

    /// Whether the wait still waits (a notifier may choose it).
    #[inline]
    pub(crate) fn is_waiting(&self) -> bool {
        self.word.load(Ordering::Relaxed) == WAITING
    }

    /// The selection, once made: waits out a hand-over in progress.
    #[inline]
    pub(crate) fn selected(&self) -> Selected {
        let word = self.word.load(Ordering::Acquire);
        if word != CLAIMED {
            return Selected::from_word(word);
        }
        self.selected_after_claim()
    }

    /// [`Selection::selected`] once a hand-over was seen in progress.
    #[inline(never)]
    fn selected_after_claim(&self) -> Selected {
        let mut spins = 0u32;
        loop {
            let word = self.word.load(Ordering::Acquire);
            if word != CLAIMED {
                return Selected::from_word(word);
            }
            // A notifier on another thread is between `claim` and `finish`,
            // a few instructions under its lock.
            spins += 1;
            if spins < 64 {
                spin_loop();
            } else {
                yield_now();
            }
        }
    }

    /// Makes a wait that ended wait again (a readiness fd's watcher: see
    /// `Context::reset`).
    #[inline]
    pub(crate) fn reset(&self) {
        self.word.store(WAITING, Ordering::Relaxed);
    }

    /// Gives up waiting: `Aborted`, or the selection a notifier made first.
    #[inline]
    pub(crate) fn abort(&self) -> Selected {
        match self
            .word
            .compare_exchange(WAITING, ABORTED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Selected::Aborted,
            Err(_) => self.selected(),
        }
    }
}

/// Models of the selection word on plain threads, each checked through
/// every interleaving (up to a preemption bound): one notifier wins a wait,
/// what it hands over is seen whole once its selection is, and an abort
/// either wins outright or honours the selection made first.
#[cfg(all(test, loom))]
mod loom_models {
    use loom::sync::Arc;
    use loom::thread;

    use super::*;
    use crate::atomic::{Cell, model};

    /// A wait and the packet a notifier hands over into it.
    struct Wait {
        selection: Selection,
        packet: Cell<u32>,
    }

    impl Wait {
        fn new() -> Arc<Wait> {
            Arc::new(Wait {
                selection: Selection::new(),
                packet: Cell::new(0),
            })
        }

        /// A notifier's hand-over: claim, write the packet, finish.
        fn hand_over(&self, value: u32, oper: usize) -> bool {
            if !self.selection.claim() {
                return false;
            }
            // SAFETY: the claim gives the packet to this notifier alone
            // until `finish`.
            self.packet.with_mut(|p| unsafe { *p = value });
            self.selection.finish(Selected::Operation(oper));
            true
        }

        /// The waiter's read of the packet, after its selection was seen.
        fn packet(&self) -> u32 {
            // SAFETY: read only after the selection (acquire) that the
            // hand-over's `finish` (release) published.
            self.packet.with(|p| unsafe { *p })
        }
    }

    #[test]
    fn loom_selection_a_handover_is_seen_whole() {
        model(3, || {
            let wait = Wait::new();
            let notifier = wait.clone();
            let t = thread::spawn(move || assert!(notifier.hand_over(42, 0)));
            // The waiter looks until it is chosen (as a park would end).
            let selected = loop {
                match wait.selection.selected() {
                    Selected::Waiting => thread::yield_now(),
                    s => break s,
                }
            };
            assert_eq!(selected, Selected::Operation(0));
            assert_eq!(wait.packet(), 42);
            t.join().unwrap();
        });
    }

    #[test]
    fn loom_selection_one_notifier_wins_a_wait() {
        model(3, || {
            let wait = Wait::new();
            let threads: Vec<_> = [(1, 0), (2, 1)]
                .into_iter()
                .map(|(value, oper)| {
                    let wait = wait.clone();
                    thread::spawn(move || wait.hand_over(value, oper))
                })
                .collect();
            let won: Vec<bool> = threads.into_iter().map(|t| t.join().unwrap()).collect();
            assert_eq!(won.iter().filter(|w| **w).count(), 1);
            // The winner's operation, and its packet.
            match wait.selection.selected() {
                Selected::Operation(0) => assert_eq!(wait.packet(), 1),
                Selected::Operation(1) => assert_eq!(wait.packet(), 2),
                other => panic!("selected {other:?}"),
            }
        });
    }

    #[test]
    fn loom_selection_an_abort_wins_or_honours_the_handover() {
        model(3, || {
            let wait = Wait::new();
            let notifier = wait.clone();
            let t = thread::spawn(move || notifier.hand_over(7, 0));
            // The waiter gives up (a deadline, a cancel) while the notifier
            // may be anywhere in its hand-over: the abort waits out a claim.
            let selected = wait.selection.abort();
            let handed = t.join().unwrap();
            match selected {
                Selected::Aborted => assert!(!handed, "a hand-over into an aborted wait"),
                Selected::Operation(0) => {
                    assert!(handed);
                    assert_eq!(wait.packet(), 7);
                }
                other => panic!("selected {other:?}"),
            }
            // Final either way: a later look says the same.
            assert_eq!(wait.selection.selected(), selected);
        });
    }

    #[test]
    fn loom_selection_a_disconnect_and_a_handover_race() {
        // A channel's disconnect selects every wait in its line as
        // disconnected while another channel of the same select hands a
        // message over: one of the two, seen by the waiter as it was made.
        model(3, || {
            let wait = Wait::new();
            let closer = wait.clone();
            let t = thread::spawn(move || {
                if closer.selection.claim() {
                    closer.selection.finish(Selected::Disconnected);
                    true
                } else {
                    false
                }
            });
            let handed = wait.hand_over(9, 1);
            let closed = t.join().unwrap();
            assert!(handed != closed);
            match wait.selection.selected() {
                Selected::Disconnected => assert!(closed),
                Selected::Operation(1) => assert_eq!(wait.packet(), 9),
                other => panic!("selected {other:?}"),
            }
        });
    }

    #[test]
    fn loom_selection_a_reset_wait_is_chosen_again() {
        // A readiness fd's watcher: fired once, taken out of its line,
        // reset and registered again; the next notifier's hand-over is
        // seen as a new selection.
        model(3, || {
            let wait = Wait::new();
            assert!(wait.hand_over(1, 0));
            assert_eq!(wait.selection.selected(), Selected::Operation(0));
            wait.selection.reset();
            let notifier = wait.clone();
            let t = thread::spawn(move || notifier.hand_over(2, 3));
            let selected = loop {
                match wait.selection.selected() {
                    Selected::Waiting => thread::yield_now(),
                    s => break s,
                }
            };
            assert_eq!(selected, Selected::Operation(3));
            assert_eq!(wait.packet(), 2);
            assert!(t.join().unwrap());
        });
    }
}
