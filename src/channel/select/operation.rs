//! The operations a [`Select`](super::Select) waits on, behind one face
//! ([`SelectHandle`]): a channel's send or receive, a fiber finishing (a
//! `JoinHandle`), an fd becoming ready. What a chosen operation hands the
//! user until it is completed is a [`Token`]. This file has the face and
//! the channels' side of it; `join_and_io.rs` the joins' and fds'.

use std::cell::UnsafeCell;
use std::io;
use std::mem::{MaybeUninit, align_of, size_of};
use std::os::fd::RawFd;

use std::sync::Arc;

use crate::channel::context::{Context, Kind};
use crate::channel::flavors::lockfree::{Claim, NoClaim};
pub(crate) use crate::channel::flavors::zero::Registration;
use crate::channel::flavors::zero::{Got, PromiseSlot, RecvSlot, SendGo};
use crate::channel::receiver::{Receiver, ReceiverFlavor};
use crate::channel::sender::{Sender, SenderFlavor};
use crate::io::Interest;

/// A value of some type, its type forgotten: a receive's slot, a send's
/// promise. Kept inline when it fits in four words (a select's wait on a
/// rendezvous channel then allocates nothing), boxed otherwise. A pointer
/// to it ([`Erased::ptr`]) is good until the `Erased` moves.
pub(crate) struct Erased {
    inline: MaybeUninit<[usize; 4]>,
    /// Null: the value is in `inline`.
    boxed: *mut (),
    /// Drops the value behind the pointer `ptr` gives.
    drop: unsafe fn(*mut ()),
}

impl Erased {
    pub(crate) fn new<T>(value: T) -> Erased {
        /// Drops the value in place.
        ///
        /// # Safety
        ///
        /// `ptr` points at a `T` in an `Erased`'s `inline`, dropped once.
        unsafe fn drop_inline<T>(ptr: *mut ()) {
            // SAFETY: the caller's contract.
            unsafe { ptr.cast::<T>().drop_in_place() };
        }
        /// Drops the box `ptr` came from.
        ///
        /// # Safety
        ///
        /// `ptr` is from `Box::<T>::into_raw`, dropped once.
        unsafe fn drop_box<T>(ptr: *mut ()) {
            // SAFETY: the caller's contract.
            drop(unsafe { Box::from_raw(ptr.cast::<T>()) });
        }
        let mut inline = MaybeUninit::<[usize; 4]>::uninit();
        if size_of::<T>() <= size_of::<[usize; 4]>() && align_of::<T>() <= align_of::<usize>() {
            // SAFETY: the buffer is large and aligned enough for a `T`
            // (checked above), and uninitialised: nothing is overwritten.
            unsafe { inline.as_mut_ptr().cast::<T>().write(value) };
            Erased {
                inline,
                boxed: std::ptr::null_mut(),
                drop: drop_inline::<T>,
            }
        } else {
            Erased {
                inline,
                boxed: Box::into_raw(Box::new(value)).cast(),
                drop: drop_box::<T>,
            }
        }
    }

    /// Where the value is (good until `self` moves).
    pub(crate) fn ptr(&mut self) -> *mut () {
        if self.boxed.is_null() {
            self.inline.as_mut_ptr().cast()
        } else {
            self.boxed
        }
    }

    /// The value back.
    ///
    /// # Safety
    ///
    /// `T` is the type it was made with.
    pub(crate) unsafe fn into_value<T>(self) -> T {
        let mut this = std::mem::ManuallyDrop::new(self);
        let ptr = this.ptr().cast::<T>();
        if this.boxed.is_null() {
            // SAFETY: the caller's contract: a `T` in `inline`, read once
            // (`this` is never dropped).
            unsafe { ptr.read() }
        } else {
            // SAFETY: the caller's contract: the box of a `T`, taken back
            // once (`this` is never dropped).
            *unsafe { Box::from_raw(ptr) }
        }
    }
}

impl Drop for Erased {
    fn drop(&mut self) {
        let ptr = self.ptr();
        // SAFETY: `drop` is the dropper made with the value's type and
        // where it is kept, and this is the one drop (`into_value` forgets
        // the `Erased`).
        unsafe { (self.drop)(ptr) };
    }
}

