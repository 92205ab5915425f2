//! A small io_uring of the reactor's own, for the two calls that have no
//! per-call non-blocking form: `connect` and `accept` on a socket whose
//! `O_NONBLOCK` is not ours to change (see `hook/connection.rs`).
//!
//! The kernel makes an `IORING_OP_CONNECT` or `IORING_OP_ACCEPT` without
//! blocking, whatever the socket's flags say, and, where it must wait,
//! arms a poll of its own and finishes the call when the socket is ready
//! (`IORING_FEAT_FAST_POLL`, Linux 5.7): no thread waits, neither ours nor
//! an io-wq worker. The ring's fd (or an eventfd, below) is readable when
//! completions are ready, so it sits in the epoll set like any other fd.
//!
//! Only what those two calls need is here: one submission at a time
//! (submitted at once, so the submission queue never holds more than one
//! entry), completions read in order, and the kernel's overflow list
//! flushed when the completion queue filled (`IORING_FEAT_NODROP`). The
//! layout of the shared rings is the kernel's ABI (`linux/io_uring.h`);
//! the names below are its names.
//!
//! The ring is this thread's: only the reactor's thread submits and
//! reaps, so the ordering needed is the one between us and the kernel
//! (release on the tails and heads we publish, acquire on the ones it
//! publishes).
//!
//! ## No signal-like wake-ups
//!
//! The kernel finishes a call that waited in the submitting thread's
//! context ("task work"). By default it gets there by flagging the thread
//! as if a signal were pending: a blocking `epoll_wait` on that thread
//! then fails with `EINTR` — fibra's own wait copes, but an outer event
//! loop that embeds the runtime on the same thread would see an `EINTR`
//! nobody sent. Where the kernel has it (Linux 6.1), the ring is made with
//! `IORING_SETUP_DEFER_TASKRUN` (and `SINGLE_ISSUER`, which it needs: only
//! this thread submits): the work waits until we ask for it
//! (`io_uring_enter` with `GETEVENTS`), and an eventfd registered with
//! the ring tells us when there is some. That eventfd, not the ring's fd,
//! is what sits in the epoll set then. Older kernels get the default.

#![cfg_attr(not(feature = "hook"), allow(dead_code))] // (only the hook submits)

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::arch::syscall;

pub(super) const IORING_OP_ACCEPT: u8 = 13;
pub(super) const IORING_OP_ASYNC_CANCEL: u8 = 14;
pub(super) const IORING_OP_CONNECT: u8 = 16;

const IORING_SETUP_CQSIZE: u32 = 1 << 3;
const IORING_SETUP_CLAMP: u32 = 1 << 4;
const IORING_SETUP_SINGLE_ISSUER: u32 = 1 << 12;
const IORING_SETUP_DEFER_TASKRUN: u32 = 1 << 13;
const IORING_REGISTER_EVENTFD: usize = 4;
const IORING_FEAT_SINGLE_MMAP: u32 = 1 << 0;
const IORING_FEAT_NODROP: u32 = 1 << 1;
const IORING_FEAT_FAST_POLL: u32 = 1 << 5;
const IORING_ENTER_GETEVENTS: usize = 1 << 0;
const IORING_SQ_CQ_OVERFLOW: u32 = 1 << 1;
const IORING_OFF_SQ_RING: i64 = 0;
const IORING_OFF_CQ_RING: i64 = 0x800_0000;
const IORING_OFF_SQES: i64 = 0x1000_0000;

/// Submission entries: one is in flight between a push and its submit.
const SQ_ENTRIES: u32 = 8;
/// Completion entries: completions that come while the thread is busy
/// wait here (and beyond it in the kernel's overflow list).
const CQ_ENTRIES: u32 = 4096;

#[repr(C)]
#[derive(Default)]
struct SqOffsets {
    head: u32,
    tail: u32,
    ring_mask: u32,
    ring_entries: u32,
    flags: u32,
    dropped: u32,
    array: u32,
    resv1: u32,
    user_addr: u64,
}

