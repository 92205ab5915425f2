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
//! dropped) goes back: a message to the channel, room to the next sender —
//! unless a receive was told meanwhile that the channel is over: the end
//! is final, so the message goes down with the receiver that got it, as
//! one it had received would (`models.rs` checks it).
//!
//! A select without deadline whose operations are all on locked channels
//! (`bounded(0)`, say) skips the try: registering an operation there
//! looks at it under the lock the registration takes anyway, and an
//! operation found ready goes ahead then, once the select's context is
//! aborted (no other of its operations can be chosen after that). A
//! select that waits so locks each channel once before it parks, not
//! twice.

mod arm;
mod group;
pub(crate) mod join_and_io;
mod macros;
#[cfg(all(test, loom))]
mod models;
pub(crate) mod operation;
pub(crate) mod parking;
mod ready;
pub(crate) mod selected;
mod small;

use std::fmt;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::channel::context::{Context, OnUnwind, Selected, wait};
use crate::channel::err::{SelectTimeoutError, TrySelectError};
use crate::channel::receiver::{Receiver, ReceiverFlavor};
pub use crate::channel::select::arm::{Arm, SelectArg, SelectFd};
use crate::channel::select::join_and_io::{Handle, IoOp};
use crate::channel::select::operation::{Erased, Registration, SelectHandle, Token};
use crate::channel::select::parking::Parking;
pub use crate::channel::select::selected::SelectedOperation;
use crate::channel::select::small::{Order, Small};
use crate::channel::sender::{Sender, SenderFlavor};
use crate::fiber::{Group, JoinHandle};
use crate::io::Interest;
use crate::timer::clock;

#[derive(Clone, Copy)]
pub(super) struct Op<'a> {
    pub(super) handle: Handle<'a>,
    pub(super) index: usize,
    /// The channel (or join handle) of the operation, to check that it is
    /// completed with a handle of the same one.
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
    pub(super) ops: Small<Op<'a>, 4>,
    next_index: usize,
    biased: bool,
    /// Every operation is on a locked channel (`bounded(0)`, say), whose
    /// registration also tries it: a wait needs no try pass first.
    locked_only: bool,
    /// Every operation is a channel's send or receive (no timer, join or
    /// fd): none has a deadline or an fd, or wakes without selecting.
    channels_only: bool,
}

// SAFETY: a `Select` holds shared references to senders and receivers,
// which are `Sync` for any message type that is `Send` — and a `Select`
// can only be built from those — and to join handles and groups, of which
// a select touches only what is `Sync` whatever their `T` (an atomic flag,
// a group's untyped core): their results are taken by the
// `SelectedOperation`, which is not `Send`, with the caller's own
// reference. The raw pointers are identities, never dereferenced.
unsafe impl Send for Select<'_> {}
// SAFETY: as above; `&Select` gives no access to the operations.
unsafe impl Sync for Select<'_> {}

