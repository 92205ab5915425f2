//! `fibra::fs`: std's results, off the runtime's thread, with batched reads.

mod util;

use std::ffi::CString;
use std::io::{BufRead, BufReader, ErrorKind, Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use fibra::fs;

/// A fresh directory for one test, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("fibra-test-fs-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `f` on a thread of its own and fails if it takes over a minute.
fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::spawn(move || tx.send(f()).unwrap());
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(value) => value,
        Err(_) => match thread.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => panic!("the test did not finish within 60 s"),
        },
    }
}

fn mkfifo(path: &Path) {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
    let r = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(r, 0, "mkfifo: {}", std::io::Error::last_os_error());
}

/// A fiber that adds one to `ticks` every 10 ms; cancel it when done.
fn ticker(ticks: Arc<AtomicUsize>) -> fibra::JoinHandle<()> {
    fibra::spawn(move || {
        loop {
            fibra::sleep(Duration::from_millis(10));
            ticks.fetch_add(1, Ordering::SeqCst);
        }
    })
}

#[test]
fn opening_a_fifo_that_waits_for_its_writer_leaves_the_other_fibers_running() {
    let dir = TempDir::new("fifo");
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    // The writer opens the FIFO once the ticker fiber has ticked `TICKS`
    // times since the open began (or after 20 s): the open can end with
    // those ticks only if fibers run while it waits; an open that blocked
    // the thread would end after the 20 s with none. A count the writer
    // waits for, not a bound on the ticker's gaps against a writer at a
    // fixed time (100 ms against 300, and a gap of 400 ms against 1 s
    // after it, raced with a loaded machine): a shared VM that freezes for
    // a second slows the test, it does not fail it.
    const TICKS: usize = 10;
    const NOT_YET: usize = usize::MAX;
    let (text, ticked) = bounded(move || {
        let ticks = Arc::new(AtomicUsize::new(0));
        // The ticks counted when the open began.
        let opening = Arc::new(AtomicUsize::new(NOT_YET));
        let writer = {
            let (ticks, opening, path) = (ticks.clone(), opening.clone(), fifo.clone());
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(20);
                loop {
                    let from = opening.load(Ordering::SeqCst);
                    let ticked = ticks.load(Ordering::SeqCst);
                    if (from != NOT_YET && ticked >= from + TICKS) || Instant::now() > deadline {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                std::fs::write(path, "through the fifo").unwrap();
            })
        };
        let out = fibra::run(|| {
            let ticker = ticker(ticks.clone());
            fibra::sleep(Duration::from_millis(30)); // ticking
            let from = ticks.load(Ordering::SeqCst);
            opening.store(from, Ordering::SeqCst);
            // open(2) of a FIFO for reading blocks until a writer opens it.
            let mut f = fs::File::open(&fifo).unwrap();
            let mut text = String::new();
            f.read_to_string(&mut text).unwrap();
            let ticked = ticks.load(Ordering::SeqCst) - from;
            ticker.cancel();
            (text, ticked)
        });
        writer.join().unwrap();
        out
    });
    assert_eq!(text, "through the fifo");
    assert!(
        ticked >= TICKS,
        "the ticker ticked {ticked} times while the FIFO opened: the open blocked the thread"
    );
}

/// A small deterministic generator for the operation scripts.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

/// What one operation returned, to compare fibra's with std's.
#[derive(PartialEq)]
enum Outcome {
    Read(Vec<u8>),
    Wrote(usize),
    At(u64),
    Len(u64),
    Failed(ErrorKind),
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // The bytes themselves would flood the report.
            Outcome::Read(bytes) => {
                let sum = bytes
                    .iter()
                    .fold(0u64, |h, &b| h.wrapping_mul(31).wrapping_add(b as u64));
                write!(f, "Read({} bytes, hash {sum:#x})", bytes.len())
            }
            Outcome::Wrote(n) => write!(f, "Wrote({n})"),
            Outcome::At(n) => write!(f, "At({n})"),
            Outcome::Len(n) => write!(f, "Len({n})"),
            Outcome::Failed(kind) => write!(f, "Failed({kind:?})"),
        }
    }
}

