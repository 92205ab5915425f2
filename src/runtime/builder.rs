//! Configuration of a [`Runtime`](super::Runtime).

use std::io;
use std::marker::PhantomData;
use std::time::Duration;

use crate::observe::watchdog::{self, DEFAULT_STALL};
use crate::runtime::workers::Workers;
use crate::runtime::{CurrentThread, Runtime};
use crate::scheduler::core::{Core, Tuning};
use crate::stack;

/// Configures and builds a [`Runtime`]; names follow tokio's.
///
/// A builder makes a current-thread runtime, driven by the thread that owns
/// it; after [`workers`](Builder::workers) it makes a `Runtime<Workers>`,
/// whose worker threads run on their own.
///
/// ```
/// let rt = fibra::Runtime::builder()
///     .stack_size(128 * 1024)
///     .build()?;
/// rt.block_on(|| fibra::spawn(|| ()).join())
///     .unwrap();
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Builder<Flavor = CurrentThread> {
    stack_size: usize,
    workers: usize,
    tuning: Tuning,
    flavor: PhantomData<fn() -> Flavor>,
}

impl Builder {
    /// The default configuration: a current-thread runtime with stacks of
    /// [`DEFAULT_STACK_SIZE`](crate::DEFAULT_STACK_SIZE).
    pub fn new() -> Builder {
        Builder {
            stack_size: stack::DEFAULT_STACK_SIZE,
            workers: 0,
            tuning: Tuning {
                stall: DEFAULT_STALL,
                busy_poll: Duration::ZERO,
                stall_stacks: true,
                exit_on_deadlock: false,
                count_time: false,
            },
            flavor: PhantomData,
        }
    }

    /// Creates the runtime.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a stack size of zero or above
    /// [`MAX_STACK_SIZE`](crate::MAX_STACK_SIZE); an OS error when the kernel
    /// refuses the runtime's fds.
    ///
    /// ```
    /// let err = fibra::Runtime::builder().stack_size(0).build().unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    /// ```
    pub fn build(self) -> io::Result<Runtime> {
        crate::arch::check_supported()?;
        let stack_size = stack::validate_size(self.stack_size)?;
        let core = Core::new(stack_size, self.tuning, None)?;
        crate::observe::install();
        let rt = Runtime::from_flavor(CurrentThread::new(core));
        watchdog::runtime_built(self.tuning.stall);
        Ok(rt)
    }
}

impl<Flavor> Builder<Flavor> {
    /// The stack size of fibers spawned without one of their own. Rounded up
    /// to whole pages (and to at least [`MIN_STACK_SIZE`](crate::MIN_STACK_SIZE)).
    /// Only touched pages use memory, so a generous size costs little.
    pub fn stack_size(mut self, bytes: usize) -> Builder<Flavor> {
        self.stack_size = bytes;
        self
    }

