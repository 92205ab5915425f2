//! What a runtime publishes for the stall watchdog and for dumps of a
//! runtime that does not answer: which fiber runs now, since which switch.
//!
//! ## The word
//!
//! Every switch stores one word in [`Watch::word`] (a Release store of a
//! line the switch path owns; no read-modify-write, no lock): the address
//! of the incoming context's [`Meta`] and the runtime's switch count,
//! packed (see [`encode`]). Zero means that no fiber code runs: the root
//! waits in `epoll_wait`, or nobody drives the runtime. A reader that sees
//! the same non-zero word at two moments knows that one context ran all
//! along, without a switch: a stall, when the moments are far apart.
//!
//! ## Reading the running fiber's [`Meta`]
//!
//! A fiber's `Meta` lives at the top of its stack, right below the stack's
//! header (which holds the fiber's id and name), written before its first
//! switch-in and never changed after (but for its fiber-locals, which only
//! the fiber itself touches: [`Meta::locals`]). Its stack is freed (or
//! given to another fiber) only after the fiber's final switch, by `reap`.
//! It is 16 bytes, so that a spawn writes no cache line more than before.
//! A reader on another thread reads it under a *hazard*, a Dekker pair:
//!
//! - reader: `hazard = meta` (SeqCst), reload `word` (SeqCst); if it still
//!   names `meta`, read it, then clear `hazard`;
//! - runtime, in `reap`, before the stack goes back (after the final
//!   switch published another word): a fence; while `hazard` names the
//!   fiber's `Meta`, spin ([`Watch::wait_unread`]).
//!
//! The fences are asymmetric where the kernel allows (`membarrier`, see
//! [`init_fences`]): a compiler fence on the runtime's side, which every
//! fiber's exit pays, and `membarrier` on the reader's, a few times a
//! second. Elsewhere both sides use a full fence (on the runtime's side a
//! SeqCst store of the word, one locked instruction on x86).
//!
//! Either the reader's reload sees the final switch's word (it gives up),
//! or `reap` sees the hazard (it waits the few nanoseconds of the read).
//! The root's `Meta` lives in [`Watch`] itself, which the reader holds by
//! an `Arc`. Readers take [`Watch::read_lock`] so that there is one hazard
//! at a time.

use std::cell::Cell;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;

use crate::runtime::core::FiberId;
use crate::stack::StackHeader;

/// Whether the hazard's Dekker pair uses an asymmetric fence: a compiler
/// fence on the runtime's side (every fiber's exit) and `membarrier` on
/// the reader's (a watchdog sample, a dump). Decided once, by the first
/// runtime made in the process, before any fiber exists, and never
/// changed: every runtime and reader sees the same value.
static ASYMMETRIC: AtomicBool = AtomicBool::new(false);

/// Registers this process for `MEMBARRIER_CMD_PRIVATE_EXPEDITED` (Linux
/// ≥ 4.14) once; where that fails, `ASYMMETRIC` stays false and both sides
/// use a full fence.
fn init_fences() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;
        // SAFETY: membarrier takes no pointers; a failure is checked.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                0,
                0,
            )
        };
        ASYMMETRIC.store(rc == 0, Ordering::Relaxed);
    });
}

/// The heavy half: every thread of the process running now passes a full
/// memory barrier before this returns (and this thread too).
fn heavy_fence() {
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    // SAFETY: membarrier takes no pointers. It cannot fail once this
    // process registered (ASYMMETRIC is set only then); if it did, fall
    // back to a fence of our own, which is all the non-asymmetric path has.
    let rc = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) };
    if rc != 0 {
        std::sync::atomic::fence(Ordering::SeqCst);
    }
}

/// Bits of the switch count kept in the word.
const COUNT_BITS: u32 = 20;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
/// Metas are 16-byte aligned and below 2^47 (Linux on x86_64 maps user
/// memory there unless a mapping is asked for higher, which fibra never
/// does; checked at spawn): 43 significant bits.
const ADDR_LIMIT: usize = 1 << 47;

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
    pub(crate) locals: Cell<*mut crate::fiber::local::Locals>,
}

