//! The harness: where a call is made (the places), what it did (a
//! [`Record`]), the child processes that run the cases of one place, and
//! the comparison of their records with its report and counts.

use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use libc::c_int;

use crate::api::Api;
use crate::sys::SENTINEL;
use crate::util;

/// Where a call is made.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Place {
    /// glibc's own function, on a plain thread.
    Glibc,
    /// The hook, in a fiber.
    Fiber,
    /// The hook, on a plain thread.
    Thread,
}

impl Place {
    const ALL: [Place; 3] = [Place::Glibc, Place::Fiber, Place::Thread];

    fn name(self) -> &'static str {
        match self {
            Place::Glibc => "glibc",
            Place::Fiber => "fiber",
            Place::Thread => "thread",
        }
    }

    fn parse(s: &str) -> Option<Place> {
        Place::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// Two timing-derived values (microseconds) agree within this, or within
/// a billionth of the larger: a deadline that saturates (a huge timeout)
/// leaves a time measured against a fixed end, which each place reaches
/// at a different moment.
const TOLERANCE_US: i128 = 200_000;

/// What one call did, in a form two places can compare.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Record {
    pub(crate) ret: i64,
    errno: i32,
    /// Named output bytes, compared exactly.
    out: Vec<(String, Vec<u8>)>,
    /// Named timing-derived values in microseconds with their upper bound:
    /// equal within [`TOLERANCE_US`], each at most its bound.
    approx: Vec<(String, i128, i128)>,
    /// What the peer received.
    peer: Vec<u8>,
    /// The case did not answer: its child died or hung.
    crash: Option<String>,
}

impl Record {
    pub(crate) fn new(ret: impl TryInto<i64>, errno: c_int) -> Record {
        Record {
            ret: ret.try_into().unwrap_or(i64::MIN + 1),
            errno,
            ..Record::default()
        }
    }

    fn crashed(why: String) -> Record {
        Record {
            ret: i64::MIN,
            crash: Some(why),
            ..Record::default()
        }
    }

    pub(crate) fn out(mut self, name: &str, bytes: impl Into<Vec<u8>>) -> Record {
        self.out.push((name.to_string(), bytes.into()));
        self
    }

    pub(crate) fn flag(self, name: &str, v: bool) -> Record {
        self.out(name, if v { "yes" } else { "no" })
    }

    pub(crate) fn int(self, name: &str, v: impl fmt::Display) -> Record {
        self.out(name, v.to_string())
    }

    pub(crate) fn approx(mut self, name: &str, value_us: i128, bound_us: i128) -> Record {
        self.approx.push((name.to_string(), value_us, bound_us));
        self
    }

    pub(crate) fn peer(mut self, bytes: impl Into<Vec<u8>>) -> Record {
        self.peer = bytes.into();
        self
    }

    fn agrees(&self, other: &Record) -> bool {
        self.ret == other.ret
            && self.errno == other.errno
            && self.out == other.out
            && self.peer == other.peer
            && self.crash == other.crash
            && self.approx.len() == other.approx.len()
            && self
                .approx
                .iter()
                .zip(&other.approx)
                .all(|((n1, v1, b1), (n2, v2, b2))| {
                    n1 == n2
                        && b1 == b2
                        && v1 <= b1
                        && v2 <= b2
                        && (v1 - v2).abs()
                            <= TOLERANCE_US.max(v1.abs().max(v2.abs()) / 1_000_000_000)
                })
    }

    /// One line of text (no spaces inside a token), for a child's stdout.
    fn encode(&self) -> String {
        let mut s = format!("r={} e={}", self.ret, self.errno);
        for (n, b) in &self.out {
            s += &format!(" o={n}={}", hex(b));
        }
        for (n, v, b) in &self.approx {
            s += &format!(" a={n}={v}={b}");
        }
        s += &format!(" p={}", hex(&self.peer));
        if let Some(c) = &self.crash {
            s += &format!(" c={}", hex(c.as_bytes()));
        }
        s
    }

