//! An echo server in blocking style: one fiber per connection.
//!
//! `cargo run --release --example echo_server -- 127.0.0.1:7878`, then
//! `nc 127.0.0.1 7878` in another terminal (or the benchmark in
//! benches/peers).
//!
//! Running out of file descriptors (EMFILE/ENFILE) does not kill the accept
//! loop: it backs off briefly while the connections it has finish, and the
//! waiting clients are accepted once descriptors free up.

use std::io::{self, Read, Write};
use std::time::Duration;

use fibra::net::{TcpListener, TcpStream};

fn main() {
    // `main` returning the error would print it with `{:?}`
    // (`Os { code: 98, kind: AddrInUse, .. }`): say it plainly instead.
    if let Err(e) = run() {
        eprintln!("echo_server: {e}");
        std::process::exit(1);
    }
}

fn run() -> io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:7878".to_string());
    fibra::run(|| {
        let listener = TcpListener::bind(addr.as_str())?;
        eprintln!("echo server listening on {}", listener.local_addr()?);
        serve(&listener)
    })
}

fn serve(listener: &TcpListener) -> io::Result<()> {
    loop {
        match listener.accept() {
            Ok((stream, _peer)) => {
                fibra::spawn(move || {
                    if let Err(e) = echo(stream) {
                        eprintln!("connection: {e}");
                    }
                });
            }
            Err(e) if out_of_fds(&e) => {
                eprintln!("accept: {e}; backing off for 10 ms");
                fibra::sleep(Duration::from_millis(10));
            }
            Err(e) => eprintln!("accept: {e}"),
        }
    }
}

fn echo(mut stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut buf = [0; 16 * 1024];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        stream.write_all(&buf[..n])?;
    }
}

fn out_of_fds(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}
