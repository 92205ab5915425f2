# fibra's gdb extension: a process's fibers, as `info goroutines` and
# `goroutine N bt` show a Go program's goroutines.
#
#   info fibers          every fiber of every runtime: id, name, state, what
#                        it waits on, and the user's function it is in
#   fiber N [CMD]        CMD (default `bt`) on fiber N's stack: `fiber 7 bt`,
#                        `fiber 7 bt full`, `fiber 7 info locals`
#   fiber NAME [CMD]     the same, for the fiber of that name
#   fiber all [CMD]      CMD on every fiber
#
# Embedded in every binary that links fibra (`#![debugger_visualizer]` in
# src/lib.rs), so gdb runs it when it loads the program, once auto-loading
# is allowed for it (`gdb -iex 'add-auto-load-safe-path /path/to/binary'`,
# or `set auto-load safe-path /` in ~/.gdbinit). `source` it by hand
# otherwise. It reads fibra's own structures through the debug info: the
# program must be built with it for fibra (`debug = true` or `2`; the
# default of `cargo build`, not of `--release`).
#
# ## How it finds the fibers
#
# `fibra::scheduler::debugger::FIBRA_0_1_RUNTIMES` (src/scheduler/debugger.rs)
# holds the address and length of an array of two words per live runtime:
# the address of its `Core` and its thread's LWP. A core's `local.fibers` is
# the slab of its fiber records (src/scheduler/core/record.rs): saved stack
# pointer, state, id, name, and what its last park waited on (`StoredWait`,
# whose tags `waiting_on` below decodes as src/scheduler/wait_on.rs does).
# tests/gdb.rs fails when these stop matching.
#
# ## How a parked fiber's stack is shown, without running it or writing it
#
# A parked fiber is a switch frame at its saved stack pointer (asm/x86_64.S):
#
#     sp + 24  resume point     (rip)
#     sp +  8  rbp
#     sp +  0  rbx
#
# and above it, at sp + 32, the frames of the code that parked, each
# described by its unwind info. While `fiber N CMD` runs, a Python unwinder
# claims the innermost frame of the selected thread and says that its caller
# is the fiber: rip, rsp, rbp and rbx from the switch frame. gdb then walks
# the fiber's frames with its own unwinders from there, to the fiber's
# trampoline, whose `.cfi_undefined rip` ends the stack. A frame filter
# hides the thread's frame that was claimed, so `bt` starts at the fiber's
# innermost frame (numbered #1, or more if the thread's innermost frame is
# an inlined call). Nothing is written to the inferior, so it works on a
# core file as on a live process (registers cannot be set in a core).
#
# Go's runtime-gdb.py sets the thread's pc and sp instead, and sets them
# back: that cannot be done in a core, and a `fiber N CMD` interrupted in
# between would leave a live thread at the fiber's registers.

import re
import struct
import time

import gdb
import gdb.unwinder

RUNTIMES = "fibra::scheduler::debugger::FIBRA_0_1_RUNTIMES"
CORE = "fibra::scheduler::core::Core"
NO_DEADLINE = (1 << 64) - 1

# fibra's own frames, and the standard library's, are not where a user
# would say a fiber "is": `info fibers` names the first frame that is none
# of these (the switch's assembly is `fibra_0_1_*`).
INTERNAL = re.compile(r"^<?(fibra|core|std|alloc)::|^fibra_\d+_\d+_|^_")


def word(addr):
    """The 8-byte word at `addr` in the inferior."""
    mem = gdb.selected_inferior().read_memory(addr, 8)
    return struct.unpack("<Q", bytes(mem))[0]


def field(value, name):
    """`value.name`, or its first field if it has no `name` (the
    standard library's wrappers: UnsafeCell's `value`, NonNull's
    `pointer`)."""
    fields = value.type.strip_typedefs().fields()
    for f in fields:
        if f.name == name:
            return value[f]
    return value[fields[0]]


def pointer_in(value):
    """The first raw pointer inside `value` (a NonNull, a Unique, a
    RawVec...), as an integer."""
    t = value.type.strip_typedefs()
    if t.code == gdb.TYPE_CODE_PTR:
        return int(value)
    for f in t.fields():
        if f.bitsize == 0 and not f.artificial:
            try:
                return pointer_in(value[f])
            except ValueError:
                continue
    raise ValueError("no pointer in " + str(t))


