//! [`Select`]: wait on several channel operations, complete exactly one.
//!
//! A select first tries its operations (in a random order, or in order for
//! a biased one) and completes the first that can go ahead. If none can,
//! it makes one [`Context`], registers every operation with its channel
//! (a receive with a slot for the message, a send as a `Lazy` entry that
//! room is reserved for when chosen), and parks until a notifier chooses
//! one operation, the earliest deadline (its own, or an `after`/`tick`
//! operation's) passes, or a channel disconnects; then it unregisters the
//! rest. A chosen receive has its message in its slot; a chosen send has
//! room reserved, which [`SelectedOperation::send`] uses. What a select
//! was handed but cannot use (it unwound, or the `SelectedOperation` was
//! dropped) goes back: a message to the channel, room to the next sender.

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use crate::channel::chan::Slot;
use crate::channel::context::{Context, OnUnwind, Selected, wait};
use crate::channel::err::{
    ReadyTimeoutError, RecvError, SelectTimeoutError, SendError, TryReadyError, TrySelectError,
};
use crate::channel::receiver::{Flavor, Receiver};
use crate::channel::sender::Sender;
use crate::timer::clock;

/// A box of some type, its type forgotten: a receive's slot.
pub(crate) struct Erased {
    ptr: *mut (),
    drop: unsafe fn(*mut ()),
}

impl Erased {
    pub(crate) fn new<T>(value: Box<T>) -> Erased {
        /// Drops the box `ptr` came from.
        ///
        /// # Safety
        ///
        /// `ptr` is from `Box::<T>::into_raw`, dropped once.
        unsafe fn drop_box<T>(ptr: *mut ()) {
            // SAFETY: the caller's contract.
            drop(unsafe { Box::from_raw(ptr.cast::<T>()) });
        }
        Erased {
            ptr: Box::into_raw(value).cast(),
            drop: drop_box::<T>,
        }
    }

    pub(crate) fn ptr(&self) -> *mut () {
        self.ptr
    }

    /// The box back.
    ///
    /// # Safety
    ///
    /// `T` is the type the box was made with.
    pub(crate) unsafe fn into_box<T>(self) -> Box<T> {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: the caller's contract; `this` is never dropped, so the
        // box is taken back once.
        unsafe { Box::from_raw(this.ptr.cast::<T>()) }
    }
}

impl Drop for Erased {
    fn drop(&mut self) {
        // SAFETY: `drop` is `drop_box` of the type `ptr` was made from, and
        // this is the one drop (`into_box` forgets the value).
        unsafe { (self.drop)(self.ptr) };
    }
}

/// What a select holds for the operation it chose, until the user
/// completes it.
pub(crate) enum Token {
    /// A receive: the slot (`Box<Slot<T>>`) with the message.
    Message(Erased),
    /// The channel is disconnected: the operation fails.
    Closed,
    /// A send: room is reserved for its message.
    Reserved,
}

/// A channel operation as a select sees it (implemented by [`Sender`] and
/// [`Receiver`]; the face other waits plug into).
pub(crate) trait SelectHandle {
    /// Completes the operation now if it can go ahead (`me`: the select's
    /// own registrations, skipped).
    fn try_op(&self, me: *const Context) -> Option<Token>;
    /// Registers operation `oper` of the wait `cx`: `Ok` with the slot it
    /// registered, if any, or `Err` if it can go ahead now (not registered).
    fn register(&self, oper: usize, cx: &Context) -> Result<Option<Erased>, ()>;
    /// Removes the registration (if still there).
    fn unregister(&self, oper: usize, cx: &Context);
    /// The token of a registration the wait was chosen for.
    fn accept(&self, slot: Option<Erased>) -> Token;
    /// Gives back what `token` holds: the operation will not be completed.
    fn abandon(&self, token: Token);
    /// When the operation becomes ready by itself (a timer).
    fn deadline(&self) -> Option<u64>;
    /// Whether the operation could go ahead now.
    fn is_ready(&self) -> bool;
    /// Registers a watcher of readiness; `false` if ready now.
    fn watch(&self, oper: usize, cx: &Context) -> bool;
    fn unwatch(&self, oper: usize, cx: &Context);
}