#[repr(C)]
#[derive(Default)]
struct CqOffsets {
    head: u32,
    tail: u32,
    ring_mask: u32,
    ring_entries: u32,
    overflow: u32,
    cqes: u32,
    flags: u32,
    resv1: u32,
    user_addr: u64,
}

#[repr(C)]
#[derive(Default)]
struct Params {
    sq_entries: u32,
    cq_entries: u32,
    flags: u32,
    sq_thread_cpu: u32,
    sq_thread_idle: u32,
    features: u32,
    wq_fd: u32,
    resv: [u32; 3],
    sq_off: SqOffsets,
    cq_off: CqOffsets,
}

const _: () = assert!(size_of::<Params>() == 120);

/// A submission queue entry, as the kernel reads it.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct Sqe {
    pub(super) opcode: u8,
    pub(super) flags: u8,
    pub(super) ioprio: u16,
    pub(super) fd: i32,
    /// `off`, or `addr2`: a connect's address length; the address of an
    /// accept's length.
    pub(super) off: u64,
    /// The address (connect, accept); the `user_data` to cancel.
    pub(super) addr: u64,
    pub(super) len: u32,
    /// `accept_flags` for an accept.
    pub(super) op_flags: u32,
    pub(super) user_data: u64,
    pub(super) buf_index: u16,
    pub(super) personality: u16,
    pub(super) splice_fd_in: i32,
    pub(super) addr3: u64,
    pub(super) pad: u64,
}

const _: () = assert!(size_of::<Sqe>() == 64);

#[repr(C)]
#[derive(Clone, Copy)]
struct Cqe {
    user_data: u64,
    res: i32,
    flags: u32,
}

