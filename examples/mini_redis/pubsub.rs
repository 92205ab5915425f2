//! Publish / subscribe.
//!
//! A connection that subscribes gets a second fiber: a writer parked on a
//! channel. From then on everything for that client — its own replies and
//! the messages others publish — goes through the channel, so the writer
//! is the socket's only writer and the order is kept. The connection's
//! fiber stays parked on its reader, serving SUBSCRIBE, PING and the like.
//!
//! The channel is bounded: a subscriber that does not read while messages
//! pile up is disconnected, as Redis disconnects a client past its pub/sub
//! output-buffer limit, instead of holding memory without end.

use std::collections::HashMap;
use std::io::Write;
use std::net::Shutdown;
use std::rc::Rc;

use fibra::net::TcpStream;
use fibra::sync::mpsc::{SyncSender, TrySendError, sync_channel};

use crate::Conn;
use crate::resp::{array, bulk, int};

/// Frames a subscriber may have waiting before it is cut off.
const BACKLOG: usize = 4096;

/// Who listens to what.
#[derive(Default)]
pub struct Registry {
    channels: HashMap<Vec<u8>, HashMap<u64, Subscriber>>,
}

/// One subscribed connection, as publishers see it.
struct Subscriber {
    to_writer: SyncSender<Vec<u8>>,
    stream: Rc<TcpStream>,
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
    let mut overflowed = Vec::new();
    if let Some(subs) = reg.channels.get(&a[1]) {
        let mut frame = Vec::with_capacity(a[1].len() + a[2].len() + 32);
        array(&mut frame, 3);
        bulk(&mut frame, b"message");
        bulk(&mut frame, &a[1]);
        bulk(&mut frame, &a[2]);
        for (&id, sub) in subs {
            match sub.to_writer.try_send(frame.clone()) {
                Ok(()) => reached += 1,
                Err(TrySendError::Full(_)) => {
                    // Too slow: cut it off; its fibers see the shutdown and end.
                    let _ = sub.stream.shutdown(Shutdown::Both);
                    overflowed.push(id);
                }
                Err(TrySendError::Disconnected(_)) => overflowed.push(id),
            }
        }
    }
    for id in overflowed {
        reg.remove(&a[1], id);
    }
    drop(reg);
    int(&mut c.out, reached);
}

/// `SUBSCRIBE channel...`: a confirmation per channel.
pub fn subscribe(c: &mut Conn, a: &mut [Vec<u8>]) {
    let to_writer = match &c.sink {
        Some(tx) => tx.clone(),
        None => {
            let (tx, rx) = sync_channel::<Vec<u8>>(BACKLOG);
            // What was answered before goes out first, then the writer
            // takes over the socket.
            if c.send_pending_direct().is_err() {
                return;
            }
            let stream = c.stream.clone();
            fibra::spawn(move || {
                for frame in rx.iter() {
                    if (&*stream).write_all(&frame).is_err() {
                        let _ = stream.shutdown(Shutdown::Both);
                        return;
                    }
                }
            });
            c.sink = Some(tx.clone());
            tx
        }
    };
    let mut reg = c.shared.pubsub.lock().unwrap_or_else(|e| e.into_inner());
    for ch in &a[1..] {
        if !c.subscriptions.contains(ch) {
            c.subscriptions.push(ch.clone());
            let sub = Subscriber {
                to_writer: to_writer.clone(),
                stream: c.stream.clone(),
            };
            reg.channels
                .entry(ch.clone())
                .or_default()
                .insert(c.id, sub);
        }
        confirm(&mut c.out, b"subscribe", Some(ch), c.subscriptions.len());
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
        return confirm(&mut c.out, b"unsubscribe", None, 0);
    }
    let mut reg = c.shared.pubsub.lock().unwrap_or_else(|e| e.into_inner());
    for ch in &channels {
        if let Some(i) = c.subscriptions.iter().position(|s| s == ch) {
            c.subscriptions.remove(i);
            reg.remove(ch, c.id);
        }
        confirm(&mut c.out, b"unsubscribe", Some(ch), c.subscriptions.len());
    }
}

fn confirm(out: &mut Vec<u8>, kind: &[u8], channel: Option<&[u8]>, count: usize) {
    array(out, 3);
    bulk(out, kind);
    match channel {
        Some(ch) => bulk(out, ch),
        None => crate::resp::nil(out),
    }
    int(out, count as i64);
}
