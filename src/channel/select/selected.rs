//! [`SelectedOperation`]: the operation a [`Select`](super::Select) chose,
//! until the user completes it.

use std::fmt;
use std::io;
use std::marker::PhantomData;

use crate::channel::err::{RecvError, SendError};
use crate::channel::flavors::zero::{PromiseSlot, RecvSlot};
use crate::channel::receiver::Receiver;
use crate::channel::select::group::Member;
use crate::channel::select::join_and_io::Handle;
use crate::channel::select::operation::{SelectHandle, Token};
use crate::channel::sender::{Sender, SenderFlavor};
use crate::fiber::{Group, JoinError, JoinHandle};
use crate::io::Interest;

/// The operation a [`Select`](super::Select) chose, to be completed with
/// [`send`](SelectedOperation::send) or [`recv`](SelectedOperation::recv)
/// (with the sender or receiver it was added with).
///
/// # Panics
///
/// Dropping it without completing the operation panics (what it was handed
/// is given back first: a message to its channel, reserved room to the next
/// sender).
#[must_use = "a selected operation must be completed with `send` or `recv`"]
pub struct SelectedOperation<'a> {
    index: usize,
    ptr: *const u8,
    handle: Handle<'a>,
    token: Option<Token>,
    _not_send: PhantomData<*const ()>,
}

