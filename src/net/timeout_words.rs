//! A socket's read and write timeouts and its non-blocking mode: the two
//! words of [`TimeoutWords`], which a socket's `Registration` keeps and
//! its loop reads on every call, and, once the socket has been cloned, a
//! [`SharedWords`] that the socket and its `try_clone`s share (as the
//! kernel shares std's timeouts between duplicated fds).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::timer::clock;

/// A socket's read and write timeouts and its non-blocking mode.
///
/// # Invariant
/// Each word is nanoseconds; 0 means no timeout. Bit [`NONBLOCKING`] (in
/// both words alike) is the socket's non-blocking mode, which the loop
/// reads only when a call said `WouldBlock`: in the word it loads anyway,
/// it costs a blocking call nothing. Bit [`SHARED`] says the socket has
/// been cloned: the rest of the word is then the address of the word in
/// its [`SharedWords`] that holds the value (read only when the word is
/// not 0, so a socket without a timeout never looks there). A word once
/// shared never changes again, and the `SharedWords` lives as long as
/// these words: they hold one count of its `Arc`.
#[derive(Debug)]
pub(crate) struct TimeoutWords {
    read_timeout: AtomicU64,
    write_timeout: AtomicU64,
}

impl TimeoutWords {
    pub(crate) fn new() -> TimeoutWords {
        TimeoutWords {
            read_timeout: AtomicU64::new(0),
            write_timeout: AtomicU64::new(0),
        }
    }

    /// The read (`read`) or write timeout's word as the loop takes it: a
    /// timeout in nanoseconds with the bits above, [`shared_value`] to
    /// follow when [`SHARED`] is set.
    #[inline(always)]
    pub(crate) fn load(&self, read: bool) -> u64 {
        if read {
            self.read_timeout.load(Ordering::Relaxed)
        } else {
            self.write_timeout.load(Ordering::Relaxed)
        }
    }

    /// Sets the read timeout (for this socket and its clones).
    pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        let ns = timeout_to_nanos(timeout)?;
        let _setting = lock_setters();
        set_nanos(self.word(true), ns);
        Ok(())
    }

    /// Sets the write timeout (for this socket and its clones).
    pub(crate) fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        let ns = timeout_to_nanos(timeout)?;
        let _setting = lock_setters();
        set_nanos(self.word(false), ns);
        Ok(())
    }

    pub(crate) fn read_timeout(&self) -> Option<Duration> {
        nanos_to_timeout(self.word(true).load(Ordering::Relaxed) & !NONBLOCKING)
    }

    pub(crate) fn write_timeout(&self) -> Option<Duration> {
        nanos_to_timeout(self.word(false).load(Ordering::Relaxed) & !NONBLOCKING)
    }

    /// Sets the socket's non-blocking mode (for it and its clones): a call
    /// that would wait says `WouldBlock` instead (the fd itself is always
    /// non-blocking).
    pub(crate) fn set_nonblocking(&self, on: bool) {
        let _setting = lock_setters();
        for word in [self.word(true), self.word(false)] {
            if on {
                word.fetch_or(NONBLOCKING, Ordering::Relaxed);
            } else {
                word.fetch_and(!NONBLOCKING, Ordering::Relaxed);
            }
        }
    }

    /// The words for a duplicate of the fd (`try_clone`): the timeouts and
    /// the mode shared with this one (both ways, as the kernel shares them
    /// between duplicated fds).
    pub(crate) fn duplicate(&self) -> TimeoutWords {
        let _setting = lock_setters();
        let words = self.share();
        let r = TimeoutWords::new();
        // One more count for `r`, released by its drop.
        let count = Arc::clone(&words);
        std::mem::forget(count);
        r.read_timeout
            .store(shared_word(&words.read), Ordering::Relaxed);
        r.write_timeout
            .store(shared_word(&words.write), Ordering::Relaxed);
        r
    }

    /// The words' `SharedWords`, made and pointed at on the first
    /// call. Called with the setters' lock held.
    fn share(&self) -> Arc<SharedWords> {
        let read = self.read_timeout.load(Ordering::Acquire);
        if read & SHARED != 0 {
            let ptr = (read & !SHARED) as *const SharedWords;
            // A shared word is the address of the `read` word of the
            // `SharedWords` these words hold a count of (the first
            // field of a `repr(C)` struct, so the struct's own address).
            // SAFETY: `ptr` is from `Arc::into_raw` and alive (counted);
            // one more count, made an `Arc`, leaves ours alone.
            return unsafe {
                Arc::increment_strong_count(ptr);
                Arc::from_raw(ptr)
            };
        }
        let write = self.write_timeout.load(Ordering::Relaxed);
        let words = Arc::new(SharedWords {
            read: AtomicU64::new(read),
            write: AtomicU64::new(write),
        });
        // The words' own count, released by their drop.
        let ptr = Arc::into_raw(Arc::clone(&words));
        debug_assert_eq!(ptr as u64 & SHARED, 0);
        // Release: a loop that sees a shared word sees the words it points
        // at. (No setter runs meanwhile: the caller holds their lock.)
        self.write_timeout
            .store(shared_word(&words.write), Ordering::Release);
        self.read_timeout
            .store(shared_word(&words.read), Ordering::Release);
        words
    }

    /// The word that holds the read (`read`) or write timeout now: our
    /// own, or the shared one our own points at.
    fn word(&self, read: bool) -> &AtomicU64 {
        let own = if read {
            &self.read_timeout
        } else {
            &self.write_timeout
        };
        let value = own.load(Ordering::Acquire);
        if value & SHARED == 0 {
            return own;
        }
        // SAFETY: see `shared`: the pointee lives as long as `self`.
        unsafe { &*((value & !SHARED) as *const AtomicU64) }
    }
}

