//! The commands: a name, its arity (Redis's convention: `n` exactly, `-n`
//! at least), and a function that appends its reply to the connection's
//! output. Replies and error texts are redis-server 7's.

use std::collections::VecDeque;

use crate::db::{Db, Value, now_ms};
use crate::resp::{array, bulk, error, int, nil, parse_i64, simple};
use crate::{Conn, Shared};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";

/// What the connection does after a command.
#[derive(PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// Send what is pending, then close (`QUIT`).
    Close,
}

type Handler = fn(&mut Conn, &mut [Vec<u8>]);

/// Runs one command, its reply appended to `conn.out`.
pub fn execute(conn: &mut Conn, args: &mut [Vec<u8>]) -> Flow {
    let mut upper = [0u8; 16];
    let name = &args[0];
    let found = (name.len() <= upper.len()).then(|| {
        let upper = &mut upper[..name.len()];
        upper.copy_from_slice(name);
        upper.make_ascii_uppercase();
        lookup(upper)
    });
    let Some(Some((arity, handler))) = found else {
        unknown_command(&mut conn.out, args);
        return Flow::Continue;
    };
    let argc = args.len() as i32;
    if (arity > 0 && argc != arity) || argc < -arity {
        let lower = String::from_utf8_lossy(name).to_lowercase();
        error(
            &mut conn.out,
            &format!("ERR wrong number of arguments for '{lower}' command"),
        );
        return Flow::Continue;
    }
    if !conn.subscriptions.is_empty() {
        let upper = &upper[..name.len()];
        if !matches!(
            upper,
            b"SUBSCRIBE" | b"UNSUBSCRIBE" | b"PING" | b"QUIT" | b"RESET"
        ) {
            let lower = String::from_utf8_lossy(name).to_lowercase();
            error(
                &mut conn.out,
                &format!(
                    "ERR Can't execute '{lower}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
                ),
            );
            return Flow::Continue;
        }
    }
    if &upper[..name.len()] == b"QUIT" {
        simple(&mut conn.out, "OK");
        return Flow::Close;
    }
    handler(conn, args);
    Flow::Continue
}

fn lookup(name: &[u8]) -> Option<(i32, Handler)> {
    Some(match name {
        b"GET" => (2, get),
        b"SET" => (-3, set),
        b"SETEX" => (4, |c, a| set_ex(c, a, 1000)),
        b"PSETEX" => (4, |c, a| set_ex(c, a, 1)),
        b"SETNX" => (3, set_nx),
        b"PING" => (-1, ping),
        b"ECHO" => (2, echo),
        b"DEL" => (-2, del),
        b"EXISTS" => (-2, exists),
        b"INCR" => (2, |c, a| incr_by(c, a, Some(1))),
        b"DECR" => (2, |c, a| incr_by(c, a, Some(-1))),
        b"INCRBY" => (3, |c, a| incr_by(c, a, parse_i64(&a[2]))),
        b"DECRBY" => (3, decr_by),
        b"APPEND" => (3, append),
        b"STRLEN" => (2, strlen),
        b"MGET" => (-2, mget),
        b"MSET" => (-3, mset),
        b"EXPIRE" => (-3, |c, a| expire(c, a, 1000)),
        b"PEXPIRE" => (-3, |c, a| expire(c, a, 1)),
        b"TTL" => (2, |c, a| ttl(c, a, 1000)),
        b"PTTL" => (2, |c, a| ttl(c, a, 1)),
        b"PERSIST" => (2, persist),
        b"LPUSH" => (-3, |c, a| push(c, a, true)),
        b"RPUSH" => (-3, |c, a| push(c, a, false)),
        b"LPOP" => (-2, |c, a| pop(c, a, true)),
        b"RPOP" => (-2, |c, a| pop(c, a, false)),
        b"LLEN" => (2, llen),
        b"LRANGE" => (4, lrange),
        b"PUBLISH" => (3, crate::pubsub::publish),
        b"SUBSCRIBE" => (-2, crate::pubsub::subscribe),
        b"UNSUBSCRIBE" => (-1, crate::pubsub::unsubscribe),
        b"DBSIZE" => (1, |c, _| {
            let n = db(&c.shared).len();
            int(&mut c.out, n as i64)
        }),
        b"FLUSHDB" | b"FLUSHALL" => (-1, flushdb),
        b"QUIT" => (-1, |_, _| {}),
        b"SELECT" => (2, select),
        b"COMMAND" => (-1, command),
        b"CLIENT" => (-2, client),
        b"HELLO" => (-1, hello),
        b"CONFIG" => (-2, config),
        b"INFO" => (-1, info),
        b"RESET" => (1, reset),
        _ => return None,
    })
}

