//! Publish / subscribe.
//!
//! A connection that subscribes gets a second fiber: a writer parked on a
//! channel. From then on everything for that client — its own replies and
//! the messages others publish — goes through the channel, so the writer
//! is the socket's only writer and the order is kept. The connection's
//! fiber stays parked on its reader, serving SUBSCRIBE, PING and the like.
//!
//! Messages are framed in the subscriber's protocol: an array in RESP2, a
//! push (`>`) in RESP3, where the confirmations of SUBSCRIBE and
//! UNSUBSCRIBE are pushes too. A RESP3 subscriber may run any command;
//! a RESP2 one only the few `commands::execute` lets through.
//!
//! What waits in the channel is counted in bytes: a subscriber that does
//! not read while more than 32 MiB piles up for it is disconnected, as
//! Redis disconnects a client past its pub/sub output-buffer limit,
//! instead of holding memory without end.

use std::cell::Cell;
use std::collections::HashMap;
use std::io::{self, Write};
use std::net::Shutdown;
use std::rc::Rc;

use fibra::net::TcpStream;
use fibra::sync::mpsc::{Sender, channel};

use crate::Conn;
use crate::resp::{Proto, bulk, int, null, push};

/// Bytes that may wait for a subscriber before it is cut off (Redis's
/// `client-output-buffer-limit pubsub` hard limit).
const OUTPUT_LIMIT: usize = 32 * 1024 * 1024;

/// The way to a subscriber's writer fiber.
#[derive(Clone)]
pub struct Sink {
    tx: Sender<Vec<u8>>,
    /// Bytes sent to the writer and not yet written.
    queued: Rc<Cell<usize>>,
    stream: Rc<TcpStream>,
    /// The subscriber's protocol now (it may say `HELLO` while subscribed).
    proto: Rc<Cell<Proto>>,
}

impl Sink {
    pub fn set_proto(&self, p: Proto) {
        self.proto.set(p);
    }

    /// Hands `frame` to the writer; past the limit, cuts the client off
    /// instead (its fibers see the shutdown and end).
    pub fn send(&self, frame: Vec<u8>) -> io::Result<()> {
        let queued = self.queued.get() + frame.len();
        if queued > OUTPUT_LIMIT {
            let _ = self.stream.shutdown(Shutdown::Both);
            return Err(io::Error::other("pub/sub output limit reached"));
        }
        self.tx
            .send(frame)
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
        self.queued.set(queued);
        Ok(())
    }
}

/// Who listens to what.
#[derive(Default)]
pub struct Registry {
    channels: HashMap<Vec<u8>, HashMap<u64, Sink>>,
}

impl Registry {
    /// Forgets connection `id` on `channel`.
    pub fn remove(&mut self, channel: &[u8], id: u64) {
        if let Some(subs) = self.channels.get_mut(channel) {
            subs.remove(&id);
            if subs.is_empty() {
                self.channels.remove(channel);
            }
        }
    }
}

/// `PUBLISH channel message`: how many subscribers it reached.
pub fn publish(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut reg = c.shared.pubsub.lock().unwrap_or_else(|e| e.into_inner());
    let mut reached = 0;
    let mut cut_off = Vec::new();
    if let Some(subs) = reg.channels.get(&a[1]) {
        // Framed once per protocol, when a subscriber of it is met.
        let mut frames: [Option<Vec<u8>>; 2] = [None, None];
        for (&id, sink) in subs {
            let p = sink.proto.get();
            let frame = frames[(p == Proto::Resp3) as usize].get_or_insert_with(|| {
                let mut frame = Vec::with_capacity(a[1].len() + a[2].len() + 32);
                push(&mut frame, p, 3);
                bulk(&mut frame, b"message");
                bulk(&mut frame, &a[1]);
                bulk(&mut frame, &a[2]);
                frame
            });
            match sink.send(frame.clone()) {
                Ok(()) => reached += 1,
                Err(_) => cut_off.push(id),
            }
        }
    }
    for id in cut_off {
        reg.remove(&a[1], id);
    }
    drop(reg);
    int(&mut c.out, reached);
}

/// `SUBSCRIBE channel...`: a confirmation per channel.
pub fn subscribe(c: &mut Conn, a: &mut [Vec<u8>]) {
    let sink = match &c.sink {
        Some(sink) => sink.clone(),
        None => {
            // What was answered before goes out first, then the writer
            // takes over the socket.
            if c.send_pending_direct().is_err() {
                return;
            }
            let (tx, rx) = channel::<Vec<u8>>();
            let queued = Rc::new(Cell::new(0));
            let sink = Sink {
                tx,
                queued: queued.clone(),
                stream: c.stream.clone(),
                proto: Rc::new(Cell::new(c.proto)),
            };
            let stream = c.stream.clone();
            fibra::spawn(move || {
                for frame in rx.iter() {
                    if (&*stream).write_all(&frame).is_err() {
                        let _ = stream.shutdown(Shutdown::Both);
                        return;
                    }
                    queued.set(queued.get() - frame.len());
                }
            });
            c.sink = Some(sink.clone());
            sink
        }
    };
    let mut reg = c.shared.pubsub.lock().unwrap_or_else(|e| e.into_inner());
    for ch in &a[1..] {
        if !c.subscriptions.contains(ch) {
            c.subscriptions.push(ch.clone());
            reg.channels
                .entry(ch.clone())
                .or_default()
                .insert(c.id, sink.clone());
        }
        let n = c.subscriptions.len();
        confirm(&mut c.out, c.proto, b"subscribe", Some(ch), n);
    }
}

/// `UNSUBSCRIBE [channel...]` (none: all of them).
pub fn unsubscribe(c: &mut Conn, a: &mut [Vec<u8>]) {
    let channels = if a.len() > 1 {
        a[1..].to_vec()
    } else {
        c.subscriptions.clone()
    };
    if channels.is_empty() {
        return confirm(&mut c.out, c.proto, b"unsubscribe", None, 0);
    }
    let mut reg = c.shared.pubsub.lock().unwrap_or_else(|e| e.into_inner());
    for ch in &channels {
        if let Some(i) = c.subscriptions.iter().position(|s| s == ch) {
            c.subscriptions.remove(i);
            reg.remove(ch, c.id);
        }
        let n = c.subscriptions.len();
        confirm(&mut c.out, c.proto, b"unsubscribe", Some(ch), n);
    }
}

/// `[kind, channel, subscriptions left]`, as a push in RESP3.
fn confirm(out: &mut Vec<u8>, p: Proto, kind: &[u8], channel: Option<&[u8]>, count: usize) {
    push(out, p, 3);
    bulk(out, kind);
    match channel {
        Some(ch) => bulk(out, ch),
        None => null(out, p),
    }
    int(out, count as i64);
}
