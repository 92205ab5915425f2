//! A small HTTP/1.1 server connection, in two parts:
//!
//! - [`Session`]: the protocol without I/O. It is fed the bytes read so far,
//!   appends the answers to every complete request among them to an output
//!   buffer, and says how many bytes it used and whether the connection
//!   goes on. It frames requests (`Content-Length`, chunked), keeps them
//!   apart when pipelined, and enforces the limits.
//! - [`serve`]: the blocking loop that drives a session over any
//!   [`Transport`] (a `fibra::net::TcpStream`, a TLS stream over one): read,
//!   feed, one write per batch of buffered requests, repeat. In a fiber each
//!   blocking call parks only this connection's fiber.
//!
//! What a client may rely on: keep-alive by default in HTTP/1.1 and on
//! `Connection: keep-alive` in HTTP/1.0 (answered with that header);
//! `Connection: close` answered with it, then the connection closes; request
//! bodies are read and discarded, never parsed as the next request; HEAD
//! gets the headers a GET would, without the body; `Expect: 100-continue`
//! gets `100 Continue` before the body is read; answers come in request
//! order. Bad input costs only its own connection: 400 for a malformed
//! request, 431 for a header section over [`Config::max_head`] bytes or
//! [`MAX_HEADERS`] fields, 413 for a body over [`Config::max_body`], 408 for
//! a request that stalls past the idle timeout or whose head takes longer
//! than that to arrive; each then closes. A connection holds at most one
//! fixed buffer of input (twice `max_head`, at least 16 KiB), whatever the
//! client sends.

use std::io::{self, Read, Write};
use std::mem::MaybeUninit;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The most header fields a request may have (then 431).
pub const MAX_HEADERS: usize = 64;
/// The longest chunk-size line (with its extensions) a chunked body may have.
const MAX_CHUNK_LINE: usize = 1024;
/// After a final answer, how long and how much the server keeps reading
/// (and discarding) before it closes, so that a client still sending gets
/// the answer instead of a reset.
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 1 << 20;

/// What the application answers to a request: a status line's code and
/// reason, and a fixed body.
#[derive(Clone, Copy, Debug)]
pub struct Reply {
    pub status: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

/// The application: from a request's method and target to its answer.
pub type Handler = fn(method: &str, path: &str) -> Reply;

/// "Hello, world!" at `/`, 404 elsewhere, for every method.
pub fn hello(_method: &str, path: &str) -> Reply {
    match path {
        "/" => Reply {
            status: "200 OK",
            content_type: "text/plain",
            body: b"Hello, world!",
        },
        _ => Reply {
            status: "404 Not Found",
            content_type: "text/plain",
            body: b"",
        },
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// How long a connection may stay silent (between requests, or in the
    /// middle of one) and a write may stay blocked, before it is closed;
    /// also the most a request's head may take to arrive.
    pub idle_timeout: Duration,
    /// The largest request line plus header section, in bytes (then 431).
    pub max_head: usize,
    /// The largest request body, in bytes (then 413).
    pub max_body: u64,
    pub handler: Handler,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            idle_timeout: Duration::from_secs(60),
            max_head: 8 * 1024,
            max_body: 1 << 20,
            handler: hello,
        }
    }
}

/// A byte stream the loop can serve: `Read + Write`, plus timeouts and a
/// half close (for TLS: `close_notify`, then the TCP one).
pub trait Transport: Read + Write {
    /// Bounds every later read and write to `timeout`.
    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()>;
    fn shutdown_write(&mut self) -> io::Result<()>;
}

impl Transport for fibra::net::TcpStream {
    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(timeout))?;
        self.set_write_timeout(Some(timeout))
    }
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.shutdown(std::net::Shutdown::Write)
    }
}

