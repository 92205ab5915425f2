//! Memory of our own: arrays in mappings of their own, which grow by
//! `mremap` (no copy, no page touched) and ask for transparent huge pages
//! once large. The runtime's per-fiber tables live here: the fiber records
//! and the timer wheel's entries, a million of each in a burst of a million
//! sleepers.

mod array;
mod slab;

pub(crate) use array::MappedArray;
pub(crate) use slab::MappedSlab;
