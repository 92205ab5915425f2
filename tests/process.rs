//! Awaiting child processes: real children, fibers running meanwhile.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn fibers_await_several_children_while_others_run() {
    fibra::run(|| {
        let start = Instant::now();
        let waiters: Vec<_> = [30u32, 10, 20]
            .into_iter()
            .map(|ms| {
                fibra::spawn(move || {
                    let mut child = Command::new("sh")
                        .args(["-c", &format!("sleep 0.0{ms}; exit {}", ms / 10)])
                        .spawn()
                        .unwrap();
                    fibra::process::wait(&mut child).unwrap().code()
                })
            })
            .collect();
        let mut ticks = 0;
        while !waiters.iter().all(|w| w.is_finished()) {
            fibra::sleep(Duration::from_millis(2));
            ticks += 1;
        }
        let codes: Vec<_> = waiters.into_iter().map(|w| w.join().unwrap()).collect();
        assert_eq!(codes, [Some(3), Some(1), Some(2)]);
        assert!(
            ticks >= 5,
            "the root did not run while children were awaited"
        );
        assert!(start.elapsed() < Duration::from_secs(20));
    });
}

#[test]
fn a_killed_child_and_one_that_already_exited() {
    fibra::run(|| {
        let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
        let pid = sleeper.id();
        fibra::spawn(move || {
            fibra::sleep(Duration::from_millis(20));
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        });
        let status = fibra::process::wait(&mut sleeper).unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));

        let mut quick = Command::new("true").stdout(Stdio::null()).spawn().unwrap();
        fibra::sleep(Duration::from_millis(50));
        assert!(fibra::process::wait(&mut quick).unwrap().success());
        // Waiting again returns the same status, as std does.
        assert!(fibra::process::wait(&mut quick).unwrap().success());
    });
}

#[test]
fn waiting_on_a_plain_thread_blocks_the_thread() {
    let mut child = Command::new("sh").args(["-c", "exit 7"]).spawn().unwrap();
    assert_eq!(fibra::process::wait(&mut child).unwrap().code(), Some(7));
}
