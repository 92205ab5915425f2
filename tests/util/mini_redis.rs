//! What the mini_redis tests share: starting `examples/mini_redis` and
//! `redis-server`, a raw RESP2/RESP3 client that returns each reply's
//! bytes, and the session a differential script records its replies in.
//!
//! Included by path (`#[path = "util/mini_redis.rs"] mod mini;`) from the
//! `tests/mini_redis*.rs` files, and from `tests/hook*.rs` for its
//! redis-server.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

/// No read waits longer: a hang fails the test instead of stalling it.
pub const TIMEOUT: Duration = Duration::from_secs(20);

// ----- servers ---------------------------------------------------------------

/// A server process, killed when dropped.
pub struct Server {
    pub child: Child,
    pub port: u16,
    dir: Option<PathBuf>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The example's binary, built in this test's profile. `cargo test` builds
/// examples before it runs tests; `cargo test --test mini_redis` does not,
/// so when the binary is missing or older than the sources, it is built
/// here, in a target directory of its own (the running cargo holds ours).
pub fn example_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().unwrap().parent().unwrap(); // target/<profile>
        let release = profile_dir.ends_with("release");
        let bin = profile_dir.join("examples/mini_redis");
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let newest_source = [root.join("src"), root.join("examples/mini_redis")]
            .iter()
            .map(|d| newest_mtime(d))
            .max()
            .unwrap();
        if modified(&bin).is_some_and(|t| t >= newest_source) {
            return bin;
        }
        let target = profile_dir.parent().unwrap().join("mini_redis_test");
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "--example", "mini_redis", "--target-dir"])
            .arg(&target)
            .current_dir(root);
        if release {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("cannot run cargo to build the example");
        assert!(status.success(), "cargo build --example mini_redis failed");
        target
            .join(if release { "release" } else { "debug" })
            .join("examples/mini_redis")
    })
}

pub fn modified(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).ok()?.modified().ok()
}

pub fn newest_mtime(dir: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        let t = if p.is_dir() {
            newest_mtime(&p)
        } else {
            modified(&p).unwrap()
        };
        newest = newest.max(t);
    }
    newest
}

/// Starts mini_redis on a port the kernel picks (read from its first line).
pub fn mini_redis() -> Server {
    let mut child = Command::new(example_binary())
        .arg("127.0.0.1:0")
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start mini_redis");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let port = line
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("mini_redis said {line:?}"));
    // Keep draining its stderr so that a later message never blocks it.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    Server {
        child,
        port,
        dir: None,
    }
}

pub fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Says why `test` compares nothing here; with `FIBRA_REQUIRE_REDIS=1`
/// (CI, which installs the tools) a missing tool fails it instead.
pub fn skip(test: &str, tool: &str) {
    if std::env::var_os("FIBRA_REQUIRE_REDIS").is_some_and(|v| v == "1") {
        panic!("{test}: `{tool}` is not installed and FIBRA_REQUIRE_REDIS=1");
    }
    // Straight to the process's stderr: libtest's capture (which takes
    // `println!` and `eprintln!`) would hide it from a passing test.
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: `{tool}` is not installed (apt-get install redis-server redis-tools); \
         nothing was compared"
    );
}

/// Starts redis-server (no persistence, its files in a temp dir), or
/// `None` when it is not installed.
pub fn redis_server() -> Option<Server> {
    redis_server_with(&[])
}

/// [`redis_server`] with `extra` arguments (`--maxclients 1000`, say).
pub fn redis_server_with(extra: &[&str]) -> Option<Server> {
    if !have("redis-server") {
        return None;
    }
    let dir = std::env::temp_dir().join(format!(
        "fibra-mini-redis-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    for _ in 0..5 {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(extra)
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .spawn()
            .expect("cannot start redis-server");
        let mut server = Server {
            child,
            port,
            dir: None,
        };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if server.child.try_wait().unwrap().is_some() {
                break; // the port was taken after all: another one
            }
            // The port was free when we looked, but another test's server
            // may have taken it since (and ours then exits), or a connect
            // may meet itself (a port in the ephemeral range): what
            // answers is ours only if it says our pid.
            match server_pid(port) {
                Some(pid) if pid == server.child.id() => {
                    server.dir = Some(dir);
                    return Some(server);
                }
                Some(_) => break, // not ours: dropping `server` stops ours
                None => {}        // not up yet
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("redis-server did not start");
}

/// The pid a redis-server on `port` says it has (`INFO server`), or `None`
/// if nothing there answers that (yet).
fn server_pid(port: u16) -> Option<u32> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"INFO server\r\n").ok()?;
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let len: usize = line.strip_prefix('$')?.trim().parse().ok()?;
    let mut body = vec![0; len.min(1 << 20)];
    r.read_exact(&mut body).ok()?;
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix("process_id:")?.trim().parse().ok())
}

// ----- a raw RESP client -------------------------------------------------------

pub struct Client {
    pub r: BufReader<TcpStream>,
    pub w: TcpStream,
}

