//! A runtime's fibers read while one fiber holds its thread: what a dump
//! lists, beside the fiber that holds it, for a runtime that cannot answer
//! (a SIGQUIT dump during a stall lists every fiber, as Go's does).
//!
//! ## How
//!
//! A runtime's records are its own thread's, borrowed mutably by its
//! scheduler at any instant, so no other thread may take a reference to
//! them. But a thread held by the sampler's signal (`observe::sample`)
//! stands still at one instruction, as a process stopped by gdb does, and
//! what gdb's `info fibers` does there this module does too: it reads the
//! records as bytes, at the offsets published for gdb ([`Layout`]), with
//! `process_vm_readv` on our own process (the kernel copies the bytes, and
//! an address that went away gives an error rather than a fault), and
//! walks each parked fiber's stack from its saved switch frame, as a dump
//! does on the runtime's own thread.
//!
//! ## Why what it reads is whole
//!
//! - The held thread is the runtime's (the entry's kernel thread id is the
//!   one the signal went to) and it still runs the context the dump saw
//!   hold it: its watch word is unchanged (the handler checked it), and
//!   the record of the runtime's running context (`current`) names that
//!   context's `Meta`, which ties these records to that runtime.
//! - A record is put in or taken out (its name, stack and saved stack
//!   pointer change owner, and the array may grow) only between the two
//!   marks of `Records::editing`, which compiler fences keep around those
//!   stores. A thread held between them is not read.
//! - Outside them, a record that is neither vacant nor done owns its stack
//!   and name. One that is parked or ready and not running has its stack
//!   pointer saved by its last switch out (no switch is under way while
//!   the watch word is unchanged), or made by its first frame's build,
//!   which writes the frame and the `Meta` first (a call that is never
//!   inlined, and a compiler fence, in `core/first_run.rs`; a frame built
//!   at the spawn is written before the insert's mark).
//! - The running context's own record (the one that holds the thread) is
//!   left to the sample, and so is what its last park waited for: that
//!   record is the only one whose wait can be half written.
//!
//! ## What it costs, and its bounds
//!
//! The buffers are made before the hold: nothing is allocated and no lock
//! is taken while the thread is held, which may hold the allocator's lock
//! or the loader's (see `observe::sample`). The hold lasts a
//! `process_vm_readv` per [`CHUNK`] records and per name, and a walk per
//! stack: at most [`MAX_LISTED`] fibers are listed and [`MAX_WALKED`]
//! stacks walked; the rest are counted.

use std::mem::offset_of;
use std::panic::Location;
use std::time::Duration;

use crate::observe::debugger::{self, Layout};
use crate::scheduler::core::first_frame;
use crate::scheduler::core::records::Records;
use crate::scheduler::core::{Local, ROOT};
use crate::scheduler::fiber_id::FiberId;
use crate::scheduler::fiber_info::{FiberInfo, FiberState};
use crate::scheduler::stack_trace::walk::{self, MAX_FRAMES, RawStack};
use crate::scheduler::wait_on::StoredWait;
use crate::scheduler::watch::Meta;

/// The most fibers a held runtime's listing names.
const MAX_LISTED: usize = 10_000;
/// The most stacks walked while it is held.
const MAX_WALKED: usize = 1_000;
/// Records copied per `process_vm_readv`.
const CHUNK: usize = 256;
/// The bytes kept of a name, and of what a fiber waits for.
const TEXT: usize = 64;

/// A fiber as read from the held runtime: plain numbers and bytes.
struct Raw {
    key: u32,
    id: u64,
    parked: bool,
    name: Option<([u8; TEXT], usize)>,
    wait_tag: u8,
    wait_word: u64,
    wait_text: Option<([u8; TEXT], usize)>,
    waiting_until: u64,
    location: usize,
    /// Its walked addresses, in `ips` from `at`, and whether cut.
    stack: Option<(usize, usize, bool)>,
}

/// A read of one held runtime: buffers made before the hold
/// ([`HeldRead::prepare`]), filled while it lasts ([`HeldRead::read`]),
/// made into a dump's fibers after ([`HeldRead::finish`]).
pub(crate) struct HeldRead {
    /// The `Local` of each runtime on the held thread (one, but for a
    /// runtime made inside another's fiber).
    locals: Vec<usize>,
    /// The `Meta` of the context that holds the thread.
    meta: usize,
    layout: Option<&'static Layout>,
    chunk: Vec<u8>,
    raw: Vec<Raw>,
    ips: Vec<usize>,
    walked: usize,
    /// Fibers not listed (past `MAX_LISTED`).
    unlisted: usize,
    outcome: Result<(), &'static str>,
}

