//! `examples/mini_redis` alone and with client libraries.
//!
//! mini_redis alone: expiry on time, a client that vanishes mid-command, a
//! huge declared length that is never sent, a subscriber that never reads,
//! RESP3's handshake and replies that the differential test cannot compare
//! with redis-server 7.0 (connection ids, `CLIENT SETINFO`, which came in
//! 7.2, `CLIENT INFO`, `INFO`), malformed and oversized HELLO arguments.
//! With clients: the `redis` crate over RESP2 and RESP3, `redis-cli` (2 and
//! 3) and `redis-benchmark`. redis-py: `tests/mini_redis_py.rs`.
//!
//! Without `redis-tools` the tests that need it say so and pass, unless
//! `FIBRA_REQUIRE_REDIS=1`.

#[path = "util/mini_redis.rs"]
mod mini;

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use mini::{TIMEOUT, connect, connect_resp3, contains, encode, have, mini_redis, skip};

#[test]
fn keys_expire_on_time_without_being_touched() {
    let server = mini_redis();
    let mut c = connect(server.port);
    // Expiries long enough that the four round trips before the DBSIZE
    // come well inside them on a loaded machine.
    let t = Instant::now();
    assert_eq!(c.cmd_str("SET short v PX 500"), b"+OK\r\n");
    assert_eq!(c.cmd_str("SET list x"), b"+OK\r\n");
    assert_eq!(c.cmd_str("PEXPIRE list 800"), b":1\r\n");
    assert_eq!(c.cmd_str("SET long v EX 100"), b"+OK\r\n");
    assert_eq!(c.cmd_str("DBSIZE"), b":3\r\n");
    // Active expiry runs ten times a second: gone within ~200 ms of the
    // deadline, untouched.
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let n = c.cmd_str("DBSIZE");
        if n == b":1\r\n" {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "still {:?} keys",
            String::from_utf8_lossy(&n)
        );
    }
    assert!(t.elapsed() >= Duration::from_millis(800), "expired early");
    let pttl = String::from_utf8_lossy(&c.cmd_str("PTTL long")).into_owned();
    let pttl: i64 = pttl[1..].trim().parse().unwrap();
    assert!((90_000..=100_000).contains(&pttl), "PTTL {pttl}");
}

