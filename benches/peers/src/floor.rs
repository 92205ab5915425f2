//! The floor under every fibra switch: the switch routine alone, two
//! contexts handing control back and forth from one shared loop (so every
//! `ret` is predicted, as in corosensei's resume + suspend), with no
//! scheduler around it.
//!
//! Three copies of `asm/x86_64.S` are built by `build.rs`: as shipped,
//! without the MXCSR / x87 control-word save, and storing MXCSR without
//! ever loading it. The first two differ by what the System V rule "the FP
//! control words are callee-saved" costs per round trip on this machine;
//! the third is the floor of any routine that keeps them.

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

// Not C functions: the routine clobbers r12-r15, so it is called from
// inline assembly that says so (see `ping_pong`), as fibra's `arch::switch`
// calls it.
unsafe extern "C" {
    fn floor_full_switch();
    fn floor_full_trampoline();
    fn floor_nofp_switch();
    fn floor_nofp_trampoline();
    fn floor_store_switch();
    fn floor_store_trampoline();
}

type SwitchFn = unsafe extern "C" fn();

/// The two contexts' saved stack pointers and the routine they use.
struct Pair {
    sp: [*mut u8; 2],
    switch: SwitchFn,
}

/// One switch to the other context of `pair`, from `me`.
///
/// The routine keeps rbx, rbp and the FP words; everything else is
/// declared clobbered, as in fibra's `arch::switch`.
#[inline(always)]
fn switch_once(pair: *mut Pair, me: usize) {
    // SAFETY: the other context is suspended with its sp in the pair
    // (built by `run` or saved by its own switch), on a live stack.
    unsafe {
        let other = (*pair).sp[1 - me];
        std::arch::asm!(
            "call {f}",
            f = in(reg) (*pair).switch,
            in("rdi") &raw mut (*pair).sp[me],
            in("rsi") other,
            in("rdx") 0usize,
            out("r12") _,
            out("r13") _,
            out("r14") _,
            out("r15") _,
            clobber_abi("C"),
        );
    }
}

/// Both contexts run this loop, so both call the routine from one site.
#[inline(never)]
fn ping_pong(pair: *mut Pair, me: usize, rounds: u64) {
    for _ in 0..rounds {
        switch_once(pair, me);
    }
}

unsafe extern "C" fn partner(_arg: usize, pair: *mut u8) -> ! {
    loop {
        ping_pong(pair.cast(), 1, u64::MAX);
    }
}

/// A yield as a fiber makes it, with no scheduler: a function of its own
/// that switches and returns to its caller.
#[inline(never)]
fn yield_once(pair: *mut Pair, me: usize) {
    switch_once(pair, me);
}

/// The measuring context's loop of `yield_once`, a call site of its own.
#[inline(never)]
fn loop_here(pair: *mut Pair, _me: usize, rounds: u64) {
    for _ in 0..rounds {
        yield_once(pair, 0);
    }
}

/// The partner's loop, another call site: each return from `yield_once`
/// lands where the other context's call left the return stack pointing,
/// as `yield_now` between two fibers' loops does.
unsafe extern "C" fn partner_elsewhere(_arg: usize, pair: *mut u8) -> ! {
    loop {
        yield_once(pair.cast(), 1);
        std::hint::black_box(());
    }
}

type LoopFn = fn(*mut Pair, usize, u64);
type EntryFn = unsafe extern "C" fn(usize, *mut u8) -> !;

fn run(switch: SwitchFn, trampoline: unsafe extern "C" fn(), main: LoopFn, entry: EntryFn) -> f64 {
    const ROUNDS: u64 = 20_000_000;
    let stack = vec![0u8; 64 << 10];
    let top = (stack.as_ptr() as usize + stack.len()) & !15;
    let mut pair = Pair {
        sp: [std::ptr::null_mut(); 2],
        switch,
    };
    let frame: [u64; 4] = [
        &raw mut pair as u64,           // rbx: the entry's data
        entry as *const () as u64,      // rbp: the entry
        0x1F80 | (0x037F << 32),        // MXCSR, x87 CW
        trampoline as *const () as u64, // first ret
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
    run(floor_full_switch, floor_full_trampoline, ping_pong, partner)
}

pub fn without_fp_words() -> f64 {
    run(floor_nofp_switch, floor_nofp_trampoline, ping_pong, partner)
}

/// The floor of any switch that keeps each context's MXCSR: the routine
/// that stores it (`stmxcsr`, which must be) and never loads it back.
pub fn mxcsr_stored_only() -> f64 {
    run(
        floor_store_switch,
        floor_store_trampoline,
        ping_pong,
        partner,
    )
}

/// The floor of `yield_now` between two fibers with no scheduler: fibra's
/// routine as shipped, each context switching from a function of its own
/// called from a loop of its own, so each return to a loop mispredicts as
/// it does between two fibers. Per round trip (two yields).
pub fn two_sites() -> f64 {
    run(
        floor_full_switch,
        floor_full_trampoline,
        loop_here,
        partner_elsewhere,
    )
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
