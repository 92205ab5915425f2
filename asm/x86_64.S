# fibra's context switch for x86_64, System V ABI (Linux).
#
# Pulled into the crate by `src/arch/x86_64.rs` with `global_asm!` (AT&T syntax).
# No C preprocessor runs over this file, and it must not contain braces: the
# macro would read them as format placeholders.
#
# ## The switch frame
#
# A suspended context is nothing but a stack pointer. At that address lies the
# frame below, written by the first half of the switch (`switch` in
# src/arch/x86_64.rs, inline assembly) just below the stack pointer of the
# code that parks, and popped by the second half, `fibra_0_1_switch_tail`
# here (addresses grow upwards):
#
#     sp + 32  | ...the parked code's frame... (16-byte aligned for a new fiber)
#     sp + 24  | resume point                   where the tail jumps to
#     sp + 20  | x87 control word (16 bits) + 16 bits of padding
#     sp + 16  | MXCSR (32 bits)
#     sp +  8  | rbp
#     sp +  0  | rbx                            <- saved stack pointer
#
# The ABI makes rbx, rbp, r12-r15, rsp, the control bits of MXCSR and the
# x87 control word callee-saved. The switch keeps rbx, rbp and the FP words
# itself; r12-r15 and every other register its inline assembly declares
# clobbered, so the compiler saves only those it has live across the switch
# (and the function that parks, into which the block is inlined, has saved
# r12-r15 for its own callers in its prologue anyway).
#
# A new fiber gets the same frame, built by `init_stack` in Rust: the resume
# point is `fibra_0_1_trampoline`, rbx holds the entry's data pointer, rbp
# the entry function (the trampoline zeroes it, so frame-pointer walkers
# stop there), and the FP words are the ABI defaults (MXCSR 0x1F80, x87 CW
# 0x037F).

# ## No call, no return: why a switch leaves the return stack alone
#
# The CPU predicts each `ret` from its return stack buffer, a short stack of
# the return addresses of the calls it has seen. A switch made by calling a
# routine that ends in `ret` pushes an entry in one context and pops it in
# another: the `ret` goes where the resumed context called from, the buffer
# predicts where the parked one did, and unless the two called the switch
# from the very same place it is mispredicted (about 20 cycles). Two fibers
# yielding from loops of their own did so at every yield, and a fiber and
# the scheduler's loop at every park and every wake-up.
#
# So a fiber switch neither calls nor returns. Its first half is inline
# assembly in the code that parks: it writes the frame above with its own
# label as the resume point, and jumps here; the tail resumes the other
# context with an indirect `jmp` to that context's resume point, which the
# CPU predicts from where the jump comes from and the branches before it
# (one jump here for every switch; a context's resume point is the same
# each time it parks in the same place). The return stack holds only the
# calls each context made itself, so a context that comes back to the code
# it parked in returns through its own frames as predicted as any code,
# whatever ran in between. (Boost.Context's `pop; jmp` is a different
# thing: its switch is called, so the call's entry stays behind.) Two
# fibers yielding to each other from loops of their own took 13.6 ns a
# yield with the routine called and returned from, 7.0 with this, on the
# Zen 5 host of 2026-11-28 (`TARGETS=switch` in `benches/peers`).
#
# A frame of Rust's own between the blocking call and the switch still
# costs a mispredicted return when its context resumes, unless the
# context that ran before came through the same code: that is why the park
# path is inlined into its callers (see `Core::switch_to`).
#
# ## The FP control words: what they cost, and why MXCSR is loaded blind
#
# The ABI makes the control bits of MXCSR and the x87 control word
# callee-saved, and a fiber keeps its own: one that changes its rounding
# mode does not change it for the others. So every switch stores the
# outgoing words in the frame, and loads the incoming ones.
#
# Reading MXCSR (`stmxcsr`) is the dear half on some CPUs: microcoded on AMD
# Zen 2, about 15 cycles, more than all of the rest of a round trip. Nothing
# cheaper reads it (`vstmxcsr` is the same; `fxsave` is five times dearer),
# so the switch issues it first and lets nothing wait for it: the stored
# word is never read back, and the incoming MXCSR is loaded whether or not
# it differs (`ldmxcsr` is cheap, measured at no cost next to the pushes).
# An earlier version read the stored word back to load only on a
# difference: that load waited for the microcoded store, about 1.3 ns per
# round trip. `cd benches/peers && cargo run --release -- switch` prints
# the switch beside one that stores MXCSR and never loads it, the floor
# of any switch that keeps it.
#
# The x87 control word is the other way round: `fnstcw` is cheap, and
# `fldcw` is slow and partly serialising. So the outgoing word is kept in
# ecx and the incoming one loaded only if it differs; almost every context
# runs with the default (MXCSR bits 0-5 are sticky exception flags, which
# the ABI makes caller-saved; a fiber's own come back with its MXCSR).

    .text

