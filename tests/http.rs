//! The HTTP examples (`http_hello`, `https_hello`) as real processes, driven
//! over real sockets: raw requests byte by byte where framing matters, and
//! real clients nobody here wrote (`ab`, `curl`, `h2load`, `wrk`), each of
//! which must finish with no error. A missing client skips its test with a
//! message (CI installs them: apache2-utils, curl, nghttp2-client, wrk).
//!
//! The example binaries are found beside this test's binary
//! (`target/<profile>/examples/`); `cargo test` builds them first.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Long enough for a loaded CI machine; a hang fails instead of blocking.
const PATIENCE: Duration = Duration::from_secs(20);

/// An example server on a free port, killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    /// None, with a message, when the example is not built: `cargo test`
    /// builds it, but `cargo test --tests` (the AddressSanitizer run) does
    /// not.
    fn start(example: &str, args: &[&str]) -> Option<Server> {
        let exe = std::env::current_exe().unwrap();
        let path = exe.parent().unwrap().join("../examples").join(example);
        if !path.exists() {
            say(&format!(
                "SKIPPED: {} is not built (`cargo test` builds the examples; \
                 `cargo test --tests` does not: cargo build --example {example})",
                path.display()
            ));
            return None;
        }
        let mut child = Command::new(&path)
            .arg("127.0.0.1:0")
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The first line on stderr says where it listens; the rest is
        // drained so that the server never blocks on a full pipe.
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let mut server = Server {
            child,
            addr: "0.0.0.0:0".parse().unwrap(),
        };
        let line = rx
            .recv_timeout(PATIENCE)
            .expect("the server did not say where it listens");
        let addr = line
            .rsplit("://")
            .next()
            .unwrap()
            .trim_end_matches('/')
            .parse()
            .unwrap_or_else(|_| panic!("unexpected first line: {line}"));
        server.addr = addr;
        Some(server)
    }

    fn url(&self, scheme: &str) -> String {
        format!("{scheme}://{}/", self.addr)
    }

    fn client(&self) -> Client {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        s.set_write_timeout(Some(PATIENCE)).unwrap();
        s.set_nodelay(true).unwrap();
        Client { s, buf: Vec::new() }
    }

    /// Resident memory, in KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// Still serving: a fresh connection gets an answer.
    fn assert_serves(&self) {
        let mut c = self.client();
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(c.response().body, b"Hello, world!");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_server(args: &[&str]) -> Option<Server> {
    Server::start("http_hello", args)
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A raw HTTP client over a blocking socket.
struct Client {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).unwrap();
    }

    fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 16 * 1024];
        // A blocking read with a timeout may fail with EINTR even without a
        // signal handler (after the process was stopped and continued, see
        // signal(7)): that is not the server's answer, so read again.
        let n = loop {
            match self.s.read(&mut chunk) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r.expect("the server neither answered nor closed in time"),
            }
        };
        self.buf.extend_from_slice(&chunk[..n]);
        n
    }

    /// The next response; its body by its Content-Length (none for HEAD).
    fn response_to(&mut self, head: bool) -> Response {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut r = httparse::Response::new(&mut headers);
            if let httparse::Status::Complete(len) = r.parse(&self.buf).unwrap() {
                let status = r.code.unwrap();
                let headers: Vec<(String, String)> = r
                    .headers
                    .iter()
                    .map(|h| {
                        let value = String::from_utf8(h.value.to_vec()).unwrap();
                        (h.name.to_string(), value)
                    })
                    .collect();
                let length = headers
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                    .map(|(_, v)| v.parse::<usize>().unwrap());
                let body_len = if head || status == 100 {
                    0
                } else {
                    length.expect("a response without Content-Length")
                };
                while self.buf.len() < len + body_len {
                    assert!(self.fill() > 0, "closed in the middle of a response");
                }
                let body = self.buf[len..len + body_len].to_vec();
                self.buf.drain(..len + body_len);
                return Response {
                    status,
                    headers,
                    body,
                };
            }
            assert!(
                self.fill() > 0,
                "closed before a response: {:?}",
                String::from_utf8_lossy(&self.buf)
            );
        }
    }

    fn response(&mut self) -> Response {
        self.response_to(false)
    }

    /// The server closes, with nothing more sent.
    fn assert_closed(&mut self) {
        assert_eq!(self.fill(), 0, "expected the server to close");
        assert!(
            self.buf.is_empty(),
            "unexpected bytes: {:?}",
            String::from_utf8_lossy(&self.buf)
        );
    }

    /// One response with `status`, `connection: close`, then the close.
    fn assert_rejected(&mut self, status: u16) {
        let r = self.response();
        assert_eq!(r.status, status);
        assert_eq!(r.header("connection"), Some("close"));
        self.assert_closed();
    }
}

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";

