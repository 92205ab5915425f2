//! C client libraries, unmodified, under the `hook` feature: 200 calls
//! from 200 fibers of one thread take about the time of one, and a ticker
//! fiber shows the thread never blocked.
//!
//! - libpq (through `pq-sys`, its C API called as a C program would)
//!   against a real PostgreSQL, `select pg_sleep(0.2)`;
//! - libcurl (the `curl` crate) against a local HTTP server that answers
//!   every request after 200 ms;
//! - the `mysql` crate (pure Rust on std sockets) against a real MariaDB,
//!   `SELECT SLEEP(0.2)`;
//! - libssh2 (the `ssh2` crate) against a real sshd, a request to the
//!   200 ms HTTP server through a forwarded channel;
//! - tungstenite (pure Rust on std sockets) against a WebSocket server that
//!   echoes after 200 ms.
//!
//! (200 ms in a release build, as the rows say; a debug build's servers
//! take 400 ms: see `DELAY`.)
//!
//! Each prints one row — calls, wall time, one call's time, longest ticker
//! gap — that `benches/peers/hook_clients.sh` gathers into the README's
//! table. The PostgreSQL, MariaDB and sshd servers are the test's own: made
//! in a temporary directory, listening on a free port of 127.0.0.1, stopped
//! by their pid. Without a server's binaries its test says SKIPPED (CI
//! installs them and sets `FIBRA_REQUIRE_POSTGRES`, `FIBRA_REQUIRE_MARIADB`
//! and `FIBRA_REQUIRE_SSHD`, which make a missing server a failure).
#![cfg(feature = "hook")]

#[path = "util/mini_redis.rs"]
mod mini;
mod util;

use util::postgres::Postgres;

use std::ffi::{CStr, CString};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const CALLS: usize = 200;
/// How long each server takes to answer a call (a call that blocked the
/// thread would hold it that long). 200 ms in a release build, where the
/// table of `benches/peers/hook_clients.sh` comes from; 400 ms in a debug
/// build, whose 200 replies parsed at once stall the ticker 180-280 ms on a
/// quiet 2-core host (see [`report`] for the bound).
const DELAY: Duration = Duration::from_millis(if cfg!(debug_assertions) { 400 } else { 200 });

/// Held by each test for its whole run: one client at a time, so that a
/// test's ticker measures its own client, not the others' servers.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Under AddressSanitizer every fiber's work between parks is several times
/// slower, and the ticker waits behind more of it.
/// (Against a debug build's 400 ms `DELAY`: the 800 ms gap it had.)
const SLACK: u32 = if cfg!(fibra_asan) { 2 } else { 1 };

/// Prints the row of one client and checks it: the calls together far
/// below the time of 200 one after another (`CALLS` x `DELAY`: the thread
/// blocked in each), and no gap of the ticker as long as `STALLED` calls
/// blocked in turn.
///
/// The gap is not bounded at one call: when 200 answers come at once, the
/// ticker waits its turn behind 200 fibers' parsing — in a debug build, a
/// TLS handshake or an HTTP reply each, 180-280 ms in all on a quiet host
/// and 416-532 ms (against a 400 ms bound) with two CPU hogs beside the
/// test, which is work, not a blocked call. Concurrency is what `all`
/// proves; had the hook blocked the thread in a call, the 200 fibers would
/// run their calls one after another, each turn's behind the others', and
/// the gap would be many `DELAY`s (all 200 of them for fibers started
/// together).
fn report(client: &str, one: Duration, (all, gap): (Duration, Duration)) {
    println!(
        "CLIENT-ROW | {client} | {CALLS} | {:.2} s | {:.2} s | {:.0} ms |",
        all.as_secs_f64(),
        one.as_secs_f64(),
        gap.as_secs_f64() * 1000.0
    );
    assert!(
        all < DELAY * CALLS as u32 / 4,
        "{client}: {CALLS} calls took {all:?}, one {one:?}"
    );
    assert!(
        gap < DELAY * STALLED * SLACK,
        "{client}: the ticker stalled {gap:?}"
    );
}

