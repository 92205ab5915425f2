//! Taking a stack's return addresses: a parked context's, from its saved
//! switch frame, or the running one's. Only addresses: turning them into
//! names and lines is `observe/resolve.rs`, done later and elsewhere.

use crate::arch;

/// The most frames a walk keeps: deeper stacks end with a note that they
/// were cut (Go keeps 100).
pub(crate) const MAX_FRAMES: usize = 128;

/// A stack's return addresses, innermost first (the first is the
/// instruction pointer of the innermost frame: a parked context's resume
/// point, or a frame of the walk itself), as a walk took them.
#[derive(Clone, Debug)]
pub(crate) struct RawStack {
    pub(crate) ips: Box<[usize]>,
    /// The walk stopped at [`MAX_FRAMES`] rather than at the stack's root.
    pub(crate) cut: bool,
}

/// The stack of the running context, from its caller out (the frames of
/// whoever asked for it are folded away when resolved).
#[inline(never)]
pub(crate) fn current() -> RawStack {
    // This function's own frame, told by the start of the function its
    // address is in (the walk's frames inside it, the unwinder's and the
    // `backtrace` crate's, come first and go with it).
    let me = current as fn() -> RawStack as usize;
    let mut ips = Vec::with_capacity(32);
    let mut mine = true;
    let mut cut = false;
    // `trace_unsynchronized` is `unsafe` only because some platforms'
    // unwinders (Windows' dbghelp) need the lock `trace` takes; on Linux
    // it is libgcc's `_Unwind_Backtrace`, which has its own locking, and
    // the closure calls nothing that could re-enter it.
    // SAFETY: as argued above.
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            let ip = frame.ip() as usize;
            if ip == 0 {
                return false; // past the root (see `parked`)
            }
            if mine {
                mine = frame.symbol_address() as usize != me;
                // (Were this frame never found, the walk's would stay:
                // folded as fibra's and glue.)
                ips.push(ip);
                if !mine {
                    ips.clear();
                }
                return true;
            }
            ips.push(ip);
            cut = ips.len() == MAX_FRAMES;
            !cut
        });
    }
    RawStack {
        ips: ips.into(),
        cut,
    }
}

/// The stack of the context parked at `sp` (its saved switch frame), from
/// its resume point out, walked from here without running it (see
/// [`arch::walk_parked`]); `None` if it has never run (its only frame is
/// the trampoline's) or the walk found nothing.
///
/// # Safety
///
/// As for [`arch::walk_parked`]: `sp` was saved by a switch (or built by
/// `init_stack`), its context stays suspended and its stack mapped until
/// this returns.
pub(crate) unsafe fn parked(sp: *const u8) -> Option<RawStack> {
    // (On the heap: this may run on a fiber's small stack.)
    let mut ips = vec![0; MAX_FRAMES];
    // SAFETY: forwarded from the caller.
    let (n, cut) = unsafe { parked_into(sp, &mut ips) };
    (n > 0).then(|| RawStack {
        ips: ips[..n].into(),
        cut,
    })
}

/// [`parked`] into `ips`, allocating nothing (for a walk while another
/// thread is held: see `observe::held`): how many addresses
/// it wrote (0 for a context that has never run, or a walk that found
/// nothing) and whether it stopped at `ips`' end.
///
/// # Safety
///
/// As for [`parked`].
pub(crate) unsafe fn parked_into(sp: *const u8, ips: &mut [usize]) -> (usize, bool) {
    let start = arch::walk_parked_return();
    let room = ips.len();
    if room == 0 {
        return (0, true);
    }
    let mut got = (0, false);
    // SAFETY: as in `current`; the stacks are still (see `parked`).
    let mut walk = || got = unsafe { after_marker(start, ips, false) };
    // SAFETY: forwarded from the caller; `walk` does not unwind (it writes
    // at most `ips.len()` addresses, stopping the walk at the last).
    unsafe { arch::walk_parked(sp, &mut walk) };
    let (n, cut) = got;
    // A context that has never run has one frame, its resume point (the
    // trampoline, where the walk stops); one that has run has at least the
    // function that parked, its entry and the trampoline.
    if n > 1 { (n, cut) } else { (0, false) }
}

/// The return addresses the unwinder finds from where it is called, past
/// the frame whose return address is `marker` (the frames up to it are
/// the walk's own), written into `ips`, innermost first; with
/// `exact_first`, the first is a stopped instruction (a signal frame's),
/// written plus one so that it symbolizes as a return address does.
/// Returns how many it wrote and whether it stopped at `ips`' end.
/// Allocates nothing and takes no lock of its own: the walk of a parked
/// context ([`parked_into`]) and of one a signal stopped
/// (`observe/sample/interrupted.rs`) share it.
///
/// # Safety
///
/// Every stack the unwinder goes through stays mapped and still until
/// this returns.
pub(crate) unsafe fn after_marker(
    marker: usize,
    ips: &mut [usize],
    exact_first: bool,
) -> (usize, bool) {
    let room = ips.len();
    let mut n = 0;
    let mut theirs = false;
    let mut cut = room == 0;
    if cut {
        return (0, true);
    }
    // `trace_unsynchronized` is libgcc's `_Unwind_Backtrace` here (see
    // `current`), and the closure only writes into `ips`.
    // SAFETY: as the caller promises.
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            let ip = frame.ip() as usize;
            if ip == 0 {
                // Past the root: libgcc reports the frame a root's
                // `.cfi_undefined rip` stops at, with no address.
                return false;
            }
            if theirs {
                ips[n] = if n == 0 && exact_first { ip + 1 } else { ip };
                n += 1;
                cut = n == room;
            } else {
                theirs = ip == marker;
            }
            !cut
        });
    }
    (n, cut)
}

impl RawStack {
    /// A stack of `ips` (innermost first), `cut` if the walk stopped at
    /// its bound.
    pub(crate) fn new(ips: &[usize], cut: bool) -> RawStack {
        RawStack {
            ips: ips.into(),
            cut,
        }
    }
}
