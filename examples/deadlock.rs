//! Two fibers that take two locks in opposite orders: fibra tells the
//! deadlock (a WARN with target `fibra::deadlock` and every fiber's stack),
//! as Go prints "all goroutines are asleep - deadlock!". The README's
//! "Seeing inside" shows its output.
//!
//! `cargo run --example deadlock` (it exits once the warning is out).

use std::sync::Arc;
use std::time::Duration;

use fibra::sync::{Barrier, Mutex};

#[inline(never)]
fn transfer(from: &Mutex<u64>, to: &Mutex<u64>, both: &Barrier) {
    let _from = from.lock().unwrap();
    both.wait();
    let _to = to.lock().unwrap(); // each fiber waits here for the other
}

fn main() {
    // The warning is a tracing event: print it. The program ends a moment
    // after the warning is due (10 x stall_warning).
    tracing_subscriber::fmt().without_time().init();
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(3));
        std::process::exit(0);
    });
    let rt = fibra::Runtime::builder()
        .stall_warning(Duration::from_millis(50))
        .build()
        .unwrap();
    rt.block_on(|| {
        let (a, b) = (Arc::new(Mutex::new(10)), Arc::new(Mutex::new(20)));
        let both = Arc::new(Barrier::new(2));
        let (a2, b2, both2) = (a.clone(), b.clone(), both.clone());
        let one = fibra::Builder::new()
            .name("alice".into())
            .spawn(move || transfer(&a, &b, &both))
            .unwrap();
        let two = fibra::Builder::new()
            .name("bob".into())
            .spawn(move || transfer(&b2, &a2, &both2))
            .unwrap();
        let _ = one.join();
        let _ = two.join();
    });
}
