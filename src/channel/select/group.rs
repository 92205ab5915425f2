//! A group's next member finishing, as a select's operation
//! ([`Select::group`](super::Select::group), the `group(g)` arm of
//! `select!`). The group's side (taking a finished member, the waiters)
//! is `fiber/group/select.rs`; this is the face a select sees.
//!
//! Chosen, the operation holds the member it took out of the group's
//! queue, a [`Member`] in a `Token::Message` (the one token that carries
//! a value: `operation.rs` has no variant of its own for it), which
//! `SelectedOperation::group` joins; a dropped or unwound select puts the
//! member back ([`SelectHandle::abandon`]). A waiting select is woken by
//! the next member's exit, and looks again.

use crate::channel::context::Context;
use crate::channel::select::operation::{Erased, Registration, SelectHandle, Token};
use crate::fiber::Group;
use crate::scheduler::fiber_id::FiberId;

/// A finished member taken out of its group's queue for a select: the
/// value a chosen `group` operation's `Token::Message` holds.
pub(crate) struct Member(pub(crate) FiberId);

/// The token of a member [`Group::select_try`] took.
fn token(id: FiberId) -> Token {
    Token::Message(Erased::new(Member(id)))
}

/// The key of operation `oper` of the wait `cx` in the group's waiters.
fn key(oper: usize, cx: &Context) -> (usize, usize) {
    (std::ptr::from_ref(cx).addr(), oper)
}

impl<T> SelectHandle for Group<T> {
    fn identity(&self) -> *const u8 {
        self.select_identity()
    }

    fn try_op(&self, _me: *const Context) -> Option<Token> {
        self.select_try().map(token)
    }

    fn register(
        &self,
        oper: usize,
        cx: &Context,
        _slot: &mut Option<Erased>,
    ) -> Registration<Token> {
        // Woken by the next exit (a wake-up the select checks), and taken
        // out by `unregister` when another operation was chosen first.
        if self.select_watch(key(oper, cx), cx.unparker()) {
            Registration::Waiting
        } else {
            Registration::Ready
        }
    }

    fn unregister(&self, oper: usize, cx: &Context) {
        self.select_unwatch(key(oper, cx));
    }

    fn accept(&self, _slot: Option<Erased>) -> Option<Token> {
        // (Never chosen by a notifier: an exit only wakes the select.)
        self.select_try().map(token)
    }

    fn abandon(&self, token: Token) {
        if let Token::Message(member) = token {
            // SAFETY: a `Message` token of a group's operation is made by
            // `token` above, of a `Member`.
            let Member(id) = unsafe { member.into_value::<Member>() };
            self.select_abandon(id);
        }
    }

    fn deadline(&self) -> Option<u64> {
        None // (a group's deadline ends its members, whose exits wake)
    }

    fn is_ready(&self) -> bool {
        self.select_is_ready()
    }

    fn watch(&self, oper: usize, cx: &Context) -> bool {
        self.select_watch(key(oper, cx), cx.unparker())
    }

    fn unwatch(&self, oper: usize, cx: &Context) {
        self.select_unwatch(key(oper, cx));
    }

    fn wakes_only(&self) -> bool {
        true
    }
}
