//! `select!` beyond channels: a socket's readiness (`io`), a fiber's end
//! (`join`) and timers in one wait — in a fiber, and on a plain thread
//! woken by a channel fed from elsewhere.

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use fibra::channel::{Select, after, bounded, never, unbounded};
use fibra::io::Interest;
use fibra::net::{TcpListener, TcpStream};

const MS: Duration = Duration::from_millis(1);

/// The chat server's loop in miniature: one fiber waits on its client's
/// socket, a broadcast channel and a quit channel at once.
#[test]
fn select_over_a_socket_a_channel_and_after_in_one_fiber() {
    fibra::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (broadcast_s, broadcast) = unbounded::<String>();
        let (quit_s, quit) = bounded::<()>(0);
        let server = fibra::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut writer = conn;
            let mut events = Vec::new();
            loop {
                fibra::select! {
                    io(writer, Interest::READABLE) -> ready => {
                        assert!(ready.unwrap().is_readable());
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap() == 0 {
                            events.push("eof".to_string());
                            break;
                        }
                        events.push(format!("client: {}", line.trim()));
                    }
                    recv(broadcast) -> msg => {
                        let msg = msg.unwrap();
                        writer.write_all(format!("{msg}\n").as_bytes()).unwrap();
                        events.push(format!("broadcast: {msg}"));
                    }
                    recv(quit) -> _ => { events.push("quit".into()); break }
                    recv(after(Duration::from_secs(10))) -> _ => panic!("stuck"),
                }
            }
            events
        });
        let mut client = TcpStream::connect(addr).unwrap();
        client.write_all(b"hello\n").unwrap();
        fibra::sleep(10 * MS);
        broadcast_s.send("news".into()).unwrap();
        let mut echoed = String::new();
        BufReader::new(client.try_clone().unwrap())
            .read_line(&mut echoed)
            .unwrap();
        assert_eq!(echoed, "news\n");
        client.write_all(b"bye\n").unwrap();
        fibra::sleep(10 * MS);
        quit_s.send(()).unwrap();
        assert_eq!(
            server.join().unwrap(),
            ["client: hello", "broadcast: news", "client: bye", "quit"]
        );
    });
}

/// On a plain thread, an `io` wait is woken by a channel that a fiber of
/// another thread sends on, and by its fd.
#[test]
fn io_and_channel_on_a_plain_thread() {
    let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
    let (s, r) = bounded::<u32>(0);
    let waiter = std::thread::spawn(move || {
        let mut got = Vec::new();
        for _ in 0..2 {
            fibra::select! {
                io(a, Interest::READABLE) -> ready => {
                    assert_eq!(ready.unwrap(), Interest::READABLE);
                    let mut buf = [0u8; 1];
                    std::io::Read::read_exact(&mut &a, &mut buf).unwrap();
                    got.push(format!("fd {}", buf[0]));
                }
                recv(r) -> m => got.push(format!("chan {}", m.unwrap())),
            }
        }
        got
    });
    let keep = fibra::run(move || {
        fibra::sleep(30 * MS);
        s.send(7).unwrap(); // a rendezvous: the thread is waiting in select
        fibra::sleep(30 * MS);
        b.write_all(&[9]).unwrap();
        s // connected until the thread is done
    });
    assert_eq!(waiter.join().unwrap(), ["chan 7", "fd 9"]);
    drop(keep);
}

