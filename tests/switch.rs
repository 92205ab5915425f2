//! The context switch: interleaving, FIFO order, registers and FP control
//! state preserved, many fibers, and backtraces that stop at a fiber's root.
//! CI runs this file in release mode too.

use std::arch::asm;
use std::cell::RefCell;
use std::hint::black_box;
use std::rc::Rc;

#[test]
fn fibers_interleave_in_fifo_order() {
    let log = Rc::new(RefCell::new(Vec::new()));
    fibra::run(|| {
        let handles: Vec<_> = (0..3)
            .map(|id| {
                let log = log.clone();
                fibra::spawn(move || {
                    for round in 0..4 {
                        log.borrow_mut().push((round, id));
                        fibra::yield_now();
                    }
                })
            })
            .collect();
        // The root yields too and takes its place in the queue.
        for round in 0..4 {
            fibra::yield_now();
            log.borrow_mut().push((round, 99));
        }
        handles.into_iter().for_each(|h| h.join().unwrap());
    });
    let log = log.borrow();
    let expected: Vec<(i32, i32)> = (0..4)
        .flat_map(|round| [(round, 0), (round, 1), (round, 2), (round, 99)])
        .collect();
    assert_eq!(*log, expected);
}

#[test]
fn a_yield_goes_behind_every_ready_fiber() {
    let log = Rc::new(RefCell::new(Vec::new()));
    fibra::run(|| {
        let l = log.clone();
        let a = fibra::spawn(move || {
            l.borrow_mut().push("a1");
            fibra::yield_now();
            l.borrow_mut().push("a2");
        });
        let l = log.clone();
        let b = fibra::spawn(move || l.borrow_mut().push("b"));
        let l = log.clone();
        let c = fibra::spawn(move || l.borrow_mut().push("c"));
        a.join().unwrap();
        b.join().unwrap();
        c.join().unwrap();
    });
    assert_eq!(*log.borrow(), ["a1", "b", "c", "a2"]);
}

/// Many values live across yields, while other fibers run with other
/// values: in release builds the optimiser keeps them in callee-saved
/// registers, which the switch must preserve.
#[test]
fn live_values_survive_switches() {
    fn work(seed: u64) -> u64 {
        let mut v = [0u64; 12];
        for (i, x) in v.iter_mut().enumerate() {
            *x = black_box(seed.wrapping_mul(i as u64 + 1) ^ 0x5555);
        }
        let mut acc = 0u64;
        for round in 0..50 {
            fibra::yield_now();
            for (i, x) in v.iter_mut().enumerate() {
                assert_eq!(
                    *x,
                    expected(seed, i, round),
                    "value {i} of fiber {seed} changed"
                );
                *x = x.rotate_left(1);
                acc = acc.wrapping_add(*x);
            }
        }
        acc
    }
    fn expected(seed: u64, i: usize, round: u32) -> u64 {
        (seed.wrapping_mul(i as u64 + 1) ^ 0x5555).rotate_left(round)
    }
    fibra::run(|| {
        let hs: Vec<_> = (1..=8u64).map(|s| fibra::spawn(move || work(s))).collect();
        let here = work(1000);
        for h in hs {
            h.join().unwrap();
        }
        black_box(here);
    });
}

/// Loads fixed values into every callee-saved register, calls `$shim`
/// (which switches away: other contexts run and scribble over registers),
/// and reads the registers back. The shim is a `sym` operand: a function
/// pointer in a register operand could be given rbp, which the block
/// overwrites.
macro_rules! callee_saved_across {
    ($shim:path) => {{
        let mut got = [0u64; 5];
        // SAFETY: rbx and rbp are saved and restored by hand, r12–r15 are
        // declared clobbered, and the stack is realigned to 16 bytes around
        // the call, as the ABI wants; `got` is valid for 40 bytes of writes.
        unsafe {
            asm!(
                "push rbx",
                "push rbp",
                "push {out}",
                "mov rbp, rsp",
                "and rsp, -16",
                "movabs rbx, 0x1111111111111111",
                "movabs r12, 0x2222222222222222",
                "movabs r13, 0x3333333333333333",
                "movabs r14, 0x4444444444444444",
                "movabs r15, 0x5555555555555555",
                "call {f}",
                "mov rsp, rbp",
                "pop rax",
                "mov [rax], rbx",
                "mov [rax + 8], r12",
                "mov [rax + 16], r13",
                "mov [rax + 24], r14",
                "mov [rax + 32], r15",
                "pop rbp",
                "pop rbx",
                f = sym $shim,
                out = in(reg) got.as_mut_ptr(),
                out("r12") _, out("r13") _, out("r14") _, out("r15") _,
                clobber_abi("C"),
            );
        }
        got
    }};
}

