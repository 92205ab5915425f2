//! HTTPS "hello" under `wrk -c 50`: fibra's `https_hello` example against
//! a tokio current_thread server with tokio-rustls. Both run rustls with
//! the ring provider and the same certificate (made here by rcgen, given to
//! both as PEM files), and the same HTTP session code
//! (`examples/http_hello/http1.rs`), so the same bytes go over the wire.
//! Servers pinned to core 0 (their CPU time measured), wrk on core 1.
//! Needs `wrk` (Debian package `wrk`).

use crate::wait_for_listener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::echo::{cpu_seconds, free_port, pin_to};
use crate::http::{parse_wrk, tokio_serve};

const CONNECTIONS: &str = "50";

/// `https-server tokio PORT CERT KEY`.
pub fn server(imp: &str, port: u16, cert: &str, key: &str) {
    assert_eq!(imp, "tokio", "unknown server {imp}");
    pin_to(0);
    let certs = CertificateDer::pem_file_iter(cert)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(key).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let l = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        loop {
            let (s, _) = l.accept().await.unwrap();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                s.set_nodelay(true).unwrap();
                // The same handshake deadline as https_hello's default.
                let accept = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(s));
                if let Ok(Ok(tls)) = accept.await {
                    tokio_serve(tls).await;
                }
            });
        }
    })
}

/// A self-signed certificate for 127.0.0.1 as PEM files in a fresh folder.
fn certificate() -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("fibra-peers-https-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let made =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

fn start(imp: &str, port: u16, cert: &Path, key: &Path) -> Child {
    let child = if imp == "fibra" {
        let example =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/examples/https_hello");
        assert!(
            example.exists(),
            "build it first: cargo build --release --example https_hello (in the repo root)"
        );
        Command::new("taskset")
            .args(["-c", "0"])
            .arg(example)
            .arg(format!("127.0.0.1:{port}"))
            .arg("--cert")
            .arg(cert)
            .arg("--key")
            .arg(key)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    } else {
        Command::new(std::env::current_exe().unwrap())
            .args(["https-server", imp, &port.to_string()])
            .arg(cert)
            .arg(key)
            .spawn()
            .unwrap()
    };
    wait_for_listener(imp, port);
    child
}

pub fn run() {
    let repeats = std::env::var("HTTP_REPEATS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(3);
    let (cert, key) = certificate();
    println!(
        "\nHTTPS hello under wrk (-t1 -c{CONNECTIONS} -d5s --latency, pinned to core 1); servers pinned to core 0, rustls + ring, one certificate; median of {repeats}, servers in turn"
    );
    println!(
        "  {:<26} {:>12} {:>9} {:>15} {:>9} {:>9} {:>9}",
        "", "requests/s", "vs fibra", "server us/req", "vs fibra", "p50 ms", "p99 ms"
    );
    let imps = ["fibra", "tokio"];
    let mut runs: Vec<Vec<[f64; 4]>> = vec![Vec::new(); imps.len()];
    for _ in 0..repeats {
        for (i, imp) in imps.iter().enumerate() {
            runs[i].push(measure_once(imp, &cert, &key));
        }
    }
    let _ = std::fs::remove_dir_all(cert.parent().unwrap());
    let mut base: Option<(f64, f64)> = None;
    for (imp, runs) in imps.iter().zip(&runs) {
        let median = |field: usize| {
            let mut v: Vec<f64> = runs.iter().map(|r| r[field]).collect();
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            v[repeats / 2]
        };
        let (rps, per_req, p50, p99) = (median(0), median(1), median(2), median(3));
        let (brps, bcpu) = *base.get_or_insert((rps, per_req));
        let name = match *imp {
            "fibra" => "fibra https_hello",
            _ => "tokio + tokio-rustls",
        };
        println!(
            "  {:<26} {:>12.0} {:>8.2}x {:>15.2} {:>8.2}x {:>9.2} {:>9.2}",
            name,
            rps,
            rps / brps,
            per_req,
            per_req / bcpu,
            p50,
            p99
        );
        let all: Vec<String> = runs.iter().map(|r| format!("{:.0}", r[0])).collect();
        println!("  {:<26} runs: {} requests/s", "", all.join(", "));
    }
}

/// One wrk run against a fresh server: requests/s, server us per request,
/// p50 and p99 (ms).
fn measure_once(imp: &str, cert: &Path, key: &Path) -> [f64; 4] {
    let port = free_port();
    let mut server = start(imp, port, cert, key);
    let before = cpu_seconds(server.id());
    let out = Command::new("taskset")
        .args([
            "-c",
            "1",
            "wrk",
            "-t1",
            "-c",
            CONNECTIONS,
            "-d5s",
            "--latency",
        ])
        .arg(format!("https://127.0.0.1:{port}/"))
        .output()
        .expect("wrk is needed: apt-get install wrk");
    let cpu = cpu_seconds(server.id()) - before;
    server.kill().unwrap();
    server.wait().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("Socket errors") && !text.contains("Non-2xx"),
        "{imp}: wrk saw errors:\n{text}"
    );
    let (rps, p50, p99) = parse_wrk(&text);
    [rps, cpu * 1e6 / (rps * 5.0), p50, p99]
}
