//! `examples/mini_redis` against the real thing, in both protocols.
//!
//! The differential test sends the same scripts over raw TCP to
//! `redis-server` and to `mini_redis` and compares the replies byte for byte
//! (error replies by their first word; differing error texts are printed).
//! It runs every script twice: over RESP2, and over RESP3, where each
//! connection first says `HELLO 3` — so nulls, maps, pushes and the rules
//! of a subscribed connection are compared in both shapes. Connection ids
//! (in `HELLO`'s map) are the one thing masked: they count the servers'
//! own connections.
//!
//! The data scripts are in `tests/util/mini_redis_scripts.rs`; the
//! session and protocol scripts here. Tests of mini_redis alone and with
//! client libraries: `tests/mini_redis_clients.rs`, `tests/mini_redis_py.rs`.
//!
//! Without `redis-server` (Debian package `redis-server`) the test says so
//! and passes, unless `FIBRA_REQUIRE_REDIS=1`.

#[path = "util/mini_redis.rs"]
mod mini;
#[path = "util/mini_redis_scripts.rs"]
mod scripts;

use std::time::Duration;

use mini::{Script, Session, connect, encode, mini_redis, redis_server, skip};

// ----- sessions and the protocol ------------------------------------------------

fn pipelined(s: &mut Session) {
    let mut c = s.connect();
    s.bin(&mut c, &[b"FLUSHDB"]);
    let mut batch = Vec::new();
    for i in 0..1000 {
        let n = i.to_string();
        let prev = (i / 2).to_string();
        batch.extend(match i % 5 {
            0 => encode(&[b"SET", format!("key:{n}").as_bytes(), n.as_bytes()]),
            1 => encode(&[b"GET", format!("key:{prev}").as_bytes()]),
            2 => encode(&[b"INCR", b"counter"]),
            3 => encode(&[b"RPUSH", b"plist", n.as_bytes()]),
            _ => encode(&[b"LPOP", b"plist"]),
        });
    }
    s.raw(&mut c, &batch, 1000);
    // The same again inline, and in pieces cut mid-command.
    let inline: Vec<u8> = (0..1000)
        .flat_map(|i| format!("INCRBY counter {i}\r\n").into_bytes())
        .collect();
    s.raw(&mut c, &inline, 1000);
    let mut pieces = Vec::new();
    for i in 0..200 {
        pieces.extend(encode(&[b"SET", format!("p{i}").as_bytes(), b"value"]));
        pieces.extend(encode(&[b"GET", format!("p{i}").as_bytes()]));
    }
    for chunk in pieces.chunks(777) {
        c.send(chunk);
        std::thread::sleep(Duration::from_millis(1));
    }
    for i in 0..400 {
        let reply = c.reply();
        s.record(format!("piece #{i}"), reply);
    }
    s.lines(&mut c, "DBSIZE\nLLEN plist\nGET counter");
}

fn inline(s: &mut Session) {
    let mut c = s.connect();
    s.raw(&mut c, b"FLUSHDB\r\n", 1);
    s.raw(&mut c, b"PING\r\n", 1);
    s.raw(&mut c, b"ping hi\r\n", 1);
    s.raw(&mut c, b"PING\n", 1);
    s.raw(&mut c, b"SET in \"a b\"\r\nGET in\r\n", 2);
    s.raw(&mut c, b"ECHO 'it\\'s'\r\n", 1);
    s.raw(&mut c, b"ECHO \"\\x41\\x4a\\n\\t\\\\z\\q\"\r\n", 1);
    s.raw(&mut c, b"ECHO \"\\xZZ\"\r\n", 1);
    s.raw(&mut c, b"\r\n\n   \r\nPING\n", 1);
    s.raw(&mut c, b"  EXISTS   in  in \t \r\n", 1);
    s.raw(&mut c, b"SET \"\" empty\r\nGET \"\"\r\n", 2);
    s.raw(&mut c, b"*0\r\n*-1\r\nPING\r\n", 1);
    s.raw(&mut c, b"$3\r\n", 1);
    s.raw(&mut c, b"*1\r\n$4\r\nPINGxy", 1);
    s.raw(&mut c, b"*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\n", 1);
    s.raw(&mut c, b"NOSUCH \"x\" 'y'\r\n", 1);
}

