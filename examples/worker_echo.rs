//! An echo server on every core: a runtime of several workers, each
//! accepting on a listener of its own that shares the port with the others
//! (`SO_REUSEPORT`), so the kernel spreads the connections over the workers
//! and no connection ever crosses threads.
//!
//! `cargo run --release --example worker_echo -- 127.0.0.1:7878 [WORKERS]`
//! serves until killed; `-- --demo` serves 200 clients of another runtime,
//! prints how many connections each worker accepted, and exits.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fibra::net::{TcpListener, TcpStream};

fn main() {
    // `main` returning the error would print it with `{:?}`
    // (`Os { code: 98, kind: AddrInUse, .. }`): say it plainly instead.
    if let Err(e) = run() {
        eprintln!("worker_echo: {e}");
        std::process::exit(1);
    }
}

fn run() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let demo = args.iter().any(|a| a == "--demo");
    let mut rest = args.iter().filter(|a| *a != "--demo");
    let addr = rest.next().map_or("127.0.0.1:7878", String::as_str);
    let addr = if demo { "127.0.0.1:0" } else { addr };
    let workers = match rest.next() {
        Some(n) => n
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
        None => std::thread::available_parallelism().map_or(2, |n| n.get()),
    };

    let rt = fibra::Runtime::builder().workers(workers).build()?;
    // The first listener picks the port (it may be 0); the others join it.
    let first = TcpListener::bind_reuse_port(addr)?;
    let addr = first.local_addr()?;
    let accepted: Arc<Vec<AtomicUsize>> =
        Arc::new((0..workers).map(|_| AtomicUsize::new(0)).collect());
    let mut first = Some(first);
    for worker in 0..workers {
        let listener = match first.take() {
            Some(listener) => listener,
            None => TcpListener::bind_reuse_port(addr)?,
        };
        let accepted = accepted.clone();
        rt.spawn_on(worker, move || serve(&listener, &accepted[worker]));
    }
    eprintln!("echo server on {addr}, {workers} workers");

    if !demo {
        loop {
            std::thread::park(); // the workers serve; nothing to do here
        }
    }
    clients(addr, 200)?;
    for (worker, n) in accepted.iter().enumerate() {
        println!(
            "fibra-worker-{worker} accepted {} connections",
            n.load(Ordering::Relaxed)
        );
    }
    Ok(())
}

/// The accept loop of one worker: one fiber per connection, on this worker.
fn serve(listener: &TcpListener, accepted: &AtomicUsize) {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                accepted.fetch_add(1, Ordering::Relaxed);
                fibra::spawn(move || {
                    if let Err(e) = echo(stream) {
                        eprintln!("connection: {e}");
                    }
                });
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                fibra::sleep(Duration::from_millis(10)); // wait for fds to free up
            }
            Err(e) => eprintln!("accept: {e}"),
        }
    }
}

fn echo(mut stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut buf = [0; 16 * 1024];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        stream.write_all(&buf[..n])?;
    }
}

/// `n` clients in fibers of a current-thread runtime on this thread.
fn clients(addr: SocketAddr, n: usize) -> io::Result<()> {
    fibra::run(|| {
        let handles: Vec<_> = (0..n)
            .map(|c| {
                fibra::spawn(move || -> io::Result<()> {
                    let mut stream = TcpStream::connect(addr)?;
                    for round in 0..10 {
                        let msg = format!("client {c}, round {round}\n");
                        stream.write_all(msg.as_bytes())?;
                        let mut back = vec![0; msg.len()];
                        stream.read_exact(&mut back)?;
                        assert_eq!(back, msg.as_bytes());
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().map_err(io::Error::from)?)
    })
}
