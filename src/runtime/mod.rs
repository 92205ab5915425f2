//! Runtimes: a scheduler, a reactor and a timer wheel on one thread.
//!
//! A [`Runtime`] runs fibers on the thread that drives it. Drive it in one of
//! three ways:
//!
//! - [`Runtime::block_on`] runs a closure on the thread's own stack as the
//!   runtime's *root*; while the closure is blocked (it sleeps, joins, reads
//!   a socket), the runtime's fibers run. [`fibra::run`](crate::run) is the
//!   one-line form.
//! - [`Runtime::run`] runs fibers until none is left: the `async_run` loop.
//! - [`Runtime::turn`] runs one step and returns, for an outer event loop; the
//!   runtime's fd ([`AsRawFd`](std::os::fd::AsRawFd)) is readable whenever
//!   it has work.
//!
//! ```
//! use std::time::Duration;
//!
//! let rt = fibra::Runtime::new()?;
//! let h = rt.spawn(|| {
//!     fibra::sleep(Duration::from_millis(5));
//!     6 * 7
//! });
//! rt.run();
//! assert_eq!(h.join().unwrap(), 42);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! A runtime and its fibers belong to the thread that created it: `Runtime`
//! is neither `Send` nor `Sync`, and a fiber never moves to another thread.
//!
//! ## Runtimes of several workers
//!
//! [`Builder::workers`] makes a `Runtime<Workers>`: `n` threads, each with a
//! runtime of its own, that run without the caller driving them. Fibers
//! spawned with [`Runtime::spawn`](Runtime#method.spawn-1) (`F: Send`) are
//! spread over the workers, and [`fibra::spawn`](crate::spawn) inside a fiber
//! keeps the new fiber on the caller's worker (`F` need not be `Send`).
//! A worker with nothing to run takes fibers that have not started yet from
//! a busy one; a fiber that has started never changes thread, so it may keep
//! `Rc`s and borrows of thread-locals across blocking calls (a
//! `thread_local!` initializer must not block, though: see
//! ["Thread-locals"](crate#thread-locals)).
//!
//! ```
//! use std::thread;
//!
//! let rt = fibra::Runtime::builder().workers(2).build()?;
//! let handles: Vec<_> = (0..8)
//!     .map(|_| {
//!         rt.spawn(|| {
//!             let me = thread::current().id();
//!             fibra::sleep(std::time::Duration::from_millis(1));
//!             assert_eq!(thread::current().id(), me); // never migrates
//!         })
//!     })
//!     .collect();
//! rt.block_on(|| handles.into_iter().for_each(|h| h.join().unwrap()));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! ## In gdb
//!
//! Every program that links fibra carries a gdb extension that lists its
//! fibers and walks a parked one's stack, as Go's `runtime-gdb.py` does for
//! goroutines: fibra writes it (`src/observe/debugger/gdb_fibers.py`) into the
//! program's `.debug_gdb_scripts` section, whatever its `debug` level. gdb
//! (or `rust-gdb`) runs it when it loads the program, once auto-loading is
//! allowed for the program's path: `-iex 'add-auto-load-safe-path target'`
//! on the command line, or `add-auto-load-safe-path /path/to/project` (`set
//! auto-load safe-path /` for every path) in `~/.config/gdb/gdbinit`. Until
//! then gdb says that auto-loading "has been declined", and `info fibers` is
//! an undefined command. On a running program (stopped at a breakpoint or
//! by Ctrl-C) or on a core file, `examples/gdb_fibers.rs` shows:
//!
//! ```text
//! (gdb) info fibers
//! Runtime 0 on thread "fibra-worker-0" (gdb thread 2): 2 fibers
//!   1025                parked: join of fiber 2      in gdb_fibers::wait_on_worker at examples/gdb_fibers.rs:64
//!   2 "worker-sleeper"  parked: sleep, 3599.9s left  in gdb_fibers::nap at examples/gdb_fibers.rs:36
//! Runtime 1 on thread "main" (gdb thread 1): 6 fibers
//! * 1026 (block_on)  running                      in gdb_fibers::stop_here at examples/gdb_fibers.rs:31
//!   1027 "sleeper"   parked: sleep, 3600.0s left  in gdb_fibers::nap at examples/gdb_fibers.rs:36
//!   1028 "locker"    parked: Mutex::lock          in gdb_fibers::wait_for_lock at examples/gdb_fibers.rs:44
//!   1029 "listener"  parked: channel receive      in gdb_fibers::wait_for_message at examples/gdb_fibers.rs:50
//!   1030 "reader"    parked: fd 12 READABLE       in gdb_fibers::wait_for_bytes at examples/gdb_fibers.rs:55
//!   1031             ready, not started
//! (gdb) fiber locker bt
//! #1  0x00005555556aac4b in fibra::arch::x86_64::switch (...) at src/arch/x86_64.rs:139
//! #2  fibra::scheduler::core::Core::switch_to (...) at src/scheduler/core/switch.rs:54
//! ...
//! #9  0x000055555561e265 in fibra::sync::mutex::Mutex<u32>::lock<u32> (self=0x555555d763c0) at src/sync/mutex.rs:127
//! #10 0x000055555561c159 in gdb_fibers::wait_for_lock (lock=0x555555d763c0) at examples/gdb_fibers.rs:44
//! #11 0x00005555556209a7 in gdb_fibers::park_fibers_and_stop::{closure#1}::{closure#1} () at examples/gdb_fibers.rs:97
//! ...
//! #21 0x0000555555709f9e in fibra_0_1_trampoline ()
//! ```
//!
//! - `info fibers`: every fiber of every runtime, by runtime and thread:
//!   its id, name, state (and what it waits on), and the first function of
//!   the user's it is in; `*` marks the context its thread runs now.
//! - `fiber ID [COMMAND]`, `fiber NAME [COMMAND]`: runs a gdb command
//!   (`bt` when none is given) on a fiber's stack, its innermost frame
//!   selected: `fiber 1028 bt full`, `fiber locker info locals`, `fiber
//!   locker frame 10`; `fiber all bt` does it for every fiber.
//!
//! A parked fiber's frames are walked from the switch frame it saved, by
//! gdb's own unwinder, without running the fiber or writing anything to the
//! program (so a core file works as well as a live process); its frames
//! keep gdb's numbers, from `#1` (the thread's own innermost frame, `#0`,
//! is hidden). A fiber its thread runs now has that thread's stack:
//! `fiber` runs the command on the thread.
//!
//! The extension needs no debug info: it finds the runtimes through one
//! global list, `FIBRA_0_1_RUNTIMES`, by its name in the symbol table, and
//! the list says where the fields it reads lie; gdb walks the stacks with
//! the unwind tables every Rust program keeps. What the `debug` setting of
//! the program's profile (for fibra and the user's crate) adds:
//!
//! - `debug = false` (the default of `--release`, whose `strip =
//!   "debuginfo"` keeps the symbols): every fiber, its state and the
//!   functions of its stack, by name, without files and lines (`info
//!   fibers` says so under its list).
//! - `debug = "line-tables-only"` or `1` (`"limited"`): the same, with each
//!   frame's file and line. gdb shows no arguments or local variables.
//! - `debug = 2` (`true`, the default of `cargo build`): arguments, and
//!   locals with `fiber N bt full` or `fiber N info locals`.
//! - `strip = "symbols"` (or `strip` run on the binary): the commands
//!   remain, and say in one line that the symbol they read is gone.
//!
//! With debug info, gdb may also print, at every start and attach,
//! `warning: Missing auto-load script at offset 0 in section
//! .debug_gdb_scripts`. That is not fibra's extension: rustc names in the
//! same section a file of the standard library's pretty-printers
//! (`gdb_load_rust_pretty_printers.py`), which only `rust-gdb` tells gdb
//! where to find, so `rust-gdb` prints no such warning; `info auto-load
//! python-scripts` lists both. The extension says so in a line under it.
//!
//! The list is written when a runtime is made and when it is dropped: the
//! hot paths pay nothing for it. The extension also tells gdb to pass
//! `SIG61` (`SIGRTMAX - 3`, the signal the stall watchdog samples a busy
//! thread with) without stopping: a program held at a breakpoint looks
//! stalled to the watchdog.
//!
//! On Linux 6.13 and later, fibra puts each stack's guard page inside the
//! stack's mapping (`MADV_GUARD_INSTALL`), and gdb's `gcore` (gdb 13, on
//! Linux 6.18) failed to read those mappings: its cores lost the fibers'
//! stacks. The kernel's own cores (`ulimit -c`, `systemd-coredump`) keep
//! them.

