//! The queue behind `mpsc` and `oneshot`: a FIFO of messages, a line of
//! parked receivers and a line of parked senders, under one lock.
//!
//! # Invariant
//!
//! - A receiver is parked only while there is nothing to take: the queue
//!   is empty and no sender is parked. So a sender that finds a parked
//!   receiver hands its message straight into that receiver's node.
//! - A sender is parked only while the queue is full (for a rendezvous
//!   channel, of capacity 0, always). Its message waits in its node; a
//!   receiver that takes from the queue moves the first parked sender's
//!   message in behind, keeping FIFO order, and wakes it.
//! - Either line is woken when the other side is gone: receivers find their
//!   node empty, senders find their message still in theirs.

use std::collections::VecDeque;
use std::sync::mpsc::{RecvError, RecvTimeoutError, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex as InnerLock};

use crate::scheduler::park::Unparker;
use crate::sync::waiters::{Node, WaitList, Wakeups, Woken, lock, park_until_served};
use crate::timer::clock;

pub(crate) struct Chan<T> {
    state: InnerLock<State<T>>,
}

struct State<T> {
    queue: VecDeque<T>,
    /// `None`: unbounded.
    capacity: Option<usize>,
    senders: usize,
    receiver_alive: bool,
    receivers: WaitList<Option<T>>,
    blocked_senders: WaitList<Option<T>>,
}

impl<T> State<T> {
    /// The next message, and the sender to wake whose message moved up.
    fn take(&mut self) -> Option<(T, Option<Unparker>)> {
        if let Some(message) = self.queue.pop_front() {
            let moved = self.blocked_senders.pop_front(|slot| slot.take());
            let wake = moved.map(|(message, unparker)| {
                self.queue
                    .push_back(message.expect("a parked sender holds its message"));
                unparker
            });
            return Some((message, wake));
        }
        // A rendezvous: straight from the sender's hand.
        self.blocked_senders
            .pop_front(|slot| slot.take().expect("a parked sender holds its message"))
            .map(|(message, unparker)| (message, Some(unparker)))
    }

    /// Gives a message that a receiver received but could not keep (it was
    /// cancelled) to the next receiver, or puts it back at the front.
    fn give_back(&mut self, message: T) -> Option<Unparker> {
        if self.receivers.is_empty() {
            self.queue.push_front(message);
            None
        } else {
            let ((), unparker) = self
                .receivers
                .pop_front(move |slot| *slot = Some(message))
                .expect("not empty");
            Some(unparker)
        }
    }
}

impl<T> Chan<T> {
    pub(crate) fn new(capacity: Option<usize>) -> Chan<T> {
        Chan {
            state: InnerLock::new(State {
                queue: VecDeque::new(),
                capacity,
                senders: 1,
                receiver_alive: true,
                receivers: WaitList::new(),
                blocked_senders: WaitList::new(),
            }),
        }
    }

    /// Sends `message`; if the channel is full, waits for room when `block`
    /// is set, or returns `Full`.
    pub(crate) fn send(&self, message: T, block: bool) -> Result<(), TrySendError<T>> {
        let mut state = lock(&self.state);
        if !state.receiver_alive {
            return Err(TrySendError::Disconnected(message));
        }
        if !state.receivers.is_empty() {
            let ((), unparker) = state
                .receivers
                .pop_front(move |slot| *slot = Some(message))
                .expect("not empty");
            drop(state);
            unparker.unpark();
            return Ok(());
        }
        if state.blocked_senders.is_empty()
            && state
                .capacity
                .is_none_or(|capacity| state.queue.len() < capacity)
        {
            state.queue.push_back(message);
            return Ok(());
        }
        if !block {
            return Err(TrySendError::Full(message));
        }
        let node = Node::new(Some(message));
        let woken = park_until_served(
            &self.state,
            state,
            |s| &mut s.blocked_senders,
            &node,
            None,
            &"channel send",
            || {},
            // Unwinding: a message taken was sent; one still in the node
            // was not, and goes down with it.
            |_, _| {},
        );
        debug_assert!(woken.served(), "a send without deadline ended unserved");
        drop(woken);
        match node.into_payload() {
            None => Ok(()),
            Some(message) => Err(TrySendError::Disconnected(message)), // receiver gone
        }
    }

