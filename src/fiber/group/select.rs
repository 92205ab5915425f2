//! A group's side of a select's `group` operation
//! (`channel::Select::group`, the `group(g)` arm of `select!`): what the
//! channel layer's `SelectHandle` for a [`Group`] calls.
//!
//! The operation is ready while a finished member waits to be joined,
//! and only then: an empty group, like an empty channel that can still be
//! sent on, is never ready (members may be spawned into it later). A
//! select takes the member out of the group's queue when it chooses the
//! operation, and joins it when the operation is completed
//! ([`Group::select_complete`]); one that is never completed puts it back
//! ([`Group::select_abandon`]). Waiting is a registration in the node
//! (`Node::watch`), woken by the next member's exit, as a `join(handle)`
//! operation is by its fiber's end.

use std::sync::Arc;

use super::Group;
use super::node::WatchKey;
use crate::fiber::JoinError;
use crate::scheduler::fiber_id::FiberId;
use crate::scheduler::park::Unparker;

impl<T> Group<T> {
    /// The group's identity for a select: its node's address.
    pub(crate) fn select_identity(&self) -> *const u8 {
        Arc::as_ptr(&self.node).cast()
    }

    /// A member that has finished, taken out of the queue for the select
    /// that chose it; `None` while none has.
    pub(crate) fn select_try(&self) -> Option<FiberId> {
        self.node.try_next_finished()
    }

    /// Whether a member has finished and waits to be joined.
    pub(crate) fn select_is_ready(&self) -> bool {
        self.node.any_finished()
    }

    /// Registers `unparker` to be woken by the next member's exit;
    /// `false`, with nothing registered, when a finished member waits
    /// already.
    pub(crate) fn select_watch(&self, key: WatchKey, unparker: Unparker) -> bool {
        self.node.watch(key, unparker)
    }

    /// Takes the registration of `key` out, if it is still there.
    pub(crate) fn select_unwatch(&self, key: WatchKey) {
        self.node.unwatch(key);
    }

    /// Gives member `id`, taken by [`select_try`](Group::select_try), back
    /// to the head of the queue: its select will not complete.
    pub(crate) fn select_abandon(&self, id: FiberId) {
        self.node.put_back(id);
    }

    /// The result of member `id`, taken by
    /// [`select_try`](Group::select_try) (it has finished: this does not
    /// wait); it leaves the group.
    pub(crate) fn select_complete(&self, id: FiberId) -> Result<T, JoinError> {
        self.take(id).1
    }
}
