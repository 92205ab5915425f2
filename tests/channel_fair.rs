//! Fair without preemption (issue 62): a fiber that spins on a non-blocking
//! channel call, waiting for another fiber of its own thread to move, lets
//! that fiber run — `try_recv`, `try_send`, `try_iter`, `try_select`,
//! `select!` with `default`, `try_ready` and a zero-timeout `ready`, on one
//! thread and on `workers(1)`, and when the fiber waited for itself waits
//! on a timer or a socket. Each case runs on a thread of its own and must
//! end within a generous bound: before, each spun forever.

use std::io::{Read, Write};
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use fibra::channel::{Select, TryRecvError, TrySendError, bounded};
use fibra::select;

/// Runs `case` in a runtime on a thread of its own; fails if it has not
/// ended within 60 s (a hang leaves the thread behind).
fn ends(name: &str, case: impl FnOnce() + Send + 'static) {
    let (done, ended) = std_mpsc::channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            fibra::run(case);
            let _ = done.send(());
        })
        .unwrap();
    ended
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{name}: the spinning fiber never let the other run"));
}

#[test]
fn a_fiber_spinning_on_try_recv_lets_the_sender_run() {
    ends("try_recv", || {
        let (s, r) = bounded(1);
        fibra::spawn(move || s.send(7).unwrap());
        let got = loop {
            match r.try_recv() {
                Ok(v) => break v,
                Err(TryRecvError::Empty) => {}
                Err(e) => panic!("{e:?}"),
            }
        };
        assert_eq!(got, 7);
    });
}

#[test]
fn a_fiber_spinning_on_try_send_lets_the_receiver_run() {
    ends("try_send", || {
        let (s, r) = bounded(1);
        s.send(1).unwrap();
        let taker = fibra::spawn(move || (r.recv().unwrap(), r.recv().unwrap()));
        let mut msg = 2;
        loop {
            match s.try_send(msg) {
                Ok(()) => break,
                Err(TrySendError::Full(m)) => msg = m,
                Err(e) => panic!("{e:?}"),
            }
        }
        assert_eq!(taker.join().unwrap(), (1, 2));
    });
}

#[test]
fn a_fiber_spinning_on_try_iter_lets_the_sender_run() {
    ends("try_iter", || {
        let (s, r) = bounded(4);
        fibra::spawn(move || {
            for i in 0..10 {
                s.send(i).unwrap();
            }
        });
        let mut got = Vec::new();
        while got.len() < 10 {
            got.extend(r.try_iter());
        }
        assert_eq!(got, (0..10).collect::<Vec<_>>());
    });
}

#[test]
fn a_fiber_spinning_on_try_select_and_select_default_lets_the_sender_run() {
    ends("try_select", || {
        let (s1, r1) = bounded::<u32>(0);
        let (s2, r2) = bounded::<u32>(0);
        fibra::spawn(move || s1.send(1).unwrap());
        loop {
            let mut sel = Select::new();
            let i = sel.recv(&r1);
            let j = sel.recv(&r2);
            if let Ok(op) = sel.try_select() {
                assert_eq!(op.index(), i);
                assert_eq!(op.recv(&r1), Ok(1));
                let _ = j;
                break;
            }
        }
        fibra::spawn(move || s2.send(2).unwrap());
        loop {
            let got = select! {
                recv(r2) -> v => Some(v.unwrap()),
                default => None,
            };
            if let Some(v) = got {
                assert_eq!(v, 2);
                break;
            }
        }
    });
}

#[test]
fn a_fiber_spinning_on_try_ready_and_ready_timeout_zero_lets_the_sender_run() {
    ends("ready", || {
        let (s, r) = bounded::<u32>(1);
        let s2 = s.clone();
        fibra::spawn(move || s.send(1).unwrap());
        let mut sel = Select::new();
        sel.recv(&r);
        while sel.try_ready().is_err() {}
        assert_eq!(r.recv(), Ok(1));
        fibra::spawn(move || s2.send(2).unwrap());
        while sel.ready_timeout(Duration::ZERO).is_err() {}
        assert_eq!(r.recv(), Ok(2));
    });
}

#[test]
fn the_fiber_waited_for_may_itself_wait_on_a_timer_or_a_socket() {
    ends("timer-and-socket", || {
        let (s, r) = bounded(1);
        let s2 = s.clone();
        // A sender that sleeps first: only the root's poll of the timers
        // wakes it.
        fibra::spawn(move || {
            fibra::sleep(Duration::from_millis(20));
            s.send("slept").unwrap();
        });
        while r.try_recv().is_err() {}
        // A sender that waits on a socket a plain thread writes to later:
        // only the root's poll for I/O wakes it.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = std::thread::spawn(move || {
            let (mut peer, _) = listener.accept().unwrap();
            std::thread::sleep(Duration::from_millis(20));
            peer.write_all(b"x").unwrap();
        });
        fibra::spawn(move || {
            let mut stream = fibra::net::TcpStream::connect(addr).unwrap();
            let mut byte = [0u8; 1];
            stream.read_exact(&mut byte).unwrap();
            s2.send("read").unwrap();
        });
        let got = loop {
            if let Ok(v) = r.try_recv() {
                break v;
            }
        };
        assert_eq!(got, "read");
        writer.join().unwrap();
    });
}

#[test]
fn on_one_worker_too() {
    let rt = fibra::Runtime::builder().workers(1).build().unwrap();
    let (done, ended) = std_mpsc::channel();
    std::thread::spawn(move || {
        rt.block_on(|| {
            let (s, r) = bounded(1);
            fibra::spawn(move || s.send(9).unwrap());
            let got = loop {
                if let Ok(v) = r.try_recv() {
                    break v;
                }
            };
            assert_eq!(got, 9);
        });
        let _ = done.send(());
    });
    ended
        .recv_timeout(Duration::from_secs(60))
        .expect("the spinning fiber never let the other run");
}

/// crossbeam's `port_gone_concurrent`, in a fiber: sending on an unbounded
/// channel never waits, so a fiber that sends until its receiver is gone
/// let the receiver's fiber run only because every 1 024th such send in a
/// row yields. Also through `sync::mpsc`'s unbounded face, and with the
/// queue kept short: the receiver takes its one message long before the
/// sender has queued more than a few thousand.
#[test]
fn a_fiber_sending_until_its_receiver_is_gone_lets_the_receiver_run() {
    ends("unbounded send", || {
        let (s, r) = fibra::channel::unbounded::<u32>();
        let receiver = fibra::spawn(move || {
            r.recv().unwrap();
        });
        let mut sent = 0u64;
        while s.send(1).is_ok() {
            sent += 1;
        }
        receiver.join().unwrap();
        assert!(sent < 1_000_000, "{sent} sends before the receiver ran");
    });
    ends("mpsc send", || {
        let (tx, rx) = fibra::sync::mpsc::channel::<u32>();
        let receiver = fibra::spawn(move || {
            rx.recv().unwrap();
        });
        let mut sent = 0u64;
        while tx.send(1).is_ok() {
            sent += 1;
        }
        receiver.join().unwrap();
        assert!(sent < 1_000_000, "{sent} sends before the receiver ran");
    });
}
