//! `examples/shutdown.rs` as a real process sent a real SIGINT, with
//! scripted clients over loopback TCP: it must stop accepting, serve the
//! connections in flight for the grace period, then cancel (close) the
//! ones left, exit with success, and say so.
//!
//! The server is this test binary run again with [`CHILD`] set, in the
//! test [`shutdown_child`], which calls the example's `serve` (included
//! by path): so it runs under `cargo test --test shutdown_example` and
//! `cargo test --tests` too, which do not build the examples.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[path = "../examples/shutdown.rs"]
#[allow(dead_code)]
mod example;

/// Set, to the grace period in milliseconds, in the child's environment.
const CHILD: &str = "FIBRA_SHUTDOWN_CHILD";

/// How long anything may take on a loaded CI machine (this VM has seen
/// 25-30 % steal and freezes of a second); a hang fails instead.
const PATIENCE: Duration = Duration::from_secs(30);

/// The server, when this process is the child.
#[test]
fn shutdown_child() {
    if let Ok(grace) = std::env::var(CHILD) {
        let grace = Duration::from_millis(grace.parse().unwrap());
        example::serve("127.0.0.1:0", grace).unwrap();
    }
}

/// The example, running in a child process; killed if still running when
/// dropped (a failed test).
struct Server {
    child: Child,
    addr: SocketAddr,
    /// The child's stdout and stderr, line by line (stderr's marked).
    lines: mpsc::Receiver<String>,
    /// Every line read so far, for failure messages.
    seen: Vec<String>,
}

impl Server {
    fn start(grace: Duration) -> Server {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "shutdown_child",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, grace.as_millis().to_string())
            .env("RUST_BACKTRACE", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot run the test binary as a child");
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let tx2 = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx2.send(format!("stderr: {line}"));
            }
        });
        let mut server = Server {
            child,
            addr: "0.0.0.0:0".parse().unwrap(),
            lines,
            seen: Vec::new(),
        };
        // (With one test thread, libtest prints the test's name before
        // the first line, on the same line: look inside the line.)
        let line = server.expect("listening on ");
        let (_, addr) = line.split_once("listening on ").unwrap();
        server.addr = addr.trim().parse().unwrap();
        server
    }

    /// The next line of stdout that contains `what`, within [`PATIENCE`].
    fn expect(&mut self, what: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(what) && !line.starts_with("stderr: ") {
                        return line;
                    }
                }
                Err(e) => panic!(
                    "the server did not print {what:?} ({e:?}); it printed:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// Sends the server a SIGINT, as Ctrl-C in its terminal does.
    fn ctrl_c(&self) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) with our own child's pid and a valid signal.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    }

    /// Waits, within [`PATIENCE`], for the server to exit.
    fn exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit; it printed:\n{}",
                self.seen.join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A client connection, with the server's first answer read: so it is
    /// accepted and served, not only queued in the listen backlog.
    fn client(&self) -> Client {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut c = Client {
            r: BufReader::new(s.try_clone().unwrap()),
            s,
        };
        c.send("hello");
        assert_eq!(c.answer(), "hello");
        c
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Client {
    s: TcpStream,
    r: BufReader<TcpStream>,
}

impl Client {
    fn send(&mut self, line: &str) {
        self.s.write_all(format!("{line}\n").as_bytes()).unwrap();
    }

    fn answer(&mut self) -> String {
        let mut line = String::new();
        self.r.read_line(&mut line).unwrap();
        assert!(line.ends_with('\n'), "no whole answer: {line:?}");
        line.trim_end().to_string()
    }

    /// Waits (up to `limit`) for the server to close the connection, with
    /// no further answer; returns when that was seen.
    fn closed_within(&mut self, limit: Duration) -> Instant {
        self.s.set_read_timeout(Some(limit)).unwrap();
        let mut rest = Vec::new();
        match self.r.read_to_end(&mut rest) {
            Ok(_) => {}
            // (A close with unread data of ours in the server's buffer.)
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            Err(e) => panic!("the connection was not closed within {limit:?}: {e}"),
        }
        assert!(
            rest.is_empty(),
            "more than was asked for: {:?}",
            String::from_utf8_lossy(&rest)
        );
        Instant::now()
    }
}

#[test]
fn ctrl_c_stops_accepting_serves_in_flight_for_the_grace_then_cancels() {
    let grace = Duration::from_secs(4);
    let mut server = Server::start(grace);
    let mut quick = server.client(); // idle at the Ctrl-C
    let mut slow = server.client();
    slow.send("work 600000"); // 10 minutes: still busy at the end of the grace
    server.ctrl_c();
    let sent = Instant::now();

    let line = server.expect("stopped accepting");
    assert!(line.contains("2 in flight"), "{line}");
    match TcpStream::connect(server.addr) {
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
        other => panic!("a connect after the Ctrl-C was not refused: {other:?}"),
    }

    // The idle connection is still served, and closed after its answer.
    quick.send("work 200");
    assert_eq!(quick.answer(), "done 200");
    let quick_closed = quick.closed_within(PATIENCE);
    assert!(
        quick_closed < sent + grace,
        "the quick connection was closed {:?} after the Ctrl-C, not after its answer",
        quick_closed - sent
    );

    // The busy one gets no answer: it is cancelled at the grace's end.
    let slow_closed = slow.closed_within(grace + PATIENCE);
    assert!(
        slow_closed >= sent + grace,
        "the busy connection was closed {:?} after the Ctrl-C, before the {grace:?} grace",
        slow_closed - sent
    );

    let status = server.exit();
    let summary = server.expect("shut down:");
    assert!(
        status.success(),
        "{status}; it printed:\n{}",
        server.seen.join("\n")
    );
    assert!(
        summary.contains("shut down: 1 finished, 1 cancelled"),
        "{summary}"
    );
}

#[test]
fn a_second_ctrl_c_cancels_at_once() {
    let grace = Duration::from_secs(600);
    let mut server = Server::start(grace);
    let mut slow = server.client();
    slow.send("work 600000");
    server.ctrl_c();
    let line = server.expect("stopped accepting");
    assert!(line.contains("1 in flight"), "{line}");
    server.ctrl_c();
    server.expect("second Ctrl-C");
    slow.closed_within(PATIENCE); // not the 600 s grace
    let status = server.exit();
    let summary = server.expect("shut down:");
    assert!(
        status.success(),
        "{status}; it printed:\n{}",
        server.seen.join("\n")
    );
    assert!(
        summary.contains("shut down: 0 finished, 1 cancelled"),
        "{summary}"
    );
}