fn unknown_command(out: &mut Vec<u8>, args: &[Vec<u8>]) {
    let text = |b: &[u8], max: usize| String::from_utf8_lossy(&b[..b.len().min(max)]).into_owned();
    let mut msg = format!(
        "ERR unknown command '{}', with args beginning with: ",
        text(&args[0], 128)
    );
    let start = msg.len();
    for a in &args[1..] {
        if msg.len() - start >= 128 {
            break;
        }
        let room = 128 - (msg.len() - start);
        msg.push_str(&format!("'{}' ", text(a, room)));
    }
    error(out, &msg);
}

/// The keyspace, locked for one command (a panicked command's poison is
/// ignored: every command leaves the keyspace consistent between calls).
fn db(shared: &Shared) -> fibra::sync::MutexGuard<'_, Db> {
    shared.db.lock().unwrap_or_else(|e| e.into_inner())
}

// ----- strings ---------------------------------------------------------------

fn get(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut db = db(&c.shared);
    match db.get(&a[1]) {
        None => nil(&mut c.out),
        Some(e) => match &e.value {
            Value::Str(s) => bulk(&mut c.out, s),
            Value::List(_) => error(&mut c.out, WRONGTYPE),
        },
    }
}

fn set(c: &mut Conn, a: &mut [Vec<u8>]) {
    /// The expiry option and its unit (ms per unit of its argument).
    #[derive(PartialEq)]
    enum Ttl {
        Keep,
        None,
        In(i64),
        At(i64),
    }
    let (mut nx, mut xx, mut get, mut ttl) = (false, false, false, Ttl::None);
    let mut ttl_arg: &[u8] = b"";
    let mut i = 3;
    while i < a.len() {
        let opt = a[i].to_ascii_uppercase();
        let next = a.get(i + 1);
        let no_ttl = ttl == Ttl::None;
        match opt.as_slice() {
            b"NX" if !xx => nx = true,
            b"XX" if !nx => xx = true,
            b"GET" => get = true,
            b"KEEPTTL" if no_ttl || ttl == Ttl::Keep => ttl = Ttl::Keep,
            b"EX" | b"PX" | b"EXAT" | b"PXAT" if next.is_some() => {
                let new = match opt.as_slice() {
                    b"EX" => Ttl::In(1000),
                    b"PX" => Ttl::In(1),
                    b"EXAT" => Ttl::At(1000),
                    _ => Ttl::At(1),
                };
                // One kind of expiry per command (the same one again is allowed).
                if ttl != Ttl::None && ttl != new {
                    return error(&mut c.out, SYNTAX);
                }
                (ttl, ttl_arg) = (new, next.unwrap().as_slice());
                i += 1;
            }
            _ => return error(&mut c.out, SYNTAX),
        }
        i += 1;
    }
    // The options' syntax is checked first, then the time.
    let expires = match ttl {
        Ttl::In(unit) | Ttl::At(unit) => {
            let Some(n) = parse_i64(ttl_arg) else {
                return error(&mut c.out, NOT_INTEGER);
            };
            let base = if matches!(ttl, Ttl::In(_)) {
                now_ms()
            } else {
                0
            };
            match n
                .checked_mul(unit)
                .filter(|_| n > 0)
                .and_then(|ms| ms.checked_add(base))
            {
                Some(t) => Some(t),
                None => return error(&mut c.out, "ERR invalid expire time in 'set' command"),
            }
        }
        Ttl::None | Ttl::Keep => None,
    };
    let mut db = db(&c.shared);
    let old = db.get(&a[1]);
    let exists = old.is_some();
    let mut kept = None;
    if let Some(e) = old {
        kept = e.expires;
        if get {
            match &e.value {
                Value::Str(s) => bulk(&mut c.out, s),
                Value::List(_) => return error(&mut c.out, WRONGTYPE),
            }
        }
    } else if get {
        nil(&mut c.out);
    }
    if (nx && exists) || (xx && !exists) {
        if !get {
            nil(&mut c.out);
        }
        return;
    }
    let expires = if ttl == Ttl::Keep { kept } else { expires };
    let value = std::mem::take(&mut a[2]);
    db.set(&a[1], Value::Str(value), expires);
    if !get {
        simple(&mut c.out, "OK");
    }
}