impl<T> SelectHandle for Sender<T> {
    fn try_op(&self, me: *const Context) -> Option<Token> {
        match self.chan.select_send(me)? {
            Ok(()) => Some(Token::Reserved),
            Err(()) => Some(Token::Closed),
        }
    }

    fn register(&self, oper: usize, cx: &Context) -> Result<Option<Erased>, ()> {
        if self.chan.register_send(oper, cx) {
            Ok(None)
        } else {
            Err(())
        }
    }

    fn unregister(&self, oper: usize, cx: &Context) {
        self.chan.unregister(false, oper, cx);
    }

    fn accept(&self, _slot: Option<Erased>) -> Token {
        Token::Reserved
    }

    fn abandon(&self, token: Token) {
        if let Token::Reserved = token {
            self.chan.release_reserved();
        }
    }

    fn deadline(&self) -> Option<u64> {
        None
    }

    fn is_ready(&self) -> bool {
        self.chan.is_ready(false)
    }

    fn watch(&self, oper: usize, cx: &Context) -> bool {
        self.chan.watch(false, oper, cx)
    }

    fn unwatch(&self, oper: usize, cx: &Context) {
        self.chan.unregister(false, oper, cx);
    }
}

/// A slot holding `message`, as a token.
fn message_token<T>(message: T) -> Token {
    let slot: Slot<T> = UnsafeCell::new(Some(message));
    Token::Message(Erased::new(Box::new(slot)))
}

impl<T> SelectHandle for Receiver<T> {
    fn try_op(&self, me: *const Context) -> Option<Token> {
        match &self.flavor {
            Flavor::Chan(chan) => match chan.select_recv(me)? {
                Ok(m) => Some(message_token(m)),
                Err(()) => Some(Token::Closed),
            },
            _ => self.try_recv().ok().map(message_token),
        }
    }

    fn register(&self, oper: usize, cx: &Context) -> Result<Option<Erased>, ()> {
        match &self.flavor {
            Flavor::Chan(chan) => {
                let slot: Box<Slot<T>> = Box::new(UnsafeCell::new(None));
                let slot = Erased::new(slot);
                if chan.register_recv(oper, cx, slot.ptr()) {
                    Ok(Some(slot))
                } else {
                    Err(())
                }
            }
            // Timers wake the select by its deadline; `never` never does.
            _ if self.is_ready() => Err(()),
            _ => Ok(None),
        }
    }

    fn unregister(&self, oper: usize, cx: &Context) {
        if let Flavor::Chan(chan) = &self.flavor {
            chan.unregister(true, oper, cx);
        }
    }

    fn accept(&self, slot: Option<Erased>) -> Token {
        Token::Message(slot.expect("a chosen receive has its slot"))
    }

    fn abandon(&self, token: Token) {
        if let Token::Message(slot) = token {
            // SAFETY: a receive's slot of this receiver's `T`.
            let slot = unsafe { slot.into_box::<Slot<T>>() };
            if let Some(message) = slot.into_inner() {
                match &self.flavor {
                    Flavor::Chan(chan) => chan.give_back(message),
                    Flavor::At(at, _) => {
                        drop(message);
                        at.undeliver();
                    }
                    _ => {}
                }
            }
        }
    }

    fn deadline(&self) -> Option<u64> {
        match &self.flavor {
            Flavor::At(at, _) => at.due(),
            Flavor::Tick(tick, _) => Some(tick.due()),
            _ => None,
        }
    }

    fn is_ready(&self) -> bool {
        match &self.flavor {
            Flavor::Chan(chan) => chan.is_ready(true),
            Flavor::Never => false,
            _ => !self.is_empty(),
        }
    }

    fn watch(&self, oper: usize, cx: &Context) -> bool {
        match &self.flavor {
            Flavor::Chan(chan) => chan.watch(true, oper, cx),
            _ => !self.is_ready(),
        }
    }