/// Reads up to `n` bytes, stopping only at the end of the file: one
/// `read` may return less than asked (fibra's returns at most what its
/// read-ahead holds, std's what one syscall gave), so the scripts compare
/// what a loop of reads gets.
fn read_up_to<F: Read>(f: &mut F, n: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0; n];
    let mut got = 0;
    while got < n {
        match f.read(&mut buf[got..])? {
            0 => break,
            k => got += k,
        }
    }
    buf.truncate(got);
    Ok(buf)
}

/// Runs one operation of the script on any Read + Write + Seek.
fn step<F: Read + Write + Seek>(f: &mut F, op: u64, n: u64, fill: u8) -> Outcome {
    let r = match op {
        0..=3 => read_up_to(f, n as usize).map(Outcome::Read),
        4 => {
            let mut buf = vec![0; n as usize];
            f.read_exact(&mut buf).map(|()| Outcome::Read(buf))
        }
        5 | 6 => f.write(&vec![fill; n as usize]).map(Outcome::Wrote),
        7 => f.seek(SeekFrom::Start(n)).map(Outcome::At),
        8 => f.seek(SeekFrom::Current(n as i64 - 5_000)).map(Outcome::At),
        9 => f.seek(SeekFrom::End(-(n as i64 % 3_000))).map(Outcome::At),
        10 => f.stream_position().map(Outcome::At),
        _ => {
            let mut rest = Vec::new();
            f.read_to_end(&mut rest)
                .map(|_| Outcome::Len(rest.len() as u64))
        }
    };
    r.unwrap_or_else(|e| Outcome::Failed(e.kind()))
}

#[test]
fn reads_writes_and_seeks_give_what_std_gives() {
    let dir = TempDir::new("script");
    let (ours, theirs) = (dir.join("fibra"), dir.join("std"));
    let initial: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&ours, &initial).unwrap();
    std::fs::write(&theirs, &initial).unwrap();
    let (o, t) = (ours.clone(), theirs.clone());
    let (file, mut reference, trips) = bounded(move || {
        let mut reference = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(t)
            .unwrap();
        let mut rng = Lcg(18);
        let before = fs::pool_trips();
        let file = fibra::run(|| {
            let mut file = fs::File::options().read(true).write(true).open(o).unwrap();
            for i in 0..3_000 {
                let (op, n) = (rng.next(12), rng.next(70_000));
                let n = if op <= 6 && rng.next(4) > 0 {
                    n % 300
                } else {
                    n
                }; // mostly small
                let fill = (i % 256) as u8;
                let ours = step(&mut file, op, n, fill);
                let theirs = step(&mut reference, op, n, fill);
                assert_eq!(ours, theirs, "operation {i}: op {op}, n {n}");
            }
            file
        });
        (file, reference, fs::pool_trips() - before)
    });
    assert!(trips > 0, "the fiber's calls did not go to the pool");
    // The File moves to another thread, read-ahead and all; outside a
    // fiber it goes on where it was.
    let mut file = std::thread::spawn(move || {
        let mut file = file;
        let mut rng = Lcg(24);
        for i in 0..500 {
            let (op, n) = (rng.next(12), rng.next(5_000));
            let fill = (i % 256) as u8;
            assert_eq!(
                step(&mut file, op, n, fill),
                step(&mut reference, op, n, fill),
                "outside a fiber, operation {i}"
            );
        }
        file
    })
    .join()
    .unwrap();
    file.flush().unwrap();
    drop(file);
    assert_eq!(
        std::fs::read(&ours).unwrap(),
        std::fs::read(&theirs).unwrap()
    );
}

#[test]
fn a_write_after_a_read_lands_where_std_puts_it() {
    let dir = TempDir::new("write-after-read");
    let path = dir.join("f");
    std::fs::write(&path, "0123456789").unwrap();
    bounded(move || {
        fibra::run(|| {
            let mut f = fs::File::options()
                .read(true)
                .write(true)
                .open(&path)
                .unwrap();
            let mut two = [0; 2];
            f.read_exact(&mut two).unwrap(); // reads the rest ahead
            assert_eq!(&two, b"01");
            assert_eq!(f.stream_position().unwrap(), 2);
            f.write_all(b"ab").unwrap();
            assert_eq!(f.stream_position().unwrap(), 4);
            let mut rest = String::new();
            f.read_to_string(&mut rest).unwrap();
            assert_eq!(rest, "456789");
            assert_eq!(fs::read_to_string(&path).unwrap(), "01ab456789");
            // set_len keeps the position and drops stale read-ahead.
            f.seek(SeekFrom::Start(1)).unwrap();
            f.read_exact(&mut two).unwrap();
            f.set_len(5).unwrap();
            assert_eq!(f.stream_position().unwrap(), 3);
            let mut rest = String::new();
            (&f).read_to_string(&mut rest).unwrap();
            assert_eq!(rest, "b4");
            assert_eq!(f.metadata().unwrap().len(), 5);
        });
    });
}

