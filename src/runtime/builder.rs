//! Configuration of a [`Runtime`](super::Runtime).

use std::io;
use std::marker::PhantomData;

use crate::runtime::core::Core;
use crate::runtime::workers::Workers;
use crate::runtime::{CurrentThread, Runtime};
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
    flavor: PhantomData<fn() -> Flavor>,
}

impl Builder {
    /// The default configuration: a current-thread runtime with stacks of
    /// [`DEFAULT_STACK_SIZE`](crate::DEFAULT_STACK_SIZE).
    pub fn new() -> Builder {
        Builder {
            stack_size: stack::DEFAULT_STACK_SIZE,
            workers: 0,
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
        Ok(Runtime::from_flavor(CurrentThread::new(Core::new(
            stack_size, None,
        )?)))
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
        Ok(Runtime::from_flavor(Workers::start(
            self.workers,
            stack_size,
        )?))
    }
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
            flavor: PhantomData,
        }
    }
}
