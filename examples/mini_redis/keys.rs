//! Commands on keys of any type: DEL, EXISTS, and their expiry.

use crate::Conn;
use crate::commands::{NOT_INTEGER, db};
use crate::db::now_ms;
use crate::resp::{error, int, parse_i64};

pub fn del(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut db = db(&c.shared);
    let n = a[1..].iter().filter(|k| db.remove(k)).count();
    int(&mut c.out, n as i64);
}

pub fn exists(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut db = db(&c.shared);
    let n = a[1..].iter().filter(|k| db.contains(k)).count();
    int(&mut c.out, n as i64);
}

/// EXPIRE (`unit` 1000) and PEXPIRE (1), with NX / XX / GT / LT.
pub fn expire(c: &mut Conn, a: &mut [Vec<u8>], unit: i64) {
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
pub fn ttl(c: &mut Conn, a: &mut [Vec<u8>], unit: i64) {
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

pub fn persist(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut db = db(&c.shared);
    let had = db.get(&a[1]).is_some_and(|e| e.expires.is_some());
    if had {
        db.set_expiry(&a[1], None);
    }
    int(&mut c.out, had as i64);
}