    /// Receives a message, waiting until `deadline` when `block` is set.
    pub(crate) fn recv(&self, block: bool, deadline: Option<u64>) -> Result<T, RecvTimeoutError> {
        let mut state = lock(&self.state);
        loop {
            if let Some((message, wake)) = state.take() {
                drop(state);
                if let Some(unparker) = wake {
                    unparker.unpark();
                }
                return Ok(message);
            }
            if state.senders == 0 {
                return Err(RecvTimeoutError::Disconnected);
            }
            if !block || deadline.is_some_and(|d| d <= clock::now_ns()) {
                return Err(RecvTimeoutError::Timeout);
            }
            let node = Node::new(None);
            let woken = park_until_served(
                &self.state,
                state,
                |s| &mut s.receivers,
                &node,
                deadline,
                &"channel receive",
                || {},
                |mut state, served| {
                    // Unwinding with a message in hand: not ours any more.
                    if served && let Some(message) = state.receivers.payload(&node).take() {
                        let wake = state.give_back(message);
                        drop(state);
                        if let Some(unparker) = wake {
                            unparker.unpark();
                        }
                    }
                },
            );
            let (served, held) = match woken {
                Woken::Served => (true, None),
                Woken::Locked(guard, served) => (served, Some(guard)),
            };
            if served && let Some(message) = node.into_payload() {
                return Ok(message);
            }
            // Woken because the senders are gone, or timed out: look again.
            state = held.unwrap_or_else(|| lock(&self.state));
        }
    }

    /// `recv` as both channel kinds show it.
    pub(crate) fn recv_blocking(&self) -> Result<T, RecvError> {
        self.recv(true, None).map_err(|_| RecvError)
    }

    pub(crate) fn try_recv(&self) -> Result<T, TryRecvError> {
        self.recv(false, None).map_err(|e| match e {
            RecvTimeoutError::Timeout => TryRecvError::Empty,
            RecvTimeoutError::Disconnected => TryRecvError::Disconnected,
        })
    }

    pub(crate) fn recv_timeout(&self, timeout: std::time::Duration) -> Result<T, RecvTimeoutError> {
        self.recv(true, Some(clock::after_ns(timeout)))
    }

    /// The last sender gone wakes the receivers (to find it out).
    fn drop_sender(&self) {
        let mut state = lock(&self.state);
        state.senders -= 1;
        if state.senders == 0 {
            let mut wakeups = Wakeups::default();
            wakeups.take_all(&mut state.receivers, |_| ());
            drop(state);
            wakeups.wake();
        }
    }

    /// The receiver gone: queued messages are dropped, parked senders get
    /// theirs back.
    fn drop_receiver(&self) {
        let mut state = lock(&self.state);
        state.receiver_alive = false;
        let queued = std::mem::take(&mut state.queue);
        let mut wakeups = Wakeups::default();
        wakeups.take_all(&mut state.blocked_senders, |_| ());
        drop(state);
        wakeups.wake();
        drop(queued); // their destructors run without the lock
    }
}

/// A sender's share of a channel: counted, so the last one to go tells the
/// receiver. Every sending face (`mpsc::Sender`, `SyncSender`,
/// `oneshot::Sender`) holds one.
pub(crate) struct SendHalf<T>(Arc<Chan<T>>);

/// The receiver's share: dropping it disconnects the senders.
pub(crate) struct RecvHalf<T>(Arc<Chan<T>>);

/// A new channel's two halves.
pub(crate) fn halves<T>(capacity: Option<usize>) -> (SendHalf<T>, RecvHalf<T>) {
    let chan = Arc::new(Chan::new(capacity));
    (SendHalf(chan.clone()), RecvHalf(chan))
}

impl<T> std::ops::Deref for SendHalf<T> {
    type Target = Chan<T>;
    fn deref(&self) -> &Chan<T> {
        &self.0
    }
}

impl<T> std::ops::Deref for RecvHalf<T> {
    type Target = Chan<T>;
    fn deref(&self) -> &Chan<T> {
        &self.0
    }
}

impl<T> Clone for SendHalf<T> {
    fn clone(&self) -> SendHalf<T> {
        lock(&self.0.state).senders += 1;
        SendHalf(self.0.clone())
    }
}

impl<T> Drop for SendHalf<T> {
    fn drop(&mut self) {
        self.0.drop_sender();
    }
}

impl<T> Drop for RecvHalf<T> {
    fn drop(&mut self) {
        self.0.drop_receiver();
    }
}
