//! The Rust face of `asm/x86_64.S`.
//!
//! The register contract, repeated from the assembly: a fiber's [`switch`]
//! is inline assembly that writes rbx, rbp, its resume point, MXCSR and the
//! x87 control word just below the stack pointer, stores that frame's
//! address through `save_sp`, loads `load_sp` and jumps to
//! `fibra_0_1_switch_tail`, which pops the same frame from it and jumps to
//! that context's resume point with `arg` in rax. No call and no return:
//! each context's return stack entries stay its own (see "No call, no
//! return" there). Every other register, r12–r15 included, is declared
//! clobbered, so the compiler saves what it has live.
//!
//! A generator's switches ([`resume`], [`suspend`]) save only rbx, rbp and
//! the resume point, in a frame of three words, the same way: inline
//! assembly that declares every other register clobbered, r12–r15
//! included.

use std::arch::{asm, global_asm};

global_asm!(include_str!("../../asm/x86_64.S"), options(att_syntax));

unsafe extern "C" {
    /// Not a function: the second half of a fiber switch, jumped to by
    /// [`switch`]'s inline assembly and by the trampoline.
    fn fibra_0_1_switch_tail();
    fn fibra_0_1_trampoline();
    /// Not a C function: it keeps only rbx and rbp, so it is called from
    /// [`resume`]'s inline assembly only (rdi: `save_sp`, rsi: `load_sp`,
    /// rdx: `arg`; returns in rax).
    fn fibra_0_1_resume();
    /// Not a function: the second half of `fibra_0_1_resume`, jumped to.
    fn fibra_0_1_resume_tail();
    fn fibra_0_1_generator_trampoline();
    /// A C function: calls `f(data)` from a frame whose unwind info makes
    /// the context parked at `frame` its caller (see "Walking a parked
    /// context's stack" there).
    fn fibra_0_1_walk_parked(frame: *const u8, f: unsafe extern "C" fn(*mut u8), data: *mut u8);
    /// Not a function: the return address of the call in
    /// `fibra_0_1_walk_parked`.
    fn fibra_0_1_walk_parked_return();
}

/// A fiber's first function: `arg` is what the switch that started it passed,
/// `data` is the pointer given to [`init_stack`]. It must never unwind. It
/// returns the fiber's final switch, which the trampoline makes.
pub(crate) type EntryFn = unsafe extern "C" fn(arg: usize, data: *mut u8) -> FinalSwitch;

/// Where a finished fiber's context goes for good: the context to resume,
/// saved by [`switch`], [`resume`] or [`suspend`] (or built by
/// [`init_stack`]) and not resumed since, on a stack that is still mapped,
/// and the `arg` it gets. Returned in rax and rdx, as the System V ABI
/// returns a pair of words.
#[repr(C)]
pub(crate) struct FinalSwitch {
    pub(crate) load_sp: *mut u8,
    pub(crate) arg: usize,
}

/// The default MXCSR (all exceptions masked, round to nearest) and x87
/// control word (all exceptions masked, 64-bit precision, round to nearest)
/// that the System V ABI gives a new thread, packed as the frame stores them.
const DEFAULT_FP_WORDS: u64 = 0x1F80 | (0x037F << 32);

/// Bytes above a suspended context's stack pointer that its resumption
/// touches first: the switch frame, then the frames of the park that made
/// it (the scheduler's, the socket's wait, the read or write that waited).
const RESUME_BYTES: usize = 256;

/// Asks the CPU to start loading the switch frame saved at `sp` and the
/// frames just above it, so that a switch to that context a little later
/// does not wait on memory.
///
/// A runtime with thousands of fibers resumes each one after the others
/// have run, by which time its stack has left the caches: without this,
/// the first `pop` of a switch waits for DRAM (and a page walk), which made
/// the switch routine the largest item in a profile of 100 000 sleepers.
#[inline(always)]
pub(crate) fn prefetch_frame(sp: *const u8) {
    prefetch::<RESUME_BYTES>(sp);
}

/// Asks the CPU to start loading the `BYTES` from `p` on: every cache line
/// they touch, and at most one more (the count is fixed, so the compiler
/// unrolls it: a loop that stopped at the last line cost several
/// instructions per line, which added up on every switch).
#[inline(always)]
pub(crate) fn prefetch<const BYTES: usize>(p: *const u8) {
    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    let first = p as usize & !63;
    for line in 0..BYTES.div_ceil(64) + 1 {
        // SAFETY: a prefetch is a hint: it never faults, whatever the
        // address (a stale or unmapped one is simply dropped), and writes
        // nothing.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(first.wrapping_add(line * 64) as *const i8) };
    }
}

