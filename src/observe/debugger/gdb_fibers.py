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
# Embedded in every binary that links fibra, at every debug level, by a
# static in gdb's `.debug_gdb_scripts` section (`GDB_SCRIPT` in
# src/observe/debugger.rs; not `#![debugger_visualizer]`, which rustc
# writes only with debug info). gdb runs it when it loads the program, once
# auto-loading is allowed for it (`gdb -iex 'add-auto-load-safe-path
# /path/to/binary'`, or `set auto-load safe-path /` in ~/.gdbinit); `source`
# it by hand otherwise.
#
# It needs no debug info: it reads fibra's structures as raw memory, where
# the program itself says they lie. It needs the symbol table (to find
# `FIBRA_0_1_RUNTIMES`) and the unwind tables (`.eh_frame`, always there):
# line tables add files and lines to what it shows.
#
# ## How it finds the fibers
#
# `FIBRA_0_1_RUNTIMES` (src/observe/debugger.rs, an unmangled symbol)
# holds the address and length of an array of entries, one per live
# runtime (its `Core`, its thread's LWP, its `Local`, its thread's name and
# whether it is a worker), and the address of a `Layout`: the offsets, by
# `offset_of!`, of the fields read here, and the byte of each state. A
# runtime's `Local` holds the running context's key and the array of its
# fiber records (src/scheduler/core/record.rs): saved stack pointer, state,
# id, name, and what its last park waited on (`StoredWait`, whose tags
# `waiting_on` below decodes as src/scheduler/wait_on.rs does). tests/gdb.rs
# fails when these stop matching.
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
#
# ## Errors
#
# Every command says what went wrong in one line (`fibra: ...`), never with
# a Python traceback: `FibraError` is gdb's own error type, and any other
# exception is turned into one (see `one_line`).

import functools
import re
import struct
import time

import gdb
import gdb.unwinder

RUNTIMES = "FIBRA_0_1_RUNTIMES"
NO_DEADLINE = (1 << 64) - 1

# fibra's own frames, and the standard library's, are not where a user
# would say a fiber "is": `info fibers` names the first frame that is none
# of these (the switch's assembly is `fibra_0_1_*`).
INTERNAL = re.compile(r"^<?&?(mut )?(fibra|core|std|alloc)::|^fibra_\d+_\d+_|^_")


class FibraError(gdb.GdbError):
    """An error gdb prints as its one line, with no traceback."""


def one_line(what):
    """Wraps a command's `invoke` (or a hook gdb calls) so that whatever
    goes wrong reaches the user as one line: gdb prints a `gdb.GdbError`
    as a message, but any other exception with Python's name for it and,
    in some settings, a traceback."""

    def wrap(f):
        @functools.wraps(f)
        def run(*args, **kwargs):
            try:
                return f(*args, **kwargs)
            except gdb.GdbError:
                raise
            except KeyboardInterrupt:
                raise FibraError("fibra: %s: interrupted" % what)
            except gdb.MemoryError as e:
                raise FibraError(
                    "fibra: %s: cannot read the program's memory (%s): a "
                    "runtime being made or closed, or a core without it" % (what, e)
                )
            except Exception as e:
                raise FibraError("fibra: %s failed: %s" % (what, e))

        return run

    return wrap


def read(addr, size):
    return bytes(gdb.selected_inferior().read_memory(addr, size))


def word(addr):
    """The 8-byte word at `addr` in the inferior."""
    return struct.unpack("<Q", read(addr, 8))[0]


def utf8(addr, length):
    if addr == 0 or length <= 0:
        return ""
    return read(addr, min(length, 4096)).decode("utf-8", "replace")


TRAMPOLINE = "fibra_0_1_trampoline"


def symbol_at(pc):
    """The symbol `pc` is the start of (`name`), or is in (`name + off`)."""
    try:
        text = gdb.execute("info symbol %d" % pc, to_string=True)
    except gdb.error:
        return None
    return text.split(" in section ", 1)[0].strip()


