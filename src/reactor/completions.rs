//! Calls the kernel completes for us: a `connect` or an `accept` made
//! through the reactor's io_uring (`uring.rs`), each an *op* with the
//! token of the fiber that waits for it and, once the kernel is done, its
//! result.
//!
//! The ring is made on first use, and its fd joins the epoll set (token
//! [`RING`]): a poll that finds it readable reaps the completions and wakes
//! their fibers. A fiber that submits may also reap at once (the kernel
//! often completes the call within the submission), which wakes the other
//! fibers whose completions it found.
//!
//! An op names memory of its caller's (the address, for the kernel to read
//! or write), so it must not be forgotten before its completion comes:
//! whoever submits one waits for it, after a cancellation too (see
//! `scheduler::completion`).

#![cfg_attr(not(feature = "hook"), allow(dead_code))] // (only the hook submits)

use std::io;

use mio::unix::SourceFd;

use super::Reactor;
use super::token::WakeToken;
use super::uring::{IORING_OP_ACCEPT, IORING_OP_ASYNC_CANCEL, IORING_OP_CONNECT, Ring, Sqe};

/// The mio token of the ring's wake fd (see `uring.rs`).
pub(super) const RING: mio::Token = mio::Token(usize::MAX - 3);

/// The `user_data` of a cancellation's own completion, which nobody waits
/// for (an op's is its slot, below 2^32).
const CANCEL: u64 = u64::MAX;

/// The ring, once made (or why it could not be).
#[derive(Default)]
pub(crate) struct Completions {
    ring: Option<Result<Ring, io::ErrorKind>>,
    /// The ops by slot; `None`: a free slot, listed in `free`.
    ops: Vec<Option<Op>>,
    free: Vec<usize>,
}

struct Op {
    token: Option<WakeToken>,
    result: Option<i32>,
}

/// An op in flight: its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OpKey(usize);

impl Completions {
    /// Whether an op waits for its completion.
    pub(super) fn in_flight(&self) -> bool {
        self.ops.len() > self.free.len()
    }

    /// The slot the next op takes.
    fn vacant(&self) -> usize {
        self.free.last().copied().unwrap_or(self.ops.len())
    }

    fn insert(&mut self, op: Op) -> usize {
        match self.free.pop() {
            Some(key) => {
                self.ops[key] = Some(op);
                key
            }
            None => {
                self.ops.push(Some(op));
                self.ops.len() - 1
            }
        }
    }

    fn op(&mut self, key: OpKey) -> &mut Op {
        self.ops[key.0].as_mut().expect("an op in flight")
    }
}

