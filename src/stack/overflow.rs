//! Reporting a fiber's stack overflow instead of corrupting memory silently.
//!
//! A fiber that runs off the bottom of its stack touches its guard page and
//! the kernel raises SIGSEGV. Our handler runs on an alternate signal stack
//! (the fiber's own stack is exhausted), compares the fault address with the
//! guard range of the fiber running on this thread, and if it matches prints
//!
//! ```text
//! fiber 'worker' (id 7) has overflowed its stack of 256 KiB
//! ```
//!
//! and aborts. Any other fault goes to whatever handler was installed before
//! ours, so Rust's own "thread has overflowed its stack" report, and the
//! default crash for a plain bad pointer, keep working.
//!
//! ## Ground rules
//!
//! - [`RUNNING`] is written by the scheduler at every switch and read only by
//!   the handler on the same thread; a `const` thread-local of a `Cell` of a
//!   raw pointer compiles to a plain `%fs`-relative access, with no lazy
//!   initialisation, so reading it in a signal handler is safe.
//! - The handler calls only async-signal-safe functions: `write`, `sigaction`,
//!   `abort`, and the previous handler.

use std::cell::Cell;
use std::io;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::Once;

use super::StackHeader;

/// Which stack this thread runs on, written at every switch.
///
/// One thread-local of 16 bytes aligned to 16, so that its two fields are
/// always in one cache line: as two thread-locals, where the linker put
/// them moved from build to build, and a generator's round trip (two
/// writes here, then the switch) cost 9.2 ns in builds that placed them one
/// way and 11.7 ns in builds that placed them another, for the same machine
/// code. (A line of its own, `align(64)`, fixed that too but cost a yield
/// 0.7 ns: one more line at every switch.)
#[repr(align(16))]
struct Running {
    /// The header of the fiber stack this thread is running on, or null on
    /// the thread's own stack.
    header: Cell<*const StackHeader>,
    /// Under `--cfg fibra_asan` only (null otherwise): the stack this thread
    /// ran on before the last [`set_running`], where the calls into
    /// AddressSanitizer that precede a switch there may overflow.
    switched_from: Cell<*const StackHeader>,
}

thread_local! {
    static RUNNING: Running = const {
        Running {
            header: Cell::new(ptr::null()),
            switched_from: Cell::new(ptr::null()),
        }
    };

    /// Whether this thread has an alternate signal stack we can rely on.
    static ALTSTACK: Cell<bool> = const { Cell::new(false) };
}

/// Records which stack this thread is about to run on (null: its own),
/// right before a switch that pushes `PUSHES` bytes on the stack it leaves
/// with nothing in between that pushes more; returns the one it ran on.
///
/// The thread-local is the one truth of which stack runs: a generator
/// switching stacks sets it and nothing else, and the runtime saves it in
/// a fiber's record when it switches the fiber out (the value this
/// returns), to set it again when the fiber runs next.
///
/// The switch's pushes are probed first (`arch::probe_pushes`): if they
/// would overflow the stack being left, the fault comes there, while that
/// stack is still the one recorded, and the switch itself cannot fault.
/// (Recording the stack left as well, which the probe made unneeded, was a
/// store per switch: 0.7–0.9 ns of a 4.6 ns generator round trip on Zen 4.)
/// Under `--cfg fibra_asan` the switch first calls into AddressSanitizer
/// on the stack it leaves, deeper than the probe, so that stack is
/// recorded too, as `switched_from`.
#[inline(always)]
pub(crate) fn set_running<const PUSHES: usize>(header: *const StackHeader) -> *const StackHeader {
    crate::arch::probe_pushes::<PUSHES>();
    RUNNING.with(|r| {
        let previous = r.header.replace(header);
        if cfg!(fibra_asan) {
            r.switched_from.set(previous);
        }
        previous
    })
}

