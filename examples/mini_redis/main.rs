//! A small Redis: RESP2 and RESP3 over TCP, one fiber per connection,
//! written in plain blocking style.
//!
//! ```sh
//! cargo run --release --example mini_redis -- 127.0.0.1:6379
//! redis-cli -p 6379 set greeting hello      # OK
//! redis-benchmark -p 6379 -q -t ping,set,get,lpush,lpop -P 16
//! ```
//!
//! Strings (with expiry), lists, pub/sub, transactions (MULTI / EXEC),
//! and enough of the connection handshake (`HELLO 2` and `HELLO 3` with
//! `AUTH` and `SETNAME`, `CLIENT SETNAME`/`SETINFO`/`ID`/`INFO`, `COMMAND`,
//! `CONFIG GET`, `SELECT 0`, `INFO`) for `redis-cli`, `redis-benchmark`
//! and client libraries such as redis-py, which speaks RESP3 by default.
//! Replies are byte for byte those of redis-server 7 in either protocol:
//! on a RESP3 connection nulls are `_`, `CONFIG GET` and `HELLO` answer
//! maps, `INFO` a verbatim string, and pub/sub messages arrive as pushes.
//!
//! Each connection is a fiber reading commands through a `BufReader` and
//! appending replies to a buffer; the buffer goes out in one write just
//! before the fiber would wait for more input. So a pipelined batch is
//! answered with one write, and a lone command with one write too.
//! The keyspace and the pub/sub registry are shared behind
//! `fibra::sync::Mutex`; a fiber holds a lock only while a command runs,
//! never across a wait.

mod commands;
mod connection;
mod db;
mod keys;
mod lists;
mod multi;
mod pubsub;
mod resp;
mod server;
mod strings;

use std::cell::Cell;
use std::io::{self, BufReader, Read, Write};
use std::rc::Rc;
use std::time::{Duration, Instant};

use fibra::net::{TcpListener, TcpStream};
use fibra::sync::Mutex;

use commands::Flow;
use resp::{Proto, ReadError};

/// State all connections share.
pub struct Shared {
    pub db: Mutex<db::Db>,
    pub pubsub: Mutex<pubsub::Registry>,
    next_id: Cell<u64>,
}

/// One client: its socket, the replies not sent yet, and its session.
/// It is also the `Read` under the connection's `BufReader`: before it
/// reads from the socket it sends the pending replies.
pub struct Conn {
    pub shared: Rc<Shared>,
    pub stream: Rc<TcpStream>,
    /// Replies not yet sent.
    pub out: Vec<u8>,
    /// Set once the client subscribes: replies then go to its writer fiber.
    pub sink: Option<pubsub::Sink>,
    pub id: u64,
    /// The reply protocol (`HELLO`); RESP2 until the client asks for 3.
    pub proto: Proto,
    /// `CLIENT SETNAME`; empty for none.
    pub name: Vec<u8>,
    /// `CLIENT SETINFO LIB-NAME` and `LIB-VER`: the client library's
    /// own words, shown by `CLIENT INFO`.
    pub lib_name: Vec<u8>,
    pub lib_ver: Vec<u8>,
    pub connected: Instant,
    /// Channels subscribed to, in order.
    pub subscriptions: Vec<Vec<u8>>,
    /// The commands queued since `MULTI`, until `EXEC` or `DISCARD`.
    pub multi: Option<multi::Queue>,
}

