//! The floor under every fibra switch: the switch alone, two contexts
//! handing control back and forth from one shared loop (as in corosensei's
//! resume + suspend), with no scheduler around it.
//!
//! A fibra switch is two halves: inline assembly in the code that parks
//! (`arch::switch` in fibra's `src/arch/x86_64.rs`, copied below), and the
//! tail in `asm/x86_64.S`. Three copies of the tail are built by
//! `build.rs`: as shipped, without the MXCSR / x87 control-word load, and
//! without the MXCSR load only. With the matching first halves they make
//! the switch as shipped, the switch without the FP words (what the System
//! V rule "the FP control words are callee-saved" costs per round trip on
//! this machine), and one that stores MXCSR without ever loading it, the
//! floor of any switch that keeps it.

use std::arch::global_asm;
use std::time::Instant;

global_asm!(
    include_str!(concat!(env!("OUT_DIR"), "/full.S")),
    options(att_syntax)
);
global_asm!(
    include_str!(concat!(env!("OUT_DIR"), "/nofp.S")),
    options(att_syntax)
);
global_asm!(
    include_str!(concat!(env!("OUT_DIR"), "/store.S")),
    options(att_syntax)
);

// Not functions: the second halves, jumped to by `first_half!`.
unsafe extern "C" {
    fn floor_full_switch_tail();
    fn floor_full_trampoline();
    fn floor_nofp_switch_tail();
    fn floor_nofp_trampoline();
    fn floor_store_switch_tail();
    fn floor_store_trampoline();
}

/// The first half of a switch to the context saved at `$load`, saving this
/// one's stack pointer at `$save`: fibra's `arch::switch`, with (`fp`) or
/// without (`nofp`) the FP control words' save, jumping to `$tail`.
macro_rules! first_half {
    (fp, $tail:ident, $save:expr, $load:expr) => {
        first_half!(
            @lines ["stmxcsr -16(%rsp)", "fnstcw -12(%rsp)"],
            ["movzwl -12(%rsp), %ecx"],
            $tail,
            $save,
            $load
        )
    };
    (nofp, $tail:ident, $save:expr, $load:expr) => {
        first_half!(@lines [], [], $tail, $save, $load)
    };
    (@lines [$($fp_save:literal),*], [$($fp_keep:literal),*], $tail:ident, $save:expr, $load:expr) => {
        std::arch::asm!(
            $($fp_save,)*
            "leaq 2f(%rip), %rax",
            "movq %rax, -8(%rsp)",
            "movq %rbp, -24(%rsp)",
            "movq %rbx, -32(%rsp)",
            "leaq -32(%rsp), %rax",
            "movq %rax, (%rdi)",
            $($fp_keep,)*
            "movq %rsi, %rsp",
            "jmp {tail}",
            "2:",
            tail = sym $tail,
            in("rdi") $save,
            in("rsi") $load,
            in("rdx") 0usize,
            lateout("rax") _,
            out("r12") _,
            out("r13") _,
            out("r14") _,
            out("r15") _,
            clobber_abi("C"),
            options(att_syntax)
        )
    };
}

/// The two contexts' saved stack pointers.
struct Pair {
    sp: [*mut u8; 2],
}

/// One way of switching: its first half and its tail's trampoline.
trait Switch {
    /// Switches from context `me` of `pair` to the other one.
    ///
    /// # Safety
    ///
    /// The other context is suspended with its sp in the pair (built by
    /// `run` or saved by its own switch), on a live stack.
    unsafe fn once(pair: *mut Pair, me: usize);
    const TRAMPOLINE: unsafe extern "C" fn();
}

/// A [`Switch`] named `$name`: `first_half!($fp, $tail, ..)` and the
/// matching trampoline.
macro_rules! switch_kind {
    ($name:ident, $fp:ident, $tail:ident, $trampoline:ident) => {
        struct $name;

        impl Switch for $name {
            #[inline(always)]
            unsafe fn once(pair: *mut Pair, me: usize) {
                // SAFETY: forwarded from the caller; the block is fibra's
                // switch, its first half saving the FP words that its tail
                // loads (or neither, or MXCSR saved and never loaded).
                unsafe {
                    let other = (*pair).sp[1 - me];
                    first_half!($fp, $tail, &raw mut (*pair).sp[me], other);
                }
            }
            const TRAMPOLINE: unsafe extern "C" fn() = $trampoline;
        }
    };
}