def address_of(name):
    """The address of the global `name`, from the debug info or, without
    it, from the symbol table (`info address` looks in both)."""
    try:
        text = gdb.execute("info address " + name, to_string=True)
    except gdb.error:
        return None
    m = re.search(r"\b0x[0-9a-fA-F]+", text)
    return int(m.group(0), 16) if m else None


# The fields of `Layout` (src/observe/debugger.rs), in its order: one
# 8-byte word each.
LAYOUT_FIELDS = (
    "size",
    "entry_size",
    "current",
    "entered",
    "records",
    "records_len",
    "record_size",
    "sp",
    "state",
    "id",
    "name",
    "wait_tag",
    "wait_word",
    "waiting_until",
    "ready",
    "running",
    "parked",
    "done",
    "vacant",
    "name_ptr",
    "name_len",
    "name_text",
    "str_ptr",
    "str_len",
)


class Layout:
    """Where the program says the fields this script reads lie."""

    def __init__(self, addr):
        size = word(addr)
        if size < 8 * len(LAYOUT_FIELDS):
            raise FibraError(
                "fibra: this program's runtime publishes %d bytes of layout, "
                "and this script reads %d: they are not from one fibra"
                % (size, 8 * len(LAYOUT_FIELDS))
            )
        words = struct.unpack("<%dQ" % len(LAYOUT_FIELDS), read(addr, 8 * len(LAYOUT_FIELDS)))
        for name, value in zip(LAYOUT_FIELDS, words):
            setattr(self, name, value)
        self.states = {
            self.ready: "Ready",
            self.running: "Running",
            self.parked: "Parked",
            self.done: "Done",
            self.vacant: "Vacant",
        }


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


def waiting_on(layout, tag, w):
    """What a park waits on, as `WaitOn`'s Display says it
    (src/scheduler/wait_on.rs: `StoredWait`'s tag and word)."""
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
        return utf8(word(w + layout.str_ptr), word(w + layout.str_len))
    return {
        5: "signal::wait",
        6: "block_on_future",
        7: "spawn_blocking",
        8: "the fibers of its scope",
    }.get(tag, "tag %d" % tag)


def field_at(rec, at, size):
    """The unsigned integer of `size` bytes at offset `at` of a record's
    bytes."""
    return int.from_bytes(rec[at : at + size], "little")


class Fiber:
    """One context of a runtime, as its record says."""

    def __init__(self, runtime, key, rec):
        layout = runtime.layout
        self.runtime = runtime
        self.key = key
        self.root = key == 0
        self.sp = field_at(rec, layout.sp, 8)
        self.state = runtime.state_of(rec)
        self.id = field_at(rec, layout.id, 8)
        ptr = field_at(rec, layout.name + layout.name_ptr, 8)
        length = field_at(rec, layout.name + layout.name_len, 8)
        self.name = utf8(ptr + layout.name_text, length) if ptr else None
        self.waiting_on = None
        self.deadline_in = None
        if self.state == "Parked":
            self.waiting_on = waiting_on(
                layout,
                field_at(rec, layout.wait_tag, 1),
                field_at(rec, layout.wait_word, 8),
            )
            self.deadline_in = deadline_left(field_at(rec, layout.waiting_until, 8))

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


# At most this many records are read of one runtime: a torn or stale entry
# cannot make `info fibers` read gigabytes.
MAX_RECORDS = 1 << 20


class Runtime:
    def __init__(self, index, layout, entry):
        core, lwp, local, name, name_len, worker = entry
        self.index = index
        self.layout = layout
        self.lwp = lwp
        self.address = core
        self.current = struct.unpack("<I", read(local + layout.current, 4))[0]
        self.entered = read(local + layout.entered, 1) != b"\0"
        # A worker's root runs the worker's loop, never the user's code.
        self.worker = worker != 0
        self.thread_name = utf8(name, name_len)
        records = word(local + layout.records)
        count = min(word(local + layout.records_len), MAX_RECORDS)
        self.fibers = []
        for key in range(count):
            rec = read(records + key * layout.record_size, layout.record_size)
            state = self.state_of(rec)
            if state in ("Vacant", "Done"):
                continue
            if key == 0 and (self.worker or (state == "Running" and not self.entered)):
                # The root of a worker (its loop), or of a runtime nobody
                # drives now: no user code of its own anywhere.
                continue
            self.fibers.append(Fiber(self, key, rec))

    def state_of(self, rec):
        byte = field_at(rec, self.layout.state, 1)
        return self.layout.states.get(byte, "state %d" % byte)

    def gdb_thread(self):
        """The gdb thread this runtime runs on, by its LWP."""
        for t in gdb.selected_inferior().threads():
            if t.ptid[1] == self.lwp:
                return t
        return None


