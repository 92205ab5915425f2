//! A dump's stacks named: the return addresses each runtime walked on its
//! own thread (a [`Section`]'s raw stacks) looked up, and the [`Dump`]
//! made of them. On a fiber's stack that is done on a thread of its own;
//! the caller says whether it runs on one (`context::in_fiber`, or, for a
//! deadlock's dump, the scheduler that found it: see `deadlock.rs`).

use crate::observe::dump::Dump;
use crate::observe::resolve::Resolver;
use crate::scheduler::fiber_info::Section;
use crate::scheduler::helper;
use crate::scheduler::stack_trace::Sampled;

/// The dump of `sections`, with their stacks named (the slow part of a
/// dump: DWARF lookups, each address once).
///
/// On a fiber (`on_fiber`: the caller runs on a fiber's stack, not on a
/// runtime's root), that is done on a thread of its own, which the fiber
/// waits for (as the whole dump blocks its runtime): the symbolizer is
/// not made for a fiber's stack, which may be 16 KiB.
pub(crate) fn resolve(mut sections: Vec<Section>, on_fiber: bool) -> Dump {
    let resolve_all = |sections: &mut Vec<Section>| {
        let mut resolver = Resolver::default();
        for section in sections {
            let stacks = std::mem::take(&mut section.stacks);
            let Some(fibers) = &mut section.fibers else {
                continue;
            };
            for (i, raw) in stacks {
                if let Some(fiber) = fibers.get_mut(i) {
                    fiber.stack = Some(resolver.resolve(&raw));
                }
            }
        }
    };
    // (A stalled fiber's sampled stack is named here, off any fiber.)
    let mut resolver = Resolver::default();
    for section in &mut sections {
        if let (Some(fiber), Some(Sampled::Stack(raw))) =
            (&mut section.stalled, &section.stalled_stack)
        {
            fiber.stack = Some(resolver.resolve(raw));
        }
    }
    if sections.iter().all(|s| s.stacks.is_empty()) {
        // Nothing to name.
    } else if on_fiber {
        let named = std::thread::scope(|s| {
            helper::spawn_quiet(|| {
                std::thread::Builder::new()
                    .name("fibra-dump".into())
                    .spawn_scoped(s, || resolve_all(&mut sections))
            })
            .map(|named| named.join())
        });
        match named {
            Ok(Ok(())) => {}
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            // No thread to be had: the stacks are left out.
            Err(_) => sections.iter_mut().for_each(|s| s.stacks.clear()),
        }
    } else {
        resolve_all(&mut sections);
    }
    Dump::new(sections)
}