/// Fills the callee-saved registers with garbage and calls `$shim`.
macro_rules! scribble_and_call {
    ($shim:path) => {{
        // SAFETY: as in `callee_saved_across!`, without reading back.
        unsafe {
            asm!(
                "push rbx",
                "push rbp",
                "mov rbp, rsp",
                "and rsp, -16",
                "mov rbx, -1",
                "mov r12, -1",
                "mov r13, -1",
                "mov r14, -1",
                "mov r15, -1",
                "call {f}",
                "mov rsp, rbp",
                "pop rbp",
                "pop rbx",
                f = sym $shim,
                out("r12") _, out("r13") _, out("r14") _, out("r15") _,
                clobber_abi("C"),
            );
        }
    }};
}

extern "C" fn fiber_yield_shim() {
    fibra::yield_now();
}

#[test]
fn callee_saved_registers_are_preserved() {
    fibra::run(|| {
        let others: Vec<_> = (0..3)
            .map(|_| fibra::spawn(|| (0..5).for_each(|_| scribble_and_call!(fiber_yield_shim))))
            .collect();
        let checker = fibra::spawn(|| {
            (0..5)
                .map(|_| callee_saved_across!(fiber_yield_shim))
                .collect::<Vec<_>>()
        });
        for got in checker.join().unwrap() {
            assert_eq!(
                got,
                [
                    0x1111111111111111,
                    0x2222222222222222,
                    0x3333333333333333,
                    0x4444444444444444,
                    0x5555555555555555
                ]
            );
        }
        // The root context too.
        assert_eq!(
            callee_saved_across!(fiber_yield_shim)[0],
            0x1111111111111111
        );
        others.into_iter().for_each(|h| h.join().unwrap());
    });
}

fn mxcsr() -> u32 {
    let mut v = 0u32;
    // SAFETY: stmxcsr stores 4 bytes to a valid location.
    unsafe { asm!("stmxcsr [{}]", in(reg) &mut v, options(nostack)) };
    v
}

fn set_mxcsr(v: u32) {
    // SAFETY: loads a valid MXCSR value (reserved bits zero).
    unsafe { asm!("ldmxcsr [{}]", in(reg) &v, options(nostack)) };
}

fn x87_cw() -> u16 {
    let mut v = 0u16;
    // SAFETY: fnstcw stores 2 bytes to a valid location.
    unsafe { asm!("fnstcw [{}]", in(reg) &mut v, options(nostack)) };
    v
}

fn set_x87_cw(v: u16) {
    // SAFETY: loads a valid x87 control word.
    unsafe { asm!("fldcw [{}]", in(reg) &v, options(nostack)) };
}

const MXCSR_CONTROL: u32 = 0xFFC0;

