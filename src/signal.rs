//! Waiting for Unix signals in blocking style.
//!
//! The first wait for a signal ([`wait`], [`ctrl_c`], [`Signals::new`])
//! installs a process-wide handler for it. The handler does only
//! async-signal-safe things: it sets the signal's bit in a set of arrived
//! signals (an atomic OR), then writes a byte to a non-blocking pipe to
//! wake the dispatcher. The dispatcher thread (`fibra-signal`, started on
//! first use, with every signal blocked) reads the pipe, takes the whole
//! set at once and hands each signal in it to every listener whose set
//! contains it, waking those that wait, through the ordinary unpark path.
//! So a signal reaches the waiting fibers (and threads) whichever thread
//! the kernel happened to interrupt.
//!
//! The byte is only a wake-up: when the pipe is full (the dispatcher is
//! behind), the handler's write fails and nothing is lost, since a byte
//! written before it is still unread and the dispatcher takes the set
//! after reading it. A burst of one signal can never crowd out another.
//!
//! ## No signal is lost
//!
//! From the first wait for a signal on, one that arrives while nobody waits
//! for it is kept, and the next wait that asks for it returns it at once —
//! the second Ctrl-C pressed during a graceful shutdown is not dropped. A
//! [`Signals`] listener keeps what arrives for it between its waits. Like
//! the kernel's own pending signals (and tokio's signal streams), several
//! arrivals of one signal before a wait coalesce into one.
//!
//! ## The default action
//!
//! Once a signal has a handler, its default action (terminating the
//! process for `SIGINT` or `SIGTERM`, say) no longer happens, for good: the
//! program decides, as with tokio's or signal-hook's handlers. "A second
//! Ctrl-C kills" is therefore the program's to say — keep listening after
//! the first, and exit when the second comes:
//!
//! ```no_run
//! use fibra::signal::{Signals, SIGINT};
//!
//! fibra::run(|| {
//!     let mut ctrl_c = Signals::new(&[SIGINT]).unwrap();
//!     ctrl_c.wait().unwrap(); // the first: shut down gracefully...
//!     fibra::spawn(move || {
//!         ctrl_c.wait().unwrap(); // ...unless a second one comes first
//!         eprintln!("second Ctrl-C: exiting now");
//!         std::process::exit(130);
//!     });
//!     // close listeners, drain connections, flush...
//! });
//! ```

use std::collections::HashSet;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use libc::c_int;

use crate::scheduler::park::{Unparker, park_current};
use crate::scheduler::wait_on::WaitOn;

/// Signals a handler may not be installed for: they cannot be caught, or
/// they report faults that the process must not survive silently.
const FORBIDDEN: [c_int; 6] = [
    libc::SIGKILL,
    libc::SIGSTOP,
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
];

/// The hang-up signal (a terminal closed; daemons: reload).
pub const SIGHUP: c_int = libc::SIGHUP;
/// Ctrl-C in a terminal.
pub const SIGINT: c_int = libc::SIGINT;
/// Ctrl-\ in a terminal (fibra's [`dump_on_sigquit`](crate::runtime::dump_on_sigquit) listens to it).
pub const SIGQUIT: c_int = libc::SIGQUIT;
/// A write to a pipe or socket whose reader is gone.
pub const SIGPIPE: c_int = libc::SIGPIPE;
/// A timer of `alarm(2)`.
pub const SIGALRM: c_int = libc::SIGALRM;
/// The polite request to terminate (`kill`'s default, service managers').
pub const SIGTERM: c_int = libc::SIGTERM;
/// The first signal free for the program's own use.
pub const SIGUSR1: c_int = libc::SIGUSR1;
/// The second signal free for the program's own use.
pub const SIGUSR2: c_int = libc::SIGUSR2;
/// A child process stopped or ended.
pub const SIGCHLD: c_int = libc::SIGCHLD;
/// The terminal's window size changed.
pub const SIGWINCH: c_int = libc::SIGWINCH;

/// A set of signals, bit `n` for signal `n` (Linux numbers them below 65).
type Mask = u128;