/// One mapping of the ring's memory, unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    fn new(fd: RawFd, len: usize, offset: i64) -> io::Result<Mapping> {
        // SAFETY: a new shared mapping of the ring fd's memory at the
        // kernel's own offset; nothing of ours is at the address it picks.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: NonNull::new(p.cast()).expect("mmap returned null"),
            len,
        })
    }

    /// The `T` at byte `offset`.
    ///
    /// # Safety
    ///
    /// The kernel keeps a `T`, suitably aligned, at that offset of this
    /// mapping (its `*_off` parameters say where).
    unsafe fn at<T>(&self, offset: u32) -> *mut T {
        debug_assert!(offset as usize + size_of::<T>() <= self.len);
        // SAFETY: the caller's contract: in bounds of the mapping.
        unsafe { self.ptr.as_ptr().add(offset as usize).cast() }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once; nothing refers to it
        // after the ring drops.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// An io_uring: its fd and its shared rings.
pub(super) struct Ring {
    // (Dropped in order: the mappings, then the fd, which ends the ring.)
    rings: Mapping,
    /// The CQ ring's own mapping where the kernel lacks SINGLE_MMAP.
    cq_rings: Option<Mapping>,
    sqes: Mapping,
    fd: OwnedFd,
    sq_off: SqOffsets,
    cq_off: CqOffsets,
    sq_mask: u32,
    cq_mask: u32,
    /// The eventfd the kernel signals when deferred work waits (see "No
    /// signal-like wake-ups"); `None` where the kernel runs it at once.
    deferred: Option<OwnedFd>,
}

// The ring's pointers are into mappings it owns; it is used by its
// reactor's thread alone, and moves with the reactor.
// SAFETY: nothing in it is tied to the thread that made it.
unsafe impl Send for Ring {}

impl Ring {
    /// A new ring; `Unsupported` when the kernel's cannot make connects and
    /// accepts wait without a thread (before Linux 5.7), and the kernel's
    /// error where io_uring is refused (a seccomp filter, a sysctl).
    pub(super) fn new() -> io::Result<Ring> {
        let base = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP;
        let (fd, p, deferred) =
            match setup(base | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN) {
                Ok((fd, p)) => {
                    let efd = new_eventfd()?;
                    let efd_raw = efd.as_raw_fd();
                    // SAFETY: registers our eventfd with our ring: the
                    // kernel reads one int.
                    let r = unsafe {
                        syscall::syscall6(
                            libc::SYS_io_uring_register,
                            fd.as_raw_fd() as usize,
                            IORING_REGISTER_EVENTFD,
                            &efd_raw as *const RawFd as usize,
                            1,
                            0,
                            0,
                        )
                    };
                    syscall::result(r)?;
                    (fd, p, Some(efd))
                }
                // Before Linux 6.1: the default way.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    let (fd, p) = setup(base)?;
                    (fd, p, None)
                }
                Err(e) => return Err(e),
            };
        let needed = IORING_FEAT_FAST_POLL | IORING_FEAT_NODROP;
        if p.features & needed != needed {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this kernel's io_uring has no fast poll (Linux 5.7)",
            ));
        }
        let raw = fd.as_raw_fd();
        let sq_len = p.sq_off.array as usize + p.sq_entries as usize * size_of::<u32>();
        let cq_len = p.cq_off.cqes as usize + p.cq_entries as usize * size_of::<Cqe>();
        let (rings, cq_rings) = if p.features & IORING_FEAT_SINGLE_MMAP != 0 {
            (
                Mapping::new(raw, sq_len.max(cq_len), IORING_OFF_SQ_RING)?,
                None,
            )
        } else {
            (
                Mapping::new(raw, sq_len, IORING_OFF_SQ_RING)?,
                Some(Mapping::new(raw, cq_len, IORING_OFF_CQ_RING)?),
            )
        };
        let sqes = Mapping::new(
            raw,
            p.sq_entries as usize * size_of::<Sqe>(),
            IORING_OFF_SQES,
        )?;
        let mut ring = Ring {
            rings,
            cq_rings,
            sqes,
            fd,
            sq_mask: 0,
            cq_mask: 0,
            sq_off: p.sq_off,
            cq_off: p.cq_off,
            deferred,
        };
        // SAFETY: the masks are u32s at the kernel's offsets in the rings.
        unsafe {
            ring.sq_mask = *ring.rings.at::<u32>(ring.sq_off.ring_mask);
            ring.cq_mask = *ring.cq().at::<u32>(ring.cq_off.ring_mask);
        }
        Ok(ring)
    }

    /// The fd to watch: readable (an edge) when completions may be ready
    /// for [`Ring::reap`].
    pub(super) fn wake_fd(&self) -> RawFd {
        self.deferred.as_ref().unwrap_or(&self.fd).as_raw_fd()
    }

    fn cq(&self) -> &Mapping {
        self.cq_rings.as_ref().unwrap_or(&self.rings)
    }

    /// A u32 of the rings that the kernel reads or writes concurrently.
    ///
    /// # Safety
    ///
    /// `offset` is one of the kernel's offsets of a u32 field in `map`.
    unsafe fn shared(map: &Mapping, offset: u32) -> &AtomicU32 {
        // SAFETY: the caller's contract: an aligned u32 of the mapping,
        // which lives as long as `map`; the kernel accesses it atomically.
        unsafe { AtomicU32::from_ptr(map.at::<u32>(offset)) }
    }

    /// Submits `sqe` at once: the kernel makes the call before this
    /// returns, as far as it can without waiting (its completion may be
    /// queued already).
    pub(super) fn submit(&mut self, sqe: Sqe) -> io::Result<()> {
        // SAFETY: the offsets are the kernel's, of u32 fields.
        let (head, tail) = unsafe {
            (
                Ring::shared(&self.rings, self.sq_off.head),
                Ring::shared(&self.rings, self.sq_off.tail),
            )
        };
        let t = tail.load(Ordering::Relaxed); // (only we write it)
        // Every earlier entry was submitted by its own call, so there is
        // room; the kernel has consumed them all unless it failed to.
        if t.wrapping_sub(head.load(Ordering::Acquire)) > self.sq_mask {
            return Err(io::Error::from_raw_os_error(libc::EBUSY));
        }
        let idx = t & self.sq_mask;
        // SAFETY: slot `idx` of the SQE array and of the index array are
        // ours until the tail passes them (the kernel reads them only
        // after the release store below).
        unsafe {
            self.sqes.at::<Sqe>(0).add(idx as usize).write(sqe);
            self.rings
                .at::<u32>(self.sq_off.array)
                .add(idx as usize)
                .write(idx);
        }
        tail.store(t.wrapping_add(1), Ordering::Release);
        loop {
            match self.enter(1, 0) {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                // The overflow list is full (older kernels): flush it into
                // the queue by reaping, then the caller tries again.
                Err(e) => {
                    // Take the entry back: the kernel did not consume it.
                    if head.load(Ordering::Acquire) == t {
                        tail.store(t, Ordering::Release);
                    }
                    return Err(e);
                }
            }
        }
    }

    fn enter(&self, to_submit: usize, flags: usize) -> io::Result<usize> {
        // SAFETY: io_uring_enter on our ring, with no signal mask: it
        // reads the entries we published, and writes the rings' memory.
        let r = unsafe {
            syscall::syscall6(
                libc::SYS_io_uring_enter,
                self.fd.as_raw_fd() as usize,
                to_submit,
                0,
                flags,
                0,
                0,
            )
        };
        syscall::result(r)
    }

    /// Hands each queued completion to `f` (its `user_data`, its result),
    /// flushing the kernel's overflow list into the queue as it goes.
    /// `run_work`: first run the work the kernel deferred (the wake fd
    /// said there is some); else only what is queued already is read.
    pub(super) fn reap(&mut self, run_work: bool, mut f: impl FnMut(u64, i32)) {
        if run_work && self.deferred.is_some() {
            let _ = self.enter(0, IORING_ENTER_GETEVENTS);
        }
        loop {
            let cq = self.cq();
            // SAFETY: the offsets are the kernel's, of u32 fields.
            let (head, tail) = unsafe {
                (
                    Ring::shared(cq, self.cq_off.head),
                    Ring::shared(cq, self.cq_off.tail),
                )
            };
            let mut h = head.load(Ordering::Relaxed); // (only we write it)
            let t = tail.load(Ordering::Acquire);
            while h != t {
                // SAFETY: entries between head and tail are the kernel's
                // completions, published by its release of the tail.
                let cqe = unsafe {
                    self.cq()
                        .at::<Cqe>(self.cq_off.cqes)
                        .add((h & self.cq_mask) as usize)
                        .read()
                };
                f(cqe.user_data, cqe.res);
                h = h.wrapping_add(1);
            }
            head.store(h, Ordering::Release);
            // SAFETY: the SQ ring's flags are a u32 at the kernel's offset.
            let flags = unsafe { Ring::shared(&self.rings, self.sq_off.flags) };
            if flags.load(Ordering::Acquire) & IORING_SQ_CQ_OVERFLOW == 0 {
                return;
            }
            // Completions wait in the kernel's overflow list: the queue
            // has room now; this call moves them into it.
            if self.enter(0, IORING_ENTER_GETEVENTS).is_err() {
                return;
            }
        }
    }
}

/// `io_uring_setup` with `flags`: the ring's fd and the kernel's answer.
fn setup(flags: u32) -> io::Result<(OwnedFd, Params)> {
    let mut p = Params {
        cq_entries: CQ_ENTRIES,
        flags,
        ..Params::default()
    };
    // SAFETY: io_uring_setup reads and writes `p`, ours, of the size the
    // kernel expects (asserted above).
    let r = unsafe {
        syscall::syscall6(
            libc::SYS_io_uring_setup,
            SQ_ENTRIES as usize,
            &mut p as *mut Params as usize,
            0,
            0,
            0,
            0,
        )
    };
    let fd = syscall::result(r)? as RawFd;
    // SAFETY: a new fd the kernel just gave us; owned from here (it is
    // close-on-exec: io_uring fds always are).
    Ok((unsafe { OwnedFd::from_raw_fd(fd) }, p))
}

/// A new non-blocking, close-on-exec eventfd.
fn new_eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd returns a new fd we own, or -1 (checked).
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the new fd, owned from here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
