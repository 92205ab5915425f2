//! Making members: [`Group::spawn`] on the spawner's worker, as
//! `fibra::spawn` does; [`Group::spawn_anywhere`] on any worker, as
//! `Runtime::spawn` does; and the callbacks that tell a member's group
//! when it starts, exits, or never runs.

use std::io;
use std::sync::Arc;

use super::*;

impl<T> Group<T> {
    /// Spawns a member running `f` on the current runtime, as
    /// [`fibra::spawn`](crate::spawn) does (`f` need not be `Send`): on a
    /// runtime of workers, on the spawner's worker (see
    /// [`spawn_anywhere`](Group::spawn_anywhere) for any worker). Use
    /// [`Builder::spawn_in`](crate::Builder::spawn_in) for a name, a stack
    /// size, or to handle a failure to map the stack.
    ///
    /// A member spawned into a cancelled group, or after its deadline, is
    /// cancelled before it runs.
    ///
    /// Cost: a spawn and [`join_next`](Group::join_next) of an empty member
    /// took a median 218–260 ns, against 81–86 ns for `fibra::spawn` and
    /// `join` (`benches/spawn.rs`, `group_spawn_join_empty` against
    /// `spawn_join_empty`, five runs of each alternated, pinned to one CPU
    /// of a loaded 2-CPU VM; a ratio of 2.5–3.1 in each run): some 130–170
    /// ns more, mostly hash-map inserts and removes (the member's handle,
    /// its place in the node, the thread's map of members) and the locks
    /// around them.
    ///
    /// # Panics
    ///
    /// Outside a fibra runtime, or if the stack cannot be mapped.
    ///
    /// A member may spawn into its own group:
    ///
    /// ```
    /// use std::rc::Rc;
    ///
    /// fibra::run(|| {
    ///     let group = Rc::new(fibra::Group::new());
    ///     let g = group.clone();
    ///     group.spawn(move || {
    ///         g.spawn(|| "child");
    ///         "parent"
    ///     });
    ///     let mut got: Vec<_> = std::iter::from_fn(|| group.join_next())
    ///         .map(Result::unwrap)
    ///         .collect();
    ///     got.sort();
    ///     assert_eq!(got, ["child", "parent"]);
    /// });
    /// ```
    #[track_caller]
    pub fn spawn<F>(&self, f: F)
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        let core = context::expect("fibra::Group::spawn");
        if let Err(e) = self.spawn_on(core, f, None, core.default_stack, false) {
            cannot_spawn(e);
        }
    }

    /// Spawns a member that may run on any worker of the current runtime:
    /// as [`Runtime::spawn`](crate::Runtime::spawn) does, it goes to an
    /// idle worker if there is one (the next in turn otherwise), and until
    /// it starts an idle worker may take it over; once started, it stays
    /// on its worker. So `f` and its result must be `Send`. On a
    /// current-thread runtime it is [`spawn`](Group::spawn).
    ///
    /// Everything else is as for [`spawn`](Group::spawn): cancels,
    /// deadlines and a parent's cancel reach the member wherever it runs
    /// (before it starts too), [`join_next`](Group::join_next) and a
    /// `group` arm of [`select!`](crate::select) give it when it ends, and
    /// the group's drop waits for it.
    ///
    /// Why two methods: [`spawn`](Group::spawn) is
    /// [`fibra::spawn`](crate::spawn)'s twin: the member stays on the
    /// spawner's thread, so it may hold `Rc`s and other `!Send` values,
    /// and costs no more than a plain spawn. CPU-bound members, or many
    /// members spawned by one fiber, want all the workers: that needs
    /// `Send`, which no `!Send` member could give, hence this one.
    ///
    /// # Panics
    ///
    /// Outside a fibra runtime.
    ///
    /// ```
    /// let rt = fibra::Runtime::builder().workers(2).build()?;
    /// let threads = rt.block_on(|| {
    ///     let group = fibra::Group::new();
    ///     for _ in 0..8 {
    ///         group.spawn_anywhere(|| {
    ///             let start = std::time::Instant::now();
    ///             while start.elapsed() < std::time::Duration::from_millis(20) {} // CPU-bound
    ///             std::thread::current().name().unwrap().to_owned()
    ///         });
    ///     }
    ///     let mut threads: Vec<_> = std::iter::from_fn(|| group.join_next())
    ///         .map(Result::unwrap)
    ///         .collect();
    ///     threads.sort();
    ///     threads.dedup();
    ///     threads
    /// });
    /// assert!(!threads.is_empty()); // (both workers, unless one was busy all along)
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn spawn_anywhere<F>(&self, f: F)
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let core = context::expect("fibra::Group::spawn_anywhere");
        let Some(pool) = core.pool() else {
            // One thread: nowhere else to go.
            if let Err(e) = self.spawn_on(core, f, None, core.default_stack, false) {
                cannot_spawn(e);
            }
            return;
        };
        let hooks = JobHooks {
            data: Arc::into_raw(self.node.clone()).cast(),
            started,
            on_exit: exited,
            never_ran,
        };
        // The hooks take the node's count back at the member's end, or
        // when it never runs, on whichever thread; the node is `Sync`.
        // SAFETY: as argued just above.
        let (job, handle) = unsafe {
            match self.node.deadline {
                None => Job::member(f, hooks),
                Some(d) => Job::member(move || until(d, f), hooks),
            }
        };
        // Recorded before the job is handed over: once it is, it may run,
        // and end, on another worker at once.
        self.record(handle);
        pool.submit(job, None);
        if self.node.deadline.is_some_and(|d| d <= clock::now_ns()) {
            self.node.cancel();
        }
    }

    /// Records a member spawned just now, which has not run: its handle,
    /// and where it runs in the node.
    fn record(&self, handle: JoinHandle<T>) {
        let (id, at) = (handle.fiber().id(), handle.location());
        {
            let mut h = self.handles();
            let n = h.spawned;
            h.spawned += 1;
            h.by_id.insert(id, (n, handle));
        }
        self.node.add(id, at);
    }

    /// Spawns a member on `core` (the runtime entered on this thread).
    #[track_caller]
    pub(crate) fn spawn_on<F>(
        &self,
        core: &Core,
        f: F,
        name: Option<Arc<str>>,
        stack_size: usize,
        idle: bool,
    ) -> io::Result<()>
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        let data = Arc::into_raw(self.node.clone());
        let on_exit = OnExit {
            call: exited,
            data: data.cast(),
        };
        let exit = Some((on_exit, ptr::null()));
        // `f` and `T` are 'static; `exited` takes back the count `data` owns.
        // SAFETY: as argued just above.
        let spawned = unsafe {
            match self.node.deadline {
                None => spawn_unchecked(core, f, name, stack_size, exit, idle),
                Some(d) => spawn_unchecked(core, move || until(d, f), name, stack_size, exit, idle),
            }
        };
        let handle = match spawned {
            Ok(handle) => handle,
            Err(e) => {
                // The fiber was not made, and will not call `exited`.
                // SAFETY: `data` came from `Arc::into_raw` above.
                drop(unsafe { Arc::from_raw(data) });
                return Err(e);
            }
        };
        // The member does not run before this fiber parks: it is queued on
        // this thread's runtime. So it is recorded before it can exit.
        members::join(handle.fiber().id(), Arc::as_ptr(&self.node));
        self.record(handle);
        if self.node.deadline.is_some_and(|d| d <= clock::now_ns()) {
            self.node.cancel(); // (all its members are past the deadline)
        }
        Ok(())
    }
}

