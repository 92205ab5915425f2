//! Context-switch cost: a yield round trip between two fibers (two
//! switches), and a park/unpark round trip through an unpark from another
//! fiber.
//!
//! `cargo bench --bench switch`

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};

fn yield_round_trip(c: &mut Criterion) {
    let rt = fibra::Runtime::new().unwrap();
    c.bench_function("yield_round_trip", |b| {
        b.iter_custom(|iters| {
            rt.block_on(|| {
                // Two fibers take turns; the measuring one sees one round
                // trip (it yields, the other runs and yields back) per loop.
                let other = fibra::spawn(move || {
                    for _ in 0..=iters {
                        fibra::yield_now();
                    }
                });
                let me = fibra::spawn(move || {
                    let start = Instant::now();
                    for _ in 0..iters {
                        fibra::yield_now();
                    }
                    start.elapsed()
                });
                let elapsed = me.join().unwrap();
                other.join().unwrap();
                elapsed
            })
        })
    });
}

fn sleep_zero_round_trip(c: &mut Criterion) {
    let rt = fibra::Runtime::new().unwrap();
    c.bench_function("sleep_zero", |b| {
        b.iter_custom(|iters| {
            rt.block_on(|| {
                fibra::spawn(move || {
                    let start = Instant::now();
                    for _ in 0..iters {
                        fibra::sleep(Duration::ZERO);
                    }
                    start.elapsed()
                })
                .join()
                .unwrap()
            })
        })
    });
}

criterion_group!(benches, yield_round_trip, sleep_zero_round_trip);
criterion_main!(benches);
