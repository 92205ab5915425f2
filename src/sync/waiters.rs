//! The FIFO of parked waiters that every primitive in `fibra::sync` keeps.
//!
//! A waiter (a fiber, or a plain thread) puts a [`Node`] on its own stack,
//! links it at the back of the primitive's [`WaitList`] together with an
//! [`Unparker`], and parks. A notifier unlinks the front node — possibly
//! handing something over in its payload: permits, a message, a slot for
//! one — and unparks its owner. The waiter knows it was served because its
//! node is no longer linked; the notifier also raises the node's `served`
//! flag as its last touch, so a woken waiter can see that it was served
//! without taking the lock again (for a channel, that is one lock round
//! trip of three per message).
//!
//! Nodes live on the waiters' stacks, so waiting allocates nothing. Fiber
//! stacks never move and a parked waiter's frame stays put, which is what an
//! intrusive list needs.
//!
//! ## Ground rules
//!
//! - A list, and every node linked into it, is touched only while the lock
//!   of the primitive that owns the list is held. The methods take
//!   `&mut WaitList` as the proof of that, even those that only read a node.
//! - A node must stay in place, and alive, while it is linked. The waiter
//!   guarantees it with [`park_until_served`], which on every way out —
//!   served, timed out, cancelled, unwinding — leaves the node unlinked.
//! - A waiter that gives up after it was served (it was cancelled, or its
//!   `fibra::timeout` expired, while the wake-up was on its way) passes what
//!   it received on: the `abandon` callback of [`park_until_served`] does
//!   that for each primitive, so no notification is ever lost.
//!
//! ## Why a hand-off is never lost nor doubled
//!
//! Checked by argument below, and by loom on plain threads (`models.rs`:
//! there a waiter parks through loom, and the list's lock and `served`
//! flags are loom's): a fiber's side of the race runs through the fiber
//! scheduler (`park_current`, wake tokens, switches between stacks), which
//! loom cannot model, and the list itself is plain data under one lock, so
//! the only interleavings that matter are the orders in which the two
//! sides take that lock — few enough to enumerate here. A randomised
//! stress test (`tests/contention.rs`,
//! `a_million_notify_cancel_races_on_the_wait_list`) races them a million
//! times across two workers and a thread.
//!
//! **Invariant.** A node is in exactly one of three states: *linked*,
//! *served* (unlinked by a notifier's [`WaitList::pop_front`], which wrote
//! what it hands over into the payload and then raised `served`) or
//! *withdrawn* (unlinked by its own waiter's [`WaitList::remove`]). Both
//! transitions leave *linked*, both happen under the lock, and neither
//! state is ever left again; so exactly one of them happens, once.
//!
//! **Every way out of [`park_until_served`] settles the node once:**
//!
//! 1. The waiter sees `served` (Acquire) without the lock: the notifier
//!    stored it (Release) after its last access, still under the lock, so
//!    the payload is complete and nobody touches the node again: the
//!    waiter returns `Served` and owns the hand-off.
//! 2. Otherwise it takes the lock. Not linked: served (the flag was not
//!    seen yet, but the unlock ordered the notifier's writes before us):
//!    `Locked(_, true)`, the hand-off is the waiter's. Linked and its own
//!    deadline passed: it withdraws — nothing was handed over, and the
//!    primitive undoes what the waiting meant (a semaphore returns the
//!    permits partly given in `assigned`). Linked and woken for nothing: it
//!    stays linked with the unparker of its next park (the old token is
//!    spent) and parks again.
//! 3. It unwinds (cancel, `fibra::timeout`, a panic in `linked`) at a park
//!    or anywhere in between: `OnUnwind` takes the lock and withdraws the
//!    node if it is still linked. `remove` returning false means it was
//!    served first: `abandon(served = true)` passes the hand-off on (a
//!    condvar notifies the next waiter, a semaphore releases the permits
//!    to the next in line). Returning true means withdrawn: nothing to
//!    pass on, only partial gifts to undo.
//!
//! A notifier serves only linked nodes, and a served node is never served
//! again, so a hand-off is given once; the waiter either keeps it (1, 2)
//! or passes it on (3), so it is used once. The node never dangles: it is
//! linked only inside `park_until_served`, and every exit from that
//! function — return or unwind — leaves it served or withdrawn, with the
//! notifier's last touch before the `served` store the waiter waits for.
//! What happens after the wait (a condvar re-locking its mutex) is the
//! primitive's own: a condvar passes its notification on from there too.

