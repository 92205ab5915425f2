//! A context's [`Meta`]: where it was spawned, its fiber-locals and the
//! time it has run, at the top of its stack right below the stack's
//! header, which the watchdog, dumps, panic reports and `fiber_local!`
//! read; and the id and name in that header.

use std::cell::Cell;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::scheduler::fiber_id::FiberId;
use crate::stack::StackHeader;

/// A context's place of birth and fiber-locals, for the watchdog, dumps,
/// panic reports and `fiber_local!`.
///
/// # Invariant
///
/// A spawned fiber's `Meta` sits right below its stack's [`StackHeader`]
/// (see [`header_of`]). `location` never changes after the `Meta` is
/// written.
#[repr(C, align(16))]
pub(crate) struct Meta {
    pub(crate) location: Option<&'static Location<'static>>,
    /// The fiber's `fiber_local!` values (see `fiber::local`): touched only
    /// by the fiber itself, on its thread, while it runs.
    pub(crate) locals: Cell<*mut crate::scheduler::locals::Locals>,
    /// Time-stamp counter ticks the context has run, up to its last
    /// switch out (see `scheduler::cpu_time`): written by its thread only,
    /// read by dumps from any thread.
    run_ticks: AtomicU64,
}

impl Meta {
    pub(crate) fn new(location: Option<&'static Location<'static>>) -> Meta {
        Meta {
            location,
            locals: Cell::new(std::ptr::null_mut()),
            run_ticks: AtomicU64::new(0),
        }
    }

    /// Adds `ticks` to the context's run time; on its thread only.
    #[inline(always)]
    pub(crate) fn add_run(&self, ticks: u64) {
        let t = self.run_ticks.load(Ordering::Relaxed);
        self.run_ticks
            .store(t.wrapping_add(ticks), Ordering::Relaxed);
    }

    /// The ticks the context has run, up to its last switch out.
    pub(crate) fn run_ticks(&self) -> u64 {
        self.run_ticks.load(Ordering::Relaxed)
    }
}

/// Where the `Meta` of a fiber whose stack's header is `header` lives:
/// right below it (`Meta`'s invariant; 16-byte aligned, as the header is).
#[inline(always)]
pub(crate) fn meta_below(header: *mut StackHeader) -> *mut Meta {
    header.cast::<u8>().wrapping_sub(size_of::<Meta>()).cast()
}

/// The header of the stack whose `Meta` is `meta` (a spawned fiber's).
pub(crate) fn header_of(meta: *const Meta) -> *const StackHeader {
    meta.cast::<u8>().wrapping_add(size_of::<Meta>()).cast()
}

/// The id and name in a fiber's stack header.
///
/// # Safety
///
/// `header` is the header of a live fiber's stack, whose record (which owns
/// the name) is live: the caller runs on its thread while it exists, or
/// holds the hazard on its `Meta`. Only fields that never change after the
/// spawn are read (not `pins`), through raw pointers.
pub(super) unsafe fn identity(header: *const StackHeader) -> (FiberId, Option<String>) {
    // SAFETY: as the caller promises.
    unsafe {
        let id = (&raw const (*header).fiber_id).read();
        let ptr = (&raw const (*header).name_ptr).read();
        let len = (&raw const (*header).name_len).read();
        let name = (!ptr.is_null())
            .then(|| String::from_utf8_lossy(std::slice::from_raw_parts(ptr, len)).into_owned());
        (FiberId::from_u64(id).unwrap_or(FiberId::VACANT), name)
    }
}
