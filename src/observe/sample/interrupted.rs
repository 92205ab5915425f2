//! Walking a context stopped by a signal at any instruction, from the
//! registers its handler copied out: `fibra_0_1_walk_interrupted`
//! (`asm/x86_64.S`) calls the walk from a frame whose unwind info names
//! those registers as its caller's, as a signal frame, so libgcc's
//! unwinder goes on into the stopped context's frames from the very
//! instruction it was stopped at. The walk writes into a buffer the caller
//! owns and allocates nothing: the stopped thread may hold the allocator's
//! lock (see `sample.rs` for why the rest of it takes no lock either).

use crate::scheduler::stack_trace::walk::{self, MAX_FRAMES};

unsafe extern "C" {
    fn fibra_0_1_walk_interrupted(
        regs: *const Regs,
        f: unsafe extern "C" fn(*mut u8),
        data: *mut u8,
    );
    /// Not a function: the return address of the call in
    /// `fibra_0_1_walk_interrupted`.
    fn fibra_0_1_walk_interrupted_return();
}

/// The registers of a stopped context, in DWARF's numbering as the routine
/// reads them: rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8–r15, then rip.
pub(super) type Regs = [u64; 17];

/// Copies the registers of `uc` (a signal handler's ucontext) into `regs`:
/// plain loads and stores, async-signal-safe.
///
/// # Safety
///
/// `uc` is the `ucontext_t` the kernel gave a `SA_SIGINFO` handler, which
/// is running.
pub(super) unsafe fn copy_regs(uc: *const libc::ucontext_t, regs: &mut Regs) {
    const ORDER: [libc::c_int; 17] = [
        libc::REG_RAX,
        libc::REG_RDX,
        libc::REG_RCX,
        libc::REG_RBX,
        libc::REG_RSI,
        libc::REG_RDI,
        libc::REG_RBP,
        libc::REG_RSP,
        libc::REG_R8,
        libc::REG_R9,
        libc::REG_R10,
        libc::REG_R11,
        libc::REG_R12,
        libc::REG_R13,
        libc::REG_R14,
        libc::REG_R15,
        libc::REG_RIP,
    ];
    // SAFETY: the caller's `uc` is valid for reads while its handler runs.
    let gregs = unsafe { &(*uc).uc_mcontext.gregs };
    for (slot, &reg) in regs.iter_mut().zip(&ORDER) {
        // (Every `REG_*` is below `gregs`' 23 entries.)
        *slot = gregs[reg as usize] as u64;
    }
}

/// Walks the context stopped with `regs` into `out`, innermost first:
/// returns how many addresses it wrote and whether it stopped at
/// `MAX_FRAMES` before the stack's root. The first is the instruction the
/// context was stopped at, plus one (so that symbolizing it as a return
/// address, one byte back, names that instruction).
///
/// # Safety
///
/// The context stays stopped (its thread held in a signal handler) and its
/// stack mapped until this returns.
pub(super) unsafe fn walk(regs: &Regs, out: &mut [usize; MAX_FRAMES]) -> (usize, bool) {
    let start = fibra_0_1_walk_interrupted_return as *const () as usize;
    let mut got = (0, false);
    // SAFETY: the caller keeps the stopped stack still and mapped; the
    // sampler's own frames are its thread's.
    let mut walk = || got = unsafe { walk::after_marker(start, out, true) };
    let mut f: &mut dyn FnMut() = &mut walk;
    unsafe extern "C" fn call(data: *mut u8) {
        // SAFETY: `data` is the `&mut &mut dyn FnMut()` made below, alive
        // for the whole call of `fibra_0_1_walk_interrupted`; the walk
        // cannot unwind (it indexes `out` below `MAX_FRAMES` only).
        let f = unsafe { &mut *data.cast::<&mut dyn FnMut()>() };
        f();
    }
    // The routine keeps rbx and calls `call` as a C function; only the
    // unwinder started inside reads `regs` and the stack they point into,
    // which the caller keeps still.
    // SAFETY: as argued above, with the caller's guarantee.
    unsafe { fibra_0_1_walk_interrupted(regs, call, (&raw mut f).cast()) };
    got
}