#[test]
fn fp_control_state_is_per_fiber() {
    fibra::run(|| {
        let root_mxcsr = mxcsr();
        // Round toward zero and flush-to-zero in the spawner: a new fiber
        // must still start with the ABI defaults.
        set_mxcsr((root_mxcsr & !0x6000) | 0x6000 | 0x8000);
        set_x87_cw(0x0C7F);
        let a = fibra::spawn(|| {
            assert_eq!(mxcsr() & MXCSR_CONTROL, 0x1F80, "new fiber MXCSR");
            assert_eq!(x87_cw(), 0x037F, "new fiber x87 CW");
            set_mxcsr(0x1F80 | 0x2000); // round down
            set_x87_cw(0x077F);
            for _ in 0..5 {
                fibra::yield_now();
                assert_eq!(mxcsr() & MXCSR_CONTROL, 0x1F80 | 0x2000);
                assert_eq!(x87_cw(), 0x077F);
            }
        });
        let b = fibra::spawn(|| {
            for _ in 0..5 {
                assert_eq!(mxcsr() & MXCSR_CONTROL, 0x1F80);
                assert_eq!(x87_cw(), 0x037F);
                fibra::yield_now();
            }
        });
        for _ in 0..5 {
            fibra::yield_now();
            assert_eq!(mxcsr() & MXCSR_CONTROL, 0x1F80 | 0x6000 | 0x8000);
            assert_eq!(x87_cw(), 0x0C7F);
        }
        a.join().unwrap();
        b.join().unwrap();
        // `a` ended in its own modes: its final switch restored ours.
        assert_eq!(mxcsr() & MXCSR_CONTROL, 0x1F80 | 0x6000 | 0x8000);
        assert_eq!(x87_cw(), 0x0C7F);
        set_mxcsr(root_mxcsr);
        set_x87_cw(0x037F);
    });
}