# The second half of every fiber switch, jumped to (never called) by the
# first half (`switch` in src/arch/x86_64.rs) and by a fiber's final switch
# (the trampoline below), with:
#
#   rsp = the incoming context's saved stack pointer (its frame, above)
#   ecx = the outgoing context's x87 control word
#   rdx = `arg`, which the incoming context gets in rax
#
# It loads the incoming context's FP words, rbp and rbx, and jumps to its
# resume point with its stack pointer as it was before its switch.
#
# The CFI describes the frame, so that an unwinder stopped here (a
# profiler's sample) walks the incoming context, which is well formed.
    .globl fibra_0_1_switch_tail
    .hidden fibra_0_1_switch_tail
    .type fibra_0_1_switch_tail,@function
    .p2align 4
    .cfi_startproc
    .cfi_def_cfa_offset 32
    .cfi_offset %rbx, -32
    .cfi_offset %rbp, -24
    .cfi_offset %rip, -8
fibra_0_1_switch_tail:
    # MXCSR is loaded every time (cheap); the x87 control word only if it
    # differs from the outgoing one (`fldcw` is not).
    ldmxcsr 16(%rsp)
    cmpw 20(%rsp), %cx
    jne 4f
3:
    .cfi_remember_state
    popq %rbx
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbx
    popq %rbp
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbp
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rcx
    .cfi_adjust_cfa_offset -8
    .cfi_register %rip, %rcx
    # Hand `arg` to the incoming context and resume it.
    movq %rdx, %rax
    jmpq *%rcx
    .cfi_restore_state
    # Out-of-line, rarely taken: the incoming context runs with other FP modes.
4:
    fldcw 20(%rsp)
    jmp 3b
    .cfi_endproc
    .size fibra_0_1_switch_tail, .-fibra_0_1_switch_tail

# The first code a new fiber runs, entered by the jump of the switch's tail
# to the resume point of its first frame, and the last: see "A fiber's first
# and last switch" below.
#
# On entry: rax = the `arg` of the switch that started us, rbx = data pointer,
# rbp = entry function
# `extern "C" fn(arg: usize, data: *mut u8) -> (load_sp, arg)`, rsp 16-byte
# aligned (so the call below leaves the callee's rsp at 8 mod 16, as the ABI
# requires). rbp is zeroed before the call: frame-pointer walkers stop here.
#
# `.cfi_undefined rip` marks this frame as the root of the fiber's stack:
# gdb, perf and std::backtrace stop here instead of walking into garbage.
#
# The FDE starts one byte before the entry point, on a `nop` that never
# runs. A new fiber's (or generator's) frame holds the trampoline itself as
# its return address, and unwinders look a return address up at minus one
# (it normally follows a call): without that byte the lookup would land in
# the padding after the switch, outside any FDE, and gdb or perf would show
# `??` frames there instead of stopping.
    .globl fibra_0_1_trampoline
    .hidden fibra_0_1_trampoline
    .type fibra_0_1_trampoline,@function
    .p2align 4
    .cfi_startproc
    .cfi_undefined %rip
    nop
fibra_0_1_trampoline:
    movq %rax, %rdi
    movq %rbx, %rsi
    movq %rbp, %rcx
    xorl %ebp, %ebp
    callq *%rcx
    # The entry has returned, in rax and rdx, the context to resume for good
    # and the `arg` it gets: the fiber's final switch. This context is never
    # resumed, so nothing of it is saved: only its x87 control word is read,
    # for the tail of the switch to compare with the incoming one.
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    fnstcw 4(%rsp)
    movq %rax, %rsi
    movzwl 4(%rsp), %ecx
    movq %rsi, %rsp
    jmp fibra_0_1_switch_tail
    .cfi_endproc
    .size fibra_0_1_trampoline, .-fibra_0_1_trampoline