#[test]
fn a_bufreader_over_a_file_reads_lines_from_memory_not_a_pool_trip_each() {
    let dir = TempDir::new("lines");
    let path = dir.join("lines.txt");
    let text: String = (0..10_000)
        .map(|i| format!("line number {i:05}\n"))
        .collect();
    std::fs::write(&path, &text).unwrap(); // 190 000 bytes
    let p = path.clone();
    let (lines, trips) = bounded(move || {
        let before = fs::pool_trips();
        let lines = fibra::run(|| {
            let f = fs::File::open(&p).unwrap();
            BufReader::new(f)
                .lines()
                .collect::<std::io::Result<Vec<_>>>()
                .unwrap()
        });
        (lines, fs::pool_trips() - before)
    });
    let expected: Vec<String> = BufReader::new(std::fs::File::open(&path).unwrap())
        .lines()
        .collect::<std::io::Result<_>>()
        .unwrap();
    assert_eq!(lines, expected);
    // open + ceil(190 000 / 64 KiB) = 3 fills + the fill that finds the end.
    assert!(trips <= 6, "{trips} pool trips for 10 000 lines");
    assert!(
        trips >= 4,
        "{trips} pool trips: did the reads go to the pool?"
    );
}

#[test]
fn outside_a_fiber_it_is_std_on_the_calling_thread() {
    let dir = TempDir::new("outside");
    let path = dir.join("f");
    let before = fs::pool_trips();
    fs::write(&path, "plain").unwrap();
    let mut f = fs::File::open(&path).unwrap();
    let mut s = String::new();
    f.read_to_string(&mut s).unwrap();
    assert_eq!(s, "plain");
    assert_eq!(fs::read(&path).unwrap(), b"plain");
    assert_eq!(fs::read_dir(&dir.0).unwrap().count(), 1);
    assert_eq!(fs::pool_trips(), before, "no pool outside a fiber");
}

#[test]
fn read_dir_lists_what_std_lists() {
    let dir = TempDir::new("read-dir");
    for i in 0..300 {
        // more than a batch
        std::fs::write(dir.join(&format!("file-{i}")), "x").unwrap();
    }
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::os::unix::fs::symlink("file-1", dir.join("link")).unwrap();
    let d = dir.0.clone();
    let ours = bounded(move || {
        fibra::run(|| {
            let mut all = Vec::new();
            for entry in fs::read_dir(&d).unwrap() {
                let entry = entry.unwrap();
                let t = entry.file_type().unwrap();
                assert_eq!(entry.path(), d.join(entry.file_name()));
                assert_eq!(entry.metadata().unwrap().is_dir(), t.is_dir());
                all.push((entry.file_name(), t.is_file(), t.is_dir(), t.is_symlink()));
            }
            all.sort();
            all
        })
    });
    let mut theirs: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            (e.file_name(), t.is_file(), t.is_dir(), t.is_symlink())
        })
        .collect();
    theirs.sort();
    assert_eq!(ours.len(), 302);
    assert_eq!(ours, theirs);
}