/// Asks the CPU to start loading the cache line that holds `p`.
#[inline(always)]
pub(crate) fn prefetch_line(p: *const u8) {
    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    // SAFETY: a prefetch is a hint: it never faults, whatever the address,
    // and writes nothing.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) };
}

/// Bytes a [`switch`] writes on the stack it leaves, below the stack
/// pointer of the code that switches: its resume point, the FP control
/// words, rbp and rbx.
pub(crate) const SWITCH_PUSHES: usize = 32;

/// Bytes a [`resume`] pushes on its caller's stack: the call's return
/// address, rbp and rbx.
pub(crate) const RESUME_PUSHES: usize = 24;

/// Reads the lowest of the `BYTES` below the stack pointer, which a switch
/// made from the same frame is about to write (see [`SWITCH_PUSHES`] and
/// [`RESUME_PUSHES`]): if they would run off the stack, the fault comes
/// here, before the switch, and not in the middle of it. Inlined: from a
/// frame of its own it would probe deeper, which only makes it stricter.
#[inline(always)]
pub(crate) fn probe_pushes<const BYTES: usize>() {
    // SAFETY: reads a byte `BYTES` below the stack pointer, in the area a
    // block without `nostack` may use, and keeps nothing; it can only
    // fault, on a stack that has run out, which is what it is for.
    unsafe { asm!("cmpb $0, -{n}(%rsp)", n = const BYTES, options(att_syntax, readonly)) };
}

/// Runs the assembly `$line`s of a switch with `save_sp` in rdi, `load_sp`
/// in rsi and `arg` in rdx, and evaluates to what the resumed side finds
/// in rax. Both switches that use it ([`switch`], [`resume`]) keep rbx,
/// rbp and rsp only, so the block declares r12–r15 clobbered besides the
/// C ABI's caller-saved registers, and the compiler saves around it only
/// what it has live. `$sym` names the routine the lines call or jump to.
/// Used inside `unsafe`, with the switches' own safety contracts.
macro_rules! switch_block {
    ([$($line:literal),+], $sym:ident = $target:ident, $save_sp:expr, $load_sp:expr, $arg:expr) => {{
        let got: usize;
        asm!(
            $($line),+,
            $sym = sym $target,
            in("rdi") $save_sp,
            in("rsi") $load_sp,
            in("rdx") $arg,
            lateout("rax") got,
            out("r12") _,
            out("r13") _,
            out("r14") _,
            out("r15") _,
            clobber_abi("C"),
            options(att_syntax)
        );
        got
    }};
}

/// Builds the first switch frame at the top of a fiber's stack and returns
/// the stack pointer to hand to [`switch`].
///
/// # Safety
///
/// `top` must be the 16-byte aligned upper end of writable memory with at
/// least 64 bytes below it that nothing else uses, and `data` must stay valid
/// for whatever `entry` does with it.
pub(crate) unsafe fn init_stack(top: *mut u8, entry: EntryFn, data: *mut u8) -> *mut u8 {
    let frame = [
        data as usize as u64,                     // rbx: the entry's data
        entry as *const () as u64,                // rbp: the entry function
        DEFAULT_FP_WORDS,                         // MXCSR, x87 control word
        fibra_0_1_trampoline as *const () as u64, // the first resume point
    ];
    // SAFETY: forwarded from the caller.
    unsafe { write_first_frame(top, frame) }
}

/// Builds the first frame of a generator, to hand to [`resume`]: the
/// generator frame of `asm/x86_64.S` (rbx, rbp, resume point), whose
/// resume point is the generator trampoline, which calls `entry(arg, data)`
/// and makes the final switch back to the caller of `resume`, without FP
/// words (see "Generators" there).
///
/// # Safety
///
/// As for [`init_stack`].
pub(crate) unsafe fn init_generator_stack(top: *mut u8, entry: EntryFn, data: *mut u8) -> *mut u8 {
    let frame = [
        data as usize as u64,                               // rbx: the entry's data
        entry as *const () as u64,                          // rbp: the entry function
        fibra_0_1_generator_trampoline as *const () as u64, // the resume point
    ];
    // SAFETY: forwarded from the caller.
    unsafe { write_first_frame(top, frame) }
}