/// What a select holds for the operation it chose, until the user
/// completes it.
pub(crate) enum Token {
    /// A receive: the slot (`Box<RecvSlot<T>>`) with the message or its
    /// promise.
    Message(Erased),
    /// The channel is disconnected: the operation fails.
    Closed,
    /// A send: room is reserved for its message.
    Reserved,
    /// A slot of a ring claimed for the send or the receive.
    Claimed(Claim),
    /// A send on a channel of capacity 0, paired with a receiver: the slot
    /// (`Box<PromiseSlot<T>>`) with their promise.
    Promised(Erased),
    /// A joined fiber has finished: its result waits in its handle.
    Finished,
    /// An fd is ready (or polling it failed).
    Io(io::Result<Interest>),
}

/// A channel operation as a select sees it (implemented by [`Sender`] and
/// [`Receiver`]; the face other waits plug into).
pub(crate) trait SelectHandle {
    /// Completes the operation now if it can go ahead (`me`: the select's
    /// own registrations, skipped).
    fn try_op(&self, me: *const Context) -> Option<Token>;
    /// The channel (or handle) the operation is on: a selected operation
    /// is completed with any handle of the same identity (a clone of a
    /// sender, say). Null for `never` and fds.
    fn identity(&self) -> *const u8;
    /// Registers operation `oper` of the wait `cx`, with its slot (if it
    /// has one) made in `slot`, where it stays until it is unregistered,
    /// unless it can go ahead now (see [`Registration`]; `slot` is left
    /// empty then).
    fn register(&self, oper: usize, cx: &Context, slot: &mut Option<Erased>)
    -> Registration<Token>;
    /// Removes the registration (if still there).
    fn unregister(&self, oper: usize, cx: &Context);
    /// The token of a registration the wait was chosen for; `None` when
    /// being chosen only said to try again (a ring) and the try failed.
    fn accept(&self, slot: Option<Erased>) -> Option<Token>;
    /// Gives up what the registration was chosen for, without completing
    /// it (the select unwinds): back to the channel, or the turn to the
    /// next waiter.
    fn pass_on(&self, slot: Option<Erased>) {
        if let Some(token) = self.accept(slot) {
            self.abandon(token);
        }
    }
    /// Gives back what `token` holds: the operation will not be completed.
    fn abandon(&self, token: Token);
    /// When the operation becomes ready by itself (a timer).
    fn deadline(&self) -> Option<u64>;
    /// Whether the operation could go ahead now.
    fn is_ready(&self) -> bool;
    /// Registers a watcher of readiness; `false` if ready now.
    fn watch(&self, oper: usize, cx: &Context) -> bool;
    fn unwatch(&self, oper: usize, cx: &Context);
    /// The fd a readiness operation waits on (`None` for the others).
    fn fd(&self) -> Option<(RawFd, Interest)> {
        None
    }
    /// Whether the operation wakes its waiter without selecting it (a
    /// join, an fd: the select looks again at every wake-up).
    fn wakes_only(&self) -> bool {
        false
    }
}

impl<T> SelectHandle for Sender<T> {
    fn identity(&self) -> *const u8 {
        self.flavor.identity()
    }

    fn try_op(&self, me: *const Context) -> Option<Token> {
        let SenderFlavor::Zero(chan) = &self.flavor else {
            return match self.flavor.queue()?.start_send() {
                Ok(claim) => Some(Token::Claimed(claim)),
                Err(NoClaim::NotReady) => None,
                Err(NoClaim::Disconnected) => Some(Token::Closed),
            };
        };
        chan.select_send(me).map(send_token::<T>)
    }

    fn register(
        &self,
        oper: usize,
        cx: &Context,
        slot: &mut Option<Erased>,
    ) -> Registration<Token> {
        let SenderFlavor::Zero(chan) = &self.flavor else {
            let queue = self.flavor.queue().expect("a queue");
            return if queue.register(false, oper, cx, Kind::Notify) {
                Registration::Waiting
            } else {
                Registration::Ready
            };
        };
        // A rendezvous send gets a slot for the promise a receiver pairs it
        // by; a buffered one has room reserved for it, no slot.
        if chan.capacity() == Some(0) {
            let promise: PromiseSlot<T> = UnsafeCell::new(None);
            *slot = Some(Erased::new(promise));
        }
        let ptr = slot.as_mut().map_or(std::ptr::null_mut(), Erased::ptr);
        let registered = chan.register_send(oper, cx, ptr);
        if !matches!(registered, Registration::Waiting) {
            *slot = None; // not registered: nothing points at it
        }
        registered.map_done(send_token::<T>)
    }

    fn unregister(&self, oper: usize, cx: &Context) {
        match &self.flavor {
            SenderFlavor::Zero(chan) => chan.unregister(false, oper, cx),
            queue => queue.queue().expect("a queue").unregister(false, oper, cx),
        }
    }