/// `SETEX key seconds value` (`unit` 1000) and `PSETEX` (1).
fn set_ex(c: &mut Conn, a: &mut [Vec<u8>], unit: i64) {
    let Some(n) = parse_i64(&a[2]) else {
        return error(&mut c.out, NOT_INTEGER);
    };
    let Some(when) = n
        .checked_mul(unit)
        .filter(|_| n > 0)
        .and_then(|ms| ms.checked_add(now_ms()))
    else {
        let name = if unit == 1 { "psetex" } else { "setex" };
        return error(
            &mut c.out,
            &format!("ERR invalid expire time in '{name}' command"),
        );
    };
    let value = std::mem::take(&mut a[3]);
    db(&c.shared).set(&a[1], Value::Str(value), Some(when));
    simple(&mut c.out, "OK");
}

fn set_nx(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut db = db(&c.shared);
    let fresh = !db.contains(&a[1]);
    if fresh {
        let value = std::mem::take(&mut a[2]);
        db.set(&a[1], Value::Str(value), None);
    }
    int(&mut c.out, fresh as i64);
}

fn ping(c: &mut Conn, a: &mut [Vec<u8>]) {
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

fn echo(c: &mut Conn, a: &mut [Vec<u8>]) {
    bulk(&mut c.out, &a[1]);
}

fn del(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut db = db(&c.shared);
    let n = a[1..].iter().filter(|k| db.remove(k)).count();
    int(&mut c.out, n as i64);
}

fn exists(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut db = db(&c.shared);
    let n = a[1..].iter().filter(|k| db.contains(k)).count();
    int(&mut c.out, n as i64);
}

fn decr_by(c: &mut Conn, a: &mut [Vec<u8>]) {
    match parse_i64(&a[2]) {
        Some(i64::MIN) => error(&mut c.out, "ERR decrement would overflow"),
        n => incr_by(c, a, n.map(|n| -n)),
    }
}

fn incr_by(c: &mut Conn, a: &mut [Vec<u8>], by: Option<i64>) {
    let Some(by) = by else {
        return error(&mut c.out, NOT_INTEGER);
    };
    let mut db = db(&c.shared);
    let e = db.get_or_insert(&a[1], || Value::Str(b"0".to_vec()));
    let Value::Str(s) = &mut e.value else {
        return error(&mut c.out, WRONGTYPE);
    };
    let Some(old) = (s.len() <= 20).then(|| parse_i64(s)).flatten() else {
        return error(&mut c.out, NOT_INTEGER);
    };
    let Some(new) = old.checked_add(by) else {
        return error(&mut c.out, "ERR increment or decrement would overflow");
    };
    s.clear();
    s.extend_from_slice(new.to_string().as_bytes());
    int(&mut c.out, new);
}

fn append(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut db = db(&c.shared);
    let e = db.get_or_insert(&a[1], || Value::Str(Vec::new()));
    let Value::Str(s) = &mut e.value else {
        return error(&mut c.out, WRONGTYPE);
    };
    if s.len() + a[2].len() > crate::resp::BULK_MAX as usize {
        return error(
            &mut c.out,
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
        );
    }
    s.extend_from_slice(&a[2]);
    int(&mut c.out, s.len() as i64);
}

fn strlen(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut db = db(&c.shared);
    match db.get(&a[1]).map(|e| &e.value) {
        None => int(&mut c.out, 0),
        Some(Value::Str(s)) => int(&mut c.out, s.len() as i64),
        Some(Value::List(_)) => error(&mut c.out, WRONGTYPE),
    }
}

fn mget(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut db = db(&c.shared);
    array(&mut c.out, a.len() as i64 - 1);
    for k in &a[1..] {
        match db.get(k).map(|e| &e.value) {
            Some(Value::Str(s)) => bulk(&mut c.out, s),
            _ => nil(&mut c.out),
        }
    }
}

fn mset(c: &mut Conn, a: &mut [Vec<u8>]) {
    if a.len().is_multiple_of(2) {
        return error(
            &mut c.out,
            "ERR wrong number of arguments for 'mset' command",
        );
    }
    let mut db = db(&c.shared);
    for kv in a[1..].chunks_mut(2) {
        let value = std::mem::take(&mut kv[1]);
        db.set(&kv[0], Value::Str(value), None);
    }
    simple(&mut c.out, "OK");
}

// ----- expiry ----------------------------------------------------------------

/// EXPIRE (`unit` 1000) and PEXPIRE (1), with NX / XX / GT / LT.
fn expire(c: &mut Conn, a: &mut [Vec<u8>], unit: i64) {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &a[3..] {
        match opt.to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => {
                let opt = String::from_utf8_lossy(opt);
                return error(&mut c.out, &format!("ERR Unsupported option {opt}"));
            }
        }
    }
    if nx && (xx || gt || lt) {
        return error(
            &mut c.out,
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        );
    }
    if gt && lt {
        return error(
            &mut c.out,
            "ERR GT and LT options at the same time are not compatible",
        );
    }
    let Some(n) = parse_i64(&a[2]) else {
        return error(&mut c.out, NOT_INTEGER);
    };
    let now = now_ms();
    let Some(when) = n.checked_mul(unit).filter(|&w| w <= i64::MAX - now) else {
        let name = if unit == 1 { "pexpire" } else { "expire" };
        return error(
            &mut c.out,
            &format!("ERR invalid expire time in '{name}' command"),
        );
    };
    let when = when + now;
    let mut db = db(&c.shared);
    let Some(e) = db.get(&a[1]) else {
        return int(&mut c.out, 0);
    };
    let current = e.expires;
    let refused = (nx && current.is_some())
        || (xx && current.is_none())
        || (gt && current.is_none_or(|t| when <= t))
        || (lt && current.is_some_and(|t| when >= t));
    if refused {
        return int(&mut c.out, 0);
    }
    if when <= now {
        db.remove(&a[1]);
    } else {
        db.set_expiry(&a[1], Some(when));
    }
    int(&mut c.out, 1);
}

