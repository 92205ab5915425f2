//! Advice to the kernel about many stacks at once: installing their guard
//! pages, faulting in their top pages, and giving their memory back.
//!
//! Guards are installed the cheapest way the kernel allows:
//!
//! 1. `process_madvise(MADV_GUARD_INSTALL)` on our own process: the guards
//!    of a whole chunk in one syscall (Linux ≥ 6.13 with guard support in
//!    `process_madvise` for the caller itself);
//! 2. `madvise(MADV_GUARD_INSTALL)` per stack (Linux ≥ 6.13);
//! 3. `mprotect(PROT_NONE)` per stack, which splits the mapping (older
//!    kernels), plus `MADV_NOHUGEPAGE`, since `MAP_STACK` keeps transparent
//!    huge pages away only since Linux 6.7.
//!
//! The first method that fails with `EINVAL`, `ENOSYS` or `EPERM` is not
//! tried again in this process. Any other failure of the batch — the pidfd
//! it needs cannot be opened at the fd limit, or a range fails with another
//! error (see [`advise`]) — falls back to the next method for that call
//! only: a fiber's stack never needs a free fd.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use super::{Stack, page_size};

const MADV_GUARD_INSTALL: libc::c_int = 102;
/// Faults pages in as a write would (Linux 5.14); through
/// `process_madvise` on our own process since Linux 6.13.
const MADV_POPULATE_WRITE: libc::c_int = 23;

const BATCH: u8 = 0;
const PER_STACK: u8 = 1;
const MPROTECT: u8 = 2;
static METHOD: AtomicU8 = AtomicU8::new(BATCH);

