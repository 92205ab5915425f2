//! What each arm of [`select!`](crate::select) takes, checked at the arm:
//! `recv(r)`, `send(s, ..)`, `join(h)`, `group(g)` and `io(fd, ..)` each
//! call the method of their own name on an [`Arm`], whose bounds say what
//! the arm accepts. The method's name is the arm's own token, so the error
//! for an arm given the wrong thing marks that arm ("required by a bound
//! introduced by this call", at `recv` in `recv(5) -> ..`), and says in
//! words what the arm takes and what it got (the traits'
//! `on_unimplemented`). (It cannot mark the argument itself: a use of the
//! argument by value would move it into a closure the select is in, and
//! `&$arg` takes the macro's span.)

use std::marker::PhantomData;
use std::ops::Deref;
use std::os::fd::{AsRawFd, RawFd};

use crate::channel::receiver::{Receiver, SelectRecv};
use crate::channel::sender::Sender;
use crate::fiber::{Group, JoinHandle};

/// An arm's argument, borrowed: `select!` calls the method named as the
/// arm (`recv`, `send`, `join`, `group`, `io`) to get the handle the arm
/// waits on. Not for use elsewhere.
#[doc(hidden)]
pub struct Arm<'a, A: ?Sized>(pub &'a A);

impl<'a, A: ?Sized> Arm<'a, A> {
    /// A `recv(r)` arm's receiver: a channel receiver, or a face of one
    /// (mpsc, oneshot), or anything that derefs to one.
    #[inline]
    pub fn recv<T>(self) -> &'a Receiver<T>
    where
        A: SelectRecv<T>,
    {
        self.0.select_receiver()
    }

    /// A `send(s, ..)` arm's sender (or anything that derefs to one).
    #[inline]
    pub fn send<T>(self) -> &'a Sender<T>
    where
        A: SelectArg<Sender<T>>,
    {
        self.0.select_arg()
    }

    /// A `join(h)` arm's join handle (or anything that derefs to one).
    #[inline]
    pub fn join<T>(self) -> &'a JoinHandle<T>
    where
        A: SelectArg<JoinHandle<T>>,
    {
        self.0.select_arg()
    }

    /// A `group(g)` arm's group (or anything that derefs to one).
    #[inline]
    pub fn group<T>(self) -> &'a Group<T>
    where
        A: SelectArg<Group<T>>,
    {
        self.0.select_arg()
    }

    /// An `io(fd, ..)` arm's fd: anything with a raw fd.
    #[inline]
    pub fn io<Via>(self) -> RawFd
    where
        A: SelectFd<Via>,
    {
        self.0.select_fd()
    }
}

/// A `send`, `join` or `group` arm's argument: `H` itself, or anything
/// that derefs to it. Not for use elsewhere.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a `send`, `join` or `group` arm of `select!` takes a `{H}`, not `{Self}`",
    label = "an arm of this `select!` takes a `{Self}`",
    note = "a `send` arm takes a `fibra::channel::Sender`, `join` a `JoinHandle`, `group` a `Group`, or anything that derefs to one"
)]
pub trait SelectArg<H: ?Sized> {
    /// The handle the arm waits on.
    fn select_arg(&self) -> &H;
}

impl<T> SelectArg<Sender<T>> for Sender<T> {
    fn select_arg(&self) -> &Sender<T> {
        self
    }
}

impl<T> SelectArg<JoinHandle<T>> for JoinHandle<T> {
    fn select_arg(&self) -> &JoinHandle<T> {
        self
    }
}

impl<T> SelectArg<Group<T>> for Group<T> {
    fn select_arg(&self) -> &Group<T> {
        self
    }
}

// Whatever derefs to an argument is one (a reference, `Box`, `Rc`, `Arc`,
// a user's wrapper), as deref coercion and method calls reach through
// them: crossbeam's own `select!` tests wrap a receiver in a type of their
// own. (These do not overlap the impls above: `Sender`, `JoinHandle`,
// `Group`, `Receiver` and its faces are this crate's, and none derefs.)

impl<H: ?Sized, P: Deref + ?Sized> SelectArg<H> for P
where
    P::Target: SelectArg<H>,
{
    fn select_arg(&self) -> &H {
        (**self).select_arg()
    }
}

impl<T, P: Deref + ?Sized> SelectRecv<T> for P
where
    P::Target: SelectRecv<T>,
{
    fn select_receiver(&self) -> &Receiver<T> {
        (**self).select_receiver()
    }
}

/// What an `io(fd, interest)` arm of [`select!`](crate::select) takes:
/// anything with a raw fd, through references too (`io(&s, ..)` is `io(s,
/// ..)`; std's `AsRawFd` reaches through `Box`, `Rc` and `Arc` itself).
/// `Via` says how: [`Direct`], or [`Through`] a reference. (A blanket impl
/// for `&U` beside the one for every `AsRawFd` would overlap, as far as
/// the compiler knows; one per `Via` does not.) Not for use elsewhere.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`io(..)` in `select!` takes something with a raw fd, not `{Self}`",
    label = "an arm of this `select!` takes a `{Self}`",
    note = "an `io` arm takes anything that implements `AsRawFd` (a socket, a `ReadyFd`, an `EventFd`, ...), or a reference to one"
)]
pub trait SelectFd<Via = Direct> {
    /// The fd to wait on.
    fn select_fd(&self) -> RawFd;
}

/// [`SelectFd`]'s `Via` for a type with a raw fd of its own.
#[doc(hidden)]
pub struct Direct;

/// [`SelectFd`]'s `Via` for a reference to what reaches a raw fd `Via`.
#[doc(hidden)]
pub struct Through<Via>(PhantomData<Via>);

impl<T: AsRawFd + ?Sized> SelectFd<Direct> for T {
    fn select_fd(&self) -> RawFd {
        self.as_raw_fd()
    }
}

impl<V, U: SelectFd<V> + ?Sized> SelectFd<Through<V>> for &U {
    fn select_fd(&self) -> RawFd {
        (**self).select_fd()
    }
}

impl<V, U: SelectFd<V> + ?Sized> SelectFd<Through<V>> for &mut U {
    fn select_fd(&self) -> RawFd {
        (**self).select_fd()
    }
}
