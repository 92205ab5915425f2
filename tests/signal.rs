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
        fibra::sleep(Duration::from_millis(100)); // both waiters registered
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
