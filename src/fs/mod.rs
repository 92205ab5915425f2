//! Files and directories that park the fiber, not the thread: [`std::fs`]'s
//! shapes, run on the blocking pool.
//!
//! Linux has no readiness for regular files: `read(2)` on a file never says
//! `EAGAIN`, it just blocks the thread until the disk (or the network
//! mount, or the FIFO's writer) answers, and every fiber of that thread
//! waits with it. So inside a fiber each call here runs on the blocking
//! pool ([`spawn_blocking`](crate::spawn_blocking)) while the fiber parks
//! and its runtime runs the others. Outside a fiber each call is plain
//! [`std::fs`], on the calling thread, without the pool.
//!
//! Errors are std's, unchanged (`NotFound`, `PermissionDenied`, ...).
//!
//! ```
//! use std::io::{BufRead, BufReader, Write};
//!
//! let dir = std::env::temp_dir().join(format!("fibra-fs-doc-{}", std::process::id()));
//! fibra::run(|| -> std::io::Result<()> {
//!     fibra::fs::create_dir_all(&dir)?;
//!     let path = dir.join("notes.txt");
//!     let mut f = fibra::fs::File::create(&path)?;
//!     f.write_all(b"one\ntwo\nthree\n")?;
//!     // A BufReader over a fibra File: lines come from memory, not a pool
//!     // trip each (see File).
//!     let lines = BufReader::new(fibra::fs::File::open(&path)?)
//!         .lines()
//!         .collect::<std::io::Result<Vec<_>>>()?;
//!     assert_eq!(lines, ["one", "two", "three"]);
//!     for entry in fibra::fs::read_dir(&dir)? {
//!         assert_eq!(entry?.file_name(), "notes.txt");
//!     }
//!     fibra::fs::remove_file(&path)?;
//!     assert_eq!(fibra::fs::metadata(&path).unwrap_err().kind(), std::io::ErrorKind::NotFound);
//!     Ok(())
//! })
//! .unwrap();
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```
//!
//! # Cost, and what is batched
//!
//! A pool trip costs a few tens of microseconds (two thread wake-ups), far
//! less than a disk, far more than a page-cache hit. The whole-file
//! functions ([`read`], [`read_to_string`], [`write()`]) make one trip for the
//! whole file, and are the fastest way to read or write a file at once. A
//! [`File`] reads ahead 64 KiB per trip and serves small reads from memory,
//! so a `BufReader<File>` reading lines costs one trip per 64 KiB, not one
//! per line; [`ReadDir`] fetches entries in batches. Writes are not
//! buffered (a `write` returns when the kernel has the bytes, as std's
//! does): wrap a `File` in a [`BufWriter`](std::io::BufWriter) with a large
//! capacity (64 KiB) to make few trips for many small writes.
//!
//! # Cancellation
//!
//! A fiber cancelled (or timed out) while its call runs on the pool unwinds
//! at once; the call itself runs on to its end on the pool and its result
//! is dropped. It is never torn in the middle: a read's bytes stay in the
//! `File`'s read-ahead for the next read, a write either reached the kernel
//! or not (as after an interrupted `write` on a thread, the caller does not
//! learn which), a `ReadDir`'s fetched entries stay for its next call.

mod dir;
mod file;
mod open_options;
mod read_ahead;

use std::cell::Cell;
use std::io;
use std::path::{Path, PathBuf};

pub use dir::{DirEntry, ReadDir, read_dir};
pub use file::File;
pub use open_options::OpenOptions;
pub use std::fs::{FileType, Metadata, Permissions};

use crate::scheduler::context;

thread_local! {
    /// Pool trips made by this thread's fibers for `fibra::fs`.
    static POOL_TRIPS: Cell<u64> = const { Cell::new(0) };
}

/// How many trips to the blocking pool `fibra::fs` calls made from fibers
/// of the calling thread, since the thread started. For tests that check
/// the batching (a `BufReader<File>` must not cost a trip per line); not a
/// stable API.
///
/// ```
/// let before = fibra::fs::pool_trips();
/// fibra::run(|| fibra::fs::metadata(".").unwrap());
/// assert_eq!(fibra::fs::pool_trips(), before + 1);
/// ```
#[doc(hidden)]
pub fn pool_trips() -> u64 {
    POOL_TRIPS.with(Cell::get)
}

/// Whether the caller is a fiber (or a runtime's `block_on` closure), where
/// a blocking syscall would stall other fibers.
fn in_fiber() -> bool {
    context::current().is_some()
}