    fn unwatch(&self, oper: usize, cx: &Context) {
        self.unregister(oper, cx);
    }
}

struct Op<'a> {
    handle: &'a dyn SelectHandle,
    index: usize,
    /// The sender or receiver, to check that the operation is completed
    /// with the one it was registered with.
    ptr: *const u8,
}

/// Waits on several channel operations and completes one: crossbeam's
/// `Select`. Add operations with [`send`](Select::send) and
/// [`recv`](Select::recv) (each returns its index), then
/// [`select`](Select::select) one, and complete it with the
/// [`SelectedOperation`]'s `send` or `recv`. [`fibra::select!`](crate::select)
/// writes all that for you.
///
/// When several operations can go ahead, one is chosen at random
/// ([`new_biased`](Select::new_biased): the first added). In a fiber the
/// wait parks the fiber (and is a point where `cancel` and
/// `fibra::timeout` take effect); on a thread it blocks the thread.
///
/// ```
/// use fibra::channel::{Select, unbounded};
///
/// let (s1, r1) = unbounded::<i32>();
/// let (s2, r2) = unbounded::<i32>();
/// s2.send(2).unwrap();
/// let mut sel = Select::new();
/// let i1 = sel.recv(&r1);
/// let i2 = sel.recv(&r2);
/// let op = sel.select();
/// assert_eq!(op.index(), i2);
/// assert_eq!(op.recv(&r2), Ok(2));
/// # let _ = (i1, s1);
/// ```
pub struct Select<'a> {
    ops: Vec<Op<'a>>,
    next_index: usize,
    biased: bool,
}

// SAFETY: a `Select` holds shared references to senders and receivers,
// which are `Sync` for any message type that is `Send` — and a `Select`
// can only be built from those; the raw pointers are identities, never
// dereferenced.
unsafe impl Send for Select<'_> {}
// SAFETY: as above; `&Select` gives no access to the operations.
unsafe impl Sync for Select<'_> {}

