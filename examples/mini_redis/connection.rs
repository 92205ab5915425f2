//! The connection's own commands: PING, ECHO, SELECT, HELLO, CLIENT,
//! RESET — what client libraries send when they connect.
//!
//! `HELLO` picks the reply protocol, RESP2 or RESP3, and may log in and
//! name the connection on the way. There are no users or passwords here:
//! the one user is `default`, who needs no password (Redis's `nopass`, its
//! state out of the box), so `AUTH default <anything>` succeeds and any
//! other user is refused as Redis refuses an unknown one.

use std::fmt::Write as _;
use std::os::fd::AsRawFd;

use crate::Conn;
use crate::commands::{NOT_INTEGER, shown};
use crate::resp::{Proto, array, bulk, error, int, map, null, parse_i64, simple, verbatim};

pub fn ping(c: &mut Conn, a: &mut [Vec<u8>]) {
    if a.len() > 2 {
        return error(
            &mut c.out,
            "ERR wrong number of arguments for 'ping' command",
        );
    }
    if !c.subscriptions.is_empty() && c.proto == Proto::Resp2 {
        // A RESP2 subscriber's PING is answered in the shape of a message.
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

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`.
///
/// Redis 7.0's order, which shows in what an error leaves behind: the
/// version is checked first (`NOPROTO` for anything but 2 and 3); then the
/// options from left to right, `SETNAME` naming the connection as soon as
/// it is read (a later bad option is refused with the name already set);
/// then `AUTH`; and only when all of it passed does the protocol change and
/// the reply come, in the new protocol. Without a version it just reports.
pub fn hello(c: &mut Conn, a: &mut [Vec<u8>]) {
    let mut proto = None;
    if let Some(v) = a.get(1) {
        proto = match parse_i64(v) {
            None => {
                return error(
                    &mut c.out,
                    "ERR Protocol version is not an integer or out of range",
                );
            }
            Some(2) => Some(Proto::Resp2),
            Some(3) => Some(Proto::Resp3),
            Some(_) => return error(&mut c.out, "NOPROTO unsupported protocol version"),
        };
    }
    let mut user = None;
    let mut i = 2;
    while i < a.len() {
        let more = a.len() - 1 - i;
        let opt = a[i].to_ascii_uppercase();
        if opt == b"AUTH" && more >= 2 {
            user = Some(i + 1);
            i += 3;
        } else if opt == b"SETNAME" && more >= 1 {
            if let Err(msg) = set_name(c, i + 1, a) {
                return error(&mut c.out, msg);
            }
            i += 2;
        } else {
            let msg = format!("ERR Syntax error in HELLO option '{}'", shown(&a[i]));
            return error(&mut c.out, &msg);
        }
    }
    if user.is_some_and(|u| a[u] != b"default") {
        return error(
            &mut c.out,
            "WRONGPASS invalid username-password pair or user is disabled.",
        );
    }
    if let Some(p) = proto {
        c.set_proto(p);
    }
    let out = &mut c.out;
    map(out, c.proto, 7);
    for (k, v) in [("server", "redis"), ("version", "7.0.15")] {
        bulk(out, k.as_bytes());
        bulk(out, v.as_bytes());
    }
    bulk(out, b"proto");
    int(out, c.proto.version());
    bulk(out, b"id");
    int(out, c.id as i64);
    for (k, v) in [("mode", "standalone"), ("role", "master")] {
        bulk(out, k.as_bytes());
        bulk(out, v.as_bytes());
    }
    bulk(out, b"modules");
    array(out, 0);
}

/// Names the connection `a[i]` (empty: no name), if it is a name Redis
/// takes: printable ASCII without spaces, as `CLIENT LIST` shows names
/// between spaces.
fn set_name(c: &mut Conn, i: usize, a: &mut [Vec<u8>]) -> Result<(), &'static str> {
    if !a[i].iter().all(u8::is_ascii_graphic) {
        return Err("ERR Client names cannot contain spaces, newlines or special characters.");
    }
    c.name = std::mem::take(&mut a[i]);
    Ok(())
}

/// `CLIENT ID | GETNAME | SETNAME | SETINFO | INFO | HELP`.
pub fn client(c: &mut Conn, a: &mut [Vec<u8>]) {
    let sub = a[1].to_ascii_uppercase();
    let arity = match sub.as_slice() {
        b"ID" | b"GETNAME" | b"INFO" | b"HELP" => 2,
        b"SETNAME" => 3,
        b"SETINFO" => 4,
        _ => {
            let msg = format!(
                "ERR unknown subcommand '{}'. Try CLIENT HELP.",
                shown(&a[1])
            );
            return error(&mut c.out, &msg);
        }
    };
    if a.len() != arity {
        let lower = String::from_utf8_lossy(&sub).to_lowercase();
        let msg = format!("ERR wrong number of arguments for 'client|{lower}' command");
        return error(&mut c.out, &msg);
    }
    match sub.as_slice() {
        b"ID" => int(&mut c.out, c.id as i64),
        b"GETNAME" if c.name.is_empty() => null(&mut c.out, c.proto),
        b"GETNAME" => bulk(&mut c.out, &c.name),
        b"SETNAME" => match set_name(c, 2, a) {
            Ok(()) => simple(&mut c.out, "OK"),
            Err(msg) => error(&mut c.out, msg),
        },
        b"SETINFO" => set_info(c, a),
        b"INFO" => {
            let line = info_line(c);
            verbatim(&mut c.out, c.proto, line.as_bytes());
        }
        _ => {
            let help = [
                "CLIENT <subcommand> [<arg> ...]. Subcommands are:",
                "ID",
                "    This connection's id.",
                "GETNAME",
                "    This connection's name.",
                "SETNAME <name>",
                "    Names this connection (an empty name removes it).",
                "SETINFO <LIB-NAME|LIB-VER> <value>",
                "    Records the client library's name or version.",
                "INFO",
                "    A line about this connection.",
                "HELP",
                "    This text.",
            ];
            array(&mut c.out, help.len() as i64);
            for line in help {
                simple(&mut c.out, line);
            }
        }
    }
}

/// `CLIENT SETINFO LIB-NAME|LIB-VER value` (Redis 7.2's): what libraries
/// send when they connect, kept for `CLIENT INFO`.
fn set_info(c: &mut Conn, a: &mut [Vec<u8>]) {
    let attr = a[2].to_ascii_lowercase();
    let slot = match attr.as_slice() {
        b"lib-name" => &mut c.lib_name,
        b"lib-ver" => &mut c.lib_ver,
        _ => {
            let msg = format!("ERR Unrecognized option '{}'", shown(&a[2]));
            return error(&mut c.out, &msg);
        }
    };
    if !a[3].iter().all(u8::is_ascii_graphic) {
        let attr = String::from_utf8_lossy(&attr);
        let msg = format!("ERR {attr} cannot contain spaces, newlines or special characters.");
        return error(&mut c.out, &msg);
    }
    *slot = std::mem::take(&mut a[3]);
    simple(&mut c.out, "OK");
}

/// `CLIENT INFO`'s line: Redis's fields, those that mean something here.
fn info_line(c: &Conn) -> String {
    let addr =
        |a: std::io::Result<std::net::SocketAddr>| a.map_or(String::new(), |a| a.to_string());
    let mut line = String::new();
    let _ = writeln!(
        line,
        "id={} addr={} laddr={} fd={} name={} age={} idle=0 flags={} db=0 sub={} psub=0 ssub=0 \
         multi={} cmd=client|info user=default resp={} lib-name={} lib-ver={}",
        c.id,
        addr(c.stream.peer_addr()),
        addr(c.stream.local_addr()),
        c.stream.as_raw_fd(),
        String::from_utf8_lossy(&c.name),
        c.connected.elapsed().as_secs(),
        if c.subscriptions.is_empty() { "N" } else { "P" },
        c.subscriptions.len(),
        c.multi.as_ref().map_or(-1, |q| q.len() as i64),
        c.proto.version(),
        String::from_utf8_lossy(&c.lib_name),
        String::from_utf8_lossy(&c.lib_ver),
    );
    line
}

/// `RESET`: the connection as new — no subscriptions, no name, no
/// transaction, RESP2.
pub fn reset(c: &mut Conn, _: &mut [Vec<u8>]) {
    let mut reg = c.shared.pubsub.lock().unwrap_or_else(|e| e.into_inner());
    for ch in c.subscriptions.drain(..) {
        reg.remove(&ch, c.id);
    }
    drop(reg);
    c.name.clear();
    c.multi = None;
    c.set_proto(Proto::Resp2);
    simple(&mut c.out, "RESET");
}