/// The ticker's bound in calls: five blocked calls' worth (2 s in a debug
/// build), as tests/hook.rs bounds its 200 connects at five reads.
const STALLED: u32 = 5;

// ---- libpq ---------------------------------------------------------------

/// A listener on loopback whose accept queue takes 200 connections at once
/// (std's listens with a backlog of 128: a burst beyond it loses SYNs, which
/// the clients send again a second later).
fn listener() -> TcpListener {
    use std::os::fd::AsRawFd;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    // SAFETY: listen(2) again on our listening socket only sets its backlog.
    assert_eq!(unsafe { libc::listen(l.as_raw_fd(), 1024) }, 0);
    l
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// libpq's connection string for `pg`.
fn conninfo(pg: &Postgres) -> CString {
    CString::new(format!(
        "host=127.0.0.1 port={} user=fibra dbname=postgres connect_timeout=10",
        pg.port
    ))
    .unwrap()
}

/// One libpq connection, closed on drop.
struct Conn(*mut pq_sys::PGconn);

impl Conn {
    fn connect(conninfo: &CStr) -> Result<Conn, String> {
        // SAFETY: a NUL-terminated conninfo; the connection is ours.
        let conn = Conn(unsafe { pq_sys::PQconnectdb(conninfo.as_ptr()) });
        // SAFETY: a connection PQconnectdb made (null only without memory).
        if conn.0.is_null()
            || unsafe { pq_sys::PQstatus(conn.0) } != pq_sys::ConnStatusType::CONNECTION_OK
        {
            return Err(conn.error());
        }
        Ok(conn)
    }

    fn error(&self) -> String {
        if self.0.is_null() {
            return "out of memory".into();
        }
        // SAFETY: a valid connection; libpq's message is NUL-terminated.
        unsafe { CStr::from_ptr(pq_sys::PQerrorMessage(self.0)) }
            .to_string_lossy()
            .into_owned()
    }

    fn exec(&self, sql: &str) -> Result<(), String> {
        let sql = CString::new(sql).unwrap();
        // SAFETY: a valid connection and query; the result is cleared.
        unsafe {
            let res = pq_sys::PQexec(self.0, sql.as_ptr());
            let status = pq_sys::PQresultStatus(res);
            pq_sys::PQclear(res);
            if status == pq_sys::ExecStatusType::PGRES_TUPLES_OK {
                Ok(())
            } else {
                Err(self.error())
            }
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: our connection, finished once.
            unsafe { pq_sys::PQfinish(self.0) };
        }
    }
}

#[test]
fn libpq_two_hundred_queries_on_one_thread() {
    let _serial = one_at_a_time();
    let Some(pg) = Postgres::start_or_skip("libpq") else {
        return;
    };
    let conninfo = conninfo(&pg);
    let sleep = format!("select pg_sleep({})", DELAY.as_secs_f64());
    // The connections first (200 backends forked at once would starve the
    // ticker of CPU on a small machine, which says nothing of the thread).
    let conns: Vec<Conn> = (0..CALLS)
        .map(|_| Conn::connect(&conninfo).unwrap())
        .collect();
    let start = Instant::now();
    conns[0].exec(&sleep).unwrap();
    let one = start.elapsed();
    let conns = std::rc::Rc::new(conns);
    let rows = util::side_by_side(CALLS, move |i| conns[i].exec(&sleep).unwrap());
    report(
        "libpq (pq-sys), pg_sleep(0.2) on open connections",
        one,
        rows,
    );
    drop(pg);
}

// ---- libcurl -------------------------------------------------------------

/// An HTTP/1.1 server on a plain thread: every connection on a thread of
/// its own, each request answered after [`DELAY`].
fn slow_http_server() -> String {
    let listener = listener();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                thread::sleep(DELAY);
                let _ = conn.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
                );
            });
        }
    });
    format!("http://{addr}/")
}

fn curl_get(url: &str) -> Vec<u8> {
    let mut easy = curl::easy::Easy::new();
    easy.url(url).unwrap();
    easy.verbose(std::env::var_os("CURL_VERBOSE").is_some())
        .unwrap();
    let mut body = Vec::new();
    {
        let mut transfer = easy.transfer();
        transfer
            .write_function(|data| {
                body.extend_from_slice(data);
                Ok(data.len())
            })
            .unwrap();
        transfer.perform().unwrap();
    }
    assert_eq!(easy.response_code().unwrap(), 200);
    body
}