impl HeldRead {
    /// Buffers for a read of the runtime on thread `tid` while the context
    /// whose `Meta` is at `meta` holds it.
    pub(crate) fn prepare(tid: libc::pid_t, meta: usize) -> HeldRead {
        let layout = debugger::layout();
        let locals = debugger::locals_on(tid);
        // Room for as many records as there are now, and some spawned
        // before the hold.
        let now = layout.map_or(0, |l| {
            locals
                .iter()
                .map(|&local| peek_word(local + l.records_len as usize).unwrap_or(0))
                .max()
                .unwrap_or(0)
        });
        let listed = (now + 256).min(MAX_LISTED);
        let record = layout.map_or(0, |l| l.record_size as usize);
        HeldRead {
            locals,
            meta,
            layout,
            chunk: vec![0; CHUNK * record],
            raw: Vec::with_capacity(listed),
            ips: vec![0; listed.min(MAX_WALKED) * MAX_FRAMES],
            walked: 0,
            unlisted: 0,
            outcome: Err("its thread was not held"),
        }
    }

    /// Reads the held runtime's fibers into the buffers. Called while the
    /// thread is held (`sample::sample_holding`): takes no lock and
    /// allocates nothing.
    pub(crate) fn read(&mut self) {
        self.raw.clear();
        self.walked = 0;
        self.unlisted = 0;
        self.outcome = self.try_read();
    }

    fn try_read(&mut self) -> Result<(), &'static str> {
        let layout = self.layout.ok_or("no runtime has published its layout")?;
        let editing_at = offset_of!(Local, fibers) + Records::EDITING_AT;
        let meta_at = offset_of!(crate::scheduler::core::record::Record, meta);
        let size = layout.record_size as usize;
        // The runtime whose running context is the one that holds.
        let mut found = None;
        for &local in &self.locals {
            let current = peek::<4>(local + layout.current as usize).map(u32::from_ne_bytes);
            let records = peek_word(local + layout.records as usize);
            let len = peek_word(local + layout.records_len as usize);
            let (Some(current), Some(records), Some(len)) = (current, records, len) else {
                return Err("its memory could not be read (process_vm_readv)");
            };
            if (current as usize) < len
                && peek_word(records + current as usize * size + meta_at) == Some(self.meta)
            {
                found = Some((local, current, records, len));
                break;
            }
        }
        let (local, current, records, len) =
            found.ok_or("its records did not name the fiber that holds it")?;
        if peek::<1>(local + editing_at) != Some([0]) {
            return Err("it was adding or removing a fiber when it was held");
        }
        let mut first = 0;
        while first < len {
            let n = CHUNK.min(len - first);
            let bytes = &mut self.chunk[..n * size];
            if !peek_into(records + first * size, bytes) {
                return Err("its records could not be read (process_vm_readv)");
            }
            for i in 0..n {
                let key = (first + i) as u32;
                let rec = &self.chunk[i * size..(i + 1) * size];
                let state = u64::from(rec[layout.state as usize]);
                let parked = state == layout.parked;
                if key == current || !(parked || state == layout.ready) {
                    continue; // running (the holder), done or vacant
                }
                if self.raw.len() == self.raw.capacity() {
                    self.unlisted += 1;
                    continue;
                }
                let at = |off: u64| word_at(rec, off as usize);
                let sp = at(layout.sp);
                let started = sp != 0
                    && first_frame::deferred(std::ptr::without_provenance_mut(sp)).is_none();
                let meta = at(meta_at as u64);
                let name_ptr = at(layout.name + layout.name_ptr);
                let name = (name_ptr != 0).then(|| {
                    let len = at(layout.name + layout.name_len);
                    read_text(name_ptr + layout.name_text as usize, len)
                });
                let wait_tag = if parked {
                    rec[layout.wait_tag as usize]
                } else {
                    0
                };
                let wait_word = at(layout.wait_word) as u64;
                let wait_text = (wait_tag == StoredWait::SYNC_TAG)
                    .then(|| {
                        // The word is the address of a `&'static str`.
                        let ptr = peek_word(wait_word as usize + layout.str_ptr as usize)?;
                        let len = peek_word(wait_word as usize + layout.str_len as usize)?;
                        Some(read_text(ptr, len))
                    })
                    .flatten();
                let location = if started && meta != 0 {
                    peek_word(meta + offset_of!(Meta, location)).unwrap_or(0)
                } else {
                    0
                };
                let stack =
                    (started && (self.walked + 1) * MAX_FRAMES <= self.ips.len()).then(|| {
                        let from = self.walked * MAX_FRAMES;
                        let ips = &mut self.ips[from..from + MAX_FRAMES];
                        // A parked or ready context that has run, of a runtime
                        // held outside `Records::editing` and not in a switch
                        // (the module docs): its stack pointer was saved by its
                        // last switch out, and its stack, which its record owns,
                        // stays mapped while the thread is held.
                        // SAFETY: as argued above.
                        let (n, cut) = unsafe {
                            walk::parked_into(std::ptr::with_exposed_provenance(sp), ips)
                        };
                        self.walked += 1;
                        (from, n, cut)
                    });
                self.raw.push(Raw {
                    key,
                    id: at(layout.id) as u64,
                    parked,
                    name,
                    wait_tag,
                    wait_word,
                    wait_text,
                    waiting_until: at(layout.waiting_until) as u64,
                    location,
                    stack: stack.filter(|&(_, n, _)| n > 0),
                });
            }
            first += n;
        }
        Ok(())
    }

    /// The fibers read, with their stacks (by index in the list), or why
    /// there are none; and how many were left out.
    #[allow(clippy::type_complexity)]
    pub(crate) fn finish(
        self,
        now_ns: u64,
    ) -> Result<(Vec<FiberInfo>, Vec<(usize, RawStack)>, usize), &'static str> {
        self.outcome?;
        let text = |t: &Option<([u8; TEXT], usize)>| {
            t.as_ref()
                .map(|(b, n)| String::from_utf8_lossy(&b[..*n]).into_owned())
        };
        let mut stacks = Vec::new();
        let mut fibers = Vec::with_capacity(self.raw.len());
        for raw in &self.raw {
            let Some(id) = FiberId::from_u64(raw.id) else {
                continue;
            };
            if let Some((at, n, cut)) = raw.stack {
                stacks.push((fibers.len(), RawStack::new(&self.ips[at..at + n], cut)));
            }
            let waiting_on = if raw.wait_tag == StoredWait::SYNC_TAG {
                text(&raw.wait_text)
            } else {
                StoredWait::plain(raw.wait_tag, raw.wait_word).map(|on| on.to_string())
            };
            let deadline_in = (waiting_on.is_some() && raw.waiting_until != u64::MAX)
                .then(|| Duration::from_nanos(raw.waiting_until.saturating_sub(now_ns)));
            fibers.push(FiberInfo {
                id,
                name: text(&raw.name),
                root: raw.key == ROOT,
                state: if raw.parked {
                    FiberState::Parked
                } else {
                    FiberState::Ready
                },
                waiting_on,
                deadline_in,
                running_for: None,
                // A started context's `Meta::location` was written before
                // its first switch and never changes (`Meta`'s invariant):
                // the word read is null or a `&'static Location`.
                // SAFETY: as argued above; the record was whole (see the
                // module docs).
                spawned_at: unsafe {
                    std::ptr::with_exposed_provenance::<Location<'static>>(raw.location).as_ref()
                },
                stack_used: None,
                cpu_time: None,
                stack: None,
                group: None,
                in_group: None,
            });
        }
        Ok((fibers, stacks, self.unlisted))
    }
}

