//! [`Profiler`]: where the CPU time of every runtime goes, by fiber and by
//! function, as Go's pprof gives it by goroutine label.
//!
//! ## How
//!
//! A thread of its own (`fibra-profiler`) wakes `hz` times a second and,
//! for each live runtime (the registry), reads how much CPU time its
//! thread has used since the last tick (the thread's CPU clock, read from
//! this thread: Linux's per-thread clock id). A thread that used none is
//! left alone: it waited, and sampling it could only end its wait early.
//! One that used some is sampled: the context its watch word names (the
//! word the runtime stores at every switch) is stopped by the sampler's
//! signal, on the alternate stack, and its stack walked from this thread
//! (`observe::sample`, as a stall warning's stack is). The sample
//! counts once and weighs the CPU time used since the tick before. A
//! runtime found between contexts (polling for I/O, switching) is charged
//! to a frame of its own, `(runtime)`.
//!
//! So the profile is statistical, as pprof's is: a fiber that runs a
//! fraction of the time is caught in about that fraction of the samples.
//! Names are looked up when the profiler stops, on its own thread.
//!
//! ## What it costs
//!
//! At 100 Hz, each busy runtime thread is stopped 100 times a second for
//! the walk (microseconds each); an idle one is never signalled. Like any
//! profiler's signal, a sample may end a system call early with `EINTR`
//! (`nanosleep`, `poll`, socket calls with a timeout) if the thread enters
//! one between the tick's look and the signal; std's `sleep` and
//! `read_exact` carry on by themselves. A runtime built with
//! `stall_stacks(false)` is never signalled: its samples carry the fiber
//! but no stack.

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::observe::pprof::{Message, Strings, value_type};
use crate::observe::resolve::Resolver;
use crate::scheduler::helper;
use crate::scheduler::registry;
use crate::scheduler::stack_trace::Sampled;
use crate::scheduler::stack_trace::walk::RawStack;

/// The highest rate [`Profiler::start`] takes (Go's pprof defaults to 100).
const MAX_HZ: u32 = 1000;

/// Whether a profiler runs in the process (one at a time, as Go's).
static RUNNING: AtomicBool = AtomicBool::new(false);

/// A CPU profiler for every fibra runtime of the process, by fiber and by
/// function; [`stop`](Profiler::stop) it to get the [`Profile`].
///
/// It samples every runtime (current-thread and workers) `hz` times a
/// second while it runs, weighing each sample by the CPU time its thread
/// used since the one before, and labels each with the fiber it caught
/// (its name, or `#id`). See [`Profile::write_pprof`] for `go tool pprof`
/// and [`Profile::write_folded`] for flame graphs.
///
/// What it costs: a busy runtime thread is stopped `hz` times a second
/// for a stack walk of a few microseconds, by the same signal the stall
/// warning samples with (on the thread's alternate stack); an idle one is
/// never signalled. A sample may end a system call early with `EINTR`, as
/// any profiler's signal may. One profiler runs at a time.
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let profiler = fibra::runtime::Profiler::start(100)?;
/// fibra::run(|| {
///     fibra::Builder::new()
///         .name("burner".into())
///         .spawn(|| {
///             let start = Instant::now();
///             while start.elapsed() < Duration::from_millis(200) {
///                 std::hint::black_box(0u64);
///             }
///         })
///         .unwrap()
///         .join()
///         .unwrap();
/// });
/// let profile = profiler.stop();
/// let mut folded = Vec::new();
/// profile.write_folded(&mut folded)?;
/// // Lines such as "fiber:burner;...;rust_out::main::{{closure}} 17"
/// assert!(String::from_utf8(folded).unwrap().contains("fiber:burner;"));
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Profiler {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<Profile>>,
}

