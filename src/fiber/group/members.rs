//! Which group each fiber of this thread is a member of: the "current
//! group" that a group made inside a member takes as its parent.
//!
//! A member never leaves the thread it was spawned on, so a plain
//! thread-local map from its id to its group's node will do: it is filled
//! by the spawn and emptied by the member's exit callback, both on that
//! thread. (A `fiber_local!` would say the same, but a fiber's first value
//! costs three allocations and a teardown at its end; a map entry costs a
//! hash insert and a remove, and only a group made inside a member looks
//! it up.) No borrow of the map outlives a call here, and none runs user
//! code.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use crate::fiber::group::node::{IdHash, Node};
use crate::scheduler::fiber_id::FiberId;

thread_local! {
    /// Each member of this thread, to its node. A pointer, not a count:
    /// the member's fiber owns a count of its node until its exit
    /// callback, which removes the entry first.
    static MEMBER_OF: RefCell<HashMap<FiberId, *const Node, IdHash>> =
        RefCell::new(HashMap::default());
}

/// Records that fiber `id`, spawned on this thread just now, is a member
/// of `node`.
pub(super) fn join(id: FiberId, node: &Arc<Node>) {
    // (Fails only while the thread's thread-locals are destroyed, when no
    // group is made any more.)
    let _ = MEMBER_OF.try_with(|m| m.borrow_mut().insert(id, Arc::as_ptr(node)));
}

/// Fiber `id`, a member of this thread, has exited.
pub(super) fn leave(id: FiberId) {
    let _ = MEMBER_OF.try_with(|m| m.borrow_mut().remove(&id));
}

/// The node of the group whose member the running fiber `id` is, if any.
pub(super) fn group_of(id: FiberId) -> Option<Arc<Node>> {
    let node = MEMBER_OF
        .try_with(|m| m.borrow().get(&id).copied())
        .ok()??;
    // The entry is the running fiber's own, which has not exited (its exit
    // callback removes it before giving back the count its fiber owns), so
    // the node is alive; one more count, for the caller.
    // SAFETY: as argued just above.
    Some(unsafe {
        Arc::increment_strong_count(node);
        Arc::from_raw(node)
    })
}