/// Installs a guard on the lowest page of every stack.
///
/// Needs no file descriptor: when the batch cannot have its pidfd (the
/// process is at its fd limit, `EMFILE`) or fails otherwise, this call
/// guards stack by stack, and the next tries the batch again. (Installing
/// a guard twice, after a batch that failed part-way, is harmless.)
pub(super) fn install_guards(stacks: &[Stack]) -> io::Result<()> {
    if METHOD.load(Ordering::Relaxed) == BATCH {
        match batch(stacks, MADV_GUARD_INSTALL, |s| (s.base(), page_size())) {
            Ok(()) => return Ok(()),
            Err(e) if unsupported(&e) => METHOD.store(PER_STACK, Ordering::Relaxed),
            Err(_) => {} // this time only: per stack below
        }
    }
    if METHOD.load(Ordering::Relaxed) != MPROTECT {
        let mut result = Ok(());
        for stack in stacks {
            // SAFETY: the lowest page of our own fresh mapping; nothing lives there.
            if unsafe { libc::madvise(stack.base().cast(), page_size(), MADV_GUARD_INSTALL) } != 0 {
                result = Err(io::Error::last_os_error());
                break;
            }
        }
        match result {
            Ok(()) => return Ok(()),
            Err(e) if unsupported(&e) => METHOD.store(MPROTECT, Ordering::Relaxed),
            Err(e) => return Err(e),
        }
    }
    for stack in stacks {
        // SAFETY: as above, on our own mapping.
        unsafe {
            libc::madvise(stack.base().cast(), stack.len, libc::MADV_NOHUGEPAGE);
            if libc::mprotect(stack.base().cast(), page_size(), libc::PROT_NONE) != 0 {
                let err = io::Error::last_os_error();
                return Err(io::Error::new(
                    err.kind(),
                    format!(
                        "cannot protect a fiber stack's guard page: {err} (without \
                         MADV_GUARD_INSTALL, Linux < 6.13, each guard costs a mapping \
                         and vm.max_map_count caps the number of stacks)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::ENOSYS | libc::EPERM | libc::EOPNOTSUPP)
    )
}

/// Faults in the top page of every stack, where a fiber's header and first
/// frames go, in one `process_madvise` call per 512 stacks, instead of the
/// page fault each new fiber would otherwise take when it first runs. The
/// scheduler asks for it right before the fibers run, a batch of them in a
/// row (see `scheduler::core::first_run`), so that each fiber writes its page
/// while the page and its translation are still in the caches.
///
/// Best effort: where the kernel refuses (`process_madvise` takes this
/// advice only since Linux 6.13), it is not tried again in this process
/// ([`populates`] turns false); any other failure (no free fd for the
/// pidfd, a page it cannot populate under a memory limit) skips the rest
/// of this call only. Either way the fibers fault their pages in as they
/// run, as without this call.
pub(crate) fn populate_tops(stacks: &[&Stack]) {
    if !populates() {
        return;
    }
    let page = page_size();
    match batch(stacks, MADV_POPULATE_WRITE, |s| {
        (s.top().wrapping_sub(page), page)
    }) {
        Ok(()) => {}
        Err(e) if unsupported(&e) => POPULATES.store(false, Ordering::Relaxed),
        Err(_) => {}
    }
}

/// Whether [`populate_tops`] may do anything here: false once the kernel
/// has refused it, so that callers need not gather stacks for nothing.
pub(crate) fn populates() -> bool {
    POPULATES.load(Ordering::Relaxed)
}

static POPULATES: AtomicBool = AtomicBool::new(true);

/// Marks the memory of the stacks' usable parts as free (`MADV_FREE`): the
/// kernel reclaims it when it needs memory, and until then a stack reused
/// from the pool runs without faulting its pages in again. One syscall for
/// up to 512 stacks where `process_madvise` allows, else one per stack.
pub(super) fn free_memory(stacks: &[Stack]) {
    static BATCHED: AtomicU8 = AtomicU8::new(1);
    let range = |s: &Stack| (s.base().wrapping_add(page_size()), s.usable());
    if BATCHED.load(Ordering::Relaxed) == 1 {
        match batch(stacks, libc::MADV_FREE, range) {
            Ok(()) => return,
            Err(e) if unsupported(&e) => BATCHED.store(0, Ordering::Relaxed),
            Err(_) => {} // fall through: per stack
        }
    }
    for stack in stacks {
        let (start, len) = range(stack);
        // SAFETY: the usable part of our own mapping; no fiber runs on it.
        unsafe { libc::madvise(start.cast(), len, libc::MADV_FREE) };
    }
}

/// One `advice` over a range of each stack, in `process_madvise` calls on a
/// pidfd of our own process. Fails when that pidfd cannot be opened (no
/// fd free): callers fall back to one `madvise` per stack.
fn batch<S: std::borrow::Borrow<Stack>>(
    stacks: &[S],
    advice: libc::c_int,
    range: impl Fn(&Stack) -> (*mut u8, usize),
) -> io::Result<()> {
    let pidfd = own_pidfd()?;
    for group in stacks.chunks(512) {
        let mut iov: Vec<libc::iovec> = group
            .iter()
            .map(|s| {
                let (start, len) = range(s.borrow());
                libc::iovec {
                    iov_base: start.cast(),
                    iov_len: len,
                }
            })
            .collect();
        advise(pidfd, &mut iov, advice)?;
    }
    Ok(())
}

/// `advice` over every range of `iov` (none empty), by `process_madvise`
/// on `pidfd`, which names our own process.
///
/// The kernel stops at the first range it fails on and, if it advised any
/// before it, returns how many bytes it did, not the error. So a call that
/// stops part-way is made again from where it stopped: the range that
/// failed comes first then, and if it fails again its error is this
/// function's (if it does not, the call goes on). Reported as `EINVAL`
/// before, a `MADV_POPULATE_WRITE` stopped by `ENOMEM` under a memory
/// limit looked like advice the kernel does not take, which turned it off
/// for the rest of the process.
fn advise(pidfd: libc::c_int, iov: &mut [libc::iovec], advice: libc::c_int) -> io::Result<()> {
    let mut rest = iov;
    while !rest.is_empty() {
        // SAFETY: `rest` is valid iovecs naming ranges of our own mappings
        // (the callers' ranges: our stacks, or a test's own pages), read by
        // the kernel during the call only.
        let done = unsafe {
            libc::syscall(
                libc::SYS_process_madvise,
                pidfd,
                rest.as_ptr(),
                rest.len(),
                advice,
                0,
            )
        };
        if done < 0 {
            return Err(io::Error::last_os_error());
        }
        if done == 0 {
            // Nothing advised and no error: do not loop on it.
            return Err(io::Error::other("process_madvise advised nothing"));
        }
        // Skip the ranges advised whole; one advised in part goes on from
        // where it stopped.
        let mut done = done as usize;
        while let [first, ..] = rest
            && done >= first.iov_len
        {
            done -= first.iov_len;
            rest = &mut rest[1..];
        }
        if let [first, ..] = rest {
            first.iov_base = first.iov_base.wrapping_byte_add(done);
            first.iov_len -= done;
        }
    }
    Ok(())
}

/// A pidfd for this process, opened once per process (and kept: it is one
/// fd). Keyed by pid: after a `fork` the child inherits the parent's pidfd,
/// which names the parent; the kernel refuses destructive advice on another
/// process's memory, but the child would then fall back for good, and an fd
/// number that the child closed and reused would fail with EBADF. So a
/// child opens its own (and leaves the inherited number alone: it may be
/// the user's by now). Atomics, not a lock: a lock held by another thread
/// at the `fork` would stay locked in the child forever.
fn own_pidfd() -> io::Result<libc::c_int> {
    /// The owner's pid in the high half, the fd in the low half; 0: none.
    static PIDFD: AtomicU64 = AtomicU64::new(0);
    let pack =
        |pid: libc::pid_t, fd: libc::c_int| (u64::from(pid as u32) << 32) | u64::from(fd as u32);
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let cached = PIDFD.load(Ordering::Acquire);
    if cached != 0 && (cached >> 32) as u32 == pid as u32 {
        return Ok(cached as u32 as libc::c_int);
    }
    // SAFETY: pidfd_open on our own pid; the result is checked.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int;
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    match PIDFD.compare_exchange(cached, pack(pid, fd), Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Ok(fd),
        Err(theirs) if theirs != 0 && (theirs >> 32) as u32 == pid as u32 => {
            // Another thread of this process won the race: use its fd.
            // SAFETY: `fd` is ours and unused.
            unsafe { libc::close(fd) };
            Ok(theirs as u32 as libc::c_int)
        }
        Err(_) => Ok(fd), // a stale owner's entry changed meanwhile: use ours, uncached
    }
}

#[cfg(test)]
mod tests {
    use std::ptr;

    use super::*;
    use crate::stack::tests::resident;

    /// Four fresh private pages, the third unmapped; returns the first.
    fn pages_with_a_hole() -> *mut u8 {
        let page = page_size();
        // SAFETY: a fresh private anonymous mapping of four pages, ours
        // alone; checked below.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                4 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED, "{}", io::Error::last_os_error());
        let base = base.cast::<u8>();
        // SAFETY: the third page of our own mapping, which nothing uses.
        let rc = unsafe { libc::munmap(base.wrapping_add(2 * page).cast(), page) };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        base
    }

    /// Unmaps what [`pages_with_a_hole`] left mapped.
    fn unmap_pages(base: *mut u8) {
        for i in [0, 1, 3] {
            // SAFETY: the pages of our own mapping that are left.
            unsafe { libc::munmap(base.wrapping_add(i * page_size()).cast(), page_size()) };
        }
    }

    /// The same as the next test with advice every `process_madvise` takes
    /// (Linux 5.10), so that it runs where populating through it does not:
    /// `MADV_WILLNEED` stops at the hole with `ENOMEM` too.
    #[test]
    fn a_willneed_stopped_part_way_reports_enomem() {
        let base = pages_with_a_hole();
        let page = page_size();
        let mut iov = [1, 2, 3].map(|i| libc::iovec {
            iov_base: base.wrapping_add(i * page).cast(),
            iov_len: page,
        });
        let pidfd = own_pidfd().expect("a pidfd of our own");
        let err = advise(pidfd, &mut iov, libc::MADV_WILLNEED)
            .expect_err("the second range is not mapped");
        if matches!(err.raw_os_error(), Some(libc::ENOSYS)) {
            eprintln!("skipped: no process_madvise here ({err})");
        } else {
            assert_eq!(err.raw_os_error(), Some(libc::ENOMEM), "{err}");
        }
        unmap_pages(base);
    }

    /// A range the kernel fails on after advising others gives its own
    /// error, not a made-up one: `ENOMEM` for a page that is not mapped,
    /// where a partial count read as `EINVAL` turned populating off for
    /// good. The ranges before it are advised, the ones after it are not.
    #[test]
    fn a_call_stopped_part_way_reports_the_failing_range_s_error() {
        let page = page_size();
        let base = pages_with_a_hole();
        let at = |i: usize| base.wrapping_add(i * page);
        let pidfd = own_pidfd().expect("a pidfd of our own");
        let iovec = |i: usize| libc::iovec {
            iov_base: at(i).cast(),
            iov_len: page,
        };
        // The first page asks whether this kernel populates through
        // `process_madvise` at all (6.13 and later).
        match advise(pidfd, &mut [iovec(0)], MADV_POPULATE_WRITE) {
            Err(e) if unsupported(&e) => {
                eprintln!("skipped: process_madvise does not populate here ({e})");
            }
            other => {
                other.expect("populating a mapped page");
                assert!(resident(at(0)));
                let result = advise(
                    pidfd,
                    &mut [iovec(1), iovec(2), iovec(3)],
                    MADV_POPULATE_WRITE,
                );
                let err = result.expect_err("the second range is not mapped");
                assert_eq!(err.raw_os_error(), Some(libc::ENOMEM), "{err}");
                assert!(!unsupported(&err));
                assert!(resident(at(1)), "the range before it was advised");
                assert!(!resident(at(3)), "the range after it was not");
            }
        }
        unmap_pages(base);
    }
}