impl Profiler {
    /// Starts sampling every runtime of the process `hz` times a second.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a rate of zero or above 1000; `AlreadyExists`
    /// while another profiler runs; an OS error when its thread cannot be
    /// made.
    ///
    /// ```
    /// let err = fibra::runtime::Profiler::start(0).err().unwrap();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    /// ```
    pub fn start(hz: u32) -> io::Result<Profiler> {
        if hz == 0 || hz > MAX_HZ {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("fibra::runtime::Profiler::start({hz}): the rate must be 1..={MAX_HZ} Hz"),
            ));
        }
        if RUNNING.swap(true, Ordering::AcqRel) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "a fibra::runtime::Profiler is already running (one at a time)",
            ));
        }
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let asked = stop.clone();
        let thread = helper::spawn_quiet(|| {
            std::thread::Builder::new()
                .name("fibra-profiler".into())
                .spawn(move || run(hz, &asked))
        });
        match thread {
            Ok(thread) => Ok(Profiler {
                stop,
                thread: Some(thread),
            }),
            Err(e) => {
                RUNNING.store(false, Ordering::Release);
                Err(e)
            }
        }
    }

    /// Stops sampling and returns the profile, its stacks named. Waits
    /// for the sampler's current tick and for the names to be looked up
    /// (the debug info loads the first time in a process), blocking the
    /// calling thread meanwhile.
    pub fn stop(mut self) -> Profile {
        self.finish().unwrap_or_else(|| Profile::empty(0))
    }

    fn finish(&mut self) -> Option<Profile> {
        let thread = self.thread.take()?;
        let (lock, wake) = &*self.stop;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        wake.notify_all();
        let profile = thread.join();
        RUNNING.store(false, Ordering::Release);
        profile.ok()
    }
}

impl Drop for Profiler {
    /// Stops sampling; the profile is dropped.
    fn drop(&mut self) {
        self.finish();
    }
}

impl std::fmt::Debug for Profiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler").finish_non_exhaustive()
    }
}

/// Who a sample caught.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Caught {
    /// The `fiber` label: its name, `#id`, `(root)`, or `(runtime)`.
    fiber: String,
    thread: String,
}

