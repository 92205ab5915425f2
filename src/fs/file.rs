//! [`File`]: std's `File` whose calls park the fiber, with a read-ahead
//! buffer so that small reads are served from memory.
//!
//! # Ground rules
//!
//! The std file and its read-ahead live in one [`Shared`], behind an `Arc`:
//! a call that goes to the pool takes a clone, so a cancelled fiber's job
//! finishes on the pool with the file alive and leaves it consistent.
//!
//! The read-ahead is behind a std `Mutex`. A pool job takes it with `lock`
//! (it may wait there: it is a pool thread). A fiber only ever
//! `try_lock`s it, to serve a read from memory: if a job holds it, the
//! fiber sends its call to the pool too, and never blocks its thread.
//! Every call that moves the file's offset (read, write, seek, `set_len`)
//! holds the lock, so the offset the user sees is always the kernel's
//! minus the unread read-ahead.

use std::fmt;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use super::read_ahead::ReadAhead;
use super::{Metadata, OpenOptions, Permissions, in_fiber, off_thread};

/// The most one `write` sends to the pool in one trip (more is a short
/// write; `write_all` loops).
const WRITE_CHUNK: usize = 1024 * 1024;

/// An open file whose calls park the fiber instead of blocking its thread:
/// std's [`File`](std::fs::File) shapes (`open`, `create`, `options`,
/// `metadata`, `set_len`, `sync_all`, `sync_data`; [`Read`], [`Write`] and
/// [`Seek`], for `File` and for `&File`).
///
/// Inside a fiber each call runs on the blocking pool while the fiber
/// parks; outside a fiber each is std's call, on the calling thread.
///
/// # Read-ahead
///
/// In a fiber a read that finds nothing buffered reads up to 64 KiB in one
/// pool trip and keeps what the caller did not ask for; the next reads are
/// served from that memory, without a trip. So `BufReader<File>`'s 8 KiB
/// reads, or `read_line` loops, cost one trip per 64 KiB. (Outside a fiber
/// reads go straight to the file, as std's do, after what was buffered.)
/// A read returns at most 64 KiB; `read_to_end` and `read_exact` loop as
/// usual, and [`fibra::fs::read`](super::read) reads a whole file in one
/// trip.
///
/// The buffer is invisible to the file's contents and position:
///
/// - [`Seek`] accounts for it: `seek(SeekFrom::Current(0))` is the position
///   after the bytes *returned*, not after those buffered; any seek drops
///   the buffer.
/// - A [`Write`] (and [`set_len`](File::set_len)) first drops the buffer
///   and seeks the file back by the unread bytes, so the bytes land where
///   std would put them. For a FIFO or other stream that cannot seek, the
///   unread bytes are kept for the next read (its reads and writes are
///   separate streams).
/// - Data another process (or another fd) writes into the buffered range
///   after it was read ahead is not seen until the buffer is used up or a
///   seek drops it: read-ahead is a snapshot, as with any buffered reader.
/// - The fd ([`AsRawFd`]) shares the kernel's offset, which is ahead of the
///   `File`'s by the unread read-ahead.
///
/// Writes are not buffered: `write` returns when the kernel has the bytes.
///
/// ```
/// use std::io::{Read, Seek, SeekFrom, Write};
///
/// let path = std::env::temp_dir().join(format!("fibra-file-{}", std::process::id()));
/// fibra::run(|| -> std::io::Result<()> {
///     let mut f = fibra::fs::File::options()
///         .read(true)
///         .write(true)
///         .create(true)
///         .truncate(true)
///         .open(&path)?;
///     f.write_all(b"hello, world")?;
///     f.seek(SeekFrom::Start(0))?;
///     let mut hello = [0; 5];
///     f.read_exact(&mut hello)?; // one trip; ", world" is read ahead
///     assert_eq!(&hello, b"hello");
///     assert_eq!(f.stream_position()?, 5); // not 12
///     f.write_all(b";")?; // lands at 5, as with std
///     f.seek(SeekFrom::Start(0))?;
///     let mut all = String::new();
///     f.read_to_string(&mut all)?;
///     assert_eq!(all, "hello; world");
///     Ok(())
/// })
/// .unwrap();
/// # std::fs::remove_file(&path).unwrap();
/// ```
pub struct File {
    shared: Arc<Shared>,
}

struct Shared {
    file: std::fs::File,
    ahead: Mutex<ReadAhead>,
}