impl<'a> SelectedOperation<'a> {
    pub(crate) fn new(
        index: usize,
        ptr: *const u8,
        handle: Handle<'a>,
        token: Token,
    ) -> SelectedOperation<'a> {
        SelectedOperation {
            index,
            ptr,
            handle,
            token: Some(token),
            _not_send: PhantomData,
        }
    }

    /// The index the operation was added with.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Completes the chosen send with `msg`.
    ///
    /// # Errors
    ///
    /// When every receiver is gone, with the message.
    ///
    /// # Panics
    ///
    /// If `s` is not a sender of the channel the chosen send is on.
    pub fn send<T>(mut self, s: &Sender<T>, msg: T) -> Result<(), SendError<T>> {
        assert!(
            std::ptr::eq(s.identity(), self.ptr),
            "passed a sender that wasn't selected",
        );
        match self.token.take().expect("not completed yet") {
            Token::Reserved => match &s.flavor {
                SenderFlavor::Zero(chan) => chan.send_reserved(msg).map_err(SendError),
                _ => unreachable!("a queue reserves by claiming"),
            },
            Token::Claimed(claim) => {
                let ring = s.flavor.queue().expect("only queues claim");
                // SAFETY: the claim was made for a send by `s`'s ring (the
                // identity check above: the same `Arc`) and is completed
                // once: the token is taken.
                unsafe { ring.write(claim, msg) };
                Ok(())
            }
            Token::Promised(slot) => {
                // SAFETY: the slot was made for a send on `s`'s channel (the
                // identity check above: the same `Arc`, so the same `T`), a
                // `PromiseSlot<T>`.
                let slot = unsafe { slot.into_value::<PromiseSlot<T>>() };
                let promise = slot.into_inner().expect("a paired send's promise");
                let SenderFlavor::Zero(chan) = &s.flavor else {
                    unreachable!("only the locked channel pairs")
                };
                promise.keep(chan, msg).map_err(SendError)
            }
            Token::Closed => Err(SendError(msg)),
            other => {
                // A receive on the same channel was chosen: keep it for the
                // drop, which gives it back.
                self.token = Some(other);
                panic!("passed a sender that wasn't selected")
            }
        }
    }

    /// Completes the chosen receive.
    ///
    /// # Errors
    ///
    /// When the channel is empty and disconnected.
    ///
    /// # Panics
    ///
    /// If `r` is not a receiver of the channel the chosen receive is on.
    pub fn recv<T>(mut self, r: &Receiver<T>) -> Result<T, RecvError> {
        assert!(
            std::ptr::eq(r.identity(), self.ptr),
            "passed a receiver that wasn't selected",
        );
        match self.token.take().expect("not completed yet") {
            Token::Claimed(claim) => {
                let ring = r.flavor.queue().expect("only queues claim");
                // SAFETY: the claim was made for a receive by `r`'s ring
                // (the identity check above: the same `Arc`) and is
                // completed once: the token is taken.
                Ok(unsafe { ring.read(claim) })
            }
            Token::Message(slot) => {
                // SAFETY: the slot was made for a receive on `r`'s channel
                // (the identity check above: the same `Arc`, so the same
                // `T`), a `RecvSlot<T>`.
                let slot = unsafe { slot.into_value::<RecvSlot<T>>() };
                let got = slot.into_inner().expect("a chosen receive's message");
                r.settle(got)
            }
            Token::Closed => Err(RecvError),
            other => {
                // A send on the same channel was chosen: keep it for the
                // drop, which gives it back.
                self.token = Some(other);
                panic!("passed a receiver that wasn't selected")
            }
        }
    }

    /// Completes the chosen join: the fiber's result, taken out of `h`
    /// (which must not be joined again).
    ///
    /// # Errors
    ///
    /// As [`JoinHandle::join`]: the fiber panicked or was cancelled.
    ///
    /// # Panics
    ///
    /// If `h` is not the handle the operation was added with.
    pub fn join<T>(mut self, h: &JoinHandle<T>) -> Result<T, JoinError> {
        assert!(
            std::ptr::eq(h.identity(), self.ptr),
            "passed a join handle that wasn't selected",
        );
        assert!(
            matches!(self.token, Some(Token::Finished)),
            "passed a join handle that wasn't selected",
        );
        self.token = None;
        h.take_finished()
    }

    /// Completes the chosen operation of `group`: the result of the
    /// member that finished, which leaves the group (as with
    /// [`Group::join_next`]).
    ///
    /// # Errors
    ///
    /// The member's: a [`JoinError`] if it panicked or was cancelled.
    ///
    /// # Panics
    ///
    /// If `group` is not the group the operation was added with.
    ///
    /// ```
    /// use fibra::channel::Select;
    ///
    /// fibra::run(|| {
    ///     let group = fibra::Group::new();
    ///     group.spawn(|| 7);
    ///     group.spawn(|| panic!("boom"));
    ///     let (mut values, mut panics) = (0, 0);
    ///     while !group.is_empty() {
    ///         let mut sel = Select::new();
    ///         sel.group(&group);
    ///         match sel.select().group(&group) {
    ///             Ok(v) => values += v,
    ///             Err(e) => panics += usize::from(e.is_panic()),
    ///         }
    ///     }
    ///     assert_eq!((values, panics), (7, 1));
    /// });
    /// ```
    pub fn group<T>(mut self, group: &Group<T>) -> Result<T, JoinError> {
        assert!(
            std::ptr::eq(group.select_identity(), self.ptr),
            "passed a group that wasn't selected",
        );
        match self.token.take() {
            Some(Token::Message(member)) => {
                // SAFETY: the operation is `group`'s (the identity check
                // above), whose `Message` tokens hold a `Member`
                // (`group.rs`).
                let Member(id) = unsafe { member.into_value::<Member>() };
                group.select_complete(id)
            }
            other => {
                self.token = other;
                panic!("passed a group that wasn't selected")
            }
        }
    }

    /// Completes the chosen fd readiness: what the fd is ready for.
    ///
    /// # Errors
    ///
    /// Polling the fd failed (`InvalidInput` for an fd that is not open).
    ///
    /// # Panics
    ///
    /// If the chosen operation is not an fd's.
    pub fn io(mut self) -> io::Result<Interest> {
        match self.token.take() {
            Some(Token::Io(ready)) => ready,
            other => {
                self.token = other;
                panic!("the selected operation is not an fd's readiness")
            }
        }
    }
}

impl Drop for SelectedOperation<'_> {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            self.handle.get().abandon(token);
            if !std::thread::panicking() {
                panic!("dropped `SelectedOperation` without completing the operation");
            }
        }
    }
}

impl fmt::Debug for SelectedOperation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("SelectedOperation { .. }")
    }
}
