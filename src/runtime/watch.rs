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
//! A fiber's `Meta` lives at the top of its stack, written before its first
//! switch-in and never changed after (but for its fiber-locals, which only
//! the fiber itself touches: [`Meta::locals`]). Its stack is freed (or
//! given to another fiber) only after the fiber's final switch, by `reap`.
//! A reader on another thread reads it under a *hazard*, a Dekker pair:
//!
//! - reader: `hazard = meta` (SeqCst), reload `word` (SeqCst); if it still
//!   names `meta`, read it, then clear `hazard`;
//! - runtime, in `reap`, before the stack goes back (after the final
//!   switch published another word): store the word it publishes now
//!   again, SeqCst; while `hazard` (SeqCst) names the fiber's `Meta`, spin
//!   ([`Watch::wait_unread`]). (A SeqCst store is one locked instruction on
//!   x86, cheaper than the `mfence` of a SeqCst fence.)
//!
//! Either the reader's reload sees the final switch's word (it gives up),
//! or `reap` sees the hazard (it waits the few nanoseconds of the read).
//! The root's `Meta` lives in [`Watch`] itself, which the reader holds by
//! an `Arc`. Readers take [`Watch::read_lock`] so that there is one hazard
//! at a time.

use std::cell::UnsafeCell;
use std::panic::Location;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::runtime::core::FiberId;

/// Bits of the switch count kept in the word.
const COUNT_BITS: u32 = 20;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
/// Metas are 16-byte aligned and below 2^47 (Linux on x86_64 maps user
/// memory there unless a mapping is asked for higher, which fibra never
/// does; checked at spawn): 43 significant bits.
const ADDR_LIMIT: usize = 1 << 47;

/// A context's identity for the watchdog, dumps and panic reports.
///
/// # Invariant
///
/// `id`, `name` and `location` never change after the `Meta` is written;
/// `name` points into the `Arc<str>` the fiber's record owns until `reap`.
#[repr(C, align(16))]
pub(crate) struct Meta {
    pub(crate) id: FiberId,
    name_ptr: *const u8,
    name_len: usize,
    pub(crate) location: Option<&'static Location<'static>>,
    /// The fiber's `fiber_local!` values: touched only by the fiber itself,
    /// on its thread, while it runs (see `fiber::local`).
    pub(crate) locals: UnsafeCell<crate::fiber::local::Locals>,
}

impl Meta {
    pub(crate) fn new(
        id: FiberId,
        name: Option<&str>,
        location: Option<&'static Location<'static>>,
    ) -> Meta {
        let (name_ptr, name_len) = name.map_or((std::ptr::null(), 0), |n| (n.as_ptr(), n.len()));
        Meta {
            id,
            name_ptr,
            name_len,
            location,
            locals: UnsafeCell::new(crate::fiber::local::Locals::new()),
        }
    }

    /// The name, read from the record's `Arc<str>`.
    ///
    /// # Safety
    ///
    /// The fiber's record is alive (the caller runs on its thread while it
    /// exists, or holds the hazard on this `Meta`).
    pub(crate) unsafe fn name(&self) -> Option<&str> {
        if self.name_ptr.is_null() {
            return None;
        }
        // SAFETY: the pointer and length were taken from a `str` that the
        // record keeps alive (caller's contract) and never changes.
        Some(unsafe {
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(self.name_ptr, self.name_len))
        })
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
    /// The root context's `Meta`.
    pub(crate) root: Meta,
}

// SAFETY: the root `Meta`'s raw name pointer is null (the root has no
// name) and its locals are never used (the root uses thread-locals); every
// other field is an atomic or a mutex.
unsafe impl Sync for Watch {}
// SAFETY: as above.
unsafe impl Send for Watch {}

impl Watch {
    pub(crate) fn new(root_id: FiberId) -> Watch {
        Watch {
            word: AtomicU64::new(0),
            hazard: AtomicU64::new(0),
            reported: AtomicU64::new(0),
            seen_word: AtomicU64::new(0),
            seen_since: AtomicU64::new(0),
            threshold_ns: AtomicU64::new(u64::MAX),
            read_lock: Mutex::new(()),
            root: Meta::new(root_id, None, None),
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
        // Only this thread writes the word: a reload gives what it stored.
        let now = self.word.load(Ordering::Relaxed);
        self.word.store(now, Ordering::SeqCst);
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
        let result = if self.word.load(Ordering::SeqCst) == word {
            // Still running with that word: its stack (or, for the root,
            // this `Watch`) cannot be given back before the hazard is
            // cleared, by the protocol of the module docs; `Meta`'s
            // immutable fields were written before the switch that stored
            // the word (Release; our load is SeqCst, so Acquire too).
            // SAFETY: as argued above; only immutable fields are read.
            let m = unsafe { &*meta };
            Some(Running {
                id: m.id,
                // SAFETY: the record owns the name until `reap`, which
                // waits for the hazard, as argued above.
                name: unsafe { m.name() }.map(str::to_owned),
                location: m.location,
                root: std::ptr::eq(meta, &self.root),
                running_for: None,
            })
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
        // SAFETY: as argued above; only immutable fields are read.
        let m = unsafe { &*meta };
        Some(Running {
            id: m.id,
            // SAFETY: the record is live, as argued above.
            name: unsafe { m.name() }.map(str::to_owned),
            location: m.location,
            root: false,
            running_for: None,
        })
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