    /// Warns when a fiber runs `after` or longer without blocking in fibra
    /// (default 100 ms; `Duration::MAX` turns it off): a `tracing` WARN
    /// event, target `fibra::stall`, with the fiber's id, name, spawn
    /// location and how long it has run, emitted **while it still runs**
    /// (by a watchdog thread that every runtime of the process shares), and
    /// another with the total when it finally parks. Such a fiber — a CPU
    /// loop without [`yield_now`](crate::yield_now), `std::thread::sleep`,
    /// `std::fs`, a std `Mutex` or channel waited on — keeps every other
    /// fiber of its thread waiting.
    ///
    /// The warning's field `stack` says where the fiber is at that moment
    /// (`std::thread::sleep` called by `app::load_config` at
    /// `src/config.rs:41`, say): the watchdog stops the thread with a
    /// real-time signal of fibra's (`SIGRTMAX - 3`; a handler installed
    /// before fibra's still gets every such signal not sent by fibra),
    /// walks its stack while the handler holds it, and lets it go; where
    /// that cannot be done safely and in time the field says why instead.
    /// Like any profiler's signal, it ends some system calls early with
    /// `EINTR` (`nanosleep`, `poll`, socket calls with a timeout), once per
    /// stall; std's `sleep` and `read_exact` carry on by themselves.
    /// [`stall_stacks(false)`](Builder::stall_stacks) turns the sampling
    /// off.
    ///
    /// The same threshold tells two more things. A runtime whose fibers
    /// take turns without any of them stalling, but without the runtime
    /// polling for I/O and timers for `after` (many fibers computing
    /// between parks), gets a `fibra::stall` WARN naming the fibers that
    /// took most of that time, and another when it polls again. A runtime
    /// all of whose fibers, `block_on`'s closure included, have waited
    /// `after` × 10 on fibra's own locks, channels, semaphores and joins,
    /// with no timer armed and no fd registered, gets a WARN with target
    /// `fibra::deadlock` and its dump, stacks included (Go's "all goroutines
    /// are asleep", as a warning: a plain thread may still wake one). With
    /// [`workers`](Builder::workers), every worker's fibers together: one
    /// worker's fibers waiting on a lock that a fiber of another worker
    /// holds is no deadlock while that one runs, sleeps or waits on an fd.
    ///
    /// The cost to the runtime is one store per context switch; the
    /// watchdog looks every `after / 2` while a runtime runs fibers, and
    /// sleeps while every runtime waits for I/O or timers. Its thread costs
    /// a single-threaded program one thing more: in a process of several
    /// threads Linux counts a reference on the file in every system call
    /// on an fd (about 1.4 % of an echo server's CPU a round trip at one
    /// connection, in `benches/peers`); turning the warning off in every
    /// runtime leaves the process without the thread.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = fibra::Runtime::builder()
    ///     .stall_warning(Duration::from_millis(20))
    ///     .build()?;
    /// // Logged at WARN (target "fibra::stall") while it runs, if a
    /// // subscriber listens: "fiber #N has run for 20ms without blocking..."
    /// rt.block_on(|| fibra::spawn(|| std::thread::sleep(Duration::from_millis(50))).join())
    ///     .unwrap();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn stall_warning(mut self, after: Duration) -> Builder<Flavor> {
        self.tuning.stall = after;
        self
    }

    /// Whether the [`stall_warning`](Builder::stall_warning) carries the
    /// stalled fiber's stack (default `true`). Sampling it sends the
    /// runtime's thread a signal (`SIGRTMAX - 3`), which ends some system
    /// calls early with `EINTR` (`nanosleep`, `poll`, socket calls with a
    /// timeout), once per stall. A program that cannot take that (a C
    /// library that treats `EINTR` as an error, say) turns it off: the
    /// warnings still come, their field `stack` says that it was not
    /// sampled, and no signal is ever sent to this runtime's threads — nor
    /// for a dump taken while a fiber holds one of them, which then lists
    /// that fiber without its stack.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = fibra::Runtime::builder()
    ///     .stall_warning(Duration::from_millis(20))
    ///     .stall_stacks(false)
    ///     .build()?;
    /// // Warned about (stack: "not sampled: turned off by ..."), never
    /// // interrupted by fibra's signal.
    /// rt.block_on(|| std::thread::sleep(Duration::from_millis(50)));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn stall_stacks(mut self, sample: bool) -> Builder<Flavor> {
        self.tuning.stall_stacks = sample;
        self
    }

    /// Before it sleeps waiting for I/O, a timer or another thread, the
    /// runtime keeps polling for them, without sleeping, for up to `spin`
    /// (default zero: it sleeps at once). Like Linux's `SO_BUSY_POLL`, it
    /// trades CPU for latency: work that arrives within `spin` of the
    /// runtime running out of it is taken up at once, and neither the
    /// runtime's thread nor the peer that would have woken it pays for a
    /// sleep and a wake-up.
    ///
    /// That matters to a server whose clients answer quickly: a thread
    /// asleep in `epoll_wait` is woken by the client's own `send`, which
    /// then costs the client the wake-up (an inter-processor interrupt;
    /// more in a virtual machine). `mini_redis` under `redis-benchmark -c 50`
    /// is the measured case (see `examples/mini_redis/main.rs`). A few
    /// microseconds are enough; a runtime with nothing to do for longer
    /// still sleeps, after having spent at most `spin`.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = fibra::Runtime::builder()
    ///     .busy_poll(Duration::from_micros(20))
    ///     .build()?;
    /// rt.block_on(|| fibra::sleep(Duration::from_millis(1)));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn busy_poll(mut self, spin: Duration) -> Builder<Flavor> {
        self.tuning.busy_poll = spin;
        self
    }

    /// What the runtime does when it finds itself deadlocked: every fiber
    /// (and `block_on`'s closure) waiting on fibra's locks, channels and
    /// joins, with no timer armed and no fd registered, for ten times the
    /// [`stall_warning`](Builder::stall_warning) (1 s by default). With
    /// [`OnDeadlock::Warn`], the default, it tells it (to the `tracing`
    /// subscriber, or to stderr when none is set) and keeps waiting: a
    /// plain thread may still wake one of the fibers. With
    /// [`OnDeadlock::Exit`] it prints the report, every fiber's stack in
    /// it, to stderr and exits the process with status 2, as Go does
    /// ("all goroutines are asleep - deadlock!"): a program whose fibers
    /// only ever wake each other gets a failure it cannot miss instead of
    /// a hang.
    ///
    /// Deadlocks are found only while stall warnings are on (they are by
    /// default): a runtime built with `stall_warning(Duration::MAX)` never
    /// looks.
    ///
    /// ```
    /// use fibra::runtime::OnDeadlock;
    ///
    /// let rt = fibra::Runtime::builder()
    ///     .on_deadlock(OnDeadlock::Exit)
    ///     .build()?;
    /// // Fibers that wake each other run as usual; only a deadlock exits.
    /// let (tx, rx) = fibra::channel::bounded(1);
    /// rt.block_on(|| {
    ///     fibra::spawn(move || tx.send(7).unwrap());
    ///     assert_eq!(rx.recv(), Ok(7));
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn on_deadlock(mut self, on: OnDeadlock) -> Builder<Flavor> {
        self.tuning.exit_on_deadlock = on == OnDeadlock::Exit;
        self
    }

    /// Whether the runtime counts how long each fiber runs, for
    /// [`FiberInfo::cpu_time`](crate::runtime::FiberInfo::cpu_time) in its
    /// dumps (default `false`). It reads the CPU's time-stamp counter at
    /// every switch, which is not free: a yield round trip between two
    /// fibers went from 23–28 ns to 34–46 ns on the development VM. For a
    /// program that wants to see which fibers take its CPU; for a profile
    /// by function, see [`Profiler`](crate::runtime::Profiler).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = fibra::Runtime::builder().cpu_time(true).build()?;
    /// rt.block_on(|| {
    ///     let busy = fibra::Builder::new().name("busy".into()).spawn(|| {
    ///         let start = std::time::Instant::now();
    ///         while start.elapsed() < Duration::from_millis(20) {}
    ///         fibra::sleep(Duration::from_secs(60));
    ///     })?;
    ///     fibra::sleep(Duration::from_millis(50));
    ///     let dump = fibra::runtime::Handle::current().dump();
    ///     let info = dump.fibers().find(|f| f.name.as_deref() == Some("busy")).unwrap();
    ///     assert!(info.cpu_time.unwrap() >= Duration::from_millis(15));
    ///     busy.cancel();
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn cpu_time(mut self, count: bool) -> Builder<Flavor> {
        self.tuning.count_time = count;
        self
    }

    /// A runtime of `n` worker threads (`fibra-worker-0` ...), each with a
    /// scheduler, reactor and timer wheel of its own, running at once; see
    /// [`Runtime<Workers>`](crate::Runtime#runtimes-of-several-workers).
    /// Zero workers is an error at [`build`](Builder::build).
    ///
    /// ```
    /// let rt = fibra::Runtime::builder().workers(2).build()?;
    /// let name = rt.block_on(|| std::thread::current().name().map(str::to_owned));
    /// assert!(name.unwrap().starts_with("fibra-worker-"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn workers(self, n: usize) -> Builder<Workers> {
        Builder {
            stack_size: self.stack_size,
            workers: n,
            tuning: self.tuning,
            flavor: PhantomData,
        }
    }
}