impl<'a> Select<'a> {
    /// An empty select that chooses at random among ready operations.
    #[inline]
    pub fn new() -> Select<'a> {
        Select {
            ops: Small::new(Op {
                handle: Handle::Io(IoOp {
                    fd: -1,
                    interest: Interest::READABLE,
                }),
                index: 0,
                ptr: std::ptr::null(),
            }),
            next_index: 0,
            biased: false,
            locked_only: true,
            channels_only: true,
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

    #[inline]
    fn add(&mut self, handle: Handle<'a>, ptr: *const u8) -> usize {
        let index = self.next_index;
        self.next_index += 1;
        self.ops.push(Op { handle, index, ptr });
        index
    }

    /// Adds a send on `s`; returns its index.
    pub fn send<T>(&mut self, s: &'a Sender<T>) -> usize {
        self.locked_only &= matches!(s.flavor, SenderFlavor::Zero(_));
        self.add(Handle::Borrowed(s), s.identity())
    }

    /// Adds a receive on `r`; returns its index.
    pub fn recv<T>(&mut self, r: &'a Receiver<T>) -> usize {
        self.locked_only &= matches!(r.flavor, ReceiverFlavor::Zero(_));
        self.channels_only &= matches!(
            r.flavor,
            ReceiverFlavor::Zero(_) | ReceiverFlavor::Array(_) | ReceiverFlavor::List(_)
        );
        self.add(Handle::Borrowed(r), r.identity())
    }

    /// Adds the end of the fiber `h` joins (beyond crossbeam): chosen once
    /// the fiber has finished; [`SelectedOperation::join`] takes its result
    /// (after which `h` must not be joined again: its result is gone).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fibra::channel::{Select, after};
    ///
    /// fibra::run(|| {
    ///     let h = fibra::spawn(|| {
    ///         fibra::sleep(Duration::from_millis(5));
    ///         42
    ///     });
    ///     let timeout = after(Duration::from_secs(5));
    ///     let mut sel = Select::new();
    ///     let done = sel.join(&h);
    ///     sel.recv(&timeout);
    ///     let op = sel.select();
    ///     assert_eq!(op.index(), done);
    ///     assert_eq!(op.join(&h).unwrap(), 42);
    /// });
    /// ```
    pub fn join<T>(&mut self, h: &'a JoinHandle<T>) -> usize {
        self.locked_only = false;
        self.channels_only = false;
        self.add(Handle::Borrowed(h), h.identity())
    }

    /// Adds the next member of `group` to finish (beyond crossbeam):
    /// chosen once a member has finished (one not joined yet, by
    /// [`Group::join_next`] or another select), and only then — an empty
    /// group is never ready, since members may be spawned into it later,
    /// so loop `while !group.is_empty()` to collect them all.
    /// [`SelectedOperation::group`] gives the member's result.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fibra::channel::{Select, unbounded};
    ///
    /// fibra::run(|| {
    ///     let group = fibra::Group::new();
    ///     group.spawn(|| {
    ///         fibra::sleep(Duration::from_millis(5));
    ///         "member"
    ///     });
    ///     let (_s, messages) = unbounded::<&str>();
    ///     let mut sel = Select::new();
    ///     let member = sel.group(&group);
    ///     sel.recv(&messages);
    ///     let op = sel.select();
    ///     assert_eq!(op.index(), member);
    ///     assert_eq!(op.group(&group).unwrap(), "member");
    /// });
    /// ```
    pub fn group<T>(&mut self, group: &'a Group<T>) -> usize {
        self.locked_only = false;
        self.channels_only = false;
        self.add(Handle::Borrowed(group), group.select_identity())
    }

    /// Adds the readiness of `fd` for `interest` (beyond crossbeam): a
    /// socket, pipe, eventfd or any pollable fd, chosen when it is ready —
    /// what [`fibra::io::wait`](crate::io::wait) waits for.
    /// [`SelectedOperation::io`] gives the readiness. The fd must stay open
    /// while the select waits.
    ///
    /// ```
    /// use std::io::Write;
    /// use fibra::channel::{Select, unbounded};
    /// use fibra::io::Interest;
    ///
    /// fibra::run(|| {
    ///     let (a, mut b) = fibra::net::UnixStream::pair().unwrap();
    ///     let (_s, r) = unbounded::<String>();
    ///     b.write_all(b"line\n").unwrap();
    ///     let mut sel = Select::new();
    ///     let readable = sel.io(&a, Interest::READABLE);
    ///     sel.recv(&r);
    ///     let op = sel.select();
    ///     assert_eq!(op.index(), readable);
    ///     assert_eq!(op.io().unwrap(), Interest::READABLE);
    /// });
    /// ```
    pub fn io(&mut self, fd: &impl AsRawFd, interest: Interest) -> usize {
        let fd = fd.as_raw_fd();
        self.locked_only = false;
        self.channels_only = false;
        self.add(Handle::Io(IoOp { fd, interest }), std::ptr::null())
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
        // The loop in line here: called, its result came back through
        // memory and was copied again into this one's, stalling on the
        // failed store forwarding (perf: a fourteenth of a select_both).
        self.run_inline(None)
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

    /// The order to try the operations in: as added, or shuffled.
    #[inline(always)]
    pub(super) fn order(&self) -> Order {
        let len = self.ops.len();
        if self.biased || len < 2 {
            Order::identity(len)
        } else {
            Order::random(len)
        }
    }

    /// The earliest of `deadline` and the operations' own.
    pub(super) fn earliest(&self, deadline: Option<u64>) -> Option<u64> {
        if self.channels_only {
            return deadline; // no timers among them
        }
        self.ops
            .iter()
            .filter_map(|op| op.handle.get().deadline())
            .chain(deadline)
            .min()
    }

    fn selected(&self, i: usize, token: Token) -> SelectedOperation<'a> {
        let op = &self.ops[i];
        SelectedOperation::new(op.index, op.ptr, op.handle, token)
    }

    /// How this select's waits park: on the wait's context alone, or with
    /// its fds too.
    #[inline(never)]
    pub(super) fn parking(&self) -> Parking {
        let fds = self
            .ops
            .iter()
            .filter_map(|op| op.handle.get().fd())
            .collect();
        let any_wake = self.ops.iter().any(|op| op.handle.get().wakes_only());
        Parking::new(fds, any_wake)
    }

    /// The select loop (see the module docs); `deadline` `Some(0)`: try
    /// only.
    #[inline(never)]
    fn run(&mut self, deadline: Option<u64>) -> Option<SelectedOperation<'a>> {
        let selected = self.run_inline(deadline);
        if selected.is_none() {
            // A loop of these waiting for a fiber of this thread lets it run.
            crate::scheduler::fair::futile();
        }
        selected
    }

