//! What a scope's fibers share with it ([`ScopeData`]), apart from the
//! scope (`scope.rs`) that waits on it: a leaf, for the packet, which tells
//! it of an unjoined panic, and for the fiber's entry, which tells it of
//! the fiber's exit.

use std::cell::{Cell, RefCell};

use crate::reactor::token::WakeToken;

/// What a scope's fibers share with it; lives on the scope owner's stack.
pub(crate) struct ScopeData {
    pub(super) running: Cell<usize>,
    pub(crate) a_fiber_panicked: Cell<bool>,
    /// The owner's token while it waits for the last fiber.
    pub(super) owner: Cell<Option<WakeToken>>,
    /// Every fiber spawned, to cancel them if the owner is cancelled.
    pub(super) handles: RefCell<Vec<Box<dyn Fn()>>>,
}