impl<'a> Select<'a> {
    /// An empty select that chooses at random among ready operations.
    pub fn new() -> Select<'a> {
        Select {
            ops: Vec::with_capacity(4),
            next_index: 0,
            biased: false,
        }
    }

    /// An empty select that chooses the first added of the ready
    /// operations.
    pub fn new_biased() -> Select<'a> {
        Select {
            biased: true,
            ..Select::new()
        }
    }

    fn add(&mut self, handle: &'a dyn SelectHandle, ptr: *const u8) -> usize {
        let index = self.next_index;
        self.next_index += 1;
        self.ops.push(Op { handle, index, ptr });
        index
    }

    /// Adds a send on `s`; returns its index.
    pub fn send<T>(&mut self, s: &'a Sender<T>) -> usize {
        self.add(s, std::ptr::from_ref(s).cast())
    }

    /// Adds a receive on `r`; returns its index.
    pub fn recv<T>(&mut self, r: &'a Receiver<T>) -> usize {
        self.add(r, std::ptr::from_ref(r).cast())
    }

    /// Removes the operation of `index`.
    ///
    /// # Panics
    ///
    /// If there is no such operation (removed already, or never added).
    pub fn remove(&mut self, index: usize) {
        assert!(
            index < self.next_index,
            "index out of bounds; {} >= {}",
            index,
            self.next_index,
        );
        let i = self
            .ops
            .iter()
            .position(|op| op.index == index)
            .expect("no operation with this index");
        self.ops.swap_remove(i);
    }

    /// Completes an operation that can go ahead now, if any.
    ///
    /// # Errors
    ///
    /// None can.
    pub fn try_select(&mut self) -> Result<SelectedOperation<'a>, TrySelectError> {
        self.run(Some(0)).ok_or(TrySelectError)
    }

    /// Waits until an operation can go ahead, and selects it.
    pub fn select(&mut self) -> SelectedOperation<'a> {
        self.run(None)
            .expect("a select without deadline returns an operation")
    }

    /// [`select`](Select::select), waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// No operation could go ahead in time.
    pub fn select_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<SelectedOperation<'a>, SelectTimeoutError> {
        self.run(Some(clock::after_ns(timeout)))
            .ok_or(SelectTimeoutError)
    }

    /// [`select`](Select::select), waiting at most until `deadline`.
    ///
    /// # Errors
    ///
    /// No operation could go ahead in time.
    pub fn select_deadline(
        &mut self,
        deadline: Instant,
    ) -> Result<SelectedOperation<'a>, SelectTimeoutError> {
        self.run(Some(clock::instant_ns(deadline)))
            .ok_or(SelectTimeoutError)
    }

    /// The index of an operation that can go ahead now, without
    /// completing it (another thread may still take its chance first).
    ///
    /// # Errors
    ///
    /// None can.
    pub fn try_ready(&mut self) -> Result<usize, TryReadyError> {
        self.ready_until(Some(0)).ok_or(TryReadyError)
    }

    /// Waits until an operation can go ahead; its index.
    pub fn ready(&mut self) -> usize {
        self.ready_until(None)
            .expect("a wait without deadline returns an operation")
    }

    /// [`ready`](Select::ready), waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// None could go ahead in time.
    pub fn ready_timeout(&mut self, timeout: Duration) -> Result<usize, ReadyTimeoutError> {
        self.ready_until(Some(clock::after_ns(timeout)))
            .ok_or(ReadyTimeoutError)
    }

    /// [`ready`](Select::ready), waiting at most until `deadline`.
    ///
    /// # Errors
    ///
    /// None could go ahead in time.
    pub fn ready_deadline(&mut self, deadline: Instant) -> Result<usize, ReadyTimeoutError> {
        self.ready_until(Some(clock::instant_ns(deadline)))
            .ok_or(ReadyTimeoutError)
    }

    /// The order to try the operations in: as added, or shuffled.
    fn order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.ops.len()).collect();
        if !self.biased {
            for i in (1..order.len()).rev() {
                order.swap(i, random_below(i + 1));
            }
        }
        order
    }

    /// The earliest of `deadline` and the operations' own.
    fn earliest(&self, deadline: Option<u64>) -> Option<u64> {
        self.ops
            .iter()
            .filter_map(|op| op.handle.deadline())
            .chain(deadline)
            .min()
    }

    fn selected(&self, i: usize, token: Token) -> SelectedOperation<'a> {
        let op = &self.ops[i];
        SelectedOperation {
            index: op.index,
            ptr: op.ptr,
            handle: op.handle,
            token: Some(token),
            _not_send: PhantomData,
        }
    }

    /// The select loop (see the module docs); `deadline` `Some(0)`: try
    /// only.
    fn run(&mut self, deadline: Option<u64>) -> Option<SelectedOperation<'a>> {
        loop {
            let order = self.order();
            for &i in &order {
                if let Some(token) = self.ops[i].handle.try_op(std::ptr::null()) {
                    return Some(self.selected(i, token));
                }
            }
            if deadline.is_some_and(|d| d <= clock::now_ns()) {
                return None;
            }
            let cx = Context::new();
            let mut slots: Vec<Option<Erased>> = Vec::with_capacity(self.ops.len());
            let mut ready = false;
            for (i, op) in self.ops.iter().enumerate() {
                match op.handle.register(i, &cx) {
                    Ok(slot) => slots.push(slot),
                    Err(()) => {
                        ready = true;
                        break;
                    }
                }
            }
            let ops = &self.ops;
            let unregister = |slots: &mut Vec<Option<Erased>>| {
                for (i, _) in slots.iter().enumerate() {
                    ops[i].handle.unregister(i, &cx);
                }
            };
            let selected = if ready {
                cx.abort()
            } else {
                let on_unwind = OnUnwind::new(&cx, |selected| {
                    unregister(&mut slots);
                    if let Selected::Operation(i) = selected {
                        let handle = ops[i].handle;
                        handle.abandon(handle.accept(slots[i].take()));
                    }
                });
                let selected = wait(&cx, self.earliest(deadline), &"select");
                on_unwind.defuse();
                selected
            };
            unregister(&mut slots);
            if let Selected::Operation(i) = selected {
                let token = self.ops[i].handle.accept(slots[i].take());
                return Some(self.selected(i, token));
            }
            // Disconnected, a deadline, or woken for nothing: try again.
        }
    }

    /// The readiness loop: as [`Select::run`], with watchers.
    fn ready_until(&mut self, deadline: Option<u64>) -> Option<usize> {
        loop {
            for &i in &self.order() {
                if self.ops[i].handle.is_ready() {
                    return Some(self.ops[i].index);
                }
            }
            if deadline.is_some_and(|d| d <= clock::now_ns()) {
                return None;
            }
            let cx = Context::new();
            let mut watched = 0;
            let mut ready = None;
            for (i, op) in self.ops.iter().enumerate() {
                if !op.handle.watch(i, &cx) {
                    ready = Some(i);
                    break;
                }
                watched += 1;
            }
            let ops = &self.ops;
            let unwatch = || {
                for (i, op) in ops.iter().enumerate().take(watched) {
                    op.handle.unwatch(i, &cx);
                }
            };
            let selected = if ready.is_some() {
                cx.abort()
            } else {
                let on_unwind = OnUnwind::new(&cx, |_| unwatch());
                let selected = wait(&cx, self.earliest(deadline), &"select ready");
                on_unwind.defuse();
                selected
            };
            unwatch();
            match (selected, ready) {
                (Selected::Operation(i), _) | (_, Some(i)) => return Some(self.ops[i].index),
                _ => {}
            }
        }
    }
}

