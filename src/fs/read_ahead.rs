//! A [`File`](crate::fs::File)'s read-ahead: bytes read from the file in
//! one pool trip and not yet returned, so that small reads are served from
//! memory.

use std::io::{self, Read, Seek, SeekFrom};

/// How much one pool trip reads ahead.
const READ_AHEAD: usize = 64 * 1024;

/// Bytes read from the file and not yet returned: `buf[pos..filled]`.
///
/// # Invariant
///
/// `pos <= filled <= buf.len()`; the kernel's offset is the `File`'s
/// offset plus `filled - pos` (for a file that can seek).
pub(super) struct ReadAhead {
    /// Empty until the first fill: a file only written or read outside a
    /// fiber never allocates it.
    pub(super) buf: Box<[u8]>,
    pub(super) pos: usize,
    pub(super) filled: usize,
}

impl ReadAhead {
    pub(super) fn unread(&self) -> usize {
        self.filled - self.pos
    }

    /// Copies buffered bytes to `out`; how many.
    pub(super) fn take(&mut self, out: &mut [u8]) -> usize {
        let n = self.unread().min(out.len());
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        n
    }

    /// Reads ahead into the (empty) buffer: one `read` of up to 64 KiB.
    /// Returns how many bytes are there; 0 at end of file.
    pub(super) fn fill(&mut self, file: &std::fs::File) -> io::Result<usize> {
        if self.unread() > 0 {
            return Ok(self.unread()); // another call filled it meanwhile
        }
        if self.buf.is_empty() {
            self.buf = vec![0; READ_AHEAD].into_boxed_slice();
        }
        self.pos = 0;
        self.filled = 0;
        let n = loop {
            match (&*file).read(&mut self.buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
        self.filled = n;
        Ok(n)
    }

    /// Gives back the unread bytes: seeks the file back over them, so its
    /// offset is the `File`'s again. A stream that cannot seek keeps them.
    pub(super) fn drop_unread(&mut self, file: &std::fs::File) -> io::Result<()> {
        let unread = self.unread();
        if unread == 0 {
            return Ok(());
        }
        match (&*file).seek(SeekFrom::Current(-(unread as i64))) {
            Ok(_) => {
                self.pos = 0;
                self.filled = 0;
                Ok(())
            }
            Err(e) if e.raw_os_error() == Some(libc::ESPIPE) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Seeks, with `Current` relative to the `File`'s offset, and drops
    /// the buffer once the seek is done.
    pub(super) fn seek(&mut self, file: &std::fs::File, pos: SeekFrom) -> io::Result<u64> {
        let pos = match pos {
            SeekFrom::Current(n) => SeekFrom::Current(
                n.checked_sub(self.unread() as i64)
                    .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?,
            ),
            other => other,
        };
        let at = (&*file).seek(pos)?;
        self.pos = 0;
        self.filled = 0;
        Ok(at)
    }
}