impl Drop for TimeoutWords {
    fn drop(&mut self) {
        let read = *self.read_timeout.get_mut();
        if read & SHARED != 0 {
            // SAFETY: the words' own count of their `SharedWords`
            // (see `share`), released once, here.
            drop(unsafe { Arc::from_raw((read & !SHARED) as *const SharedWords) });
        }
    }
}

/// A socket's timeouts and mode once it has been cloned: what every clone
/// reads and sets. `repr(C)` with `read` first, so that the address a read
/// word keeps is the struct's.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct SharedWords {
    read: AtomicU64,
    write: AtomicU64,
}

/// A word of [`TimeoutWords`] pointing at `word` of its `SharedWords`.
fn shared_word(word: &AtomicU64) -> u64 {
    std::ptr::from_ref(word) as u64 | SHARED
}

/// The value a timeout word stands for: itself, or the shared word it
/// points at. Out of line: only a socket that has a timeout or a mode and
/// has been cloned comes here.
#[cold]
#[inline(never)]
pub(crate) fn shared_value(word: u64) -> u64 {
    // Acquire for the loop's relaxed load of `word`: the shared words were
    // made before the words' own word was stored (with release).
    std::sync::atomic::fence(Ordering::Acquire);
    // SAFETY: a shared word points at a word of the `SharedWords` the
    // `TimeoutWords` it was loaded from holds (see `TimeoutWords::share`);
    // the caller borrows those words.
    unsafe { &*((word & !SHARED) as *const AtomicU64) }.load(Ordering::Relaxed)
}

/// The lock every change of a socket's timeout words takes (a set timeout,
/// a set mode, a clone): rare calls, so one lock for the process, and the
/// loop's reads never take it.
fn lock_setters() -> std::sync::MutexGuard<'static, ()> {
    static SETTERS: Mutex<()> = Mutex::new(());
    SETTERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The bit of a timeout word that says the socket is non-blocking (see
/// [`TimeoutWords`]' invariant). Timeouts are kept below it and
/// [`SHARED`]: 2^62 ns is 146 years.
pub(crate) const NONBLOCKING: u64 = 1 << 63;

/// The bit of a timeout word that says the word points at a shared one
/// (see [`TimeoutWords`]' invariant). An address fits below it.
pub(crate) const SHARED: u64 = 1 << 62;

/// As std: a zero timeout is an error.
fn timeout_to_nanos(timeout: Option<Duration>) -> io::Result<u64> {
    match timeout {
        None => Ok(0),
        Some(d) if d.is_zero() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cannot set a 0 duration timeout",
        )),
        Some(d) => Ok(clock::duration_ns(d).clamp(1, SHARED - 1)),
    }
}

/// Stores timeout `ns` in `word` (not a shared one: see
/// `TimeoutWords::word`), keeping its [`NONBLOCKING`] bit. The caller
/// holds the setters' lock.
fn set_nanos(word: &AtomicU64, ns: u64) {
    let old = word.load(Ordering::Relaxed);
    debug_assert_eq!(old & SHARED, 0);
    word.store(ns | (old & NONBLOCKING), Ordering::Relaxed);
}

fn nanos_to_timeout(ns: u64) -> Option<Duration> {
    (ns != 0).then(|| Duration::from_nanos(ns))
}