/// Writes the first frame of a context that has never run just below
/// `top` and returns its address, the context's stack pointer. Once the
/// frame is popped rsp is `top` again: 16-byte aligned when the trampoline
/// calls the entry, as the ABI wants.
///
/// # Safety
///
/// As for [`init_stack`] (which also bounds the frame: 64 bytes at most).
unsafe fn write_first_frame<const WORDS: usize>(top: *mut u8, frame: [u64; WORDS]) -> *mut u8 {
    debug_assert_eq!(top as usize % 16, 0, "a stack top must be 16-byte aligned");
    const { assert!(WORDS * 8 <= 64) };
    let sp = top.wrapping_sub(WORDS * 8).cast::<[u64; WORDS]>();
    // SAFETY: the caller guarantees 64 writable bytes below `top`, and `top`
    // is 16-byte aligned, so `sp` is 8-byte aligned for the u64 writes.
    unsafe { sp.write(frame) };
    sp.cast()
}

/// Suspends the running context, saving its stack pointer in `*save_sp`, and
/// resumes the context saved at `load_sp`, which sees `arg` as the return
/// value of its own `switch` (or, if new, as its entry's first argument).
/// Returns when some context switches back to this one, with its `arg`.
///
/// # Safety
///
/// `save_sp` must be valid for a write; `load_sp` must be a stack pointer
/// produced by [`init_stack`] or saved by an earlier `switch`, whose context
/// has not been resumed since, and whose stack is still mapped. No unwinding
/// may cross the switch (fiber entries catch every panic).
#[inline(always)]
pub(crate) unsafe fn switch(save_sp: *mut *mut u8, load_sp: *mut u8, arg: usize) -> usize {
    // The block writes the switch frame of `asm/x86_64.S` (resume point
    // `2:`, FP words, rbp, rbx) in the 32 bytes below the stack pointer,
    // stores the frame's address through `save_sp`, and continues on the
    // incoming context's frame with `fibra_0_1_switch_tail`, which jumps to
    // that context's resume point. When this context is resumed, the tail
    // has popped the frame, restoring rbx, rbp, the FP words and the stack
    // pointer, and jumps to `2:` with `arg` in rax; every other register is
    // declared clobbered, r12-r15 included, so the compiler keeps nothing
    // in them across the block.
    //
    // Stores rather than pushes, as in `suspend`: the stack pointer of this
    // (inlined) function changes at one instruction only, the load of the
    // incoming context's, so the unwind info the compiler wrote for the
    // function stays true at every other instruction of the block. The 32
    // bytes are inside the red zone, which signal delivery skips, and the
    // compiler keeps nothing there across a block that does not say
    // `nostack`.
    //
    // The inputs are in fixed registers (rdi, rsi, rdx) that the block
    // never writes: it writes rax and rcx only, neither an input. The
    // incoming frame was written by this same block in another context,
    // or by `init_stack`.
    // SAFETY: as argued above, with the caller's guarantees on `save_sp`
    // and `load_sp`; everything else is declared clobbered.
    unsafe {
        switch_block!(
            [
                "stmxcsr -16(%rsp)",
                "fnstcw -12(%rsp)",
                "leaq 2f(%rip), %rax",
                "movq %rax, -8(%rsp)",
                "movq %rbp, -24(%rsp)",
                "movq %rbx, -32(%rsp)",
                "leaq -32(%rsp), %rax",
                "movq %rax, (%rdi)",
                "movzwl -12(%rsp), %ecx",
                "movq %rsi, %rsp",
                "jmp {tail}",
                "2:"
            ],
            tail = fibra_0_1_switch_tail,
            save_sp,
            load_sp,
            arg
        )
    }
}

/// Enters a generator: like [`switch`], but the generator's context is
/// resumed with a jump, so that the `ret` of its next [`suspend`] is the
/// one the CPU predicts, and the FP control words are neither saved nor
/// loaded: the generator runs in its caller's FP environment, as a called
/// function does (see "Generators" in `asm/x86_64.S`). Returns the `arg`
/// of that `suspend` (or of the generator's final switch).
///
/// The call is made from inline assembly that declares every register but
/// rbx, rbp and rsp clobbered: `fibra_0_1_resume` saves those two beside
/// the return address, and the compiler saves whatever else it has live.
///
/// # Safety
///
/// As for [`switch`], and `load_sp` must have been saved by [`suspend`] or
/// built by [`init_generator_stack`]: a context saved by `switch` has a
/// frame of another layout.
#[inline(always)]
pub(crate) unsafe fn resume(save_sp: *mut *mut u8, load_sp: *mut u8, arg: usize) -> usize {
    // The routine writes `*save_sp` and the 24 bytes it pushes below the
    // return address of the call, which the block may use (no `nostack`;
    // rsp is aligned for a call on entry, as Rust guarantees); every
    // register it or the generator may change is declared clobbered, and
    // it comes back (by the `ret` of `fibra_0_1_resume_tail`) with rbx,
    // rbp and rsp as they were.
    // SAFETY: as just argued, with the caller's guarantees on `save_sp`
    // and `load_sp`.
    unsafe {
        switch_block!(
            ["call {routine}"],
            routine = fibra_0_1_resume,
            save_sp,
            load_sp,
            arg
        )
    }
}