def variant(value):
    """The name of the variant a Rust enum value holds (`Some`, `None`):
    gdb gives the value the fields of its variant."""
    fields = value.type.strip_typedefs().fields()
    return fields[-1].name if fields else None


def utf8(addr, length):
    if addr == 0 or length <= 0:
        return ""
    data = bytes(gdb.selected_inferior().read_memory(addr, min(length, 4096)))
    return data.decode("utf-8", "replace")


def gdb_string(value):
    """The text of a string gdb made from an expression: a C string, or
    in Rust a `&str` (a pointer and a length)."""
    try:
        return value.string()
    except gdb.error:
        return utf8(pointer_in(value), int(field(value, "length")))


def rust_string(value):
    """A `String`'s text: its Vec's length and first pointer."""
    vec = field(value, "vec")
    return utf8(pointer_in(vec), int(field(vec, "len")))


TRAMPOLINE = "fibra_0_1_trampoline"


def symbol_at(pc):
    """The symbol `pc` is the start of (`name`), or is in (`name + off`)."""
    try:
        text = gdb.execute("info symbol %d" % pc, to_string=True)
    except gdb.error:
        return None
    return text.split(" in section ", 1)[0].strip()


class NoDebugInfo(gdb.GdbError):
    pass


def no_debug_info():
    return NoDebugInfo(
        "fibra: no debug info for fibra's runtime in this program, so its "
        "fibers cannot be read. Build with debug info for fibra (the default "
        "of `cargo build`; for release, `[profile.release] debug = true` or "
        "`[profile.release.package.fibra] debug = true` in Cargo.toml)."
    )


def core_type():
    try:
        return gdb.lookup_type(CORE)
    except gdb.error:
        raise no_debug_info()


def arc_data_offset():
    """Where an `Arc<str>`'s text starts in its allocation (after the two
    counts)."""
    try:
        inner = gdb.lookup_type("alloc::sync::ArcInner<str>")
        for f in inner.fields():
            if f.name == "data":
                return f.bitpos // 8
    except gdb.error:
        pass
    return 16


def deadline_left(until):
    """How long until the deadline `until` (CLOCK_MONOTONIC ns), when the
    inferior is a live process on this machine (a core's clock is gone)."""
    if until == NO_DEADLINE:
        return None
    try:
        if gdb.selected_inferior().connection.type != "native":
            return None
    except AttributeError:
        return None
    left = until - time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    return max(left, 0) / 1e9


INTEREST = ((1, "READABLE"), (2, "WRITABLE"), (4, "PRIORITY"))


def waiting_on(stored):
    """What a park waits on, as `WaitOn`'s Display says it
    (src/scheduler/wait_on.rs: `StoredWait`'s tag and word)."""
    tag = int(stored["tag"])
    w = int(stored["word"])
    if tag == 0:
        return None
    if tag == 1:
        return "sleep"
    if tag == 2:
        fd = w & 0xFFFFFFFF
        if fd >= 1 << 31:
            fd -= 1 << 32
        bits = (w >> 32) & 0xFF
        names = " | ".join(n for b, n in INTEREST if bits & b) or "(none)"
        return "fd %d %s" % (fd, names)
    if tag == 3:
        return "join of fiber %d" % w
    if tag == 4:
        # The address of a `&'static str`: its pointer and length.
        return utf8(word(w), word(w + 8))
    return {
        5: "signal::wait",
        6: "block_on_future",
        7: "spawn_blocking",
        8: "the fibers of its scope",
    }.get(tag, "tag %d" % tag)