impl Meta {
    pub(crate) fn new(location: Option<&'static Location<'static>>) -> Meta {
        Meta {
            location,
            locals: Cell::new(std::ptr::null_mut()),
        }
    }
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
unsafe fn identity(header: *const StackHeader) -> (FiberId, Option<String>) {
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

/// Packs a `Meta`'s address and a switch count into a word.
#[inline(always)]
pub(crate) fn encode(meta: *const Meta, count: u64) -> u64 {
    (((meta as usize as u64) >> 4) << COUNT_BITS) | (count & COUNT_MASK)
}

/// The `Meta` address of a word (null for 0).
fn decode(word: u64) -> *const Meta {
    ((word >> COUNT_BITS) << 4) as usize as *const Meta
}

/// Whether `meta` can be packed in a word without loss.
pub(crate) fn packable(meta: *const Meta) -> bool {
    (meta as usize) < ADDR_LIMIT && (meta as usize) % 16 == 0
}

/// A copy of what a `Meta` says, for a report.
#[derive(Clone, Debug)]
pub(crate) struct Running {
    pub(crate) id: FiberId,
    pub(crate) name: Option<String>,
    pub(crate) location: Option<&'static Location<'static>>,
    pub(crate) root: bool,
    /// How long it has run without a switch, as far as anyone saw.
    pub(crate) running_for: Option<Duration>,
}

/// The watchdog's view of one runtime; in its `Shared`.
#[repr(align(64))]
pub(crate) struct Watch {
    /// See the module docs. Written by the runtime's thread only.
    pub(crate) word: AtomicU64,
    /// The `Meta` a reader is reading (0: none).
    hazard: AtomicU64,
    /// The word the watchdog warned about (0: none); the runtime clears it
    /// and warns again when that context switches out.
    pub(crate) reported: AtomicU64,
    /// The word the watchdog last saw and when it first saw it (ns),
    /// written by the watchdog only.
    pub(crate) seen_word: AtomicU64,
    pub(crate) seen_since: AtomicU64,
    /// How long a context may run before a warning (ns); `u64::MAX`: never.
    pub(crate) threshold_ns: AtomicU64,
    read_lock: Mutex<()>,
    /// The root context's `Meta`, and its id.
    pub(crate) root: Meta,
    root_id: FiberId,
}

// SAFETY: the root `Meta`'s locals are never used (the root uses
// thread-locals); every other field is an atomic, a mutex or plain data.
unsafe impl Sync for Watch {}
// SAFETY: as above.
unsafe impl Send for Watch {}

impl Watch {
    pub(crate) fn new(root_id: FiberId) -> Watch {
        init_fences();
        Watch {
            word: AtomicU64::new(0),
            hazard: AtomicU64::new(0),
            reported: AtomicU64::new(0),
            seen_word: AtomicU64::new(0),
            seen_since: AtomicU64::new(0),
            threshold_ns: AtomicU64::new(u64::MAX),
            read_lock: Mutex::new(()),
            root: Meta::new(None),
            root_id,
        }
    }

    /// Publishes that `meta` runs, after switch number `count`.
    #[inline(always)]
    pub(crate) fn publish(&self, meta: *const Meta, count: u64) {
        self.word.store(encode(meta, count), Ordering::Release);
    }

    /// Publishes that no context of the runtime runs.
    #[inline]
    pub(crate) fn publish_idle(&self) {
        self.word.store(0, Ordering::Release);
    }

    /// Called by the runtime before the stack that holds `meta` is given
    /// back or the record that owns its name is vacated, after the
    /// context's final switch: waits while a reader reads it.
    #[inline]
    pub(crate) fn wait_unread(&self, meta: *const Meta) {
        if ASYMMETRIC.load(Ordering::Relaxed) {
            // The light half of the asymmetric fence: the reader's
            // `membarrier` makes this thread's earlier store of the word
            // visible before the reader reloads it, or makes the reader's
            // hazard visible to the load below (see `init_fences`).
            std::sync::atomic::compiler_fence(Ordering::SeqCst);
        } else {
            // Only this thread writes the word: a reload gives what it
            // stored; storing it again SeqCst is the full fence.
            let now = self.word.load(Ordering::Relaxed);
            self.word.store(now, Ordering::SeqCst);
        }
        while self.hazard.load(Ordering::SeqCst) == meta as usize as u64 {
            std::hint::spin_loop();
        }
    }

    /// What the context named by `word` is, if it still runs with that word.
    pub(crate) fn read(&self, word: u64) -> Option<Running> {
        let meta = decode(word);
        if meta.is_null() {
            return None;
        }
        let _one_reader = self.read_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.hazard.store(meta as usize as u64, Ordering::SeqCst);
        if ASYMMETRIC.load(Ordering::Relaxed) {
            heavy_fence();
        }
        let result = if self.word.load(Ordering::SeqCst) == word {
            // Still running with that word: its stack (or, for the root,
            // this `Watch`) cannot be given back before the hazard is
            // cleared, by the protocol of the module docs; `Meta`'s
            // immutable fields were written before the switch that stored
            // the word (Release; our load is SeqCst, so Acquire too).
            // SAFETY: as argued above.
            Some(unsafe { self.describe(meta) })
        } else {
            None
        };
        self.hazard.store(0, Ordering::Release);
        result
    }

    /// The spawned fiber running on this thread now, for a panic report.
    /// Call on the runtime's own thread only.
    pub(crate) fn running_here(&self) -> Option<Running> {
        let meta = decode(self.word.load(Ordering::Relaxed));
        if meta.is_null() || std::ptr::eq(meta, &self.root) {
            return None;
        }
        // On the runtime's thread, the word names the context running here
        // (or, inside the scheduler, the one being switched out): its record
        // is live, since a record is removed (and its stack given back) by
        // `reap` only after the final switch published another word, and
        // this thread made both stores.
        // SAFETY: as argued above.
        Some(unsafe { self.describe(meta) })
    }

    /// What `meta` and its stack's header say.
    ///
    /// # Safety
    ///
    /// The context of `meta` runs and cannot be reaped before
    /// this returns (it runs on this thread, or its reader holds the
    /// hazard): its stack and record are live. Its `location` and its
    /// header's id and name were written before the switch that published
    /// it (Release; readers load with Acquire or SeqCst, or on the same
    /// thread).
    unsafe fn describe(&self, meta: *const Meta) -> Running {
        let root = std::ptr::eq(meta, &self.root);
        // SAFETY: as the callers promise; `location` never changes.
        let location = unsafe { (&raw const (*meta).location).read() };
        let (id, name) = if root {
            (self.root_id, None)
        } else {
            // SAFETY: as the callers promise; a spawned fiber's `Meta` sits
            // below its stack's header (`Meta`'s invariant).
            unsafe { identity(header_of(meta)) }
        };
        Running {
            id,
            name,
            location,
            root,
            running_for: None,
        }
    }

    /// The context running now and how long the watchdog has seen it run,
    /// for a dump of a runtime that does not answer.
    pub(crate) fn running_now(&self, now_ns: u64) -> Option<Running> {
        let word = self.word.load(Ordering::Acquire);
        let mut running = self.read(word)?;
        if self.seen_word.load(Ordering::Acquire) == word {
            let since = self.seen_since.load(Ordering::Relaxed);
            running.running_for = Some(Duration::from_nanos(now_ns.saturating_sub(since)));
        }
        Some(running)
    }
}
