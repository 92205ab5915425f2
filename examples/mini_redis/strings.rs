//! String commands: GET, SET and its variants, counters, APPEND, MGET, MSET.

use crate::Conn;
use crate::commands::{NOT_INTEGER, SYNTAX, WRONGTYPE, db};
use crate::db::{Value, now_ms};
use crate::resp::{array, bulk, error, int, null, parse_i64, simple};

pub fn get(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut db = db(&c.shared);
    match db.get(&a[1]) {
        None => null(&mut c.out, c.proto),
        Some(e) => match &e.value {
            Value::Str(s) => bulk(&mut c.out, s),
            Value::List(_) => error(&mut c.out, WRONGTYPE),
        },
    }
}

pub fn set(c: &mut Conn, a: &mut [Vec<u8>]) {
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
        null(&mut c.out, c.proto);
    }
    if (nx && exists) || (xx && !exists) {
        if !get {
            null(&mut c.out, c.proto);
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
pub fn set_ex(c: &mut Conn, a: &mut [Vec<u8>], unit: i64) {
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

pub fn set_nx(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut db = db(&c.shared);
    let fresh = !db.contains(&a[1]);
    if fresh {
        let value = std::mem::take(&mut a[2]);
        db.set(&a[1], Value::Str(value), None);
    }
    int(&mut c.out, fresh as i64);
}

pub fn decr_by(c: &mut Conn, a: &mut [Vec<u8>]) {
    match parse_i64(&a[2]) {
        Some(i64::MIN) => error(&mut c.out, "ERR decrement would overflow"),
        n => incr_by(c, a, n.map(|n| -n)),
    }
}

pub fn incr_by(c: &mut Conn, a: &mut [Vec<u8>], by: Option<i64>) {
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

pub fn append(c: &mut Conn, a: &mut [Vec<u8>]) {
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

pub fn strlen(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut db = db(&c.shared);
    match db.get(&a[1]).map(|e| &e.value) {
        None => int(&mut c.out, 0),
        Some(Value::Str(s)) => int(&mut c.out, s.len() as i64),
        Some(Value::List(_)) => error(&mut c.out, WRONGTYPE),
    }
}

pub fn mget(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut db = db(&c.shared);
    array(&mut c.out, a.len() as i64 - 1);
    for k in &a[1..] {
        match db.get(k).map(|e| &e.value) {
            Some(Value::Str(s)) => bulk(&mut c.out, s),
            _ => null(&mut c.out, c.proto),
        }
    }
}

pub fn mset(c: &mut Conn, a: &mut [Vec<u8>]) {
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
