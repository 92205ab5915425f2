//! A `tracing` subscriber for the tests of fibra's warnings: keeps every
//! event of the targets `fibra::stall` and `fibra::deadlock`, from any
//! thread (the watchdog's too: it is the global default), with its
//! fields and message as text.

#![allow(dead_code)] // each test file uses its part

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// An event as the subscriber saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub at: Instant,
    pub target: String,
    pub level: tracing::Level,
    /// `name=value ` for each field, the message's too.
    pub fields: String,
}

static SEEN: Mutex<Vec<Seen>> = Mutex::new(Vec::new());

struct Capture;

struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={:?} ", field.name(), value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push_str(&format!("{}={} ", field.name(), value));
    }
}

impl Subscriber for Capture {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("fibra::stall")
            || metadata.target().starts_with("fibra::deadlock")
    }
    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::WARN)
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = String::new();
        event.record(&mut Fields(&mut fields));
        SEEN.lock().unwrap().push(Seen {
            at: Instant::now(),
            target: event.metadata().target().to_owned(),
            level: *event.metadata().level(),
            fields,
        });
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Installs the subscriber (once per test binary).
pub fn capture() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| tracing::subscriber::set_global_default(Capture).unwrap());
}

/// The events of `target` whose text contains every one of `words`.
pub fn seen(target: &str, words: &[&str]) -> Vec<Seen> {
    SEEN.lock()
        .unwrap()
        .iter()
        .filter(|s| s.target == target && words.iter().all(|w| s.fields.contains(w)))
        .cloned()
        .collect()
}

/// [`seen`] once it finds one, or after `within`.
pub fn wait_for(target: &str, words: &[&str], within: Duration) -> Vec<Seen> {
    let deadline = Instant::now() + within;
    loop {
        let found = seen(target, words);
        if !found.is_empty() || Instant::now() >= deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// [`seen`] once it finds `n`, or after `within` (what there is then).
pub fn wait_for_at_least(target: &str, words: &[&str], n: usize, within: Duration) -> Vec<Seen> {
    let deadline = Instant::now() + within;
    loop {
        let found = seen(target, words);
        if found.len() >= n || Instant::now() >= deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every event kept so far, for a failure's message.
pub fn all() -> Vec<Seen> {
    SEEN.lock().unwrap().clone()
}

/// Blocks the thread for `d`, as a crate's blocking call would: by the
/// system call itself, which the `hook` feature (which makes
/// `std::thread::sleep` park the fiber) does not intercept. Resumed with
/// the time left when a signal ends it early (`EINTR`), as std's sleep
/// does: the watchdog's stack sample is one.
#[inline(never)]
pub fn block_thread(d: Duration) {
    let mut ts = libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    };
    loop {
        let mut left = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid timespecs to read and to write.
        let rc = unsafe { libc::syscall(libc::SYS_nanosleep, &ts, &mut left) };
        if rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
        ts = left;
    }
}

/// Runs the CPU for `d` of the thread's own CPU time without parking,
/// however long that takes on the wall clock: on a loaded machine a thread
/// stands preempted part of the time, which the watchdog does not count as
/// the fiber's (see `Watch::run_delay`), so a spin measured on the wall
/// clock could hold its thread for less than the test means.
pub fn spin(d: Duration) {
    let start = thread_cpu();
    let mut n = 0u64;
    while thread_cpu() - start < d {
        for _ in 0..10_000 {
            n = std::hint::black_box(n + 1);
        }
    }
}

/// The calling thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer; the clock always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
