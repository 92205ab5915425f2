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
    /// Priority data (TCP urgent data, `POLLPRI`): not public, for the
    /// hooked `poll`, which must wait for what it was asked.
    pub(crate) const PRIORITY: Interest = Interest(4);
    pub(crate) const EMPTY: Interest = Interest(0);

    /// Whether readability is included.
    pub fn is_readable(self) -> bool {
        self.0 & 1 != 0
    }

    /// Whether writability is included.
    pub fn is_writable(self) -> bool {
        self.0 & 2 != 0
    }

    /// Whether priority data is included (see [`Interest::PRIORITY`]).
    pub(crate) fn is_priority(self) -> bool {
        self.0 & 4 != 0
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
        let names = [
            (self.is_readable(), "READABLE"),
            (self.is_writable(), "WRITABLE"),
            (self.is_priority(), "PRIORITY"),
        ];
        let mut any = false;
        for (_, name) in names.iter().filter(|(set, _)| *set) {
            if any {
                f.write_str(" | ")?;
            }
            f.write_str(name)?;
            any = true;
        }
        if !any {
            f.write_str("(empty)")?;
        }
        Ok(())
    }
}
