//! A batch of wake-ups, collected under a lock and delivered after it is
//! released: what every waiter line of `sync` and `channel` fills while it
//! holds its lock (waking a thread or another runtime's fiber is a
//! syscall, not to be made under a lock others wait for).

use std::mem::ManuallyDrop;

use crate::scheduler::park::Unparker;

/// Wake-ups collected under a lock, to deliver after releasing it (waking
/// a thread or another runtime's fiber is a syscall). A batch dropped
/// undelivered (a panic between its lock and its `wake`) wakes them then:
/// a woken waiter looks again.
///
/// The fields are never dropped on their own: [`Wakeups::wake`] leaves
/// both empty (`None`, a vector that never allocated), so `drop` is an
/// inline check, not a call to the fields' drop glue at every lock.
#[derive(Default)]
pub(crate) struct Wakeups {
    first: ManuallyDrop<Option<Unparker>>,
    rest: ManuallyDrop<Vec<Unparker>>,
}

impl Drop for Wakeups {
    #[inline]
    fn drop(&mut self) {
        self.wake();
    }
}

impl Wakeups {
    // Inlined: out of line, the unparker made by the caller went through
    // memory, stored a word at a time and loaded in wider moves, which
    // stalled on the failed store forwarding (perf: a twentieth of a
    // rendezvous channel's message between fibers).
    #[inline]
    pub(crate) fn push(&mut self, unparker: Unparker) {
        if self.first.is_none() {
            *self.first = Some(unparker);
        } else {
            self.rest.push(unparker);
        }
    }

    /// Whether the batch wakes nobody.
    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// Wakes them all, leaving the batch empty; call with no lock held.
    ///
    /// By reference: moved into a call by value, the batch was copied in
    /// wide moves from fields just stored a word at a time, which stalled
    /// on the failed store forwarding (perf: a quarter of a rendezvous
    /// select's registration).
    #[inline]
    pub(crate) fn wake(&mut self) {
        if self.first.is_some() {
            self.wake_all();
        }
        // `rest` is pushed to only after `first`: without a first, it
        // never allocated.
        debug_assert_eq!(self.rest.capacity(), 0);
    }

    #[inline(never)]
    fn wake_all(&mut self) {
        // Woken in place, then dropped: taken out by value, the unparker
        // that `push` had just stored a word at a time was loaded in a
        // wide move that missed the store forwarding (perf: three fifths
        // of this function in a ping-pong between fibers).
        if let Some(first) = &*self.first {
            first.unpark();
        }
        *self.first = None;
        // Taken out: the vector left behind never allocated. (Most
        // batches hold one: no iterator made and dropped for none.)
        if self.rest.capacity() != 0 {
            for unparker in std::mem::take(&mut *self.rest) {
                unparker.unpark();
            }
        }
    }
}
