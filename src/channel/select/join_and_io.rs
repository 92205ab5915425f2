//! The operations a select waits on besides channels: a fiber finishing
//! (a [`JoinHandle`]) and an fd becoming ready ([`IoOp`]); and [`Handle`],
//! what a select keeps of each operation, whichever kind it is.

use std::io;
use std::os::fd::RawFd;

use crate::channel::context::Context;
use crate::channel::select::operation::{Erased, Registration, SelectHandle, Token};
use crate::fiber::JoinHandle;
use crate::io::Interest;
use crate::io::poll::{poll, pollfd, revents};

impl<T> SelectHandle for JoinHandle<T> {
    fn identity(&self) -> *const u8 {
        std::ptr::from_ref(self).cast()
    }

    fn try_op(&self, _me: *const Context) -> Option<Token> {
        self.is_finished().then_some(Token::Finished)
    }

    fn register(
        &self,
        _oper: usize,
        cx: &Context,
        _slot: &mut Option<Erased>,
    ) -> Registration<Token> {
        // The fiber wakes the wait when it finishes (a wake-up the select
        // checks); a waiter left behind after the select wakes nobody who
        // still waits (a spent token, or a spurious thread wake-up).
        if self.wake_when_finished(cx.unparker()) {
            Registration::Waiting
        } else {
            Registration::Ready
        }
    }

    fn unregister(&self, _oper: usize, _cx: &Context) {}

    fn accept(&self, _slot: Option<Erased>) -> Option<Token> {
        Some(Token::Finished)
    }

    fn abandon(&self, _token: Token) {}

    fn deadline(&self) -> Option<u64> {
        None
    }

    fn is_ready(&self) -> bool {
        self.is_finished()
    }

    fn watch(&self, oper: usize, cx: &Context) -> bool {
        matches!(self.register(oper, cx, &mut None), Registration::Waiting)
    }

    fn unwatch(&self, _oper: usize, _cx: &Context) {}

    fn wakes_only(&self) -> bool {
        true
    }
}

/// An operation's handle: a sender, receiver or join handle the select
/// borrows, or an fd readiness it holds.
#[derive(Clone, Copy)]
pub(crate) enum Handle<'a> {
    Borrowed(&'a dyn SelectHandle),
    Io(IoOp),
}

impl Handle<'_> {
    pub(crate) fn get(&self) -> &dyn SelectHandle {
        match self {
            Handle::Borrowed(h) => *h,
            Handle::Io(io) => io,
        }
    }
}

/// A readiness operation on an fd (added with `Select::io`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct IoOp {
    pub(crate) fd: RawFd,
    pub(crate) interest: Interest,
}

impl IoOp {
    /// The fd's readiness now, if any (or the error polling it gave).
    fn poll_now(&self) -> Option<io::Result<Interest>> {
        let mut pfd = [pollfd(self.fd, self.interest)];
        match poll(&mut pfd, 0) {
            Err(e) => Some(Err(e)),
            Ok(_) => revents(&pfd[0], self.interest),
        }
    }
}

impl SelectHandle for IoOp {
    fn identity(&self) -> *const u8 {
        std::ptr::null()
    }

    fn try_op(&self, _me: *const Context) -> Option<Token> {
        self.poll_now().map(Token::Io)
    }

    fn register(
        &self,
        _oper: usize,
        _cx: &Context,
        _slot: &mut Option<Erased>,
    ) -> Registration<Token> {
        // Armed by the select itself, with its other fds, just before it
        // parks (see `Select::run`).
        Registration::Waiting
    }

    fn unregister(&self, _oper: usize, _cx: &Context) {}

    fn accept(&self, _slot: Option<Erased>) -> Option<Token> {
        unreachable!("an fd is never chosen by a notifier")
    }

    fn abandon(&self, _token: Token) {}

    fn deadline(&self) -> Option<u64> {
        None
    }

    fn is_ready(&self) -> bool {
        self.poll_now().is_some()
    }

    fn watch(&self, _oper: usize, _cx: &Context) -> bool {
        !self.is_ready()
    }

    fn unwatch(&self, _oper: usize, _cx: &Context) {}

    fn fd(&self) -> Option<(RawFd, Interest)> {
        Some((self.fd, self.interest))
    }

    fn wakes_only(&self) -> bool {
        true
    }
}