    fn accept(&self, slot: Option<Erased>) -> Option<Token> {
        match (&self.flavor, slot) {
            // Told the ring has room: try for it (another may have been
            // faster).
            (SenderFlavor::Zero(_), Some(slot)) => Some(Token::Promised(slot)),
            (SenderFlavor::Zero(_), None) => Some(Token::Reserved),
            _ => self.try_op(std::ptr::null()),
        }
    }

    fn pass_on(&self, slot: Option<Erased>) {
        match &self.flavor {
            SenderFlavor::Zero(_) => {
                if let Some(token) = self.accept(slot) {
                    self.abandon(token);
                }
            }
            queue => queue.queue().expect("a queue").pass_on(false),
        }
    }

    fn abandon(&self, token: Token) {
        match (token, &self.flavor) {
            (Token::Reserved, SenderFlavor::Zero(chan)) => chan.release_reserved(),
            (Token::Claimed(claim), flavor) => {
                let queue = flavor.queue().expect("only queues claim");
                // SAFETY: the claim was made by this sender's queue
                // (`try_op`) and not completed: the token held it.
                unsafe { queue.write_hole(claim) };
            }
            (Token::Promised(slot), _) => {
                // SAFETY: a promise slot of this sender's `T` (made above).
                let slot = unsafe { slot.into_value::<PromiseSlot<T>>() };
                if let Some(promise) = slot.into_inner() {
                    promise.break_off();
                }
            }
            _ => {}
        }
    }

    fn deadline(&self) -> Option<u64> {
        None
    }

    fn is_ready(&self) -> bool {
        match &self.flavor {
            SenderFlavor::Zero(chan) => chan.is_ready(false),
            queue => queue.queue().expect("a queue").side_ready(false),
        }
    }

    fn watch(&self, oper: usize, cx: &Context) -> bool {
        match &self.flavor {
            SenderFlavor::Zero(chan) => chan.watch(false, oper, cx),
            queue => queue
                .queue()
                .expect("a queue")
                .register(false, oper, cx, Kind::Watch),
        }
    }

    fn unwatch(&self, oper: usize, cx: &Context) {
        self.unregister(oper, cx);
    }
}

/// What a `select`'s send on a locked channel was given, as a token.
fn send_token<T>(go: Result<SendGo<T>, ()>) -> Token {
    match go {
        Ok(SendGo::Reserved) => Token::Reserved,
        Ok(SendGo::Promised(promise)) => {
            let slot: PromiseSlot<T> = UnsafeCell::new(Some(promise));
            Token::Promised(Erased::new(slot))
        }
        Err(()) => Token::Closed,
    }
}

/// What a `select`'s receive on a locked channel got, as a token.
fn recv_token<T>(got: Result<Got<T>, ()>) -> Token {
    match got {
        Ok(got) => message_token(got),
        Err(()) => Token::Closed,
    }
}

/// A slot holding what a receive got, as a token.
fn message_token<T>(got: Got<T>) -> Token {
    let slot: RecvSlot<T> = UnsafeCell::new(Some(got));
    Token::Message(Erased::new(slot))
}

impl<T> SelectHandle for Receiver<T> {
    fn identity(&self) -> *const u8 {
        match &self.flavor {
            ReceiverFlavor::Zero(chan) => Arc::as_ptr(chan).cast(),
            ReceiverFlavor::Array(_) | ReceiverFlavor::List(_) => {
                self.flavor.queue().expect("a queue").identity()
            }
            ReceiverFlavor::At(at, _) => Arc::as_ptr(at).cast(),
            ReceiverFlavor::Tick(tick, _) => Arc::as_ptr(tick).cast(),
            ReceiverFlavor::Never => std::ptr::null(),
        }
    }

    fn try_op(&self, me: *const Context) -> Option<Token> {
        match &self.flavor {
            ReceiverFlavor::Zero(chan) => chan.select_recv(me).map(recv_token),
            ReceiverFlavor::Array(_) | ReceiverFlavor::List(_) => {
                let queue = self.flavor.queue().expect("a queue");
                loop {
                    if let Some(m) = queue.take_returned() {
                        return Some(message_token(Got::Message(m)));
                    }
                    match queue.start_recv() {
                        Ok(claim) => return Some(Token::Claimed(claim)),
                        Err(NoClaim::NotReady) => return None,
                        // Over, unless a message was given back meanwhile.
                        Err(NoClaim::Disconnected) if !queue.tell_over() => {}
                        Err(NoClaim::Disconnected) => return Some(Token::Closed),
                    }
                }
            }
            _ => self.try_recv().ok().map(|m| message_token(Got::Message(m))),
        }
    }

