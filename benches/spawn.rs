//! Spawning: spawn + join of an empty fiber, one at a time and in batches;
//! and the same for a member of a `fibra::Group`.
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

/// The same through a `fibra::Group`: what a member costs over a plain
/// fiber (`-- group` runs these and, to compare, the plain ones above).
fn group_spawn_join(c: &mut Criterion) {
    let rt = fibra::Runtime::new().unwrap();
    c.bench_function("group_spawn_join_empty", |b| {
        rt.block_on(|| {
            let group = fibra::Group::new();
            b.iter(|| {
                group.spawn(|| ());
                group.join_next().unwrap().unwrap()
            })
        })
    });
    c.bench_function("group_spawn_join_batch_of_100", |b| {
        rt.block_on(|| {
            let group = fibra::Group::new();
            b.iter(|| {
                (0..100).for_each(|_| group.spawn(|| ()));
                while let Some(r) = group.join_next() {
                    r.unwrap();
                }
            })
        })
    });
    c.bench_function("group_with_timeout_spawn_join_batch_of_100", |b| {
        rt.block_on(|| {
            let group = fibra::Group::with_timeout(std::time::Duration::from_secs(3600));
            b.iter(|| {
                (0..100).for_each(|_| group.spawn(|| ()));
                while let Some(r) = group.join_next() {
                    r.unwrap();
                }
            })
        })
    });
}

criterion_group!(benches, spawn_join, group_spawn_join);
criterion_main!(benches);
