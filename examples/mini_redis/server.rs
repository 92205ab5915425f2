//! Commands about the server: DBSIZE, FLUSHDB, COMMAND, CONFIG, INFO.

use crate::Conn;
use crate::commands::{SYNTAX, db};
use crate::resp::{array, bulk, error, int, map, simple, verbatim};

pub fn dbsize(c: &mut Conn, _: &mut [Vec<u8>]) {
    let n = db(&c.shared).len();
    int(&mut c.out, n as i64);
}

pub fn flushdb(c: &mut Conn, a: &mut [Vec<u8>]) {
    match a.get(1).map(|m| m.to_ascii_uppercase()) {
        None => {}
        Some(m) if a.len() == 2 && (m == b"SYNC" || m == b"ASYNC") => {}
        Some(_) => return error(&mut c.out, SYNTAX),
    }
    db(&c.shared).clear();
    simple(&mut c.out, "OK");
}

/// `COMMAND`, `COMMAND COUNT`, `COMMAND DOCS`: enough for clients that ask
/// at connect time (redis-cli asks for DOCS to show hints; it reads the
/// empty map as "no hints").
pub fn command(c: &mut Conn, a: &mut [Vec<u8>]) {
    match a.get(1).map(|s| s.to_ascii_uppercase()).as_deref() {
        Some(b"COUNT") => int(&mut c.out, 40),
        Some(b"DOCS") => map(&mut c.out, c.proto, 0),
        _ => array(&mut c.out, 0),
    }
}

/// `CONFIG GET` of what redis-benchmark asks for (by name, or all with
/// `*`), a map in RESP3; `CONFIG SET` is refused.
pub fn config(c: &mut Conn, a: &mut [Vec<u8>]) {
    if !a[1].eq_ignore_ascii_case(b"GET") || a.len() < 3 {
        return error(&mut c.out, "ERR CONFIG is limited to GET here");
    }
    let known: &[(&str, &str)] = &[("save", ""), ("appendonly", "no"), ("databases", "1")];
    let found: Vec<_> = known
        .iter()
        .filter(|(k, _)| {
            a[2..]
                .iter()
                .any(|p| p == b"*" || p.eq_ignore_ascii_case(k.as_bytes()))
        })
        .collect();
    map(&mut c.out, c.proto, found.len());
    for (k, v) in found {
        bulk(&mut c.out, k.as_bytes());
        bulk(&mut c.out, v.as_bytes());
    }
}

/// `INFO`: text for people, a verbatim string in RESP3.
pub fn info(c: &mut Conn, _: &mut [Vec<u8>]) {
    let keys = db(&c.shared).len();
    let text = format!(
        "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\nserver:mini_redis (fibra)\r\n\r\n# Keyspace\r\ndb0:keys={keys},expires=0,avg_ttl=0\r\n"
    );
    verbatim(&mut c.out, c.proto, text.as_bytes());
}