mod builder;
mod current_thread;
mod dump;
#[cfg(feature = "futures-io")]
pub(crate) mod fallback;
mod handle;
mod workers;

pub use crate::observe::dump::Dump;
pub use crate::observe::profile::{Profile, Profiler};
pub use crate::scheduler::fiber_info::{FiberInfo, FiberState, GroupId, GroupInfo};
pub use crate::scheduler::metrics::WorkerMetrics;
pub use crate::scheduler::stack_trace::{StackFrame, StackTrace};
pub use builder::{Builder, OnDeadlock};
pub use current_thread::CurrentThread;
pub use dump::dump_on_sigquit;
pub use handle::Handle;
pub use workers::Workers;

/// A fiber runtime. See the [module docs](self).
///
/// `Runtime` (that is, `Runtime<CurrentThread>`) runs on the thread that
/// drives it and cannot leave it:
///
/// ```compile_fail
/// let rt = fibra::Runtime::new().unwrap();
/// std::thread::spawn(move || drop(rt));
/// ```
///
/// `Runtime<Workers>`, from [`Builder::workers`], runs on threads of its own
/// and may be shared between threads.
///
/// # Dropping
///
/// Dropping a runtime cancels the fibers left in it: each is unwound from
/// where it is parked, so its destructors run. One exception: a runtime
/// dropped while its thread destroys its thread-locals (one kept in a
/// `thread_local!`, say, dropped when the thread exits) *leaks* its
/// fibers and their stacks instead — none is resumed or dropped, and
/// their `JoinHandle`s never complete — because a fiber parked inside
/// `LocalKey::with` borrows that thread-local, which std may already have
/// destroyed (std orders those destructors as if `with` scopes nested on a
/// thread; fibers interleave them). Likewise `block_on`, `run` and `turn`
/// panic then if the runtime has fibers. fibra learns that destruction has
/// begun from a thread-local of its own, registered the first time a
/// runtime on the thread is left with fibers alive; it cannot tell when a
/// runtime that was first left with fibers, then stored in a thread-local
/// first used after that, holds a fiber that borrows a thread-local first
/// used later still: don't make a runtime's owner a thread-local newer
/// than the runtime's first fibers.
///
/// ```
/// use std::cell::RefCell;
///
/// thread_local! {
///     static RT: fibra::Runtime = fibra::Runtime::new().unwrap();
///     static NAME: RefCell<String> = RefCell::new("conn".into());
/// }
///
/// std::thread::spawn(|| {
///     RT.with(|rt| {
///         rt.block_on(|| {
///             fibra::spawn(|| {
///                 NAME.with(|name| {
///                     // Parks forever, borrowing NAME. At thread exit NAME
///                     // is destroyed before RT: RT's drop leaks this fiber
///                     // rather than unwind it into a freed `String`.
///                     fibra::sleep(std::time::Duration::from_secs(3600));
///                     println!("{}", name.borrow());
///                 })
///             });
///             fibra::yield_now();
///         })
///     });
/// })
/// .join()
/// .unwrap();
/// ```
pub struct Runtime<Flavor = CurrentThread> {
    flavor: Flavor,
}

impl<Flavor> Runtime<Flavor> {
    pub(crate) fn from_flavor(flavor: Flavor) -> Runtime<Flavor> {
        raise_fd_limit();
        Runtime { flavor }
    }
}

/// Raises the soft open-file limit to the hard limit, once per process, as Go
/// does: a server of many connections should not die of a default of 1024.
fn raise_fd_limit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: valid out-pointer / in-pointer to an rlimit.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
                lim.rlim_cur = lim.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            }
        }
    });
}

/// Runs `f` in a new runtime on this thread and returns what it returns;
/// fibers still alive then are cancelled. See [`Runtime::block_on`].
///
/// # Panics
///
/// When the runtime cannot be created, or when called from a fiber or from
/// inside `block_on`. A panic of `f` is re-raised.
///
/// ```
/// let sum = fibra::run(|| {
///     let handles: Vec<_> = (1..=10).map(|i| fibra::spawn(move || i)).collect();
///     handles.into_iter().map(|h| h.join().unwrap()).sum::<i32>()
/// });
/// assert_eq!(sum, 55);
/// ```
#[track_caller]
pub fn run<T>(f: impl FnOnce() -> T) -> T {
    Runtime::new()
        .expect("fibra::run: cannot create a runtime")
        .block_on(f)
}