#[test]
fn join_arms_take_the_first_fiber_to_finish() {
    fibra::run(|| {
        let slow = fibra::spawn(|| {
            fibra::sleep(200 * MS);
            "slow"
        });
        let fast = fibra::spawn(|| {
            fibra::sleep(10 * MS);
            "fast"
        });
        let first = fibra::select! {
            join(slow) -> r => r.unwrap(),
            join(fast) -> r => r.unwrap(),
        };
        assert_eq!(first, "fast");
        assert_eq!(slow.join().unwrap(), "slow");
        // A panicked fiber's end is an error, as from `join`.
        let boom = fibra::spawn(|| panic!("boom"));
        let err = fibra::select! {
            join(boom) -> r => r.unwrap_err(),
        };
        assert!(err.is_panic());
    });
    // From a plain thread, a fiber of a runtime on another thread.
    let (s, r) = bounded::<fibra::JoinHandle<u32>>(1);
    let rt_thread = std::thread::spawn(move || {
        fibra::run(move || {
            s.send(fibra::spawn(|| {
                fibra::sleep(20 * MS);
                5
            }))
            .unwrap();
            fibra::sleep(50 * MS);
        })
    });
    let h = r.recv().unwrap();
    let mut sel = Select::new();
    let i = sel.join(&h);
    let timeout = after(Duration::from_secs(5));
    sel.recv(&timeout);
    let op = sel.select();
    assert_eq!(op.index(), i);
    assert_eq!(op.join(&h).unwrap(), 5);
    rt_thread.join().unwrap();
}

/// A select with `io` arms, cancelled while it waits, leaves nothing armed:
/// the socket works for the next reader.
#[test]
fn a_cancelled_io_select_leaves_the_socket_usable() {
    fibra::run(|| {
        let (a, b) = fibra::net::UnixStream::pair().unwrap();
        let a = std::rc::Rc::new(a);
        let waiting = {
            let a = a.clone();
            fibra::spawn(move || {
                let off = never::<()>();
                fibra::select! {
                    io(a, Interest::READABLE) -> _ => {},
                    recv(off) -> _ => {},
                }
            })
        };
        fibra::sleep(5 * MS);
        waiting.cancel();
        assert!(waiting.join().unwrap_err().is_cancelled());
        (&b).write_all(b"x").unwrap();
        assert_eq!(
            fibra::io::wait(
                std::os::fd::AsRawFd::as_raw_fd(&*a),
                Interest::READABLE,
                Some(Duration::from_secs(5))
            )
            .unwrap(),
            Interest::READABLE
        );
    });
}

/// Arms as a user types them: a reference where a value was expected
/// (`io(&s, ..)`, `recv(&r)`, `join(&h)`) is taken as the value itself, and
/// the arms borrow — the socket, receiver and handle stay usable after.
#[test]
fn arms_take_a_reference_as_they_take_a_value_and_only_borrow() {
    fibra::run(|| {
        let listener = fibra::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let client = fibra::spawn(move || {
            let mut c = fibra::net::TcpStream::connect(addr).unwrap();
            std::io::Write::write_all(&mut c, b"hi").unwrap();
            c
        });
        let (stream, _) = listener.accept().unwrap();
        let (_s, r) = fibra::channel::bounded::<u8>(1);
        let h = fibra::spawn(|| fibra::sleep(std::time::Duration::from_secs(60)));
        let ready = fibra::select! {
            recv(&r) -> _ => unreachable!(),
            join(&h) -> _ => unreachable!(),
            io(&stream, fibra::io::Interest::READABLE) -> ready => ready.unwrap(),
        };
        assert_eq!(ready, fibra::io::Interest::READABLE);
        // Borrowed, not moved: all still here.
        let mut buf = [0u8; 2];
        std::io::Read::read_exact(&mut &stream, &mut buf).unwrap();
        assert_eq!(&buf, b"hi");
        assert!(r.try_recv().is_err());
        h.cancel();
        drop(client.join().unwrap());
    });
}

/// Arms through the pointers a user keeps handles in (`Arc`, `Box`, `Rc`,
/// `&&`, `&mut`), and inside a closure that is not `move`: the arms
/// borrow, so the closure captures by reference and every handle is
/// usable after it.
#[test]
fn arms_reach_through_pointers_and_borrow_inside_closures() {
    fibra::run(|| {
        let (s, r) = fibra::channel::bounded::<u8>(1);
        let r = std::sync::Arc::new(r);
        let s = Box::new(s);
        let mut h = std::rc::Rc::new(fibra::spawn(|| 7));
        let g = fibra::Group::<u8>::new();
        let rr = &&*r;
        let mut pick = || {
            fibra::select_biased! {
                send(s, 1) -> sent => {
                    sent.unwrap();
                    0
                }
                recv(rr) -> got => got.unwrap(),
                join(&mut h) -> _ => unreachable!("the join is not asked for yet"),
                group(g) -> _ => unreachable!("an empty group is never ready"),
            }
        };
        assert_eq!(pick(), 0); // sent
        assert_eq!(pick(), 1); // full: received
        // (The closure's borrows end with its last use.)
        let joined = fibra::select! { join(&mut h) -> j => j.unwrap() };
        assert_eq!(joined, 7);
        // Borrowed, not moved: all still here.
        assert!(r.try_recv().is_err());
        assert!(s.try_send(2).is_ok());
        assert!(std::rc::Rc::get_mut(&mut h).is_some());
        assert!(g.is_empty());
    });
}