class Fiber:
    """One context of a runtime, as its record says."""

    def __init__(self, runtime, key, rec, arc_offset):
        self.runtime = runtime
        self.key = key
        self.root = key == 0
        self.sp = int(rec["sp"])
        self.state = str(rec["state"]).rsplit("::", 1)[-1]
        self.id = word(int(rec["id"].address))
        name_at = int(rec["name"].address)
        ptr, length = word(name_at), word(name_at + 8)
        self.name = utf8(ptr + arc_offset, length) if ptr else None
        self.waiting_on = None
        self.deadline_in = None
        if self.state == "Parked":
            self.waiting_on = waiting_on(rec["waiting_on"])
            self.deadline_in = deadline_left(int(rec["waiting_until"]))

    @property
    def on_thread(self):
        """It is what its runtime's thread runs now: its stack is the
        thread's own."""
        return self.key == self.runtime.current and self.runtime.entered

    @property
    def not_started(self):
        # A deferred first frame: `sp` is the boxed start's address with
        # the low bit set (src/scheduler/core/first_frame.rs); or a first
        # frame built, which resumes at the start of the trampoline.
        if self.sp & 1 != 0:
            return True
        if self.state != "Ready" or self.sp == 0 or self.on_thread:
            return False
        return symbol_at(word(self.sp + 24)) == TRAMPOLINE

    @property
    def has_saved_frame(self):
        return (
            not self.on_thread
            and self.state in ("Parked", "Ready")
            and self.sp != 0
            and not self.not_started
        )

    def label(self):
        s = str(self.id)
        if self.root:
            s += " (block_on)"
        if self.name is not None:
            s += ' "%s"' % self.name
        return s

    def state_text(self):
        if self.not_started:
            return "ready, not started"
        if self.root and not self.runtime.entered:
            return "root: not in the runtime"
        text = self.state.lower()
        if self.waiting_on is not None:
            text += ": " + self.waiting_on
        if self.deadline_in is not None:
            text += ", %.1fs left" % self.deadline_in
        return text


class Runtime:
    def __init__(self, index, core, lwp):
        self.index = index
        self.lwp = lwp
        self.address = int(core.address)
        local = field(core["local"], "value")
        self.current = int(local["current"])
        self.entered = bool(local["entered"])
        # A worker's root runs the worker's loop, never the user's code.
        self.worker = variant(core["worker"]) == "Some"
        shared = field(pointer_value(core["shared"]), "data")
        self.thread_name = rust_string(shared["thread_name"])
        slots = local["fibers"]["slots"]
        records = field(slots["ptr"], "pointer")
        count = int(slots["len"])
        arc_offset = arc_data_offset()
        self.fibers = []
        for key in range(count):
            rec = records[key]
            state = str(rec["state"]).rsplit("::", 1)[-1]
            if state in ("Vacant", "Done"):
                continue
            if key == 0 and (self.worker or (state == "Running" and not self.entered)):
                # The root of a worker (its loop), or of a runtime nobody
                # drives now: no user code of its own anywhere.
                continue
            self.fibers.append(Fiber(self, key, rec, arc_offset))

    def gdb_thread(self):
        """The gdb thread this runtime runs on, by its LWP."""
        for t in gdb.selected_inferior().threads():
            if t.ptid[1] == self.lwp:
                return t
        return None


def pointer_value(arc):
    """What an `Arc<T>` points at (its `ArcInner<T>`)."""
    inner = field(field(arc, "ptr"), "pointer")
    return inner.dereference()


def runtimes():
    """Every live runtime of the inferior."""
    sym = gdb.lookup_global_symbol(RUNTIMES)
    if sym is None:
        try:
            gdb.execute("info address FIBRA_0_1_RUNTIMES", to_string=True)
        except gdb.error:
            raise gdb.GdbError("fibra: this program has no fibra runtime (0.1)")
        raise no_debug_info()
    core_ptr = core_type().pointer()
    at = int(sym.value().address)
    cores, count = word(at), word(at + 8)
    found = []
    for i in range(min(count, 4096)):
        addr, lwp = word(cores + 16 * i), word(cores + 16 * i + 8)
        core = gdb.Value(addr).cast(core_ptr).dereference()
        found.append(Runtime(i, core, lwp))
    return found


# ---- a parked fiber's frames --------------------------------------------


class FiberUnwinder(gdb.unwinder.Unwinder):
    """While `target` is set (a parked fiber's saved stack pointer), claims
    the first frame gdb asks about (the selected thread's innermost real
    frame) and names the fiber's resume point, stack pointer, rbp and rbx as
    its caller's registers."""

    def __init__(self):
        super().__init__("fibra-fiber")
        self.target = None
        self.claimed = False

    def __call__(self, pending):
        if self.target is None or self.claimed:
            return None
        self.claimed = True
        sp = self.target
        rsp = pending.read_register("rsp")
        rip = pending.read_register("rip")

        class FrameId:
            def __init__(self, sp, pc):
                self.sp = sp
                self.pc = pc

        info = pending.create_unwind_info(FrameId(rsp, rip))
        ptr = rsp.type
        info.add_saved_register("rip", gdb.Value(word(sp + 24)).cast(rip.type))
        info.add_saved_register("rsp", gdb.Value(sp + 32).cast(ptr))
        info.add_saved_register("rbp", gdb.Value(word(sp + 8)).cast(ptr))
        rbx = pending.read_register("rbx")
        info.add_saved_register("rbx", gdb.Value(word(sp)).cast(rbx.type))
        return info