impl Reactor {
    /// The ring, made on first use and added to the epoll set; the error
    /// once it cannot be (then the caller uses a thread instead).
    fn ring(&mut self) -> io::Result<&mut Ring> {
        if self.completions.ring.is_none() {
            let refused = std::env::var_os("FIBRA_NO_IO_URING").is_some_and(|v| v != "0");
            let made = if refused {
                Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "FIBRA_NO_IO_URING is set",
                ))
            } else {
                Ring::new()
            };
            let made = made.and_then(|ring| {
                self.poll.registry().register(
                    &mut SourceFd(&ring.wake_fd()),
                    RING,
                    mio::Interest::READABLE,
                )?;
                Ok(ring)
            });
            if let Err(e) = &made {
                tracing::debug!(
                    error = %e,
                    "io_uring unavailable: hooked connects and accepts wait on the blocking pool"
                );
            }
            self.completions.ring = Some(made.map_err(|e| e.kind()));
        }
        match self.completions.ring.as_mut() {
            Some(Ok(ring)) => Ok(ring),
            Some(Err(kind)) => Err(io::Error::from(*kind)),
            None => unreachable!("made above"),
        }
    }

    /// Submits `connect(fd, addr, len)`, for `token`'s fiber to wait on.
    ///
    /// # Safety
    ///
    /// `addr` is valid for `len` bytes (or the kernel's EFAULT is what the
    /// caller wants) until the op's completion comes.
    pub(crate) unsafe fn submit_connect(
        &mut self,
        fd: i32,
        addr: *const libc::sockaddr,
        len: libc::socklen_t,
        token: WakeToken,
    ) -> io::Result<OpKey> {
        let sqe = Sqe {
            opcode: IORING_OP_CONNECT,
            fd,
            addr: addr as u64,
            off: u64::from(len),
            ..Sqe::default()
        };
        self.submit_op(sqe, token)
    }

    /// Submits `accept4(fd, addr, len, flags)`, for `token`'s fiber.
    ///
    /// # Safety
    ///
    /// `addr` and `len` are null or valid for accept4(2) until the op's
    /// completion comes.
    pub(crate) unsafe fn submit_accept(
        &mut self,
        fd: i32,
        addr: *mut libc::sockaddr,
        len: *mut libc::socklen_t,
        flags: i32,
        token: WakeToken,
    ) -> io::Result<OpKey> {
        let sqe = Sqe {
            opcode: IORING_OP_ACCEPT,
            fd,
            addr: addr as u64,
            off: len as u64,
            op_flags: flags as u32,
            ..Sqe::default()
        };
        self.submit_op(sqe, token)
    }

    fn submit_op(&mut self, mut sqe: Sqe, token: WakeToken) -> io::Result<OpKey> {
        let key = self.completions.vacant();
        sqe.user_data = key as u64;
        let mut submitted = self.ring()?.submit(sqe);
        if submitted.is_err() {
            // A full overflow list (older kernels say EBUSY): reaping
            // empties it; then once more.
            self.reap(true, &mut Vec::new());
            submitted = self.ring()?.submit(sqe);
        }
        submitted?;
        let inserted = self.completions.insert(Op {
            token: Some(token),
            result: None,
        });
        debug_assert_eq!(inserted, key);
        Ok(OpKey(key))
    }

    /// Asks the kernel to end op `key` early: its completion comes soon,
    /// with `-ECANCELED` if the call had not finished.
    pub(crate) fn cancel_op(&mut self, key: OpKey) {
        if self.op_result(key).is_some() {
            return;
        }
        let sqe = Sqe {
            opcode: IORING_OP_ASYNC_CANCEL,
            fd: -1,
            addr: key.0 as u64,
            user_data: CANCEL,
            ..Sqe::default()
        };
        if let Ok(ring) = self.ring() {
            let _ = ring.submit(sqe);
        }
    }

    /// Op `key`'s result (a non-negative answer, or `-errno`), once its
    /// completion came.
    pub(crate) fn op_result(&self, key: OpKey) -> Option<i32> {
        self.completions.ops[key.0]
            .as_ref()
            .and_then(|op| op.result)
    }

    /// Makes `token` the one op `key`'s completion wakes.
    pub(crate) fn retoken_op(&mut self, key: OpKey, token: WakeToken) {
        self.completions.op(key).token = Some(token);
    }

    /// Forgets op `key`, whose completion came.
    pub(crate) fn release_op(&mut self, key: OpKey) {
        let op = self.completions.ops[key.0].take();
        debug_assert!(
            op.is_some_and(|op| op.result.is_some()),
            "an op released before its completion"
        );
        self.completions.free.push(key.0);
    }

    /// Reads the queued completions: records each op's result and pushes
    /// the token of its fiber onto `wake`. `run_work`: the ring's wake fd
    /// said the kernel has work for us first (see `uring.rs`).
    pub(crate) fn reap(&mut self, run_work: bool, wake: &mut Vec<WakeToken>) {
        let Some(Ok(ring)) = self.completions.ring.as_mut() else {
            return;
        };
        let ops = &mut self.completions.ops;
        ring.reap(run_work, |user_data, res| {
            if user_data == CANCEL {
                return;
            }
            if let Some(Some(op)) = ops.get_mut(user_data as usize) {
                op.result = Some(res);
                wake.extend(op.token.take());
            }
        });
    }
}
