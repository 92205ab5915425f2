//! An outer loop (a game's, a GUI's) that owns the thread and drives a fibra
//! runtime one `turn` per frame, sleeping in `poll(2)` on the runtime's fd
//! between frames so a timer or a message wakes it early.
//!
//! `cargo run --release --example game_loop`

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fibra::io::EventFd;

const FRAME: Duration = Duration::from_millis(16);

fn main() {
    // `main` returning the error would print it with `{:?}`
    // (`Os { code: 98, kind: AddrInUse, .. }`): say it plainly instead.
    if let Err(e) = run() {
        eprintln!("game_loop: {e}");
        std::process::exit(1);
    }
}

fn run() -> std::io::Result<()> {
    let rt = fibra::Runtime::new()?;

    // Game logic written as blocking code: an enemy that thinks every 100 ms.
    rt.spawn(|| {
        for step in 1..=5 {
            fibra::sleep(Duration::from_millis(100));
            println!("  enemy: step {step}");
        }
    });

    // A "network" thread delivers messages through an eventfd; a fiber
    // handles them as they come.
    let inbox = Arc::new(EventFd::new(0)?);
    let net_inbox = inbox.clone();
    let network = std::thread::spawn(move || {
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(150));
            net_inbox.write(1).unwrap();
        }
    });
    let inbox_reader = inbox.clone();
    rt.spawn(move || {
        let mut got = 0;
        while got < 3 {
            got += inbox_reader.read().unwrap();
            println!("  network: message {got}");
        }
    });

    let start = Instant::now();
    let mut frames = 0;
    let mut resumed = 0;
    while rt.fibers() > 0 {
        let frame_start = Instant::now();
        resumed += rt.turn(Some(Duration::ZERO)); // run whatever is ready
        frames += 1; // ... update and render the frame here ...

        // Idle until the next frame, unless the runtime gets work first.
        let left = FRAME.saturating_sub(frame_start.elapsed());
        let mut pfd = libc::pollfd {
            fd: rt.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        unsafe { libc::poll(&mut pfd, 1, left.as_millis() as i32) };
    }
    network.join().unwrap();
    println!(
        "{frames} frames in {:?}, {resumed} fiber resumptions, runtime idle at the end",
        start.elapsed()
    );
    Ok(())
}