#[test]
fn http11_keeps_alive_by_default() {
    let Some(server) = http_server(&[]) else {
        return;
    };
    let mut c = server.client();
    for _ in 0..3 {
        c.send(GET);
        let r = c.response();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"Hello, world!");
        assert_eq!(r.header("content-length"), Some("13"));
        assert_eq!(r.header("connection"), None);
    }
}

#[test]
fn http10_keeps_alive_when_asked_and_says_so() {
    let Some(server) = http_server(&[]) else {
        return;
    };
    let mut c = server.client();
    for _ in 0..3 {
        c.send(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
        let r = c.response();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("connection"), Some("keep-alive"));
        assert_eq!(r.body, b"Hello, world!");
    }
    // Not asked: one answer, then the close.
    c.send(b"GET / HTTP/1.0\r\n\r\n");
    let r = c.response();
    assert_eq!((r.status, r.header("connection")), (200, Some("close")));
    c.assert_closed();
}

#[test]
fn connection_close_is_answered_then_closed() {
    let Some(server) = http_server(&[]) else {
        return;
    };
    let mut c = server.client();
    c.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let r = c.response();
    assert_eq!((r.status, r.header("connection")), (200, Some("close")));
    assert_eq!(r.body, b"Hello, world!");
    c.assert_closed();
    // The same, among other tokens, after a request kept alive.
    let mut c = server.client();
    c.send(GET);
    assert_eq!(c.response().status, 200);
    c.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: TE, close\r\n\r\n");
    assert_eq!(c.response().header("connection"), Some("close"));
    c.assert_closed();
}

/// A body that looks like a request: parsed as one, it would get a 404.
const SMUGGLED: &[u8] = b"GET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n";

#[test]
fn content_length_bodies_are_read_not_parsed() {
    let Some(server) = http_server(&[]) else {
        return;
    };
    let mut c = server.client();
    // Whole, pipelined with the next request.
    let mut req = format!(
        "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        SMUGGLED.len()
    )
    .into_bytes();
    req.extend_from_slice(SMUGGLED);
    req.extend_from_slice(GET);
    c.send(&req);
    for _ in 0..2 {
        let r = c.response();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"Hello, world!"[..]));
    }
    // In pieces that end anywhere, and a body larger than the buffer.
    for body_len in [SMUGGLED.len(), 100_000] {
        let body: Vec<u8> = SMUGGLED.iter().copied().cycle().take(body_len).collect();
        let mut req =
            format!("PUT / HTTP/1.1\r\nHost: t\r\nContent-Length: {body_len}\r\n\r\n").into_bytes();
        req.extend_from_slice(&body);
        req.extend_from_slice(GET);
        for piece in req.chunks(body_len / 7 + 1) {
            c.send(piece);
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(c.response().status, 200);
        assert_eq!(c.response().status, 200);
    }
}

