//! Where one fiber's `fiber_local!` values are kept: the map a pointer in
//! its `Meta` (see `scheduler::watch`) leads to. The values are made, found
//! and dropped by `fiber::local`, the public face of fiber-local storage.

use std::any::Any;

/// One fiber's values (boxed, from its `Meta`).
pub(crate) struct Locals {
    pub(crate) destroying: bool,
    pub(crate) entries: Vec<(usize, Box<dyn Any>)>,
}
