//! Spawning: spawn + join of an empty fiber, one at a time and in batches.
//!
//! `cargo bench --bench spawn`

use criterion::{Criterion, criterion_group, criterion_main};

fn spawn_join(c: &mut Criterion) {
    let rt = fibra::Runtime::new().unwrap();
    c.bench_function("spawn_join_empty", |b| {
        rt.block_on(|| b.iter(|| fibra::spawn(|| ()).join().unwrap()))
    });
    c.bench_function("spawn_join_batch_of_100", |b| {
        rt.block_on(|| {
            b.iter(|| {
                let hs: Vec<_> = (0..100).map(|_| fibra::spawn(|| ())).collect();
                hs.into_iter().for_each(|h| h.join().unwrap());
            })
        })
    });
}

criterion_group!(benches, spawn_join);
criterion_main!(benches);