impl Conn {
    /// Sends the pending replies: to the socket, or to the writer fiber.
    fn send_pending(&mut self) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        match &self.sink {
            Some(sink) => sink.send(std::mem::take(&mut self.out)),
            None => self.send_pending_direct(),
        }
    }

    /// Switches the reply protocol, and the one that messages published to
    /// this connection (if it subscribes) are framed in.
    pub fn set_proto(&mut self, p: Proto) {
        self.proto = p;
        if let Some(sink) = &self.sink {
            sink.set_proto(p);
        }
    }

    /// Writes the pending replies to the socket itself.
    pub fn send_pending_direct(&mut self) -> io::Result<()> {
        (&*self.stream).write_all(&self.out)?;
        self.out.clear();
        Ok(())
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Everything read so far is answered: one write per batch.
        self.send_pending()?;
        (&*self.stream).read(buf)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let mut reg = self.shared.pubsub.lock().unwrap_or_else(|e| e.into_inner());
        for ch in &self.subscriptions {
            reg.remove(ch, self.id);
        }
    }
}

/// Replies held back before they are written anyway (a client that
/// pipelines many large GETs does not grow them without end).
const OUT_HIGH_WATER: usize = 64 * 1024;

fn serve(shared: Rc<Shared>, stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let id = shared.next_id.get();
    shared.next_id.set(id + 1);
    let conn = Conn {
        shared,
        stream: Rc::new(stream),
        out: Vec::with_capacity(16 * 1024),
        sink: None,
        id,
        proto: Proto::Resp2,
        name: Vec::new(),
        lib_name: Vec::new(),
        lib_ver: Vec::new(),
        connected: Instant::now(),
        subscriptions: Vec::new(),
        multi: None,
    };
    let mut input = BufReader::with_capacity(16 * 1024, conn);
    loop {
        match resp::read_command(&mut input) {
            Ok(mut args) => {
                let conn = input.get_mut();
                if commands::execute(conn, &mut args) == Flow::Close {
                    return conn.send_pending();
                }
                if conn.out.len() >= OUT_HIGH_WATER {
                    conn.send_pending()?;
                }
            }
            Err(ReadError::Protocol(msg)) => {
                let conn = input.get_mut();
                resp::error(&mut conn.out, &format!("ERR Protocol error: {msg}"));
                return conn.send_pending();
            }
            Err(ReadError::Io(e)) => return Err(e),
        }
    }
}

/// Active expiry, as Redis's: ten times a second, remove the keys whose
/// time has come, in slices that never hold the runtime for long.
fn expire_keys(shared: Rc<Shared>) {
    loop {
        fibra::sleep(Duration::from_millis(100));
        while shared
            .db
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .expire_due(10_000)
            == 10_000
        {
            fibra::yield_now();
        }
    }
}

/// How long the runtime polls before it sleeps (see
/// `fibra::runtime::Builder::busy_poll`). Under `redis-benchmark -c 50`,
/// requests come a few microseconds apart, and a server that sleeps in
/// between is woken by the client's `send`, at the client's expense: with
/// the benchmark's core the limit, that cost decides requests/s. Polling
/// a few microseconds takes up most of them awake (0.25 sleeps per request
/// fell to 0.05-0.08 at 5 us; redis-server's are 0.17); most of the spin
/// replaces a sleep and a wake-up, which cost the server about as much.
/// 3 us, not 5: at 5 us the CPU per request of GET and SET came out 1-4 %
/// above redis-server's in one idle run (`benches/peers`, `redis`), at
/// 3 us 1-4 % below, with requests/s still ahead.
const BUSY_POLL: Duration = Duration::from_micros(3);

fn main() -> io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:6379".to_string());
    let rt = fibra::Runtime::builder().busy_poll(BUSY_POLL).build()?;
    rt.block_on(|| {
        let listener = TcpListener::bind(addr.as_str())?;
        eprintln!("mini_redis listening on {}", listener.local_addr()?);
        let shared = Rc::new(Shared {
            db: Mutex::new(db::Db::default()),
            pubsub: Mutex::new(pubsub::Registry::default()),
            next_id: Cell::new(1),
        });
        let expiry = shared.clone();
        fibra::spawn(move || expire_keys(expiry));
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    let shared = shared.clone();
                    fibra::spawn(move || {
                        let _ = serve(shared, stream); // a client going away is not an error
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
