//! The `hook` feature: unmodified std blocking code parks fibers.
#![cfg(feature = "hook")]

use std::time::{Duration, Instant};

#[test]
fn std_sleep_parks() {
    let start = Instant::now();
    fibra::run(|| {
        let fibers: Vec<_> = (0..20)
            .map(|_| fibra::spawn(|| std::thread::sleep(Duration::from_millis(300))))
            .collect();
        for f in fibers {
            f.join().unwrap();
        }
    });
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(300) && took < Duration::from_millis(2000), "{took:?}");
}
