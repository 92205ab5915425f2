//! Signals reach waiting fibers, whichever thread the kernel interrupts.
//! Each case runs in a child process: signal dispositions are per process.

mod util;

use std::time::Duration;

use util::is_child;

#[test]
fn a_signal_to_the_process_reaches_the_waiting_fibers() {
    const NAME: &str = "a_signal_to_the_process_reaches_the_waiting_fibers";
    if !is_child(NAME) {
        return util::assert_child_ok(NAME);
    }
    let got = fibra::run(|| {
        // Two fibers wait for SIGUSR1 (both must get it), one for SIGUSR2.
        let a = fibra::spawn(|| fibra::signal::wait(&[libc::SIGUSR1]).unwrap());
        let b = fibra::spawn(|| fibra::signal::wait(&[libc::SIGUSR1, libc::SIGHUP]).unwrap());
        let c = fibra::spawn(|| fibra::signal::wait(&[libc::SIGUSR2]).unwrap());
        fibra::sleep(Duration::from_millis(20)); // all are waiting now
        // A plain thread sends the signal to the whole process, so the
        // kernel may deliver it to any thread (the runtime's, the sender,
        // the dispatcher).
        std::thread::spawn(|| {
            // SAFETY: signalling our own process with handled signals.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGUSR1);
            }
            std::thread::sleep(Duration::from_millis(20));
            // SAFETY: as above.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGUSR2);
            }
        })
        .join()
        .unwrap();
        (a.join().unwrap(), b.join().unwrap(), c.join().unwrap())
    });
    assert_eq!(got, (libc::SIGUSR1, libc::SIGUSR1, libc::SIGUSR2));
    println!("CHILD OK");
}