    fn decode(line: &str) -> Option<Record> {
        let mut r = Record::default();
        for token in line.split_whitespace() {
            let (k, v) = token.split_once('=')?;
            match k {
                "r" => r.ret = v.parse().ok()?,
                "e" => r.errno = v.parse().ok()?,
                "o" => {
                    let (n, b) = v.split_once('=')?;
                    r.out.push((n.to_string(), unhex(b)?));
                }
                "a" => {
                    let mut it = v.split('=');
                    let n = it.next()?.to_string();
                    let value = it.next()?.parse().ok()?;
                    let bound = it.next()?.parse().ok()?;
                    r.approx.push((n, value, bound));
                }
                "p" => r.peer = unhex(v)?,
                "c" => r.crash = Some(String::from_utf8_lossy(&unhex(v)?).into_owned()),
                _ => return None,
            }
        }
        Some(r)
    }
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(c) = &self.crash {
            return write!(f, "NO ANSWER: {c}");
        }
        write!(f, "ret={} errno={}", self.ret, errno_name(self.errno))?;
        for (n, b) in &self.out {
            write!(f, " {n}={}", show(b))?;
        }
        for (n, v, b) in &self.approx {
            write!(f, " {n}~{v}us(<={b})")?;
        }
        if !self.peer.is_empty() {
            write!(f, " peer={}", show(&self.peer))?;
        }
        Ok(())
    }
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Bytes for a human: text if they are text, else hex (long ones cut).
fn show(b: &[u8]) -> String {
    if b.iter().all(|&c| (0x20..0x7f).contains(&c)) && b.len() <= 200 {
        return format!("{:?}", String::from_utf8_lossy(b));
    }
    if b.len() <= 64 {
        return format!("[{}]", hex(b));
    }
    format!(
        "[{} bytes, {}..., fnv {:016x}]",
        b.len(),
        hex(&b[..32]),
        fnv(b)
    )
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A short stand-in for many bytes: their length and hash.
pub(crate) fn digest(b: &[u8]) -> Vec<u8> {
    format!("{} bytes, fnv {:016x}", b.len(), fnv(b)).into_bytes()
}

pub(crate) fn errno_name(e: i32) -> String {
    let name = match e {
        SENTINEL => return "untouched".to_string(),
        0 => "0",
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EFAULT => "EFAULT",
        libc::EEXIST => "EEXIST",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::EMFILE => "EMFILE",
        libc::EPIPE => "EPIPE",
        libc::ERANGE => "ERANGE",
        libc::ENOSYS => "ENOSYS",
        libc::ENOTSOCK => "ENOTSOCK",
        libc::EDESTADDRREQ => "EDESTADDRREQ",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::ECONNRESET => "ECONNRESET",
        libc::EISCONN => "EISCONN",
        libc::ENOTCONN => "ENOTCONN",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EALREADY => "EALREADY",
        libc::EINPROGRESS => "EINPROGRESS",
        libc::ECANCELED => "ECANCELED",
        _ => return e.to_string(),
    };
    format!("{name}({e})")
}

type CaseFn = Arc<dyn Fn(&Api) -> Record + Send + Sync>;

/// One call of a function, with its inputs, as a closure that makes its
/// fds, calls the function of the `Api` it is given, and records.
pub(crate) struct Case {
    name: String,
    func: CaseFn,
}

pub(crate) fn case(
    name: impl Into<String>,
    f: impl Fn(&Api) -> Record + Send + Sync + 'static,
) -> Case {
    Case {
        name: name.into(),
        func: Arc::new(f),
    }
}

/// A hooked function and its cases.
pub(crate) struct Function {
    name: &'static str,
    cases: Vec<Case>,
}

impl Function {
    pub(crate) fn new(name: &'static str, cases: Vec<Case>) -> Function {
        Function { name, cases }
    }
}

/// The stack of the fiber each case runs in.
pub(crate) const STACK: usize = 256 * 1024;
/// A child silent for this long is taken to hang in its case.
const CASE_LIMIT: Duration = Duration::from_secs(15);

/// The differences from glibc the hook keeps, each named in the hook's
/// docs (`src/hook/mod.rs`, "Differences from glibc that remain"):
/// (function, case, place). Such a case is reported as known, not as a
/// failure; one that agrees is told to leave this list.
const KNOWN: &[(&str, &str, &str)] = &[
    // An unreadable timeout or request faults in a fiber, where the
    // kernel says EFAULT (the hook reads it to park).
    ("nanosleep", "inaccessible request", "fiber"),
    (
        "clock_nanosleep",
        "monotonic, inaccessible request",
        "fiber",
    ),
    (
        "epoll_pwait2",
        "one fd ready, inaccessible timeout",
        "fiber",
    ),
];

fn known(function: &str, case: &str, place: Place) -> bool {
    KNOWN
        .iter()
        .any(|&(f, c, p)| f == function && c == case && p == place.name())
}

/// Runs the differential test `test` over `functions`: each place in a
/// child process (or, in the child, the cases of its place), then compares
/// every case's records and panics listing every mismatch.
pub(crate) fn differential(test: &str, functions: Vec<Function>) {
    if util::is_child(test) {
        child(functions);
        return;
    }
    let n: usize = functions.iter().map(|f| f.cases.len()).sum();
    // The places' children run at once: each is a process of its own.
    let records: Vec<Vec<Record>> = thread::scope(|s| {
        let runs: Vec<_> = Place::ALL
            .iter()
            .map(|&p| s.spawn(move || run_place(test, p, n)))
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let mut mismatches = Vec::new();
    let (mut agreeing, mut i) = (0, 0);
    for f in &functions {
        let mut agree = 0;
        for c in &f.cases {
            let glibc = &records[0][i];
            let mut all = true;
            for (p, recs) in Place::ALL.iter().zip(&records).skip(1) {
                let is_known = known(f.name, &c.name, *p);
                if is_known && glibc.agrees(&recs[i]) {
                    eprintln!(
                        "differential: {} {:?} ({}) now agrees: take it out of KNOWN",
                        f.name,
                        c.name,
                        p.name()
                    );
                } else if !glibc.agrees(&recs[i]) {
                    all = false;
                    let (label, note) = if is_known {
                        ("KNOWN", ", a difference the hook's docs name")
                    } else {
                        ("MISMATCH", "")
                    };
                    let m = format!(
                        "{label} {}: {:?} ({} vs glibc){note}\n    glibc:  {}\n    {:6}  {}",
                        f.name,
                        c.name,
                        p.name(),
                        glibc,
                        format!("{}:", p.name()),
                        recs[i]
                    );
                    eprintln!("{m}");
                    if !is_known {
                        mismatches.push(m);
                    }
                }
            }
            agree += all as usize;
            i += 1;
        }
        let differ = f.cases.len() - agree;
        if differ == 0 {
            eprintln!("differential: {}: {agree} cases agree", f.name);
        } else {
            eprintln!(
                "differential: {}: {agree} cases agree, {differ} of {} differ",
                f.name,
                f.cases.len()
            );
        }
        agreeing += agree;
    }
    eprintln!(
        "differential: {test}: {agreeing} of {n} cases agree in every place, {} mismatches",
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

/// The records of all `n` cases of `test` in `place`, from as many child
/// processes as it takes (a case that kills or hangs its child is recorded
/// as such, and the next child starts after it).
fn run_place(test: &str, place: Place, n: usize) -> Vec<Record> {
    let mut records: Vec<Option<Record>> = vec![None; n];
    let mut from = 0;
    while from < n {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env("FIBRA_CHILD", test)
            .env("DIFF_PLACE", place.name())
            .env("DIFF_FROM", from.to_string())
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot run the test binary as a child");
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let out_reader = thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let err_reader = thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        let (mut current, mut done, mut hung) = (from, false, false);
        loop {
            match rx.recv_timeout(CASE_LIMIT) {
                Ok(line) => {
                    if let Some(i) = line.strip_prefix("DIFF-START ") {
                        current = i.trim().parse().unwrap();
                    } else if let Some(rest) = line.strip_prefix("DIFF-REC ") {
                        let (i, enc) = rest.split_once(' ').unwrap_or((rest, ""));
                        let i: usize = i.parse().unwrap();
                        records[i] = Some(Record::decode(enc).unwrap_or_else(|| {
                            Record::crashed(format!("undecodable record {enc:?}"))
                        }));
                    } else if line.starts_with("DIFF-DONE") {
                        done = true;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    hung = true;
                    let _ = child.kill();
                    break;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        let status = child.wait().unwrap();
        out_reader.join().unwrap();
        let err = err_reader.join().unwrap();
        if done {
            break;
        }
        let tail: String = {
            let lines: Vec<&str> = err
                .lines()
                .filter(|l| {
                    !l.trim().is_empty() && !l.starts_with("running") && !l.starts_with("test ")
                })
                .collect();
            lines[lines.len().saturating_sub(3)..].join(" | ")
        };
        let why = if hung {
            format!("hung: no answer within {CASE_LIMIT:?} (killed)")
        } else {
            format!("the child died: {status}")
        };
        if records[current].is_none() {
            records[current] = Some(Record::crashed(format!("{why}; stderr: {tail}")));
        }
        from = current + 1;
    }
    records
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Record::crashed("no record".to_string())))
        .collect()
}

/// The child's part: runs the cases of its place from `DIFF_FROM` on, one
/// line before and one after each.
fn child(functions: Vec<Function>) {
    let place = Place::parse(&std::env::var("DIFF_PLACE").unwrap()).unwrap();
    let from: usize = std::env::var("DIFF_FROM").unwrap().parse().unwrap();
    prepare_child();
    let cases: Vec<CaseFn> = functions
        .into_iter()
        .flat_map(|f| f.cases)
        .map(|c| c.func)
        .collect();
    let api = Api::of(place);
    if place == Place::Fiber {
        fibra::run(|| {
            for (i, f) in cases.iter().enumerate().skip(from) {
                println!("DIFF-START {i}");
                let f = f.clone();
                let spawned = fibra::Builder::new()
                    .stack_size(STACK)
                    .spawn(move || f(&api))
                    .expect("spawn");
                let rec = spawned
                    .join()
                    .unwrap_or_else(|e| Record::crashed(format!("the fiber failed: {e}")));
                println!("DIFF-REC {i} {}", rec.encode());
            }
        });
    } else {
        for (i, f) in cases.iter().enumerate().skip(from) {
            println!("DIFF-START {i}");
            let rec = catch_unwind(AssertUnwindSafe(|| f(&api))).unwrap_or_else(|p| {
                Record::crashed(format!("panic: {}", util::panic_message(&*p)))
            });
            println!("DIFF-REC {i} {}", rec.encode());
        }
    }
    println!("DIFF-DONE");
}

/// No core files from the cases that fault; fds up to 2048 for the select
/// cases.
fn prepare_child() {
    let zero = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit.
    unsafe { libc::setrlimit(libc::RLIMIT_CORE, &zero) };
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 && lim.rlim_cur < 2048 {
        lim.rlim_cur = lim.rlim_max.min(2048);
        // SAFETY: a valid rlimit.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
}
