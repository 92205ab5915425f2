//! Futures both ways: fibers driving std futures (woken from other
//! threads and from tokio), and tokio awaiting fibers.

mod util;

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use util::DropCount;

/// A future completed by whoever calls `complete`, from any thread.
#[derive(Clone, Default)]
struct Later(Arc<Mutex<(Option<u32>, Option<Waker>)>>);

impl Later {
    fn complete(&self, v: u32) {
        let waker = {
            let mut s = self.0.lock().unwrap();
            s.0 = Some(v);
            s.1.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl Future for Later {
    type Output = u32;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
        let mut s = self.0.lock().unwrap();
        match s.0.take() {
            Some(v) => Poll::Ready(v),
            None => {
                s.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

#[test]
fn a_fiber_parks_on_a_future_woken_from_another_thread() {
    fibra::run(|| {
        let later = Later::default();
        let l = later.clone();
        let ticks = Rc::new(Cell::new(0));
        let t = ticks.clone();
        let ticker = fibra::spawn(move || {
            for _ in 0..5 {
                fibra::sleep(Duration::from_millis(1));
                t.set(t.get() + 1);
            }
        });
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            l.complete(9);
        });
        assert_eq!(fibra::block_on_future(later), 9);
        // (Five ticks of 1 ms fit in the 30 ms, unless the machine is
        // loaded: one shows the runtime ran on.)
        assert!(
            ticks.get() >= 1,
            "the runtime ran on while the fiber waited"
        );
        ticker.join().unwrap();
    });
}

#[test]
fn block_on_future_works_on_a_plain_thread() {
    let later = Later::default();
    let l = later.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(5));
        l.complete(3);
    });
    assert_eq!(fibra::block_on_future(later), 3);
    assert_eq!(fibra::block_on_future(async { "ready" }), "ready");
}

#[test]
fn a_fiber_cancelled_while_awaiting_drops_the_future() {
    fibra::run(|| {
        let drops = DropCount::default();
        let d = drops.clone();
        let h = fibra::spawn(move || {
            let guard = d.guard();
            fibra::block_on_future(async move {
                let _g = guard;
                std::future::pending::<()>().await;
            })
        });
        fibra::yield_now();
        h.cancel();
        assert!(h.join().unwrap_err().is_cancelled());
        assert_eq!(drops.get(), 1);
    });
}

#[test]
fn a_tokio_runtime_awaits_fibers_of_a_fibra_runtime_on_another_thread() {
    let (tx, rx) = std::sync::mpsc::channel();
    let fibra_thread = std::thread::spawn(move || {
        fibra::run(|| {
            let slow = fibra::spawn(|| {
                fibra::sleep(Duration::from_millis(20));
                21 * 2
            });
            let failing = fibra::spawn(|| -> u32 { panic!("fiber failed") });
            tx.send((slow, failing)).unwrap();
            // Keep the runtime running until both have finished.
            fibra::sleep(Duration::from_millis(100));
        })
    });
    let (slow, failing) = rx.recv().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let (a, b) = rt.block_on(async move {
        // Spawned on a tokio worker: the handle is Send.
        let a = tokio::spawn(slow).await.unwrap();
        (a, failing.await)
    });
    assert_eq!(a.unwrap(), 42);
    assert!(b.unwrap_err().is_panic());
    fibra_thread.join().unwrap();
}

#[test]
fn a_fiber_awaits_a_tokio_task() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let handle = rt.handle().clone();
    let got = fibra::run(|| {
        let task = handle.spawn(async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            7
        });
        fibra::block_on_future(task).unwrap()
    });
    assert_eq!(got, 7);
}

/// Counts wake-ups.
struct CountWakes(std::sync::atomic::AtomicUsize);

impl Wake for CountWakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn a_join_handle_polled_with_a_new_waker_wakes_the_newest() {
    fibra::run(|| {
        let (gate_tx, gate_rx) = fibra::sync::oneshot::channel::<()>();
        let mut h = fibra::spawn(move || {
            gate_rx.recv().unwrap();
            1
        });
        let old = Arc::new(CountWakes(0.into()));
        let new = Arc::new(CountWakes(0.into()));
        let (old_w, new_w) = (Waker::from(old.clone()), Waker::from(new.clone()));
        let mut h_pin = Pin::new(&mut h);
        assert!(
            h_pin
                .as_mut()
                .poll(&mut Context::from_waker(&old_w))
                .is_pending()
        );
        assert!(
            h_pin
                .as_mut()
                .poll(&mut Context::from_waker(&new_w))
                .is_pending()
        );
        gate_tx.send(()).unwrap();
        fibra::sleep(Duration::from_millis(2));
        assert_eq!(old.0.load(std::sync::atomic::Ordering::SeqCst), 0);
        assert_eq!(new.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        let r = h_pin.as_mut().poll(&mut Context::from_waker(&new_w));
        assert!(matches!(r, Poll::Ready(Ok(1))));
    });
}
