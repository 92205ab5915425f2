//! Naming a sampled stack for the stall warning without holding up the
//! watchdog: the names are looked up on a thread of their own
//! (`fibra-symbols`, made at the first stall), and the watchdog waits for
//! them a bounded time. The first lookup of a process loads the debug
//! info, which takes long in a large debug build (seconds under a
//! sanitizer): the watchdog must go on watching every other runtime
//! meanwhile, and the warning must still come while the stall lasts, so
//! past the bound it carries the addresses and says why, while the lookup
//! goes on and serves the next warnings.

use std::fmt::Write as _;
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use super::Resolver;
use super::walk::RawStack;

type Job = Box<dyn FnOnce() + Send>;

/// The text of `raw`'s frames, named if that is done within `within`.
pub(crate) fn name_within(raw: RawStack, within: Duration) -> String {
    let mut addresses = String::new();
    for ip in raw.ips.iter() {
        let _ = write!(addresses, " {ip:#x}");
    }
    let (tx, rx) = mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        let _ = tx.send(Resolver::default().resolve(&raw).to_string());
    });
    let Err(job) = send(job) else {
        return match rx.recv_timeout(within) {
            Ok(named) => named,
            Err(_) => format!(
                "(not named within {within:?}: the debug info is still loading; the \
                 addresses:{addresses})"
            ),
        };
    };
    // No thread to be had: named here, however long it takes.
    job();
    rx.recv().unwrap_or_default()
}

/// Queues `job` for the naming thread (made on first use); gives it back
/// if there is none.
fn send(job: Job) -> Result<(), Job> {
    static JOBS: OnceLock<Option<Mutex<mpsc::Sender<Job>>>> = OnceLock::new();
    let jobs = JOBS.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        crate::scheduler::helper::spawn_quiet(|| {
            std::thread::Builder::new()
                .name("fibra-symbols".into())
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                })
        })
        .ok()
        .map(|_| Mutex::new(tx))
    });
    match jobs {
        Some(tx) => tx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(job)
            .map_err(|e| e.0),
        None => Err(job),
    }
}
