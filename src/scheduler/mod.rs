//! The per-thread scheduler: the layer every blocking call stands on.
//!
//! Below it lie the switch (`arch/`), the stacks (`stack/`), the reactor
//! (`reactor/`) and the clock and timer wheel (`timer/`); above it, fibers'
//! public face (`fiber/`), the public [`Runtime`](crate::Runtime)
//! (`runtime/`) and everything that parks: `io`, `net`, `sync`, `time`,
//! `signal`, `fs`, `hook`. Those use it through its face:
//!
//! - [`park`]: park the current fiber (with a deadline, or not) and the
//!   `Send + Sync` `Unparker` that wakes it from any thread;
//! - [`readiness`]: a fiber's or an async task's wait on an fd;
//! - [`context`]: which runtime, if any, this thread runs now;
//! - [`wait_on`]: what a park waits for, as dumps show it.
//!
//! The scheduler loop itself is [`core`]: fiber records, the run queue, one
//! turn (run what is ready, poll the reactor, fire timers), and the one
//! place where contexts are switched. The rest serves it: the run queue
//! ([`run_queue`]), the inboxes of several workers ([`pool`]), what other
//! threads may touch ([`shared`]), what the stall watchdog reads
//! ([`watch`]; the watchdog itself is `observe`'s), fiber ids, dumps (and
//! the stacks in them:
//! [`stack_trace`]), metrics, and the list of runtimes a debugger reads
//! ([`debugger`]).

pub(crate) mod blocks;
pub(crate) mod callout;
#[cfg(feature = "hook")]
pub(crate) mod completion;
pub(crate) mod context;
pub(crate) mod core;
pub(crate) mod cpu_time;
pub(crate) mod fair;
pub(crate) mod fiber_id;
pub(crate) mod fiber_info;
pub(crate) mod fork;
pub(crate) mod helper;
pub(crate) mod interrupt;
pub(crate) mod locals;
pub(crate) mod metrics;
pub(crate) mod os_thread;
pub(crate) mod owner;
pub(crate) mod park;
pub(crate) mod pool;
pub(crate) mod readiness;
pub(crate) mod registry;
pub(crate) mod run_queue;
pub(crate) mod shared;
pub(crate) mod stack_trace;
pub(crate) mod thread_exit;
pub(crate) mod unparker;
pub(crate) mod wait_on;
pub(crate) mod wakeups;
pub(crate) mod watch;
pub(crate) mod watchdog_sleep;
