//! Async crates on fibra's reactor (feature `futures-io`): futures-io
//! streams, wakers from fibers, threads and other executors, hyper's server
//! and client, and the hyper example under real HTTP load tools.
#![cfg(feature = "futures-io")]

use std::future::poll_fn;
use std::io::{BufRead, BufReader as StdBufReader, Write};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Wake, Waker};
use std::time::{Duration, Instant};

use futures::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use http_body_util::{BodyExt, Empty};

use fibra::net::{TcpListener, TcpStream, UnixStream};

#[path = "../examples/hyper_hello.rs"]
#[allow(dead_code)]
mod hyper_hello;

use hyper_hello::{FibraExec, FibraIo, FibraTimer};

const LINES: usize = 10_000;

#[test]
fn a_buf_reader_reads_ten_thousand_lines_from_a_fibra_socket() {
    fibra::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = fibra::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut batch = String::new();
            for i in 0..LINES {
                batch.push_str(&format!("line {i} {}\n", "x".repeat(i % 97)));
                if i % 37 == 0 {
                    // Uneven pieces, with pauses: the reader often waits.
                    Write::write_all(&mut conn, batch.as_bytes()).unwrap();
                    batch.clear();
                    if i % 3 == 0 {
                        fibra::yield_now();
                    }
                }
            }
            Write::write_all(&mut conn, batch.as_bytes()).unwrap();
        });
        let stream = TcpStream::connect(addr).unwrap();
        let read = fibra::block_on_future(async move {
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            for i in 0..LINES {
                line.clear();
                reader.read_line(&mut line).await.unwrap();
                assert_eq!(line, format!("line {i} {}\n", "x".repeat(i % 97)));
            }
            line.clear();
            assert_eq!(reader.read_line(&mut line).await.unwrap(), 0, "then EOF");
            LINES
        });
        assert_eq!(read, LINES);
        writer.join().unwrap();
    });
}

/// A waker that counts its wake-ups.
struct Counter(AtomicUsize);

impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counter() -> (Arc<Counter>, Waker) {
    let c = Arc::new(Counter(AtomicUsize::new(0)));
    (c.clone(), Waker::from(c))
}

fn poll_read_once(stream: &UnixStream, waker: &Waker) -> Poll<std::io::Result<usize>> {
    let mut cx = Context::from_waker(waker);
    let mut buf = [0; 64];
    futures::io::AsyncRead::poll_read(Pin::new(&mut &*stream), &mut cx, &mut buf)
}

#[test]
fn a_stream_dropped_with_a_waker_registered_leaks_nothing_and_its_fd_gets_no_stale_wake() {
    // Other tests open fds at the same time: try until the number comes back.
    let reused = (0..50).any(|_| fibra::run(stale_wake_attempt));
    assert!(reused, "the old stream's fd number never came back");
}

/// One try; whether the new stream got the old one's fd number.
fn stale_wake_attempt() -> bool {
    let (old, old_peer) = UnixStream::pair().unwrap();
    let (old_count, old_waker) = counter();
    assert!(poll_read_once(&old, &old_waker).is_pending());
    drop(old_waker);
    assert_eq!(
        Arc::strong_count(&old_count),
        2,
        "the reactor holds a clone"
    );
    let fd = old.as_raw_fd();
    drop(old);
    drop(old_peer);

    // The lowest free fd numbers: the old stream's comes back.
    let (a, b) = UnixStream::pair().unwrap();
    let (new, mut new_peer) = if b.as_raw_fd() == fd { (b, a) } else { (a, b) };
    let (new_count, new_waker) = counter();
    assert!(poll_read_once(&new, &new_waker).is_pending());
    Write::write_all(&mut new_peer, b"ping").unwrap();
    fibra::sleep(Duration::from_millis(20)); // the reactor polls meanwhile
    assert_eq!(
        new_count.0.load(Ordering::SeqCst),
        1,
        "the new stream's task woken"
    );
    assert_eq!(old_count.0.load(Ordering::SeqCst), 0, "no stale wake-up");
    assert_eq!(
        Arc::strong_count(&old_count),
        1,
        "the old waker was dropped"
    );
    assert!(matches!(
        poll_read_once(&new, &new_waker),
        Poll::Ready(Ok(4))
    ));
    new.as_raw_fd() == fd
}

