//! Every live runtime by a small id, so that handles can name their fiber's
//! runtime without holding a reference count to it.
//!
//! A `JoinHandle` needs its fiber's runtime only to cancel it from another
//! thread, or to check that a join from outside can ever finish; both are
//! rare. Keeping an `Arc` in every handle instead would cost two atomic
//! read-modify-writes per spawn, a third of a spawn + join. The registry
//! costs a lock on those rare paths only.

use std::sync::{Arc, Mutex};

use crate::scheduler::shared::Shared;

/// A runtime's id: its slot and that slot's generation (a dropped runtime's
/// id never names a later one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RuntimeId {
    index: u32,
    generation: u32,
}

struct Slot {
    generation: u32,
    shared: Option<Arc<Shared>>,
}

static REGISTRY: Mutex<Vec<Slot>> = Mutex::new(Vec::new());

fn registry() -> std::sync::MutexGuard<'static, Vec<Slot>> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Registers a new runtime.
pub(crate) fn register(shared: Arc<Shared>) -> RuntimeId {
    let mut slots = registry();
    let index = match slots.iter().position(|s| s.shared.is_none()) {
        Some(i) => i,
        None => {
            slots.push(Slot {
                generation: 0,
                shared: None,
            });
            slots.len() - 1
        }
    };
    let slot = &mut slots[index];
    slot.generation = slot.generation.wrapping_add(1);
    slot.shared = Some(shared);
    RuntimeId {
        index: index as u32,
        generation: slot.generation,
    }
}

/// Forgets a runtime that is being dropped.
pub(crate) fn unregister(id: RuntimeId) {
    if let Some(slot) = registry().get_mut(id.index as usize)
        && slot.generation == id.generation
    {
        slot.shared = None;
    }
}

/// Every live runtime, with the name of its thread.
pub(crate) fn all() -> Vec<(String, Arc<Shared>)> {
    registry()
        .iter()
        .filter_map(|slot| slot.shared.clone())
        .map(|shared| (shared.thread_name.clone(), shared))
        .collect()
}

/// The runtime `id` names, if it is still alive.
pub(crate) fn get(id: RuntimeId) -> Option<Arc<Shared>> {
    let slots = registry();
    let slot = slots.get(id.index as usize)?;
    if slot.generation == id.generation {
        slot.shared.clone()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_dropped_runtimes_name_nothing() {
        let rt = crate::Runtime::new().unwrap();
        let id = rt.id();
        assert!(get(id).is_some());
        drop(rt);
        assert!(get(id).is_none());
        let rt2 = crate::Runtime::new().unwrap();
        assert_ne!(rt2.id(), id, "a slot reused gets a new generation");
    }
}