# ## A fiber's first and last switch
#
# A fiber's life is balanced on the return stack, as every switch is: it is
# entered by the tail's jump, to the trampoline (the resume point of its
# first frame), which calls the entry function; the entry returns to the
# trampoline, and the final switch is a jump into the tail. So the context
# that runs after it (a `join` waiting for it, often) finds the return
# stack as it left it. (When fibers were switched by a call and a `ret`, a
# fiber that left from deep in its exit path left that path's entries
# behind, and a joiner resumed three frames deep in `join` mispredicted
# each of its returns: a few dozen cycles of a couple of hundred.)

# ## Generators: entered by a call, left by the matching return
#
# A generator is the one context that is entered like a function and left
# like its return, and its switches say so: as corosensei does, it is
# entered by a *call* and left by the *return that matches it*, which the
# return stack predicts (and `next`'s caller's own returns after it too):
#
# - `Generator::next` calls `fibra_0_1_resume` from inline assembly
#   (`resume` in src/arch/x86_64.rs). It pushes the caller's rbp and rbx
#   below the return address of that call, loads the generator's frame and
#   leaves it with an indirect `jmp` to the generator's resume point, which
#   leaves the return-stack entry of the call in place.
# - `yield_` writes a frame of the same layout itself (inline assembly, so
#   it makes no call of its own, whose return would be mispredicted),
#   switches to the caller's stack and jumps to `fibra_0_1_resume_tail`,
#   whose `ret` pops the caller's return address: the entry the call pushed.
#
# A generator's frame is three words, not the fiber switch's eight:
#
#     sp + 16  | resume point: the caller's return address, `yield_`'s
#              | label, or the generator trampoline (a new generator)
#     sp +  8  | rbp                 (a new generator: its entry function)
#     sp +  0  | rbx                 (a new generator: its data pointer)
#
# rbx and rbp are the callee-saved registers that inline assembly may not
# name (the compiler reserves them), so they are saved here; r12-r15 are
# declared clobbered by both inline blocks instead, so the compiler saves
# only those it has live across the switch (in a tight `for x in gen`
# loop: none), rather than all four on both sides every round trip. That
# is what corosensei leaves to the compiler too; saving all six made a
# round trip 2x corosensei's before any bookkeeping.
#
# And as a call does, a generator shares its caller's FP environment: its
# switches neither save nor load MXCSR and the x87 control word. A body
# that changes them changes them for the code that called `next`, as a
# function that changes them does (which the ABI allows a function that
# says so); a fiber keeps its own instead. What that saves is most of the
# switch on some CPUs: reading MXCSR (`stmxcsr`) costs about as much as all
# of the rest of a round trip on AMD Zen 2 (measured: `cd benches/peers &&
# cargo run --release -- switch`).
#
# usize fibra_0_1_resume(void **save_sp /* rdi */, void *load_sp /* rsi */, usize arg /* rdx */)
#
# Called only from inline assembly that declares every register but rbx,
# rbp and rsp clobbered (not through the C ABI, which would expect r12-r15
# back unchanged).
    .globl fibra_0_1_resume
    .hidden fibra_0_1_resume
    .type fibra_0_1_resume,@function
    .p2align 4
fibra_0_1_resume:
    .cfi_startproc
    # The caller's frame: the return address (pushed by its call), rbp, rbx.
    pushq %rbp
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rbp, 0
    pushq %rbx
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rbx, 0
    # The switch. The incoming stack holds a frame of the same layout, so
    # the CFI above stays true: an unwinder stopped here walks the
    # generator instead of the caller, and both are well formed.
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %rbx
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbx
    popq %rbp
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbp
    # Hand `arg` over and jump to the resume point, leaving the return-stack
    # entry of the caller's call for `yield_`'s return to pop.
    movq %rdx, %rax
    popq %rcx
    .cfi_adjust_cfa_offset -8
    .cfi_register %rip, %rcx
    jmpq *%rcx

    # `yield_` (src/arch/x86_64.rs, `suspend`) and a generator's final
    # switch join here by a jump, with rsp at the frame `fibra_0_1_resume`
    # pushed on the caller's stack and `arg` in rdx.
    .globl fibra_0_1_resume_tail
    .hidden fibra_0_1_resume_tail