#[test]
fn libcurl_two_hundred_requests_on_one_thread() {
    let _serial = one_at_a_time();
    let url = slow_http_server();
    let start = Instant::now();
    assert_eq!(curl_get(&url), b"hello");
    let one = start.elapsed();
    let rows = util::side_by_side(CALLS, move |_| {
        assert_eq!(curl_get(&url), b"hello");
    });
    report("libcurl (curl), a 200 ms server", one, rows);
}

// ---- the mysql crate -----------------------------------------------------

/// A MariaDB server of the test's own (no grant tables: any user, no
/// password, on 127.0.0.1 only).
struct MariaDb {
    child: Child,
    dir: std::path::PathBuf,
    port: u16,
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        // SAFETY: kill(2) with our child's pid (mariadbd itself).
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts MariaDB, or says why it cannot (`Err`).
fn start_mariadb() -> Result<MariaDb, String> {
    let dir = std::env::temp_dir().join(format!("fibra-mariadb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("data");
    // MariaDB runs as root only when told to; as anyone else, as them.
    // SAFETY: getuid has no preconditions.
    let user: &[&str] = if unsafe { libc::getuid() } == 0 {
        &["--user=root"]
    } else {
        &[]
    };
    let out = Command::new("mariadb-install-db")
        .arg("--no-defaults")
        .args(user)
        .args(["--skip-test-db", "--auth-root-authentication-method=normal"])
        .arg(format!("--datadir={}", data.display()))
        .output()
        .map_err(|e| format!("mariadb-install-db: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let port = free_port();
    let child = Command::new("mariadbd")
        .arg("--no-defaults")
        .args(user)
        .args(["--skip-grant-tables", "--bind-address=127.0.0.1"])
        .arg(format!("--datadir={}", data.display()))
        .arg(format!("--socket={}", dir.join("sock").display()))
        .arg(format!("--pid-file={}", dir.join("pid").display()))
        .arg(format!("--port={port}"))
        .args([
            "--max-connections=300",
            "--skip-log-bin",
            "--innodb-buffer-pool-size=16M",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("mariadbd: {e}"))?;
    let db = MariaDb { child, dir, port };
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Ok(mut conn) = mysql::Conn::new(db.opts())
            && mysql::prelude::Queryable::query_drop(&mut conn, "DO 1").is_ok()
        {
            return Ok(db);
        }
        thread::sleep(Duration::from_millis(200));
    }
    Err("mariadbd did not answer within 60 s".into())
}

impl MariaDb {
    fn opts(&self) -> mysql::Opts {
        mysql::OptsBuilder::new()
            .ip_or_hostname(Some("127.0.0.1"))
            .tcp_port(self.port)
            .user(Some("root"))
            .into()
    }
}

fn mysql_sleep(conn: &mut mysql::Conn) {
    use mysql::prelude::Queryable;
    let slept: Option<i64> = conn
        .query_first(format!("SELECT SLEEP({})", DELAY.as_secs_f64()))
        .unwrap();
    assert_eq!(slept, Some(0));
}

#[test]
fn mysql_crate_two_hundred_queries_on_one_thread() {
    let _serial = one_at_a_time();
    let db = match start_mariadb() {
        Ok(db) => db,
        Err(why) if std::env::var_os("FIBRA_REQUIRE_MARIADB").is_none() => {
            eprintln!("SKIPPED: the mysql crate against MariaDB: {why}");
            return;
        }
        Err(why) => panic!("FIBRA_REQUIRE_MARIADB is set, but: {why}"),
    };
    let conns: Vec<_> = (0..CALLS)
        .map(|_| std::cell::RefCell::new(mysql::Conn::new(db.opts()).unwrap()))
        .collect();
    let start = Instant::now();
    mysql_sleep(&mut conns[0].borrow_mut());
    let one = start.elapsed();
    let conns = std::rc::Rc::new(conns);
    let rows = util::side_by_side(CALLS, move |i| mysql_sleep(&mut conns[i].borrow_mut()));
    report(
        "mysql crate, MariaDB SLEEP(0.2) on open connections",
        one,
        rows,
    );
    drop(db);
}

// ---- libssh2 ---------------------------------------------------------------

/// An sshd of the test's own: its host key and the one client key it
/// accepts made at start, on a free port of 127.0.0.1, TCP forwarding on.
struct Sshd {
    child: Child,
    dir: std::path::PathBuf,
    port: u16,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        // SAFETY: kill(2) with our child's pid (sshd itself, -D).
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts sshd, or says why it cannot (`Err`).
fn start_sshd() -> Result<Sshd, String> {
    let sshd = ["/usr/sbin/sshd", "/usr/local/sbin/sshd"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .ok_or("no sshd")?;
    let dir = std::env::temp_dir().join(format!("fibra-sshd-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for key in ["host_key", "client_key"] {
        let out = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(dir.join(key))
            .output()
            .map_err(|e| format!("ssh-keygen: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "ssh-keygen: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).unwrap();
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } == 0 {
        // sshd's privilege separation wants its directory.
        let _ = std::fs::create_dir_all("/run/sshd");
    }
    let port = free_port();
    let config = format!(
        "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n\
         AuthorizedKeysFile {d}/authorized_keys\nPidFile {d}/pid\nStrictModes no\n\
         UsePAM no\nPermitRootLogin yes\nPasswordAuthentication no\n\
         KbdInteractiveAuthentication no\nAllowTcpForwarding yes\nMaxStartups 300\n\
         MaxSessions 10\n",
        d = dir.display()
    );
    std::fs::write(dir.join("sshd_config"), config).unwrap();
    let child = Command::new(sshd)
        .args(["-D", "-e", "-f"])
        .arg(dir.join("sshd_config"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("sshd: {e}"))?;
    let s = Sshd { child, dir, port };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if s.session().is_ok() {
            return Ok(s);
        }
        thread::sleep(Duration::from_millis(100));
    }
    Err("sshd did not let us in within 20 s".into())
}

impl Sshd {
    /// A session, authenticated with the client key.
    fn session(&self) -> Result<ssh2::Session, String> {
        ssh_session(self.port, &self.dir.join("client_key"))
    }
}

/// A session with the sshd at `port`, authenticated with `key`.
fn ssh_session(port: u16, key: &std::path::Path) -> Result<ssh2::Session, String> {
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    let mut session = ssh2::Session::new().map_err(|e| e.to_string())?;
    session.set_tcp_stream(tcp);
    session.handshake().map_err(|e| e.to_string())?;
    let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
    session
        .userauth_pubkey_file(&user, None, key, None)
        .map_err(|e| e.to_string())?;
    Ok(session)
}

/// One request to the slow HTTP server at `port`, through a forwarded
/// channel of `session`.
fn ssh_forwarded_get(session: &ssh2::Session, port: u16) {
    let mut channel = session
        .channel_direct_tcpip("127.0.0.1", port, None)
        .unwrap();
    channel
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut reply = String::new();
    channel.read_to_string(&mut reply).unwrap();
    assert!(reply.ends_with("hello"), "{reply:?}");
}

#[test]
fn libssh2_two_hundred_forwarded_requests_on_one_thread() {
    let _serial = one_at_a_time();
    let sshd = match start_sshd() {
        Ok(s) => s,
        Err(why) if std::env::var_os("FIBRA_REQUIRE_SSHD").is_none() => {
            eprintln!("SKIPPED: libssh2 against sshd: {why}");
            return;
        }
        Err(why) => panic!("FIBRA_REQUIRE_SSHD is set, but: {why}"),
    };
    let url = slow_http_server();
    let port: u16 = url
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // The sessions first, made in fibers too (sshd takes its time to start
    // each; key exchanges are CPU on both ends, which the row is not about).
    let key = sshd.dir.join("client_key");
    let ssh_port = sshd.port;
    let sessions: Vec<ssh2::Session> = fibra::run(move || {
        let makers: Vec<_> = (0..CALLS)
            .map(|_| {
                let key = key.clone();
                fibra::spawn(move || ssh_session(ssh_port, &key).unwrap())
            })
            .collect();
        makers.into_iter().map(|m| m.join().unwrap()).collect()
    });
    let start = Instant::now();
    ssh_forwarded_get(&sessions[0], port);
    let one = start.elapsed();
    let sessions = std::rc::Rc::new(sessions);
    let rows = util::side_by_side(CALLS, move |i| ssh_forwarded_get(&sessions[i], port));
    report(
        "libssh2 (ssh2), a forwarded channel to the 200 ms server",
        one,
        rows,
    );
    drop(sshd);
}

// ---- tungstenite -------------------------------------------------------------

/// A WebSocket server on plain threads: each connection on a thread of its
/// own, every message echoed after [`DELAY`].
fn slow_websocket_server() -> std::net::SocketAddr {
    let listener = listener();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            thread::spawn(move || {
                let Ok(mut ws) = tungstenite::accept(conn) else {
                    return;
                };
                while let Ok(msg) = ws.read() {
                    if msg.is_close() {
                        return;
                    }
                    thread::sleep(DELAY);
                    if ws.send(msg).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// A WebSocket client on a std socket: connect, one message, its echo.
fn websocket_round_trip(addr: std::net::SocketAddr, i: usize) {
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    let (mut ws, _) = tungstenite::client(format!("ws://{addr}/"), tcp).unwrap();
    let text = format!("message {i}");
    ws.send(tungstenite::Message::text(text.clone())).unwrap();
    let back = ws.read().unwrap();
    assert_eq!(back.into_text().unwrap().as_str(), text);
    let _ = ws.close(None);
}

#[test]
fn tungstenite_two_hundred_round_trips_on_one_thread() {
    let _serial = one_at_a_time();
    let addr = slow_websocket_server();
    let start = Instant::now();
    websocket_round_trip(addr, 0);
    let one = start.elapsed();
    let rows = util::side_by_side(CALLS, move |i| websocket_round_trip(addr, i));
    report(
        "tungstenite on std sockets, a server echoing in 200 ms",
        one,
        rows,
    );
}

// ---- the redis crate -----------------------------------------------------------

/// A redis-server of the test's own, on a free port, stopped on drop.
/// A redis-server of our own (its pid checked: see `mini::redis_server`).
fn start_redis() -> Result<mini::Server, String> {
    mini::redis_server_with(&["--maxclients", "1000"])
        .ok_or_else(|| "no redis-server on PATH".to_string())
}

/// `BLPOP` of a list nobody pushes to: the server answers nil after
/// [`DELAY`].
fn redis_blpop(con: &mut redis::Connection, i: usize) {
    let got: Option<(String, String)> = redis::cmd("BLPOP")
        .arg(format!("fibra:nothing:{i}"))
        .arg(DELAY.as_secs_f64())
        .query(con)
        .unwrap();
    assert_eq!(got, None);
}

#[test]
fn redis_crate_two_hundred_blocking_pops_on_one_thread() {
    let _serial = one_at_a_time();
    let server = match start_redis() {
        Ok(s) => s,
        Err(why) if std::env::var_os("FIBRA_REQUIRE_REDIS").is_none() => {
            eprintln!("SKIPPED: the redis crate against redis-server: {why}");
            return;
        }
        Err(why) => panic!("FIBRA_REQUIRE_REDIS is set, but: {why}"),
    };
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).unwrap();
    let conns: Vec<_> = (0..CALLS)
        .map(|_| std::cell::RefCell::new(client.get_connection().unwrap()))
        .collect();
    let start = Instant::now();
    redis_blpop(&mut conns[0].borrow_mut(), 0);
    let one = start.elapsed();
    let conns = std::rc::Rc::new(conns);
    let rows = util::side_by_side(CALLS, move |i| redis_blpop(&mut conns[i].borrow_mut(), i));
    report("redis crate, BLPOP 0.2 s on open connections", one, rows);
    drop(server);
}

// ---- ureq ------------------------------------------------------------------------

#[test]
fn ureq_two_hundred_requests_on_one_thread() {
    let _serial = one_at_a_time();
    let url = slow_http_server();
    let agent = ureq::Agent::new_with_defaults();
    let get = move |url: &str| {
        let mut reply = agent.get(url).call().unwrap();
        assert_eq!(reply.body_mut().read_to_string().unwrap(), "hello");
    };
    let start = Instant::now();
    get(&url);
    let one = start.elapsed();
    // In a debug build the fibers start 10 ms apart. A debug ureq spends
    // about 6 ms of CPU on each call on a slow host (it zeroes large
    // buffers), so 200 replies handled in one turn held the ticker for
    // 1.1 s. That says nothing of a blocked call, which would hold it for
    // a whole `DELAY`. Spread out, each call's own work fits between two
    // ticks. A release build (the README's row) starts them all at once.
    let spread = Duration::from_millis(if cfg!(debug_assertions) { 10 } else { 0 });
    let rows = util::side_by_side(CALLS, move |i| {
        fibra::sleep(spread * i as u32);
        get(&url)
    });
    report("ureq on std sockets, the 200 ms server", one, rows);
}

// ---- native-tls (OpenSSL) ----------------------------------------------------------

/// A TLS server on plain threads (rustls, a certificate made at start):
/// each connection on a thread of its own, its request answered after
/// [`DELAY`].
fn slow_tls_server() -> std::net::SocketAddr {
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let key: PrivateKeyDer<'static> =
        PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()).into();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![made.cert.der().clone()], key)
        .unwrap();
    let config = std::sync::Arc::new(config);
    let listener = listener();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let config = config.clone();
            thread::spawn(move || {
                let tls = rustls::ServerConnection::new(config).unwrap();
                let mut stream = rustls::StreamOwned::new(tls, conn);
                let mut request = [0u8; 5];
                if stream.read_exact(&mut request).is_err() {
                    return;
                }
                thread::sleep(DELAY);
                let _ = stream.write_all(b"hello");
                stream.conn.send_close_notify();
                let _ = stream.flush();
            });
        }
    });
    addr
}

/// A native-tls (OpenSSL) connection on a std socket, its handshake done.
fn tls_connect(
    connector: &native_tls::TlsConnector,
    addr: std::net::SocketAddr,
) -> native_tls::TlsStream<std::net::TcpStream> {
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    connector.connect("localhost", tcp).unwrap()
}

/// One request on a TLS connection, and its reply.
fn tls_request(tls: &mut native_tls::TlsStream<std::net::TcpStream>) {
    tls.write_all(b"hello").unwrap();
    let mut reply = Vec::new();
    if let Err(e) = tls.read_to_end(&mut reply) {
        // (A close without notify is fine once the reply is in.)
        assert!(!reply.is_empty(), "{e}");
    }
    assert_eq!(reply, b"hello");
}

#[test]
fn native_tls_two_hundred_requests_on_one_thread() {
    let _serial = one_at_a_time();
    let addr = slow_tls_server();
    // One connector (OpenSSL context) for all, as a client would keep: each
    // build parses the system's CA store again.
    let connector = native_tls::TlsConnector::builder()
        .danger_accept_invalid_certs(true) // the server's is self-signed
        .build()
        .unwrap();
    // The connections first, made in fibers too: 200 handshakes at once are
    // CPU on both ends (the server's threads share this small machine),
    // which the row is not about.
    let conns: Vec<_> = fibra::run(move || {
        let makers: Vec<_> = (0..=CALLS)
            .map(|_| {
                let connector = connector.clone();
                fibra::spawn(move || std::cell::RefCell::new(tls_connect(&connector, addr)))
            })
            .collect();
        makers.into_iter().map(|m| m.join().unwrap()).collect()
    });
    // (The server answers one request a connection: the last one is for
    // the call alone.)
    let start = Instant::now();
    tls_request(&mut conns[CALLS].borrow_mut());
    let one = start.elapsed();
    let conns = std::rc::Rc::new(conns);
    let rows = util::side_by_side(CALLS, move |i| tls_request(&mut conns[i].borrow_mut()));
    report(
        "native-tls (OpenSSL) on std sockets, a server answering in 200 ms, open connections",
        one,
        rows,
    );
}