#[test]
fn a_plain_thread_in_futures_block_on_polls_a_fibra_socket_through_the_fallback_reactor() {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        fibra::run(|| {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            let (mut conn, _) = listener.accept().unwrap();
            let mut buf = [0; 5];
            for _ in 0..20 {
                std::io::Read::read_exact(&mut conn, &mut buf).unwrap();
                fibra::sleep(Duration::from_millis(2)); // the client waits
                Write::write_all(&mut conn, &buf).unwrap();
            }
        })
    });
    let addr = addr_rx.recv().unwrap();
    let mut stream = TcpStream::connect(addr).unwrap(); // no runtime here
    futures::executor::block_on(async {
        for i in 0..20u8 {
            let msg = [b'a' + i; 5];
            AsyncWriteExt::write_all(&mut stream, &msg).await.unwrap();
            let mut reply = [0; 5];
            stream.read_exact(&mut reply).await.unwrap();
            assert_eq!(reply, msg);
        }
        // A sleep there too.
        let start = Instant::now();
        fibra::Sleep::new(Duration::from_millis(10)).await;
        assert!(start.elapsed() >= Duration::from_millis(10));
    });
    drop(stream);
    server.join().unwrap();
}

/// A task's waker that, when the fallback reactor's thread clones it to
/// register the task, first parks that thread's fiber until the peer has
/// written, and a little longer: the thread's reactor polls meanwhile and
/// takes the socket's readiness edge before the waker is in place. That is
/// the race of a reply that comes at once on a loaded machine, made
/// certain: a waker's clone is user code and may take as long as it likes.
struct SlowClone {
    wakes: AtomicUsize,
    stalled: AtomicBool,
    entered: AtomicBool,
    written: AtomicBool,
}

const SLOW_CLONE: RawWakerVTable = RawWakerVTable::new(
    slow_clone,
    |p| {
        slow_wake_by_ref(p);
        // SAFETY: `p` is the pointer of an `Arc<SlowClone>` this waker owns.
        unsafe { Arc::decrement_strong_count(p.cast::<SlowClone>()) }
    },
    slow_wake_by_ref,
    // SAFETY: as above: the waker's own count is released once.
    |p| unsafe { Arc::decrement_strong_count(p.cast::<SlowClone>()) },
);

fn slow_clone(p: *const ()) -> RawWaker {
    // SAFETY: every `SLOW_CLONE` waker holds a count of the `Arc` behind `p`.
    let slow = unsafe { &*p.cast::<SlowClone>() };
    let on_fallback = std::thread::current().name() == Some("fibra-io");
    if on_fallback && !slow.stalled.swap(true, Ordering::SeqCst) {
        slow.entered.store(true, Ordering::SeqCst);
        let give_up = Instant::now() + Duration::from_secs(10);
        while !slow.written.load(Ordering::SeqCst) && Instant::now() < give_up {
            fibra::sleep(Duration::from_millis(1));
        }
        // The data is there now: this park's poll reports its edge.
        fibra::sleep(Duration::from_millis(5));
    }
    // SAFETY: as above; the new waker gets a count of its own.
    unsafe { Arc::increment_strong_count(p.cast::<SlowClone>()) };
    RawWaker::new(p, &SLOW_CLONE)
}

fn slow_wake_by_ref(p: *const ()) {
    // SAFETY: every `SLOW_CLONE` waker holds a count of the `Arc` behind `p`.
    unsafe { &*p.cast::<SlowClone>() }
        .wakes
        .fetch_add(1, Ordering::SeqCst);
}

