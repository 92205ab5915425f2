//! The connection's own commands: PING, ECHO, SELECT, HELLO, CLIENT,
//! RESET.

use crate::Conn;
use crate::commands::NOT_INTEGER;
use crate::resp::{array, bulk, error, int, nil, parse_i64, simple};

pub fn ping(c: &mut Conn, a: &mut [Vec<u8>]) {
    if a.len() > 2 {
        return error(
            &mut c.out,
            "ERR wrong number of arguments for 'ping' command",
        );
    }
    if !c.subscriptions.is_empty() {
        // In subscriber mode a RESP2 PING answers as a push message.
        array(&mut c.out, 2);
        bulk(&mut c.out, b"pong");
        bulk(&mut c.out, a.get(1).map_or(&b""[..], |m| m));
    } else if let Some(m) = a.get(1) {
        bulk(&mut c.out, m);
    } else {
        simple(&mut c.out, "PONG");
    }
}

pub fn echo(c: &mut Conn, a: &mut [Vec<u8>]) {
    bulk(&mut c.out, &a[1]);
}

pub fn select(c: &mut Conn, a: &mut [Vec<u8>]) {
    match parse_i64(&a[1]) {
        None => error(&mut c.out, NOT_INTEGER),
        Some(0) => simple(&mut c.out, "OK"),
        Some(_) => error(&mut c.out, "ERR DB index is out of range"),
    }
}

/// `CLIENT`: names are kept, other subcommands are acknowledged.
pub fn client(c: &mut Conn, a: &mut [Vec<u8>]) {
    match a[1].to_ascii_uppercase().as_slice() {
        b"SETNAME" if a.len() == 3 => {
            c.name = a[2].clone();
            simple(&mut c.out, "OK")
        }
        b"GETNAME" => {
            if c.name.is_empty() {
                nil(&mut c.out)
            } else {
                bulk(&mut c.out, &c.name.clone())
            }
        }
        b"ID" => int(&mut c.out, c.id as i64),
        _ => simple(&mut c.out, "OK"),
    }
}

/// `HELLO [2]`: the RESP2 handshake; RESP3 is refused as Redis refuses an
/// unknown version, and clients fall back to RESP2.
pub fn hello(c: &mut Conn, a: &mut [Vec<u8>]) {
    if let Some(v) = a.get(1) {
        match parse_i64(v) {
            None => {
                return error(
                    &mut c.out,
                    "ERR Protocol version is not an integer or out of range",
                );
            }
            Some(2) => {}
            Some(_) => return error(&mut c.out, "NOPROTO unsupported protocol version"),
        }
    }
    array(&mut c.out, 14);
    for (k, v) in [("server", "redis"), ("version", "7.0.15")] {
        bulk(&mut c.out, k.as_bytes());
        bulk(&mut c.out, v.as_bytes());
    }
    bulk(&mut c.out, b"proto");
    int(&mut c.out, 2);
    bulk(&mut c.out, b"id");
    int(&mut c.out, c.id as i64);
    for (k, v) in [("mode", "standalone"), ("role", "master")] {
        bulk(&mut c.out, k.as_bytes());
        bulk(&mut c.out, v.as_bytes());
    }
    bulk(&mut c.out, b"modules");
    array(&mut c.out, 0);
}

/// `RESET`: the connection as new (no subscriptions, no name).
pub fn reset(c: &mut Conn, _: &mut [Vec<u8>]) {
    let mut reg = c.shared.pubsub.lock().unwrap_or_else(|e| e.into_inner());
    for ch in c.subscriptions.drain(..) {
        reg.remove(&ch, c.id);
    }
    drop(reg);
    c.name.clear();
    simple(&mut c.out, "RESET");
}
