//! Which group each fiber of this thread is a member of: the "current
//! group" that a group made inside a member takes as its parent.
//!
//! A member never leaves the thread it was made on, so a plain
//! thread-local map from its id to its group's node will do: it is filled
//! when the fiber is made (by the spawn, or by the worker that starts a
//! member sent to the workers) and emptied by the member's exit callback,
//! both on that thread. (A `fiber_local!` would say the same, but a fiber's first value
//! costs three allocations and a teardown at its end; a map entry costs a
//! hash insert and a remove, and only a group made inside a member looks
//! it up.) No borrow of the map outlives a call here, and none runs user
//! code.
//!
//! A dump asks here which group each fiber is in ([`tell_dump`], the
//! scheduler's `fiber_info::GROUPS` hook), on the runtime's own thread,
//! where the members' entries are.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use crate::fiber::group::node::{IdHash, Node};
use crate::scheduler::fiber_id::FiberId;
use crate::scheduler::fiber_info::{self, FiberInfo, GroupInfo};
use crate::timer::clock;

thread_local! {
    /// Each member of this thread, to its node. A pointer, not a count:
    /// the member's fiber owns a count of its node until its exit
    /// callback, which removes the entry first.
    static MEMBER_OF: RefCell<HashMap<FiberId, *const Node, IdHash>> =
        RefCell::new(HashMap::default());
}

/// Records that fiber `id`, made on this thread just now (not run yet),
/// is a member of `node`, of which it owns a count.
pub(super) fn join(id: FiberId, node: *const Node) {
    // (Fails only while the thread's thread-locals are destroyed, when no
    // group is made any more.)
    let _ = MEMBER_OF.try_with(|m| m.borrow_mut().insert(id, node));
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

/// Sets the hook by which dumps ask for the fibers' groups, once.
pub(super) fn serve_dumps() {
    let _ = fiber_info::GROUPS.get_or_init(|| tell_dump);
}

/// For a dump taken on this thread: sets the group of each of `fibers`
/// that is a member, with the group's ancestors up its chain. One
/// [`GroupInfo`] per group, shared by its members.
fn tell_dump(fibers: &mut [FiberInfo]) {
    let now = clock::now_ns();
    let _ = MEMBER_OF.try_with(|m| {
        // (Never borrowed mutably while a dump runs: no borrow outlives a
        // call of this module; the `try` is a belt.)
        let Ok(m) = m.try_borrow() else {
            return;
        };
        if m.is_empty() {
            return;
        }
        let mut made: HashMap<*const Node, Arc<GroupInfo>> = HashMap::new();
        for fiber in fibers.iter_mut() {
            let Some(&node) = m.get(&fiber.id) else {
                continue;
            };
            // The entry's member has not exited (its exit callback removes
            // the entry first, and none runs during a dump on this thread),
            // and its fiber owns a count of the node: the node is alive.
            // SAFETY: as argued just above.
            let node = unsafe { &*node };
            let info = info_of(node, &mut made, now);
            fiber.group = Some(info.id);
            fiber.in_group = Some(info);
        }
    });
}

/// `node`'s info, with its ancestors', made once a dump.
fn info_of(
    node: &Node,
    made: &mut HashMap<*const Node, Arc<GroupInfo>>,
    now: u64,
) -> Arc<GroupInfo> {
    if let Some(info) = made.get(&std::ptr::from_ref(node)) {
        return info.clone();
    }
    let mut info = node.info(now);
    if let Some(parent) = node.parent() {
        info.up = Some(info_of(&parent, made, now));
    }
    let info = Arc::new(info);
    made.insert(std::ptr::from_ref(node), info.clone());
    info
}