class HideThreadFrames:
    """While a fiber is shown, hides the frames of the thread that come
    before the fiber's innermost one (its resume point, at its stack
    pointer)."""

    def __init__(self):
        self.name = "fibra-fiber"
        self.priority = 100
        self.enabled = True
        self.first = None  # (pc, sp) of the fiber's innermost frame

    def filter(self, frames):
        if self.first is None:
            return frames
        return self._skip(frames)

    def _skip(self, frames):
        shown = False
        for f in frames:
            if not shown:
                shown = is_first(f.inferior_frame(), self.first)
            if shown:
                yield f


def is_first(frame, first):
    pc, sp = first
    try:
        return frame.pc() == pc and int(frame.read_register("rsp")) == sp
    except gdb.error:
        return False


UNWINDER = FiberUnwinder()
FILTER = HideThreadFrames()
gdb.unwinder.register_unwinder(None, UNWINDER, replace=True)
gdb.frame_filters[FILTER.name] = FILTER


class OnFiber:
    """`with OnFiber(fiber) as innermost:` shows the fiber's frames in
    the selected thread, `innermost` its first frame (selected), until the
    block ends."""

    def __init__(self, fiber):
        self.sp = fiber.sp

    def __enter__(self):
        self.selected = gdb.selected_frame()
        UNWINDER.target = self.sp
        UNWINDER.claimed = False
        FILTER.first = (word(self.sp + 24), self.sp + 32)
        gdb.invalidate_cached_frames()
        frame = gdb.newest_frame()
        while frame is not None and not is_first(frame, FILTER.first):
            frame = frame.older()
        if frame is None:
            self.__exit__(None, None, None)
            raise gdb.GdbError("fibra: the fiber's saved frame could not be unwound")
        frame.select()
        return frame

    def __exit__(self, *exc):
        UNWINDER.target = None
        FILTER.first = None
        gdb.invalidate_cached_frames()
        try:
            self.selected.select()
        except gdb.error:
            pass
        return False


def where(frame, limit=64):
    """The first frame from `frame` out that is the user's: its function,
    file and line."""
    while frame is not None and limit > 0:
        name = frame.name()
        if name and not INTERNAL.search(name):
            sal = frame.find_sal()
            if sal.symtab is not None:
                return "%s at %s:%d" % (name, sal.symtab.filename, sal.line)
            return name
        frame = frame.older()
        limit -= 1
    return ""


def where_is(fiber):
    try:
        if fiber.has_saved_frame:
            with OnFiber(fiber) as frame:
                return where(frame)
        if fiber.on_thread:
            thread = fiber.runtime.gdb_thread()
            if thread is not None:
                was = gdb.selected_thread()
                thread.switch()
                try:
                    return where(gdb.newest_frame())
                finally:
                    was.switch()
    except gdb.error:
        pass
    return ""


# ---- the commands -----------------------------------------------------------