#[test]
fn a_client_vanishing_mid_command_costs_only_its_connection() {
    let server = mini_redis();
    let mut c = connect(server.port);
    assert_eq!(c.cmd_str("SET k before"), b"+OK\r\n");
    // Half a command, then gone.
    for half in [
        &b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\nabc"[..],
        b"*3\r\n$3\r\nSET\r\n$1\r\nk",
        b"*3\r\n$3\r\nSE",
        b"SET k \"never",
    ] {
        let mut gone = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        gone.write_all(half).unwrap();
        drop(gone);
    }
    // One that pipelines a lot and never reads its replies, then resets.
    let mut flood = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let big = encode(&[b"SET", b"big", &vec![b'x'; 256 * 1024]]);
    flood.write_all(&big).unwrap();
    let gets: Vec<u8> = (0..200).flat_map(|_| encode(&[b"GET", b"big"])).collect();
    flood.write_all(&gets).unwrap();
    // Reset only once the SET is in (a reset discards what the server has
    // not read yet).
    let t = Instant::now();
    while c.cmd_str("STRLEN big") != b":262144\r\n" {
        assert!(t.elapsed() < TIMEOUT, "the big SET never landed");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(flood);
    // A subscriber that vanishes.
    let mut sub = connect(server.port);
    sub.send(&encode(&[b"SUBSCRIBE", b"ch"]));
    sub.reply();
    drop(sub);
    // The server finds the subscriber gone when it reads its close.
    let t = Instant::now();
    while c.cmd_str("PUBLISH ch x") != b":0\r\n" {
        assert!(
            t.elapsed() < TIMEOUT,
            "the vanished subscriber still counts"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(c.cmd_str("GET k"), b"$6\r\nbefore\r\n");
    assert_eq!(c.cmd_str("DBSIZE"), b":2\r\n");
    assert_eq!(c.cmd_str("STRLEN big"), b":262144\r\n");
    let mut fresh = connect(server.port);
    assert_eq!(fresh.cmd_str("PING"), b"+PONG\r\n");
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn declared_lengths_not_sent_cost_no_memory() {
    let server = mini_redis();
    let pid = server.child.id();
    let mut c = connect(server.port);
    assert_eq!(c.cmd_str("PING"), b"+PONG\r\n");
    let before = rss_kib(pid);
    // 40 clients each declare 512 MB (and 2^31-1 arguments) and send a little.
    let mut idle = Vec::new();
    for i in 0..40 {
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        let claim: &[u8] = if i % 2 == 0 {
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$536870912\r\nsome bytes"
        } else {
            b"*2147483647\r\n$3\r\nSET\r\n$1\r\nk\r\n"
        };
        s.write_all(claim).unwrap();
        idle.push(s);
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.cmd_str("PING"), b"+PONG\r\n");
    let after = rss_kib(pid);
    assert!(
        after < before + 16 * 1024,
        "RSS grew from {before} KiB to {after} KiB for lengths never sent"
    );
    // A bulk that does arrive is taken whole.
    let v = vec![b'v'; 3 * 1024 * 1024];
    assert_eq!(c.cmd(&[b"SET", b"k", &v]), b"+OK\r\n");
    assert_eq!(c.cmd_str("STRLEN k"), b":3145728\r\n");
}

#[test]
fn a_subscriber_that_never_reads_is_cut_off() {
    let server = mini_redis();
    let pid = server.child.id();
    let mut c = connect(server.port);
    let before = rss_kib(pid);
    let mut sub = connect(server.port);
    sub.send(&encode(&[b"SUBSCRIBE", b"firehose"]));
    sub.reply();
    // 96 MiB published to a subscriber that reads nothing: past 32 MiB
    // waiting (plus what the socket buffers hold) it is disconnected.
    let message = vec![b'm'; 1024 * 1024];
    let mut reached = Vec::new();
    for _ in 0..96 {
        let reply = c.cmd(&[b"PUBLISH", b"firehose", &message]);
        reached.push(reply == b":1\r\n");
    }
    let delivered = reached.iter().take_while(|&&r| r).count();
    assert!(
        (16..90).contains(&delivered) && reached[delivered..].iter().all(|&r| !r),
        "delivered to the slow subscriber: {reached:?}"
    );
    let after = rss_kib(pid);
    // Under AddressSanitizer freed memory waits in ASan's quarantine
    // (256 MiB by default) instead of going back: RSS measures that there.
    if !cfg!(fibra_asan) {
        assert!(
            after < before + 80 * 1024,
            "RSS grew from {before} KiB to {after} KiB"
        );
    }
    assert_eq!(c.cmd_str("PING"), b"+PONG\r\n");
    // The subscriber finds its connection closed after what was queued.
    sub.w.set_read_timeout(Some(TIMEOUT)).unwrap();
    let rest = sub.rest();
    assert!(rest.len() < 40 * 1024 * 1024, "{} bytes", rest.len());
}

// ----- RESP3 beyond what redis-server 7.0 can be compared on -------------------

/// The integer after `:` in a reply such as `:12\r\n`.
fn int_reply(reply: &[u8]) -> i64 {
    let text = String::from_utf8_lossy(reply);
    assert!(text.starts_with(':'), "not an integer: {text:?}");
    text[1..].trim_end().parse().unwrap()
}

/// A verbatim string's text, its length checked: `=<n>\r\ntxt:<text>\r\n`.
fn verbatim_text(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply).into_owned();
    let (head, body) = text.split_once("\r\n").unwrap();
    assert!(head.starts_with('='), "not a verbatim string: {text:?}");
    let len: usize = head[1..].parse().unwrap();
    let body = body.strip_suffix("\r\n").unwrap();
    assert_eq!(body.len(), len, "{text:?}");
    body.strip_prefix("txt:").unwrap().to_string()
}

#[test]
fn resp3_handshake_client_info_and_setinfo() {
    let server = mini_redis();
    let mut c = connect(server.port);
    let hello = c.cmd_str("HELLO 3 SETNAME tester");
    let id = int_reply(&c.cmd_str("CLIENT ID"));
    assert!(
        contains(&hello, format!("$2\r\nid\r\n:{id}\r\n").as_bytes()),
        "HELLO's id is not CLIENT ID's ({id}): {:?}",
        String::from_utf8_lossy(&hello)
    );
    // What redis-py and the redis crate send when they connect (Redis 7.2's).
    assert_eq!(c.cmd_str("CLIENT SETINFO LIB-NAME redis-py"), b"+OK\r\n");
    assert_eq!(c.cmd_str("CLIENT SETINFO lib-ver 8.1.0"), b"+OK\r\n");
    assert_eq!(
        c.cmd_str("CLIENT SETINFO LIB-COLOUR blue"),
        b"-ERR Unrecognized option 'LIB-COLOUR'\r\n"
    );
    assert_eq!(
        c.cmd(&[b"CLIENT", b"SETINFO", b"LIB-VER", b"8 1"]),
        b"-ERR lib-ver cannot contain spaces, newlines or special characters.\r\n"
    );
    assert_eq!(
        c.cmd_str("CLIENT SETINFO LIB-NAME"),
        b"-ERR wrong number of arguments for 'client|setinfo' command\r\n"
    );
    // Text for people is a verbatim string in RESP3, a bulk string in RESP2.
    let info = verbatim_text(&c.cmd_str("CLIENT INFO"));
    for field in [
        format!("id={id} "),
        " name=tester ".into(),
        " resp=3 ".into(),
        " lib-name=redis-py lib-ver=8.1.0\n".into(),
    ] {
        assert!(info.contains(&field), "{field:?} not in {info:?}");
    }
    assert!(
        info.starts_with(&format!("id={id} addr=127.0.0.1:")),
        "{info:?}"
    );
    let text = verbatim_text(&c.cmd_str("INFO"));
    assert!(text.starts_with("# Server\r\nredis_version:"), "{text:?}");
    assert!(c.cmd_str("HELLO 2").starts_with(b"*14\r\n"));
    let info = c.cmd_str("CLIENT INFO");
    assert!(
        info.starts_with(b"$") && contains(&info, b" resp=2 "),
        "{:?}",
        String::from_utf8_lossy(&info)
    );
    // A subcommand Redis 7 does not know is refused as it refuses it
    // (redis-py 8 asks for maintenance notifications and takes the refusal).
    assert_eq!(
        c.cmd_str("CLIENT MAINT_NOTIFICATIONS ON"),
        b"-ERR unknown subcommand 'MAINT_NOTIFICATIONS'. Try CLIENT HELP.\r\n"
    );
    assert!(c.cmd_str("CLIENT HELP").starts_with(b"*"));
    // A RESP3 subscriber runs any command; its messages are pushes.
    let mut sub = connect_resp3(server.port);
    assert_eq!(
        sub.cmd_str("SUBSCRIBE ch"),
        b">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
    );
    assert_eq!(c.cmd_str("PUBLISH ch hi"), b":1\r\n");
    assert_eq!(
        sub.reply(),
        b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"
    );
    assert_eq!(sub.cmd_str("GET missing"), b"_\r\n");
    let info = verbatim_text(&sub.cmd_str("CLIENT INFO"));
    assert!(
        info.contains(" flags=P ") && info.contains(" sub=1 "),
        "{info:?}"
    );
    // HELLO 2 while subscribed: RESP2's rules and shapes from then on.
    assert!(sub.cmd_str("HELLO 2").starts_with(b"*14\r\n"));
    assert_eq!(c.cmd_str("PUBLISH ch again"), b":1\r\n");
    assert_eq!(
        sub.reply(),
        b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nagain\r\n"
    );
    assert!(
        sub.cmd_str("GET missing")
            .starts_with(b"-ERR Can't execute 'get'")
    );
}

#[test]
fn malformed_and_oversized_hello_arguments_are_errors() {
    let server = mini_redis();
    let mut c = connect(server.port);
    let short_error = |reply: &[u8], start: &[u8]| {
        assert!(
            reply.starts_with(start) && reply.len() < 400,
            "{:?}",
            String::from_utf8_lossy(&reply[..reply.len().min(200)])
        );
    };
    let mib = 1 << 20;
    let digits = vec![b'9'; mib];
    short_error(
        &c.cmd(&[b"HELLO", &digits]),
        b"-ERR Protocol version is not an integer or out of range\r\n",
    );
    short_error(
        &c.cmd(&[b"HELLO", b"3\0"]),
        b"-ERR Protocol version is not an integer or out of range",
    );
    short_error(
        &c.cmd(&[b"HELLO", b"\r\n"]),
        b"-ERR Protocol version is not an integer or out of range",
    );
    let option = vec![b'x'; mib];
    short_error(
        &c.cmd(&[b"HELLO", b"3", &option]),
        b"-ERR Syntax error in HELLO option 'xxx",
    );
    short_error(
        &c.cmd(&[b"HELLO", b"3", b"SETNAME", b"bad\r\nname"]),
        b"-ERR Client names cannot contain spaces",
    );
    let mut spaced = vec![b'n'; mib];
    spaced[mib / 2] = b' ';
    short_error(
        &c.cmd(&[b"HELLO", b"3", b"SETNAME", &spaced]),
        b"-ERR Client names cannot contain spaces",
    );
    // Nothing changed by the refusals: still RESP2, no name.
    assert_eq!(c.cmd_str("CLIENT GETNAME"), b"$-1\r\n");
    // Big but valid: taken whole.
    let name = vec![b'n'; mib];
    let password = vec![b'p'; 5 * mib];
    let hello = c.cmd(&[
        b"HELLO", b"3", b"AUTH", b"default", &password, b"SETNAME", &name,
    ]);
    assert!(hello.starts_with(b"%7\r\n"));
    let got = c.cmd_str("CLIENT GETNAME");
    assert_eq!(
        got.len(),
        mib + 12,
        "{:?}",
        String::from_utf8_lossy(&got[..20])
    );
    // Thousands of options: each is read, the last name wins.
    let mut many: Vec<&[u8]> = vec![b"HELLO", b"3"];
    for _ in 0..10_000 {
        many.extend_from_slice(&[b"SETNAME", b"again"]);
    }
    assert!(c.cmd(&many).starts_with(b"%7\r\n"));
    assert_eq!(c.cmd_str("CLIENT GETNAME"), b"$5\r\nagain\r\n");
    short_error(
        &c.cmd(&[b"CLIENT", &option]),
        b"-ERR unknown subcommand 'xxx",
    );
    assert_eq!(
        c.cmd(&[b"CLIENT", b"SETINFO", b"LIB-NAME", &name]),
        b"+OK\r\n"
    );
    // A RESP2 subscriber names a refused container command with its
    // subcommand, quoted short.
    let mut sub = connect(server.port);
    sub.cmd_str("SUBSCRIBE ch");
    short_error(
        &sub.cmd(&[b"CLIENT", &option]),
        b"-ERR Can't execute 'client|xxx",
    );
    assert_eq!(c.cmd_str("PING"), b"+PONG\r\n");
    assert_eq!(sub.cmd_str("PING"), b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
}

// ----- the redis crate ------------------------------------------------------------

/// The same session over either protocol (`resp2` or `resp3`): commands,
/// a pipeline and a transaction, `CONFIG GET` as a map, and pub/sub —
/// RESP3's over pushes on a connection that keeps running commands.
fn redis_crate_session(protocol: &str) {
    use redis::Commands;
    let server = mini_redis();
    let url = format!("redis://127.0.0.1:{}/?protocol={protocol}", server.port);
    let client = redis::Client::open(url).unwrap();
    let mut con = client.get_connection_with_timeout(TIMEOUT).unwrap();
    con.set_read_timeout(Some(TIMEOUT)).unwrap();
    let _: () = con.set("greeting", "hello").unwrap();
    let got: String = con.get("greeting").unwrap();
    assert_eq!(got, "hello");
    let missing: Option<String> = con.get("nope").unwrap();
    assert_eq!(missing, None);
    assert_eq!(con.incr::<_, _, i64>("n", 5).unwrap(), 5);
    assert_eq!(con.decr::<_, _, i64>("n", 2).unwrap(), 3);
    let _: () = con.set_ex("ttl", "x", 100).unwrap();
    assert_eq!(con.ttl::<_, i64>("ttl").unwrap(), 100);
    assert_eq!(con.rpush::<_, _, i64>("l", &[1, 2, 3]).unwrap(), 3);
    assert_eq!(
        con.lrange::<_, Vec<i64>>("l", 0, -1).unwrap(),
        vec![1, 2, 3]
    );
    assert_eq!(con.lpop::<_, Option<i64>>("l", None).unwrap(), Some(1));
    let err = con.incr::<_, _, i64>("greeting", 1).unwrap_err();
    assert!(err.to_string().contains("not an integer"), "{err}");
    let (a, b): (String, i64) = redis::pipe()
        .set("p", "q")
        .ignore()
        .get("p")
        .llen("l")
        .query(&mut con)
        .unwrap();
    assert_eq!((a.as_str(), b), ("q", 2));
    let (n, m): (i64, i64) = redis::pipe()
        .atomic()
        .incr("tx", 1)
        .incr("tx", 2)
        .query(&mut con)
        .unwrap();
    assert_eq!((n, m), (1, 3));
    let values: Vec<Option<String>> = con.mget(&["greeting", "nope", "p"]).unwrap();
    assert_eq!(values, vec![Some("hello".into()), None, Some("q".into())]);
    let config: std::collections::HashMap<String, String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .query(&mut con)
        .unwrap();
    assert_eq!(config.get("appendonly").map(String::as_str), Some("no"));
    let info: String = redis::cmd("CLIENT").arg("INFO").query(&mut con).unwrap();
    let resp = if protocol == "resp3" { 3 } else { 2 };
    assert!(
        info.contains(" lib-name=redis-rs ") && info.contains(&format!(" resp={resp} ")),
        "{info}"
    );

    let mut subscriber = client.get_connection_with_timeout(TIMEOUT).unwrap();
    subscriber.set_read_timeout(Some(TIMEOUT)).unwrap();
    if protocol == "resp3" {
        let (tx, rx) = std::sync::mpsc::channel();
        subscriber.set_push_sender(tx);
        subscriber.subscribe_resp3("news").unwrap();
        // Still a normal connection: replies and pushes told apart.
        let _: () = subscriber.set("from-subscriber", 1).unwrap();
        assert_eq!(con.publish::<_, _, i64>("news", "fibers").unwrap(), 1);
        let got: i64 = subscriber.get("from-subscriber").unwrap();
        assert_eq!(got, 1);
        let mut kinds = Vec::new();
        loop {
            let push = rx.recv_timeout(TIMEOUT).expect("no message pushed");
            kinds.push(push.kind.clone());
            if push.kind == redis::PushKind::Message {
                let data: Vec<String> = push
                    .data
                    .iter()
                    .map(|v| redis::from_redis_value_ref(v).unwrap())
                    .collect();
                assert_eq!(data, ["news", "fibers"]);
                break;
            }
        }
        assert_eq!(kinds[0], redis::PushKind::Subscribe, "{kinds:?}");
    } else {
        let mut pubsub = subscriber.as_pubsub();
        pubsub.set_read_timeout(Some(TIMEOUT)).unwrap();
        pubsub.subscribe("news").unwrap();
        assert_eq!(con.publish::<_, _, i64>("news", "fibers").unwrap(), 1);
        let msg = pubsub.get_message().unwrap();
        assert_eq!(msg.get_channel_name(), "news");
        assert_eq!(msg.get_payload::<String>().unwrap(), "fibers");
    }
}

#[test]
fn the_redis_crate_talks_to_mini_redis_resp2() {
    redis_crate_session("resp2");
}

#[test]
fn the_redis_crate_talks_to_mini_redis_resp3() {
    redis_crate_session("resp3");
}

#[test]
fn redis_cli_and_redis_benchmark_run_clean() {
    if !have("redis-cli") || !have("redis-benchmark") {
        return skip(
            "redis_cli_and_redis_benchmark_run_clean",
            "redis-cli / redis-benchmark",
        );
    }
    let server = mini_redis();
    let port = server.port.to_string();
    let cli = |args: &[&str]| {
        let out = Command::new("redis-cli")
            .args(["-p", &port])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(cli(&["PING"]), "PONG");
    assert_eq!(cli(&["SET", "cli", "hello world"]), "OK");
    assert_eq!(cli(&["GET", "cli"]), "hello world");
    assert_eq!(cli(&["RPUSH", "cl", "a", "b"]), "2");
    assert_eq!(cli(&["LRANGE", "cl", "0", "-1"]), "a\nb");
    assert_eq!(cli(&["INFO"]).lines().next(), Some("# Server"));
    // RESP3 (`-3`): a map prints as "key value" lines, a null as nothing.
    assert_eq!(cli(&["-3", "CONFIG", "GET", "appendonly"]), "appendonly no");
    assert_eq!(cli(&["CONFIG", "GET", "appendonly"]), "appendonly\nno");
    assert_eq!(cli(&["-3", "GET", "missing"]), "");
    assert_eq!(cli(&["-3", "GET", "cli"]), "hello world");
    assert!(cli(&["-3", "HELLO"]).contains("proto 3"));
    assert_eq!(cli(&["-3", "INFO"]).lines().next(), Some("# Server"));
    let out = Command::new("timeout")
        .args(["120", "redis-benchmark", "-p", &port])
        .args(["-n", "2000", "-q", "-t", "ping,set,get,lpush,lpop"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "redis-benchmark failed: {stdout}\n{stderr}"
    );
    assert!(
        !stderr.contains("ERR") && !stderr.contains("rror"),
        "{stderr}"
    );
    for test in ["PING_INLINE", "PING_MBULK", "SET", "GET", "LPUSH", "LPOP"] {
        assert!(
            stdout.contains(&format!("{test}: ")) && !stdout.contains("rror"),
            "{test} missing or failed: {stdout}"
        );
    }
    // And with pipelining.
    let out = Command::new("timeout")
        .args(["120", "redis-benchmark", "-p", &port])
        .args(["-n", "2000", "-q", "-P", "16", "-t", "set,get"])
        .output()
        .unwrap();
    assert!(
        out.status.success() && !String::from_utf8_lossy(&out.stderr).contains("rror"),
        "{out:?}"
    );
}