/// std's faces are arms too: an `mpsc` receiver (fed by a thread), a
/// `sync_channel` one (fed by a fiber) and a `oneshot` answer, beside a
/// `fibra::channel` receiver and a join, in one `select!` loop; each
/// message arrives once, and the faces stay usable after.
#[test]
fn mpsc_and_oneshot_receivers_are_arms_beside_channels_and_joins() {
    use fibra::channel::SelectRecv;
    use fibra::sync::{mpsc, oneshot};

    fibra::run(|| {
        let (tx, rx) = mpsc::channel::<u32>();
        let (stx, srx) = mpsc::sync_channel::<u32>(0);
        let (otx, orx) = oneshot::channel::<&str>();
        let (ctx, crx) = unbounded::<u32>();
        let thread = std::thread::spawn(move || {
            for i in 0..50 {
                tx.send(i).unwrap();
            }
        });
        let feeder = fibra::spawn(move || {
            for i in 100..150 {
                stx.send(i).unwrap(); // a rendezvous: waits for the select
            }
            otx.send("done").unwrap();
            ctx.send(7).unwrap();
            "fed"
        });
        let (mut from_mpsc, mut from_sync) = (Vec::new(), Vec::new());
        let (mut answer, mut from_channel, mut joined) = (None, None, None);
        let no_answer = never::<&str>();
        while answer.is_none() || from_channel.is_none() || from_mpsc.len() < 50 {
            // The oneshot's arm while its answer is to come (once taken,
            // its sender is gone: the arm would fire again at once).
            let done = match answer {
                None => orx.select_receiver(),
                Some(_) => &no_answer,
            };
            if joined.is_none() {
                fibra::select! {
                    recv(rx) -> m => if let Ok(m) = m { from_mpsc.push(m) },
                    recv(srx) -> m => if let Ok(m) = m { from_sync.push(m) },
                    recv(done) -> m => answer = Some(m.unwrap()),
                    recv(crx) -> m => if let Ok(m) = m { from_channel = Some(m) },
                    join(feeder) -> j => joined = Some(j.unwrap()),
                    recv(after(Duration::from_secs(20))) -> _ => panic!("select stuck"),
                }
            } else {
                // The feeder's end is taken: the rest without its arm.
                fibra::select! {
                    recv(rx) -> m => if let Ok(m) = m { from_mpsc.push(m) },
                    recv(srx) -> m => if let Ok(m) = m { from_sync.push(m) },
                    recv(done) -> m => answer = Some(m.unwrap()),
                    recv(crx) -> m => if let Ok(m) = m { from_channel = Some(m) },
                    recv(after(Duration::from_secs(20))) -> _ => panic!("select stuck"),
                }
            }
        }
        if joined.is_none() {
            joined = Some(feeder.join().unwrap());
        }
        thread.join().unwrap();
        assert_eq!(from_mpsc, (0..50).collect::<Vec<_>>());
        assert_eq!(from_sync, (100..150).collect::<Vec<_>>());
        assert_eq!(
            (answer, from_channel, joined),
            (Some("done"), Some(7), Some("fed"))
        );
        // The faces' own calls still work after the selects.
        assert_eq!(rx.try_recv(), Err(mpsc::TryRecvError::Disconnected));
        assert_eq!(srx.recv(), Err(mpsc::RecvError));
    });
}