fn bit(signal: c_int) -> Mask {
    1 << signal
}

/// One listener's signals: what arrived for it and is not yet taken, and
/// whom to wake (refreshed before each park).
struct Inbox {
    pending: Mask,
    waiter: Option<Unparker>,
}

struct Listener {
    mask: Mask,
    inbox: Mutex<Inbox>,
}

struct State {
    listeners: Vec<(u64, Arc<Listener>)>,
    /// Signals that arrived while no listener wanted them, kept for the
    /// next one that does.
    pending: Mask,
}

struct Dispatcher {
    state: Mutex<State>,
    installed: Mutex<HashSet<c_int>>,
}

static DISPATCHER: OnceLock<Result<Dispatcher, i32>> = OnceLock::new();
/// The write end of the pipe, for the handler (-1 until set up).
static PIPE: AtomicI32 = AtomicI32::new(-1);
/// The signals that arrived and the dispatcher has not taken yet: signal
/// `n` is bit `n % 64` of word `n / 64` (the handler's one write).
static ARRIVED: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn dispatcher() -> io::Result<&'static Dispatcher> {
    DISPATCHER
        .get_or_init(|| {
            let mut fds = [0; 2];
            // SAFETY: a valid out-array for two fds; checked below.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
                return Err(io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO));
            }
            let [read, write] = fds;
            // The handler must never block: a full pipe drops the byte, a
            // wake-up the dispatcher has already been given (module docs).
            // SAFETY: fcntl on our own fd; checked below.
            if unsafe { libc::fcntl(write, libc::F_SETFL, libc::O_NONBLOCK) } != 0 {
                let errno = io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO);
                // SAFETY: our own fds, not yet shared with anyone.
                unsafe {
                    libc::close(read);
                    libc::close(write);
                }
                return Err(errno);
            }
            PIPE.store(write, Ordering::Release);
            let spawned = crate::scheduler::helper::spawn_quiet(|| {
                std::thread::Builder::new()
                    .name("fibra-signal".into())
                    .spawn(move || dispatch(read))
            });
            match spawned {
                Ok(_) => Ok(Dispatcher {
                    state: Mutex::new(State {
                        listeners: Vec::new(),
                        pending: 0,
                    }),
                    installed: Mutex::new(HashSet::new()),
                }),
                Err(e) => Err(e.raw_os_error().unwrap_or(libc::EAGAIN)),
            }
        })
        .as_ref()
        .map_err(|&code| io::Error::from_raw_os_error(code))
}

