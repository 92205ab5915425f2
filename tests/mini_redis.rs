//! `examples/mini_redis` against the real thing.
//!
//! The differential test sends the same scripts over raw TCP to
//! `redis-server` and to `mini_redis` and compares the replies byte for byte
//! (error replies by their first word; differing error texts are printed).
//! The other tests use mini_redis alone: expiry on time, a client that
//! vanishes mid-command, a huge declared length that is never sent, the
//! `redis` crate, `redis-cli` and `redis-benchmark`.
//!
//! Without `redis-server` / `redis-tools` (Debian packages of those names)
//! the tests that need them say so and pass, unless `FIBRA_REQUIRE_REDIS=1`.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

/// No read waits longer: a hang fails the test instead of stalling it.
const TIMEOUT: Duration = Duration::from_secs(20);

// ----- servers ---------------------------------------------------------------

/// A server process, killed when dropped.
struct Server {
    child: Child,
    port: u16,
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
fn example_binary() -> &'static Path {
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

fn modified(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).ok()?.modified().ok()
}

fn newest_mtime(dir: &Path) -> SystemTime {
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
fn mini_redis() -> Server {
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

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Says why `test` compares nothing here; with `FIBRA_REQUIRE_REDIS=1`
/// (CI, which installs the tools) a missing tool fails it instead.
fn skip(test: &str, tool: &str) {
    if std::env::var_os("FIBRA_REQUIRE_REDIS").is_some_and(|v| v == "1") {
        panic!("{test}: `{tool}` is not installed and FIBRA_REQUIRE_REDIS=1");
    }
    println!(
        "SKIPPED {test}: `{tool}` is not installed (apt-get install redis-server redis-tools); \
         nothing was compared"
    );
    eprintln!("SKIPPED {test}: `{tool}` is not installed");
}

/// Starts redis-server (no persistence, its files in a temp dir), or
/// `None` when it is not installed.
fn redis_server() -> Option<Server> {
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
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                server.dir = Some(dir);
                return Some(server);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("redis-server did not start");
}

// ----- a raw RESP client -------------------------------------------------------

struct Client {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

fn connect(port: u16) -> Client {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.set_write_timeout(Some(TIMEOUT)).unwrap();
    Client {
        r: BufReader::new(s.try_clone().unwrap()),
        w: s,
    }
}

fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

impl Client {
    fn send(&mut self, bytes: &[u8]) {
        self.w.write_all(bytes).unwrap();
    }

    /// One command; its reply, raw.
    fn cmd(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.send(&encode(args));
        self.reply()
    }

    fn cmd_str(&mut self, line: &str) -> Vec<u8> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        self.cmd(&args)
    }

    /// One whole reply (an array with all its elements), raw.
    fn reply(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        self.reply_into(&mut out);
        out
    }

    fn reply_into(&mut self, out: &mut Vec<u8>) {
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
            b'$' if len >= 0 => {
                let at = out.len();
                out.resize(at + len as usize + 2, 0);
                self.r.read_exact(&mut out[at..]).unwrap();
            }
            b'*' => (0..len).for_each(|_| self.reply_into(out)),
            b'+' | b'-' | b':' | b'$' => {}
            _ => panic!("not a reply: {line:?}"),
        }
    }

    /// Everything until the server closes (a reset ends it too).
    fn rest(&mut self) -> Vec<u8> {
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
type Script = fn(&mut Session);

/// One script's transcript: what was done, and the reply.
struct Session {
    port: u16,
    log: Vec<(String, Vec<u8>)>,
}

impl Session {
    fn record(&mut self, what: impl Into<String>, reply: Vec<u8>) {
        self.log.push((what.into(), reply));
    }

    /// Space-separated commands, one per line, each recorded.
    fn lines(&mut self, c: &mut Client, script: &str) {
        for line in script.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let reply = c.cmd_str(line);
            self.record(line, reply);
        }
    }

    /// A command with binary arguments.
    fn bin(&mut self, c: &mut Client, args: &[&[u8]]) {
        let reply = c.cmd(args);
        let what = args
            .iter()
            .map(|a| format!("{:?}", String::from_utf8_lossy(&a[..a.len().min(40)])))
            .collect::<Vec<_>>();
        self.record(what.join(" "), reply);
    }

    /// Raw bytes, then `n` replies.
    fn raw(&mut self, c: &mut Client, bytes: &[u8], n: usize) {
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
    fn raw_to_close(&mut self, bytes: &[u8], close_write: bool) {
        let mut c = connect(self.port);
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

fn strings(s: &mut Session) {
    let mut c = connect(s.port);
    s.lines(
        &mut c,
        "FLUSHDB
        PING
        PING hello
        ping
        PiNg
        ECHO hi
        GET missing
        SET k v
        GET k
        SET k v2 NX
        GET k
        SET k v3 XX
        GET k
        SET new v XX
        SET new v NX
        SET k v NX XX
        SET k v EX 0
        SET k v EX -5
        SET k v EX abc
        SET k v PX 10 EX 10
        SET k v EX 10 KEEPTTL
        SET k v KEEPTTL
        SET k v4 GET
        SET fresh v GET
        SET k v foo
        SET k
        SET k v EX
        SET k v EX 9223372036854775807
        SETEX sx 100 v
        TTL sx
        SETEX sx 0 v
        SETEX sx abc v
        PSETEX psx 100000 v
        TTL psx
        PSETEX psx -1 v
        SETNX sx other
        SETNX snx v
        GET snx
        STRLEN k
        STRLEN missing
        APPEND k xyz
        APPEND appended abc
        GET k
        GET appended
        DEL k new missing
        DEL k
        EXISTS appended appended missing fresh
        MSET a 1 b 2 c 3
        MGET a b missing c
        MSET a
        MSET a 1 b
        INCR cnt
        INCR cnt
        INCRBY cnt 10
        INCRBY cnt -3
        DECR cnt
        DECRBY cnt 5
        GET cnt
        INCRBY cnt abc
        INCRBY cnt 1.5
        DECRBY cnt 01
        INCR a
        SET t text
        INCR t
        SET t 01
        INCR t
        SET t -0
        INCR t
        SET t 123456789012345678901
        INCR t
        SET big 9223372036854775807
        INCR big
        DECRBY big -1
        INCRBY big -9223372036854775807
        GET big
        SET small -9223372036854775808
        DECR small
        DECRBY small -9223372036854775808
        DECRBY small 1
        INCRBY small 9223372036854775807
        GET small
        DBSIZE
        NOSUCHCOMMAND a b
        nosuch
        GET a b
        ECHO
        GET
        SELECT 0
        SELECT x
        PING a b
        FLUSHDB
        DBSIZE
        GET a",
    );
}

fn expiry(s: &mut Session) {
    let mut c = connect(s.port);
    s.lines(
        &mut c,
        "FLUSHDB
        SET e v EX 100
        TTL e
        PERSIST e
        TTL e
        PTTL e
        PERSIST e
        PERSIST missing
        TTL missing
        PTTL missing
        EXPIRE e 100
        TTL e
        EXPIRE e 100 NX
        EXPIRE e 200 XX
        TTL e
        EXPIRE e 50 GT
        EXPIRE e 50 LT
        TTL e
        EXPIRE e 300 gt
        TTL e
        EXPIRE e 10 foo
        EXPIRE e 10 NX XX
        EXPIRE e 10 GT LT
        EXPIRE e abc
        EXPIRE missing 10
        EXPIRE e 9223372036854775807
        PEXPIRE e 9223372036854775807
        PEXPIRE e 100000
        TTL e
        SET plain v
        EXPIRE plain 10 XX
        EXPIRE plain 10 GT
        EXPIRE plain 10 LT
        TTL plain
        EXPIRE e -1
        EXISTS e
        TTL e
        SET e v EX 100
        PEXPIRE e 0
        EXISTS e
        SET kt v EX 100
        SET kt v2 KEEPTTL
        TTL kt
        GET kt
        SET kt v3
        TTL kt
        SET p v PX 100
        SET r 5 PX 100
        RPUSH lst a
        PEXPIRE lst 100
        SET q v
        PEXPIRE q 100",
    );
    std::thread::sleep(Duration::from_millis(400));
    s.lines(
        &mut c,
        "GET p
        EXISTS p r lst q
        TTL p
        PTTL q
        INCR r
        LLEN lst
        LPUSH lst b
        LRANGE lst 0 -1
        APPEND q x
        GET q
        DBSIZE",
    );
}

fn lists(s: &mut Session) {
    let mut c = connect(s.port);
    s.lines(
        &mut c,
        "FLUSHDB
        RPUSH l a b c
        LPUSH l x y
        LRANGE l 0 -1
        LRANGE l -2 -1
        LRANGE l -100 100
        LRANGE l 3 1
        LRANGE l 10 20
        LRANGE l 0 0
        LRANGE l -1 -1
        LRANGE l -5 -5
        LRANGE l -6 -6
        LRANGE l 2 -3
        LRANGE l 0 -100
        LRANGE l a b
        LRANGE missing 0 -1
        LLEN l
        LLEN missing
        LPOP l
        RPOP l
        LPOP l 2
        RPOP l 0
        LPOP l -1
        LPOP l x
        LPOP l 1 2
        LPOP l 100
        LLEN l
        EXISTS l
        LPOP l
        LPOP l 2
        RPOP missing 1
        RPOP missing
        RPUSH l only
        RPOP l 5
        SET s str
        RPUSH lst 1
        GET lst
        LPUSH s x
        RPUSH s x
        LRANGE s 0 -1
        LLEN s
        LPOP s
        INCR lst
        APPEND lst x
        STRLEN lst
        MGET s lst missing
        SET k v GET
        SET lst v GET
        SET lst v
        GET lst
        LPUSH
        LRANGE l 0
        DBSIZE",
    );
}

fn binary(s: &mut Session) {
    let mut c = connect(s.port);
    let key: &[u8] = b"k\r\n\0x y";
    let value: &[u8] = b"v\0\r\n\r\nend\r\n";
    s.bin(&mut c, &[b"FLUSHDB"]);
    s.bin(&mut c, &[b"SET", key, value]);
    s.bin(&mut c, &[b"GET", key]);
    s.bin(&mut c, &[b"STRLEN", key]);
    s.bin(&mut c, &[b"APPEND", key, b"\0\0\r"]);
    s.bin(&mut c, &[b"GET", key]);
    s.bin(&mut c, &[b"ECHO", value]);
    s.bin(&mut c, &[b"ECHO", b""]);
    s.bin(&mut c, &[b"SET", b"", b""]);
    s.bin(&mut c, &[b"GET", b""]);
    s.bin(&mut c, &[b"RPUSH", b"bl", value, b"", key]);
    s.bin(&mut c, &[b"LRANGE", b"bl", b"0", b"-1"]);
    s.bin(&mut c, &[b"MGET", key, b"", b"bl"]);
    s.bin(&mut c, &[b"EXISTS", key, b"", b"bl", b"k"]);
    s.bin(&mut c, &[b"GET\r\n", b"x"]);
    let big: Vec<u8> = (0..1024 * 1024u32)
        .map(|i| (i * 7 + i / 251) as u8)
        .collect();
    s.bin(&mut c, &[b"SET", b"big", &big]);
    s.bin(&mut c, &[b"GET", b"big"]);
    s.bin(&mut c, &[b"STRLEN", b"big"]);
    s.bin(&mut c, &[b"APPEND", b"big", b"tail"]);
    s.bin(&mut c, &[b"ECHO", &big]);
    s.bin(&mut c, &[b"DEL", b"big"]);
    s.bin(&mut c, &[b"DBSIZE"]);
}

fn pipelined(s: &mut Session) {
    let mut c = connect(s.port);
    s.bin(&mut c, &[b"FLUSHDB"]);
    let mut batch = Vec::new();
    for i in 0..1000 {
        let n = i.to_string();
        let prev = (i / 2).to_string();
        batch.extend(match i % 5 {
            0 => encode(&[b"SET", format!("key:{n}").as_bytes(), n.as_bytes()]),
            1 => encode(&[b"GET", format!("key:{prev}").as_bytes()]),
            2 => encode(&[b"INCR", b"counter"]),
            3 => encode(&[b"RPUSH", b"plist", n.as_bytes()]),
            _ => encode(&[b"LPOP", b"plist"]),
        });
    }
    s.raw(&mut c, &batch, 1000);
    // The same again inline, and in pieces cut mid-command.
    let inline: Vec<u8> = (0..1000)
        .flat_map(|i| format!("INCRBY counter {i}\r\n").into_bytes())
        .collect();
    s.raw(&mut c, &inline, 1000);
    let mut pieces = Vec::new();
    for i in 0..200 {
        pieces.extend(encode(&[b"SET", format!("p{i}").as_bytes(), b"value"]));
        pieces.extend(encode(&[b"GET", format!("p{i}").as_bytes()]));
    }
    for chunk in pieces.chunks(777) {
        c.send(chunk);
        std::thread::sleep(Duration::from_millis(1));
    }
    for i in 0..400 {
        let reply = c.reply();
        s.record(format!("piece #{i}"), reply);
    }
    s.lines(&mut c, "DBSIZE\nLLEN plist\nGET counter");
}

fn inline(s: &mut Session) {
    let mut c = connect(s.port);
    s.raw(&mut c, b"FLUSHDB\r\n", 1);
    s.raw(&mut c, b"PING\r\n", 1);
    s.raw(&mut c, b"ping hi\r\n", 1);
    s.raw(&mut c, b"PING\n", 1);
    s.raw(&mut c, b"SET in \"a b\"\r\nGET in\r\n", 2);
    s.raw(&mut c, b"ECHO 'it\\'s'\r\n", 1);
    s.raw(&mut c, b"ECHO \"\\x41\\x4a\\n\\t\\\\z\\q\"\r\n", 1);
    s.raw(&mut c, b"ECHO \"\\xZZ\"\r\n", 1);
    s.raw(&mut c, b"\r\n\n   \r\nPING\n", 1);
    s.raw(&mut c, b"  EXISTS   in  in \t \r\n", 1);
    s.raw(&mut c, b"SET \"\" empty\r\nGET \"\"\r\n", 2);
    s.raw(&mut c, b"*0\r\n*-1\r\nPING\r\n", 1);
    s.raw(&mut c, b"$3\r\n", 1);
    s.raw(&mut c, b"*1\r\n$4\r\nPINGxy", 1);
    s.raw(&mut c, b"*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\n", 1);
    s.raw(&mut c, b"NOSUCH \"x\" 'y'\r\n", 1);
}

fn pubsub(s: &mut Session) {
    let mut sub = connect(s.port);
    let mut other = connect(s.port);
    let mut publ = connect(s.port);
    s.raw(&mut sub, &encode(&[b"SUBSCRIBE", b"news", b"sport"]), 2);
    s.raw(&mut other, &encode(&[b"SUBSCRIBE", b"news"]), 1);
    s.lines(&mut publ, "PUBLISH news hello\nPUBLISH nobody x");
    let m1 = sub.reply();
    s.record("sub gets news", m1);
    let m2 = other.reply();
    s.record("other gets news", m2);
    s.bin(&mut publ, &[b"PUBLISH", b"sport", b"bin\0\r\n"]);
    let m3 = sub.reply();
    s.record("sub gets sport", m3);
    s.lines(
        &mut sub,
        "PING
        PING msg
        GET k
        SET k v
        SUBSCRIBE news",
    );
    s.raw(&mut sub, &encode(&[b"UNSUBSCRIBE", b"news", b"nothere"]), 2);
    s.lines(&mut publ, "PUBLISH news x\nPUBLISH sport y");
    let m4 = sub.reply();
    s.record("sub gets sport again", m4);
    s.lines(&mut sub, "UNSUBSCRIBE\nUNSUBSCRIBE\nGET k\nPING");
    drop(other);
    std::thread::sleep(Duration::from_millis(500)); // both servers notice it is gone
    s.lines(&mut publ, "PUBLISH news gone");
    // Many messages in one go, then a pipelined mix on the subscriber.
    s.raw(&mut sub, &encode(&[b"SUBSCRIBE", b"bulk"]), 1);
    let burst: Vec<u8> = (0..500)
        .flat_map(|i| encode(&[b"PUBLISH", b"bulk", format!("m{i}").as_bytes()]))
        .collect();
    s.raw(&mut publ, &burst, 500);
    for i in 0..500 {
        let m = sub.reply();
        s.record(format!("burst #{i}"), m);
    }
    s.raw(&mut sub, b"SUBSCRIBE r\r\nRESET\r\nGET k\r\n", 3);
    s.lines(&mut publ, "PUBLISH r gone");
    s.raw(
        &mut sub,
        b"PING\r\nSUBSCRIBE a b\r\nUNSUBSCRIBE a\r\nQUIT\r\n",
        5,
    );
    let rest = sub.rest();
    s.record("after QUIT", rest);
}

fn protocol_errors(s: &mut Session) {
    let cases: &[&[u8]] = &[
        b"*abc\r\n",
        b"PING\r\n*abc\r\n",
        b"*1\r\n$-1\r\n",
        b"*1\r\n$abc\r\n",
        b"*1\r\n$536870913\r\n",
        b"*1\r\nx\r\n",
        b"*2\r\n$4\r\nECHO\r\n:5\r\n",
        b"*3000000000\r\n",
        b"*-\r\n",
        b"* 1\r\n",
        b"*01\r\n",
        b"*1\r\n$+4\r\n",
        b"SET a \"b\r\n",
        b"SET a \"b\"c\r\n",
        b"SET a 'b\r\n",
        b"PING\r\nGET\r\n*x\r\nPING\r\n",
        b"QUIT\r\nPING\r\n",
        b"*1\r\n$4\r\nQUIT\r\n",
    ];
    for case in cases {
        s.raw_to_close(case, false);
    }
    // Lines just past the 64 KiB limit (all sent, so no reset loses the reply).
    let mut long = vec![b'a'; 64 * 1024 + 1];
    s.raw_to_close(&long, false);
    long[0] = b'*';
    long[1..].fill(b'1');
    s.raw_to_close(&long, false);
    let mut bulk_count = b"*1\r\n".to_vec();
    bulk_count.push(b'$');
    bulk_count.extend(std::iter::repeat_n(b'1', 64 * 1024));
    s.raw_to_close(&bulk_count, false);
    // Cut short, then the client closes: nothing is answered.
    for case in [
        &b"*1\r\n$10\r\nabc"[..],
        b"*3\r\n$3\r\nSET\r\n",
        b"*2",
        b"PING",
        b"SET k \"v",
    ] {
        s.raw_to_close(case, true);
    }
}

/// Compares two transcripts; error replies by their first word.
fn compare(script: &str, redis: &[(String, Vec<u8>)], mini: &[(String, Vec<u8>)]) -> Vec<String> {
    let mut failures = Vec::new();
    assert_eq!(redis.len(), mini.len(), "{script}: not as many replies");
    let show = |b: &[u8]| {
        let s = String::from_utf8_lossy(&b[..b.len().min(300)]).into_owned();
        if b.len() > 300 {
            format!("{s:?}... ({} bytes)", b.len())
        } else {
            format!("{s:?}")
        }
    };
    let same = redis
        .iter()
        .zip(mini)
        .filter(|((_, r), (_, m))| r == m)
        .count();
    println!(
        "{script}: {} replies compared, {same} identical",
        redis.len()
    );
    for ((what, r), (_, m)) in redis.iter().zip(mini) {
        let is_error = |b: &[u8]| b.first() == Some(&b'-');
        let first_word = |b: &[u8]| b.split(|&c| c == b' ').next().unwrap_or(b"").to_vec();
        if r == m {
            continue;
        }
        if is_error(r) && is_error(m) && first_word(r) == first_word(m) {
            println!(
                "note: {script}: {what}: error texts differ:\n  redis: {}\n  mini:  {}",
                show(r),
                show(m)
            );
            continue;
        }
        failures.push(format!(
            "{script}: {what}:\n  redis-server: {}\n  mini_redis:   {}",
            show(r),
            show(m)
        ));
    }
    failures
}

#[test]
fn differential_against_redis_server() {
    let Some(redis) = redis_server() else {
        return skip("differential_against_redis_server", "redis-server");
    };
    let mini = mini_redis();
    let scripts: &[(&str, Script)] = &[
        ("strings", strings),
        ("expiry", expiry),
        ("lists", lists),
        ("binary", binary),
        ("pipelined", pipelined),
        ("inline", inline),
        ("pubsub", pubsub),
        ("protocol_errors", protocol_errors),
    ];
    let mut failures = Vec::new();
    for (name, script) in scripts {
        let mut logs = [("redis-server", &redis), ("mini_redis", &mini)].map(|(who, server)| {
            eprintln!("{name} against {who}");
            let mut s = Session {
                port: server.port,
                log: Vec::new(),
            };
            script(&mut s);
            s.log
        });
        let [r, m] = &mut logs;
        failures.extend(compare(name, r, m));
    }
    // Both servers still serve after all of it.
    for server in [&redis, &mini] {
        assert_eq!(connect(server.port).cmd(&[b"PING"]), b"+PONG\r\n");
    }
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ----- mini_redis alone ---------------------------------------------------------

#[test]
fn keys_expire_on_time_without_being_touched() {
    let server = mini_redis();
    let mut c = connect(server.port);
    assert_eq!(c.cmd_str("SET short v PX 50"), b"+OK\r\n");
    assert_eq!(c.cmd_str("SET list x"), b"+OK\r\n");
    assert_eq!(c.cmd_str("PEXPIRE list 80"), b":1\r\n");
    assert_eq!(c.cmd_str("SET long v EX 100"), b"+OK\r\n");
    assert_eq!(c.cmd_str("DBSIZE"), b":3\r\n");
    // Active expiry runs ten times a second: gone within ~200 ms, untouched.
    let t = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let n = c.cmd_str("DBSIZE");
        if n == b":1\r\n" {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "still {:?} keys",
            String::from_utf8_lossy(&n)
        );
    }
    assert!(t.elapsed() >= Duration::from_millis(40), "expired early");
    let pttl = String::from_utf8_lossy(&c.cmd_str("PTTL long")).into_owned();
    let pttl: i64 = pttl[1..].trim().parse().unwrap();
    assert!((90_000..=100_000).contains(&pttl), "PTTL {pttl}");
}

#[test]
fn a_client_vanishing_mid_command_costs_only_its_connection() {
    let server = mini_redis();
    let mut c = connect(server.port);
    assert_eq!(c.cmd_str("SET k before"), b"+OK\r\n");
    // Half a command, then gone.
    for half in [
        &b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\nabc"[..],
        b"*3\r\n$3\r\nSET\r\n$1\r\nk",
        b"*3\r\n$3\r\nSE",
        b"SET k \"never",
    ] {
        let mut gone = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        gone.write_all(half).unwrap();
        drop(gone);
    }
    // One that pipelines a lot and never reads its replies, then resets.
    let mut flood = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let big = encode(&[b"SET", b"big", &vec![b'x'; 256 * 1024]]);
    flood.write_all(&big).unwrap();
    let gets: Vec<u8> = (0..200).flat_map(|_| encode(&[b"GET", b"big"])).collect();
    flood.write_all(&gets).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    drop(flood);
    // A subscriber that vanishes.
    let mut sub = connect(server.port);
    sub.send(&encode(&[b"SUBSCRIBE", b"ch"]));
    sub.reply();
    drop(sub);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(c.cmd_str("GET k"), b"$6\r\nbefore\r\n");
    assert_eq!(c.cmd_str("PUBLISH ch x"), b":0\r\n");
    assert_eq!(c.cmd_str("DBSIZE"), b":2\r\n");
    assert_eq!(c.cmd_str("STRLEN big"), b":262144\r\n");
    let mut fresh = connect(server.port);
    assert_eq!(fresh.cmd_str("PING"), b"+PONG\r\n");
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn declared_lengths_not_sent_cost_no_memory() {
    let server = mini_redis();
    let pid = server.child.id();
    let mut c = connect(server.port);
    assert_eq!(c.cmd_str("PING"), b"+PONG\r\n");
    let before = rss_kib(pid);
    // 40 clients each declare 512 MB (and 2^31-1 arguments) and send a little.
    let mut idle = Vec::new();
    for i in 0..40 {
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        let claim: &[u8] = if i % 2 == 0 {
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$536870912\r\nsome bytes"
        } else {
            b"*2147483647\r\n$3\r\nSET\r\n$1\r\nk\r\n"
        };
        s.write_all(claim).unwrap();
        idle.push(s);
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.cmd_str("PING"), b"+PONG\r\n");
    let after = rss_kib(pid);
    assert!(
        after < before + 16 * 1024,
        "RSS grew from {before} KiB to {after} KiB for lengths never sent"
    );
    // A bulk that does arrive is taken whole.
    let v = vec![b'v'; 3 * 1024 * 1024];
    assert_eq!(c.cmd(&[b"SET", b"k", &v]), b"+OK\r\n");
    assert_eq!(c.cmd_str("STRLEN k"), b":3145728\r\n");
}

#[test]
fn a_subscriber_that_never_reads_is_cut_off() {
    let server = mini_redis();
    let pid = server.child.id();
    let mut c = connect(server.port);
    let before = rss_kib(pid);
    let mut sub = connect(server.port);
    sub.send(&encode(&[b"SUBSCRIBE", b"firehose"]));
    sub.reply();
    // 96 MiB published to a subscriber that reads nothing: past 32 MiB
    // waiting (plus what the socket buffers hold) it is disconnected.
    let message = vec![b'm'; 1024 * 1024];
    let mut reached = Vec::new();
    for _ in 0..96 {
        let reply = c.cmd(&[b"PUBLISH", b"firehose", &message]);
        reached.push(reply == b":1\r\n");
    }
    let delivered = reached.iter().take_while(|&&r| r).count();
    assert!(
        (16..90).contains(&delivered) && reached[delivered..].iter().all(|&r| !r),
        "delivered to the slow subscriber: {reached:?}"
    );
    let after = rss_kib(pid);
    // Under AddressSanitizer freed memory waits in ASan's quarantine
    // (256 MiB by default) instead of going back: RSS measures that there.
    if !cfg!(fibra_asan) {
        assert!(
            after < before + 80 * 1024,
            "RSS grew from {before} KiB to {after} KiB"
        );
    }
    assert_eq!(c.cmd_str("PING"), b"+PONG\r\n");
    // The subscriber finds its connection closed after what was queued.
    sub.w.set_read_timeout(Some(TIMEOUT)).unwrap();
    let rest = sub.rest();
    assert!(rest.len() < 40 * 1024 * 1024, "{} bytes", rest.len());
}

#[test]
fn the_redis_crate_talks_to_mini_redis() {
    use redis::Commands;
    let server = mini_redis();
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).unwrap();
    let mut con = client.get_connection_with_timeout(TIMEOUT).unwrap();
    con.set_read_timeout(Some(TIMEOUT)).unwrap();
    let _: () = con.set("greeting", "hello").unwrap();
    let got: String = con.get("greeting").unwrap();
    assert_eq!(got, "hello");
    let missing: Option<String> = con.get("nope").unwrap();
    assert_eq!(missing, None);
    assert_eq!(con.incr::<_, _, i64>("n", 5).unwrap(), 5);
    assert_eq!(con.decr::<_, _, i64>("n", 2).unwrap(), 3);
    let _: () = con.set_ex("ttl", "x", 100).unwrap();
    assert_eq!(con.ttl::<_, i64>("ttl").unwrap(), 100);
    assert_eq!(con.rpush::<_, _, i64>("l", &[1, 2, 3]).unwrap(), 3);
    assert_eq!(
        con.lrange::<_, Vec<i64>>("l", 0, -1).unwrap(),
        vec![1, 2, 3]
    );
    assert_eq!(con.lpop::<_, Option<i64>>("l", None).unwrap(), Some(1));
    let err = con.incr::<_, _, i64>("greeting", 1).unwrap_err();
    assert!(err.to_string().contains("not an integer"), "{err}");
    let (a, b): (String, i64) = redis::pipe()
        .set("p", "q")
        .ignore()
        .get("p")
        .llen("l")
        .query(&mut con)
        .unwrap();
    assert_eq!((a.as_str(), b), ("q", 2));
    let values: Vec<Option<String>> = con.mget(&["greeting", "nope", "p"]).unwrap();
    assert_eq!(values, vec![Some("hello".into()), None, Some("q".into())]);

    let mut subscriber = client.get_connection_with_timeout(TIMEOUT).unwrap();
    let mut pubsub = subscriber.as_pubsub();
    pubsub.set_read_timeout(Some(TIMEOUT)).unwrap();
    pubsub.subscribe("news").unwrap();
    assert_eq!(con.publish::<_, _, i64>("news", "fibers").unwrap(), 1);
    let msg = pubsub.get_message().unwrap();
    assert_eq!(msg.get_channel_name(), "news");
    assert_eq!(msg.get_payload::<String>().unwrap(), "fibers");
}

#[test]
fn redis_cli_and_redis_benchmark_run_clean() {
    if !have("redis-cli") || !have("redis-benchmark") {
        return skip(
            "redis_cli_and_redis_benchmark_run_clean",
            "redis-cli / redis-benchmark",
        );
    }
    let server = mini_redis();
    let port = server.port.to_string();
    let cli = |args: &[&str]| {
        let out = Command::new("redis-cli")
            .args(["-p", &port])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(cli(&["PING"]), "PONG");
    assert_eq!(cli(&["SET", "cli", "hello world"]), "OK");
    assert_eq!(cli(&["GET", "cli"]), "hello world");
    assert_eq!(cli(&["RPUSH", "cl", "a", "b"]), "2");
    assert_eq!(cli(&["LRANGE", "cl", "0", "-1"]), "a\nb");
    assert_eq!(cli(&["INFO"]).lines().next(), Some("# Server"));
    let out = Command::new("timeout")
        .args(["120", "redis-benchmark", "-p", &port])
        .args(["-n", "2000", "-q", "-t", "ping,set,get,lpush,lpop"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "redis-benchmark failed: {stdout}\n{stderr}"
    );
    assert!(
        !stderr.contains("ERR") && !stderr.contains("rror"),
        "{stderr}"
    );
    for test in ["PING_INLINE", "PING_MBULK", "SET", "GET", "LPUSH", "LPOP"] {
        assert!(
            stdout.contains(&format!("{test}: ")) && !stdout.contains("rror"),
            "{test} missing or failed: {stdout}"
        );
    }
    // And with pipelining.
    let out = Command::new("timeout")
        .args(["120", "redis-benchmark", "-p", &port])
        .args(["-n", "2000", "-q", "-P", "16", "-t", "set,get"])
        .output()
        .unwrap();
    assert!(
        out.status.success() && !String::from_utf8_lossy(&out.stderr).contains("rror"),
        "{out:?}"
    );
}