/// TTL (`unit` 1000, rounded) and PTTL (1).
fn ttl(c: &mut Conn, a: &mut [Vec<u8>], unit: i64) {
    let mut db = db(&c.shared);
    let reply = match db.get(&a[1]) {
        None => -2,
        Some(e) => match e.expires {
            None => -1,
            Some(t) => {
                let left = (t - now_ms()).max(0);
                if unit == 1 { left } else { (left + 500) / 1000 }
            }
        },
    };
    int(&mut c.out, reply);
}

fn persist(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut db = db(&c.shared);
    let had = db.get(&a[1]).is_some_and(|e| e.expires.is_some());
    if had {
        db.set_expiry(&a[1], None);
    }
    int(&mut c.out, had as i64);
}

// ----- lists -----------------------------------------------------------------

fn push(c: &mut Conn, a: &mut [Vec<u8>], left: bool) {
    let mut db = db(&c.shared);
    let e = db.get_or_insert(&a[1], || Value::List(VecDeque::new()));
    let Value::List(l) = &mut e.value else {
        return error(&mut c.out, WRONGTYPE);
    };
    for v in &mut a[2..] {
        let v = std::mem::take(v);
        if left {
            l.push_front(v);
        } else {
            l.push_back(v);
        }
    }
    int(&mut c.out, l.len() as i64);
}

fn pop(c: &mut Conn, a: &mut [Vec<u8>], left: bool) {
    if a.len() > 3 {
        return error(
            &mut c.out,
            &format!(
                "ERR wrong number of arguments for '{}' command",
                if left { "lpop" } else { "rpop" }
            ),
        );
    }
    let count = match a.get(2) {
        None => None,
        Some(n) => match parse_i64(n) {
            Some(n) if n >= 0 => Some(n as usize),
            _ => return error(&mut c.out, "ERR value is out of range, must be positive"),
        },
    };
    let mut db = db(&c.shared);
    let Some(e) = db.get(&a[1]) else {
        return if count.is_some() {
            array(&mut c.out, -1)
        } else {
            nil(&mut c.out)
        };
    };
    let Value::List(l) = &mut e.value else {
        return error(&mut c.out, WRONGTYPE);
    };
    if let Some(n) = count {
        array(&mut c.out, n.min(l.len()) as i64);
    }
    for _ in 0..count.unwrap_or(1).min(l.len()) {
        let v = if left { l.pop_front() } else { l.pop_back() };
        bulk(&mut c.out, &v.unwrap());
    }
    if l.is_empty() {
        db.remove(&a[1]);
    }
}