/// Leaves a generator for the context that entered it with [`resume`],
/// which returns `arg`. Returns when the generator is resumed again.
///
/// The frame it writes is the generator frame of `asm/x86_64.S` (rbx, rbp,
/// resume point), built here in inline assembly so that no call of its own
/// stands between the generator's code and the switch (its return would
/// be mispredicted); inline it into the generator's body to keep the
/// return stack balanced.
///
/// # Safety
///
/// `save_sp` must be valid for a write, and `load_sp` a context saved by
/// [`resume`] that has not been resumed since, on a live stack. No
/// unwinding may cross the switch.
#[inline(always)]
pub(crate) unsafe fn suspend(save_sp: *mut *mut u8, load_sp: *mut u8, arg: usize) {
    // The block writes a generator frame (resume point, rbp, rbx) just
    // below the stack pointer, stores the frame's address through
    // `save_sp`, and continues on the entering context's frame with the
    // second half of `fibra_0_1_resume`, as its own `ret` would. When the
    // generator is resumed, `fibra_0_1_resume` pops that frame, restoring
    // rbx, rbp and the stack pointer, and jumps to `2:`; every other
    // register is declared clobbered, r12-r15 included, so the compiler
    // keeps nothing in them across the block.
    //
    // Stores rather than pushes: the stack pointer of this (inlined, so
    // unknown) function then changes at one instruction only, the load of
    // the entering context's, so the unwind info the compiler wrote for the
    // function stays true at every other instruction of the block, and a
    // profiler's sample there walks the generator's stack correctly. The
    // 24 bytes written are inside the red zone, which signal delivery
    // skips, and the compiler keeps nothing there across a block that does
    // not say `nostack`.
    //
    // Inputs are read before any register but rax (an output that is not
    // late, so never an input's register) or rsp is written, so any
    // register the compiler picks for them works; `out` (not late) for
    // r12-r15 keeps the inputs out of those too.
    // SAFETY: as above, with the caller's guarantees on `save_sp` and
    // `load_sp`; everything else is declared clobbered.
    unsafe {
        asm!(
            "leaq 2f(%rip), %rax",
            "movq %rax, -8(%rsp)",
            "movq %rbp, -16(%rsp)",
            "movq %rbx, -24(%rsp)",
            "leaq -24(%rsp), %rax",
            "movq %rax, ({save})",
            "movq {load}, %rsp",
            "jmp {tail}",
            "2:",
            save = in(reg) save_sp,
            load = in(reg) load_sp,
            tail = sym fibra_0_1_resume_tail,
            in("rdx") arg,
            out("rax") _,
            out("r12") _,
            out("r13") _,
            out("r14") _,
            out("r15") _,
            clobber_abi("C"),
            options(att_syntax)
        );
    }
}

/// Runs `f` on the calling thread's stack, in a frame whose caller, as an
/// unwinder sees it, is the context parked at `sp`: a stack walk started
/// in `f` walks `f`'s own frames, then one whose instruction pointer is
/// [`walk_parked_return`], then the parked context's, from its resume
/// point out, without running or changing it.
///
/// `f` must not unwind: a panic in it aborts the process (it is called
/// through an `extern "C"` function, which Rust does not let a panic
/// leave), since an unwind past that frame would resume the parked
/// context's frames on this thread.
///
/// # Safety
///
/// `sp` must be a stack pointer saved by [`switch`] (or built by
/// [`init_stack`]) whose context is not resumed, on a stack that stays
/// mapped, until this returns.
pub(crate) unsafe fn walk_parked(sp: *const u8, f: &mut dyn FnMut()) {
    unsafe extern "C" fn call(data: *mut u8) {
        // SAFETY: `data` is the `&mut &mut dyn FnMut()` made below, alive
        // for the whole call of `fibra_0_1_walk_parked`.
        let f = unsafe { &mut *data.cast::<&mut dyn FnMut()>() };
        f();
    }
    let mut f = f;
    // The routine keeps rbx (saved and restored) and calls `call` as a C
    // function; it reads nothing through `sp` itself (only an unwinder
    // started in `f` does, as the caller allows).
    // SAFETY: as argued above, with the caller's guarantee on `sp`.
    unsafe { fibra_0_1_walk_parked(sp, call, (&raw mut f).cast()) }
}

