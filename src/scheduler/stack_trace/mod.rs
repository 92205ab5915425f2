//! Every fiber's stack in a dump: where in the user's code each one waits,
//! as Go's goroutine dump shows it.
//!
//! ## How a parked fiber's stack is walked
//!
//! A parked fiber is a saved switch frame (its resume point, rbx and rbp,
//! `asm/x86_64.S`) on top of ordinary frames, each described by the unwind
//! info its compiler wrote, and the switch already carries the CFI that
//! makes those frames walkable. So a dump walks them *from the dumping
//! thread, without running the fiber*: `fibra_0_1_walk_parked` calls the
//! walk from a frame whose unwind info names the parked context as its
//! caller, and libgcc's `_Unwind_Backtrace` (through the `backtrace`
//! crate's `trace`), started there, goes on into the parked frames from
//! the resume point to the fiber's trampoline, reading them only (see
//! [`arch::walk_parked`](crate::arch::walk_parked)). The context that asks
//! for the dump walks its own stack. Only return addresses are taken on
//! the runtime's thread ([`walk`]); naming them (DWARF lookups, the slow
//! part) is done afterwards, on the thread that asked, each address once
//! (`observe::resolve`).
//!
//! Nothing of it is on the hot path: a park, a switch and a spawn do
//! exactly what they did before (the switch frame already held what the
//! walk reads), and `callgrind` counts the same instructions for a yield
//! round trip and a spawn + join with and without it.
//!
//! The ways not taken, and why:
//!
//! - *Switching into each parked fiber in a "trace" mode* (its park's
//!   switch returns, sees a flag, walks its own stack, switches straight
//!   back): the same unwinder doing the same walk, plus two switches per
//!   fiber, and it runs the unwinder (a few KiB of frames) on the fiber's
//!   own stack, which may be 16 KiB and nearly full where it parked; it
//!   needs a second resume path the runtime must keep off its hot path, a
//!   trip that must not be seen as the fiber running (no `current`, no
//!   watchdog word, no span, no ASan switch left unannounced), and it
//!   cannot walk a context that must not run (one suspended mid-unwind).
//!   Walking from outside reads the same frames and runs nothing of the
//!   fiber.
//! - *A DWARF unwinder of our own, or framehop, over the saved registers*:
//!   it is what the walk above does, with the unwinder the platform
//!   already has; framehop would add its own unwind-info parsing and the
//!   bookkeeping of loaded modules and their sections for no gain here.
//!   Nor for a *running* fiber (the stall warning's stack, `observe::sample`):
//!   there the signal handler only copies the registers and holds its
//!   thread, and libgcc walks from another thread, where its lookups take
//!   no lock (see `sample.rs` for what was checked, and what a walk from
//!   inside the handler would have needed).
//!
//! A *running* context's stack is sampled the same way from the
//! registers a signal handler took (`observe::sample`, `observe/sample/interrupted.rs`): for
//! the stall warning, and for a dump of a runtime a fiber holds.
//!
//! ## Folding
//!
//! fibra's frames around the user's are left out, as Go leaves out
//! `runtime.gopark` and `runtime.goexit`: the park machinery inside the
//! user's last call into fibra (that call itself is kept: `Mutex::lock`),
//! and the fiber's start outside the user's closure. See `observe::resolve::fold`.

pub(crate) mod walk;

use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// A fiber's stack, innermost frame first: where it is parked, out to the
/// closure it was spawned with (for the root, `block_on`'s closure), with
/// fibra's own frames around them left out (see
/// [`FiberInfo::stack`](crate::runtime::FiberInfo::stack)).
///
/// Its `Display` prints each frame as `std::backtrace` does, the function
/// on one line and `at file:line:column` under it, inlined calls as frames
/// of their own; file names under the current directory start with `./`.
///
/// ```
/// use std::time::Duration;
///
/// #[inline(never)]
/// fn nap() {
///     fibra::sleep(Duration::from_secs(60));
/// }
///
/// let rt = fibra::Runtime::new()?;
/// rt.spawn(nap);
/// rt.turn(Some(Duration::ZERO)); // it starts and parks
/// let dump = rt.dump();
/// let fiber = dump.fibers().next().unwrap();
/// let stack = fiber.stack.as_ref().unwrap();
/// // Where it waits: fibra::sleep, called by nap.
/// let names: Vec<_> = stack.frames().iter().filter_map(|f| f.function()).collect();
/// assert!(names.iter().any(|n| n.ends_with("::nap")), "{stack}");
/// println!("{stack}");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct StackTrace {
    inner: Arc<Inner>,
}

