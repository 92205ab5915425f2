//! RESP in both directions: reading commands (multibulk and inline) from a
//! `BufRead`, and writing replies into a `Vec<u8>`, in RESP2 or RESP3.
//!
//! Clients send commands the same way in both versions; only replies
//! differ. A connection starts in RESP2 and `HELLO 3` moves it to RESP3,
//! where a missing value is `_` instead of `$-1` or `*-1`, key-value
//! replies are maps (`%`), out-of-band messages are pushes (`>`), and
//! text meant for people is a verbatim string (`=`). The writers whose
//! shape depends on the version take a [`Proto`]; the others are the same
//! bytes in both.
//!
//! The reader takes Redis's limits and its protocol errors, which clients
//! see verbatim: a count or length line at most 64 KiB, a bulk at most
//! 512 MB, a multibulk count at most `i32::MAX`. A declared length is never
//! allocated up front: a bulk grows as its bytes arrive, and the argument
//! list as its arguments do, so a client that claims 500 MB and sends
//! nothing costs nothing.

use std::io::{self, BufRead};

/// Longest line (an inline command, or a `*`/`$` header) Redis accepts.
pub const INLINE_MAX: usize = 64 * 1024;
/// Largest bulk string (Redis's `proto-max-bulk-len`).
pub const BULK_MAX: i64 = 512 * 1024 * 1024;
/// How much of a declared bulk is reserved before its bytes arrive.
const BULK_RESERVE: usize = 64 * 1024;

/// Why no command could be read.
#[derive(Debug)]
pub enum ReadError {
    /// The connection ended (or failed), perhaps in the middle of a command.
    Io(io::Error),
    /// Bad framing: the text after `Protocol error: `. The connection is
    /// answered with it and closed.
    Protocol(String),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> ReadError {
        ReadError::Io(e)
    }
}

fn protocol(msg: &str) -> ReadError {
    ReadError::Protocol(msg.to_string())
}

fn eof() -> ReadError {
    ReadError::Io(io::ErrorKind::UnexpectedEof.into())
}

/// Reads the next command: its arguments, never empty (`*0`, `*-1` and
/// blank inline lines are skipped, as Redis skips them).
pub fn read_command(r: &mut impl BufRead) -> Result<Vec<Vec<u8>>, ReadError> {
    let mut line = Vec::new();
    loop {
        let first = match r.fill_buf()?.first() {
            Some(&b) => b,
            None => return Err(eof()),
        };
        let args = if first == b'*' {
            read_multibulk(r, &mut line)?
        } else {
            read_inline(r, &mut line)?
        };
        if !args.is_empty() {
            return Ok(args);
        }
    }
}

/// `*<count>\r\n` then `count` times `$<len>\r\n<len bytes>\r\n`.
fn read_multibulk(r: &mut impl BufRead, line: &mut Vec<u8>) -> Result<Vec<Vec<u8>>, ReadError> {
    header_line(r, line, "too big mbulk count string")?;
    let count = match parse_i64(&line[1..]) {
        Some(n) if n <= i32::MAX as i64 => n,
        _ => return Err(protocol("invalid multibulk length")),
    };
    if count <= 0 {
        return Ok(Vec::new());
    }
    // Grown as arguments arrive: `*2147483647` alone reserves little.
    let mut args = Vec::with_capacity(count.min(1024) as usize);
    for _ in 0..count {
        header_line(r, line, "too big bulk count string")?;
        if line[0] != b'$' {
            let mut msg = b"expected '$', got '".to_vec();
            msg.push(line[0]);
            msg.push(b'\'');
            return Err(ReadError::Protocol(
                String::from_utf8_lossy(&msg).into_owned(),
            ));
        }
        let len = match parse_i64(&line[1..]) {
            Some(n) if (0..=BULK_MAX).contains(&n) => n as usize,
            _ => return Err(protocol("invalid bulk length")),
        };
        args.push(read_bulk(r, len)?);
    }
    Ok(args)
}

/// A header line up to its `\r`, which is dropped with the byte after it
/// (Redis does not look at that byte either). At least one byte long.
fn header_line(r: &mut impl BufRead, line: &mut Vec<u8>, too_big: &str) -> Result<(), ReadError> {
    line.clear();
    if !read_until_limited(r, b'\r', line)? {
        return Err(protocol(too_big));
    }
    line.pop();
    let mut lf = [0u8];
    r.read_exact(&mut lf)?;
    Ok(())
}

