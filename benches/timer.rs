//! Timers: a storm of 100 000 sleepers (spawn, sleep 1–10 ms, join), and
//! arming plus cancelling a deadline (a timeout that does not fire).
//!
//! `cargo bench --bench timer`

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

fn sleeper_storm(c: &mut Criterion) {
    let rt = fibra::Runtime::new().unwrap();
    let mut group = c.benchmark_group("timers");
    group.sample_size(10);
    group.bench_function("storm_100k_sleepers", |b| {
        rt.block_on(|| {
            b.iter(|| {
                let hs: Vec<_> = (0..100_000u64)
                    .map(|i| {
                        fibra::spawn(move || fibra::sleep(Duration::from_micros(1000 + i % 9000)))
                    })
                    .collect();
                hs.into_iter().for_each(|h| h.join().unwrap());
            })
        })
    });
    group.finish();
    c.bench_function("timeout_armed_and_cancelled", |b| {
        rt.block_on(|| b.iter(|| fibra::timeout(Duration::from_secs(5), fibra::yield_now)))
    });
}

criterion_group!(benches, sleeper_storm);
criterion_main!(benches);
