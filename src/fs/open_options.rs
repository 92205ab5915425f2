//! [`OpenOptions`]: std's builder for opening files, opening on the pool.

use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::{File, off_thread};

/// How to open a file: std's [`OpenOptions`](std::fs::OpenOptions)
/// builder, whose [`open`](OpenOptions::open) runs on the blocking pool
/// in a fiber (on the calling thread outside one) and gives a
/// [`fibra::fs::File`](File).
///
/// ```
/// use std::io::Write;
///
/// let path = std::env::temp_dir().join(format!("fibra-open-options-{}", std::process::id()));
/// fibra::run(|| -> std::io::Result<()> {
///     let mut f = fibra::fs::OpenOptions::new().create_new(true).write(true).open(&path)?;
///     f.write_all(b"once")?;
///     let again = fibra::fs::OpenOptions::new().create_new(true).write(true).open(&path);
///     assert_eq!(again.unwrap_err().kind(), std::io::ErrorKind::AlreadyExists);
///     Ok(())
/// })
/// .unwrap();
/// # std::fs::remove_file(&path).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct OpenOptions(std::fs::OpenOptions);

impl OpenOptions {
    /// All options off, like [`std::fs::OpenOptions::new`]: set at least
    /// `read`, `write` or `append` before opening.
    ///
    /// ```
    /// let f = fibra::fs::OpenOptions::new().read(true).open("/");
    /// assert!(f.is_ok());
    /// ```
    pub fn new() -> OpenOptions {
        OpenOptions(std::fs::OpenOptions::new())
    }

    /// Open for reading.
    ///
    /// ```
    /// let mut options = fibra::fs::OpenOptions::new();
    /// options.read(true);
    /// ```
    pub fn read(&mut self, read: bool) -> &mut OpenOptions {
        self.0.read(read);
        self
    }

    /// Open for writing (from the start, over what is there unless
    /// `truncate` or `append`).
    ///
    /// ```
    /// let mut options = fibra::fs::OpenOptions::new();
    /// options.write(true);
    /// ```
    pub fn write(&mut self, write: bool) -> &mut OpenOptions {
        self.0.write(write);
        self
    }

    /// Open for appending: every write goes to the end (`O_APPEND`).
    ///
    /// ```
    /// let mut options = fibra::fs::OpenOptions::new();
    /// options.append(true);
    /// ```
    pub fn append(&mut self, append: bool) -> &mut OpenOptions {
        self.0.append(append);
        self
    }

    /// Truncate the file to 0 bytes when opening it (needs `write`).
    ///
    /// ```
    /// let mut options = fibra::fs::OpenOptions::new();
    /// options.write(true).truncate(true);
    /// ```
    pub fn truncate(&mut self, truncate: bool) -> &mut OpenOptions {
        self.0.truncate(truncate);
        self
    }

    /// Create the file if it does not exist (needs `write` or `append`).
    ///
    /// ```
    /// let mut options = fibra::fs::OpenOptions::new();
    /// options.write(true).create(true);
    /// ```
    pub fn create(&mut self, create: bool) -> &mut OpenOptions {
        self.0.create(create);
        self
    }

    /// Create the file, failing with `AlreadyExists` if it exists
    /// (`O_EXCL`: atomic; `create` and `truncate` are then ignored).
    ///
    /// ```
    /// let mut options = fibra::fs::OpenOptions::new();
    /// options.write(true).create_new(true);
    /// ```
    pub fn create_new(&mut self, create_new: bool) -> &mut OpenOptions {
        self.0.create_new(create_new);
        self
    }

    /// The permission bits a created file gets (before the umask), like
    /// [`OpenOptionsExt::mode`]; 0o666 unless set.
    ///
    /// ```
    /// let mut options = fibra::fs::OpenOptions::new();
    /// options.write(true).create(true).mode(0o600);
    /// ```
    pub fn mode(&mut self, mode: u32) -> &mut OpenOptions {
        self.0.mode(mode);
        self
    }

    /// Extra `open(2)` flags (`libc::O_NOFOLLOW`, ...), like
    /// [`OpenOptionsExt::custom_flags`].
    ///
    /// ```
    /// let mut options = fibra::fs::OpenOptions::new();
    /// options.read(true).custom_flags(libc::O_NOFOLLOW);
    /// ```
    pub fn custom_flags(&mut self, flags: i32) -> &mut OpenOptions {
        self.0.custom_flags(flags);
        self
    }

    /// Opens `path` with these options, like
    /// [`std::fs::OpenOptions::open`], on the pool in a fiber.
    ///
    /// ```
    /// let err = fibra::run(|| fibra::fs::OpenOptions::new().read(true).open("/no/such"));
    /// assert_eq!(err.unwrap_err().kind(), std::io::ErrorKind::NotFound);
    /// ```
    pub fn open<P: AsRef<Path>>(&self, path: P) -> io::Result<File> {
        let options = self.0.clone();
        let path = path.as_ref().to_owned();
        off_thread(move || options.open(path)).map(File::from)
    }
}

impl Default for OpenOptions {
    /// Same as [`OpenOptions::new`].
    ///
    /// ```
    /// let _options = fibra::fs::OpenOptions::default();
    /// ```
    fn default() -> OpenOptions {
        OpenOptions::new()
    }
}

impl From<std::fs::OpenOptions> for OpenOptions {
    /// Takes std's builder as it is set.
    ///
    /// ```
    /// let mut std_options = std::fs::OpenOptions::new();
    /// std_options.read(true);
    /// let options = fibra::fs::OpenOptions::from(std_options);
    /// assert!(options.open("/").is_ok());
    /// ```
    fn from(options: std::fs::OpenOptions) -> OpenOptions {
        OpenOptions(options)
    }
}