/// Serves one connection until the client leaves, asks to close, idles
/// past the timeout, or breaks the protocol. An `Err` is the transport's
/// (a reset, a write that timed out): the caller has nothing to do but
/// drop the connection.
pub fn serve<T: Transport>(conn: &mut T, config: &Config) -> io::Result<()> {
    conn.set_timeout(config.idle_timeout)?;
    let mut session = Session::new(*config);
    let mut buf = vec![0u8; session.buffer_size()];
    let mut filled = 0;
    let mut out = Vec::with_capacity(4096);
    // A head must arrive whole within the idle timeout of its first byte,
    // however its bytes trickle in (each read alone would restart it).
    let mut head_deadline: Option<Instant> = None;
    loop {
        if filled > 0 && !session.in_body() {
            let deadline =
                *head_deadline.get_or_insert_with(|| Instant::now() + config.idle_timeout);
            let left = deadline.saturating_duration_since(Instant::now());
            conn.set_timeout(left.max(Duration::from_millis(1)))?;
        } else if head_deadline.take().is_some() {
            conn.set_timeout(config.idle_timeout)?;
        }
        let n = match conn.read(&mut buf[filled..]) {
            Ok(0) => return Ok(()), // the client is done (a half-sent request is dropped)
            Ok(n) => n,
            Err(e) if is_timeout(&e) => {
                session.timed_out(filled, &mut out);
                if !out.is_empty() {
                    conn.write_all(&out)?;
                    conn.flush()?;
                }
                return linger_close(conn);
            }
            Err(e) => return Err(e),
        };
        filled += n;
        let (used, keep_going) = session.feed(&buf[..filled], &mut out);
        if !out.is_empty() {
            conn.write_all(&out)?;
            conn.flush()?;
            out.clear();
        }
        if !keep_going {
            return linger_close(conn);
        }
        // What is left is the start of a request or of a chunk's framing,
        // which the session keeps under max_head: there is room to read.
        buf.copy_within(used..filled, 0);
        filled -= used;
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Closes after a final answer: half-closes, then reads what the client
/// still sends for a while, so that closing with unread input does not
/// reset the connection before the client has read the answer.
fn linger_close<T: Transport>(conn: &mut T) -> io::Result<()> {
    conn.shutdown_write()?;
    conn.set_timeout(LINGER)?;
    let start = Instant::now();
    let mut sink = [0u8; 4096];
    let mut total = 0;
    while total < LINGER_BYTES && start.elapsed() < LINGER {
        match conn.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
    Ok(())
}

/// The protocol state of one connection, without I/O.
pub struct Session {
    config: Config,
    /// The body of the current request, still to be read, and the answer
    /// that will follow it.
    body: Option<(Body, Answer)>,
    date: Date,
}

/// How the rest of a request body is framed.
enum Body {
    /// This many bytes to go.
    Length(u64),
    Chunked {
        state: Chunk,
        total: u64,
    },
}

enum Chunk {
    /// Before a chunk-size line.
    Size,
    /// Inside a chunk's data: this many bytes to go.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// Trailer fields, up to an empty line; this many bytes seen so far.
    Trailers(usize),
}

/// A response decided from the request's head.
#[derive(Clone, Copy)]
struct Answer {
    reply: Reply,
    head_only: bool,
    keep_alive: bool,
    /// HTTP/1.0: keep-alive must be said.
    http10: bool,
}

/// Why a request cannot be served: its answer, then the connection closes.
#[derive(Clone, Copy, Debug)]
enum Reject {
    BadRequest,
    HeadTooLarge,
    BodyTooLarge,
    UnsupportedVersion,
    ExpectationFailed,
}

impl Reject {
    fn status(self) -> &'static str {
        match self {
            Reject::BadRequest => "400 Bad Request",
            Reject::HeadTooLarge => "431 Request Header Fields Too Large",
            Reject::BodyTooLarge => "413 Content Too Large",
            Reject::UnsupportedVersion => "505 HTTP Version Not Supported",
            Reject::ExpectationFailed => "417 Expectation Failed",
        }
    }
}

impl Session {
    pub fn new(config: Config) -> Session {
        Session {
            config,
            body: None,
            date: Date::default(),
        }
    }

    /// The input buffer `serve` uses: room for a whole head and more.
    pub fn buffer_size(&self) -> usize {
        (2 * self.config.max_head).max(16 * 1024)
    }

    /// Answers every complete request at the start of `input` into `out`.
    /// Returns how many bytes of `input` were used, and whether to read on
    /// (false: `out` ends with the last answer; close the connection).
    /// At most `max_head` bytes (half the buffer) are left unused.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> (usize, bool) {
        self.date.refresh();
        let mut used = 0;
        loop {
            if let Some((body, answer)) = &mut self.body {
                match body.consume(&input[used..], &self.config) {
                    Err(reject) => return (used, self.reject(reject, out)),
                    Ok((n, false)) => return (used + n, true),
                    Ok((n, true)) => {
                        used += n;
                        let answer = *answer;
                        self.body = None;
                        self.answer(&answer, out);
                        if !answer.keep_alive {
                            return (used, false);
                        }
                    }
                }
            }
            if used == input.len() {
                return (used, true);
            }
            let head = match self.head(&input[used..]) {
                Err(reject) => return (used, self.reject(reject, out)),
                Ok(None) => return (used, true), // a partial head: read more
                Ok(Some(head)) => head,
            };
            used += head.len;
            match head.body {
                Some(body) => {
                    if head.expect_continue {
                        out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                    }
                    self.body = Some((body, head.answer));
                }
                None => {
                    self.answer(&head.answer, out);
                    if !head.answer.keep_alive {
                        return (used, false);
                    }
                }
            }
        }
    }

    /// Whether a request body is being read (else: between requests, or
    /// in a request's head).
    pub fn in_body(&self) -> bool {
        self.body.is_some()
    }

    /// The connection idled out with `buffered` bytes of a request unread:
    /// answers 408 if a request was under way. Then close.
    pub fn timed_out(&mut self, buffered: usize, out: &mut Vec<u8>) {
        if buffered > 0 || self.body.is_some() {
            self.date.refresh();
            self.status_only("408 Request Timeout", out);
        }
    }

    /// Parses the head of the request at the start of `input`.
    fn head(&self, input: &[u8]) -> Result<Option<Head>, Reject> {
        // Left uninitialised: httparse writes those it returns.
        let mut headers = [const { MaybeUninit::uninit() }; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut []);
        let len = match req.parse_with_uninit_headers(input, &mut headers) {
            Ok(httparse::Status::Complete(len)) if len <= self.config.max_head => len,
            Ok(httparse::Status::Complete(_)) => return Err(Reject::HeadTooLarge),
            Ok(httparse::Status::Partial) if input.len() > self.config.max_head => {
                return Err(Reject::HeadTooLarge);
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => return Err(Reject::HeadTooLarge),
            Err(httparse::Error::Version) => return version_reject(input),
            Err(_) => return Err(Reject::BadRequest),
        };
        let http10 = req.version == Some(0);
        let (mut close, mut keep_alive, mut hosts) = (false, false, 0);
        let (mut length, mut chunked, mut transfer_encoding) = (None, false, false);
        let (mut expect_continue, mut expect_other) = (false, false);
        for h in req.headers.iter() {
            let name = h.name;
            if name.eq_ignore_ascii_case("content-length") {
                let n = parse_length(h.value).ok_or(Reject::BadRequest)?;
                if length.is_some_and(|m| m != n) {
                    return Err(Reject::BadRequest);
                }
                length = Some(n);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                // Chunked must be the last coding; the last field has it.
                transfer_encoding = true;
                chunked = tokens(h.value)
                    .last()
                    .is_some_and(|t| t.eq_ignore_ascii_case(b"chunked"));
            } else if name.eq_ignore_ascii_case("connection") {
                for t in tokens(h.value) {
                    close |= t.eq_ignore_ascii_case(b"close");
                    keep_alive |= t.eq_ignore_ascii_case(b"keep-alive");
                }
            } else if name.eq_ignore_ascii_case("host") {
                hosts += 1;
            } else if name.eq_ignore_ascii_case("expect") && !http10 {
                // HTTP/1.0 servers ignore Expect (RFC 9110, 10.1.1).
                if h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue") {
                    expect_continue = true;
                } else {
                    expect_other = true;
                }
            }
        }
        // RFC 9112: an HTTP/1.1 request has exactly one Host (3.2); a body
        // framed two ways, or by a coding that is not chunked last, is a
        // smuggling attempt or garbage (6.1, 6.3).
        if hosts > 1 || (hosts == 0 && !http10) {
            return Err(Reject::BadRequest);
        }
        if transfer_encoding && (length.is_some() || !chunked) {
            return Err(Reject::BadRequest);
        }
        if expect_other {
            return Err(Reject::ExpectationFailed);
        }
        let body = match length {
            _ if chunked => Some(Body::Chunked {
                state: Chunk::Size,
                total: 0,
            }),
            Some(n) if n > self.config.max_body => return Err(Reject::BodyTooLarge),
            Some(0) | None => None,
            Some(n) => Some(Body::Length(n)),
        };
        let method = req.method.unwrap_or("");
        Ok(Some(Head {
            len,
            expect_continue: expect_continue && body.is_some(),
            body,
            answer: Answer {
                reply: (self.config.handler)(method, req.path.unwrap_or("")),
                head_only: method == "HEAD",
                // A chunked HTTP/1.0 request is not to be trusted with a
                // second one (RFC 9112, 6.1).
                keep_alive: !close && (if http10 { keep_alive && !chunked } else { true }),
                http10,
            },
        }))
    }

    fn answer(&self, a: &Answer, out: &mut Vec<u8>) {
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(a.reply.status.as_bytes());
        out.extend_from_slice(b"\r\ndate: ");
        out.extend_from_slice(&self.date.text);
        if !a.reply.body.is_empty() {
            out.extend_from_slice(b"\r\ncontent-type: ");
            out.extend_from_slice(a.reply.content_type.as_bytes());
        }
        out.extend_from_slice(b"\r\ncontent-length: ");
        push_decimal(out, a.reply.body.len() as u64);
        if !a.keep_alive {
            out.extend_from_slice(b"\r\nconnection: close");
        } else if a.http10 {
            out.extend_from_slice(b"\r\nconnection: keep-alive");
        }
        out.extend_from_slice(b"\r\n\r\n");
        if !a.head_only {
            out.extend_from_slice(a.reply.body);
        }
    }

    /// Answers with `reject`'s status and no body; returns false (close).
    fn reject(&mut self, reject: Reject, out: &mut Vec<u8>) -> bool {
        self.body = None;
        self.status_only(reject.status(), out);
        false
    }

    fn status_only(&self, status: &'static str, out: &mut Vec<u8>) {
        let answer = Answer {
            reply: Reply {
                status,
                content_type: "",
                body: b"",
            },
            head_only: false,
            keep_alive: false,
            http10: false,
        };
        self.answer(&answer, out);
    }
}

/// A parsed request head.
struct Head {
    len: usize,
    body: Option<Body>,
    expect_continue: bool,
    answer: Answer,
}

impl Body {
    /// Reads body bytes from the start of `input`, without keeping them.
    /// Returns how many it used and whether the body is complete.
    fn consume(&mut self, input: &[u8], config: &Config) -> Result<(usize, bool), Reject> {
        let (state, total) = match self {
            Body::Length(left) => {
                let n = (*left).min(input.len() as u64);
                *left -= n;
                return Ok((n as usize, *left == 0));
            }
            Body::Chunked { state, total } => (state, total),
        };
        let mut used = 0;
        loop {
            let rest = &input[used..];
            match state {
                Chunk::Size => match httparse::parse_chunk_size(rest) {
                    Ok(httparse::Status::Complete((len, 0))) => {
                        used += len;
                        *state = Chunk::Trailers(0);
                    }
                    Ok(httparse::Status::Complete((len, size))) => {
                        *total = total.saturating_add(size);
                        if *total > config.max_body {
                            return Err(Reject::BodyTooLarge);
                        }
                        used += len;
                        *state = Chunk::Data(size);
                    }
                    Ok(httparse::Status::Partial) if rest.len() <= MAX_CHUNK_LINE => {
                        return Ok((used, false));
                    }
                    _ => return Err(Reject::BadRequest),
                },
                Chunk::Data(left) => {
                    let n = (*left).min(rest.len() as u64);
                    used += n as usize;
                    *left -= n;
                    if *left > 0 {
                        return Ok((used, false));
                    }
                    *state = Chunk::DataEnd;
                }
                Chunk::DataEnd => match rest {
                    [b'\r', b'\n', ..] => {
                        used += 2;
                        *state = Chunk::Size;
                    }
                    [] | [b'\r'] => return Ok((used, false)),
                    _ => return Err(Reject::BadRequest),
                },
                Chunk::Trailers(seen) => {
                    let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
                        if *seen + rest.len() > config.max_head {
                            return Err(Reject::HeadTooLarge);
                        }
                        return Ok((used, false));
                    };
                    used += eol + 2;
                    *seen += eol + 2;
                    if eol == 0 {
                        return Ok((used, true)); // the empty line ends the body
                    }
                    if *seen > config.max_head {
                        return Err(Reject::HeadTooLarge);
                    }
                }
            }
        }
    }
}