fn llen(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut db = db(&c.shared);
    match db.get(&a[1]).map(|e| &e.value) {
        None => int(&mut c.out, 0),
        Some(Value::List(l)) => int(&mut c.out, l.len() as i64),
        Some(Value::Str(_)) => error(&mut c.out, WRONGTYPE),
    }
}

fn lrange(c: &mut Conn, a: &mut [Vec<u8>]) {
    let (Some(mut start), Some(mut stop)) = (parse_i64(&a[2]), parse_i64(&a[3])) else {
        return error(&mut c.out, NOT_INTEGER);
    };
    let mut db = db(&c.shared);
    let l = match db.get(&a[1]).map(|e| &e.value) {
        None => return array(&mut c.out, 0),
        Some(Value::Str(_)) => return error(&mut c.out, WRONGTYPE),
        Some(Value::List(l)) => l,
    };
    let len = l.len() as i64;
    if start < 0 {
        start = (start + len).max(0);
    }
    if stop < 0 {
        stop += len;
    }
    if start > stop || start >= len {
        return array(&mut c.out, 0);
    }
    let stop = stop.min(len - 1);
    array(&mut c.out, stop - start + 1);
    for v in l.range(start as usize..=stop as usize) {
        bulk(&mut c.out, v);
    }
}

// ----- server ----------------------------------------------------------------

fn flushdb(c: &mut Conn, a: &mut [Vec<u8>]) {
    match a.get(1).map(|m| m.to_ascii_uppercase()) {
        None => {}
        Some(m) if a.len() == 2 && (m == b"SYNC" || m == b"ASYNC") => {}
        Some(_) => return error(&mut c.out, SYNTAX),
    }
    db(&c.shared).clear();
    simple(&mut c.out, "OK");
}

fn select(c: &mut Conn, a: &mut [Vec<u8>]) {
    match parse_i64(&a[1]) {
        None => error(&mut c.out, NOT_INTEGER),
        Some(0) => simple(&mut c.out, "OK"),
        Some(_) => error(&mut c.out, "ERR DB index is out of range"),
    }
}

/// `COMMAND`, `COMMAND COUNT`, `COMMAND DOCS`: enough for clients that ask
/// at connect time (redis-cli asks for DOCS to show hints).
fn command(c: &mut Conn, a: &mut [Vec<u8>]) {
    match a.get(1).map(|s| s.to_ascii_uppercase()).as_deref() {
        Some(b"COUNT") => int(&mut c.out, 40),
        _ => array(&mut c.out, 0),
    }
}

/// `CLIENT`: names are kept, other subcommands are acknowledged.
fn client(c: &mut Conn, a: &mut [Vec<u8>]) {
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
fn hello(c: &mut Conn, a: &mut [Vec<u8>]) {
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

/// `CONFIG GET` of what redis-benchmark asks for; `CONFIG SET` is refused.
fn config(c: &mut Conn, a: &mut [Vec<u8>]) {
    if !a[1].eq_ignore_ascii_case(b"GET") || a.len() < 3 {
        return error(&mut c.out, "ERR CONFIG is limited to GET here");
    }
    let known: &[(&str, &str)] = &[("save", ""), ("appendonly", "no"), ("databases", "1")];
    let found: Vec<_> = known
        .iter()
        .filter(|(k, _)| a[2..].iter().any(|p| p.eq_ignore_ascii_case(k.as_bytes())))
        .collect();
    array(&mut c.out, 2 * found.len() as i64);
    for (k, v) in found {
        bulk(&mut c.out, k.as_bytes());
        bulk(&mut c.out, v.as_bytes());
    }
}

/// `RESET`: the connection as new (no subscriptions, no name).
fn reset(c: &mut Conn, _: &mut [Vec<u8>]) {
    let mut reg = c.shared.pubsub.lock().unwrap_or_else(|e| e.into_inner());
    for ch in c.subscriptions.drain(..) {
        reg.remove(&ch, c.id);
    }
    drop(reg);
    c.name.clear();
    simple(&mut c.out, "RESET");
}

fn info(c: &mut Conn, _: &mut [Vec<u8>]) {
    let keys = db(&c.shared).len();
    let text = format!(
        "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\nserver:mini_redis (fibra)\r\n\r\n# Keyspace\r\ndb0:keys={keys},expires=0,avg_ttl=0\r\n"
    );
    bulk(&mut c.out, text.as_bytes());
}
