//! `readable`/`writable` and `try_read`/`try_write` on streams: waiting
//! without a buffer, with real sockets on loopback.

use std::cell::RefCell;
use std::io::{ErrorKind, Read, Write};
use std::rc::Rc;
use std::time::{Duration, Instant};

use fibra::net::{TcpListener, TcpStream, UnixStream};

thread_local! {
    /// One read buffer for all the connections of a thread, as the floor
    /// in `benches/peers` has.
    static SHARED: RefCell<Vec<u8>> = RefCell::new(vec![0; 16 * 1024]);
}

/// An echo connection that holds no buffer while it waits: it reads into
/// the thread's shared buffer and writes what it read back at once; what
/// the send buffer does not take is copied out before the fiber parks.
fn echo_without_a_buffer(s: TcpStream) -> std::io::Result<()> {
    loop {
        s.readable()?;
        let leftover = SHARED.with_borrow_mut(|buf| -> std::io::Result<Option<Vec<u8>>> {
            loop {
                let n = match s.try_read(buf) {
                    Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
                    Ok(n) => n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
                    Err(e) => return Err(e),
                };
                let mut sent = 0;
                while sent < n {
                    match s.try_write(&buf[sent..n]) {
                        Ok(w) => sent += w,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {
                            return Ok(Some(buf[sent..n].to_vec()));
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        });
        match leftover {
            // The rest goes out from the fiber's own copy; `write_all`
            // parks (and other fibers reuse the shared buffer meanwhile).
            Ok(Some(rest)) => (&s).write_all(&rest)?,
            Ok(None) => {}
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

#[test]
fn an_echo_server_with_one_buffer_for_all_connections_loses_nothing() {
    fibra::run(|| {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        const CONNS: usize = 60;
        let server = fibra::spawn(move || {
            let conns: Vec<_> = (0..CONNS)
                .map(|_| {
                    let (s, _) = l.accept().unwrap();
                    fibra::spawn(move || echo_without_a_buffer(s))
                })
                .collect();
            for c in conns {
                c.join().unwrap().unwrap();
            }
        });
        // Each client writes from one fiber and reads from another, up to
        // 256 KiB in flight, so that the server's sends fill up and its
        // leftovers take the parking path.
        let clients: Vec<_> = (0..CONNS)
            .map(|i| {
                fibra::spawn(move || {
                    let s = Rc::new(TcpStream::connect(addr).unwrap());
                    let len = 1000 + i * 4500; // up to 266 KiB
                    let data: Vec<u8> = (0..len).map(|k| (k * 7 + i) as u8).collect();
                    let w = s.clone();
                    let sent = data.clone();
                    let writer = fibra::spawn(move || {
                        for chunk in sent.chunks(3000) {
                            (&*w).write_all(chunk).unwrap();
                        }
                    });
                    let mut back = vec![0; len];
                    (&*s).read_exact(&mut back).unwrap();
                    writer.join().unwrap();
                    assert!(back == data, "connection {i}: the echo differs");
                    s.shutdown(std::net::Shutdown::Write).unwrap();
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
        server.join().unwrap();
    });
}

#[test]
fn readable_parks_until_data_comes_and_returns_at_its_end() {
    fibra::run(|| {
        let (a, mut b) = UnixStream::pair().unwrap();
        // Nothing there: the try says so, and does not park.
        let err = a.try_read(&mut [0; 8]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WouldBlock);
        let ran = Rc::new(std::cell::Cell::new(false));
        let r = ran.clone();
        fibra::spawn(move || {
            r.set(true);
            fibra::sleep(Duration::from_millis(30));
            b.write_all(b"hello").unwrap();
            fibra::sleep(Duration::from_millis(30));
            drop(b);
        });
        let start = Instant::now();
        a.readable().unwrap();
        assert!(ran.get(), "the fiber waiting did not let the writer run");
        assert!(start.elapsed() >= Duration::from_millis(20));
        let mut buf = [0; 16];
        assert_eq!(a.try_read(&mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"hello");
        // Empty again; then the end: readable returns and the read says 0.
        loop {
            a.readable().unwrap();
            match a.try_read(&mut buf) {
                Ok(0) => break,
                Ok(n) => panic!("{n} bytes after the end"),
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                Err(e) => panic!("{e}"),
            }
        }
        assert!(start.elapsed() >= Duration::from_millis(45));
    });
}

#[test]
fn readable_gives_up_at_the_read_timeout() {
    fibra::run(|| {
        let (a, _b) = UnixStream::pair().unwrap();
        a.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        assert_eq!(
            a.try_read(&mut [0; 4]).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
        let start = Instant::now();
        let err = a.readable().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WouldBlock);
        assert!(start.elapsed() >= Duration::from_millis(15));
    });
}

#[test]
fn writable_parks_while_the_send_buffer_is_full() {
    fibra::run(|| {
        let (a, mut b) = UnixStream::pair().unwrap();
        let chunk = vec![7u8; 64 * 1024];
        let mut written = 0;
        loop {
            match a.try_write(&chunk) {
                Ok(n) => written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
            assert!(written < 64 << 20, "the send buffer never filled");
        }
        let drained = fibra::spawn(move || {
            fibra::sleep(Duration::from_millis(20));
            let mut buf = vec![0; 1 << 20];
            let mut got = 0;
            while got < written {
                got += b.read(&mut buf).unwrap();
            }
            (got, b) // still open for the write below
        });
        let start = Instant::now();
        a.writable().unwrap();
        assert!(start.elapsed() >= Duration::from_millis(10));
        let more = loop {
            match a.try_write(b"x") {
                Ok(n) => break n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => a.writable().unwrap(),
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(more, 1);
        let (got, _b) = drained.join().unwrap();
        assert!(got >= written);
    });
}

#[test]
fn a_fiber_that_always_finds_data_still_lets_others_run() {
    fibra::run(|| {
        let (a, b) = UnixStream::pair().unwrap();
        // A thread keeps the stream full; the fiber below finds data on
        // every try and never parks on its own.
        let flood = std::thread::spawn(move || {
            let chunk = [1u8; 4096];
            let mut b = b;
            while b.write_all(&chunk).is_ok() {}
        });
        let other_ran = Rc::new(std::cell::Cell::new(false));
        let o = other_ran.clone();
        // It runs only if the root gets to poll (its timer), which only
        // a yield of the fiber below lets it do.
        fibra::spawn(move || {
            fibra::sleep(Duration::from_millis(1));
            o.set(true);
        });
        // Until its first wait, the stream is filled; one byte a try then
        // never empties it.
        while a.try_read(&mut [0; 1]).is_err() {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        let mut buf = [0; 1];
        let mut tries = 0u64;
        while !other_ran.get() {
            a.readable().unwrap();
            let _ = a.try_read(&mut buf);
            tries += 1;
            assert!(tries < 1_000_000, "the other fiber never ran");
        }
        drop(a);
        flood.join().unwrap();
    });
}

#[test]
fn on_a_plain_thread_readable_blocks_the_thread() {
    let (a, mut b) = UnixStream::pair().unwrap();
    // Timed from before the spawn: the writer's 30 ms cannot start earlier.
    let start = Instant::now();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        b.write_all(b"x").unwrap();
        b
    });
    a.readable().unwrap();
    assert!(start.elapsed() >= Duration::from_millis(20));
    assert_eq!(a.try_read(&mut [0; 4]).unwrap(), 1);
    assert_eq!(
        a.try_read(&mut [0; 4]).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    drop(writer.join().unwrap());
}

#[test]
fn a_closed_peer_is_broken_pipe_for_try_write() {
    fibra::run(|| {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        drop(l.accept().unwrap());
        // The first write may be taken before the reset comes back.
        let deadline = Instant::now() + Duration::from_secs(10);
        let err = loop {
            match c.try_write(b"data") {
                Ok(_) => fibra::sleep(Duration::from_millis(5)),
                Err(e) if e.kind() == ErrorKind::WouldBlock => c.writable().unwrap(),
                Err(e) => break e,
            }
            assert!(Instant::now() < deadline, "writes kept succeeding");
        };
        assert!(
            matches!(
                err.kind(),
                ErrorKind::BrokenPipe | ErrorKind::ConnectionReset
            ),
            "{err}"
        );
    });
}
