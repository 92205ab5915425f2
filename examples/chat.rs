//! A TCP chat room: one fiber per client, waiting with `select!` on its
//! socket and on the room's lines for it at once, and a room fiber that
//! broadcasts through channels.
//!
//! `cargo run --example chat -- 127.0.0.1:7979`, then `nc 127.0.0.1 7979`
//! from a few terminals. `cargo run --example chat -- --demo` starts the
//! room on a free port, lets three scripted clients talk, and exits.
//!
//! ```text
//!            ┌─ socket readable ─▶ lines ──Event──▶ room fiber
//! client fiber                                         │
//!            └─ its queue ◀──────────── line ──────────┘
//! ```
//!
//! A client too slow to keep up has lines dropped (its queue is bounded)
//! rather than holding up the room; a line longer than `MAX_LINE` ends the
//! client's session with a message.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::sync::Arc;

use fibra::channel::{Receiver, Sender, TrySendError, bounded, unbounded};
use fibra::io::Interest;
use fibra::net::{TcpListener, TcpStream};

/// Lines a client may have waiting before new ones are dropped for it.
const CLIENT_QUEUE: usize = 128;
/// The longest line a client may send.
const MAX_LINE: usize = 4096;

enum Event {
    Join(u64, Sender<Arc<str>>),
    Line(u64, String),
    Leave(u64),
}

fn main() {
    // `main` returning the error would print it with `{:?}`
    // (`Os { code: 98, kind: AddrInUse, .. }`): say it plainly instead.
    if let Err(e) = run() {
        eprintln!("chat: {e}");
        std::process::exit(1);
    }
}

fn run() -> io::Result<()> {
    let arg = std::env::args().nth(1);
    fibra::run(|| {
        let demo = arg.as_deref() == Some("--demo");
        let addr = match arg.as_deref() {
            Some("--demo") | None => "127.0.0.1:0",
            Some(addr) => addr,
        };
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        eprintln!("chat room on {addr}");
        let (events, inbox) = unbounded();
        fibra::spawn(move || room(inbox));
        let server = fibra::spawn(move || serve(listener, events));
        if demo {
            run_demo(addr)?;
            server.cancel();
            return Ok(());
        }
        server.join()?
    })
}

/// Accepts clients, a fiber each.
fn serve(listener: TcpListener, events: Sender<Event>) -> io::Result<()> {
    for (id, stream) in (1..).zip(listener.incoming()) {
        match stream {
            Ok(stream) => {
                let events = events.clone();
                fibra::spawn(move || client(id, stream, events));
            }
            Err(e) => {
                eprintln!("accept: {e}");
                fibra::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
    Ok(())
}

/// One client's session: whatever comes first, a line from the client
/// (to the room) or a line from the room (to the client).
fn client(id: u64, stream: TcpStream, events: Sender<Event>) {
    let (queue, lines): (Sender<Arc<str>>, Receiver<Arc<str>>) = bounded(CLIENT_QUEUE);
    if events.send(Event::Join(id, queue)).is_err() {
        return; // the room is gone
    }
    let mut pending = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        fibra::select! {
            io(stream, Interest::READABLE) -> _ => {
                // Readable: this read returns at once (data, or EOF).
                let n = match (&stream).read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                pending.extend_from_slice(&buf[..n]);
                while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=end).collect();
                    let text = String::from_utf8_lossy(&line).trim_end().to_string();
                    let _ = events.send(Event::Line(id, text));
                }
                if pending.len() > MAX_LINE {
                    let _ = (&stream).write_all(b"* line too long, goodbye\n");
                    break;
                }
            }
            recv(lines) -> line => match line {
                Ok(line) if (&stream).write_all(line.as_bytes()).is_ok() => {}
                _ => break,
            },
        }
    }
    let _ = events.send(Event::Leave(id));
}

/// Owns the list of clients and broadcasts every line to all of them.
fn room(inbox: Receiver<Event>) {
    let mut clients: HashMap<u64, Sender<Arc<str>>> = HashMap::new();
    for event in inbox {
        let line: Arc<str> = match event {
            Event::Join(id, queue) => {
                clients.insert(id, queue);
                format!("* user{id} joined ({} here)\n", clients.len()).into()
            }
            Event::Line(id, text) => format!("user{id}: {text}\n").into(),
            Event::Leave(id) => {
                clients.remove(&id);
                format!("* user{id} left\n").into()
            }
        };
        print!("{line}");
        clients.retain(|_, queue| match queue.try_send(line.clone()) {
            Ok(()) | Err(TrySendError::Full(_)) => true, // slow client: skip a line
            Err(TrySendError::Disconnected(_)) => false,
        });
    }
}

/// Three clients join, each says hello, and each checks it heard the
/// others.
fn run_demo(addr: std::net::SocketAddr) -> io::Result<()> {
    let clients: Vec<_> = (0..3)
        .map(|n| {
            fibra::spawn(move || -> io::Result<()> {
                let stream = TcpStream::connect(addr)?;
                let mut reader = BufReader::new(stream.try_clone()?);
                let mut heard = Vec::new();
                let mut line = String::new();
                // Wait until all three are in, then talk.
                while !heard.iter().any(|l: &String| l.contains("(3 here)")) {
                    line.clear();
                    reader.read_line(&mut line)?;
                    heard.push(line.clone());
                }
                (&stream).write_all(format!("hello from client {n}\n").as_bytes())?;
                let mut hellos = 0;
                while hellos < 3 {
                    line.clear();
                    if reader.read_line(&mut line)? == 0 {
                        break;
                    }
                    hellos += usize::from(line.contains(": hello from client"));
                }
                assert_eq!(hellos, 3, "client {n} missed a greeting");
                Ok(())
            })
        })
        .collect();
    for c in clients {
        c.join()??;
    }
    eprintln!("demo: every client heard every greeting");
    Ok(())
}
