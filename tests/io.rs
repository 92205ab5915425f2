//! Awaiting fds: `io::wait` on pipes, `EventFd` across threads, errors.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fibra::io::{EventFd, Interest, wait};

#[test]
fn wait_on_a_pipe_with_and_without_a_deadline() {
    fibra::run(|| {
        let (mut reader, mut writer) = std::io::pipe().unwrap();
        let fd = reader.as_raw_fd();
        let start = Instant::now();
        let err = wait(fd, Interest::READABLE, Some(Duration::from_millis(20))).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        assert!(start.elapsed() >= Duration::from_millis(20));

        // A pipe with room is writable at once.
        assert_eq!(
            wait(writer.as_raw_fd(), Interest::WRITABLE, None).unwrap(),
            Interest::WRITABLE
        );

        let w = fibra::spawn(move || {
            fibra::sleep(Duration::from_millis(10));
            writer.write_all(b"ping").unwrap();
            writer // closing it is the next event
        });
        assert!(wait(fd, Interest::READABLE, None).unwrap().is_readable());
        let mut buf = [0; 4];
        reader.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");
        drop(w.join().unwrap()); // hang-up counts as readable
        assert!(
            wait(fd, Interest::READABLE, Some(Duration::from_secs(10)))
                .unwrap()
                .is_readable()
        );
    });
}

#[test]
fn many_fibers_wait_on_one_fd_and_all_wake() {
    fibra::run(|| {
        let (reader, mut writer) = std::io::pipe().unwrap();
        let reader = Arc::new(reader);
        let hs: Vec<_> = (0..20)
            .map(|_| {
                let r = reader.clone();
                fibra::spawn(move || wait(r.as_raw_fd(), Interest::READABLE, None).unwrap())
            })
            .collect();
        fibra::sleep(Duration::from_millis(5));
        writer.write_all(b"x").unwrap();
        for h in hs {
            assert!(h.join().unwrap().is_readable());
        }
    });
}

#[test]
fn wait_on_a_plain_thread_blocks_the_thread() {
    let (reader, mut writer) = std::io::pipe().unwrap();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(10));
        writer.write_all(b"x").unwrap();
    });
    assert!(
        wait(reader.as_raw_fd(), Interest::READABLE, None)
            .unwrap()
            .is_readable()
    );
    t.join().unwrap();
    let err = wait(
        reader.as_raw_fd(),
        Interest::READABLE,
        Some(Duration::from_millis(5)),
    );
    // Hang-up after the writer is gone: readable, not a timeout.
    assert!(err.unwrap().is_readable());
}

#[test]
fn bad_fds_are_clear_errors() {
    use std::io::ErrorKind::InvalidInput;
    // A number no fd has (a just-closed fd could be reused by a test
    // running in parallel).
    let closed = 999_999;
    assert_eq!(
        wait(closed, Interest::READABLE, None).unwrap_err().kind(),
        InvalidInput
    );
    assert_eq!(
        wait(-1, Interest::READABLE, None).unwrap_err().kind(),
        InvalidInput
    );
    fibra::run(|| {
        let err = wait(closed, Interest::READABLE, None).unwrap_err();
        assert_eq!(err.kind(), InvalidInput);
        assert!(err.to_string().contains("not open"), "{err}");
    });
}

#[test]
fn regular_files_are_always_ready() {
    let file = std::fs::File::open("/proc/self/status").unwrap();
    let fd = file.as_raw_fd();
    fibra::run(|| {
        assert_eq!(
            wait(fd, Interest::READABLE, None).unwrap(),
            Interest::READABLE
        );
    });
}

#[test]
fn eventfd_woken_from_another_thread() {
    let efd = Arc::new(EventFd::new(0).unwrap());
    let e = efd.clone();
    let writer = std::thread::spawn(move || {
        for _ in 0..100 {
            e.write(1).unwrap();
            std::thread::sleep(Duration::from_micros(200));
        }
    });
    let total = fibra::run(|| {
        // Another fiber keeps running while this one is parked on the eventfd.
        let ticker = fibra::spawn(|| {
            let mut ticks = 0;
            while ticks < 10 {
                fibra::sleep(Duration::from_millis(1));
                ticks += 1;
            }
            ticks
        });
        let mut total = 0;
        while total < 100 {
            total += efd.read().unwrap();
        }
        assert_eq!(ticker.join().unwrap(), 10);
        total
    });
    assert_eq!(total, 100);
    writer.join().unwrap();
}

#[test]
fn eventfd_read_returns_and_resets_the_counter() {
    let efd = EventFd::new(5).unwrap();
    efd.write(3).unwrap();
    assert_eq!(efd.read().unwrap(), 8);
    assert_eq!(efd.try_read().unwrap(), None);
    assert_eq!(
        efd.write(u64::MAX).unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
    // Read on a plain thread blocks until another thread writes.
    let efd = Arc::new(efd);
    let e = efd.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(10));
        e.write(2).unwrap();
    });
    assert_eq!(efd.read().unwrap(), 2);
    t.join().unwrap();
}

#[test]
fn a_full_eventfd_makes_the_writer_wait_for_a_reader() {
    fibra::run(|| {
        let efd = std::rc::Rc::new(EventFd::new(u64::MAX - 2).unwrap());
        let e = efd.clone();
        let writer = fibra::spawn(move || e.write(10).unwrap()); // would overflow: parks
        fibra::yield_now();
        assert!(!writer.is_finished());
        assert_eq!(efd.read().unwrap(), u64::MAX - 2);
        writer.join().unwrap();
        assert_eq!(efd.read().unwrap(), 10);
    });
}
