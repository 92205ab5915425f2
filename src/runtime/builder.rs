//! Configuration of a [`Runtime`](super::Runtime).

use std::io;

use crate::runtime::Runtime;
use crate::runtime::core::Core;
use crate::stack;

/// Configures and builds a [`Runtime`]; names follow tokio's.
///
/// ```
/// let rt = fibra::Runtime::builder()
///     .stack_size(128 * 1024)
///     .build()?;
/// rt.block_on(|| fibra::spawn(|| ()).join())
///     .unwrap();
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    stack_size: usize,
}

impl Builder {
    /// The default configuration: stacks of
    /// [`DEFAULT_STACK_SIZE`](crate::DEFAULT_STACK_SIZE).
    pub fn new() -> Builder {
        Builder {
            stack_size: stack::DEFAULT_STACK_SIZE,
        }
    }

    /// The stack size of fibers spawned without one of their own. Rounded up
    /// to whole pages (and to at least [`MIN_STACK_SIZE`](crate::MIN_STACK_SIZE)).
    /// Only touched pages use memory, so a generous size costs little.
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = bytes;
        self
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
        let stack_size = stack::validate_size(self.stack_size)?;
        Ok(Runtime::from_core(Core::new(stack_size)?))
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}
