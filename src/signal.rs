//! Waiting for Unix signals in blocking style.
//!
//! The first [`wait`] for a signal installs a process-wide handler for it.
//! The handler does the one async-signal-safe thing it needs: it writes the
//! signal's number to a non-blocking pipe. A dispatcher thread
//! (`fibra-signal`, started on first use) reads the pipe and wakes every
//! waiter whose set contains that signal, through the ordinary unpark path.
//! So a signal reaches the waiting fibers (and threads) whichever thread the
//! kernel happened to interrupt.
//!
//! Once a signal has a handler, its default action (terminating the process
//! for `SIGINT` or `SIGTERM`, say) no longer happens: the program decides,
//! as with tokio's or signal-hook's handlers. A signal that arrives while
//! nobody waits for it is not kept.

use std::collections::HashSet;
use std::io;
use std::os::fd::RawFd;
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

/// What a waiter receives, and whom to wake (refreshed before each park).
type Slot = Arc<Mutex<(Option<c_int>, Unparker)>>;

struct Waiter {
    signals: Vec<c_int>,
    slot: Slot,
}

struct Dispatcher {
    waiters: Mutex<Vec<(u64, Waiter)>>,
    installed: Mutex<HashSet<c_int>>,
}

static DISPATCHER: OnceLock<Result<Dispatcher, i32>> = OnceLock::new();
/// The write end of the pipe, for the handler (-1 until set up).
static PIPE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

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
            // The handler must never block: a full pipe drops the byte (the
            // dispatcher is behind, and a burst of one signal merges anyway).
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
            PIPE.store(write, std::sync::atomic::Ordering::Release);
            let spawned = std::thread::Builder::new()
                .name("fibra-signal".into())
                .spawn(move || dispatch(read));
            match spawned {
                Ok(_) => Ok(Dispatcher {
                    waiters: Mutex::new(Vec::new()),
                    installed: Mutex::new(HashSet::new()),
                }),
                Err(e) => Err(e.raw_os_error().unwrap_or(libc::EAGAIN)),
            }
        })
        .as_ref()
        .map_err(|&code| io::Error::from_raw_os_error(code))
}

/// The dispatcher thread: one byte per delivered signal.
fn dispatch(read: RawFd) {
    loop {
        let mut byte = 0u8;
        // SAFETY: reading one byte from our pipe into a valid buffer.
        let n = unsafe { libc::read(read, (&raw mut byte).cast(), 1) };
        if n != 1 {
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        let signal = c_int::from(byte);
        let Ok(d) = dispatcher() else { return };
        let mut waiters = lock(&d.waiters);
        waiters.retain(|(_, w)| {
            if !w.signals.contains(&signal) {
                return true;
            }
            let waiter = {
                let mut slot = lock(&w.slot);
                slot.0.get_or_insert(signal);
                slot.1.clone()
            };
            waiter.unpark();
            false
        });
    }
}

extern "C" fn handle(signal: c_int) {
    // SAFETY: write(2) to a non-blocking pipe is async-signal-safe; errno
    // is saved and restored around it.
    unsafe {
        let errno = *libc::__errno_location();
        let fd = PIPE.load(std::sync::atomic::Ordering::Acquire);
        let byte = signal as u8;
        libc::write(fd, (&raw const byte).cast(), 1);
        *libc::__errno_location() = errno;
    }
}

/// Installs fibra's handler for `signal` ahead of any wait (the signal's
/// default action stops at once).
pub(crate) fn install_handler(signal: c_int) -> io::Result<()> {
    install(dispatcher()?, signal)
}

/// Whether fibra may install its handler for `signal`.
fn catchable(signal: c_int) -> bool {
    (1..=libc::SIGRTMAX()).contains(&signal) && !FORBIDDEN.contains(&signal)
}

fn install(d: &Dispatcher, signal: c_int) -> io::Result<()> {
    if !catchable(signal) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("signal {signal} cannot be waited for"),
        ));
    }
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

/// Waits until one of `signals` is delivered to the process and returns
/// which. Parks the fiber (on a plain thread, blocks the thread). Every
/// waiter whose set contains the signal receives it.
///
/// # Errors
///
/// `InvalidInput` for an empty set, an unknown signal number, or one that
/// may not be handled (`SIGKILL`, `SIGSTOP`, and the fault signals
/// `SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE`).
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
    if signals.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "fibra::signal::wait needs at least one signal",
        ));
    }
    for &signal in signals {
        if !catchable(signal) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("signal {signal} cannot be waited for"),
            ));
        }
    }
    let d = dispatcher()?;
    for &signal in signals {
        install(d, signal)?;
    }
    static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let slot: Slot = Arc::new(Mutex::new((None, Unparker::current())));
    lock(&d.waiters).push((
        id,
        Waiter {
            signals: signals.to_vec(),
            slot: slot.clone(),
        },
    ));
    /// Unregisters the waiter however the wait ends, unwinding included.
    struct Registered(&'static Dispatcher, u64);
    impl Drop for Registered {
        fn drop(&mut self) {
            lock(&self.0.waiters).retain(|(id, _)| *id != self.1);
        }
    }
    let _registered = Registered(d, id);
    loop {
        {
            let mut slot = lock(&slot);
            if let Some(signal) = slot.0 {
                drop(slot);
                // The dispatcher may still be about to wake the token it saw.
                crate::scheduler::park::retire_token();
                return Ok(signal);
            }
            slot.1 = Unparker::current();
        }
        park_current(None, WaitOn::Signal);
    }
}