/// The word at `off` in `bytes`.
fn word_at(bytes: &[u8], off: usize) -> usize {
    let mut w = [0; 8];
    w.copy_from_slice(&bytes[off..off + 8]);
    usize::from_ne_bytes(w)
}

/// Up to [`TEXT`] bytes of the `len` at `addr` (none if unreadable).
fn read_text(addr: usize, len: usize) -> ([u8; TEXT], usize) {
    let mut text = [0; TEXT];
    let n = len.min(TEXT);
    if peek_into(addr, &mut text[..n]) {
        (text, n)
    } else {
        (text, 0)
    }
}

fn peek_word(addr: usize) -> Option<usize> {
    peek::<8>(addr).map(usize::from_ne_bytes)
}

fn peek<const N: usize>(addr: usize) -> Option<[u8; N]> {
    let mut bytes = [0; N];
    peek_into(addr, &mut bytes).then_some(bytes)
}

/// Copies the bytes at `addr` of this process into `buf` through the
/// kernel (`process_vm_readv`): whatever this or another thread does with
/// that memory, the copy is bytes, and an unmapped address is an error.
/// A plain system call: no lock, no allocation.
fn peek_into(addr: usize, buf: &mut [u8]) -> bool {
    if buf.is_empty() {
        return true;
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: std::ptr::without_provenance_mut(addr),
        iov_len: buf.len(),
    };
    // SAFETY: `local` is `buf`, writable for its length; the kernel reads
    // `remote` of our own process (always allowed: same thread group) and
    // checks it, failing on what is not mapped.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    n == buf.len() as isize
}
