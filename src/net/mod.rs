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

mod addr;
#[cfg(feature = "futures-io")]
pub(crate) mod fallback;
#[cfg(feature = "futures-io")]
mod futures_io;
mod resolve;
mod socket;
mod tcp;
mod udp;
mod unix;

pub use resolve::ToSocketAddrs;
pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use unix::{UnixDatagram, UnixIncoming, UnixListener, UnixStream};