impl Shared {
    /// The read-ahead, for a pool job or a thread outside any fiber.
    fn lock(&self) -> MutexGuard<'_, ReadAhead> {
        self.ahead.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The read-ahead if no one else holds it: never blocks.
    fn try_lock(&self) -> Option<MutexGuard<'_, ReadAhead>> {
        match self.ahead.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }
}

impl File {
    /// Opens a file for reading, like [`std::fs::File::open`].
    ///
    /// In a fiber the `open(2)` itself runs on the pool too: opening a FIFO
    /// waits for a writer, and a network mount may take its time.
    ///
    /// ```
    /// let f = fibra::run(|| fibra::fs::File::open("/etc/hostname"));
    /// # let _ = f;
    /// let err = fibra::run(|| fibra::fs::File::open("/no/such/file")).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    /// ```
    pub fn open<P: AsRef<Path>>(path: P) -> io::Result<File> {
        OpenOptions::new().read(true).open(path)
    }

    /// Opens a file for writing, creating it or truncating it, like
    /// [`std::fs::File::create`].
    ///
    /// ```
    /// use std::io::Write;
    ///
    /// let path = std::env::temp_dir().join(format!("fibra-create-{}", std::process::id()));
    /// fibra::run(|| fibra::fs::File::create(&path)?.write_all(b"new")).unwrap();
    /// assert_eq!(std::fs::read(&path).unwrap(), b"new");
    /// # std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn create<P: AsRef<Path>>(path: P) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
    }

    /// A blank [`OpenOptions`], like [`std::fs::File::options`].
    ///
    /// ```
    /// use std::io::Write;
    ///
    /// let path = std::env::temp_dir().join(format!("fibra-options-{}", std::process::id()));
    /// std::fs::write(&path, "a").unwrap();
    /// fibra::run(|| {
    ///     fibra::fs::File::options().append(true).open(&path)?.write_all(b"b")
    /// })
    /// .unwrap();
    /// assert_eq!(std::fs::read(&path).unwrap(), b"ab");
    /// # std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn options() -> OpenOptions {
        OpenOptions::new()
    }

    /// The file's metadata, like [`std::fs::File::metadata`].
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("fibra-meta-{}", std::process::id()));
    /// std::fs::write(&path, "four").unwrap();
    /// let len = fibra::run(|| fibra::fs::File::open(&path)?.metadata()).unwrap().len();
    /// assert_eq!(len, 4);
    /// # std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn metadata(&self) -> io::Result<Metadata> {
        let shared = self.shared.clone();
        off_thread(move || shared.file.metadata())
    }

    /// Truncates or extends the file to `size` bytes, like
    /// [`std::fs::File::set_len`]; the position does not change. Drops the
    /// read-ahead first (the file's contents change under it).
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("fibra-set-len-{}", std::process::id()));
    /// fibra::run(|| fibra::fs::File::create(&path)?.set_len(10)).unwrap();
    /// assert_eq!(std::fs::metadata(&path).unwrap().len(), 10);
    /// # std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn set_len(&self, size: u64) -> io::Result<()> {
        let shared = self.shared.clone();
        off_thread(move || {
            let mut ahead = shared.lock();
            ahead.drop_unread(&shared.file)?;
            shared.file.set_len(size)
        })
    }

    /// Changes the file's permissions, like
    /// [`std::fs::File::set_permissions`].
    ///
    /// ```
    /// use std::os::unix::fs::PermissionsExt;
    ///
    /// let path = std::env::temp_dir().join(format!("fibra-perm-{}", std::process::id()));
    /// fibra::run(|| {
    ///     let f = fibra::fs::File::create(&path)?;
    ///     f.set_permissions(std::fs::Permissions::from_mode(0o600))
    /// })
    /// .unwrap();
    /// let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    /// assert_eq!(mode & 0o777, 0o600);
    /// # std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn set_permissions(&self, perm: Permissions) -> io::Result<()> {
        let shared = self.shared.clone();
        off_thread(move || shared.file.set_permissions(perm))
    }

    /// Flushes the file's data and metadata to the device, like
    /// [`std::fs::File::sync_all`] (`fsync`).
    ///
    /// ```
    /// use std::io::Write;
    ///
    /// let path = std::env::temp_dir().join(format!("fibra-sync-all-{}", std::process::id()));
    /// fibra::run(|| {
    ///     let mut f = fibra::fs::File::create(&path)?;
    ///     f.write_all(b"durable")?;
    ///     f.sync_all()
    /// })
    /// .unwrap();
    /// # std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn sync_all(&self) -> io::Result<()> {
        let shared = self.shared.clone();
        off_thread(move || shared.file.sync_all())
    }

    /// Flushes the file's data (and only the metadata needed to read it
    /// back) to the device, like [`std::fs::File::sync_data`]
    /// (`fdatasync`).
    ///
    /// ```
    /// use std::io::Write;
    ///
    /// let path = std::env::temp_dir().join(format!("fibra-sync-data-{}", std::process::id()));
    /// fibra::run(|| {
    ///     let mut f = fibra::fs::File::create(&path)?;
    ///     f.write_all(b"data")?;
    ///     f.sync_data()
    /// })
    /// .unwrap();
    /// # std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn sync_data(&self) -> io::Result<()> {
        let shared = self.shared.clone();
        off_thread(move || shared.file.sync_data())
    }

    fn read_into(&self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        if !in_fiber() {
            // std's read, after whatever a fiber left read ahead.
            let mut ahead = self.shared.lock();
            if ahead.unread() > 0 {
                return Ok(ahead.take(out));
            }
            return (&self.shared.file).read(out);
        }
        loop {
            if let Some(mut ahead) = self.shared.try_lock()
                && ahead.unread() > 0
            {
                return Ok(ahead.take(out)); // from memory: no trip
            }
            let shared = self.shared.clone();
            let there = off_thread(move || shared.lock().fill(&shared.file))?;
            if there == 0 {
                return Ok(0); // end of file
            }
            // Served from the buffer on the next turn (unless another
            // reader of this `&File` took it first: then read again).
        }
    }

    fn write_from(&self, data: &[u8]) -> io::Result<usize> {
        if !in_fiber() {
            let mut ahead = self.shared.lock();
            ahead.drop_unread(&self.shared.file)?;
            return (&self.shared.file).write(data);
        }
        // The pool thread owns a copy: the write stays whole even if this
        // fiber is cancelled while it runs.
        let chunk = data[..data.len().min(WRITE_CHUNK)].to_vec();
        let shared = self.shared.clone();
        off_thread(move || {
            let mut ahead = shared.lock();
            ahead.drop_unread(&shared.file)?;
            (&shared.file).write(&chunk)
        })
    }

    fn seek_to(&self, pos: SeekFrom) -> io::Result<u64> {
        if !in_fiber() {
            return self.shared.lock().seek(&self.shared.file, pos);
        }
        let shared = self.shared.clone();
        off_thread(move || shared.lock().seek(&shared.file, pos))
    }
}