#[test]
fn chunked_bodies_are_read_not_parsed() {
    let Some(server) = http_server(&[]) else {
        return;
    };
    let mut c = server.client();
    let mut req =
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n".to_vec();
    let (first, second) = SMUGGLED.split_at(10);
    req.extend_from_slice(format!("{:x};name=value\r\n", first.len()).as_bytes());
    req.extend_from_slice(first);
    req.extend_from_slice(format!("\r\n{:X}\r\n", second.len()).as_bytes());
    req.extend_from_slice(second);
    req.extend_from_slice(b"\r\n0\r\nX-Trailer: GET /trailer HTTP/1.1\r\n\r\n");
    req.extend_from_slice(GET);
    // Whole, then one byte per write: every framing state split.
    c.send(&req);
    assert_eq!(c.response().status, 200);
    assert_eq!(c.response().status, 200);
    for byte in &req {
        c.send(std::slice::from_ref(byte));
        std::thread::sleep(Duration::from_micros(300));
    }
    assert_eq!(c.response().status, 200);
    assert_eq!(c.response().status, 200);
    // A body of many chunks, larger than the buffer.
    let mut req = b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for i in 0..300 {
        let chunk: Vec<u8> = SMUGGLED.iter().copied().cycle().take(i * 3 + 1).collect();
        req.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        req.extend_from_slice(&chunk);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    req.extend_from_slice(GET);
    c.send(&req);
    assert_eq!(c.response().status, 200);
    assert_eq!(c.response().status, 200);
}

#[test]
fn expect_100_continue_is_answered_before_the_body() {
    let Some(server) = http_server(&[]) else {
        return;
    };
    let mut c = server.client();
    c.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    let interim = c.response();
    assert_eq!(interim.status, 100);
    c.send(b"hello");
    let r = c.response();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"Hello, world!"[..]));
}

#[test]
fn head_has_the_get_headers_and_no_body() {
    let Some(server) = http_server(&[]) else {
        return;
    };
    let mut c = server.client();
    let mut req = b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n".to_vec();
    req.extend_from_slice(GET);
    c.send(&req);
    let head = c.response_to(true);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("13"));
    // The next bytes are the GET's answer, not a body.
    let get = c.response();
    assert_eq!(
        (get.status, get.body.as_slice()),
        (200, &b"Hello, world!"[..])
    );
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let Some(server) = http_server(&[]) else {
        return;
    };
    let mut c = server.client();
    let mut req = Vec::new();
    for i in 0..500 {
        if i % 3 == 0 {
            req.extend_from_slice(
                format!("GET /missing/{i} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes(),
            );
        } else {
            req.extend_from_slice(GET);
        }
    }
    c.send(&req);
    for i in 0..500 {
        let expected = if i % 3 == 0 { 404 } else { 200 };
        assert_eq!(c.response().status, expected, "response {i}");
    }
}

#[test]
fn malformed_requests_get_400_then_close() {
    let Some(server) = http_server(&[]) else {
        return;
    };
    let cases: &[&[u8]] = &[
        b"GARBAGE\r\n\r\n",
        b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n", // no Host
        b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 12abc\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY",
    ];
    for case in cases {
        let mut c = server.client();
        c.send(case);
        c.assert_rejected(400);
    }
    // After a good request on the same connection, too.
    let mut c = server.client();
    let mut req = GET.to_vec();
    req.extend_from_slice(b"\x00\x01\x02\r\n\r\n");
    c.send(&req);
    assert_eq!(c.response().status, 200);
    c.assert_rejected(400);
    // A well-formed version the server does not speak is 505; a version
    // that is not `HTTP/<digit>.<digit>` is a malformed request, 400 (as
    // nginx and hyper answer).
    for good in ["HTTP/2.0", "HTTP/3.0", "HTTP/0.9"] {
        let mut c = server.client();
        c.send(format!("GET / {good}\r\nHost: t\r\n\r\n").as_bytes());
        c.assert_rejected(505);
    }
    for bad in [
        "HTTP/x",
        "HTTP/1.x",
        "HTTP/11.1",
        "FOO/1.1",
        "HTTP/1.1.1",
        "http/1.1",
    ] {
        let mut c = server.client();
        c.send(format!("GET / {bad}\r\nHost: t\r\n\r\n").as_bytes());
        c.assert_rejected(400);
    }
    // Sent a byte at a time, a good version is still told from a bad one.
    let mut c = server.client();
    for b in b"GET / HTTP/2.0\r\nHost: t\r\n\r\n" {
        c.send(&[*b]);
    }
    c.assert_rejected(505);
    server.assert_serves();
}