fibra_0_1_resume_tail:
    .cfi_def_cfa_offset 24
    .cfi_offset %rbx, -24
    .cfi_offset %rbp, -16
    .cfi_offset %rip, -8
    popq %rbx
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbx
    popq %rbp
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbp
    movq %rdx, %rax
    ret
    .cfi_endproc
    .size fibra_0_1_resume, .-fibra_0_1_resume

# A generator's first and last code, as the trampoline is a fiber's, but its
# final switch goes back to the caller saved by `fibra_0_1_resume`, with no
# FP words to compare. On entry (a jump from `fibra_0_1_resume`): rax = the
# `arg`, rbx = the data pointer, rbp = the entry function, rsp 16-byte
# aligned. rbp is zeroed before the call, so that frame-pointer walkers stop
# here; the same one-byte `nop` before as the fiber trampoline's.
    .globl fibra_0_1_generator_trampoline
    .hidden fibra_0_1_generator_trampoline
    .type fibra_0_1_generator_trampoline,@function
    .p2align 4
    .cfi_startproc
    .cfi_undefined %rip
    nop
fibra_0_1_generator_trampoline:
    movq %rax, %rdi
    movq %rbx, %rsi
    movq %rbp, %rcx
    xorl %ebp, %ebp
    callq *%rcx
    # The final switch: rax is the caller's saved stack pointer, rdx the
    # `arg` it gets.
    movq %rax, %rsp
    jmp fibra_0_1_resume_tail
    .cfi_endproc
    .size fibra_0_1_generator_trampoline, .-fibra_0_1_generator_trampoline

# ## Walking a parked context's stack (dumps)
#
# A parked context is its switch frame (above) and the frames of its stack
# beyond it, each described by the unwind info its compiler wrote; nothing
# but the resume point, rbx and rbp needs reading from the switch frame
# (r12-r15 are saved by the function that parked, as the ABI makes it, in
# its own frame). So a dump walks a parked context with the unwinder of
# the thread that asks, without running it: this routine calls `f(data)`
# from a frame whose unwind info says, falsely but usefully, that its
# caller is the parked context. An unwinder started in `f` (libgcc's
# `_Unwind_Backtrace`) walks `f`, this routine, then the parked context
# from its resume point to its root (the trampoline's `.cfi_undefined rip`),
# reading the parked stack and writing nothing to it.
#
# void fibra_0_1_walk_parked(void *frame /* rdi */, void (*f)(void *) /* rsi */, void *data /* rdx */)
#
# A C function (rbx, the only callee-saved register it uses, is restored).
# `frame` is a saved switch frame of a context that stays suspended, on a
# stack that stays mapped, until this returns.
#
# The frame as described while `f` runs, with the CFA at the parked stack
# pointer as it was before its switch (frame + 32), as `fibra_0_1_switch_tail`
# describes it:
#
#     rbx + 24 | resume point          rip of the caller (the parked code)
#     rbx +  8 | rbp                   its rbp
#     rbx +  0 | rbx                   its rbx      <- frame, kept in rbx
#
# An unwinder looks the rule for a return address up at minus one: for this
# frame, inside the `call` below, where the parked description holds; the
# rows after the call (this routine's own frame again) are for a profiler
# that samples the two instructions left.
    .globl fibra_0_1_walk_parked
    .hidden fibra_0_1_walk_parked
    .type fibra_0_1_walk_parked,@function
    .p2align 4
fibra_0_1_walk_parked:
    .cfi_startproc
    # Keep the caller's rbx, which holds `frame` from here on (callee-saved:
    # `f` and the unwinder give it back). rsp is 16-byte aligned after the
    # push, as the call below wants.
    pushq %rbx
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rbx, 0
    movq %rdi, %rbx
    .cfi_remember_state
    # From here to the end of the call, the caller is the parked context.
    .cfi_def_cfa %rbx, 32
    .cfi_offset %rbx, -32
    .cfi_offset %rbp, -24
    .cfi_offset %rip, -8
    # Not in the switch frame: the switch declares them clobbered, so the
    # parked code keeps nothing in them (its callers' values are in its
    # frame, where its own unwind info finds them).
    .cfi_undefined %r12
    .cfi_undefined %r13
    .cfi_undefined %r14
    .cfi_undefined %r15
    movq %rdx, %rdi
    callq *%rsi
    # The return address of that call: the frame an unwinder started in
    # `f` finds just before the parked context's (so `f` knows where the
    # parked frames begin).
    .globl fibra_0_1_walk_parked_return
    .hidden fibra_0_1_walk_parked_return