/// Runs `f` on the blocking pool while the fiber parks, or right here
/// outside a runtime. A cancelled fiber unwinds at once; `f` runs on.
fn off_thread<T, F>(f: F) -> T
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    if !in_fiber() {
        return f();
    }
    POOL_TRIPS.with(|trips| trips.set(trips.get() + 1));
    crate::blocking::spawn_blocking(f)
}

/// Reads the whole file at `path`, like [`std::fs::read`], in one pool
/// trip.
///
/// ```
/// let path = std::env::temp_dir().join(format!("fibra-read-{}", std::process::id()));
/// std::fs::write(&path, b"bytes").unwrap();
/// let data = fibra::run(|| fibra::fs::read(&path)).unwrap();
/// assert_eq!(data, b"bytes");
/// # std::fs::remove_file(&path).unwrap();
/// ```
pub fn read<P: AsRef<Path>>(path: P) -> io::Result<Vec<u8>> {
    let path = path.as_ref().to_owned();
    off_thread(move || std::fs::read(path))
}

/// Reads the whole file at `path` as UTF-8, like [`std::fs::read_to_string`]
/// (`InvalidData` if it is not), in one pool trip.
///
/// ```
/// let path = std::env::temp_dir().join(format!("fibra-read-str-{}", std::process::id()));
/// std::fs::write(&path, "text").unwrap();
/// assert_eq!(fibra::run(|| fibra::fs::read_to_string(&path)).unwrap(), "text");
/// # std::fs::remove_file(&path).unwrap();
/// ```
pub fn read_to_string<P: AsRef<Path>>(path: P) -> io::Result<String> {
    let path = path.as_ref().to_owned();
    off_thread(move || std::fs::read_to_string(path))
}

/// Writes `contents` as the whole file at `path`, creating or truncating
/// it, like [`std::fs::write`], in one pool trip. In a fiber the bytes are
/// copied once, so the pool thread owns them even if the fiber is
/// cancelled.
///
/// ```
/// let path = std::env::temp_dir().join(format!("fibra-write-{}", std::process::id()));
/// fibra::run(|| fibra::fs::write(&path, "hello")).unwrap();
/// assert_eq!(std::fs::read(&path).unwrap(), b"hello");
/// # std::fs::remove_file(&path).unwrap();
/// ```
pub fn write<P: AsRef<Path>, C: AsRef<[u8]>>(path: P, contents: C) -> io::Result<()> {
    if !in_fiber() {
        return std::fs::write(path, contents);
    }
    let path = path.as_ref().to_owned();
    let contents = contents.as_ref().to_vec();
    off_thread(move || std::fs::write(path, contents))
}

/// The metadata of what `path` names, following symlinks, like
/// [`std::fs::metadata`].
///
/// ```
/// let meta = fibra::run(|| fibra::fs::metadata("/")).unwrap();
/// assert!(meta.is_dir());
/// ```
pub fn metadata<P: AsRef<Path>>(path: P) -> io::Result<Metadata> {
    let path = path.as_ref().to_owned();
    off_thread(move || std::fs::metadata(path))
}

/// The metadata of `path` itself, not following a symlink, like
/// [`std::fs::symlink_metadata`].
///
/// ```
/// let meta = fibra::run(|| fibra::fs::symlink_metadata("/")).unwrap();
/// assert!(meta.is_dir());
/// ```
pub fn symlink_metadata<P: AsRef<Path>>(path: P) -> io::Result<Metadata> {
    let path = path.as_ref().to_owned();
    off_thread(move || std::fs::symlink_metadata(path))
}

/// Removes a file (or symlink), like [`std::fs::remove_file`].
///
/// ```
/// let path = std::env::temp_dir().join(format!("fibra-rm-{}", std::process::id()));
/// std::fs::write(&path, "x").unwrap();
/// fibra::run(|| fibra::fs::remove_file(&path)).unwrap();
/// assert!(!path.exists());
/// ```
pub fn remove_file<P: AsRef<Path>>(path: P) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    off_thread(move || std::fs::remove_file(path))
}

/// Renames `from` to `to`, replacing `to` if it is a file, like
/// [`std::fs::rename`].
///
/// ```
/// let dir = std::env::temp_dir();
/// let (a, b) = (
///     dir.join(format!("fibra-mv-a-{}", std::process::id())),
///     dir.join(format!("fibra-mv-b-{}", std::process::id())),
/// );
/// std::fs::write(&a, "x").unwrap();
/// fibra::run(|| fibra::fs::rename(&a, &b)).unwrap();
/// assert!(!a.exists() && b.exists());
/// # std::fs::remove_file(&b).unwrap();
/// ```
pub fn rename<P: AsRef<Path>, Q: AsRef<Path>>(from: P, to: Q) -> io::Result<()> {
    let (from, to) = (from.as_ref().to_owned(), to.as_ref().to_owned());
    off_thread(move || std::fs::rename(from, to))
}