#[test]
fn errors_are_std_errors() {
    let dir = TempDir::new("errors");
    let file = dir.join("file");
    std::fs::write(&file, "x").unwrap();
    let missing = dir.join("missing");
    let d = dir.0.clone();
    bounded(move || {
        fibra::run(|| {
            let kind = |e: std::io::Error| e.kind();
            assert_eq!(
                fs::read(&missing).map_err(kind).unwrap_err(),
                ErrorKind::NotFound
            );
            assert_eq!(
                fs::read_to_string(&missing).map_err(kind).unwrap_err(),
                ErrorKind::NotFound
            );
            assert_eq!(
                fs::metadata(&missing).map_err(kind).unwrap_err(),
                ErrorKind::NotFound
            );
            assert_eq!(
                fs::remove_file(&missing).map_err(kind).unwrap_err(),
                ErrorKind::NotFound
            );
            assert_eq!(
                fs::File::open(&missing).map_err(kind).unwrap_err(),
                ErrorKind::NotFound
            );
            assert_eq!(
                fs::rename(&missing, d.join("to"))
                    .map_err(kind)
                    .unwrap_err(),
                ErrorKind::NotFound
            );
            assert_eq!(
                fs::File::options()
                    .write(true)
                    .create_new(true)
                    .open(&file)
                    .map_err(kind)
                    .unwrap_err(),
                ErrorKind::AlreadyExists
            );
            assert_eq!(
                fs::read_dir(&file).map_err(kind).unwrap_err(),
                std::fs::read_dir(&file).map_err(kind).unwrap_err()
            );
            assert_eq!(
                fs::create_dir_all(file.join("sub"))
                    .map_err(kind)
                    .unwrap_err(),
                std::fs::create_dir_all(file.join("sub"))
                    .map_err(kind)
                    .unwrap_err()
            );
            let invalid = d.join("invalid");
            std::fs::write(&invalid, [0xff, 0xfe]).unwrap();
            assert_eq!(
                fs::read_to_string(&invalid).map_err(kind).unwrap_err(),
                ErrorKind::InvalidData
            );
            // A read-only file refuses writes, as std's does.
            let mut ro = fs::File::open(&file).unwrap();
            assert_eq!(
                ro.write(b"no").map_err(kind).unwrap_err(),
                std::fs::File::open(&file)
                    .unwrap()
                    .write(b"no")
                    .map_err(kind)
                    .unwrap_err()
            );
        });
    });
}

#[test]
fn the_path_functions_do_what_std_does() {
    let dir = TempDir::new("paths");
    let d = dir.0.clone();
    bounded(move || {
        fibra::run(|| {
            let deep = d.join("a/b/c");
            fs::create_dir_all(&deep).unwrap();
            assert!(fs::metadata(&deep).unwrap().is_dir());
            let f = deep.join("f");
            fs::write(&f, b"contents").unwrap();
            assert_eq!(fs::read(&f).unwrap(), b"contents");
            let g = d.join("g");
            fs::rename(&f, &g).unwrap();
            assert!(!fs::exists(&f).unwrap());
            assert_eq!(fs::read_to_string(&g).unwrap(), "contents");
            assert_eq!(fs::copy(&g, &f).unwrap(), 8);
            assert_eq!(fs::metadata(&f).unwrap().len(), 8);
            fs::remove_file(&g).unwrap();
            assert!(!fs::exists(&g).unwrap());
            fs::remove_dir_all(d.join("a")).unwrap();
            assert!(!fs::exists(d.join("a")).unwrap());
            fs::create_dir(d.join("e")).unwrap();
            fs::remove_dir(d.join("e")).unwrap();
            assert_eq!(
                fs::canonicalize(d.join(".")).unwrap(),
                std::fs::canonicalize(&d).unwrap()
            );
        });
    });
}

#[test]
fn a_read_cancelled_while_on_the_pool_loses_no_bytes() {
    let dir = TempDir::new("cancel");
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    let got = bounded(move || {
        fibra::run(|| {
            // Read and write: opening does not wait for a writer, and the
            // read blocks (on the pool) until one writes.
            let file = Rc::new(
                fs::File::options()
                    .read(true)
                    .write(true)
                    .open(&fifo)
                    .unwrap(),
            );
            let f = file.clone();
            let reader = fibra::spawn(move || {
                let mut buf = [0; 16];
                (&*f).read(&mut buf)
            });
            fibra::sleep(Duration::from_millis(50)); // its read is on the pool
            reader.cancel();
            assert!(reader.join().unwrap_err().is_cancelled());
            // The read on the pool finishes when bytes come: they go to
            // the read-ahead, where the next reader finds them.
            let mut writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
            writer.write_all(b"kept").unwrap();
            let mut buf = [0; 16];
            let n = (&*file).read(&mut buf).unwrap();
            buf[..n].to_vec()
        })
    });
    assert_eq!(got, b"kept");
}

#[test]
fn a_file_and_its_iterators_are_send() {
    fn is_send<T: Send>() {}
    fn is_sync<T: Sync>() {}
    is_send::<fs::File>();
    is_sync::<fs::File>();
    is_send::<fs::ReadDir>();
    is_send::<fs::DirEntry>();
    is_send::<fs::OpenOptions>();
}
