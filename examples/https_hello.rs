//! `http_hello` over TLS: `rustls::StreamOwned` over a `fibra::net::TcpStream`,
//! one fiber per connection, the same connection loop (`http_hello/http1.rs`).
//! rustls knows nothing of fibra: its blocking reads and writes park the
//! fiber.
//!
//! `cargo run --release --example https_hello -- [ADDR] [--cert FILE --key FILE]`
//! (default `127.0.0.1:8443`; without `--cert`/`--key`, a self-signed
//! certificate for `localhost` and `127.0.0.1` is made at start), then
//! `curl -k https://127.0.0.1:8443/`. Other options: `--idle-timeout-ms N`,
//! `--handshake-timeout-ms N` (default 10 000), `--max-body BYTES`.
//!
//! A client that connects and says nothing, or speaks plain HTTP, costs
//! only its own connection: the handshake has a deadline, and a bad
//! handshake closes the connection.

#[path = "http_hello/http1.rs"]
mod http1;

use std::io::{self, Write};
use std::sync::Arc;
use std::time::Duration;

use fibra::net::{TcpListener, TcpStream};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};

type TlsStream = StreamOwned<ServerConnection, TcpStream>;

impl http1::Transport for TlsStream {
    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.sock.set_timeout(timeout)
    }
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.conn.send_close_notify();
        self.flush()?;
        self.sock.shutdown_write()
    }
}

struct Options {
    addr: String,
    cert: Option<String>,
    key: Option<String>,
    handshake_timeout: Duration,
    http: http1::Config,
}

fn main() -> io::Result<()> {
    let options = parse_args();
    let tls = Arc::new(tls_config(&options)?);
    let (http, handshake_timeout) = (options.http, options.handshake_timeout);
    fibra::run(|| {
        let listener = TcpListener::bind(options.addr.as_str())?;
        eprintln!(
            "https_hello listening on https://{}/",
            listener.local_addr()?
        );
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    let tls = tls.clone();
                    fibra::spawn(move || {
                        // A client going away or failing its handshake is
                        // not the server's error.
                        let _ = serve(stream, tls, handshake_timeout, &http);
                    });
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    fibra::sleep(Duration::from_millis(10));
                }
                Err(e) => eprintln!("accept: {e}"),
            }
        }
    })
}

fn serve(
    stream: TcpStream,
    tls: Arc<ServerConfig>,
    handshake_timeout: Duration,
    http: &http1::Config,
) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let conn = ServerConnection::new(tls).map_err(io::Error::other)?;
    let mut stream = StreamOwned::new(conn, stream);
    // The whole handshake has one deadline, however slowly its bytes come.
    fibra::timeout(handshake_timeout, || {
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        io::Result::Ok(())
    })
    .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    http1::serve(&mut stream, http)
}

fn tls_config(options: &Options) -> io::Result<ServerConfig> {
    let (certs, key) = match (&options.cert, &options.key) {
        (Some(cert), Some(key)) => {
            let certs = CertificateDer::pem_file_iter(cert)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| io::Error::other(format!("{cert}: {e}")))?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| io::Error::other(format!("{key}: {e}")))?;
            (certs, key)
        }
        (None, None) => {
            let made = rcgen::generate_simple_self_signed(["localhost".into(), "127.0.0.1".into()])
                .map_err(io::Error::other)?;
            let key = PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
            (vec![made.cert.der().clone()], key.into())
        }
        _ => usage("--cert and --key go together"),
    };
    ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .map_err(io::Error::other)
}

fn parse_args() -> Options {
    let mut options = Options {
        addr: "127.0.0.1:8443".to_string(),
        cert: None,
        key: None,
        handshake_timeout: Duration::from_secs(10),
        http: http1::Config::default(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{arg} needs a value")))
        };
        let ms = |v: String| -> Duration {
            Duration::from_millis(
                v.parse::<u64>()
                    .unwrap_or_else(|_| usage("not a number"))
                    .max(1),
            )
        };
        match arg.as_str() {
            "--cert" => options.cert = Some(value()),
            "--key" => options.key = Some(value()),
            "--idle-timeout-ms" => options.http.idle_timeout = ms(value()),
            "--handshake-timeout-ms" => options.handshake_timeout = ms(value()),
            "--max-body" => {
                options.http.max_body = value().parse().unwrap_or_else(|_| usage("not a number"));
            }
            _ if arg.starts_with('-') => usage(&format!("unknown option {arg}")),
            _ => options.addr = arg,
        }
    }
    options
}

fn usage(why: &str) -> ! {
    eprintln!(
        "{why}\nusage: https_hello [ADDR] [--cert FILE --key FILE] [--idle-timeout-ms N] \
         [--handshake-timeout-ms N] [--max-body BYTES]"
    );
    std::process::exit(2)
}