/// Copies the contents and permissions of `from` to `to`, like
/// [`std::fs::copy`]; returns the bytes copied.
///
/// ```
/// let dir = std::env::temp_dir();
/// let (a, b) = (
///     dir.join(format!("fibra-cp-a-{}", std::process::id())),
///     dir.join(format!("fibra-cp-b-{}", std::process::id())),
/// );
/// std::fs::write(&a, "abc").unwrap();
/// assert_eq!(fibra::run(|| fibra::fs::copy(&a, &b)).unwrap(), 3);
/// # std::fs::remove_file(&a).unwrap();
/// # std::fs::remove_file(&b).unwrap();
/// ```
pub fn copy<P: AsRef<Path>, Q: AsRef<Path>>(from: P, to: Q) -> io::Result<u64> {
    let (from, to) = (from.as_ref().to_owned(), to.as_ref().to_owned());
    off_thread(move || std::fs::copy(from, to))
}

/// Creates a directory, like [`std::fs::create_dir`] (`AlreadyExists` if
/// it does).
///
/// ```
/// let dir = std::env::temp_dir().join(format!("fibra-mkdir-{}", std::process::id()));
/// fibra::run(|| fibra::fs::create_dir(&dir)).unwrap();
/// assert!(dir.is_dir());
/// # std::fs::remove_dir(&dir).unwrap();
/// ```
pub fn create_dir<P: AsRef<Path>>(path: P) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    off_thread(move || std::fs::create_dir(path))
}

/// Creates a directory and every missing parent, like
/// [`std::fs::create_dir_all`] (nothing to do if it exists).
///
/// ```
/// let top = std::env::temp_dir().join(format!("fibra-mkdirs-{}", std::process::id()));
/// fibra::run(|| fibra::fs::create_dir_all(top.join("a/b/c"))).unwrap();
/// assert!(top.join("a/b/c").is_dir());
/// # std::fs::remove_dir_all(&top).unwrap();
/// ```
pub fn create_dir_all<P: AsRef<Path>>(path: P) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    off_thread(move || std::fs::create_dir_all(path))
}

/// Removes an empty directory, like [`std::fs::remove_dir`].
///
/// ```
/// let dir = std::env::temp_dir().join(format!("fibra-rmdir-{}", std::process::id()));
/// std::fs::create_dir(&dir).unwrap();
/// fibra::run(|| fibra::fs::remove_dir(&dir)).unwrap();
/// assert!(!dir.exists());
/// ```
pub fn remove_dir<P: AsRef<Path>>(path: P) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    off_thread(move || std::fs::remove_dir(path))
}

/// Removes a directory and everything in it, like
/// [`std::fs::remove_dir_all`], in one pool trip.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("fibra-rmdirs-{}", std::process::id()));
/// std::fs::create_dir_all(dir.join("x/y")).unwrap();
/// fibra::run(|| fibra::fs::remove_dir_all(&dir)).unwrap();
/// assert!(!dir.exists());
/// ```
pub fn remove_dir_all<P: AsRef<Path>>(path: P) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    off_thread(move || std::fs::remove_dir_all(path))
}

/// The absolute path with every symlink and `..` resolved, like
/// [`std::fs::canonicalize`].
///
/// ```
/// let root = fibra::run(|| fibra::fs::canonicalize("/tmp/..")).unwrap();
/// assert_eq!(root, std::path::Path::new("/"));
/// ```
pub fn canonicalize<P: AsRef<Path>>(path: P) -> io::Result<PathBuf> {
    let path = path.as_ref().to_owned();
    off_thread(move || std::fs::canonicalize(path))
}

/// Whether `path` names something that exists (following symlinks), like
/// [`std::fs::exists`]: `Ok(false)` if not, an error if that cannot be
/// told (a permission denied on the way).
///
/// ```
/// assert!(fibra::run(|| fibra::fs::exists("/")).unwrap());
/// assert!(!fibra::run(|| fibra::fs::exists("/no/such/path")).unwrap());
/// ```
pub fn exists<P: AsRef<Path>>(path: P) -> io::Result<bool> {
    let path = path.as_ref().to_owned();
    off_thread(move || std::fs::exists(path))
}
