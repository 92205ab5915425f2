//! A TCP chat room: one fiber per client reading its lines, one per client
//! writing to it, and a room fiber that broadcasts through channels.
//!
//! `cargo run --example chat -- 127.0.0.1:7979`, then `nc 127.0.0.1 7979`
//! from a few terminals. `cargo run --example chat -- --demo` starts the
//! room on a free port, lets three scripted clients talk, and exits.
//!
//! ```text
//! client ──▶ reader fiber ──Event──▶ room fiber ──line──▶ writer fiber ──▶ client
//! ```
//!
//! A client too slow to keep up has lines dropped (its queue is bounded)
//! rather than holding up the room.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Write};
use std::sync::Arc;

use fibra::net::{TcpListener, TcpStream};
use fibra::sync::mpsc::{self, SyncSender, TrySendError};

/// Lines a client may have waiting before new ones are dropped for it.
const CLIENT_QUEUE: usize = 128;

enum Event {
    Join(u64, SyncSender<Arc<str>>),
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
        let (events, inbox) = mpsc::channel();
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

/// Accepts clients, each with a reader and a writer fiber.
fn serve(listener: TcpListener, events: mpsc::Sender<Event>) -> io::Result<()> {
    for (id, stream) in (1..).zip(listener.incoming()) {
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                eprintln!("accept: {e}");
                fibra::sleep(std::time::Duration::from_millis(10));
                continue;
            }
        };
        let (tx, rx) = mpsc::sync_channel::<Arc<str>>(CLIENT_QUEUE);
        let mut writer = stream.try_clone()?;
        fibra::spawn(move || {
            for line in rx {
                if writer.write_all(line.as_bytes()).is_err() {
                    break;
                }
            }
        });
        let events = events.clone();
        fibra::spawn(move || {
            let _ = events.send(Event::Join(id, tx));
            for line in BufReader::new(stream).lines() {
                match line {
                    Ok(line) => {
                        let _ = events.send(Event::Line(id, line));
                    }
                    Err(_) => break,
                }
            }
            let _ = events.send(Event::Leave(id));
        });
    }
    Ok(())
}

/// Owns the list of clients and broadcasts every line to all of them.
fn room(inbox: mpsc::Receiver<Event>) {
    let mut clients: HashMap<u64, SyncSender<Arc<str>>> = HashMap::new();
    for event in inbox {
        let line: Arc<str> = match event {
            Event::Join(id, tx) => {
                clients.insert(id, tx);
                format!("* user{id} joined ({} here)\n", clients.len()).into()
            }
            Event::Line(id, text) => format!("user{id}: {text}\n").into(),
            Event::Leave(id) => {
                clients.remove(&id); // its writer ends when the sender goes
                format!("* user{id} left\n").into()
            }
        };
        print!("{line}");
        clients.retain(|_, tx| match tx.try_send(line.clone()) {
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
