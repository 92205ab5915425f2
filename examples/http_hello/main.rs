//! "Hello, world" over HTTP/1.1, one fiber per connection, parsed with
//! `httparse`: keep-alive, pipelining, request bodies, HEAD, limits and an
//! idle timeout (see `http1.rs`, the connection loop it shares with
//! `https_hello`).
//!
//! `cargo run --release --example http_hello -- [ADDR] [--idle-timeout-ms N] [--max-body BYTES]`
//! (default `127.0.0.1:8080`), then `curl http://127.0.0.1:8080/`,
//! `ab -k -n 10000 -c 10 http://127.0.0.1:8080/` or
//! `wrk -c 100 -d 10s http://127.0.0.1:8080/`.

mod http1;

use std::io;
use std::time::Duration;

use fibra::net::TcpListener;

fn main() -> io::Result<()> {
    let (addr, config) = parse_args("127.0.0.1:8080");
    fibra::run(|| {
        let listener = TcpListener::bind(addr.as_str())?;
        eprintln!("http_hello listening on http://{}/", listener.local_addr()?);
        loop {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    fibra::spawn(move || {
                        let _ = stream.set_nodelay(true);
                        // A client going away is not the server's error.
                        let _ = http1::serve(&mut stream, &config);
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

/// `[ADDR] [--idle-timeout-ms N] [--max-body BYTES]`.
fn parse_args(default_addr: &str) -> (String, http1::Config) {
    let mut addr = default_addr.to_string();
    let mut config = http1::Config::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |what: &str| -> u64 {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| usage(&format!("{what} needs a number")))
        };
        match arg.as_str() {
            "--idle-timeout-ms" => {
                config.idle_timeout = Duration::from_millis(number(&arg).max(1));
            }
            "--max-body" => config.max_body = number(&arg),
            _ if arg.starts_with('-') => usage(&format!("unknown option {arg}")),
            _ => addr = arg,
        }
    }
    (addr, config)
}

fn usage(why: &str) -> ! {
    eprintln!("{why}\nusage: http_hello [ADDR] [--idle-timeout-ms N] [--max-body BYTES]");
    std::process::exit(2)
}
