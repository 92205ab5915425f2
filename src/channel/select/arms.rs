//! What each arm of [`select!`](crate::select) accepts, as traits the
//! macro checks the user's argument against — in code it never runs, so
//! that a wrong argument's error points at that argument (an error on
//! code the macro wrote would cover the whole `select!`). Each accepts a
//! value or anything that dereferences to one (`&r`, `&&r`, `Arc<r>`), as
//! the arm itself does (it borrows what it is given). Not for use
//! elsewhere.
//!
//! The `io(fd, ..)` arm has no such check: what it takes is "`AsRawFd`,
//! or a reference to one", and a trait for that cannot be written (a
//! downstream crate may implement `AsRawFd` for a reference to its own
//! type, so the two impls would overlap); its error names the type and
//! covers the macro.

use std::ops::Deref;

use crate::channel::{Receiver, Sender};
use crate::fiber::{Group, JoinHandle};

/// What a `recv(r)` arm waits on.
#[diagnostic::on_unimplemented(
    message = "a `recv` arm of `select!` cannot wait on `{Self}`",
    label = "not a receiver",
    note = "`recv(r)` takes a `fibra::channel::Receiver`, a `sync::mpsc` or `sync::oneshot` \
            `Receiver`, or a reference to one"
)]
pub trait RecvArm {}

impl<T> RecvArm for Receiver<T> {}
impl<P: Deref> RecvArm for P where P::Target: RecvArm {}

/// What a `send(s, v)` arm sends on.
#[diagnostic::on_unimplemented(
    message = "a `send` arm of `select!` cannot send on `{Self}`",
    label = "not a sender",
    note = "`send(s, v)` takes a `fibra::channel::Sender`, or a reference to one"
)]
pub trait SendArm {}

impl<T> SendArm for Sender<T> {}
impl<P: Deref> SendArm for P where P::Target: SendArm {}

/// What a `join(h)` arm waits for.
#[diagnostic::on_unimplemented(
    message = "a `join` arm of `select!` cannot wait for `{Self}`",
    label = "not a join handle",
    note = "`join(h)` takes a `fibra::JoinHandle`, or a reference to one"
)]
pub trait JoinArm {}

impl<T> JoinArm for JoinHandle<T> {}
impl<P: Deref> JoinArm for P where P::Target: JoinArm {}

/// What a `group(g)` arm waits for.
#[diagnostic::on_unimplemented(
    message = "a `group` arm of `select!` cannot wait for `{Self}`",
    label = "not a group",
    note = "`group(g)` takes a `fibra::Group`, or a reference to one"
)]
pub trait GroupArm {}

impl<T> GroupArm for Group<T> {}
impl<P: Deref> GroupArm for P where P::Target: GroupArm {}

/// The checks the macro calls where nothing runs them.
pub fn recv<A: RecvArm>(_: A) {}
/// As [`recv`].
pub fn send<A: SendArm>(_: A) {}
/// As [`recv`].
pub fn join<A: JoinArm>(_: A) {}
/// As [`recv`].
pub fn group<A: GroupArm>(_: A) {}