def runtimes():
    """Every live runtime of the inferior."""
    at = address_of(RUNTIMES)
    if at is None:
        raise FibraError(
            "fibra: no symbol %s in this program: it has no fibra 0.1 runtime, "
            'or its symbol table was stripped (`strip = "symbols"`; '
            '`strip = "debuginfo"` keeps what `info fibers` needs)' % RUNTIMES
        )
    if gdb.selected_thread() is None:
        raise FibraError(
            "fibra: no process or core file to read fibers from (`run`, "
            "`attach PID` or `core FILE` first)"
        )
    cores, count, layout_at = word(at), word(at + 8), word(at + 16)
    if count == 0:
        return []
    if layout_at == 0:
        raise FibraError("fibra: the runtimes' list has no layout: not from this fibra")
    layout = Layout(layout_at)
    found = []
    for i in range(min(count, 4096)):
        entry = struct.unpack("<6Q", read(cores + i * layout.entry_size, 48))
        found.append(Runtime(i, layout, entry))
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
        try:
            return self.unwind(pending, self.target)
        except Exception:
            # gdb would print it at every frame it asks about: the frame
            # is left to gdb's own unwinders, and `OnFiber` says that the
            # fiber's frame was not found.
            return None

    def unwind(self, pending, sp):
        rsp = pending.read_register("rsp")
        rip = pending.read_register("rip")

        class FrameId:
            def __init__(self, sp, pc):
                self.sp = sp
                self.pc = pc

        # The claimed frame's id says its stack is at 0, below every
        # stack: gdb stops a walk at a frame that is "inner" (lower) than
        # the one before it, and a fiber's stack may lie below its thread's.
        # (Where the fiber's innermost frame is an inlined call, as with
        # line tables, gdb does not compare; without them it does.)
        ptr = rsp.type
        info = pending.create_unwind_info(FrameId(gdb.Value(0).cast(ptr), rip))
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


class Where:
    """What `where` learnt: whether any frame it named had a file and line
    (none: the program has no line tables, which `info fibers` then says),
    and the directory of fibra's sources."""

    named = 0
    with_lines = 0
    # fibra's `src/` directory, as gdb names its files (`Symtab.fullname`):
    # learnt from a parked fiber's innermost frame, which is fibra's switch.
    fibra_src = None


# A legacy-mangled symbol's hash (`::h0123456789abcdef`), and an offset
# into a symbol (`name + 17`).
HASH = re.compile(r"::h[0-9a-f]{16}$")


def qualified(frame, name):
    """`name` with its path: with line tables only, gdb names a function
    by its last segment (`wait_for_lock`), which cannot tell the user's
    from fibra's; the symbol table has the whole path. Not for an inlined
    call, whose pc is in its caller's symbol."""
    if "::" in name or frame.type() != gdb.NORMAL_FRAME:
        return name
    pc = frame.pc() if frame.level() == 0 else frame.pc() - 1
    sym = symbol_at(pc)
    if not sym or sym.startswith("No symbol"):
        return name
    full = HASH.sub("", sym.split(" + ", 1)[0])
    return full if full.endswith("::" + name) else name


def source_of(frame):
    """The frame's file as gdb names it in full, or None."""
    sal = frame.find_sal()
    if sal.symtab is None:
        return None
    try:
        return sal.symtab.fullname()
    except gdb.error:
        return sal.symtab.filename