#[test]
fn a_signal_delivered_to_another_thread_wakes_a_fiber_and_a_thread_waits_too() {
    const NAME: &str = "a_signal_delivered_to_another_thread_wakes_a_fiber_and_a_thread_waits_too";
    if !is_child(NAME) {
        return util::assert_child_ok(NAME);
    }
    // A plain thread waits (blocking) beside a fiber.
    let thread_waiter = std::thread::spawn(|| fibra::signal::wait(&[libc::SIGUSR2]).unwrap());
    let got = fibra::run(|| {
        let fiber = fibra::spawn(|| fibra::signal::wait(&[libc::SIGUSR2]).unwrap());
        fibra::sleep(Duration::from_millis(500)); // both waiters registered
        // Deliver to one specific thread that is neither waiter.
        let bystander = std::thread::spawn(|| std::thread::sleep(Duration::from_millis(200)));
        // SAFETY: a valid pthread of this process and a handled signal.
        unsafe {
            use std::os::unix::thread::JoinHandleExt;
            libc::pthread_kill(bystander.as_pthread_t(), libc::SIGUSR2);
        }
        let got = fiber.join().unwrap();
        bystander.join().unwrap();
        got
    });
    assert_eq!(got, libc::SIGUSR2);
    // The thread's wait must have been registered 500 ms in; were it
    // not (a machine that stalled the thread that long), the signal is
    // sent again rather than leave this child waiting for ever.
    let sent = std::time::Instant::now();
    while !thread_waiter.is_finished() {
        if sent.elapsed() > Duration::from_secs(5) {
            eprintln!("the thread's wait missed the signal: sent again");
            // SAFETY: a handled signal, to this process.
            unsafe { libc::kill(libc::getpid(), libc::SIGUSR2) };
        }
        assert!(
            sent.elapsed() < Duration::from_secs(60),
            "the thread never woke"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(thread_waiter.join().unwrap(), libc::SIGUSR2);
    println!("CHILD OK");
}

#[test]
fn bad_signal_sets_are_errors() {
    use std::io::ErrorKind::InvalidInput;
    for set in [&[][..], &[0], &[libc::SIGKILL], &[libc::SIGSEGV], &[1000]] {
        assert_eq!(
            fibra::signal::wait(set).unwrap_err().kind(),
            InvalidInput,
            "{set:?}"
        );
    }
}

/// From the first wait for a signal on, one that arrives while nobody
/// waits is kept for the next wait (several arrivals coalesce into one),
/// and `ctrl_c` is a wait for SIGINT: the second Ctrl-C of a shutdown is
/// never dropped.
#[test]
fn a_signal_sent_while_no_fiber_waits_is_kept_for_the_next_wait() {
    const NAME: &str = "a_signal_sent_while_no_fiber_waits_is_kept_for_the_next_wait";
    if !is_child(NAME) {
        return util::assert_child_ok(NAME);
    }
    fibra::run(|| {
        let short = Duration::from_millis(50);
        // The first wait installs the handlers; nothing comes.
        let both = [libc::SIGUSR1, libc::SIGUSR2];
        assert!(fibra::timeout(short, || fibra::signal::wait(&both)).is_err());
        // Sent twice while nobody waits...
        // SAFETY: raising a signal this process handles.
        unsafe {
            libc::raise(libc::SIGUSR1);
            libc::raise(libc::SIGUSR1);
        }
        fibra::sleep(short); // (the dispatcher thread takes them in)
        // ...kept once for the next wait, which returns at once.
        let got = fibra::timeout(Duration::from_secs(5), || {
            fibra::signal::wait(&[libc::SIGUSR1])
        });
        assert_eq!(got.unwrap().unwrap(), libc::SIGUSR1);
        assert!(
            fibra::timeout(short, || fibra::signal::wait(&[libc::SIGUSR1])).is_err(),
            "two arrivals while nobody waited make one"
        );
        // A wait for two signals takes one; the other stays for the next.
        // SAFETY: as above.
        unsafe {
            libc::raise(libc::SIGUSR1);
            libc::raise(libc::SIGUSR2);
        }
        fibra::sleep(short);
        assert_eq!(fibra::signal::wait(&both).unwrap(), libc::SIGUSR1);
        assert_eq!(
            fibra::signal::wait(&[libc::SIGUSR2]).unwrap(),
            libc::SIGUSR2
        );
        // Ctrl-C, twice, each seen by a wait of its own.
        let first = fibra::spawn(fibra::signal::ctrl_c);
        fibra::yield_now();
        // SAFETY: as above (SIGINT is handled from the ctrl_c on).
        unsafe { libc::raise(libc::SIGINT) };
        first.join().unwrap().unwrap();
        // SAFETY: as above.
        unsafe { libc::raise(libc::SIGINT) }; // while nobody waits
        fibra::sleep(short);
        let second = fibra::timeout(Duration::from_secs(5), fibra::signal::ctrl_c);
        assert!(matches!(second, Ok(Ok(()))), "the second Ctrl-C was lost");
    });
    println!("CHILD OK");
}

/// A `Signals` listener keeps every signal of its set that arrives between
/// its waits (from any thread), lowest number first, and iterates.
#[test]
fn a_signals_listener_keeps_what_arrives_between_its_waits() {
    const NAME: &str = "a_signals_listener_keeps_what_arrives_between_its_waits";
    if !is_child(NAME) {
        return util::assert_child_ok(NAME);
    }
    use fibra::signal::{SIGHUP, SIGUSR1, SIGUSR2, Signals};
    let got = fibra::run(|| {
        let mut signals = Signals::new(&[SIGUSR1, SIGUSR2, SIGHUP]).unwrap();
        // Sent from another thread, to the whole process, while the
        // listener is busy elsewhere.
        std::thread::spawn(|| {
            for s in [SIGUSR2, SIGHUP, SIGUSR1] {
                // SAFETY: signalling our own process with handled signals.
                unsafe { libc::kill(libc::getpid(), s) };
                std::thread::sleep(Duration::from_millis(10));
            }
        })
        .join()
        .unwrap();
        fibra::sleep(Duration::from_millis(50));
        let mut got: Vec<_> = signals.by_ref().take(3).collect();
        // And one that comes while it waits.
        let waiter = fibra::spawn(move || signals.wait().unwrap());
        fibra::sleep(Duration::from_millis(20));
        // SAFETY: as above.
        unsafe { libc::raise(SIGUSR2) };
        got.push(waiter.join().unwrap());
        got
    });
    assert_eq!(
        got,
        [libc::SIGHUP, libc::SIGUSR1, libc::SIGUSR2, libc::SIGUSR2]
    );
    println!("CHILD OK");
}