/// A member's exit callback: see `node.rs`.
///
/// # Safety
///
/// `data` came from `Arc::into_raw` of the member's node; this is called
/// once, on the member's fiber, and takes that count back.
unsafe fn exited(data: *const ()) {
    // SAFETY: per the contract.
    let node = unsafe { Arc::from_raw(data.cast::<Node>()) };
    let Some(core) = context::current() else {
        return; // (unreachable: a fiber's end runs in its runtime)
    };
    let id = core.current_id();
    members::leave(id);
    node.exited(id);
}

/// A member sent to the workers was made on this thread, and has not run:
/// see `fiber::queued::JobHooks`.
///
/// # Safety
///
/// `data` is the count of the member's node its hooks own, which its
/// fiber now owns (its exit callback takes it back).
unsafe fn started(data: *const (), id: FiberId) {
    members::join(id, data.cast());
}

/// A member sent to the workers will never run (the job was dropped, or
/// its stack could not be mapped), and its result is in: it has exited.
///
/// # Safety
///
/// `data` came from `Arc::into_raw` of the member's node; called once,
/// instead of [`started`] and [`exited`], and takes that count back.
unsafe fn never_ran(data: *const (), id: FiberId) {
    // SAFETY: per the contract.
    let node = unsafe { Arc::from_raw(data.cast::<Node>()) };
    node.exited(id);
}

/// Runs a member's `f` until the group's `deadline` (ns): past it, where
/// `f` parks it unwinds, and the member is cancelled.
fn until<T>(deadline: u64, f: impl FnOnce() -> T) -> T {
    let core = context::expect("a fibra::Group member");
    match park::with_deadline(core, deadline, f) {
        Some(value) => value,
        None => {
            // Its destructors ran; now make it a cancelled member, as if
            // `cancel` had hit it there.
            cancel_fiber(core.id, core.current_key(), core.current_id());
            park::check_unwind(core);
            unreachable!("a cancelled fiber did not unwind");
        }
    }
}

/// The panic of a failed [`Group::spawn`], out of line.
#[cold]
#[inline(never)]
#[track_caller]
fn cannot_spawn(e: io::Error) -> ! {
    panic!("fibra::Group::spawn: cannot create a fiber: {e}")
}