def learn_fibra_src(frame):
    """Takes fibra's `src/` directory from `frame`, a parked fiber's
    innermost frame (fibra's switch, `src/arch/...`)."""
    path = source_of(frame)
    if Where.fibra_src is None and path and "/src/" in path:
        Where.fibra_src = path[: path.rindex("/src/") + len("/src/")]


def internal(frame, name):
    """Whether the frame is fibra's or the standard library's: by its
    function's path, or by its file where gdb gives only the last segment
    of the name (line tables only)."""
    if INTERNAL.search(name):
        return True
    path = source_of(frame)
    if path is None:
        return False
    if path.startswith("/rustc/"):
        return True
    return Where.fibra_src is not None and path.startswith(Where.fibra_src)


def where(frame, limit=64):
    """The first frame from `frame` out that is the user's: its function,
    and its file and line when the program has line tables."""
    while frame is not None and limit > 0:
        name = frame.name()
        if name:
            name = qualified(frame, HASH.sub("", name))
        if name and not internal(frame, name):
            Where.named += 1
            sal = frame.find_sal()
            if sal.symtab is not None:
                Where.with_lines += 1
                return "%s at %s:%d" % (name, sal.symtab.filename, sal.line)
            return name
        frame = frame.older()
        limit -= 1
    return ""


def where_is(fiber):
    try:
        if fiber.has_saved_frame:
            with OnFiber(fiber) as frame:
                learn_fibra_src(frame)
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
    except Exception:
        # One fiber whose place cannot be told does not keep `info
        # fibers` from listing the rest.
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

    @one_line("info fibers")
    def invoke(self, arg, from_tty):
        found = runtimes()
        if not found:
            print("No fibra runtime.")
            return
        Where.named = Where.with_lines = 0
        # The parked first: they show where fibra's sources are, which
        # tells its frames from the user's in the running ones.
        everyone = [f for rt in found for f in rt.fibers]
        places = {}
        for f in sorted(everyone, key=lambda f: not f.has_saved_frame):
            places[f.key, f.runtime.index] = where_is(f)
        for rt in found:
            thread = rt.gdb_thread()
            on = " (gdb thread %d)" % thread.num if thread is not None else ""
            print(
                'Runtime %d on thread "%s"%s: %d fibers'
                % (rt.index, rt.thread_name, on, len(rt.fibers))
            )
            rows = [
                ("*" if f.on_thread else " ", f.label(), f.state_text(), places[f.key, rt.index])
                for f in rt.fibers
            ]
            width = max([len(r[1]) for r in rows] + [2])
            state_width = max([len(r[2]) for r in rows] + [5])
            for mark, label, state, at in rows:
                line = "%s %-*s  %-*s" % (mark, width, label, state_width, state)
                if at:
                    line += "  in " + at
                print(line.rstrip())
        if Where.named and not Where.with_lines:
            print(
                "(No line tables in this program: functions without files and "
                'lines. `debug = "line-tables-only"` adds them.)'
            )


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

    @one_line("fiber")
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
# `signal()` in src/scheduler/stack_trace/mod.rs). A program stopped in
# the debugger looks stalled to it, and gdb would stop at every sample: let
# the signal through silently, as Go users do with SIGURG.
try:
    gdb.execute("handle SIG61 nostop noprint pass", to_string=True)
except gdb.error:
    pass


# gdb reads the `.debug_gdb_scripts` section this script comes from, where
# rustc, in a binary built with debug info, names a file of the standard
# library's pretty-printers, `gdb_load_rust_pretty_printers.py`, which only
# `rust-gdb` tells gdb where to find. Plain gdb then warns "Missing
# auto-load script at offset 0 in section .debug_gdb_scripts", at every
# start and attach, which reads as if fibra's extension were missing: say
# in one line, under it, what it is about.
def explain_missing_printers():
    try:
        scripts = gdb.execute("info auto-load python-scripts", to_string=True)
    except gdb.error:
        return
    if re.search(r"^No\s+gdb_load_rust_pretty_printers\.py", scripts, re.M):
        print(
            "fibra: that warning is about Rust's own pretty-printers, which "
            "`rust-gdb` loads; `info fibers` and `fiber` are loaded."
        )


explain_missing_printers()