class InfoFibers(gdb.Command):
    """List every fiber of every fibra runtime in the program.

Usage: info fibers

Per runtime, its thread, then one line per fiber: `*` for the context its
thread runs now, its id and name, its state (what it waits on, when parked),
and the first function of the user's it is in. `fiber ID bt` shows one's
stack."""

    def __init__(self):
        super().__init__("info fibers", gdb.COMMAND_STACK, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        found = runtimes()
        if not found:
            print("No fibra runtime.")
            return
        for rt in found:
            thread = rt.gdb_thread()
            on = " (gdb thread %d)" % thread.num if thread is not None else ""
            print(
                'Runtime %d on thread "%s"%s: %d fibers'
                % (rt.index, rt.thread_name, on, len(rt.fibers))
            )
            rows = [
                ("*" if f.on_thread else " ", f.label(), f.state_text(), where_is(f))
                for f in rt.fibers
            ]
            width = max([len(r[1]) for r in rows] + [2])
            state_width = max([len(r[2]) for r in rows] + [5])
            for mark, label, state, at in rows:
                line = "%s %-*s  %-*s" % (mark, width, label, state_width, state)
                if at:
                    line += "  in " + at
                print(line.rstrip())


def parse_fiber(arg):
    """Splits `fiber`'s argument into what names the fiber(s) and the
    command: `7 bt`, `$n bt`, `worker-3 bt full`, `"my worker" bt`,
    `all bt`. Returns (kind, key, command)."""
    arg = arg.strip()
    if not arg:
        raise gdb.GdbError("usage: fiber ID|NAME|all [COMMAND]")
    if arg.startswith('"'):
        end = arg.find('"', 1)
        if end < 0:
            raise gdb.GdbError("fibra: unterminated fiber name: " + arg)
        return "name", arg[1:end], arg[end + 1 :].strip() or "bt"
    parts = arg.split(None, 1)
    first, cmd = parts[0], (parts[1] if len(parts) > 1 else "bt")
    if first == "all":
        return "all", None, cmd
    if first[0].isdigit() or first[0] in "$(":
        try:
            return "id", int(gdb.parse_and_eval(first)), cmd
        except gdb.error as e:
            raise gdb.GdbError("fibra: not a fiber id: %s (%s)" % (first, e))
    return "name", first, cmd


class FiberCmd(gdb.Command):
    """Run a gdb command on a fiber's stack.

Usage: fiber ID [COMMAND]      (COMMAND defaults to `bt`)
       fiber NAME [COMMAND]    the fiber of that name ("in quotes" if it has spaces)
       fiber all [COMMAND]     every fiber

The fiber's frames are walked from its saved switch frame while COMMAND
runs, with its innermost frame selected: `fiber 7 bt`, `fiber 7 bt full`,
`fiber worker-3 info locals`, `fiber 7 frame 3`. The frames keep gdb's
numbers, so the fiber's innermost is #1 (#0, the thread's own frame, is
hidden). Nothing is written to the program, so it works on a core file
too. A fiber its thread runs now has that thread's stack: COMMAND runs on
the thread."""

    def __init__(self):
        super().__init__("fiber", gdb.COMMAND_STACK, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        kind, key, cmd = parse_fiber(arg)
        everyone = [f for rt in runtimes() for f in rt.fibers]
        if kind == "all":
            for f in everyone:
                print("\nFiber %s [%s]:" % (f.label(), f.state_text()))
                self.run_on(f, cmd)
            return
        if kind == "id":
            found = [f for f in everyone if f.id == key]
        else:
            found = [f for f in everyone if f.name == key]
        if not found:
            raise gdb.GdbError(
                "fibra: no fiber %s (`info fibers` lists them)"
                % (key if kind == "id" else '"%s"' % key)
            )
        if len(found) > 1:
            raise gdb.GdbError(
                'fibra: %d fibers are named "%s" (ids %s): say which by its id'
                % (len(found), key, ", ".join(str(f.id) for f in found))
            )
        self.run_on(found[0], cmd)

    def run_on(self, fiber, cmd):
        if fiber.has_saved_frame:
            with OnFiber(fiber):
                gdb.execute(cmd)
            return
        if fiber.not_started:
            print("Fiber %s has not started: it has no frames yet." % fiber.id)
            return
        if fiber.on_thread:
            thread = fiber.runtime.gdb_thread()
            if thread is None:
                print(
                    'Fiber %s runs on thread "%s" now: its stack is that thread\'s.'
                    % (fiber.id, fiber.runtime.thread_name)
                )
                return
            print(
                'Fiber %s runs on thread "%s" now (gdb thread %d): its stack is '
                "that thread's." % (fiber.id, fiber.runtime.thread_name, thread.num)
            )
            gdb.execute("thread apply %d %s" % (thread.num, cmd))
            return
        print("Fiber %s [%s] has no saved frame to show." % (fiber.id, fiber.state_text()))


InfoFibers()
FiberCmd()

# The stall watchdog samples a fiber that keeps its thread by sending that
# thread a real-time signal, SIGRTMAX - 3 (SIG61 with glibc: see
# `signal()` in src/scheduler/stack_trace/sample.rs). A program stopped in
# the debugger looks stalled to it, and gdb would stop at every sample: let
# the signal through silently, as Go users do with SIGURG.
try:
    gdb.execute("handle SIG61 nostop noprint pass", to_string=True)
except gdb.error:
    pass
