//! UDP and Unix-domain sockets, with real sockets.

use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

use fibra::net::{UdpSocket, UnixDatagram, UnixListener, UnixStream};

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("fibra-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn udp_ping_pong_between_fibers_with_a_timeout() {
    fibra::run(|| {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        let echo = fibra::spawn(move || {
            let mut buf = [0; 1500];
            for _ in 0..100 {
                let (n, from) = server.recv_from(&mut buf).unwrap();
                server.send_to(&buf[..n], from).unwrap();
            }
        });
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(addr).unwrap();
        for i in 0..100u32 {
            client.send(&i.to_be_bytes()).unwrap();
            let mut buf = [0; 4];
            assert_eq!(client.recv(&mut buf).unwrap(), 4);
            assert_eq!(u32::from_be_bytes(buf), i);
        }
        echo.join().unwrap();

        // Nobody answers now: the read timeout expires while others run.
        client
            .set_read_timeout(Some(Duration::from_millis(30)))
            .unwrap();
        let start = Instant::now();
        assert_eq!(
            client.recv(&mut [0; 4]).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
        assert!(start.elapsed() >= Duration::from_millis(30));
    });
}

#[test]
fn udp_on_a_plain_thread_talks_to_a_fiber() {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = sock.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let mut buf = [0; 8];
        let (n, from) = sock.recv_from(&mut buf).unwrap(); // blocks the thread
        sock.send_to(&buf[..n], from).unwrap();
    });
    fibra::run(|| {
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.send_to(b"thread", addr).unwrap();
        let mut buf = [0; 8];
        let (n, _) = c.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"thread");
    });
    t.join().unwrap();
}

#[test]
fn unix_stream_echo_over_a_path() {
    let dir = temp_dir("unix-echo");
    let path = dir.join("echo.sock");
    fibra::run(|| {
        let listener = UnixListener::bind(&path).unwrap();
        let server = fibra::spawn(move || {
            for _ in 0..20 {
                let mut s = listener.incoming().next().unwrap().unwrap();
                fibra::spawn(move || {
                    let mut buf = [0; 64];
                    let n = s.read(&mut buf).unwrap();
                    s.write_all(&buf[..n]).unwrap();
                });
            }
        });
        let clients: Vec<_> = (0..20)
            .map(|i| {
                let path = path.clone();
                fibra::spawn(move || {
                    let mut c = UnixStream::connect(&path).unwrap();
                    let msg = format!("client {i}");
                    c.write_all(msg.as_bytes()).unwrap();
                    let mut back = vec![0; msg.len()];
                    c.read_exact(&mut back).unwrap();
                    assert_eq!(back, msg.as_bytes());
                })
            })
            .collect();
        clients.into_iter().for_each(|h| h.join().unwrap());
        server.join().unwrap();
    });
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn unix_stream_pair_with_a_reader_and_a_writer_fiber() {
    fibra::run(|| {
        let (a, b) = UnixStream::pair().unwrap();
        let reader = fibra::spawn(move || {
            let mut all = Vec::new();
            (&b).read_to_end(&mut all).unwrap();
            all.len()
        });
        let chunk = vec![7u8; 100_000];
        for _ in 0..20 {
            (&a).write_all(&chunk).unwrap();
        }
        a.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(reader.join().unwrap(), 2_000_000);
    });
}

#[test]
fn a_unix_stream_whose_peer_is_gone_reads_end_and_writes_broken_pipe() {
    // Reads and writes of one buffer are raw system calls: the write must
    // still carry MSG_NOSIGNAL (an error, never a SIGPIPE), and errors must
    // come back as std's kinds. Rust ignores SIGPIPE in every binary, so
    // its default action (killing this process) is put back for the test:
    // a write without MSG_NOSIGNAL would then end the run.
    // SAFETY: SIG_DFL for SIGPIPE, set back to SIG_IGN below; no other
    // test of this file writes to a socket whose peer is gone.
    let before = unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    fibra::run(|| {
        let (a, b) = UnixStream::pair().unwrap();
        (&b).write_all(b"last words").unwrap();
        drop(b);
        let mut got = Vec::new();
        (&a).read_to_end(&mut got).unwrap();
        assert_eq!(got, b"last words");
        let err = (&a).write(b"anyone?").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BrokenPipe, "{err:?}");
        // An empty buffer is not a syscall: 0 at once, as on std's sockets.
        assert_eq!((&a).write(&[]).unwrap(), 0);
        assert_eq!((&a).read(&mut []).unwrap(), 0);
    });
    // SAFETY: puts back the disposition found above.
    unsafe { libc::signal(libc::SIGPIPE, before) };
}

#[test]
fn unix_datagrams_between_paths_and_pairs() {
    let dir = temp_dir("unix-dgram");
    fibra::run(|| {
        let a = UnixDatagram::bind(dir.join("a")).unwrap();
        let b = UnixDatagram::bind(dir.join("b")).unwrap();
        let bpath = dir.join("b");
        let r = fibra::spawn(move || {
            let mut buf = [0; 16];
            let (n, from) = b.recv_from(&mut buf).unwrap();
            (buf[..n].to_vec(), from.as_pathname().map(|p| p.to_owned()))
        });
        a.send_to(b"to b", &bpath).unwrap();
        let (data, from) = r.join().unwrap();
        assert_eq!(data, b"to b");
        assert_eq!(from.unwrap(), dir.join("a"));

        let (x, y) = UnixDatagram::pair().unwrap();
        y.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
        assert_eq!(
            y.recv(&mut [0; 4]).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
        x.send(b"ok").unwrap();
        let mut buf = [0; 4];
        assert_eq!(y.recv(&mut buf).unwrap(), 2);
    });
    std::fs::remove_dir_all(dir).unwrap();
}