/// A connection in RESP2, as every connection starts.
pub fn connect(port: u16) -> Client {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.set_write_timeout(Some(TIMEOUT)).unwrap();
    Client {
        r: BufReader::new(s.try_clone().unwrap()),
        w: s,
    }
}

/// A connection that has said `HELLO 3` (and got its map back).
pub fn connect_resp3(port: u16) -> Client {
    let mut c = connect(port);
    let hello = c.cmd(&[b"HELLO", b"3"]);
    assert!(
        hello.starts_with(b"%7\r\n") && contains(&hello, b"$5\r\nproto\r\n:3\r\n"),
        "HELLO 3 answered {:?}",
        String::from_utf8_lossy(&hello)
    );
    c
}

/// Whether `needle` occurs in `hay`.
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

impl Client {
    pub fn send(&mut self, bytes: &[u8]) {
        self.w.write_all(bytes).unwrap();
    }

    /// One command; its reply, raw.
    pub fn cmd(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.send(&encode(args));
        self.reply()
    }

    pub fn cmd_str(&mut self, line: &str) -> Vec<u8> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        self.cmd(&args)
    }

    /// One whole reply (an aggregate with all its elements), raw.
    pub fn reply(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        self.reply_into(&mut out);
        out
    }

    pub fn reply_into(&mut self, out: &mut Vec<u8>) {
        let start = out.len();
        let n = self.r.read_until(b'\n', out).unwrap();
        assert!(
            n > 0,
            "connection closed; got so far: {:?}",
            String::from_utf8_lossy(out)
        );
        let line = String::from_utf8_lossy(&out[start..]).into_owned();
        let len: i64 = line[1..].trim_end().parse().unwrap_or(0);
        match out[start] {
            // Blob string, RESP3's verbatim string and blob error: a length
            // and that many bytes.
            b'$' | b'=' | b'!' if len >= 0 => {
                let at = out.len();
                out.resize(at + len as usize + 2, 0);
                self.r.read_exact(&mut out[at..]).unwrap();
            }
            // Array, set, push: `len` replies; map: `len` pairs.
            b'*' | b'~' | b'>' => (0..len).for_each(|_| self.reply_into(out)),
            b'%' => (0..2 * len).for_each(|_| self.reply_into(out)),
            // An attribute map comes before the reply it describes.
            b'|' => (0..2 * len + 1).for_each(|_| self.reply_into(out)),
            // One line: status, error, integer, null bulk (RESP2), null,
            // boolean, double, big number (RESP3).
            b'+' | b'-' | b':' | b'$' | b'_' | b'#' | b',' | b'(' => {}
            _ => panic!("not a reply: {line:?}"),
        }
    }

    /// Everything until the server closes (a reset ends it too).
    pub fn rest(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        match self.r.read_to_end(&mut out) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            Err(e) => panic!(
                "reading to the end: {e} (got {:?})",
                String::from_utf8_lossy(&out)
            ),
        }
        out
    }
}

// ----- the differential test -------------------------------------------------

/// A script: commands for one server, its replies recorded in the session.
pub type Script = fn(&mut Session);

/// One script's transcript: what was done, and the reply.
pub struct Session {
    pub port: u16,
    /// 2 or 3: every connection the script opens says `HELLO 3` first in
    /// RESP3 (that reply is checked, not recorded).
    pub proto: u8,
    pub log: Vec<(String, Vec<u8>)>,
}

impl Session {
    /// A new connection to the server, in the session's protocol.
    pub fn connect(&self) -> Client {
        match self.proto {
            2 => connect(self.port),
            _ => connect_resp3(self.port),
        }
    }

    pub fn record(&mut self, what: impl Into<String>, reply: Vec<u8>) {
        self.log.push((what.into(), reply));
    }

    /// Space-separated commands, one per line, each recorded.
    pub fn lines(&mut self, c: &mut Client, script: &str) {
        for line in script.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let reply = c.cmd_str(line);
            self.record(line, reply);
        }
    }

    /// A command with binary arguments.
    pub fn bin(&mut self, c: &mut Client, args: &[&[u8]]) {
        let reply = c.cmd(args);
        let what = args
            .iter()
            .map(|a| format!("{:?}", String::from_utf8_lossy(&a[..a.len().min(40)])))
            .collect::<Vec<_>>();
        self.record(what.join(" "), reply);
    }

    /// Raw bytes, then `n` replies.
    pub fn raw(&mut self, c: &mut Client, bytes: &[u8], n: usize) {
        c.send(bytes);
        let what = format!(
            "raw {:?}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(60)])
        );
        for i in 0..n {
            let reply = c.reply();
            self.record(format!("{what} #{i}"), reply);
        }
    }

    /// On a fresh connection: raw bytes, optionally the write side closed,
    /// then everything the server sends until it closes.
    pub fn raw_to_close(&mut self, bytes: &[u8], close_write: bool) {
        let mut c = self.connect();
        c.send(bytes);
        if close_write {
            c.w.shutdown(Shutdown::Write).unwrap();
        }
        let what = format!(
            "until close: {:?}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(60)])
        );
        let rest = c.rest();
        self.record(what, rest);
    }
}