pub(crate) use crate::atomic::{Mutex, MutexGuard};
use std::cell::UnsafeCell;
use std::marker::PhantomPinned;
use std::ptr;

use crate::atomic::{AtomicBool, Ordering};

use crate::scheduler::park::{Parked, Unparker, park_current};
use crate::scheduler::wait_on::WaitOn;
use crate::scheduler::wakeups::Wakeups;

/// A waiter's place in a [`WaitList`], carrying a payload `P` that the
/// waiter and its notifier exchange under the lock.
pub(crate) struct Node<P> {
    cell: UnsafeCell<Links<P>>,
    /// Set (release) by the notifier that unlinked the node, after its last
    /// access to it; outside `cell`, so that the waiter may read it while a
    /// notifier holds the lock and borrows the links.
    served: AtomicBool,
    /// Linked nodes are pointed to by their neighbours.
    _pinned: PhantomPinned,
}

struct Links<P> {
    prev: *const Node<P>,
    next: *const Node<P>,
    linked: bool,
    unparker: Option<Unparker>,
    payload: P,
}

impl<P> Node<P> {
    pub(crate) fn new(payload: P) -> Node<P> {
        Node {
            cell: UnsafeCell::new(Links {
                prev: ptr::null(),
                next: ptr::null(),
                linked: false,
                unparker: None,
                payload,
            }),
            served: AtomicBool::new(false),
            _pinned: PhantomPinned,
        }
    }
}

/// An intrusive FIFO of [`Node`]s; see the module docs for who may touch it.
pub(crate) struct WaitList<P> {
    head: *const Node<P>,
    tail: *const Node<P>,
}

// SAFETY: the list is only reachable through the lock of its primitive
// (see the ground rules), and the nodes it points to hold an `Unparker`
// (Send) and a `P`: sending the list sends those.
unsafe impl<P: Send> Send for WaitList<P> {}

