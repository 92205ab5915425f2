//! What one connect costs in a fiber, three ways: `fibra::net`'s
//! (non-blocking socket, `EINPROGRESS`, park until writable), std's with
//! the `hook` feature (the runtime's io_uring makes it), and std's hooked
//! where io_uring is refused (`FIBRA_NO_IO_URING=1`: the blocking call
//! goes to a pool thread and back). Each connect goes to a loopback
//! listener whose thread accepts and closes, and the client closes too.
//!
//! `cargo bench --bench connect --features hook`

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};

/// A listener on a thread of its own that accepts and closes for ever.
fn acceptor() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in l.incoming() {
            drop(c);
        }
    });
    addr
}

/// Closes `fd` with a reset (`SO_LINGER` 0), leaving no TIME_WAIT behind:
/// hundreds of thousands of connects would use up the ephemeral ports.
fn reset(fd: std::os::fd::RawFd) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid linger for the socket's SO_LINGER.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const l).cast(),
            size_of::<libc::linger>() as libc::socklen_t,
        )
    };
}

fn net_connect(a: SocketAddr) {
    let s = fibra::net::TcpStream::connect(a).unwrap();
    reset(s.as_raw_fd());
}

fn std_connect(a: SocketAddr) {
    let s = TcpStream::connect(a).unwrap();
    reset(s.as_raw_fd());
}

/// `iters` connects one after another, each in the fiber `block_on` runs.
fn connects(
    rt: &fibra::Runtime,
    iters: u64,
    connect: fn(SocketAddr),
    addr: SocketAddr,
) -> Duration {
    rt.block_on(|| {
        let start = Instant::now();
        for _ in 0..iters {
            connect(addr);
        }
        start.elapsed()
    })
}

fn connect(c: &mut Criterion) {
    let addr = acceptor();
    let mut g = c.benchmark_group("connect");
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(3));
    let rt = fibra::Runtime::new().unwrap();
    g.bench_function("fibra_net", |b| {
        b.iter_custom(|iters| connects(&rt, iters, net_connect, addr))
    });
    g.bench_function("hooked_io_uring", |b| {
        b.iter_custom(|iters| connects(&rt, iters, std_connect, addr))
    });
    // A runtime on a thread that makes its ring after the variable is
    // set, so its hooked connects take the pool.
    g.bench_function("hooked_pool", |b| {
        b.iter_custom(|iters| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    // SAFETY: set before this thread's runtime exists; the
                    // variable is read only when a reactor makes its ring,
                    // and no other thread of this bench reads or writes
                    // the environment meanwhile.
                    unsafe { std::env::set_var("FIBRA_NO_IO_URING", "1") };
                    let rt = fibra::Runtime::new().unwrap();
                    let took = connects(&rt, iters, std_connect, addr);
                    // SAFETY: as above.
                    unsafe { std::env::remove_var("FIBRA_NO_IO_URING") };
                    took
                })
                .join()
                .unwrap()
            })
        })
    });
    g.finish();
}

criterion_group!(benches, connect);
criterion_main!(benches);
