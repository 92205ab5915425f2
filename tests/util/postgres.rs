//! A PostgreSQL server of a test's own: made with `initdb` in a temporary
//! directory, listening on a free port of 127.0.0.1 (and a socket in that
//! directory), stopped by its pid. Without PostgreSQL's binaries a test
//! says SKIPPED; CI installs them and sets `FIBRA_REQUIRE_POSTGRES`, which
//! makes a missing server a failure.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub struct Postgres {
    child: Child,
    dir: std::path::PathBuf,
    pub port: u16,
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // SIGINT to the postmaster (not to `runuser`, which would not pass
        // it on): a fast shutdown, the clients are gone.
        let pid = std::fs::read_to_string(self.dir.join("data/postmaster.pid"))
            .ok()
            .and_then(|s| s.lines().next()?.trim().parse::<libc::pid_t>().ok())
            .unwrap_or(self.child.id() as libc::pid_t);
        // SAFETY: kill(2) with a pid of our server.
        unsafe { libc::kill(pid, libc::SIGINT) };
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Postgres {
    /// A server for test `what`, or `None` after saying SKIPPED (a panic
    /// if `FIBRA_REQUIRE_POSTGRES` is set).
    pub fn start_or_skip(what: &str) -> Option<Postgres> {
        match Postgres::start() {
            Ok(pg) => Some(pg),
            Err(why) if std::env::var_os("FIBRA_REQUIRE_POSTGRES").is_none() => {
                eprintln!("SKIPPED: {what} against PostgreSQL: {why}");
                None
            }
            Err(why) => panic!("FIBRA_REQUIRE_POSTGRES is set, but: {why}"),
        }
    }

    /// Starts a server (user `fibra`, trusted; 260 connections at most),
    /// or says why it cannot.
    pub fn start() -> Result<Postgres, String> {
        let bindir = Command::new("pg_config")
            .arg("--bindir")
            .output()
            .map_err(|e| format!("pg_config: {e}"))?;
        let bindir = String::from_utf8_lossy(&bindir.stdout).trim().to_string();
        let bin = |name: &str| std::path::Path::new(&bindir).join(name);
        if !bin("initdb").exists() {
            return Err(format!("no initdb in {bindir}"));
        }
        static SERVERS: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "fibra-pg-{}-{}",
            std::process::id(),
            SERVERS.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // PostgreSQL will not run as root: then it runs as `postgres`.
        // SAFETY: getuid has no preconditions.
        let as_root = unsafe { libc::getuid() } == 0;
        let run = |program: std::path::PathBuf| {
            if as_root {
                let mut c = Command::new("runuser");
                c.args(["-u", "postgres", "--"]).arg(program);
                c
            } else {
                Command::new(program)
            }
        };
        if as_root {
            let ok = Command::new("chown").args(["postgres:"]).arg(&dir).status();
            if !ok.is_ok_and(|s| s.success()) {
                return Err("cannot chown the data directory to postgres".into());
            }
        }
        let data = dir.join("data");
        let out = run(bin("initdb"))
            .args(["-A", "trust", "-U", "fibra", "--no-sync", "-D"])
            .arg(&data)
            .output()
            .map_err(|e| format!("initdb: {e}"))?;
        if !out.status.success() {
            return Err(format!("initdb: {}", String::from_utf8_lossy(&out.stderr)));
        }
        // A port free when we look may be taken by another test's server
        // before ours binds it (ours then exits): ready means *ours*
        // answers, on its own socket directory, and still runs.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let child = run(bin("postgres"))
                .arg("-D")
                .arg(&data)
                .args(["-p", &port.to_string(), "-k"])
                .arg(&dir)
                .args(["-c", "listen_addresses=127.0.0.1"])
                .args(["-c", "max_connections=260"])
                .args(["-c", "fsync=off", "-c", "shared_buffers=16MB"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("postgres: {e}"))?;
            let mut pg = Postgres {
                child,
                dir: dir.clone(),
                port,
            };
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if pg.child.try_wait().ok().flatten().is_some() {
                    break; // it could not bind: another port
                }
                let ready = Command::new(bin("pg_isready"))
                    .arg("-q")
                    .arg("-h")
                    .arg(&dir)
                    .args(["-p", &port.to_string()])
                    .status();
                if ready.is_ok_and(|s| s.success()) {
                    return Ok(pg);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            if pg.child.try_wait().ok().flatten().is_none() {
                break; // up but never ready
            }
            // (Dropping `pg` would remove the data directory: keep it.)
            std::mem::forget(pg);
        }
        Err("postgres did not answer within 30 s".into())
    }
}