/// What a tick took of one runtime, before names are looked up.
enum Stack {
    Raw(RawStack),
    Missing(&'static str),
    /// Between contexts: polling, switching, the scheduler's own work.
    Runtime,
}

/// The sampler's loop, until `stop` says so; then the profile, named.
fn run(hz: u32, stop: &(Mutex<bool>, Condvar)) -> Profile {
    let began = SystemTime::now();
    let start = Instant::now();
    let period = Duration::from_secs(1) / hz;
    let mut cpu_seen: HashMap<libc::pid_t, u64> = HashMap::new();
    let mut shots: Vec<(Caught, Stack, u64)> = Vec::new();
    let mut next = start + period;
    loop {
        {
            let (lock, wake) = stop;
            let mut stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if *stopped {
                    break;
                }
                let now = Instant::now();
                if now >= next {
                    break;
                }
                stopped = wake
                    .wait_timeout(stopped, next - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            if *stopped {
                break;
            }
        }
        next += period;
        let now = Instant::now();
        if next < now {
            next = now + period; // fell behind (the machine was busy): skip
        }
        tick(&mut cpu_seen, &mut shots);
    }
    let mut profile = Profile::empty(hz);
    profile.began = began;
    profile.duration = start.elapsed();
    profile.add(shots);
    profile
}

/// One look at every runtime: a sample of each that used CPU time since
/// the look before.
fn tick(cpu_seen: &mut HashMap<libc::pid_t, u64>, shots: &mut Vec<(Caught, Stack, u64)>) {
    for (thread, shared) in registry::all() {
        let watch = &shared.watch;
        let Some(cpu) = thread_cpu_ns(watch.tid) else {
            continue; // the thread has gone
        };
        let Some(before) = cpu_seen.insert(watch.tid, cpu) else {
            continue; // first look: the base only
        };
        let used = cpu.saturating_sub(before);
        if used == 0 {
            continue; // it waited all along: leave it be
        }
        let word = watch.word.load(Ordering::Acquire);
        let caught = |fiber: String| Caught {
            fiber,
            thread: thread.clone(),
        };
        let Some(running) = watch.read(word) else {
            shots.push((caught("(runtime)".into()), Stack::Runtime, used));
            continue;
        };
        let stack = match crate::observe::sample::of(watch, word) {
            Sampled::Stack(raw) => Stack::Raw(raw),
            Sampled::Missing(why) => Stack::Missing(why),
        };
        let fiber = match (&running.name, running.root) {
            (_, true) => "(root)".to_owned(),
            (Some(name), false) => name.clone(),
            (None, false) => format!("#{}", running.id.as_u64()),
        };
        shots.push((caught(fiber), stack, used));
    }
}

/// The CPU time thread `tid` of this process has used, in nanoseconds;
/// `None` once it has gone.
fn thread_cpu_ns(tid: libc::pid_t) -> Option<u64> {
    // Linux's clock id for another thread's CPU time, as glibc's
    // `pthread_getcpuclockid` makes it: the id complemented, shifted by 3,
    // with CPUCLOCK_PERTHREAD (4) | CPUCLOCK_SCHED (2).
    let clock: libc::clockid_t = (!tid).wrapping_shl(3) | 6;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; an unknown clock (a thread
    // that has exited) is an error, not undefined behaviour.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// One frame of a profile's stack.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Frame {
    function: String,
    file: String,
    line: u32,
}

/// Samples that caught the same fiber on the same stack.
struct Sample {
    caught: Caught,
    /// Innermost first.
    frames: Vec<Frame>,
    count: u64,
    cpu_ns: u64,
}

/// What a [`Profiler`] saw: samples by fiber and stack, each with how
/// many times it was caught and the CPU time it weighs.
pub struct Profile {
    hz: u32,
    began: SystemTime,
    duration: Duration,
    samples: Vec<Sample>,
}

impl Profile {
    fn empty(hz: u32) -> Profile {
        Profile {
            hz,
            began: SystemTime::now(),
            duration: Duration::ZERO,
            samples: Vec::new(),
        }
    }

    /// Names the shots' stacks and folds equal ones together.
    fn add(&mut self, shots: Vec<(Caught, Stack, u64)>) {
        let mut resolver = Resolver::default();
        let mut index: HashMap<(Caught, Vec<Frame>), usize> = HashMap::new();
        for (caught, stack, cpu_ns) in shots {
            let frames = match stack {
                Stack::Raw(raw) => resolver
                    .resolve(&raw)
                    .frames()
                    .iter()
                    .map(|f| Frame {
                        function: f.function().unwrap_or("??").to_owned(),
                        file: f
                            .file()
                            .map(|p| p.display().to_string())
                            .unwrap_or_default(),
                        line: f.line().unwrap_or(0),
                    })
                    .collect(),
                Stack::Missing(why) => vec![synthetic(&format!("[stack not sampled: {why}]"))],
                Stack::Runtime => vec![synthetic("fibra: polling for I/O and timers, switching")],
            };
            let at = *index
                .entry((caught.clone(), frames.clone()))
                .or_insert_with(|| {
                    self.samples.push(Sample {
                        caught,
                        frames,
                        count: 0,
                        cpu_ns: 0,
                    });
                    self.samples.len() - 1
                });
            self.samples[at].count += 1;
            self.samples[at].cpu_ns += cpu_ns;
        }
        self.samples.sort_by_key(|s| std::cmp::Reverse(s.cpu_ns));
    }

    /// How many samples it holds (each tick that caught a busy runtime
    /// adds one).
    ///
    /// ```
    /// let profile = fibra::runtime::Profiler::start(100)?.stop();
    /// assert_eq!(profile.samples(), 0); // nothing ran
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn samples(&self) -> u64 {
        self.samples.iter().map(|s| s.count).sum()
    }

    /// Writes the profile in the folded format of flame graphs
    /// (`flamegraph.pl`, inferno): one line per fiber and stack,
    /// `fiber:<name>;outermost;...;innermost COUNT`, the most first. COUNT
    /// is the CPU time the stack took, in sampling periods (at 100 Hz, one
    /// for each 10 ms), so the graph's widths are CPU time; a stack that
    /// took less than half a period is left out.
    ///
    /// # Errors
    ///
    /// What `out` returns.
    ///
    /// ```
    /// let profile = fibra::runtime::Profiler::start(100)?.stop();
    /// let mut out = Vec::new();
    /// profile.write_folded(&mut out)?;
    /// assert!(out.is_empty());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_folded(&self, out: &mut impl Write) -> io::Result<()> {
        // Stacks that differ only in lines fold into one, weighed by the
        // CPU time they took: a tick that caught a thread after a few
        // microseconds of work weighs that little, not a whole period.
        let mut lines: Vec<(String, u64)> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for s in &self.samples {
            let mut line = format!("fiber:{}", folded_name(&s.caught.fiber));
            for f in s.frames.iter().rev() {
                line.push(';');
                line.push_str(&folded_name(&f.function));
            }
            let at = *index.entry(line.clone()).or_insert_with(|| {
                lines.push((line, 0));
                lines.len() - 1
            });
            lines[at].1 += s.cpu_ns;
        }
        let period = 1_000_000_000 / u64::from(self.hz.max(1));
        let mut counted: Vec<(String, u64)> = lines
            .into_iter()
            .map(|(line, ns)| (line, (ns + period / 2) / period))
            .filter(|(_, count)| *count > 0)
            .collect();
        counted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut text = String::new();
        for (line, count) in counted {
            text.push_str(&format!("{line} {count}\n"));
        }
        out.write_all(text.as_bytes())
    }

    /// Writes the profile as pprof's protobuf (`profile.proto`,
    /// uncompressed), as `go tool pprof` reads it: two values per sample,
    /// `samples/count` and `cpu/nanoseconds` (the default), and labels
    /// `fiber` (the fiber's name, or `#id`) and `thread`.
    ///
    /// `go tool pprof -top -symbolize=none profile.pb` lists the functions
    /// that took the most CPU; `-tagfocus=fiber=burner` keeps one fiber.
    ///
    /// # Errors
    ///
    /// What `out` returns.
    ///
    /// ```
    /// let profile = fibra::runtime::Profiler::start(100)?.stop();
    /// let mut pb = Vec::new();
    /// profile.write_pprof(&mut pb)?;
    /// assert!(!pb.is_empty());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_pprof(&self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(&self.pprof_bytes())
    }

    fn pprof_bytes(&self) -> Vec<u8> {
        let mut strings = Strings::new();
        let mut p = Message::default();
        p.message(1, value_type(&mut strings, "samples", "count"));
        p.message(1, value_type(&mut strings, "cpu", "nanoseconds"));
        let mut functions: HashMap<(&str, &str), u64> = HashMap::new();
        let mut locations: HashMap<&Frame, u64> = HashMap::new();
        let mut function_msgs = Vec::new();
        let mut location_msgs = Vec::new();
        let (fiber_key, thread_key) = (strings.id("fiber"), strings.id("thread"));
        for s in &self.samples {
            let mut ids = Vec::with_capacity(s.frames.len());
            for f in &s.frames {
                let next = locations.len() as u64 + 1;
                let id = *locations.entry(f).or_insert(next);
                if id == next {
                    let fnext = functions.len() as u64 + 1;
                    let fid = *functions
                        .entry((f.function.as_str(), f.file.as_str()))
                        .or_insert(fnext);
                    if fid == fnext {
                        let mut m = Message::default();
                        m.int(1, fid);
                        let name = strings.id(&f.function);
                        m.int(2, name);
                        m.int(3, name);
                        m.int(4, strings.id(&f.file));
                        function_msgs.push(m);
                    }
                    let mut line = Message::default();
                    line.int(1, fid);
                    line.int(2, u64::from(f.line));
                    let mut loc = Message::default();
                    loc.int(1, id);
                    loc.message(4, line);
                    location_msgs.push(loc);
                }
                ids.push(id);
            }
            let mut sample = Message::default();
            sample.packed(1, ids);
            sample.packed(2, [s.count, s.cpu_ns]);
            for (key, value) in [(fiber_key, &s.caught.fiber), (thread_key, &s.caught.thread)] {
                let mut label = Message::default();
                label.int(1, key);
                label.int(2, strings.id(value));
                sample.message(3, label);
            }
            p.message(2, sample);
        }
        for loc in location_msgs {
            p.message(4, loc);
        }
        for f in function_msgs {
            p.message(5, f);
        }
        let began = self
            .began
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        p.int(9, u64::try_from(began.as_nanos()).unwrap_or(u64::MAX));
        p.int(
            10,
            u64::try_from(self.duration.as_nanos()).unwrap_or(u64::MAX),
        );
        p.message(11, value_type(&mut strings, "cpu", "nanoseconds"));
        p.int(12, 1_000_000_000 / u64::from(self.hz.max(1)));
        p.int(14, strings.id("cpu"));
        for s in strings.into_list() {
            p.bytes(6, s.as_bytes());
        }
        p.into_bytes()
    }
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profile")
            .field("hz", &self.hz)
            .field("duration", &self.duration)
            .field("samples", &self.samples())
            .finish()
    }
}

/// A frame that stands for something with no stack of its own.
fn synthetic(what: &str) -> Frame {
    Frame {
        function: what.to_owned(),
        file: String::new(),
        line: 0,
    }
}

/// A name as the folded format can carry it: `;` separates frames and the
/// last space the count, so `;` becomes `:` and line breaks spaces.
fn folded_name(name: &str) -> String {
    name.replace(';', ":").replace(['\n', '\r'], " ")
}
