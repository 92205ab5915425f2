//! [`FiberId`]: a fiber's identity, unique in the process, and how a
//! warning or a dump names a fiber ([`describe`]).

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};

/// A fiber's identity, unique in the process for its whole life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FiberId(NonZeroU64);

impl FiberId {
    /// The id in a vacant record: never a fiber's (ids start at 1 and are
    /// handed out upwards).
    pub(crate) const VACANT: FiberId = FiberId(NonZeroU64::MAX);

    /// A new id. Threads take ids from the global counter in blocks, so
    /// spawning touches no shared cache line.
    pub(crate) fn next() -> FiberId {
        const BLOCK: u64 = 1024;
        static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1);
        thread_local! {
            static RANGE: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
        }
        let id = RANGE.with(|r| {
            let (mut next, mut end) = r.get();
            if next == end {
                next = NEXT_BLOCK.fetch_add(BLOCK, Ordering::Relaxed);
                end = next + BLOCK;
            }
            r.set((next + 1, end));
            next
        });
        FiberId(NonZeroU64::new(id).expect("fiber ids exhausted"))
    }

    /// The id whose number is `n` (none for 0).
    pub(crate) fn from_u64(n: u64) -> Option<FiberId> {
        NonZeroU64::new(n).map(FiberId)
    }

    /// The id as a number (for logs and metrics).
    ///
    /// ```
    /// fibra::run(|| assert!(fibra::current().id().as_u64() > 0));
    /// ```
    pub fn as_u64(self) -> u64 {
        self.0.get()
    }
}

impl std::fmt::Display for FiberId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// `fiber 'name' (#id)`, `fiber #id`, or the root's description.
pub(crate) fn describe(id: FiberId, name: Option<&str>, root: bool) -> String {
    match (root, name) {
        (true, _) => format!("the block_on closure (fiber #{id})"),
        (false, Some(name)) => format!("fiber '{name}' (#{id})"),
        (false, None) => format!("fiber #{id}"),
    }
}
