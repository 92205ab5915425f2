//! The command table: a name, its arity (Redis's convention: `n` exactly,
//! `-n` at least), and a function that appends its reply to the
//! connection's output. Replies and error texts are redis-server 7's. The
//! functions live by what they work on: `strings`, `keys`, `lists`,
//! `pubsub`, `multi` (transactions), `connection` (the client's session)
//! and `server`.

use crate::db::Db;
use crate::resp::{Proto, error, parse_i64, simple};
use crate::{Conn, Shared, connection, keys, lists, server, strings};

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub const SYNTAX: &str = "ERR syntax error";

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
        if let Some(queue) = &mut conn.multi {
            queue.doom();
        }
        return Flow::Continue;
    };
    let argc = args.len() as i32;
    if (arity > 0 && argc != arity) || argc < -arity {
        let lower = String::from_utf8_lossy(name).to_lowercase();
        error(
            &mut conn.out,
            &format!("ERR wrong number of arguments for '{lower}' command"),
        );
        if let Some(queue) = &mut conn.multi {
            queue.doom();
        }
        return Flow::Continue;
    }
    // A RESP2 subscriber's replies and messages share one stream of
    // arrays, so it may only manage its subscriptions; RESP3 tells
    // messages apart (pushes), and a subscriber may run anything.
    if !conn.subscriptions.is_empty() && conn.proto == Proto::Resp2 {
        let upper = &upper[..name.len()];
        if !matches!(
            upper,
            b"SUBSCRIBE" | b"UNSUBSCRIBE" | b"PING" | b"QUIT" | b"RESET"
        ) {
            let mut lower = String::from_utf8_lossy(name).to_lowercase();
            if let (b"CLIENT" | b"CONFIG" | b"COMMAND", Some(sub)) = (upper, args.get(1)) {
                // A container command is named with its subcommand.
                lower.push('|');
                lower.push_str(&shown(sub).to_lowercase());
            }
            error(
                &mut conn.out,
                &format!(
                    "ERR Can't execute '{lower}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
                ),
            );
            return Flow::Continue;
        }
    }
    let upper = &upper[..name.len()];
    if upper == b"QUIT" {
        simple(&mut conn.out, "OK");
        return Flow::Close;
    }
    if let Some(queue) = &mut conn.multi
        && !matches!(upper, b"EXEC" | b"DISCARD" | b"MULTI" | b"RESET")
    {
        queue.push(args);
        simple(&mut conn.out, "QUEUED");
        return Flow::Continue;
    }
    handler(conn, args);
    Flow::Continue
}

fn lookup(name: &[u8]) -> Option<(i32, Handler)> {
    use connection::*;
    use keys::*;
    use lists::*;
    use server::*;
    use strings::*;
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
        b"DBSIZE" => (1, dbsize),
        b"FLUSHDB" | b"FLUSHALL" => (-1, flushdb),
        b"QUIT" => (-1, |_, _| {}),
        b"SELECT" => (2, select),
        b"COMMAND" => (-1, command),
        b"CLIENT" => (-2, client),
        b"HELLO" => (-1, hello),
        b"CONFIG" => (-2, config),
        b"INFO" => (-1, info),
        b"RESET" => (1, reset),
        b"MULTI" => (1, crate::multi::multi),
        b"EXEC" => (1, crate::multi::exec),
        b"DISCARD" => (1, crate::multi::discard),
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

/// A client's argument quoted in an error: its first 128 bytes, as Redis
/// quotes an unknown subcommand (so an error line stays short whatever
/// was sent).
pub fn shown(arg: &[u8]) -> String {
    String::from_utf8_lossy(&arg[..arg.len().min(128)]).into_owned()
}

/// The keyspace, locked for one command (a panicked command's poison is
/// ignored: every command leaves the keyspace consistent between calls).
pub fn db(shared: &Shared) -> fibra::sync::MutexGuard<'_, Db> {
    shared.db.lock().unwrap_or_else(|e| e.into_inner())
}