/// A `Content-Length` value: digits only.
fn parse_length(value: &[u8]) -> Option<u64> {
    let digits = value.trim_ascii();
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(digits.iter().fold(0, |n, d| n * 10 + u64::from(d - b'0')))
}

/// The comma-separated tokens of a header value, trimmed.
fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|t| !t.is_empty())
}

fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// The `Date` header's value (RFC 9110, 5.6.7), formatted once a second.
struct Date {
    second: u64,
    text: [u8; 29],
}

impl Default for Date {
    fn default() -> Self {
        let mut date = Date {
            second: u64::MAX,
            text: [b' '; 29],
        };
        date.refresh();
        date
    }
}

impl Date {
    fn refresh(&mut self) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if now != self.second {
            self.second = now;
            self.text = imf_fixdate(now);
        }
    }
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` for a count of seconds since 1970.
fn imf_fixdate(secs: u64) -> [u8; 29] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let days = secs / 86_400;
    let (year, month, day) = civil_from_days(days);
    let time = secs % 86_400;
    let mut t = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    t[..3].copy_from_slice(DAYS[(days % 7) as usize]);
    let two = |t: &mut [u8; 29], at: usize, v: u64| {
        t[at] = b'0' + (v / 10 % 10) as u8;
        t[at + 1] = b'0' + (v % 10) as u8;
    };
    two(&mut t, 5, day);
    t[8..11].copy_from_slice(MONTHS[month as usize - 1]);
    two(&mut t, 12, year / 100);
    two(&mut t, 14, year % 100);
    two(&mut t, 17, time / 3600);
    two(&mut t, 20, time / 60 % 60);
    two(&mut t, 23, time % 60);
    t
}

/// (year, month 1-12, day 1-31) of a day counted from 1970-01-01: the
/// proleptic Gregorian calendar, in 400-year eras that start on 1 March
/// (so that the leap day ends a year).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468; // days from 0000-03-01
    let era = z / 146_097;
    let doe = z % 146_097; // day of the era, 0..146_096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // 0..399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of the year from 1 March
    let mp = (5 * doy + 2) / 153; // month from March, 0..11
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = era * 400 + yoe + u64::from(month <= 2);
    (year, month, day)
}

/// What a request line whose version httparse refused deserves: 505 for a
/// well-formed `HTTP/<digit>.<digit>` this server does not speak (2.0,
/// 3.0), 400 for anything else (`HTTP/x`, `FOO/1.1`), as nginx and hyper
/// answer; `Ok(None)` while the line is incomplete and could still be a
/// well-formed version.
fn version_reject(input: &[u8]) -> Result<Option<Head>, Reject> {
    let line_end = input.iter().position(|&b| b == b'\n');
    let line = &input[..line_end.unwrap_or(input.len())];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let version = line.rsplit(|&b| b == b' ').next().unwrap_or_default();
    let pattern: &[fn(u8) -> bool] = &[
        |b| b == b'H',
        |b| b == b'T',
        |b| b == b'T',
        |b| b == b'P',
        |b| b == b'/',
        |b: u8| b.is_ascii_digit(),
        |b| b == b'.',
        |b: u8| b.is_ascii_digit(),
    ];
    let fits = version.len() <= pattern.len() && version.iter().zip(pattern).all(|(&b, ok)| ok(b));
    match (fits, line_end.is_some(), version.len() == pattern.len()) {
        (true, true, true) => Err(Reject::UnsupportedVersion),
        (true, false, _) => Ok(None), // more of the line to come
        _ => Err(Reject::BadRequest),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates() {
        assert_eq!(&super::imf_fixdate(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(
            &super::imf_fixdate(784_111_777),
            b"Sun, 06 Nov 1994 08:49:37 GMT"
        );
        assert_eq!(
            &super::imf_fixdate(951_782_400),
            b"Tue, 29 Feb 2000 00:00:00 GMT"
        );
        assert_eq!(
            &super::imf_fixdate(4_107_542_399),
            b"Fri, 31 Dec 2100 23:59:59 GMT"
        );
    }
}