/// Records that this thread is back on `header`'s stack after a switch
/// that pushed nothing on the stack it left (a generator's suspend, whose
/// frame is written before it switches), so `switched_from` has nothing
/// to add and keeps what it says.
#[inline(always)]
pub(crate) fn return_to(header: *const StackHeader) {
    RUNNING.with(|r| r.header.set(header));
}

/// The stack this thread runs on now (null: its own).
#[inline]
pub(crate) fn running() -> *const StackHeader {
    RUNNING.with(|r| r.header.get())
}

/// The handler that was installed before ours, written once before ours is.
struct Previous(std::cell::UnsafeCell<MaybeUninit<libc::sigaction>>);
// SAFETY: written exactly once, inside `INSTALL.call_once`, before our handler
// can run; read-only afterwards.
unsafe impl Sync for Previous {}
static PREVIOUS: Previous = Previous(std::cell::UnsafeCell::new(MaybeUninit::uninit()));
static INSTALL: Once = Once::new();

/// Installs the SIGSEGV handler (once per process) and makes sure this thread
/// has an alternate signal stack to run it on. Called whenever a thread
/// starts running fibers.
pub(crate) fn prepare_thread() {
    INSTALL.call_once(|| {
        // SAFETY: we fill a zeroed sigaction with a handler of the SA_SIGINFO
        // shape, and save the previous action in PREVIOUS before installing.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handle_segv as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            let previous = (*PREVIOUS.0.get()).as_mut_ptr();
            libc::sigaction(libc::SIGSEGV, ptr::null(), previous);
            libc::sigaction(libc::SIGSEGV, &action, ptr::null_mut());
        }
    });
    if !ALTSTACK.with(Cell::get) {
        ensure_altstack();
        ALTSTACK.with(|a| a.set(true));
    }
}

/// An alternate signal stack that we mapped for this thread, unmapped when
/// the thread exits.
struct OwnedAltStack {
    base: *mut libc::c_void,
    len: usize,
}

impl Drop for OwnedAltStack {
    fn drop(&mut self) {
        // SAFETY: disable the alternate stack before unmapping it, so no
        // signal can land on freed memory; both calls are on our own data.
        unsafe {
            let disable = libc::stack_t {
                ss_sp: ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            libc::sigaltstack(&disable, ptr::null_mut());
            libc::munmap(self.base, self.len);
        }
    }
}

thread_local! {
    static OWNED_ALTSTACK: Cell<Option<OwnedAltStack>> = const { Cell::new(None) };
}

fn ensure_altstack() {
    // SAFETY: stack_t is plain data; all-zero is a valid value.
    let mut old: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: querying the current alternate stack writes only into `old`.
    unsafe { libc::sigaltstack(ptr::null(), &mut old) };
    if old.ss_flags & libc::SS_DISABLE == 0 {
        return; // std (or the user) already gave this thread one.
    }
    let page = super::page_size();
    // SAFETY: getauxval has no preconditions; 0 means "not provided".
    let min = unsafe { libc::getauxval(libc::AT_MINSIGSTKSZ) } as usize;
    let size = min
        .max(libc::SIGSTKSZ)
        .max(64 * 1024)
        .next_multiple_of(page);
    // SAFETY: a fresh anonymous mapping, checked below; its lowest page
    // becomes a guard so an overflow of the handler itself faults cleanly.
    unsafe {
        let base = libc::mmap(
            ptr::null_mut(),
            size + page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        );
        if base == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            let message = format!(
                "no alternate signal stack ({e}): fiber stack overflows will not be reported"
            );
            crate::report::tell(crate::report::Level::Warn, "fibra", &message, None, || {
                tracing::warn!(error = %e, "no alternate signal stack: fiber stack overflows will not be reported");
            });
            return;
        }
        libc::mprotect(base, page, libc::PROT_NONE);
        let stack = libc::stack_t {
            ss_sp: base.cast::<u8>().add(page).cast(),
            ss_flags: 0,
            ss_size: size,
        };
        libc::sigaltstack(&stack, ptr::null_mut());
        OWNED_ALTSTACK.with(|o| {
            o.set(Some(OwnedAltStack {
                base,
                len: size + page,
            }))
        });
    }
}

