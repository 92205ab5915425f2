//! A short tour of fibra: run it with `cargo run --release --example tour`.
//!
//! Fibers, sleeping, joining, panics, cancellation, timeouts, scoped
//! borrows, waiting on a kernel object woken by another thread, and a
//! hundred thousand fibers at once. Ends by itself in about a second.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fibra::io::EventFd;

fn main() {
    let start = Instant::now();
    fibra::run(|| {
        // 1. Spawn and join: plain blocking code, no async.
        let h = fibra::Builder::new()
            .name("greeter".into())
            .spawn(|| format!("hello from fiber '{}'", fibra::current().name().unwrap()))
            .unwrap();
        println!("1. {}", h.join().unwrap());

        // 2. Sleeping fibers overlap: three 100 ms sleeps take 100 ms.
        let t = Instant::now();
        let sleepers: Vec<_> = (1..=3)
            .map(|i| fibra::spawn(move || fibra::sleep(Duration::from_millis(100 * i / i))))
            .collect();
        sleepers.into_iter().for_each(|h| h.join().unwrap());
        println!("2. three 100 ms sleeps in {:?}", t.elapsed());

        // 3. A panic stays in its fiber and comes back from join. (The
        // panic hook would print the panic's report to stderr as it
        // happens; this one is expected, so the tour mutes the hook.)
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let err = fibra::spawn(|| panic!("oops")).join().unwrap_err();
        std::panic::set_hook(report);
        println!("3. join says: {err}");

        // 4. Cancellation unwinds a parked fiber; its destructors run.
        struct Noisy;
        impl Drop for Noisy {
            fn drop(&mut self) {
                println!("4. destructor ran in the cancelled fiber");
            }
        }
        let h = fibra::spawn(|| {
            let _n = Noisy;
            fibra::sleep(Duration::from_secs(3600));
        });
        fibra::yield_now();
        h.cancel();
        println!("4. cancelled: {}", h.join().unwrap_err().is_cancelled());

        // 5. Timeouts unwind whatever the closure blocks on.
        let r = fibra::timeout(Duration::from_millis(50), || {
            fibra::sleep(Duration::from_secs(3600));
        });
        match r {
            Ok(()) => println!("5. finished in time"),
            Err(elapsed) => println!("5. timeout: {elapsed}"),
        }

        // 6. Scoped fibers borrow from the caller's stack.
        let words = ["stackful", "fibers", "borrow"];
        let letters = Cell::new(0);
        fibra::scope(|s| {
            for w in &words {
                let letters = &letters;
                s.spawn(move || letters.set(letters.get() + w.len()));
            }
        });
        println!("6. scoped fibers counted {} letters", letters.get());

        // 7. Await a kernel object written by another thread.
        let efd = Arc::new(EventFd::new(0).unwrap());
        let e = efd.clone();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            e.write(42).unwrap();
        });
        println!("7. eventfd from another thread: {}", efd.read().unwrap());
        thread.join().unwrap();

        // 8. Many fibers: cheap to create, cheap to park.
        let t = Instant::now();
        let n = 100_000;
        let done = std::rc::Rc::new(Cell::new(0u32));
        let fibers: Vec<_> = (0..n)
            .map(|_| {
                let done = done.clone();
                fibra::spawn(move || {
                    fibra::sleep(Duration::from_millis(50));
                    done.set(done.get() + 1);
                })
            })
            .collect();
        fibers.into_iter().for_each(|h| h.join().unwrap());
        println!(
            "8. {} fibers slept 50 ms each, all done in {:?}",
            done.get(),
            t.elapsed()
        );
    });
    println!("tour finished in {:?}", start.elapsed());
}