/// The dispatcher thread: after each read of the pipe, the signals that
/// arrived since the last one, each to its listeners.
fn dispatch(read: RawFd) {
    let mut bytes = [0u8; 64];
    loop {
        // SAFETY: reading into a valid buffer of its length, from our pipe.
        let n = unsafe { libc::read(read, bytes.as_mut_ptr().cast(), bytes.len()) };
        if n <= 0 {
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        // Acquire: pairs with the handlers' Release, before their bytes.
        let arrived = Mask::from(ARRIVED[0].swap(0, Ordering::Acquire))
            | Mask::from(ARRIVED[1].swap(0, Ordering::Acquire)) << 64;
        if arrived == 0 {
            continue; // (a wake-up whose signal an earlier read took)
        }
        let Ok(d) = dispatcher() else { return };
        let mut state = lock(&d.state);
        for signal in (1..128).filter(|&s| arrived & bit(s) != 0) {
            deliver(&mut state, signal);
        }
    }
}

/// Hands `signal` to every listener whose set has it, or keeps it for the
/// next one.
fn deliver(state: &mut State, signal: c_int) {
    let mut wanted = false;
    for (_, listener) in state
        .listeners
        .iter()
        .filter(|(_, l)| l.mask & bit(signal) != 0)
    {
        wanted = true;
        let waiter = {
            let mut inbox = lock(&listener.inbox);
            inbox.pending |= bit(signal);
            inbox.waiter.take()
        };
        if let Some(waiter) = waiter {
            waiter.unpark();
        }
    }
    if !wanted {
        state.pending |= bit(signal);
    }
}

extern "C" fn handle(signal: c_int) {
    let Ok(n) = usize::try_from(signal) else {
        return;
    };
    // Release: the dispatcher that reads the byte below sees the bit.
    ARRIVED[(n / 64) & 1].fetch_or(1 << (n % 64), Ordering::Release);
    // SAFETY: write(2) to a non-blocking pipe is async-signal-safe; errno
    // is saved and restored around it.
    unsafe {
        let errno = *libc::__errno_location();
        let fd = PIPE.load(Ordering::Acquire);
        let byte = 1u8;
        libc::write(fd, (&raw const byte).cast(), 1);
        *libc::__errno_location() = errno;
    }
}

/// Installs fibra's handler for `signal` ahead of any wait (the signal's
/// default action stops at once).
pub(crate) fn install_handler(signal: c_int) -> io::Result<()> {
    install(dispatcher()?, signal)
}

/// Whether fibra may install its handler for `signal`: `Err` says why
/// not.
fn catchable(signal: c_int) -> io::Result<()> {
    let why = if !(1..=libc::SIGRTMAX()).contains(&signal) {
        format!("signal {signal} cannot be waited for: no such signal")
    } else if FORBIDDEN.contains(&signal) {
        format!("signal {signal} cannot be waited for: it cannot be caught, or reports a fault")
    } else if signal == crate::scheduler::stack_trace::signal() {
        format!(
            "signal {signal} (SIGRTMAX-3) cannot be waited for: it is fibra's own, \
             the stall watchdog samples stacks with it"
        )
    } else {
        return Ok(());
    };
    Err(io::Error::new(io::ErrorKind::InvalidInput, why))
}

fn install(d: &Dispatcher, signal: c_int) -> io::Result<()> {
    catchable(signal)?;
    let mut installed = lock(&d.installed);
    if installed.contains(&signal) {
        return Ok(());
    }
    // a zeroed sigaction with a plain handler (async-signal-safe:
    // it writes one byte to a nonblocking pipe), installed for a signal
    // checked just above to be catchable and not one of the faults that
    // fibra's overflow report or the process must see. SA_ONSTACK: a
    // signal landing on a fiber deep in its small stack puts its frame on
    // the thread's alternate stack (when it has one) instead.
    // SAFETY: as argued just above.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handle as *const () as usize;
        action.sa_flags = libc::SA_RESTART | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    installed.insert(signal);
    Ok(())
}

/// Checks a set of signals for [`wait`] and [`Signals::new`].
fn check(signals: &[c_int]) -> io::Result<()> {
    if signals.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a signal wait needs at least one signal",
        ));
    }
    signals.iter().try_for_each(|&s| catchable(s))
}

/// Waits until one of `signals` is delivered to the process and returns
/// which. Parks the fiber (on a plain thread, blocks the thread). Every
/// waiter whose set contains the signal receives it; one that arrived
/// while nobody waited for it is returned at once (see the module docs).
///
/// # Errors
///
/// `InvalidInput` for an empty set, an unknown signal number, or one that
/// may not be handled (`SIGKILL`, `SIGSTOP`, the fault signals `SIGSEGV`,
/// `SIGBUS`, `SIGILL`, `SIGFPE`, and `SIGRTMAX - 3`, with which fibra
/// samples the stack of a stalled fiber).
///
/// ```
/// fibra::run(|| {
///     let waiter = fibra::spawn(|| fibra::signal::wait(&[libc::SIGUSR2]).unwrap());
///     fibra::yield_now(); // let it start waiting
///     // SAFETY: raising a signal we handle.
///     unsafe { libc::raise(libc::SIGUSR2) };
///     assert_eq!(waiter.join().unwrap(), libc::SIGUSR2);
/// });
/// ```
pub fn wait(signals: &[c_int]) -> io::Result<c_int> {
    Signals::new(signals)?.wait()
}

