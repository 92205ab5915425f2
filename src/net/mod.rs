//! Sockets that park the fiber instead of blocking the thread.
//!
//! The types mirror `std::net`: same constructors, methods and traits
//! (`Read` and `Write` for `T` and `&T`, `From<std::net::T>`, `AsRawFd`,
//! `AsFd`, `IntoRawFd`). A call that would block parks the calling fiber
//! while its runtime runs others; on a plain thread it blocks the thread,
//! as std does. A socket made on one thread or runtime works on another.
//!
//! ```
//! use std::io::{Read, Write};
//! use fibra::net::{TcpListener, TcpStream};
//!
//! fibra::run(|| {
//!     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
//!     let addr = listener.local_addr().unwrap();
//!     let server = fibra::spawn(move || {
//!         let (mut conn, _) = listener.accept().unwrap();
//!         let mut buf = [0; 5];
//!         conn.read_exact(&mut buf).unwrap();
//!         conn.write_all(&buf).unwrap(); // echo
//!     });
//!     let mut client = TcpStream::connect(addr).unwrap();
//!     client.write_all(b"hello").unwrap();
//!     let mut reply = [0; 5];
//!     client.read_exact(&mut reply).unwrap();
//!     assert_eq!(&reply, b"hello");
//!     server.join().unwrap();
//! });
//! ```
//!
//! ## Async I/O
//!
//! With the cargo feature `futures-io`, [`TcpStream`] and [`UnixStream`]
//! (and `&` them) implement `futures_io::AsyncRead` and `AsyncWrite`, and
//! the listeners have `poll_accept`: async crates that do their own I/O
//! (hyper, h2, anything over `futures-io`) run on fibra's reactor. A poll
//! tries the syscall and, only if it would block, leaves the task's
//! `Waker` with the reactor for that socket and direction. Drive the
//! futures from a fiber with [`block_on_future`](crate::block_on_future);
//! `fibra::Sleep` (with the same feature) is the timer. `examples/hyper_hello.rs` has
//! the few adapters hyper 1 needs (`rt::Read`/`rt::Write`, an executor, a
//! timer), to copy.
//!
//! With the cargo feature `tokio-io` (which turns `futures-io` on), the
//! same sockets implement tokio's `AsyncRead` and `AsyncWrite` too — the
//! same polls in tokio's shape, a read filling tokio's `ReadBuf` without
//! zeroing it — and fibra depends on tokio's traits only, no runtime and no
//! tokio feature. Crates written for tokio's traits then run on fibra's
//! reactor: tokio-postgres through `Config::connect_raw(stream, NoTls)`
//! over a [`TcpStream`], its `Connection` future driven by a fiber of its
//! own (`fibra::spawn(move || block_on_future(connection))`), each query
//! waited for with `block_on_future`; tokio-rustls's `TlsConnector` and
//! `TlsAcceptor` over fibra streams; tokio-tungstenite's `client_async` and
//! `accept_async`. `examples/tokio_postgres.rs` has the glue (one function)
//! to copy; `tests/tokio_io.rs` runs 200 connections from fibers of one
//! thread against a real PostgreSQL, `pg_sleep(0.2)` each, in about 0.2 s.
//!
//! ```
//! # #[cfg(feature = "tokio-io")] {
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! fibra::run(|| {
//!     let (mut a, mut b) = fibra::net::UnixStream::pair().unwrap();
//!     let echo = fibra::spawn(move || {
//!         let mut buf = [0; 5];
//!         fibra::block_on_future(b.read_exact(&mut buf)).unwrap();
//!         fibra::block_on_future(b.write_all(&buf)).unwrap();
//!     });
//!     fibra::block_on_future(a.write_all(b"hello")).unwrap();
//!     let mut back = Vec::new();
//!     echo.join().unwrap(); // b is dropped: EOF after the echo
//!     fibra::block_on_future(a.read_to_end(&mut back)).unwrap();
//!     assert_eq!(back, b"hello");
//! });
//! # }
//! ```
//!
//! The waker may come from anywhere: `block_on_future` in a fiber, a
//! plain thread's executor, tokio. A socket polled on a thread without a
//! fibra runtime is watched by a process-wide fallback reactor, a fibra
//! runtime on a thread of its own (`fibra-io`) started on first use: it
//! works where tokio would panic ("no reactor running"), at the price of a
//! message to that thread per wait. A socket dropped with a waker
//! registered leaks nothing and wakes nobody, even when its fd number is
//! reused at once.
//!
//! ```
//! # #[cfg(feature = "futures-io")] {
//! use futures_io::{AsyncRead, AsyncWrite};
//! use std::future::poll_fn;
//! use std::pin::Pin;
//!
//! fibra::run(|| {
//!     let (a, b) = fibra::net::UnixStream::pair().unwrap();
//!     let reader = fibra::spawn(move || {
//!         let mut buf = [0; 5];
//!         // Pending until the other fiber writes; the reactor wakes us.
//!         let n = fibra::block_on_future(poll_fn(|cx| Pin::new(&mut &b).poll_read(cx, &mut buf)));
//!         buf[..n.unwrap()].to_vec()
//!     });
//!     fibra::sleep(std::time::Duration::from_millis(5));
//!     fibra::block_on_future(poll_fn(|cx| Pin::new(&mut &a).poll_write(cx, b"hello"))).unwrap();
//!     assert_eq!(reader.join().unwrap(), b"hello");
//! });
//! # }
//! ```
//!
//! ### fibra and tokio
//!
//! tokio's I/O traits are all fibra gives tokio code. Futures that need
//! tokio's runtime — a `tokio::net` socket, `tokio::time::sleep` or
//! `timeout`, `tokio::spawn`, `tokio::sync` used with `tokio::time`, a
//! crate built on them (tokio-postgres's `connect`, which opens a
//! `tokio::net` socket, as against `connect_raw`) — need a tokio runtime:
//! fibra's reactor cannot drive tokio's sockets or timers, and they panic
//! ("there is no reactor running") without one. `tokio::sync`'s channels
//! and locks alone need none. Keep one beside fibra: a multi-thread
//! tokio runtime (its own threads drive its I/O), spawn such work on it
//! (`handle.spawn(fut)`) and wait for the `JoinHandle` from a fiber with
//! `block_on_future`, which parks the fiber, not the thread. Do not hold a
//! `Handle::enter` guard across a park (any fibra call that blocks, a
//! `block_on_future` included): the guard is per thread, and the other
//! fibers that run meanwhile would find themselves "inside" tokio, and
//! guards dropped out of order panic. Enter, build the future or spawn,
//! drop the guard, then wait. Crates that are runtime-agnostic
//! (`futures-io`, hyper with the adapters above) need no tokio at all.

mod addr;
#[cfg(feature = "futures-io")]
mod futures_io;
mod macros;
mod registration;
mod resolve;
mod socket;
mod stream_buf;
mod tcp_listener;
mod tcp_stream;
mod timeout_words;
#[cfg(feature = "tokio-io")]
mod tokio_io;
mod udp;
mod unix;

pub use resolve::{StdAddrs, ToSocketAddrs, lookup_host};
pub use tcp_listener::{Incoming, TcpListener};
pub use tcp_stream::TcpStream;
pub use udp::UdpSocket;
pub use unix::{UnixDatagram, UnixIncoming, UnixListener, UnixStream};