    /// [`Select::run`]'s body, for `select` to take in line.
    #[inline(always)]
    fn run_inline(&mut self, deadline: Option<u64>) -> Option<SelectedOperation<'a>> {
        // Made at the first wait only: a select that finds an operation
        // ready on its first try looks at nothing else.
        let mut parking: Option<Parking> = None;
        // On locked channels only, a wait without deadline goes straight
        // to registering: each registration tries its operation under the
        // lock it takes anyway (`Registration::Done`), in the same random
        // order, so a select that then parks locks each channel once
        // before, not twice.
        let try_first = !(self.locked_only && deadline.is_none());
        // The slice once: each `ops[i]` would ask again where a
        // `Small` keeps its items.
        let ops: &[Op<'a>] = &self.ops;
        loop {
            let order = self.order();
            if try_first {
                for i in order.iter() {
                    if let Some(token) = ops[i].handle.get().try_op(std::ptr::null()) {
                        return Some(self.selected(i, token));
                    }
                }
            }
            if deadline.is_some_and(|d| d <= clock::now_ns()) {
                // Once more before giving up, as crossbeam's registration
                // pass does: an operation found not ready early in the
                // first pass may have become ready while a later one was
                // emptied, though one of them was ready at every moment.
                for i in order.iter() {
                    if let Some(token) = ops[i].handle.get().try_op(std::ptr::null()) {
                        return Some(self.selected(i, token));
                    }
                }
                return None;
            }
            // A select of channels only waits on its context alone, made
            // here in line (a `Parking` made and moved into its option
            // stalled the loads after on failed store forwarding).
            let parking = match self.channels_only {
                true => None,
                false => Some(&*parking.get_or_insert_with(|| self.parking())),
            };
            let cx = parking.map_or_else(Context::new, Parking::context);
            // Registered in the same shuffled order: a notifier takes the
            // first entry in a channel's line, so two operations of one
            // select on one channel are chosen as fairly as the try.
            // Inline for a select of up to four operations (no allocation).
            let mut inline: [Option<Erased>; 4] = Default::default();
            let mut heap: Vec<Option<Erased>>;
            let slots: &mut [Option<Erased>] = if ops.len() <= inline.len() {
                &mut inline[..ops.len()]
            } else {
                heap = (0..ops.len()).map(|_| None).collect();
                &mut heap
            };
            let mut registered = 0;
            let mut ready = false;
            let mut done = None;
            for i in order.iter() {
                // The slot is made in place: it stays there, registered.
                match ops[i].handle.get().register(i, &cx, &mut slots[i]) {
                    Registration::Waiting => registered += 1,
                    Registration::Ready => {
                        ready = true;
                        break;
                    }
                    Registration::Done(token) => {
                        done = Some((i, token));
                        break;
                    }
                }
            }
            // `taken`: an operation whose entry its notifier took out of
            // the line, as a locked channel's does when it chooses it.
            let unregister = |_: &mut [Option<Erased>], taken: Option<usize>| {
                for i in order.first(registered) {
                    if Some(i) != taken {
                        ops[i].handle.get().unregister(i, &cx);
                    }
                }
            };
            if let Some((i, token)) = done {
                unregister(slots, None);
                return Some(self.selected(i, token));
            }
            let selected = if ready {
                cx.abort()
            } else {
                let on_unwind = OnUnwind::new(&cx, |selected| {
                    unregister(slots, None);
                    if let Selected::Operation(i) = selected {
                        ops[i].handle.get().pass_on(slots[i].take());
                    }
                });
                let earliest = self.earliest(deadline);
                let selected = match parking {
                    Some(parking) => parking.wait(&cx, earliest, &"select"),
                    None => wait(&cx, earliest, &"select", false),
                };
                on_unwind.defuse();
                selected
            };
            let taken = match selected {
                Selected::Operation(i) if self.locked_only => Some(i),
                _ => None,
            };
            unregister(slots, taken);
            if let Selected::Operation(i) = selected
                && let Some(token) = ops[i].handle.get().accept(slots[i].take())
            {
                return Some(self.selected(i, token));
            }
            // Disconnected, a deadline, woken to look again, or chosen to
            // try again and beaten to it: try again.
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
            ops: self.ops.clone(),
            next_index: self.next_index,
            biased: self.biased,
            locked_only: self.locked_only,
            channels_only: self.channels_only,
        }
    }
}

impl fmt::Debug for Select<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("Select { .. }")
    }
}
