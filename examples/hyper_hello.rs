//! hyper 1 serving HTTP/1.1 "Hello, world!" from fibra fibers: one fiber
//! per connection drives hyper's connection future with
//! `fibra::block_on_future`, and hyper's I/O goes through fibra's reactor
//! (cargo feature `futures-io`).
//!
//! ```text
//! cargo run --release --features futures-io --example hyper_hello [ADDR]
//! curl http://127.0.0.1:3000/
//! ```
//!
//! fibra has no hyper dependency. The adapters below (`FibraIo`,
//! `FibraExec`, `FibraTimer`, `FibraSleep`) are the whole glue; copy them
//! into your program. `tests/futures_io.rs` uses them for hyper's client
//! and for HTTP/2 too.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::io::{AsyncRead, AsyncWrite};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper::service::service_fn;
use hyper::{Request, Response};

/// A fibra socket (any `futures_io` stream) as hyper's `rt::Read` and
/// `rt::Write`.
///
/// Reads go through a small buffer of its own, initialised once, and are
/// copied into hyper's (whose memory may be uninitialised): a copy of the
/// bytes read, and no `unsafe`.
pub struct FibraIo<T> {
    io: T,
    scratch: Box<[u8]>,
}

impl<T> FibraIo<T> {
    /// Wraps a stream.
    pub fn new(io: T) -> FibraIo<T> {
        FibraIo {
            io,
            scratch: vec![0; 16 * 1024].into_boxed_slice(),
        }
    }
}

impl<T: AsyncRead + Unpin> Read for FibraIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let len = buf.remaining().min(this.scratch.len());
        let scratch = &mut this.scratch[..len];
        match Pin::new(&mut this.io).poll_read(cx, scratch) {
            Poll::Ready(Ok(n)) => {
                buf.put_slice(&scratch[..n]);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncWrite + Unpin> Write for FibraIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_close(cx)
    }
}

/// hyper's executor (HTTP/2 spawns its streams' tasks, the client its
/// connection's): a fiber per future, driving it with `block_on_future`.
/// Call from a fiber (or `block_on`'s closure) of the runtime to spawn on.
#[derive(Clone, Copy, Debug)]
pub struct FibraExec;

impl<F> hyper::rt::Executor<F> for FibraExec
where
    F: Future + 'static,
{
    fn execute(&self, fut: F) {
        fibra::spawn(move || {
            fibra::block_on_future(fut);
        });
    }
}

/// hyper's timer: fibra's timer wheel, through `fibra::Sleep`.
#[derive(Clone, Copy, Debug)]
pub struct FibraTimer;

/// `fibra::Sleep` as hyper's `rt::Sleep`.
pub struct FibraSleep(fibra::Sleep);

impl Future for FibraSleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.get_mut().0).poll(cx)
    }
}

impl hyper::rt::Sleep for FibraSleep {}

impl hyper::rt::Timer for FibraTimer {
    fn sleep(&self, d: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(FibraSleep(fibra::Sleep::new(d)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(FibraSleep(fibra::Sleep::until(deadline)))
    }
}

/// The one response.
pub async fn hello(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        b"Hello, world!",
    ))))
}

/// Serves one HTTP/1.1 connection on the calling fiber, until the peer
/// closes it.
pub fn serve_connection(stream: fibra::net::TcpStream) {
    let _ = stream.set_nodelay(true);
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(FibraTimer)
        .serve_connection(FibraIo::new(stream), service_fn(hello));
    if let Err(e) = fibra::block_on_future(conn) {
        // A peer that goes away mid-request is not the server's problem.
        if !e.is_incomplete_message() {
            eprintln!("connection error: {e}");
        }
    }
}

/// Accepts connections forever, a fiber for each.
pub fn serve(listener: fibra::net::TcpListener) -> io::Result<()> {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                fibra::spawn(move || serve_connection(stream));
            }
            // Out of fds, say: back off a little rather than spin.
            Err(e) => {
                eprintln!("accept: {e}");
                fibra::sleep(Duration::from_millis(10));
            }
        }
    }
}

#[allow(dead_code)] // tests/futures_io.rs includes this file for its adapters
fn main() -> io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:3000".into());
    fibra::run(|| {
        let listener = fibra::net::TcpListener::bind(addr)?;
        // Tests read this line to learn the port (ADDR may say port 0).
        println!("listening on http://{}", listener.local_addr()?);
        serve(listener)
    })
}
