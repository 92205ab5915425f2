//! "Hello, world" over HTTP/1.1 with keep-alive and pipelining, one fiber
//! per connection, parsed with `httparse`.
//!
//! `cargo run --release --example http_hello -- 127.0.0.1:8080`, then
//! `curl http://127.0.0.1:8080/` or `wrk -c 100 -d 10s http://127.0.0.1:8080/`.

use std::io::{self, Read, Write};
use std::time::Duration;

use fibra::net::{TcpListener, TcpStream};

const BODY: &str = "Hello, world!";

fn main() -> io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".to_string());
    fibra::run(|| {
        let listener = TcpListener::bind(addr.as_str())?;
        eprintln!("http_hello listening on http://{}/", listener.local_addr()?);
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    fibra::spawn(move || {
                        let _ = serve(stream); // a client going away is not an error
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

/// Serves one connection: parses every complete request in the buffer
/// (pipelining), answers them all with one write, reads more.
fn serve(mut stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut buf = vec![0u8; 16 * 1024];
    let mut filled = 0;
    let mut out = Vec::with_capacity(4096);
    loop {
        let n = stream.read(&mut buf[filled..])?;
        if n == 0 {
            return Ok(());
        }
        filled += n;
        let mut start = 0;
        let mut close = false;
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&buf[start..filled]) {
                Ok(httparse::Status::Complete(len)) => {
                    close |= wants_close(&req);
                    start += len;
                    respond(&mut out, req.path == Some("/"));
                }
                Ok(httparse::Status::Partial) => break,
                Err(_) => {
                    out.extend_from_slice(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                    close = true;
                    break;
                }
            }
        }
        if !out.is_empty() {
            stream.write_all(&out)?;
            out.clear();
        }
        if close {
            return Ok(());
        }
        // Keep the unparsed tail; grow the buffer for a large request.
        buf.copy_within(start..filled, 0);
        filled -= start;
        if filled == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
    }
}

fn wants_close(req: &httparse::Request<'_, '_>) -> bool {
    let connection = req
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("connection"))
        .map(|h| h.value.to_ascii_lowercase());
    match req.version {
        Some(0) => connection.as_deref() != Some(b"keep-alive".as_slice()),
        _ => connection.as_deref() == Some(b"close".as_slice()),
    }
}

fn respond(out: &mut Vec<u8>, found: bool) {
    if found {
        out.extend_from_slice(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{BODY}",
                BODY.len()
            )
            .as_bytes(),
        );
    } else {
        out.extend_from_slice(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
    }
}
