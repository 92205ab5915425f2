//! The differential test's scripts on data: strings, expiry, lists and
//! binary-safe values. Each runs once against redis-server and once against
//! mini_redis, in RESP2 and again in RESP3 (`tests/mini_redis.rs`), so
//! every reply here is also checked in both protocols' shapes: nulls,
//! arrays, errors.

use std::time::Duration;

use crate::mini::Session;

pub fn strings(s: &mut Session) {
    let mut c = s.connect();
    s.lines(
        &mut c,
        "FLUSHDB
        PING
        PING hello
        ping
        PiNg
        ECHO hi
        GET missing
        SET k v
        GET k
        SET k v2 NX
        GET k
        SET k v3 XX
        GET k
        SET new v XX
        SET new v NX
        SET k v NX XX
        SET k v EX 0
        SET k v EX -5
        SET k v EX abc
        SET k v PX 10 EX 10
        SET k v EX 10 KEEPTTL
        SET k v KEEPTTL
        SET k v4 GET
        SET fresh v GET
        SET k v foo
        SET k
        SET k v EX
        SET k v EX 9223372036854775807
        SETEX sx 100 v
        TTL sx
        SETEX sx 0 v
        SETEX sx abc v
        PSETEX psx 100000 v
        TTL psx
        PSETEX psx -1 v
        SETNX sx other
        SETNX snx v
        GET snx
        STRLEN k
        STRLEN missing
        APPEND k xyz
        APPEND appended abc
        GET k
        GET appended
        DEL k new missing
        DEL k
        EXISTS appended appended missing fresh
        MSET a 1 b 2 c 3
        MGET a b missing c
        MSET a
        MSET a 1 b
        INCR cnt
        INCR cnt
        INCRBY cnt 10
        INCRBY cnt -3
        DECR cnt
        DECRBY cnt 5
        GET cnt
        INCRBY cnt abc
        INCRBY cnt 1.5
        DECRBY cnt 01
        INCR a
        SET t text
        INCR t
        SET t 01
        INCR t
        SET t -0
        INCR t
        SET t 123456789012345678901
        INCR t
        SET big 9223372036854775807
        INCR big
        DECRBY big -1
        INCRBY big -9223372036854775807
        GET big
        SET small -9223372036854775808
        DECR small
        DECRBY small -9223372036854775808
        DECRBY small 1
        INCRBY small 9223372036854775807
        GET small
        DBSIZE
        NOSUCHCOMMAND a b
        nosuch
        GET a b
        ECHO
        GET
        SELECT 0
        SELECT x
        PING a b
        FLUSHDB
        DBSIZE
        GET a",
    );
}

pub fn expiry(s: &mut Session) {
    let mut c = s.connect();
    s.lines(
        &mut c,
        "FLUSHDB
        SET e v EX 100
        TTL e
        PERSIST e
        TTL e
        PTTL e
        PERSIST e
        PERSIST missing
        TTL missing
        PTTL missing
        EXPIRE e 100
        TTL e
        EXPIRE e 100 NX
        EXPIRE e 200 XX
        TTL e
        EXPIRE e 50 GT
        EXPIRE e 50 LT
        TTL e
        EXPIRE e 300 gt
        TTL e
        EXPIRE e 10 foo
        EXPIRE e 10 NX XX
        EXPIRE e 10 GT LT
        EXPIRE e abc
        EXPIRE missing 10
        EXPIRE e 9223372036854775807
        PEXPIRE e 9223372036854775807
        PEXPIRE e 100000
        TTL e
        SET plain v
        EXPIRE plain 10 XX
        EXPIRE plain 10 GT
        EXPIRE plain 10 LT
        TTL plain
        EXPIRE e -1
        EXISTS e
        TTL e
        SET e v EX 100
        PEXPIRE e 0
        EXISTS e
        SET kt v EX 100
        SET kt v2 KEEPTTL
        TTL kt
        GET kt
        SET kt v3
        TTL kt
        SET p v PX 100
        SET r 5 PX 100
        RPUSH lst a
        PEXPIRE lst 100
        SET q v
        PEXPIRE q 100",
    );
    std::thread::sleep(Duration::from_millis(400));
    s.lines(
        &mut c,
        "GET p
        EXISTS p r lst q
        TTL p
        PTTL q
        INCR r
        LLEN lst
        LPUSH lst b
        LRANGE lst 0 -1
        APPEND q x
        GET q
        DBSIZE",
    );
}

pub fn lists(s: &mut Session) {
    let mut c = s.connect();
    s.lines(
        &mut c,
        "FLUSHDB
        RPUSH l a b c
        LPUSH l x y
        LRANGE l 0 -1
        LRANGE l -2 -1
        LRANGE l -100 100
        LRANGE l 3 1
        LRANGE l 10 20
        LRANGE l 0 0
        LRANGE l -1 -1
        LRANGE l -5 -5
        LRANGE l -6 -6
        LRANGE l 2 -3
        LRANGE l 0 -100
        LRANGE l a b
        LRANGE missing 0 -1
        LLEN l
        LLEN missing
        LPOP l
        RPOP l
        LPOP l 2
        RPOP l 0
        LPOP l -1
        LPOP l x
        LPOP l 1 2
        LPOP l 100
        LLEN l
        EXISTS l
        LPOP l
        LPOP l 2
        RPOP missing 1
        RPOP missing
        RPUSH l only
        RPOP l 5
        SET s str
        RPUSH lst 1
        GET lst
        LPUSH s x
        RPUSH s x
        LRANGE s 0 -1
        LLEN s
        LPOP s
        INCR lst
        APPEND lst x
        STRLEN lst
        MGET s lst missing
        SET k v GET
        SET lst v GET
        SET lst v
        GET lst
        LPUSH
        LRANGE l 0
        DBSIZE",
    );
}

pub fn binary(s: &mut Session) {
    let mut c = s.connect();
    let key: &[u8] = b"k\r\n\0x y";
    let value: &[u8] = b"v\0\r\n\r\nend\r\n";
    s.bin(&mut c, &[b"FLUSHDB"]);
    s.bin(&mut c, &[b"SET", key, value]);
    s.bin(&mut c, &[b"GET", key]);
    s.bin(&mut c, &[b"STRLEN", key]);
    s.bin(&mut c, &[b"APPEND", key, b"\0\0\r"]);
    s.bin(&mut c, &[b"GET", key]);
    s.bin(&mut c, &[b"ECHO", value]);
    s.bin(&mut c, &[b"ECHO", b""]);
    s.bin(&mut c, &[b"SET", b"", b""]);
    s.bin(&mut c, &[b"GET", b""]);
    s.bin(&mut c, &[b"RPUSH", b"bl", value, b"", key]);
    s.bin(&mut c, &[b"LRANGE", b"bl", b"0", b"-1"]);
    s.bin(&mut c, &[b"MGET", key, b"", b"bl"]);
    s.bin(&mut c, &[b"EXISTS", key, b"", b"bl", b"k"]);
    s.bin(&mut c, &[b"GET\r\n", b"x"]);
    let big: Vec<u8> = (0..1024 * 1024u32)
        .map(|i| (i * 7 + i / 251) as u8)
        .collect();
    s.bin(&mut c, &[b"SET", b"big", &big]);
    s.bin(&mut c, &[b"GET", b"big"]);
    s.bin(&mut c, &[b"STRLEN", b"big"]);
    s.bin(&mut c, &[b"APPEND", b"big", b"tail"]);
    s.bin(&mut c, &[b"ECHO", &big]);
    s.bin(&mut c, &[b"DEL", b"big"]);
    s.bin(&mut c, &[b"DBSIZE"]);
}