impl Default for Select<'_> {
    fn default() -> Self {
        Select::new()
    }
}

impl Clone for Select<'_> {
    fn clone(&self) -> Self {
        Select {
            ops: self
                .ops
                .iter()
                .map(|op| Op {
                    handle: op.handle,
                    index: op.index,
                    ptr: op.ptr,
                })
                .collect(),
            next_index: self.next_index,
            biased: self.biased,
        }
    }
}

impl fmt::Debug for Select<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("Select { .. }")
    }
}

/// The operation a [`Select`] chose, to be completed with
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
    handle: &'a dyn SelectHandle,
    token: Option<Token>,
    _not_send: PhantomData<*const ()>,
}

impl SelectedOperation<'_> {
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
    /// If `s` is not the sender the operation was added with.
    pub fn send<T>(mut self, s: &Sender<T>, msg: T) -> Result<(), SendError<T>> {
        assert!(
            std::ptr::eq(std::ptr::from_ref(s).cast(), self.ptr),
            "passed a sender that wasn't selected",
        );
        match self.token.take().expect("not completed yet") {
            Token::Reserved => s.chan.send_reserved(msg).map_err(SendError),
            _ => Err(SendError(msg)),
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
    /// If `r` is not the receiver the operation was added with.
    pub fn recv<T>(mut self, r: &Receiver<T>) -> Result<T, RecvError> {
        assert!(
            std::ptr::eq(std::ptr::from_ref(r).cast(), self.ptr),
            "passed a receiver that wasn't selected",
        );
        match self.token.take().expect("not completed yet") {
            Token::Message(slot) => {
                // SAFETY: the slot was made for the receive on `r` (the
                // check above), a `Slot<T>` of its `T`.
                let slot = unsafe { slot.into_box::<Slot<T>>() };
                slot.into_inner().ok_or(RecvError)
            }
            _ => Err(RecvError),
        }
    }
}

impl Drop for SelectedOperation<'_> {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            self.handle.abandon(token);
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

/// A number below `n`, from a per-thread xorshift generator: the order a
/// select tries its operations in.
fn random_below(n: usize) -> usize {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = const { Cell::new(0) };
    }
    STATE.with(|s| {
        let mut x = s.get();
        if x == 0 {
            // Seeded on first use: the clock and where this thread's state
            // lives.
            x = (clock::now_ns() ^ std::ptr::from_ref(s) as u64) | 1;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        ((x >> 32) as usize * n) >> 32
    })
}