#[test]
fn oversized_heads_get_431_with_memory_bounded() {
    let Some(server) = http_server(&[]) else {
        return;
    };
    // Too many fields.
    let mut c = server.client();
    let mut req = b"GET / HTTP/1.1\r\nHost: t\r\n".to_vec();
    for i in 0..100 {
        req.extend_from_slice(format!("X-{i}: {i}\r\n").as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    c.send(&req);
    c.assert_rejected(431);
    // A 200 MiB field, sent while the answer is read.
    let before = server.rss_kib();
    let mut c = server.client();
    let mut writer = c.s.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let mut sent = 0usize;
        let _ = writer.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nX-Huge: ");
        let chunk = vec![b'a'; 64 * 1024];
        while sent < 200 << 20 {
            if writer.write_all(&chunk).is_err() {
                break; // the server closed
            }
            sent += chunk.len();
        }
        sent
    });
    let r = c.response();
    assert_eq!((r.status, r.header("connection")), (431, Some("close")));
    let sent = sender.join().unwrap();
    assert!(sent < 200 << 20, "the server read all 200 MiB of a header");
    let after = server.rss_kib();
    assert!(
        after < before + 16 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );
    server.assert_serves();
}

#[test]
fn oversized_bodies_get_413() {
    let Some(server) = http_server(&["--max-body", "1000"]) else {
        return;
    };
    let mut c = server.client();
    c.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 100000000\r\n\r\n");
    c.assert_rejected(413);
    // Declared with 100-continue: refused before the client sends it.
    let mut c = server.client();
    c.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1001\r\nExpect: 100-continue\r\n\r\n");
    c.assert_rejected(413);
    // Chunked: found out on the way.
    let mut c = server.client();
    let mut req = b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..3 {
        req.extend_from_slice(b"190\r\n");
        req.extend_from_slice(&[b'x'; 400]);
        req.extend_from_slice(b"\r\n");
    }
    c.send(&req);
    c.assert_rejected(413);
    // At the limit it is served.
    let mut c = server.client();
    let mut req = b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n".to_vec();
    req.extend_from_slice(&[b'x'; 1000]);
    c.send(&req);
    assert_eq!(c.response().status, 200);
}

#[test]
fn idle_connections_are_closed() {
    let Some(server) = http_server(&["--idle-timeout-ms", "300"]) else {
        return;
    };
    let mut c = server.client();
    c.send(GET);
    assert_eq!(c.response().status, 200);
    let start = Instant::now();
    c.assert_closed();
    assert!(start.elapsed() >= Duration::from_millis(250));
    // Stalled in the middle of a request: told so, then closed.
    let mut c = server.client();
    c.send(b"GET / HTTP/1.1\r\nHost:");
    c.assert_rejected(408);
    // A head that trickles in, each byte well within the idle timeout:
    // cut off at the head's deadline all the same.
    let mut c = server.client();
    let start = Instant::now();
    c.s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    for byte in b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ".iter().cycle() {
        let _ = c.s.write_all(std::slice::from_ref(byte));
        if c.s.peek(&mut [0]).is_ok() {
            break; // the server answered (or closed)
        }
        assert!(start.elapsed() < PATIENCE, "the slow head was not cut off");
    }
    c.s.set_read_timeout(Some(PATIENCE)).unwrap();
    c.assert_rejected(408);
    // Silent from the start: just closed.
    let mut c = server.client();
    c.assert_closed();
    server.assert_serves();
}