struct Inner {
    frames: Vec<StackFrame>,
    /// The walk stopped before the stack's root (it was too deep).
    cut: bool,
}

/// One frame of a [`StackTrace`]: a function, or a call inlined into one,
/// with where in its source the fiber is.
///
/// ```
/// let rt = fibra::Runtime::new()?;
/// rt.block_on(|| {
///     // The fiber asking shows its own stack: here.
///     let dump = rt.dump();
///     let me = dump.fibers().find(|f| f.stack.is_some()).unwrap();
///     let frame = &me.stack.as_ref().unwrap().frames()[0];
///     assert!(frame.function().unwrap().contains("dump"));
///     # let _ = (frame.file(), frame.line(), frame.column());
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct StackFrame {
    pub(crate) function: Option<Arc<str>>,
    pub(crate) file: Option<Arc<Path>>,
    pub(crate) line: Option<u32>,
    pub(crate) column: Option<u32>,
}

impl StackTrace {
    /// A stack of `frames`, innermost first; `cut`: the walk stopped
    /// before the stack's root.
    pub(crate) fn new(frames: Vec<StackFrame>, cut: bool) -> StackTrace {
        StackTrace {
            inner: Arc::new(Inner { frames, cut }),
        }
    }

    /// Its frames, innermost first.
    pub fn frames(&self) -> &[StackFrame] {
        &self.inner.frames
    }

    /// Writes the frames, each line after the first prefixed by `indent`
    /// (a dump nests them under their fiber's line).
    pub(crate) fn write_indented(&self, f: &mut fmt::Formatter<'_>, indent: &str) -> fmt::Result {
        let cwd = std::env::current_dir().ok();
        for frame in self.frames() {
            match frame.function() {
                Some(name) => writeln!(f, "{indent}{name}")?,
                None => writeln!(f, "{indent}<unknown>")?,
            }
            if let Some(file) = frame.short_file(cwd.as_deref()) {
                write!(f, "{indent}    at {file}")?;
                if let Some(line) = frame.line {
                    write!(f, ":{line}")?;
                    if let Some(column) = frame.column {
                        write!(f, ":{column}")?;
                    }
                }
                writeln!(f)?;
            }
        }
        if self.inner.cut {
            writeln!(f, "{indent}...more frames, not walked")?;
        }
        Ok(())
    }
}

impl fmt::Display for StackTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_indented(f, "")
    }
}

impl fmt::Debug for StackTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StackTrace")
            .field("frames", &self.inner.frames)
            .field("cut", &self.inner.cut)
            .finish()
    }
}

impl StackFrame {
    /// The function's name, demangled without its hash
    /// (`my_app::conn::serve`, `<T as Trait>::method`), or `None` where
    /// the address has no symbol.
    pub fn function(&self) -> Option<&str> {
        self.function.as_deref()
    }

    /// Its source file, as the debug info records it (absolute, usually);
    /// `None` without debug info (a release build without `debug`).
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The line in [`file`](StackFrame::file): of the call the frame is
    /// in when it is not the innermost.
    pub fn line(&self) -> Option<u32> {
        self.line
    }

    /// The column in that line, where the debug info has one.
    pub fn column(&self) -> Option<u32> {
        self.column
    }
}

impl StackFrame {
    /// The file as std's short backtraces print it: relative to `cwd`
    /// (with a leading `./`) when under it.
    pub(crate) fn short_file<'a>(&'a self, cwd: Option<&Path>) -> Option<ShortPath<'a>> {
        let file = self.file.as_deref()?;
        Some(match cwd.and_then(|cwd| file.strip_prefix(cwd).ok()) {
            Some(rel) => ShortPath::Relative(rel),
            None => ShortPath::Full(file),
        })
    }
}

/// A frame's file, for display.
pub(crate) enum ShortPath<'a> {
    Relative(&'a Path),
    Full(&'a Path),
}

impl std::fmt::Display for ShortPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShortPath::Relative(p) => write!(f, "./{}", p.display()),
            ShortPath::Full(p) => write!(f, "{}", p.display()),
        }
    }
}

/// The real-time signal fibra samples a running context's stack with
/// (`observe::sample`): `SIGRTMAX - 3` (glibc keeps
/// the lowest ones for itself; profilers and runtimes mostly take
/// `SIGPROF` or the lowest free ones).
pub(crate) fn signal() -> libc::c_int {
    libc::SIGRTMAX() - 3
}

/// What a sample found: the stack, or why there is none.
#[derive(Clone, Debug)]
pub(crate) enum Sampled {
    Stack(walk::RawStack),
    /// Left out, and why (for the reader: "not sampled: ...").
    Missing(&'static str),
}