#[test]
fn ten_thousand_fibers() {
    let total = fibra::run(|| {
        let hs: Vec<_> = (0..10_000u64)
            .map(|i| {
                fibra::spawn(move || {
                    fibra::yield_now();
                    fibra::sleep(std::time::Duration::from_millis(1));
                    i
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    assert_eq!(total, 10_000 * 9_999 / 2);
}

#[test]
fn backtrace_walks_the_fiber_stack_and_stops_at_its_root() {
    #[inline(never)]
    fn marker_function_in_fiber() -> String {
        std::backtrace::Backtrace::force_capture().to_string()
    }
    let trace = fibra::run(|| fibra::spawn(marker_function_in_fiber).join().unwrap());
    assert!(
        trace.contains("marker_function_in_fiber"),
        "backtrace misses the fiber's frames:\n{trace}"
    );
    let last = trace
        .lines()
        .rev()
        .find(|l| {
            l.trim_start()
                .split(':')
                .next()
                .is_some_and(|n| n.trim().parse::<u32>().is_ok())
        })
        .unwrap_or("");
    assert!(
        last.contains("fibra_0_1_trampoline"),
        "backtrace does not end at the fiber's root:\n{trace}"
    );
}

#[test]
fn deep_recursion_in_block_on_uses_the_thread_stack() {
    // The root context runs on the thread's stack, which is much larger
    // than a fiber's default: a 1 MiB buffer fits.
    fn deep(n: usize) -> usize {
        let buf = black_box([n as u8; 1024]);
        if n == 0 {
            buf[0] as usize
        } else {
            deep(n - 1) + buf[1] as usize
        }
    }
    let r = std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(|| fibra::run(|| deep(1000)))
        .unwrap()
        .join()
        .unwrap();
    assert!(r > 0);
}

// ----- generators: entered by `resume`, left by the inline `suspend` -----

thread_local! {
    /// The generator under test and its yielder, for the `extern "C"` shims.
    static GENERATOR: std::cell::Cell<*mut fibra::Generator<'static, ()>> =
        const { std::cell::Cell::new(std::ptr::null_mut()) };
    static YIELDER: std::cell::Cell<*const fibra::Yielder<()>> =
        const { std::cell::Cell::new(std::ptr::null()) };
}

extern "C" fn next_shim() {
    // SAFETY: set by the test below to a generator that outlives the call.
    let g = unsafe { &mut *GENERATOR.with(|g| g.get()) };
    assert!(g.next().is_some());
}

extern "C" fn yield_shim() {
    // SAFETY: set by the generator's body to its own yielder, which lives
    // as long as the body runs.
    let y = unsafe { &*YIELDER.with(|y| y.get()) };
    y.yield_(());
}

const EXPECTED: [u64; 5] = [
    0x1111111111111111,
    0x2222222222222222,
    0x3333333333333333,
    0x4444444444444444,
    0x5555555555555555,
];

#[test]
fn callee_saved_registers_survive_generator_switches() {
    // The body checks its own registers across `yield_` while the caller
    // scribbles; the caller checks its own across `next` while the body
    // scribbles.
    let mut g: fibra::Generator<'static, ()> = fibra::Generator::new(|y| {
        YIELDER.with(|c| c.set(y as *const _));
        y.yield_(()); // the first `next` only starts the body
        for _ in 0..5 {
            assert_eq!(callee_saved_across!(yield_shim), EXPECTED, "generator side");
            scribble_and_call!(yield_shim);
        }
    });
    GENERATOR.with(|c| c.set(&mut g as *mut _));
    assert!(g.next().is_some());
    for _ in 0..5 {
        scribble_and_call!(next_shim);
        assert_eq!(callee_saved_across!(next_shim), EXPECTED, "caller side");
    }
    assert!(g.next().is_none());
    GENERATOR.with(|c| c.set(std::ptr::null_mut()));
}

/// Values live across `next` and `yield_` on both sides: in release builds
/// the optimiser keeps them in registers wherever it may, and the
/// generator's switches keep only rbx and rbp, telling the compiler that
/// every other register is clobbered (so it must not keep them in r12-r15
/// across a switch, where the other side's values land).
#[test]
fn live_values_survive_generator_switches() {
    fn values(seed: u64) -> [u64; 12] {
        std::array::from_fn(|i| black_box(seed.wrapping_mul(i as u64 + 3) ^ 0xA5A5))
    }
    fn step(v: &mut [u64; 12], seed: u64, round: u32, side: &str) -> u64 {
        let mut acc = 0u64;
        for (i, x) in v.iter_mut().enumerate() {
            let want = (seed.wrapping_mul(i as u64 + 3) ^ 0xA5A5).rotate_left(round);
            assert_eq!(*x, want, "{side}: value {i} changed in round {round}");
            *x = x.rotate_left(1);
            acc = acc.wrapping_add(*x);
        }
        acc
    }
    let g = fibra::Generator::new(|y| {
        let mut v = values(7);
        for round in 0..50 {
            let acc = step(&mut v, 7, round, "generator");
            y.yield_(acc);
        }
    });
    let mut v = values(1000);
    let mut round = 0;
    for acc in g {
        black_box(acc);
        black_box(step(&mut v, 1000, round, "caller"));
        round += 1;
    }
    assert_eq!(round, 50);
}

/// A generator runs like a call on its caller's thread: it shares the
/// caller's FP environment both ways (a fiber keeps its own: see
/// `fp_control_state_is_per_fiber`).
#[test]
fn fp_control_state_is_shared_with_a_generators_caller() {
    let caller_mxcsr = mxcsr();
    set_mxcsr(0x1F80 | 0x6000); // round toward zero in the caller
    set_x87_cw(0x0C7F);
    let mut g = fibra::Generator::new(|y| {
        assert_eq!(mxcsr() & MXCSR_CONTROL, 0x1F80 | 0x6000, "caller's MXCSR");
        assert_eq!(x87_cw(), 0x0C7F, "caller's x87 CW");
        set_mxcsr(0x1F80 | 0x2000); // round down
        set_x87_cw(0x077F);
        y.yield_(());
        // The caller changed them back before resuming us.
        assert_eq!(mxcsr() & MXCSR_CONTROL, 0x1F80 | 0x4000);
        assert_eq!(x87_cw(), 0x087F);
        set_mxcsr(0x1F80 | 0x8000); // flush to zero, at the end
    });
    assert!(g.next().is_some());
    assert_eq!(mxcsr() & MXCSR_CONTROL, 0x1F80 | 0x2000, "the body's MXCSR");
    assert_eq!(x87_cw(), 0x077F, "the body's x87 CW");
    set_mxcsr(0x1F80 | 0x4000); // round up
    set_x87_cw(0x087F);
    assert!(g.next().is_none());
    assert_eq!(
        mxcsr() & MXCSR_CONTROL,
        0x1F80 | 0x8000,
        "set by the ended body"
    );
    set_mxcsr(caller_mxcsr);
    set_x87_cw(0x037F);
}
