//! [`Builder`]: a fiber with a name or a stack size of its own.

use std::io;
use std::sync::Arc;

use crate::fiber::{Group, JoinHandle, spawn_on};
use crate::scheduler::context;
use crate::stack;

/// Configures a fiber before spawning it, like `std::thread::Builder`.
///
/// ```
/// fibra::run(|| {
///     let h = fibra::Builder::new()
///         .name("parser".to_string())
///         .stack_size(1 << 20)
///         .spawn(|| fibra::current().name().unwrap().len())
///         .unwrap();
///     assert_eq!(h.join().unwrap(), 6);
/// });
/// ```
#[derive(Debug, Default, Clone)]
pub struct Builder {
    name: Option<String>,
    stack_size: Option<usize>,
    idle: bool,
}

impl Builder {
    /// A builder with no name and the runtime's default stack size.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the fiber: shown by [`Fiber::name`](crate::Fiber::name), in
    /// `tracing` spans, and in the report if it overflows its stack.
    pub fn name(mut self, name: String) -> Builder {
        self.name = Some(name);
        self
    }

    /// The fiber's stack size in bytes, rounded up to whole pages (at least
    /// [`MIN_STACK_SIZE`](crate::MIN_STACK_SIZE)). Only the pages the fiber
    /// touches use memory.
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = Some(bytes);
        self
    }

    /// Makes it an *idle* fiber: it runs only when no other fiber of its
    /// runtime is ready — background compaction, a game loop's spare time —
    /// and never delays I/O or timers: before each turn of an idle fiber
    /// the runtime polls for them without waiting. An idle fiber that
    /// yields goes behind the other idle fibers. A runtime driven by
    /// [`turn`](crate::Runtime::turn) runs each ready idle fiber once in a
    /// turn that finds no normal fiber ready (and its fd does not turn
    /// readable for idle fibers alone).
    ///
    /// ```
    /// use std::{cell::Cell, rc::Rc};
    ///
    /// fibra::run(|| {
    ///     let spare = Rc::new(Cell::new(0u32));
    ///     let s = spare.clone();
    ///     let idle = fibra::Builder::new()
    ///         .idle(true)
    ///         .spawn(move || loop {
    ///             s.set(s.get() + 1); // a slice of background work
    ///             fibra::yield_now();
    ///         })
    ///         .unwrap();
    ///     fibra::sleep(std::time::Duration::from_millis(5)); // the idle fiber runs meanwhile
    ///     assert!(spare.get() > 0);
    ///     idle.cancel();
    /// });
    /// ```
    pub fn idle(mut self, idle: bool) -> Builder {
        self.idle = idle;
        self
    }

    /// Spawns the fiber on the current runtime.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a stack size of zero or above
    /// [`MAX_STACK_SIZE`](crate::MAX_STACK_SIZE); an error naming the cause
    /// when the stack cannot be mapped (out of memory or mappings);
    /// `Other` outside a fibra runtime.
    ///
    /// ```
    /// fibra::run(|| {
    ///     let err = fibra::Builder::new().stack_size(0).spawn(|| ()).unwrap_err();
    ///     assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    /// });
    /// ```
    #[track_caller]
    pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        let Some(core) = context::current() else {
            return Err(io::Error::other(
                "fibra::Builder::spawn called outside a fibra runtime \
                 (use Runtime::spawn, or call it inside block_on or a fiber)",
            ));
        };
        let stack_size = match self.stack_size {
            Some(size) => stack::validate_size(size)?,
            None => core.default_stack,
        };
        spawn_on(core, f, self.name.map(Arc::from), stack_size, self.idle)
    }

    /// Spawns the fiber as a member of `group`, as
    /// [`Group::spawn`](crate::Group::spawn) does, with this builder's name,
    /// stack size and idleness. Its result goes to the group
    /// ([`join_next`](crate::Group::join_next)), so there is no handle.
    ///
    /// (One builder for every fiber, a group's member or not, rather than a
    /// builder of the group's that would repeat each option.)
    ///
    /// # Errors
    ///
    /// As [`spawn`](Builder::spawn)'s; the group is left as it was.
    ///
    /// ```
    /// fibra::run(|| {
    ///     let group = fibra::Group::new();
    ///     fibra::Builder::new()
    ///         .name("fetch-1".to_string())
    ///         .stack_size(256 * 1024)
    ///         .spawn_in(&group, || fibra::current().name().map(str::to_owned))
    ///         .unwrap();
    ///     let name = group.join_next().unwrap().unwrap();
    ///     assert_eq!(name.as_deref(), Some("fetch-1"));
    /// });
    /// ```
    #[track_caller]
    pub fn spawn_in<F, T>(self, group: &Group<T>, f: F) -> io::Result<()>
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        let Some(core) = context::current() else {
            return Err(io::Error::other(
                "fibra::Builder::spawn_in called outside a fibra runtime \
                 (call it inside block_on or a fiber)",
            ));
        };
        let stack_size = match self.stack_size {
            Some(size) => stack::validate_size(size)?,
            None => core.default_stack,
        };
        group.spawn_on(core, f, self.name.map(Arc::from), stack_size, self.idle)
    }
}
