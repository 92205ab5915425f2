//! List commands.

use std::collections::VecDeque;

use crate::Conn;
use crate::commands::{NOT_INTEGER, WRONGTYPE, db};
use crate::db::Value;
use crate::resp::{array, bulk, error, int, null, null_array, parse_i64};

pub fn push(c: &mut Conn, a: &mut [Vec<u8>], left: bool) {
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

pub fn pop(c: &mut Conn, a: &mut [Vec<u8>], left: bool) {
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
            null_array(&mut c.out, c.proto)
        } else {
            null(&mut c.out, c.proto)
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

pub fn llen(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut db = db(&c.shared);
    match db.get(&a[1]).map(|e| &e.value) {
        None => int(&mut c.out, 0),
        Some(Value::List(l)) => int(&mut c.out, l.len() as i64),
        Some(Value::Str(_)) => error(&mut c.out, WRONGTYPE),
    }
}

pub fn lrange(c: &mut Conn, a: &mut [Vec<u8>]) {
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