impl Read for File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_into(buf)
    }
}

impl Read for &File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_into(buf)
    }
}

impl Write for File {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_from(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(()) // nothing is buffered for writing (std's flush is a no-op too)
    }
}

impl Write for &File {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_from(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Seek for File {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.seek_to(pos)
    }
}

impl Seek for &File {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.seek_to(pos)
    }
}

impl From<std::fs::File> for File {
    /// Wraps a std file; its offset is where reading and writing go on.
    ///
    /// ```
    /// let std_file = std::fs::File::open("/").unwrap();
    /// let file = fibra::fs::File::from(std_file);
    /// # let _ = file;
    /// ```
    fn from(file: std::fs::File) -> File {
        File {
            shared: Arc::new(Shared {
                file,
                ahead: Mutex::new(ReadAhead {
                    buf: Box::default(),
                    pos: 0,
                    filled: 0,
                }),
            }),
        }
    }
}

impl AsFd for File {
    /// The file's fd. Its kernel offset is ahead of the `File`'s by the
    /// unread read-ahead (see [`File`]).
    ///
    /// ```
    /// use std::os::fd::AsFd;
    ///
    /// let f = fibra::fs::File::open("/").unwrap();
    /// let _fd = f.as_fd();
    /// ```
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.shared.file.as_fd()
    }
}

impl AsRawFd for File {
    /// The file's fd. Its kernel offset is ahead of the `File`'s by the
    /// unread read-ahead (see [`File`]).
    ///
    /// ```
    /// use std::os::fd::AsRawFd;
    ///
    /// let f = fibra::fs::File::open("/").unwrap();
    /// assert!(f.as_raw_fd() >= 0);
    /// ```
    fn as_raw_fd(&self) -> RawFd {
        self.shared.file.as_raw_fd()
    }
}

impl fmt::Debug for File {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("File")
            .field("fd", &self.shared.file.as_raw_fd())
            .finish_non_exhaustive()
    }
}
