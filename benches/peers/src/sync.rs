//! Channels and mutexes: fibra::sync against tokio::sync, may::sync and std.

use std::hint::black_box;
use std::time::Instant;

use crate::{Table, measure};

const PINGS: u64 = 200_000;

/// Ping-pong over two unbounded channels between two tasks of one thread:
/// ns per round trip (two sends, two receives, two wake-ups).
fn fibra_ping_pong() -> f64 {
    use fibra::sync::mpsc;
    fibra::run(|| {
        let (ping_tx, ping_rx) = mpsc::channel::<u64>();
        let (pong_tx, pong_rx) = mpsc::channel::<u64>();
        let echo = fibra::spawn(move || {
            for v in ping_rx {
                pong_tx.send(v).unwrap();
            }
        });
        let t = Instant::now();
        for i in 0..PINGS {
            ping_tx.send(i).unwrap();
            black_box(pong_rx.recv().unwrap());
        }
        let e = t.elapsed();
        drop(ping_tx);
        echo.join().unwrap();
        e.as_nanos() as f64 / PINGS as f64
    })
}

fn tokio_ping_pong() -> f64 {
    use tokio::sync::mpsc;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let (ping_tx, mut ping_rx) = mpsc::unbounded_channel::<u64>();
        let (pong_tx, mut pong_rx) = mpsc::unbounded_channel::<u64>();
        let echo = tokio::spawn(async move {
            while let Some(v) = ping_rx.recv().await {
                pong_tx.send(v).unwrap();
            }
        });
        // Measured from a task, like the echo side (block_on's own future
        // is polled differently).
        let me = tokio::spawn(async move {
            let t = Instant::now();
            for i in 0..PINGS {
                ping_tx.send(i).unwrap();
                black_box(pong_rx.recv().await.unwrap());
            }
            t.elapsed()
        });
        let e = me.await.unwrap();
        echo.await.unwrap();
        e.as_nanos() as f64 / PINGS as f64
    })
}

fn may_ping_pong() -> f64 {
    use may::sync::mpsc;
    let (ping_tx, ping_rx) = mpsc::channel::<u64>();
    let (pong_tx, pong_rx) = mpsc::channel::<u64>();
    let echo = may::go!(move || {
        for v in ping_rx.iter() {
            pong_tx.send(v).unwrap();
        }
    });
    let me = may::go!(move || {
        let t = Instant::now();
        for i in 0..PINGS / 4 {
            ping_tx.send(i).unwrap();
            black_box(pong_rx.recv().unwrap());
        }
        t.elapsed()
    });
    let e = me.join().unwrap();
    echo.join().unwrap();
    e.as_nanos() as f64 / (PINGS / 4) as f64
}

fn std_thread_ping_pong() -> f64 {
    use std::sync::mpsc;
    let (ping_tx, ping_rx) = mpsc::channel::<u64>();
    let (pong_tx, pong_rx) = mpsc::channel::<u64>();
    let echo = std::thread::spawn(move || {
        for v in ping_rx {
            pong_tx.send(v).unwrap();
        }
    });
    let n = PINGS / 10;
    let t = Instant::now();
    for i in 0..n {
        ping_tx.send(i).unwrap();
        black_box(pong_rx.recv().unwrap());
    }
    let e = t.elapsed();
    drop(ping_tx);
    echo.join().unwrap();
    e.as_nanos() as f64 / n as f64
}

const MESSAGES: u64 = 1_000_000;
const BOUND: usize = 1024;

/// One producer, one consumer, a bounded channel: ns per message.
fn fibra_throughput() -> f64 {
    use fibra::sync::mpsc;
    fibra::run(|| {
        let (tx, rx) = mpsc::sync_channel::<u64>(BOUND);
        let t = Instant::now();
        let producer = fibra::spawn(move || {
            for i in 0..MESSAGES {
                tx.send(i).unwrap();
            }
        });
        let sum: u64 = rx.iter().sum();
        producer.join().unwrap();
        black_box(sum);
        t.elapsed().as_nanos() as f64 / MESSAGES as f64
    })
}

fn tokio_throughput() -> f64 {
    use tokio::sync::mpsc;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let (tx, mut rx) = mpsc::channel::<u64>(BOUND);
        let t = Instant::now();
        let producer = tokio::spawn(async move {
            for i in 0..MESSAGES {
                tx.send(i).await.unwrap();
            }
        });
        let consumer = tokio::spawn(async move {
            let mut sum = 0u64;
            while let Some(v) = rx.recv().await {
                sum += v;
            }
            sum
        });
        producer.await.unwrap();
        black_box(consumer.await.unwrap());
        t.elapsed().as_nanos() as f64 / MESSAGES as f64
    })
}

fn may_throughput() -> f64 {
    use may::sync::mpsc;
    let n = MESSAGES / 4;
    let (tx, rx) = mpsc::channel::<u64>(); // may has no bounded mpsc
    let t = Instant::now();
    let producer = may::go!(move || {
        for i in 0..n {
            tx.send(i).unwrap();
        }
    });
    let consumer = may::go!(move || rx.iter().sum::<u64>());
    producer.join().unwrap();
    black_box(consumer.join().unwrap());
    t.elapsed().as_nanos() as f64 / n as f64
}

fn std_thread_throughput() -> f64 {
    use std::sync::mpsc;
    let (tx, rx) = mpsc::sync_channel::<u64>(BOUND);
    let t = Instant::now();
    let producer = std::thread::spawn(move || {
        for i in 0..MESSAGES {
            tx.send(i).unwrap();
        }
    });
    black_box(rx.iter().sum::<u64>());
    producer.join().unwrap();
    t.elapsed().as_nanos() as f64 / MESSAGES as f64
}