    fn register(
        &self,
        oper: usize,
        cx: &Context,
        slot: &mut Option<Erased>,
    ) -> Registration<Token> {
        match &self.flavor {
            ReceiverFlavor::Zero(chan) => {
                let empty: RecvSlot<T> = UnsafeCell::new(None);
                let ptr = slot.insert(Erased::new(empty)).ptr();
                let registered = chan.register_recv(oper, cx, ptr);
                if !matches!(registered, Registration::Waiting) {
                    *slot = None; // not registered: nothing points at it
                }
                registered.map_done(recv_token)
            }
            ReceiverFlavor::Array(_) | ReceiverFlavor::List(_) => {
                let queue = self.flavor.queue().expect("a queue");
                if queue.register(true, oper, cx, Kind::Notify) {
                    Registration::Waiting
                } else {
                    Registration::Ready
                }
            }
            // Timers wake the select by its deadline; `never` never does.
            _ if self.is_ready() => Registration::Ready,
            _ => Registration::Waiting,
        }
    }

    fn unregister(&self, oper: usize, cx: &Context) {
        match &self.flavor {
            ReceiverFlavor::Zero(chan) => chan.unregister(true, oper, cx),
            ReceiverFlavor::Array(_) | ReceiverFlavor::List(_) => {
                let queue = self.flavor.queue().expect("a queue");
                queue.unregister(true, oper, cx);
            }
            _ => {}
        }
    }

    fn accept(&self, slot: Option<Erased>) -> Option<Token> {
        match &self.flavor {
            // Told the ring has a message: try for it.
            ReceiverFlavor::Array(_) | ReceiverFlavor::List(_) => self.try_op(std::ptr::null()),
            _ => Some(Token::Message(slot.expect("a chosen receive has its slot"))),
        }
    }

    fn pass_on(&self, slot: Option<Erased>) {
        match &self.flavor {
            ReceiverFlavor::Array(_) | ReceiverFlavor::List(_) => {
                self.flavor.queue().expect("a queue").pass_on(true);
            }
            _ => {
                if let Some(token) = self.accept(slot) {
                    self.abandon(token);
                }
            }
        }
    }

    fn abandon(&self, token: Token) {
        match token {
            Token::Claimed(claim) => {
                if let Some(queue) = self.flavor.queue() {
                    // SAFETY: the claim was made by this receiver's queue
                    // (`try_op`) and not completed: the token held it.
                    let message = unsafe { queue.read(claim) };
                    // Every receiver gone: the message goes down.
                    let _ = queue.give_back(message);
                }
            }
            Token::Message(slot) => {
                // SAFETY: a receive's slot of this receiver's `T`.
                let slot = unsafe { slot.into_value::<RecvSlot<T>>() };
                if let Some(got) = slot.into_inner() {
                    match &self.flavor {
                        ReceiverFlavor::Zero(chan) => got.give_back(chan),
                        ReceiverFlavor::Array(_) | ReceiverFlavor::List(_) => {
                            if let (Got::Message(m), Some(queue)) = (got, self.flavor.queue()) {
                                let _ = queue.give_back(m);
                            }
                        }
                        ReceiverFlavor::At(at, _) => {
                            drop(got);
                            at.undeliver();
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }

    fn deadline(&self) -> Option<u64> {
        match &self.flavor {
            ReceiverFlavor::At(at, _) => at.due(),
            ReceiverFlavor::Tick(tick, _) => Some(tick.due()),
            _ => None,
        }
    }

    fn is_ready(&self) -> bool {
        match &self.flavor {
            ReceiverFlavor::Zero(chan) => chan.is_ready(true),
            ReceiverFlavor::Array(_) | ReceiverFlavor::List(_) => {
                self.flavor.queue().expect("a queue").side_ready(true)
            }
            ReceiverFlavor::Never => false,
            _ => !self.is_empty(),
        }
    }

    fn watch(&self, oper: usize, cx: &Context) -> bool {
        match &self.flavor {
            ReceiverFlavor::Zero(chan) => chan.watch(true, oper, cx),
            ReceiverFlavor::Array(_) | ReceiverFlavor::List(_) => {
                let queue = self.flavor.queue().expect("a queue");
                queue.register(true, oper, cx, Kind::Watch)
            }
            _ => !self.is_ready(),
        }
    }

    fn unwatch(&self, oper: usize, cx: &Context) {
        self.unregister(oper, cx);
    }
}
