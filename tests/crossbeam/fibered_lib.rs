//! What the fiber modes point `std::thread` and crossbeam-utils' `scope`
//! at: fibra's fibers. `SUITE_MODE=fibers` runs every test body in
//! `fibra::run` (one thread); `SUITE_MODE=workers` in a `workers(2)`
//! runtime, where `thread::spawn` spreads fibers over both workers.
//! Written into the suite's scratch folder by `run.sh`; not part of fibra.

use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;

use fibra::runtime::Workers;

fn workers() -> Option<&'static fibra::Runtime<Workers>> {
    static RT: OnceLock<Option<fibra::Runtime<Workers>>> = OnceLock::new();
    RT.get_or_init(|| {
        (std::env::var("SUITE_MODE").as_deref() == Ok("workers")).then(|| {
            fibra::Runtime::builder()
                .workers(2)
                .build()
                .expect("a runtime")
        })
    })
    .as_ref()
}

/// Runs one test body in a fiber.
pub fn run(body: fn()) {
    match workers() {
        Some(rt) => rt.block_on(body),
        None => fibra::run(body),
    }
}

/// `std::thread`'s names the tests use, as fibers.
pub mod thread {
    pub use fibra::JoinHandle;
    pub use fibra::{sleep, yield_now};
    pub use std::thread::{current, panicking};

    pub fn spawn<F, T>(f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        match super::workers() {
            Some(rt) => rt.spawn(f),
            None => fibra::spawn(f),
        }
    }
}

/// crossbeam-utils' `thread::Scope` over `fibra::scope`.
pub struct Scope<'s, 'e: 's> {
    inner: &'s fibra::Scope<'s, 'e>,
}

/// crossbeam-utils' `thread::scope`: `Err` when a scoped fiber panicked.
pub fn scope<'e, F, R>(f: F) -> std::thread::Result<R>
where
    F: for<'s> FnOnce(&Scope<'s, 'e>) -> R,
{
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        fibra::scope(|s| f(&Scope { inner: s }))
    }))
}

impl<'s, 'e> Scope<'s, 'e> {
    pub fn spawn<F, T>(&self, f: F) -> fibra::ScopedJoinHandle<'s, T>
    where
        F: FnOnce(&Scope<'s, 'e>) -> T + Send + 's,
        T: Send + 's,
    {
        let inner = self.inner;
        inner.spawn(move || f(&Scope { inner }))
    }
}