const LOCKS: u64 = 2_000_000;

/// Lock + increment + unlock with nobody else around: ns per lock.
fn fibra_mutex_uncontended() -> f64 {
    let m = fibra::sync::Mutex::new(0u64);
    let t = Instant::now();
    for _ in 0..LOCKS {
        *black_box(&m).lock().unwrap() += 1;
    }
    t.elapsed().as_nanos() as f64 / LOCKS as f64
}

fn std_mutex_uncontended() -> f64 {
    let m = std::sync::Mutex::new(0u64);
    let t = Instant::now();
    for _ in 0..LOCKS {
        *black_box(&m).lock().unwrap() += 1;
    }
    t.elapsed().as_nanos() as f64 / LOCKS as f64
}

fn tokio_mutex_uncontended() -> f64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let m = tokio::sync::Mutex::new(0u64);
        let t = Instant::now();
        for _ in 0..LOCKS {
            *black_box(&m).lock().await += 1;
        }
        t.elapsed().as_nanos() as f64 / LOCKS as f64
    })
}

fn may_mutex_uncontended() -> f64 {
    let m = may::sync::Mutex::new(0u64);
    let n = LOCKS / 4;
    let t = Instant::now();
    for _ in 0..n {
        *black_box(&m).lock().unwrap() += 1;
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

const HOLDERS: u64 = 8;
const ROUNDS: u64 = 20_000;

/// 8 tasks on one thread, each ROUNDS times: lock, yield while holding it,
/// unlock. Every lock is contended and handed over: ns per lock.
fn fibra_mutex_handoff() -> f64 {
    use std::rc::Rc;
    fibra::run(|| {
        let m = Rc::new(fibra::sync::Mutex::new(0u64));
        let t = Instant::now();
        let hs: Vec<_> = (0..HOLDERS)
            .map(|_| {
                let m = m.clone();
                fibra::spawn(move || {
                    for _ in 0..ROUNDS {
                        let mut g = m.lock().unwrap();
                        fibra::yield_now();
                        *g += 1;
                    }
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(*m.lock().unwrap(), HOLDERS * ROUNDS);
        t.elapsed().as_nanos() as f64 / (HOLDERS * ROUNDS) as f64
    })
}

fn tokio_mutex_handoff() -> f64 {
    use std::sync::Arc;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let m = Arc::new(tokio::sync::Mutex::new(0u64));
        let t = Instant::now();
        let hs: Vec<_> = (0..HOLDERS)
            .map(|_| {
                let m = m.clone();
                tokio::spawn(async move {
                    for _ in 0..ROUNDS {
                        let mut g = m.lock().await;
                        tokio::task::yield_now().await;
                        *g += 1;
                    }
                })
            })
            .collect();
        for h in hs {
            h.await.unwrap();
        }
        t.elapsed().as_nanos() as f64 / (HOLDERS * ROUNDS) as f64
    })
}

fn may_mutex_handoff() -> f64 {
    use std::sync::Arc;
    let rounds = ROUNDS / 4;
    let m = Arc::new(may::sync::Mutex::new(0u64));
    let t = Instant::now();
    let hs: Vec<_> = (0..HOLDERS)
        .map(|_| {
            let m = m.clone();
            may::go!(move || {
                for _ in 0..rounds {
                    let mut g = m.lock().unwrap();
                    may::coroutine::yield_now();
                    *g += 1;
                }
            })
        })
        .collect();
    hs.into_iter().for_each(|h| h.join().unwrap());
    t.elapsed().as_nanos() as f64 / (HOLDERS * rounds) as f64
}

pub fn run() {
    Table {
        title: "Channel ping-pong between two tasks of one thread (std: two threads)",
        unit: "ns/round trip",
        rows: vec![
            ("fibra mpsc (fiber <-> fiber)", measure(fibra_ping_pong)),
            (
                "tokio mpsc unbounded (current_thread)",
                measure(tokio_ping_pong),
            ),
            ("may mpsc (1 worker)", measure(may_ping_pong)),
            (
                "std mpsc (thread <-> thread)",
                measure(std_thread_ping_pong),
            ),
        ],
    }
    .print();
    Table {
        title: "Channel throughput, one producer and one consumer, bound 1024",
        unit: "ns/message",
        rows: vec![
            ("fibra sync_channel", measure(fibra_throughput)),
            (
                "tokio mpsc::channel (current_thread)",
                measure(tokio_throughput),
            ),
            ("may channel, unbounded (1 worker)", measure(may_throughput)),
            (
                "std sync_channel (two threads)",
                measure(std_thread_throughput),
            ),
        ],
    }
    .print();
    Table {
        title: "Uncontended lock + unlock",
        unit: "ns/lock",
        rows: vec![
            ("fibra Mutex", measure(fibra_mutex_uncontended)),
            ("std Mutex", measure(std_mutex_uncontended)),
            (
                "tokio Mutex (lock().await)",
                measure(tokio_mutex_uncontended),
            ),
            ("may Mutex", measure(may_mutex_uncontended)),
        ],
    }
    .print();
    Table {
        title: "Mutex handed over: 8 tasks of one thread, each locking, yielding while holding, unlocking",
        unit: "ns/lock",
        rows: vec![
            ("fibra Mutex", measure(fibra_mutex_handoff)),
            ("tokio Mutex (current_thread)", measure(tokio_mutex_handoff)),
            ("may Mutex (1 worker)", measure(may_mutex_handoff)),
        ],
    }
    .print();
}