fibra_0_1_walk_parked_return:
    .cfi_restore_state
    popq %rbx
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbx
    ret
    .cfi_endproc
    .size fibra_0_1_walk_parked, .-fibra_0_1_walk_parked

# ---------------------------------------------------------------------------
# Walking a context interrupted by a signal (the stall watchdog's sample)
# ---------------------------------------------------------------------------
#
# As `fibra_0_1_walk_parked`, but the caller is a context stopped at any
# instruction, whose registers a signal handler copied out of its ucontext
# into a block of 17 words in DWARF order (rax, rdx, rcx, rbx, rsi, rdi,
# rbp, rsp, r8-r15, rip). The context is held still (its thread spins in
# the handler) until this returns; the unwinder reads its stack only.
#
# void fibra_0_1_walk_interrupted(const u64 *regs /* rdi */, void (*f)(void *) /* rsi */, void *data /* rdx */)
#
# The frame as described while `f` runs: the CFA is the interrupted rsp
# (regs[7]), every other register is saved in the block (regs + 8n for
# DWARF register n), rip included. `.cfi_signal_frame` tells the unwinder
# that the caller's rip is the instruction it was stopped at, not a return
# address (looked up as is, not one byte back), as glibc's `__restore_rt`
# does for a signal handler's frame. The expressions are raw bytes:
#
#   0x0f len DW_OP_breg3(0x73) sleb(56) DW_OP_deref(0x06)   CFA = *(rbx + 56)
#   0x10 n len DW_OP_breg3(0x73) sleb(8n)                     reg n at rbx + 8n
#
# (sleb128: 0..63 is one byte; 64..127 is two, 0x40|v&0x7f then 0x00.)
    .globl fibra_0_1_walk_interrupted
    .hidden fibra_0_1_walk_interrupted
    .type fibra_0_1_walk_interrupted,@function
    .p2align 4
fibra_0_1_walk_interrupted:
    .cfi_startproc
    .cfi_signal_frame
    # Keep the caller's rbx, which holds `regs` from here on.
    pushq %rbx
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rbx, 0
    movq %rdi, %rbx
    .cfi_remember_state
    # From here to the end of the call, the caller is the interrupted context.
    .cfi_escape 0x0f, 0x03, 0x73, 0x38, 0x06
    .cfi_escape 0x10, 0x00, 0x02, 0x73, 0x00
    .cfi_escape 0x10, 0x01, 0x02, 0x73, 0x08
    .cfi_escape 0x10, 0x02, 0x02, 0x73, 0x10
    .cfi_escape 0x10, 0x03, 0x02, 0x73, 0x18
    .cfi_escape 0x10, 0x04, 0x02, 0x73, 0x20
    .cfi_escape 0x10, 0x05, 0x02, 0x73, 0x28
    .cfi_escape 0x10, 0x06, 0x02, 0x73, 0x30
    .cfi_escape 0x10, 0x08, 0x03, 0x73, 0xc0, 0x00
    .cfi_escape 0x10, 0x09, 0x03, 0x73, 0xc8, 0x00
    .cfi_escape 0x10, 0x0a, 0x03, 0x73, 0xd0, 0x00
    .cfi_escape 0x10, 0x0b, 0x03, 0x73, 0xd8, 0x00
    .cfi_escape 0x10, 0x0c, 0x03, 0x73, 0xe0, 0x00
    .cfi_escape 0x10, 0x0d, 0x03, 0x73, 0xe8, 0x00
    .cfi_escape 0x10, 0x0e, 0x03, 0x73, 0xf0, 0x00
    .cfi_escape 0x10, 0x0f, 0x03, 0x73, 0xf8, 0x00
    .cfi_escape 0x10, 0x10, 0x03, 0x73, 0x80, 0x01
    movq %rdx, %rdi
    callq *%rsi
    # The return address of that call: the frame an unwinder started in
    # `f` finds just before the interrupted context's.
    .globl fibra_0_1_walk_interrupted_return
    .hidden fibra_0_1_walk_interrupted_return
fibra_0_1_walk_interrupted_return:
    .cfi_restore_state
    popq %rbx
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbx
    ret
    .cfi_endproc
    .size fibra_0_1_walk_interrupted, .-fibra_0_1_walk_interrupted