extern "C" fn handle_segv(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let header = RUNNING.with(|r| r.header.get());
    if !header.is_null() {
        // SAFETY: RUNNING points at the header of the stack this thread runs
        // on; the scheduler keeps that stack mapped while the fiber runs.
        let h = unsafe { &*header };
        if (h.guard_lo..h.guard_hi).contains(&addr) {
            report_and_abort(h);
        }
    }
    // Under `--cfg fibra_asan`, the fault may be in ASan's calls before a
    // switch, on the stack it is leaving. That stack is mapped then; but a
    // stack left long ago may be unmapped since, so its header is read
    // only if its page is still mapped.
    let from = RUNNING.with(|r| r.switched_from.get());
    if !from.is_null() && is_mapped(from.cast()) {
        // SAFETY: the page holding the header is mapped (just checked), and
        // every mapped fiber stack's header slot holds a header written at
        // spawn (or zeroes, which match no address).
        let h = unsafe { &*from };
        if (h.guard_lo..h.guard_hi).contains(&addr) {
            report_and_abort(h);
        }
    }
    // Not ours: hand the fault to whoever was there before.
    // SAFETY: PREVIOUS was written before our handler was installed.
    unsafe {
        let previous = &*(*PREVIOUS.0.get()).as_ptr();
        let action = previous.sa_sigaction;
        if action == libc::SIG_DFL || action == libc::SIG_IGN {
            // Restore the default action and return: the faulting instruction
            // runs again and the process dies of SIGSEGV as it would have.
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(libc::SIGSEGV, &default, ptr::null_mut());
        } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(action);
            f(sig, info, ctx);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(action);
            f(sig);
        }
    }
}

/// Whether the page holding `p` is mapped (async-signal-safe: one syscall).
fn is_mapped(p: *const u8) -> bool {
    let page = super::page_size();
    let start = (p as usize) & !(page - 1);
    let mut vec = 0u8;
    // SAFETY: mincore writes one byte (one page) into `vec`; it fails with
    // ENOMEM, touching nothing, when the page is not mapped.
    unsafe { libc::mincore(start as *mut libc::c_void, page, &mut vec) == 0 }
}

fn report_and_abort(h: &StackHeader) -> ! {
    let mut out = Buf::new();
    out.push(b"\nfiber '");
    if h.name_ptr.is_null() {
        out.push(b"<unnamed>");
    } else {
        // SAFETY: the name is owned by the fiber's record, alive while it runs.
        out.push(unsafe { std::slice::from_raw_parts(h.name_ptr, h.name_len) });
    }
    out.push(b"' (id ");
    out.push_u64(h.fiber_id);
    out.push(b") has overflowed its stack of ");
    out.push_u64((h.usable / 1024) as u64);
    out.push(b" KiB\nfatal runtime error: fiber stack overflow, aborting\n");
    // SAFETY: write(2) and abort(3) are async-signal-safe.
    unsafe {
        libc::write(2, out.bytes.as_ptr().cast(), out.len);
        libc::abort();
    }
}

/// A fixed buffer for formatting without allocating (we are in a signal
/// handler on a small stack).
struct Buf {
    bytes: [u8; 512],
    len: usize,
}

impl Buf {
    fn new() -> Self {
        Buf {
            bytes: [0; 512],
            len: 0,
        }
    }

    fn push(&mut self, s: &[u8]) {
        let n = s.len().min(self.bytes.len() - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    fn push_u64(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }
}

#[cfg(test)]
mod tests {
    use super::Buf;

    #[test]
    fn formats_numbers_without_allocating() {
        let mut b = Buf::new();
        b.push_u64(0);
        b.push(b" ");
        b.push_u64(u64::MAX);
        assert_eq!(&b.bytes[..b.len], b"0 18446744073709551615");
    }
}