#[test]
fn date_header_is_the_time_now() {
    let date = || {
        let out = Command::new("date")
            .args(["-u", "+%a, %d %b %Y %H:%M:%S GMT"])
            .env("LC_ALL", "C")
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let Some(server) = http_server(&[]) else {
        return;
    };
    let mut c = server.client();
    for _ in 0..3 {
        let before = date();
        c.send(GET);
        let r = c.response();
        let after = date();
        let got = r.header("date").unwrap();
        if got == before || got == after {
            return;
        }
    }
    panic!("the Date header is not the time now");
}

#[test]
fn random_bytes_never_take_the_server_down() {
    let Some(server) = http_server(&["--idle-timeout-ms", "500"]) else {
        return;
    };
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..200 {
        let mut c = server.client();
        // Half of them start like a request, so the fuzz reaches the headers.
        let mut bytes = if round % 2 == 0 {
            b"POST / HTTP/1.1\r\nHost: t\r\n".to_vec()
        } else {
            Vec::new()
        };
        let len = (next() % 3000) as usize;
        let alphabet =
            b"\r\n :;0123456789abcdefGET/HTTP1.chunkedContent-LengthTransfer-Encoding\x00\xff";
        bytes.extend((0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]));
        let _ = c.s.write_all(&bytes);
        let mut sink = Vec::new();
        let _ = c.s.read_to_end(&mut sink); // an answer and a close, or the idle timeout
    }
    server.assert_serves();
}

// ---- real clients ----

/// Prints past the test harness's capture, so that a skip shows in a
/// passing run.
fn say(message: &str) {
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// Whether `tool` is installed; if not, says which test it skips.
fn have(tool: &str, test: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        say(&format!(
            "SKIPPED {test}: `{tool}` is not installed \
             (apt-get install apache2-utils curl nghttp2-client wrk)"
        ));
    }
    found
}

/// Runs a client to the end (at most two minutes); returns its stdout and
/// stderr, and whether it exited with success.
fn run(tool: &str, args: &[&str]) -> (String, bool) {
    let out = Command::new("timeout")
        .arg("120")
        .arg(tool)
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (text, out.status.success())
}

/// The number after `label` on the line that has it.
fn number_after(text: &str, label: &str) -> Option<u64> {
    let at = text.find(label)? + label.len();
    text[at..]
        .split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())?
        .parse()
        .ok()
}

/// `ab`'s run: every request complete, none failed, all 2xx.
fn check_ab(text: &str, ok: bool, n: u64) {
    assert!(ok, "ab failed:\n{text}");
    assert_eq!(number_after(text, "Complete requests:"), Some(n), "{text}");
    assert_eq!(number_after(text, "Failed requests:"), Some(0), "{text}");
    assert!(!text.contains("Non-2xx"), "{text}");
}

#[test]
fn ab_keep_alive() {
    if !have("ab", "ab_keep_alive") {
        return;
    }
    let Some(server) = http_server(&[]) else {
        return;
    };
    let (text, ok) = run(
        "ab",
        &["-q", "-k", "-n", "20000", "-c", "50", &server.url("http")],
    );
    check_ab(&text, ok, 20000);
    assert_eq!(
        number_after(&text, "Keep-Alive requests:"),
        Some(20000),
        "{text}"
    );
}

#[test]
fn ab_http10_without_keep_alive() {
    if !have("ab", "ab_http10_without_keep_alive") {
        return;
    }
    let Some(server) = http_server(&[]) else {
        return;
    };
    let (text, ok) = run("ab", &["-q", "-n", "2000", "-c", "20", &server.url("http")]);
    check_ab(&text, ok, 2000);
}

