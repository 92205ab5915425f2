//! Driving a `Future` from blocking code: [`block_on_future`].
//!
//! The other direction — async code awaiting a fiber — is the `Future`
//! impl of [`JoinHandle`](crate::JoinHandle).

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use crate::scheduler::park::{self, Unparker, park_current};
use crate::scheduler::wait_on::WaitOn;

/// Runs `future` to completion from a fiber (which parks while the future
/// is pending, so its runtime runs on) or from a plain thread (which
/// blocks), and returns its output.
///
/// The future's `Waker` is `Send + Sync`: whatever the future waits for may
/// wake it from any thread — a tokio runtime, a timer thread, another fibra
/// runtime. No async runtime is provided, though: a future that needs one
/// (say, a tokio socket) must get it from elsewhere, e.g. by being spawned on
/// a tokio runtime and awaited here through its `JoinHandle`.
///
/// A fiber cancelled (or timed out) while it waits drops the future.
///
/// ```
/// use std::future::Future;
/// use std::pin::Pin;
/// use std::sync::{Arc, Mutex};
/// use std::task::{Context, Poll, Waker};
/// use std::time::Duration;
///
/// /// A value a thread delivers later, as a future.
/// #[derive(Default)]
/// struct Slot {
///     value: Option<u32>,
///     waker: Option<Waker>,
/// }
/// struct Later(Arc<Mutex<Slot>>);
///
/// impl Future for Later {
///     type Output = u32;
///     fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
///         let mut slot = self.0.lock().unwrap();
///         match slot.value.take() {
///             Some(v) => Poll::Ready(v),
///             None => {
///                 slot.waker = Some(cx.waker().clone());
///                 Poll::Pending
///             }
///         }
///     }
/// }
///
/// fibra::run(|| {
///     let slot = Arc::new(Mutex::new(Slot::default()));
///     let s = slot.clone();
///     std::thread::spawn(move || {
///         std::thread::sleep(Duration::from_millis(10));
///         let mut slot = s.lock().unwrap();
///         slot.value = Some(42);
///         if let Some(waker) = slot.waker.take() {
///             waker.wake(); // from another thread
///         }
///     });
///     let other = fibra::spawn(|| fibra::sleep(Duration::from_millis(1))); // runs meanwhile
///     assert_eq!(fibra::block_on_future(Later(slot)), 42);
///     assert_eq!(fibra::block_on_future(async { 6 * 7 }), 42);
///     other.join().unwrap();
/// });
/// ```
pub fn block_on_future<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let wake = Arc::new(WakeParked {
        unparker: Mutex::new(Unparker::current()),
        woken: AtomicBool::new(false),
    });
    let waker = Waker::from(wake.clone());
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            // Clones of the waker may still fire: not at a later park.
            park::retire_token();
            return output;
        }
        if !wake.woken.swap(false, Ordering::AcqRel) {
            park_current(None, WaitOn::Future);
            wake.woken.store(false, Ordering::Release);
        } else {
            park::retire_token(); // woken while polling: poll again at once
        }
        wake.set(Unparker::current());
    }
}

/// The waker: unparks whoever waits in `block_on_future`, at its current
/// park (the unparker is renewed before every poll).
struct WakeParked {
    unparker: Mutex<Unparker>,
    /// Woken since the last check: do not park.
    woken: AtomicBool,
}

impl WakeParked {
    fn set(&self, unparker: Unparker) {
        *self.unparker.lock().unwrap_or_else(|e| e.into_inner()) = unparker;
    }
}

impl Wake for WakeParked {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        let unparker = self
            .unparker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        unparker.unpark();
    }
}