switch_kind!(Full, fp, floor_full_switch_tail, floor_full_trampoline);
switch_kind!(NoFp, nofp, floor_nofp_switch_tail, floor_nofp_trampoline);
switch_kind!(Store, fp, floor_store_switch_tail, floor_store_trampoline);

/// Both contexts run this loop, so both switch from one site.
#[inline(never)]
fn ping_pong<S: Switch>(pair: *mut Pair, me: usize, rounds: u64) {
    for _ in 0..rounds {
        // SAFETY: the other context is suspended in its own switch (or
        // new, built by `run`).
        unsafe { S::once(pair, me) };
    }
}

unsafe extern "C" fn partner<S: Switch>(_arg: usize, pair: *mut u8) -> ! {
    loop {
        ping_pong::<S>(pair.cast(), 1, u64::MAX);
    }
}

/// The measuring context's loop, a switch site of its own, as a fiber's
/// loop that calls `yield_now` (inlined, with the switch) is.
#[inline(never)]
fn loop_here<S: Switch>(pair: *mut Pair, _me: usize, rounds: u64) {
    for _ in 0..rounds {
        // SAFETY: as in `ping_pong`.
        unsafe { S::once(pair, 0) };
    }
}

/// The partner's loop, another switch site, as the other fiber's loop.
unsafe extern "C" fn partner_elsewhere<S: Switch>(_arg: usize, pair: *mut u8) -> ! {
    loop {
        // SAFETY: as in `ping_pong`.
        unsafe { S::once(pair.cast(), 1) };
        std::hint::black_box(());
    }
}

type LoopFn = fn(*mut Pair, usize, u64);
type EntryFn = unsafe extern "C" fn(usize, *mut u8) -> !;

fn run<S: Switch>(main: LoopFn, entry: EntryFn) -> f64 {
    const ROUNDS: u64 = 20_000_000;
    let stack = vec![0u8; 64 << 10];
    let top = (stack.as_ptr() as usize + stack.len()) & !15;
    let mut pair = Pair {
        sp: [std::ptr::null_mut(); 2],
    };
    let frame: [u64; 4] = [
        &raw mut pair as u64,              // rbx: the entry's data
        entry as *const () as u64,         // rbp: the entry
        0x1F80 | (0x037F << 32),           // MXCSR, x87 CW
        S::TRAMPOLINE as *const () as u64, // the first resume point
    ];
    let sp = (top - 32) as *mut [u64; 4];
    // SAFETY: the 32 bytes below the 16-aligned top of `stack` are ours.
    unsafe { sp.write(frame) };
    pair.sp[1] = sp.cast();
    let t = Instant::now();
    main(&raw mut pair, 0, ROUNDS);
    let ns = t.elapsed().as_nanos() as f64 / ROUNDS as f64;
    // The partner stays suspended on `stack` forever: never free it.
    std::mem::forget(stack);
    ns
}

pub fn with_fp_words() -> f64 {
    run::<Full>(ping_pong::<Full>, partner::<Full>)
}

pub fn without_fp_words() -> f64 {
    run::<NoFp>(ping_pong::<NoFp>, partner::<NoFp>)
}

/// The floor of any switch that keeps each context's MXCSR: the switch
/// that stores it (`stmxcsr`, which must be) and never loads it back.
pub fn mxcsr_stored_only() -> f64 {
    run::<Store>(ping_pong::<Store>, partner::<Store>)
}

/// The floor of `yield_now` between two fibers with no scheduler: fibra's
/// switch as shipped, each context switching from a loop of its own, as two
/// fibers' loops that call `yield_now` do. Per round trip (two yields).
pub fn two_sites() -> f64 {
    run::<Full>(loop_here::<Full>, partner_elsewhere::<Full>)
}

/// What keeping a context's MXCSR costs a round trip at the least: the two
/// `stmxcsr` (one per switch) that read the outgoing context's, with
/// nothing else. On CPUs where it is microcoded (AMD Zen 2: about 5 ns
/// each) this alone can exceed corosensei's whole round trip.
pub fn two_mxcsr_reads() -> f64 {
    const ROUNDS: u64 = 20_000_000;
    let mut word = 0u32;
    let t = Instant::now();
    for _ in 0..ROUNDS {
        // SAFETY: `stmxcsr` writes 4 bytes to `word`, a local.
        unsafe {
            std::arch::asm!(
                "stmxcsr [{p}]",
                "stmxcsr [{p}]",
                p = in(reg) &raw mut word,
                options(nostack)
            );
        }
    }
    std::hint::black_box(word);
    t.elapsed().as_nanos() as f64 / ROUNDS as f64
}