/// Waits up to ten seconds for `done`.
fn within_ten_seconds(done: impl Fn() -> bool) -> bool {
    let give_up = Instant::now() + Duration::from_secs(10);
    while !done() {
        if Instant::now() > give_up {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

#[test]
fn a_fallback_registration_made_after_the_reactor_took_the_edge_still_wakes_its_task() {
    let (a, mut peer) = std::os::unix::net::UnixStream::pair().unwrap();
    let a = UnixStream::from(a); // polled from this thread, no runtime here

    // A first wait registers the socket with the fallback reactor.
    let (count, waker) = counter();
    assert!(poll_read_once(&a, &waker).is_pending());
    Write::write_all(&mut peer, b"1").unwrap();
    assert!(within_ten_seconds(|| count.0.load(Ordering::SeqCst) > 0));
    assert!(matches!(poll_read_once(&a, &waker), Poll::Ready(Ok(1))));

    // The second: the reactor takes the edge of "2" before the waker is set.
    let slow = Arc::new(SlowClone {
        wakes: AtomicUsize::new(0),
        stalled: AtomicBool::new(false),
        entered: AtomicBool::new(false),
        written: AtomicBool::new(false),
    });
    let raw = RawWaker::new(Arc::into_raw(slow.clone()).cast(), &SLOW_CLONE);
    // SAFETY: `SLOW_CLONE` keeps the `RawWaker` contract: each waker holds
    // one count of the `Arc`, and its functions are thread-safe (atomics).
    let slow_waker = unsafe { Waker::from_raw(raw) };
    assert!(poll_read_once(&a, &slow_waker).is_pending());
    assert!(
        within_ten_seconds(|| slow.entered.load(Ordering::SeqCst)),
        "the fallback reactor never cloned the waker"
    );
    Write::write_all(&mut peer, b"2").unwrap();
    slow.written.store(true, Ordering::SeqCst);
    assert!(
        within_ten_seconds(|| slow.wakes.load(Ordering::SeqCst) > 0),
        "the task was never woken: its edge was lost"
    );
    assert!(matches!(
        poll_read_once(&a, &slow_waker),
        Poll::Ready(Ok(1))
    ));
}

#[test]
fn a_tokio_task_on_a_runtime_of_its_own_polls_a_fibra_socket() {
    let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
    let a = UnixStream::from(a);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        Write::write_all(&mut b, b"from a thread").unwrap();
    });
    let got = rt.block_on(async move {
        let mut a = a;
        let mut buf = vec![0; 13];
        a.read_exact(&mut buf).await.unwrap();
        buf
    });
    assert_eq!(got, b"from a thread");
    writer.join().unwrap();
}

#[test]
fn sleep_never_completes_early_and_wakes_its_task() {
    fibra::run(|| {
        let ticker = fibra::spawn(|| fibra::sleep(Duration::from_millis(5)));
        let start = Instant::now();
        let mut sleeps: Vec<_> = (1..=5u64)
            .map(|i| fibra::Sleep::new(Duration::from_millis(3 * i)))
            .collect();
        for s in &mut sleeps {
            fibra::block_on_future(s);
        }
        assert!(start.elapsed() >= Duration::from_millis(15));
        // A dropped, unfired sleep leaves nothing behind that fires.
        drop(fibra::Sleep::new(Duration::from_millis(1)));
        ticker.join().unwrap();
    });
}

#[test]
fn poll_accept_accepts_in_an_async_loop() {
    fibra::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let clients = fibra::spawn(move || {
            for _ in 0..10 {
                fibra::sleep(Duration::from_millis(1));
                TcpStream::connect(addr).unwrap();
            }
        });
        let n = fibra::block_on_future(async {
            for _ in 0..10 {
                poll_fn(|cx| listener.poll_accept(cx)).await.unwrap();
            }
            10
        });
        assert_eq!(n, 10);
        clients.join().unwrap();
    });
}

/// One GET with hyper's HTTP/1 client over a fibra socket; the body.
async fn get(addr: std::net::SocketAddr) -> String {
    let stream = TcpStream::connect(addr).unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(FibraIo::new(stream))
        .await
        .unwrap();
    let driver = fibra::spawn(move || fibra::block_on_future(conn));
    let mut bodies = String::new();
    for _ in 0..3 {
        let req = hyper::Request::get("/")
            .header("host", "localhost")
            .body(Empty::<bytes::Bytes>::new())
            .unwrap();
        let resp = sender.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        bodies = String::from_utf8(body.to_vec()).unwrap();
    }
    drop(sender);
    driver.join().unwrap().unwrap();
    bodies
}