/// `len` bytes and the two after them (the `\r\n`, not checked, as Redis
/// does not), the buffer growing only as bytes come in.
fn read_bulk(r: &mut impl BufRead, len: usize) -> Result<Vec<u8>, ReadError> {
    let mut v = Vec::with_capacity((len + 2).min(BULK_RESERVE));
    let mut left = len + 2;
    while left > 0 {
        let avail = r.fill_buf()?;
        if avail.is_empty() {
            return Err(eof());
        }
        let n = avail.len().min(left);
        v.extend_from_slice(&avail[..n]);
        r.consume(n);
        left -= n;
    }
    v.truncate(len);
    Ok(v)
}

/// Appends to `line` up to and including `delim`; false if more than
/// [`INLINE_MAX`] bytes come first.
fn read_until_limited(
    r: &mut impl BufRead,
    delim: u8,
    line: &mut Vec<u8>,
) -> Result<bool, ReadError> {
    loop {
        let avail = r.fill_buf()?;
        if avail.is_empty() {
            return Err(eof());
        }
        let (n, done) = match avail.iter().position(|&b| b == delim) {
            Some(i) => (i + 1, true),
            None => (avail.len(), false),
        };
        line.extend_from_slice(&avail[..n]);
        r.consume(n);
        if line.len() - usize::from(done) > INLINE_MAX {
            return Ok(false);
        }
        if done {
            return Ok(true);
        }
    }
}

/// An inline command: one line, split like a shell would (Redis's rules:
/// `"..."` with C escapes, `'...'` with only `\'`).
fn read_inline(r: &mut impl BufRead, line: &mut Vec<u8>) -> Result<Vec<Vec<u8>>, ReadError> {
    line.clear();
    if !read_until_limited(r, b'\n', line)? {
        return Err(protocol("too big inline request"));
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    split_args(line).ok_or_else(|| protocol("unbalanced quotes in request"))
}

/// Splits an inline line into arguments; `None` for unbalanced quotes (or
/// a closing quote not followed by a space).
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == line.len() {
            return Some(args);
        }
        let mut arg = Vec::new();
        let (mut in_dq, mut in_sq) = (false, false);
        loop {
            let c = line.get(i).copied();
            if in_dq {
                match c {
                    None => return None,
                    Some(b'\\')
                        if line.get(i + 1) == Some(&b'x') && hex_at(line, i + 2).is_some() =>
                    {
                        arg.push(hex_at(line, i + 2).unwrap());
                        i += 3;
                    }
                    Some(b'\\') if i + 1 < line.len() => {
                        i += 1;
                        arg.push(match line[i] {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 8,
                            b'a' => 7,
                            other => other,
                        });
                    }
                    Some(b'"') => {
                        // The closing quote must end the argument.
                        if line.get(i + 1).is_some_and(|b| !b.is_ascii_whitespace()) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    Some(b) => arg.push(b),
                }
            } else if in_sq {
                match c {
                    None => return None,
                    Some(b'\\') if line.get(i + 1) == Some(&b'\'') => {
                        i += 1;
                        arg.push(b'\'');
                    }
                    Some(b'\'') => {
                        if line.get(i + 1).is_some_and(|b| !b.is_ascii_whitespace()) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    Some(b) => arg.push(b),
                }
            } else {
                match c {
                    None => break,
                    Some(b' ' | b'\n' | b'\r' | b'\t' | 0) => break,
                    Some(b'"') => in_dq = true,
                    Some(b'\'') => in_sq = true,
                    Some(b) => arg.push(b),
                }
            }
            i += 1;
        }
        args.push(arg);
    }
}

/// The byte written as two hex digits at `line[i..i + 2]`.
fn hex_at(line: &[u8], i: usize) -> Option<u8> {
    let digit = |j: usize| line.get(j).and_then(|&b| (b as char).to_digit(16));
    Some((digit(i)? * 16 + digit(i + 1)?) as u8)
}

/// Redis's strict integer syntax: an optional `-`, no `+`, no leading
/// zeros, no spaces, within `i64`.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    match digits {
        [] => return None,
        [b'0'] => return (!neg).then_some(0),
        [b'0', ..] => return None,
        _ => {}
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = (d - b'0') as i64;
        v = v.checked_mul(10)?;
        v = if neg {
            v.checked_sub(d)?
        } else {
            v.checked_add(d)?
        };
    }
    Some(v)
}

// ----- replies ---------------------------------------------------------------

/// The reply protocol of a connection, chosen with `HELLO`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Proto {
    Resp2,
    Resp3,
}

impl Proto {
    /// The number `HELLO` takes and reports.
    pub fn version(self) -> i64 {
        match self {
            Proto::Resp2 => 2,
            Proto::Resp3 => 3,
        }
    }
}

