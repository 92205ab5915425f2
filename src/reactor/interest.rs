//! [`Interest`]: the readiness a waiter asks for and a poll reports
//! (readable, writable, or both). Public as `fibra::io::Interest`.

use std::fmt;
use std::ops::{BitAnd, BitOr};

/// Readiness to wait for, or that was found: readable, writable, or both.
///
/// ```
/// use fibra::io::Interest;
///
/// let both = Interest::READABLE | Interest::WRITABLE;
/// assert!(both.is_readable() && both.is_writable());
/// assert!(!Interest::READABLE.is_writable());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Interest(pub(crate) u8);

impl Interest {
    /// Data can be read (or the peer hung up, or an error is pending).
    pub const READABLE: Interest = Interest(1);
    /// Data can be written (or an error is pending).
    pub const WRITABLE: Interest = Interest(2);
    pub(crate) const EMPTY: Interest = Interest(0);

    /// Whether readability is included.
    pub fn is_readable(self) -> bool {
        self.0 & 1 != 0
    }

    /// Whether writability is included.
    pub fn is_writable(self) -> bool {
        self.0 & 2 != 0
    }

    pub(crate) fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl BitOr for Interest {
    type Output = Interest;
    fn bitor(self, other: Interest) -> Interest {
        Interest(self.0 | other.0)
    }
}

impl BitAnd for Interest {
    type Output = Interest;
    fn bitand(self, other: Interest) -> Interest {
        Interest(self.0 & other.0)
    }
}

impl fmt::Debug for Interest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.is_readable(), self.is_writable()) {
            (true, true) => f.write_str("READABLE | WRITABLE"),
            (true, false) => f.write_str("READABLE"),
            (false, true) => f.write_str("WRITABLE"),
            (false, false) => f.write_str("(empty)"),
        }
    }
}