#[test]
fn hyper_clients_in_a_hundred_fibers_against_the_hyper_server() {
    fibra::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = fibra::spawn(move || hyper_hello::serve(listener));
        let clients: Vec<_> = (0..100)
            .map(|_| fibra::spawn(move || fibra::block_on_future(get(addr))))
            .collect();
        for c in clients {
            assert_eq!(c.join().unwrap(), "Hello, world!");
        }
        server.cancel();
    });
}

#[test]
fn hyper_http2_server_and_client_on_fibers() {
    fibra::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = fibra::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let conn = hyper::server::conn::http2::Builder::new(FibraExec)
                .timer(FibraTimer)
                .serve_connection(
                    FibraIo::new(stream),
                    hyper::service::service_fn(hyper_hello::hello),
                );
            fibra::block_on_future(conn).unwrap();
        });
        let stream = TcpStream::connect(addr).unwrap();
        let (sender, conn) = fibra::block_on_future(
            hyper::client::conn::http2::Builder::new(FibraExec)
                .timer(FibraTimer)
                .handshake(FibraIo::new(stream)),
        )
        .unwrap();
        let driver = fibra::spawn(move || fibra::block_on_future(conn));
        // Streams at once, over the one connection, from 20 fibers.
        let requests: Vec<_> = (0..20)
            .map(|_| {
                let mut sender = sender.clone();
                fibra::spawn(move || {
                    fibra::block_on_future(async move {
                        let req = hyper::Request::get("http://localhost/")
                            .body(Empty::<bytes::Bytes>::new())
                            .unwrap();
                        let resp = sender.send_request(req).await.unwrap();
                        resp.into_body().collect().await.unwrap().to_bytes()
                    })
                })
            })
            .collect();
        for r in requests {
            assert_eq!(&r.join().unwrap()[..], b"Hello, world!");
        }
        drop(sender);
        driver.join().unwrap().unwrap();
        server.join().unwrap();
    });
}

// ----- the example under real HTTP load tools ---------------------------------

/// The example's binary, which `cargo test --features futures-io` builds.
fn example_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap(); // target/<profile>/deps/futures_io-…
    exe.parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/hyper_hello")
}

struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_example() -> Option<(Server, String)> {
    let bin = example_binary();
    if !bin.exists() {
        eprintln!("SKIPPED: {} not built", bin.display());
        return None;
    }
    let mut child = Command::new(bin)
        .arg("127.0.0.1:0")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    StdBufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_string()
        + "/";
    Some((Server(child), url))
}

fn tool(name: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        eprintln!(
            "SKIPPED {name}: not on PATH (apt-get install -y apache2-utils nghttp2-client wrk curl)"
        );
    }
    found
}

fn run_tool(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

#[test]
fn the_hyper_example_under_curl_ab_h2load_and_wrk_with_zero_errors() {
    let Some((_server, url)) = start_example() else {
        return;
    };
    if tool("curl") {
        let body = run_tool(Command::new("curl").args(["-s", "--fail", &url]));
        assert_eq!(body, "Hello, world!");
    }
    if tool("ab") {
        let out = run_tool(Command::new("ab").args(["-k", "-n", "20000", "-c", "50", &url]));
        assert!(out.contains("Complete requests:      20000"), "{out}");
        assert!(out.contains("Failed requests:        0"), "{out}");
        assert!(!out.contains("Non-2xx"), "{out}");
        println!(
            "ab: {}",
            out.lines()
                .find(|l| l.starts_with("Requests per second"))
                .unwrap_or("")
        );
    }
    if tool("h2load") {
        let out = run_tool(Command::new("h2load").args(["--h1", "-n", "20000", "-c", "50", &url]));
        assert!(
            out.contains("20000 succeeded, 0 failed, 0 errored, 0 timeout"),
            "{out}"
        );
        assert!(out.contains("status codes: 20000 2xx"), "{out}");
    }
    if tool("wrk") {
        let out = run_tool(Command::new("wrk").args(["-t1", "-c50", "-d2s", &url]));
        assert!(!out.contains("Socket errors"), "{out}");
        assert!(!out.contains("Non-2xx"), "{out}");
        println!(
            "wrk: {}",
            out.lines()
                .find(|l| l.starts_with("Requests/sec"))
                .unwrap_or("")
        );
    }
}