/// `+OK` and other status replies.
pub fn simple(out: &mut Vec<u8>, s: &str) {
    out.push(b'+');
    out.extend_from_slice(s.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// An error reply; `msg` starts with its code (`ERR`, `WRONGTYPE`, ...).
pub fn error(out: &mut Vec<u8>, msg: &str) {
    out.push(b'-');
    // A reply line must not break: Redis turns CR and LF into spaces.
    out.extend(
        msg.bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

/// `:<n>`.
pub fn int(out: &mut Vec<u8>, n: i64) {
    header(out, b':', n);
}

/// `$<len>` and the bytes.
pub fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    header(out, b'$', b.len() as i64);
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// `*<n>`, to be followed by `n` replies.
pub fn array(out: &mut Vec<u8>, n: i64) {
    header(out, b'*', n);
}

/// No value where a string was asked for: `$-1` (RESP2) or `_`.
pub fn null(out: &mut Vec<u8>, p: Proto) {
    out.extend_from_slice(match p {
        Proto::Resp2 => b"$-1\r\n",
        Proto::Resp3 => b"_\r\n",
    });
}

/// No value where an array was asked for: `*-1` (RESP2) or `_`.
pub fn null_array(out: &mut Vec<u8>, p: Proto) {
    out.extend_from_slice(match p {
        Proto::Resp2 => b"*-1\r\n",
        Proto::Resp3 => b"_\r\n",
    });
}

/// `n` key-value pairs follow, key first: a map (`%<n>`) in RESP3, a flat
/// array of `2n` in RESP2.
pub fn map(out: &mut Vec<u8>, p: Proto, n: usize) {
    match p {
        Proto::Resp2 => header(out, b'*', 2 * n as i64),
        Proto::Resp3 => header(out, b'%', n as i64),
    }
}

/// A message the client did not ask for with this command (pub/sub):
/// a push (`><n>`) in RESP3, an array in RESP2.
pub fn push(out: &mut Vec<u8>, p: Proto, n: usize) {
    let kind = match p {
        Proto::Resp2 => b'*',
        Proto::Resp3 => b'>',
    };
    header(out, kind, n as i64);
}

/// Text for people (`INFO`, `CLIENT INFO`): in RESP3 a verbatim string
/// marked `txt`, in RESP2 a bulk string.
pub fn verbatim(out: &mut Vec<u8>, p: Proto, text: &[u8]) {
    match p {
        Proto::Resp2 => bulk(out, text),
        Proto::Resp3 => {
            header(out, b'=', text.len() as i64 + 4);
            out.extend_from_slice(b"txt:");
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// A type byte and a number: `*3`, `%2`, `:-7`, ...
fn header(out: &mut Vec<u8>, kind: u8, n: i64) {
    out.push(kind);
    decimal(out, n);
    out.extend_from_slice(b"\r\n");
}

fn decimal(out: &mut Vec<u8>, n: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut u = n.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_as_redis_reads_them() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"01",
            b"-0",
            b"+1",
            b" 1",
            b"1a",
            b"9223372036854775808",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn replies_in_each_protocol() {
        let shape = |write: &dyn Fn(&mut Vec<u8>, Proto)| {
            [Proto::Resp2, Proto::Resp3].map(|p| {
                let mut out = Vec::new();
                write(&mut out, p);
                String::from_utf8(out).unwrap()
            })
        };
        assert_eq!(shape(&|o, p| null(o, p)), ["$-1\r\n", "_\r\n"]);
        assert_eq!(shape(&|o, p| null_array(o, p)), ["*-1\r\n", "_\r\n"]);
        assert_eq!(shape(&|o, p| map(o, p, 2)), ["*4\r\n", "%2\r\n"]);
        assert_eq!(shape(&|o, p| push(o, p, 3)), ["*3\r\n", ">3\r\n"]);
        assert_eq!(
            shape(&|o, p| verbatim(o, p, b"a\r\nb")),
            ["$4\r\na\r\nb\r\n", "=8\r\ntxt:a\r\nb\r\n"]
        );
        assert_eq!(shape(&|o, _| int(o, -42)), [":-42\r\n", ":-42\r\n"]);
    }

    #[test]
    fn inline_splitting() {
        let s = |l: &[u8]| split_args(l);
        assert_eq!(
            s(b"  set a  b "),
            Some(vec![b"set".to_vec(), b"a".to_vec(), b"b".to_vec()])
        );
        assert_eq!(
            s(br#"set "a b\r\n\x41" 'c\'d'"#),
            Some(vec![b"set".to_vec(), b"a b\r\nA".to_vec(), b"c'd".to_vec()])
        );
        assert_eq!(s(br#"set "ab"#), None);
        assert_eq!(s(br#"set "ab"c"#), None);
        assert_eq!(s(b""), Some(vec![]));
    }
}