impl<P> WaitList<P> {
    pub(crate) const fn new() -> WaitList<P> {
        WaitList {
            head: ptr::null(),
            tail: ptr::null(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_null()
    }

    /// The fields of a node of this list.
    fn links(&mut self, node: *const Node<P>) -> &mut Links<P> {
        // SAFETY: `node` is linked here or owned by the caller (ground
        // rules), and `&mut self` proves the lock is held, so nobody else
        // touches it while the returned borrow lives.
        unsafe { &mut *(*node).cell.get() }
    }

    /// Links `node` at the back; `unparker` wakes its owner when served.
    ///
    /// # Safety
    ///
    /// `node` must not be linked, and must stay in place and alive until it
    /// is unlinked again (use [`park_until_served`]).
    pub(crate) unsafe fn push_back(&mut self, node: &Node<P>, unparker: Unparker) {
        let node: *const Node<P> = node;
        let tail = self.tail;
        let links = self.links(node);
        debug_assert!(!links.linked, "a node was linked twice");
        links.linked = true;
        links.unparker = Some(unparker);
        links.prev = tail;
        links.next = ptr::null();
        if tail.is_null() {
            self.head = node;
        } else {
            self.links(tail).next = node;
        }
        self.tail = node;
    }

    /// Whether `node` is still waiting (not served, not removed).
    pub(crate) fn is_linked(&mut self, node: &Node<P>) -> bool {
        self.links(node).linked
    }

    /// The payload of `node`, linked here or owned by the caller.
    pub(crate) fn payload<'a>(&'a mut self, node: &'a Node<P>) -> &'a mut P {
        &mut self.links(node).payload
    }

    /// Replaces the unparker of a linked node (for its owner's next park).
    pub(crate) fn set_unparker(&mut self, node: &Node<P>, unparker: Unparker) {
        self.links(node).unparker = Some(unparker);
    }

    /// The payload of the front node.
    pub(crate) fn front(&mut self) -> Option<&mut P> {
        let head = self.head;
        if head.is_null() {
            None
        } else {
            Some(&mut self.links(head).payload)
        }
    }

    /// Unlinks the front node, lets `serve` hand it something through its
    /// payload, and returns the unparker to wake its owner with — after
    /// the lock is released, preferably.
    pub(crate) fn pop_front<R>(
        &mut self,
        serve: impl FnOnce(&mut P) -> R,
    ) -> Option<(R, Unparker)> {
        let head = self.head;
        if head.is_null() {
            return None;
        }
        let links = self.links(head);
        let served = serve(&mut links.payload);
        let unparker = links
            .unparker
            .take()
            .expect("a linked node has an unparker");
        self.unlink(head);
        // The last touch: from here the waiter may take the node back
        // without the lock, and return, ending its life.
        // SAFETY: `head` was linked until just now, so it is alive (ground
        // rules); the flag is atomic and outside the links.
        unsafe { (*head).served.store(true, Ordering::Release) };
        Some((served, unparker))
    }

    /// Unlinks `node` if it is linked; returns whether it was.
    pub(crate) fn remove(&mut self, node: &Node<P>) -> bool {
        if !self.is_linked(node) {
            return false;
        }
        self.links(node).unparker = None;
        self.unlink(node);
        true
    }

    fn unlink(&mut self, node: *const Node<P>) {
        let links = self.links(node);
        let (prev, next) = (links.prev, links.next);
        links.linked = false;
        links.prev = ptr::null();
        links.next = ptr::null();
        if prev.is_null() {
            self.head = next;
        } else {
            self.links(prev).next = next;
        }
        if next.is_null() {
            self.tail = prev;
        } else {
            self.links(next).prev = prev;
        }
    }
}

impl<P> Drop for WaitList<P> {
    fn drop(&mut self) {
        // Every waiter holds a reference to the primitive while it waits,
        // so a list is dropped empty.
        debug_assert!(self.is_empty(), "a wait list was dropped with waiters");
    }
}

impl<P> WaitList<P> {
    /// Takes every waiter (served with `serve`) into the batch `wake`.
    pub(crate) fn take_all_into(&mut self, wake: &mut Wakeups, mut serve: impl FnMut(&mut P)) {
        while let Some(((), unparker)) = self.pop_front(&mut serve) {
            wake.push(unparker);
        }
    }
}

/// Locks a primitive's internal mutex. Nothing panics while holding one
/// (no user code runs under it), but a poisoned one is still consistent.
pub(crate) fn lock<I>(mutex: &Mutex<I>) -> MutexGuard<'_, I> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// How [`park_until_served`] ended.
pub(crate) enum Woken<'a, I> {
    /// A notifier served the node, seen without taking the lock again.
    Served,
    /// The lock, held again, and whether the node was served.
    Locked(MutexGuard<'a, I>, bool),
}

impl<I> Woken<'_, I> {
    /// Whether the node was served.
    pub(crate) fn served(&self) -> bool {
        matches!(self, Woken::Served | Woken::Locked(_, true))
    }
}

/// Links `node` at the back of the list in `guard`, calls `linked` (still
/// under the lock: a condvar releases the user's mutex there), and parks
/// until a notifier serves the node (unlinks it), or until `deadline` (ns);
/// `on` names the wait in fiber dumps.
/// Returns [`Woken::Served`] when a notifier served the node, or the lock,
/// held again, and whether the node was served; either way the node is
/// unlinked, and its payload is the caller's to take
/// ([`Node::into_payload`]) or settle.
///
/// If the waiter unwinds while its node is linked (cancelled or timed out
/// by `fibra::timeout` while parked, or a panic in `linked`), `abandon` gets
/// the lock and whether the node had been served: it must pass on what the
/// waiter was given, or undo what its waiting meant. The node is unlinked
/// either way.
// Each argument is one part of the wait every primitive spells out; a
// struct to bundle them would only rename them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn park_until_served<'a, I, P>(
    mutex: &'a Mutex<I>,
    guard: MutexGuard<'a, I>,
    list: fn(&mut I) -> &mut WaitList<P>,
    node: &Node<P>,
    deadline: Option<u64>,
    on: &'static &'static str,
    linked: impl FnOnce(),
    abandon: impl FnOnce(MutexGuard<'a, I>, bool),
) -> Woken<'a, I> {
    /// Unlinks the node (or hands on its service) if anything unwinds
    /// while it is linked; `held` is the lock while this function has it.
    struct OnUnwind<'a, 'n, I, P, F: FnOnce(MutexGuard<'a, I>, bool)> {
        mutex: &'a Mutex<I>,
        held: Option<MutexGuard<'a, I>>,
        list: fn(&mut I) -> &mut WaitList<P>,
        node: &'n Node<P>,
        abandon: Option<F>,
    }
    impl<'a, I, P, F: FnOnce(MutexGuard<'a, I>, bool)> Drop for OnUnwind<'a, '_, I, P, F> {
        fn drop(&mut self) {
            if let Some(abandon) = self.abandon.take() {
                let mut guard = self.held.take().unwrap_or_else(|| lock(self.mutex));
                let served = !(self.list)(&mut guard).remove(self.node);
                abandon(guard, served);
            }
        }
    }
    let mut on_unwind = OnUnwind {
        mutex,
        held: Some(guard),
        list,
        node,
        abandon: Some(abandon),
    };
    let held = on_unwind.held.as_mut().expect("just set");
    // The node is new (not linked), and `on_unwind` unlinks it on every way
    // out of this function while linked, so it stays in place while linked.
    // SAFETY: as just argued; the node is the caller's for the whole call.
    unsafe { list(held).push_back(node, Unparker::current()) };
    linked();
    drop(on_unwind.held.take());

    loop {
        let parked = park_current(deadline, WaitOn::Sync(on));
        // Served, as the notifier's release of the flag says: its writes to
        // the node happened before this load, and it touches it no more.
        if node.served.load(Ordering::Acquire) {
            on_unwind.abandon = None;
            return Woken::Served;
        }
        let mut guard = lock(mutex);
        let waiting = list(&mut guard);
        if !waiting.is_linked(node) {
            on_unwind.abandon = None;
            return Woken::Locked(guard, true);
        }
        if parked == Parked::TimedOut {
            waiting.remove(node);
            on_unwind.abandon = None;
            return Woken::Locked(guard, false);
        }
        // Woken for nothing: the last park's token is spent, so the node
        // needs the next one.
        waiting.set_unparker(node, Unparker::current());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_order_and_removal_from_the_middle() {
        let a = Node::new(1);
        let b = Node::new(2);
        let c = Node::new(3);
        let mut list = WaitList::new();
        let me = || Unparker::Thread(crate::scheduler::os_thread::current());
        // SAFETY: the nodes outlive the list's use of them and are all
        // unlinked before the end of the test.
        unsafe {
            list.push_back(&a, me());
            list.push_back(&b, me());
            list.push_back(&c, me());
        }
        assert!(list.remove(&b));
        assert!(!list.remove(&b));
        assert_eq!(*list.front().unwrap(), 1);
        let (first, _) = list.pop_front(|p| *p).unwrap();
        let (second, _) = list.pop_front(|p| *p).unwrap();
        assert_eq!((first, second), (1, 3));
        assert!(list.is_empty());
        assert!(list.pop_front(|p| *p).is_none());
        assert!(!list.is_linked(&a));
    }
}