/// Waits for Ctrl-C (`SIGINT`): tokio's name. From the first call on,
/// Ctrl-C no longer ends the process by itself (see the module docs).
///
/// ```no_run
/// fibra::run(|| {
///     fibra::signal::ctrl_c().unwrap();
///     println!("shutting down");
/// });
/// ```
pub fn ctrl_c() -> io::Result<()> {
    wait(&[SIGINT]).map(drop)
}

/// A listener for several signals: registered once, it keeps every signal
/// of its set that arrives — while it waits or not — until [`wait`]
/// takes it, so a loop over it misses none (several arrivals of one signal
/// between two waits coalesce into one). Every listener whose set contains
/// a signal receives it. Dropping the listener gives back what it had not
/// taken, for the next wait.
///
/// [`wait`]: Signals::wait
///
/// ```
/// use fibra::signal::{Signals, SIGUSR1, SIGUSR2};
///
/// fibra::run(|| {
///     let mut signals = Signals::new(&[SIGUSR1, SIGUSR2]).unwrap();
///     // SAFETY: raising signals this process handles now.
///     unsafe {
///         libc::raise(SIGUSR2);
///         libc::raise(SIGUSR1);
///     }
///     // Kept while nobody waited; taken lowest number first.
///     assert_eq!(signals.wait().unwrap(), SIGUSR1);
///     assert_eq!(signals.next(), Some(SIGUSR2));
/// });
/// ```
pub struct Signals {
    dispatcher: &'static Dispatcher,
    id: u64,
    listener: Arc<Listener>,
}

impl Signals {
    /// Installs fibra's handler for each of `signals` (once per process)
    /// and starts listening. Signals of the set that arrived while nobody
    /// listened are the new listener's.
    ///
    /// # Errors
    ///
    /// As [`wait`].
    pub fn new(signals: &[c_int]) -> io::Result<Signals> {
        check(signals)?;
        let dispatcher = dispatcher()?;
        for &signal in signals {
            install(dispatcher, signal)?;
        }
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let mask = signals.iter().fold(0, |m, &s| m | bit(s));
        let mut state = lock(&dispatcher.state);
        let kept = state.pending & mask;
        state.pending &= !mask;
        let listener = Arc::new(Listener {
            mask,
            inbox: Mutex::new(Inbox {
                pending: kept,
                waiter: None,
            }),
        });
        state.listeners.push((id, listener.clone()));
        Ok(Signals {
            dispatcher,
            id,
            listener,
        })
    }

    /// Waits for the next signal of the set and returns it (the lowest
    /// number first, when several are kept). Parks the fiber; on a plain
    /// thread, blocks it.
    ///
    /// # Errors
    ///
    /// None today: the `Result` is kept for the day listening can fail.
    pub fn wait(&mut self) -> io::Result<c_int> {
        loop {
            {
                let mut inbox = lock(&self.listener.inbox);
                if inbox.pending != 0 {
                    let signal = inbox.pending.trailing_zeros() as c_int;
                    inbox.pending &= !bit(signal);
                    inbox.waiter = None;
                    drop(inbox);
                    // The dispatcher may still be about to wake the token
                    // it saw.
                    crate::scheduler::park::retire_token();
                    return Ok(signal);
                }
                inbox.waiter = Some(Unparker::current());
            }
            park_current(None, WaitOn::Signal);
        }
    }
}

impl Iterator for Signals {
    type Item = c_int;

    /// [`Signals::wait`]; never `None`.
    fn next(&mut self) -> Option<c_int> {
        self.wait().ok()
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        let mut state = lock(&self.dispatcher.state);
        state.listeners.retain(|(id, _)| *id != self.id);
        // What this listener did not take is kept for the next wait.
        state.pending |= lock(&self.listener.inbox).pending;
    }
}

impl std::fmt::Debug for Signals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let signals: Vec<c_int> = (1..128)
            .filter(|&s| self.listener.mask & bit(s) != 0)
            .collect();
        f.debug_struct("Signals")
            .field("signals", &signals)
            .finish()
    }
}