fn pubsub(s: &mut Session) {
    let mut sub = s.connect();
    let mut other = s.connect();
    let mut publ = s.connect();
    s.raw(&mut sub, &encode(&[b"SUBSCRIBE", b"news", b"sport"]), 2);
    s.raw(&mut other, &encode(&[b"SUBSCRIBE", b"news"]), 1);
    s.lines(&mut publ, "PUBLISH news hello\nPUBLISH nobody x");
    let m1 = sub.reply();
    s.record("sub gets news", m1);
    let m2 = other.reply();
    s.record("other gets news", m2);
    s.bin(&mut publ, &[b"PUBLISH", b"sport", b"bin\0\r\n"]);
    let m3 = sub.reply();
    s.record("sub gets sport", m3);
    s.lines(
        &mut sub,
        "PING
        PING msg
        GET k
        SET k v
        SUBSCRIBE news
        HELLO
        CLIENT GETNAME
        MULTI
        DISCARD",
    );
    // Publishing to itself: refused in RESP2; in RESP3 the message (a
    // push) comes before the reply.
    let replies = if s.proto == 3 { 2 } else { 1 };
    s.raw(&mut sub, &encode(&[b"PUBLISH", b"sport", b"self"]), replies);
    s.raw(&mut sub, &encode(&[b"UNSUBSCRIBE", b"news", b"nothere"]), 2);
    s.lines(&mut publ, "PUBLISH news x\nPUBLISH sport y");
    let m4 = sub.reply();
    s.record("sub gets sport again", m4);
    s.lines(&mut sub, "UNSUBSCRIBE\nUNSUBSCRIBE\nGET k\nPING");
    drop(other);
    // Each server notices it is gone once it reads the close: probed
    // unrecorded (a channel nobody else hears) until it counts no one.
    let gone_by = std::time::Instant::now() + Duration::from_secs(20);
    while publ.cmd_str("PUBLISH news probe") != b":0\r\n" {
        assert!(
            std::time::Instant::now() < gone_by,
            "the closed subscriber still counts"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    s.lines(&mut publ, "PUBLISH news gone");
    // Many messages in one go, then a pipelined mix on the subscriber.
    s.raw(&mut sub, &encode(&[b"SUBSCRIBE", b"bulk"]), 1);
    let burst: Vec<u8> = (0..500)
        .flat_map(|i| encode(&[b"PUBLISH", b"bulk", format!("m{i}").as_bytes()]))
        .collect();
    s.raw(&mut publ, &burst, 500);
    for i in 0..500 {
        let m = sub.reply();
        s.record(format!("burst #{i}"), m);
    }
    s.raw(&mut sub, b"SUBSCRIBE r\r\nRESET\r\nGET k\r\n", 3);
    s.lines(&mut publ, "PUBLISH r gone");
    s.raw(
        &mut sub,
        b"PING\r\nSUBSCRIBE a b\r\nUNSUBSCRIBE a\r\nQUIT\r\n",
        5,
    );
    let rest = sub.rest();
    s.record("after QUIT", rest);
}

fn protocol_errors(s: &mut Session) {
    let cases: &[&[u8]] = &[
        b"*abc\r\n",
        b"PING\r\n*abc\r\n",
        b"*1\r\n$-1\r\n",
        b"*1\r\n$abc\r\n",
        b"*1\r\n$536870913\r\n",
        b"*1\r\nx\r\n",
        b"*2\r\n$4\r\nECHO\r\n:5\r\n",
        b"*3000000000\r\n",
        b"*-\r\n",
        b"* 1\r\n",
        b"*01\r\n",
        b"*1\r\n$+4\r\n",
        b"SET a \"b\r\n",
        b"SET a \"b\"c\r\n",
        b"SET a 'b\r\n",
        b"PING\r\nGET\r\n*x\r\nPING\r\n",
        b"QUIT\r\nPING\r\n",
        b"*1\r\n$4\r\nQUIT\r\n",
    ];
    for case in cases {
        s.raw_to_close(case, false);
    }
    // Lines just past the 64 KiB limit (all sent, so no reset loses the reply).
    let mut long = vec![b'a'; 64 * 1024 + 1];
    s.raw_to_close(&long, false);
    long[0] = b'*';
    long[1..].fill(b'1');
    s.raw_to_close(&long, false);
    let mut bulk_count = b"*1\r\n".to_vec();
    bulk_count.push(b'$');
    bulk_count.extend(std::iter::repeat_n(b'1', 64 * 1024));
    s.raw_to_close(&bulk_count, false);
    // Cut short, then the client closes: nothing is answered.
    for case in [
        &b"*1\r\n$10\r\nabc"[..],
        b"*3\r\n$3\r\nSET\r\n",
        b"*2",
        b"PING",
        b"SET k \"v",
    ] {
        s.raw_to_close(case, true);
    }
}

/// HELLO in every form Redis takes or refuses, and the CLIENT calls
/// clients make when they connect.
fn handshake(s: &mut Session) {
    let mut c = s.connect();
    s.lines(
        &mut c,
        "HELLO
        HELLO 2
        GET missing
        CLIENT GETNAME
        HELLO 3
        GET missing
        LPOP missing 1
        CLIENT GETNAME
        HELLO
        HELLO 4
        HELLO 1
        HELLO 0
        HELLO -1
        HELLO x
        HELLO 03
        HELLO 9223372036854775808
        HELLO 3 AUTH
        HELLO 3 AUTH default
        HELLO 3 AUTH bob pw
        HELLO 3 AUTH Default pw
        HELLO 3 SETNAME
        HELLO 3 FOO
        HELLO 3 SETNAME nm FOO
        CLIENT GETNAME
        HELLO 2 SETNAME x AUTH bob pw
        CLIENT GETNAME
        HELLO 4 SETNAME zzz
        CLIENT GETNAME
        HELLO 2 AUTH default anything SETNAME n2
        CLIENT GETNAME
        GET missing
        HELLO 3 setname n3 auth default pw
        CLIENT GETNAME
        HELLO 3 SETNAME one SETNAME two
        CLIENT GETNAME
        CLIENT
        CLIENT ID x
        CLIENT GETNAME x
        CLIENT SETNAME
        CLIENT SETNAME a b
        CLIENT FOO
        client setname lower
        client getname
        CONFIG GET save
        CONFIG GET appendonly
        CONFIG GET nosuch
        COMMAND DOCS nosuch",
    );
    s.bin(&mut c, &[b"CLIENT", b"SETNAME", b"a b"]);
    s.bin(&mut c, &[b"CLIENT", b"SETNAME", b"a\nb"]);
    s.bin(&mut c, &[b"CLIENT", b"SETNAME", "\u{e9}".as_bytes()]);
    s.bin(&mut c, &[b"CLIENT", b"GETNAME"]);
    s.bin(&mut c, &[b"CLIENT", b"SETNAME", b""]);
    s.bin(&mut c, &[b"CLIENT", b"GETNAME"]);
    s.bin(&mut c, &[b"HELLO", b"3", b"SETNAME", b"a b"]);
    s.bin(&mut c, &[b"HELLO", b"", b"x"]);
    s.bin(&mut c, &[b"HELLO", b"3 "]);
    // RESET: back to RESP2, no name.
    s.lines(
        &mut c,
        "HELLO 3 SETNAME before
        RESET
        CLIENT GETNAME
        GET missing
        HELLO",
    );
}

/// MULTI / EXEC / DISCARD, what redis-py's default pipeline sends.
fn transactions(s: &mut Session) {
    let mut c = s.connect();
    s.lines(
        &mut c,
        "FLUSHDB
        EXEC
        DISCARD
        MULTI
        MULTI
        SET a 1
        GET a
        LPUSH a x
        INCR a
        GET missing
        LPOP missing 2
        EXEC
        GET a
        MULTI
        SET a 5
        NOSUCH x
        GET
        EXEC
        GET a
        MULTI
        SET b 2
        DISCARD
        GET b
        MULTI
        EXEC
        MULTI
        SET c 1
        RESET
        EXEC
        GET c
        MULTI
        PING
        ECHO hi
        CLIENT GETNAME
        CONFIG GET appendonly
        EXEC",
    );
    // A batch sent at once, as a pipeline sends it.
    let batch: Vec<u8> = [
        &[&b"MULTI"[..]][..],
        &[b"INCR", b"n"],
        &[b"INCR", b"n"],
        &[b"EXEC"],
    ]
    .iter()
    .flat_map(|args| encode(args))
    .collect();
    s.raw(&mut c, &batch, 4);
    // Subscribing inside a transaction: the subscriber's writer takes over
    // the socket in the middle of EXEC's reply.
    let mut publ = s.connect();
    let batch: Vec<u8> = [
        &[&b"MULTI"[..]][..],
        &[b"PING"],
        &[b"SUBSCRIBE", b"tx"],
        &[b"EXEC"],
    ]
    .iter()
    .flat_map(|args| encode(args))
    .collect();
    s.raw(&mut c, &batch, 4);
    s.lines(&mut publ, "PUBLISH tx m");
    let m = c.reply();
    s.record("message after EXEC", m);
    s.lines(&mut c, "UNSUBSCRIBE\nMULTI\nSET t v\nQUIT");
    s.lines(&mut publ, "GET t");
}

/// Compares two transcripts; error replies by their first word.
fn compare(script: &str, redis: &[(String, Vec<u8>)], mini: &[(String, Vec<u8>)]) -> Vec<String> {
    let mut failures = Vec::new();
    assert_eq!(redis.len(), mini.len(), "{script}: not as many replies");
    let show = |b: &[u8]| {
        let s = String::from_utf8_lossy(&b[..b.len().min(300)]).into_owned();
        if b.len() > 300 {
            format!("{s:?}... ({} bytes)", b.len())
        } else {
            format!("{s:?}")
        }
    };
    let same = redis
        .iter()
        .zip(mini)
        .filter(|((_, r), (_, m))| r == m)
        .count();
    println!(
        "{script}: {} replies compared, {same} identical",
        redis.len()
    );
    for ((what, r), (_, m)) in redis.iter().zip(mini) {
        let is_error = |b: &[u8]| b.first() == Some(&b'-');
        let first_word = |b: &[u8]| b.split(|&c| c == b' ').next().unwrap_or(b"").to_vec();
        if r == m {
            continue;
        }
        if is_error(r) && is_error(m) && first_word(r) == first_word(m) {
            println!(
                "note: {script}: {what}: error texts differ:\n  redis: {}\n  mini:  {}",
                show(r),
                show(m)
            );
            continue;
        }
        failures.push(format!(
            "{script}: {what}:\n  redis-server: {}\n  mini_redis:   {}",
            show(r),
            show(m)
        ));
    }
    failures
}

/// Where a reply carries a connection id (`HELLO`'s map), the id is
/// replaced: each server counts its own connections.
fn mask_ids(reply: &[u8]) -> Vec<u8> {
    const KEY: &[u8] = b"$2\r\nid\r\n:";
    let mut out = Vec::with_capacity(reply.len());
    let mut rest = reply;
    while let Some(i) = rest.windows(KEY.len()).position(|w| w == KEY) {
        out.extend_from_slice(&rest[..i + KEY.len()]);
        out.push(b'?');
        rest = &rest[i + KEY.len()..];
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        rest = &rest[digits..];
    }
    out.extend_from_slice(rest);
    out
}

/// Every script against both servers over protocol `proto`.
fn differential(proto: u8) {
    let test = format!("differential_against_redis_server_resp{proto}");
    let Some(redis) = redis_server() else {
        return skip(&test, "redis-server");
    };
    let mini = mini_redis();
    let all: &[(&str, Script)] = &[
        ("strings", scripts::strings),
        ("expiry", scripts::expiry),
        ("lists", scripts::lists),
        ("binary", scripts::binary),
        ("pipelined", pipelined),
        ("inline", inline),
        ("pubsub", pubsub),
        ("protocol_errors", protocol_errors),
        ("handshake", handshake),
        ("transactions", transactions),
    ];
    let mut failures = Vec::new();
    for (name, script) in all {
        let mut logs = [("redis-server", &redis), ("mini_redis", &mini)].map(|(who, server)| {
            eprintln!("{name} (RESP{proto}) against {who}");
            let mut s = Session {
                port: server.port,
                proto,
                log: Vec::new(),
            };
            script(&mut s);
            for (_, reply) in &mut s.log {
                *reply = mask_ids(reply);
            }
            s.log
        });
        let [r, m] = &mut logs;
        failures.extend(compare(&format!("{name} (RESP{proto})"), r, m));
    }
    // Both servers still serve after all of it.
    for server in [&redis, &mini] {
        assert_eq!(connect(server.port).cmd(&[b"PING"]), b"+PONG\r\n");
    }
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn differential_against_redis_server_resp2() {
    differential(2);
}

#[test]
fn differential_against_redis_server_resp3() {
    differential(3);
}
