//! [`read_dir`]: a directory's entries, fetched in batches on the pool.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, TryLockError};

use super::{FileType, Metadata, in_fiber, off_thread};

/// How many entries one pool trip fetches.
const BATCH: usize = 128;

/// An iterator over a directory's entries, like [`std::fs::ReadDir`]: each
/// item is an entry or the error met reading the next one. `.` and `..`
/// are skipped; the order is the file system's.
///
/// In a fiber, entries are fetched on the blocking pool 128 per trip, with
/// each one's [`file_type`](DirEntry::file_type), and then served from
/// memory. Outside a fiber it is std's iterator.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("fibra-read-dir-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// for name in ["a", "b", "c"] {
///     std::fs::write(dir.join(name), name).unwrap();
/// }
/// let mut names = fibra::run(|| {
///     fibra::fs::read_dir(&dir)?
///         .map(|entry| entry.map(|e| e.file_name()))
///         .collect::<std::io::Result<Vec<_>>>()
/// })
/// .unwrap();
/// names.sort();
/// assert_eq!(names, ["a", "b", "c"]);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub struct ReadDir {
    /// Shared with the pool job that fills it: a fiber cancelled (or timed
    /// out) during a fetch leaves the fetched entries here, not lost.
    /// A fiber only `try_lock`s it; the job `lock`s it.
    state: Arc<Mutex<DirState>>,
}

struct DirState {
    /// `None` once the directory is read to its end.
    iter: Option<std::fs::ReadDir>,
    fetched: VecDeque<io::Result<DirEntry>>,
}

impl DirState {
    /// Fetches the next batch (nothing if one is waiting).
    fn fetch(&mut self) {
        if !self.fetched.is_empty() {
            return;
        }
        let Some(iter) = self.iter.as_mut() else {
            return;
        };
        for _ in 0..BATCH {
            match iter.next() {
                Some(entry) => self.fetched.push_back(entry.map(DirEntry::fetched)),
                None => {
                    self.iter = None;
                    return;
                }
            }
        }
    }
}

/// Opens the directory at `path` for listing, like [`std::fs::read_dir`]
/// (errors: `NotFound`, `NotADirectory`, ...). See [`ReadDir`].
///
/// ```
/// let entries = fibra::run(|| fibra::fs::read_dir("/")).unwrap();
/// assert!(entries.count() > 0);
/// let err = fibra::run(|| fibra::fs::read_dir("/no/such/dir")).unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
/// ```
pub fn read_dir<P: AsRef<Path>>(path: P) -> io::Result<ReadDir> {
    let path = path.as_ref().to_owned();
    let state = off_thread(move || {
        let mut state = DirState {
            iter: Some(std::fs::read_dir(path)?),
            fetched: VecDeque::new(),
        };
        // The first batch comes with the open: a small directory costs one
        // trip. (Outside a fiber too: std fetches entries the same way.)
        state.fetch();
        Ok::<_, io::Error>(state)
    })?;
    Ok(ReadDir {
        state: Arc::new(Mutex::new(state)),
    })
}

impl Iterator for ReadDir {
    type Item = io::Result<DirEntry>;

    fn next(&mut self) -> Option<io::Result<DirEntry>> {
        if !in_fiber() {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(entry) = state.fetched.pop_front() {
                return Some(entry);
            }
            let entry = state.iter.as_mut()?.next();
            if entry.is_none() {
                state.iter = None;
            }
            return entry.map(|e| e.map(DirEntry::fetched));
        }
        loop {
            let state = match self.state.try_lock() {
                Ok(state) => Some(state),
                Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
                Err(TryLockError::WouldBlock) => None, // a cancelled fetch still runs
            };
            if let Some(mut state) = state {
                if let Some(entry) = state.fetched.pop_front() {
                    return Some(entry);
                }
                state.iter.as_ref()?;
            }
            let shared = self.state.clone();
            off_thread(move || shared.lock().unwrap_or_else(|e| e.into_inner()).fetch());
        }
    }
}

impl fmt::Debug for ReadDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadDir").finish_non_exhaustive()
    }
}

/// An entry of a directory, from [`ReadDir`], like [`std::fs::DirEntry`].
///
/// ```
/// let entry = fibra::run(|| fibra::fs::read_dir("/")?.next().unwrap()).unwrap();
/// assert!(entry.path().starts_with("/"));
/// ```
pub struct DirEntry {
    inner: Arc<std::fs::DirEntry>,
    /// Learnt with the batch, where it was cheap (most file systems say it
    /// in the listing itself).
    file_type: Option<FileType>,
}

impl DirEntry {
    fn fetched(inner: std::fs::DirEntry) -> DirEntry {
        DirEntry {
            file_type: inner.file_type().ok(),
            inner: Arc::new(inner),
        }
    }

    /// The entry's full path: the directory's path joined with its name.
    ///
    /// ```
    /// let entry = fibra::run(|| fibra::fs::read_dir("/")?.next().unwrap()).unwrap();
    /// assert_eq!(entry.path(), std::path::Path::new("/").join(entry.file_name()));
    /// ```
    pub fn path(&self) -> PathBuf {
        self.inner.path()
    }

    /// The entry's name, without its directory.
    ///
    /// ```
    /// let entry = fibra::run(|| fibra::fs::read_dir("/")?.next().unwrap()).unwrap();
    /// assert!(!entry.file_name().is_empty());
    /// ```
    pub fn file_name(&self) -> OsString {
        self.inner.file_name()
    }

    /// What the entry is (file, directory, symlink — not followed), like
    /// [`std::fs::DirEntry::file_type`]: from memory when the listing said,
    /// else a pool trip.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("fibra-file-type-{}", std::process::id()));
    /// std::fs::create_dir_all(dir.join("sub")).unwrap();
    /// let entry = fibra::run(|| fibra::fs::read_dir(&dir)?.next().unwrap()).unwrap();
    /// assert!(entry.file_type().unwrap().is_dir());
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn file_type(&self) -> io::Result<FileType> {
        if let Some(file_type) = self.file_type {
            return Ok(file_type);
        }
        let inner = self.inner.clone();
        off_thread(move || inner.file_type())
    }

    /// The entry's metadata, not following a symlink, like
    /// [`std::fs::DirEntry::metadata`]: a pool trip.
    ///
    /// ```
    /// let entry = fibra::run(|| fibra::fs::read_dir("/")?.next().unwrap()).unwrap();
    /// let meta = fibra::run(|| entry.metadata()).unwrap();
    /// # let _ = meta;
    /// ```
    pub fn metadata(&self) -> io::Result<Metadata> {
        let inner = self.inner.clone();
        off_thread(move || inner.metadata())
    }
}

impl fmt::Debug for DirEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DirEntry").field(&self.path()).finish()
    }
}