#[test]
fn curl_head_and_post() {
    if !have("curl", "curl_head_and_post") {
        return;
    }
    let Some(server) = http_server(&[]) else {
        return;
    };
    let url = server.url("http");
    let (text, ok) = run("curl", &["-sS", "-I", "--max-time", "20", &url]);
    assert!(ok, "{text}");
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains("content-length: 13\r\n"), "{text}");
    // A small body, and a large one sent after `100 Continue`.
    let big = std::env::temp_dir().join(format!("fibra-http-body-{}", std::process::id()));
    std::fs::write(&big, "x".repeat(300_000)).unwrap();
    let big_arg = format!("@{}", big.display());
    for body in ["name=fibra", big_arg.as_str()] {
        let (text, ok) = run(
            "curl",
            &[
                "-sS",
                "--max-time",
                "20",
                "-H",
                "Expect: 100-continue",
                "-w",
                " %{http_code}",
                "--data-binary",
                body,
                &url,
            ],
        );
        assert!(ok, "{text}");
        assert_eq!(text, "Hello, world! 200");
    }
    let _ = std::fs::remove_file(&big);
}

#[test]
fn h2load_http1() {
    if !have("h2load", "h2load_http1") {
        return;
    }
    let Some(server) = http_server(&[]) else {
        return;
    };
    let (text, _) = run(
        "h2load",
        &[
            "--h1",
            "-n",
            "20000",
            "-c",
            "50",
            "-m",
            "10",
            &server.url("http"),
        ],
    );
    check_h2load(&text, 20000);
}

fn check_h2load(text: &str, n: u64) {
    assert_eq!(number_after(text, "requests:"), Some(n), "{text}");
    assert!(
        text.contains(&format!(
            "{n} done, {n} succeeded, 0 failed, 0 errored, 0 timeout"
        )),
        "{text}"
    );
    assert!(text.contains(&format!("status codes: {n} 2xx")), "{text}");
}