/// The instruction pointer of [`walk_parked`]'s own frame, as a stack walk
/// started in its `f` reports it (a return address): the frames after it
/// are the parked context's.
pub(crate) fn walk_parked_return() -> usize {
    fibra_0_1_walk_parked_return as *const () as usize
}

/// Whether this thread may switch stacks with the switches above: not
/// while a CET shadow stack is active, since they do not switch shadow
/// stacks (a context's returns after another context's calls, or a
/// generator's `ret` into its caller, would not match the shadow stack's
/// record, and the CPU would kill the process with a control protection
/// fault). Linux enables one only for a binary marked
/// SHSTK-compatible (e.g. built with `-Zcf-protection=full`) and when
/// glibc is asked to (`GLIBC_TUNABLES=glibc.cpu.x86_shstk=on`).
pub(crate) fn check_supported() -> std::io::Result<()> {
    const ARCH_SHSTK_STATUS: libc::c_ulong = 0x5005;
    const ARCH_SHSTK_SHSTK: u64 = 1;
    let mut features: u64 = 0;
    // SAFETY: ARCH_SHSTK_STATUS writes one u64 through the pointer, which
    // is valid; kernels without CET support fail with EINVAL, touching
    // nothing.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_SHSTK_STATUS,
            &mut features as *mut u64,
        )
    };
    if rc == 0 && features & ARCH_SHSTK_SHSTK != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "fibra cannot run with a CET shadow stack active: its stack switch does not \
             switch shadow stacks yet (run with GLIBC_TUNABLES=glibc.cpu.x86_shstk=off, or \
             build without -Zcf-protection)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::ffi::c_void;

    /// libgcc's `struct dwarf_eh_bases`.
    #[repr(C)]
    struct EhBases {
        tbase: *mut c_void,
        dbase: *mut c_void,
        func: *mut c_void,
    }

    unsafe extern "C" {
        /// libgcc's lookup of the FDE covering `pc` (what every unwinder
        /// step does with a return address minus one).
        fn _Unwind_Find_FDE(pc: *mut c_void, bases: *mut EhBases) -> *const c_void;
    }

    /// The start of the FDE covering `pc`, if any.
    fn fde_start(pc: usize) -> Option<usize> {
        let mut bases = EhBases {
            tbase: std::ptr::null_mut(),
            dbase: std::ptr::null_mut(),
            func: std::ptr::null_mut(),
        };
        // SAFETY: a lookup in the unwind tables; `bases` is a valid out-struct.
        let fde = unsafe { _Unwind_Find_FDE(pc as *mut c_void, &mut bases) };
        (!fde.is_null()).then_some(bases.func as usize)
    }

    #[test]
    fn switching_is_supported_without_a_shadow_stack() {
        // This machine runs without CET shadow stacks (the probe's syscall
        // fails with EINVAL on kernels or CPUs without them, which counts
        // as none active).
        super::check_supported().unwrap();
    }

    #[test]
    fn a_new_contexts_return_address_unwinds_into_the_trampoline() {
        let trampoline = super::fibra_0_1_trampoline as *const () as usize;
        // A new fiber's frame returns to the trampoline's first byte; the
        // unwinder looks that up at minus one. It must find the
        // trampoline's own FDE (which ends the walk), not none or the
        // switch's.
        let fde = fde_start(trampoline - 1).expect("no FDE covers trampoline - 1");
        assert_eq!(
            fde,
            trampoline - 1,
            "the FDE starts on the nop before the trampoline"
        );
        assert_eq!(
            fde_start(trampoline + 4),
            Some(fde),
            "one FDE for the whole trampoline"
        );
        let switch = super::fibra_0_1_switch_tail as *const () as usize;
        assert_ne!(fde_start(switch), Some(fde));
        // The same for a generator's.
        let trampoline = super::fibra_0_1_generator_trampoline as *const () as usize;
        let fde = fde_start(trampoline - 1).expect("no FDE covers trampoline - 1");
        assert_eq!(fde, trampoline - 1);
        assert_eq!(fde_start(trampoline + 4), Some(fde));
    }
}
