//! Fibers in gdb: a program that parks a few named fibers in known places
//! and then stops in [`stop_here`], for gdb's `info fibers` and
//! `fiber N bt` (fibra's gdb extension; see the "In gdb" section of
//! `fibra::runtime`'s docs). `tests/gdb.rs` runs it under `gdb -batch`.
//!
//! ```text
//! cargo build --example gdb_fibers
//! gdb -iex 'add-auto-load-safe-path target/debug/examples' \
//!     -ex 'break stop_here' -ex run -ex 'info fibers' -ex 'fiber locker bt' \
//!     target/debug/examples/gdb_fibers
//! ```
//!
//! The commands need no debug info: built with `--config
//! 'profile.dev.debug=false'` (or `=1`, `="line-tables-only"`) it lists the
//! same fibers, without files and lines at `false`. `tests/gdb.rs` builds it
//! at each level.
//!
//! Without gdb it prints the same fibers as a dump, and ends.

use std::io::Read;
use std::time::Duration;

use fibra::sync::Mutex;

/// Where the program stops for the debugger, with every fiber parked: a
/// breakpoint's place (`break stop_here`), which does nothing.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn stop_here() {
    // Something the optimizer cannot drop, so that the function stays.
    std::hint::black_box(());
}

#[inline(never)]
fn nap() {
    fibra::sleep(Duration::from_secs(3600));
    // Not a tail call, which an optimized build would make a jump: `nap`
    // keeps its frame on the stack, and `info fibers` finds it there.
    std::hint::black_box(());
}

#[inline(never)]
fn wait_for_lock(lock: &Mutex<u32>) {
    let n = lock.lock().unwrap();
    std::hint::black_box(*n);
}

#[inline(never)]
fn wait_for_message(rx: fibra::channel::Receiver<&'static str>) {
    let _ = rx.recv();
}

#[inline(never)]
fn wait_for_bytes(mut stream: fibra::net::UnixStream) {
    let _ = stream.read(&mut [0; 16]);
}

#[inline(never)]
fn wait_on_worker() {
    let sleeper = fibra::Builder::new()
        .name("worker-sleeper".into())
        .spawn(nap)
        .unwrap();
    let _ = sleeper.join();
}

fn main() {
    park_fibers_and_stop();
}

/// Parks fibers on two runtimes, stops in [`stop_here`], then prints the
/// main thread's dump, wakes them all and ends.
pub fn park_fibers_and_stop() {
    // A runtime of one worker thread, with a fiber that waits for a named
    // one there, which sleeps.
    let workers = fibra::Runtime::builder().workers(1).build().unwrap();
    let on_worker = workers.spawn(wait_on_worker);
    while workers
        .dump()
        .fibers()
        .filter(|f| f.waiting_on.is_some())
        .count()
        < 2
    {
        std::thread::sleep(Duration::from_millis(5));
    }

    let lock = std::rc::Rc::new(Mutex::new(0));
    let (tx, rx) = fibra::channel::bounded(0);
    let rt = fibra::Runtime::new().unwrap();
    rt.block_on(|| {
        let guard = lock.lock().unwrap();
        let named = |name: &str| fibra::Builder::new().name(name.into());
        let sleeper = named("sleeper").spawn(nap).unwrap();
        let locker = {
            let lock = lock.clone();
            named("locker").spawn(move || wait_for_lock(&lock)).unwrap()
        };
        let listener = named("listener")
            .spawn(move || wait_for_message(rx))
            .unwrap();
        let (ours, theirs) = fibra::net::UnixStream::pair().unwrap();
        let reader = named("reader")
            .spawn(move || wait_for_bytes(theirs))
            .unwrap();
        // They all run to their parks before the root runs again.
        fibra::yield_now();
        // One more, queued and never started.
        let late = fibra::spawn(|| ());

        stop_here();
        println!("{}", rt.dump());

        drop(guard);
        sleeper.cancel();
        tx.send("bye").unwrap();
        drop(ours);
        let _ = (locker.join(), listener.join(), reader.join());
        let _ = (late.join(), sleeper.join());
    });
    drop(rt);
    on_worker.cancel();
    drop(workers);
}