/// `wrk`: requests made, no socket error, all 2xx.
fn check_wrk(text: &str, ok: bool) {
    assert!(ok, "wrk failed:\n{text}");
    let requests = text
        .lines()
        .find(|l| l.contains("requests in"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(requests > 0, "{text}");
    assert!(!text.contains("Socket errors"), "{text}");
    assert!(!text.contains("Non-2xx"), "{text}");
}

#[test]
fn wrk_keep_alive() {
    if !have("wrk", "wrk_keep_alive") {
        return;
    }
    let Some(server) = http_server(&[]) else {
        return;
    };
    let (text, ok) = run(
        "wrk",
        &[
            "-t1",
            "-c100",
            "-d2s",
            "--timeout",
            "10s",
            &server.url("http"),
        ],
    );
    check_wrk(&text, ok);
}

// ---- HTTPS ----

fn https_server(args: &[&str]) -> Option<Server> {
    Server::start("https_hello", args)
}

#[test]
fn https_with_curl_ab_h2load_wrk() {
    let Some(server) = https_server(&[]) else {
        return;
    };
    let url = server.url("https");
    if have("curl", "https_with_curl_ab_h2load_wrk (curl)") {
        let (text, ok) = run(
            "curl",
            &["-sSk", "--max-time", "20", "-w", " %{http_code}", &url],
        );
        assert!(ok, "{text}");
        assert_eq!(text, "Hello, world! 200");
        let (text, ok) = run(
            "curl",
            &[
                "-sSk",
                "--max-time",
                "20",
                "--data-binary",
                &"y".repeat(50_000),
                &url,
            ],
        );
        assert!(ok, "{text}");
        assert_eq!(text, "Hello, world!");
    }
    if have("ab", "https_with_curl_ab_h2load_wrk (ab)") {
        let (text, ok) = run("ab", &["-q", "-k", "-n", "2000", "-c", "20", &url]);
        check_ab(&text, ok, 2000);
    }
    if have("h2load", "https_with_curl_ab_h2load_wrk (h2load)") {
        let (text, _) = run("h2load", &["--h1", "-n", "2000", "-c", "20", &url]);
        check_h2load(&text, 2000);
    }
    if have("wrk", "https_with_curl_ab_h2load_wrk (wrk)") {
        let (text, ok) = run("wrk", &["-t1", "-c50", "-d2s", "--timeout", "10s", &url]);
        check_wrk(&text, ok);
    }
}

#[test]
fn https_silent_and_plain_clients_cost_only_their_connection() {
    let Some(server) = https_server(&["--handshake-timeout-ms", "500"]) else {
        return;
    };
    // Say nothing: closed at the handshake's deadline.
    let mut silent = server.client();
    // Speak plain HTTP: closed (after a TLS alert, at most).
    let mut plain = server.client();
    plain.send(GET);
    let mut alert = Vec::new();
    plain.s.read_to_end(&mut alert).unwrap();
    assert!(
        !alert.starts_with(b"HTTP"),
        "a plain answer on the TLS port"
    );
    // Trickle a ClientHello's first bytes, then stall: closed too.
    let mut slow = server.client();
    slow.send(&[0x16, 0x03, 0x01]);
    // Meanwhile everyone else is served.
    if have("curl", "https_silent_and_plain_clients (curl part)") {
        let (text, ok) = run("curl", &["-sSk", "--max-time", "20", &server.url("https")]);
        assert!(ok && text == "Hello, world!", "{text}");
    }
    let start = Instant::now();
    silent.assert_closed();
    slow.assert_closed();
    assert!(start.elapsed() < Duration::from_secs(10));
}

/// A certificate for `localhost` as PEM files (removed when dropped).
struct CertFiles {
    made: rcgen::CertifiedKey<rcgen::KeyPair>,
    dir: std::path::PathBuf,
    cert: std::path::PathBuf,
    key: std::path::PathBuf,
}

impl CertFiles {
    fn new(test: &str) -> CertFiles {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let dir = std::env::temp_dir().join(format!("fibra-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert, made.cert.pem()).unwrap();
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
        CertFiles {
            made,
            dir,
            cert,
            key,
        }
    }
}

impl Drop for CertFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn https_keeps_alive_then_idles_out_with_close_notify() {
    use std::sync::Arc;
    let files = CertFiles::new("https-idle");
    let (cert, key) = (files.cert.to_str().unwrap(), files.key.to_str().unwrap());
    let Some(server) = https_server(&["--cert", cert, "--key", key, "--idle-timeout-ms", "300"])
    else {
        return;
    };
    let mut roots = rustls::RootCertStore::empty();
    roots.add(files.made.cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let sock = server.client().s;
    let mut tls = rustls::StreamOwned::new(conn, sock);
    for _ in 0..3 {
        tls.write_all(GET).unwrap();
        // One response: the head, then its 13 bytes.
        let (mut answer, mut chunk) = (Vec::new(), [0u8; 4096]);
        while !answer.ends_with(b"Hello, world!") {
            // (A plain thread's socket read with a timeout may end with
            // EINTR: see `Client::fill`.)
            let n = match tls.read(&mut chunk) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => r.unwrap(),
            };
            assert!(n > 0, "closed before the answer");
            answer.extend_from_slice(&chunk[..n]);
        }
        assert!(answer.starts_with(b"HTTP/1.1 200 OK\r\n"));
    }
    // Then silence: the server ends the session cleanly (close_notify).
    let start = Instant::now();
    let mut rest = Vec::new();
    tls.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    assert!(start.elapsed() >= Duration::from_millis(250));
}

#[test]
fn https_serves_the_certificate_it_is_given() {
    if !have("curl", "https_serves_the_certificate_it_is_given") {
        return;
    }
    let files = CertFiles::new("https-cert");
    let (cert, key) = (&files.cert, &files.key);
    let Some(server) = https_server(&[
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ]) else {
        return;
    };
    // Verified against that certificate, not skipped with -k.
    let url = format!("https://localhost:{}/", server.addr.port());
    let resolve = format!("localhost:{}:127.0.0.1", server.addr.port());
    let (text, ok) = run(
        "curl",
        &[
            "-sS",
            "--max-time",
            "20",
            "--cacert",
            cert.to_str().unwrap(),
            "--resolve",
            &resolve,
            &url,
        ],
    );
    assert!(ok, "{text}");
    assert_eq!(text, "Hello, world!");
}
