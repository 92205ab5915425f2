//! `fibra::sync` and generators: channel ping-pong (`fibra::sync::mpsc` and
//! `fibra::channel`, with and without `select!`) and throughput between
//! fibers, the uncontended mutex beside std's, a mutex handed between
//! fibers, and a generator's resume + yield.
//!
//! `cargo bench --bench sync` (peers side by side: `benches/peers`, `sync`)

use std::hint::black_box;
use std::rc::Rc;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use fibra::sync::{Mutex, mpsc};

fn channel_ping_pong(c: &mut Criterion) {
    let rt = fibra::Runtime::new().unwrap();
    c.bench_function("channel_ping_pong", |b| {
        b.iter_custom(|iters| {
            rt.block_on(|| {
                let (ping_tx, ping_rx) = mpsc::channel::<u64>();
                let (pong_tx, pong_rx) = mpsc::channel::<u64>();
                let echo = fibra::spawn(move || {
                    for v in ping_rx {
                        pong_tx.send(v).unwrap();
                    }
                });
                let me = fibra::spawn(move || {
                    let start = Instant::now();
                    for i in 0..iters {
                        ping_tx.send(i).unwrap();
                        black_box(pong_rx.recv().unwrap());
                    }
                    start.elapsed()
                });
                let elapsed = me.join().unwrap();
                echo.join().unwrap();
                elapsed
            })
        })
    });
}

/// A round trip between two fibers over two `fibra::channel`s of capacity
/// `cap` (0: Go's unbuffered channel), and over a `select!` of two
/// rendezvous channels on the echo's side.
fn crossbeam_api_ping_pong(c: &mut Criterion) {
    use fibra::channel::{Receiver, bounded, never};
    let rt = fibra::Runtime::new().unwrap();
    for (name, cap, select) in [
        ("channel_ping_pong_bounded_0", 0, false),
        ("channel_ping_pong_bounded_1", 1, false),
        ("channel_ping_pong_select_bounded_0", 0, true),
    ] {
        c.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(|| {
                    let (ping_tx, ping_rx) = bounded::<u64>(cap);
                    let (pong_tx, pong_rx) = bounded::<u64>(cap);
                    let echo = fibra::spawn(move || {
                        let off: Receiver<u64> = never();
                        for _ in 0..iters {
                            let v = if select {
                                fibra::select! {
                                    recv(ping_rx) -> v => v.unwrap(),
                                    recv(off) -> _ => unreachable!(),
                                }
                            } else {
                                ping_rx.recv().unwrap()
                            };
                            pong_tx.send(v).unwrap();
                        }
                    });
                    let start = Instant::now();
                    for i in 0..iters {
                        ping_tx.send(i).unwrap();
                        black_box(pong_rx.recv().unwrap());
                    }
                    let elapsed = start.elapsed();
                    echo.join().unwrap();
                    elapsed
                })
            })
        });
    }
}

fn channel_throughput(c: &mut Criterion) {
    let rt = fibra::Runtime::new().unwrap();
    c.bench_function("channel_throughput_bound_1024", |b| {
        b.iter_custom(|iters| {
            rt.block_on(|| {
                let (tx, rx) = mpsc::sync_channel::<u64>(1024);
                let start = Instant::now();
                let producer = fibra::spawn(move || {
                    for i in 0..iters {
                        tx.send(i).unwrap();
                    }
                });
                black_box(rx.iter().sum::<u64>());
                producer.join().unwrap();
                start.elapsed()
            })
        })
    });
}

fn mutex_uncontended(c: &mut Criterion) {
    let m = Mutex::new(0u64);
    c.bench_function("mutex_uncontended_fibra", |b| {
        b.iter(|| *black_box(&m).lock().unwrap() += 1)
    });
    let m = std::sync::Mutex::new(0u64);
    c.bench_function("mutex_uncontended_std", |b| {
        b.iter(|| *black_box(&m).lock().unwrap() += 1)
    });
}

fn mutex_handoff(c: &mut Criterion) {
    let rt = fibra::Runtime::new().unwrap();
    c.bench_function("mutex_handoff_8_fibers", |b| {
        b.iter_custom(|iters| {
            rt.block_on(|| {
                let m = Rc::new(Mutex::new(0u64));
                let rounds = iters.div_ceil(8);
                let start = Instant::now();
                let fibers: Vec<_> = (0..8)
                    .map(|_| {
                        let m = m.clone();
                        fibra::spawn(move || {
                            for _ in 0..rounds {
                                let mut g = m.lock().unwrap();
                                fibra::yield_now();
                                *g += 1;
                            }
                        })
                    })
                    .collect();
                fibers.into_iter().for_each(|f| f.join().unwrap());
                start.elapsed()
            })
        })
    });
}

fn generator_next(c: &mut Criterion) {
    let mut g = fibra::Generator::new(|y| {
        let mut i = 0u64;
        loop {
            y.yield_(i);
            i += 1;
        }
    });
    c.bench_function("generator_next", |b| b.iter(|| black_box(g.next())));
}

criterion_group!(
    benches,
    channel_ping_pong,
    crossbeam_api_ping_pong,
    channel_throughput,
    mutex_uncontended,
    mutex_handoff,
    generator_next
);
criterion_main!(benches);