impl Builder<Workers> {
    /// Starts the workers and returns once each has its scheduler.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for zero workers and for a stack size of zero or above
    /// [`MAX_STACK_SIZE`](crate::MAX_STACK_SIZE); `OutOfMemory` when the
    /// process has too few memory mappings left (`vm.max_map_count`) for
    /// that many threads; an OS error when a thread or a worker's fds
    /// cannot be created. Workers start one after another, and the first
    /// that fails ends the build with its error: those already started are
    /// stopped and joined, so a failed build leaves no thread behind.
    ///
    /// ```
    /// // More threads than any process may map (vm.max_map_count < 2^31).
    /// let err = fibra::Runtime::builder().workers(1 << 28).build().unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::OutOfMemory);
    /// ```
    ///
    /// ```
    /// let err = fibra::Runtime::builder().workers(0).build().unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    /// ```
    pub fn build(self) -> io::Result<Runtime<Workers>> {
        crate::arch::check_supported()?;
        let stack_size = stack::validate_size(self.stack_size)?;
        if self.workers == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a fibra runtime needs at least one worker (workers(0) was given)",
            ));
        }
        let rt = Runtime::from_flavor(Workers::start(self.workers, stack_size, self.tuning)?);
        watchdog::runtime_built(self.tuning.stall);
        Ok(rt)
    }
}

/// What a runtime does when it finds itself deadlocked; see
/// [`Builder::on_deadlock`].
///
/// ```
/// use fibra::runtime::OnDeadlock;
///
/// assert_eq!(OnDeadlock::default(), OnDeadlock::Warn);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OnDeadlock {
    /// Tell it (target `fibra::deadlock`, with the dump; to stderr when no
    /// `tracing` subscriber is set) and keep waiting.
    #[default]
    Warn,
    /// Print the report with every fiber's stack to stderr and exit the
    /// process with status 2, as Go does.
    Exit,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl<Flavor> Clone for Builder<Flavor> {
    fn clone(&self) -> Self {
        Builder {
            stack_size: self.stack_size,
            workers: self.workers,
            tuning: self.tuning,
            flavor: PhantomData,
        }
    }
}
