//! The signal calls' cases: handlers that record what they see, the
//! actions installed and read back, a delivery; and `sigaction` (`signal`
//! and `siginterrupt` are in `siginterrupt.rs`).

use std::mem;
use std::ptr;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

use libc::{c_int, c_void, sighandler_t, sigset_t};

use crate::api::Api;
use crate::harness::{Case, Record, case, hex};
use crate::mem::{Buf, FILL, const_ptr};
use crate::sys::call;

/// What the handlers of the signal cases saw.
pub(crate) static HITS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static SEEN_SIGNO: AtomicI32 = AtomicI32::new(0);
pub(crate) static SEEN_CODE: AtomicI32 = AtomicI32::new(0);
pub(crate) static SEEN_MASK: AtomicUsize = AtomicUsize::new(0);

/// Records, in the atomics above, what a handler sees: its signal's info
/// and which of SIGUSR2 and SIGWINCH are blocked while it runs.
pub(crate) fn note(sig: c_int, info: *const libc::siginfo_t) {
    HITS.fetch_add(1, Ordering::SeqCst);
    if !info.is_null() {
        // SAFETY: the kernel's siginfo for this delivery.
        let (signo, code) = unsafe { ((*info).si_signo, (*info).si_code) };
        SEEN_SIGNO.store(signo, Ordering::SeqCst);
        SEEN_CODE.store(code, Ordering::SeqCst);
    } else {
        SEEN_SIGNO.store(sig, Ordering::SeqCst);
    }
    // SAFETY: all-zero is a valid sigset_t, which the call fills.
    let mut cur: sigset_t = unsafe { mem::zeroed() };
    // SAFETY: reads the thread's mask into `cur` (async-signal-safe).
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, ptr::null(), &mut cur) };
    // SAFETY: a valid sigset_t.
    let (usr2, winch) = unsafe {
        (
            libc::sigismember(&cur, libc::SIGUSR2) == 1,
            libc::sigismember(&cur, libc::SIGWINCH) == 1,
        )
    };
    SEEN_MASK.store(usr2 as usize | (winch as usize) << 1, Ordering::SeqCst);
}

extern "C" fn h1(sig: c_int) {
    note(sig, ptr::null());
}

extern "C" fn h2(sig: c_int) {
    note(sig, ptr::null());
}

extern "C" fn h3(sig: c_int, info: *mut libc::siginfo_t, _: *mut c_void) {
    note(sig, info);
}

pub(crate) fn handler_name(h: sighandler_t) -> String {
    match h {
        libc::SIG_DFL => "SIG_DFL".into(),
        libc::SIG_IGN => "SIG_IGN".into(),
        libc::SIG_ERR => "SIG_ERR".into(),
        h if h == h1_ptr() => "h1".into(),
        h if h == h2_ptr() => "h2".into(),
        h if h == h3_ptr() => "h3".into(),
        _ => "another function".into(),
    }
}

/// A sigaction as recorded: untouched (all [`FILL`]), or its fields with
/// the handler named and the restorer (an address) as set or not.
pub(crate) fn describe_action(b: &Buf) -> Vec<u8> {
    if b.data().iter().all(|&x| x == FILL) {
        let mut v = b"untouched ".to_vec();
        v.extend(hex(&b.canary()).bytes());
        return v;
    }
    let a: libc::sigaction = b.get(0);
    let mask: [u8; 128] = b.get(size_of::<sighandler_t>());
    let pad: [u8; 4] = b.get(size_of::<sighandler_t>() + 128 + 4);
    format!(
        "handler={} flags={:#x} mask={} restorer={} pad={} canary={}",
        handler_name(a.sa_sigaction),
        a.sa_flags,
        hex(&mask[..8]),
        if a.sa_restorer.is_some() {
            "set"
        } else {
            "null"
        },
        hex(&pad),
        hex(&b.canary())
    )
    .into_bytes()
}

pub(crate) fn action(handler: sighandler_t, flags: c_int, mask: &[c_int]) -> libc::sigaction {
    // SAFETY: all-zero is a valid sigaction.
    let mut a: libc::sigaction = unsafe { mem::zeroed() };
    a.sa_sigaction = handler;
    a.sa_flags = flags;
    for &s in mask {
        // SAFETY: a valid sigset_t.
        unsafe { libc::sigaddset(&mut a.sa_mask, s) };
    }
    a
}

/// `h1`, `h2` and `h3` as handlers.
pub(crate) fn h1_ptr() -> sighandler_t {
    h1 as *const () as sighandler_t
}

pub(crate) fn h2_ptr() -> sighandler_t {
    h2 as *const () as sighandler_t
}

pub(crate) fn h3_ptr() -> sighandler_t {
    h3 as *const () as sighandler_t
}

/// `h1` with SA_RESTART, SIGWINCH blocked while it runs.
pub(crate) fn h1_action() -> libc::sigaction {
    action(h1_ptr(), libc::SA_RESTART, &[libc::SIGWINCH])
}

/// `h3` with SA_SIGINFO.
pub(crate) fn h3_action() -> libc::sigaction {
    action(h3_ptr(), libc::SA_SIGINFO, &[])
}

/// The action of SIGUSR2 as `api.sigaction` reads it back.
pub(crate) fn current_action(api: &Api) -> Vec<u8> {
    let old = Buf::new(size_of::<libc::sigaction>());
    // SAFETY: our buffer for the old action.
    let r = unsafe { (api.sigaction)(libc::SIGUSR2, ptr::null(), old.cast()) };
    assert_eq!(r, 0);
    describe_action(&old)
}

/// SIGUSR2 back to SIG_DFL (through `api`, as the case set it).
pub(crate) fn restore(api: &Api) {
    let dfl = action(libc::SIG_DFL, 0, &[]);
    // SAFETY: a valid action.
    unsafe { (api.sigaction)(libc::SIGUSR2, &dfl, ptr::null_mut()) };
}

/// Sends SIGUSR2 to this thread; what the handler saw.
pub(crate) fn deliver() -> Vec<u8> {
    HITS.store(0, Ordering::SeqCst);
    SEEN_SIGNO.store(0, Ordering::SeqCst);
    SEEN_CODE.store(0, Ordering::SeqCst);
    SEEN_MASK.store(0, Ordering::SeqCst);
    // SAFETY: a signal to this very thread, whose handler is one of ours.
    unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGUSR2) };
    format!(
        "hits={} signo={} code={} usr2_blocked={} winch_blocked={}",
        HITS.load(Ordering::SeqCst),
        SEEN_SIGNO.load(Ordering::SeqCst),
        SEEN_CODE.load(Ordering::SeqCst),
        SEEN_MASK.load(Ordering::SeqCst) & 1 != 0,
        SEEN_MASK.load(Ordering::SeqCst) & 2 != 0
    )
    .into_bytes()
}

/// What a case installs for SIGUSR2 (through the place's `sigaction`)
/// before its call.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Before {
    Nothing,
    /// [`h1_action`].
    H1,
    /// [`h3_action`].
    H3,
}

impl Before {
    pub(crate) fn install(self, api: &Api) {
        let a = match self {
            Before::Nothing => return,
            Before::H1 => h1_action(),
            Before::H3 => h3_action(),
        };
        // SAFETY: a valid action.
        unsafe { (api.sigaction)(libc::SIGUSR2, &a, ptr::null_mut()) };
    }
}

/// A sigaction case: signal, the action (None: null), old wanted, what
/// is installed before, whether SIGUSR2 is delivered after.
pub(crate) fn do_sigaction(
    api: &Api,
    sig: c_int,
    act: Option<libc::sigaction>,
    want_old: bool,
    before: Before,
    deliver_after: bool,
) -> Record {
    restore(api);
    before.install(api);
    let old = Buf::new(size_of::<libc::sigaction>());
    let act = act.map(|a| Buf::of(&a));
    let ap = const_ptr::<libc::sigaction>(&act);
    let op = if want_old {
        old.cast()
    } else {
        ptr::null_mut()
    };
    // SAFETY: our action and buffer (or null).
    let (r, e) = call(|| unsafe { (api.sigaction)(sig, ap, op) });
    let mut rec = Record::new(r, e);
    if want_old {
        rec = rec.out("old", describe_action(&old));
    }
    rec = rec.out("now", current_action(api));
    if deliver_after {
        rec = rec
            .out("delivered", deliver())
            .out("after_delivery", current_action(api));
    }
    restore(api);
    rec
}

/// A sigaction case: name, signal, action, old wanted, what is installed
/// before, a delivery after.
pub(crate) type SigactionRow = (
    &'static str,
    c_int,
    Option<libc::sigaction>,
    bool,
    Before,
    bool,
);

pub(crate) fn sigaction_cases() -> Vec<Case> {
    let usr2 = libc::SIGUSR2;
    let h1a = || Some(h1_action());
    let h2a = || Some(action(h2_ptr(), 0, &[]));
    let h3a = || Some(h3_action());
    let dfl = || Some(action(libc::SIG_DFL, 0, &[]));
    let ign = || Some(action(libc::SIG_IGN, 0, &[]));
    let list: Vec<SigactionRow> = vec![
        (
            "read the default action",
            usr2,
            None,
            true,
            Before::Nothing,
            false,
        ),
        (
            "neither action nor old",
            usr2,
            None,
            false,
            Before::Nothing,
            false,
        ),
        (
            "install h1 (SA_RESTART, mask SIGWINCH), deliver",
            usr2,
            h1a(),
            true,
            Before::Nothing,
            true,
        ),
        (
            "install h3 (SA_SIGINFO), deliver",
            usr2,
            h3a(),
            true,
            Before::Nothing,
            true,
        ),
        (
            "install h2 over h1: old is h1",
            usr2,
            h2a(),
            true,
            Before::H1,
            false,
        ),
        (
            "install h2 over h3: old is h3 with SA_SIGINFO",
            usr2,
            h2a(),
            true,
            Before::H3,
            false,
        ),
        (
            "SIG_DFL over h1: old is h1",
            usr2,
            dfl(),
            true,
            Before::H1,
            false,
        ),
        (
            "SIG_IGN over h3, deliver (ignored)",
            usr2,
            ign(),
            true,
            Before::H3,
            true,
        ),
        ("read h1 back", usr2, None, true, Before::H1, false),
        (
            "install h1 with SA_RESETHAND, deliver",
            usr2,
            Some(action(h1_ptr(), libc::SA_RESETHAND, &[])),
            true,
            Before::Nothing,
            true,
        ),
        (
            "install h1 with SA_NODEFER, deliver",
            usr2,
            Some(action(h1_ptr(), libc::SA_NODEFER, &[])),
            true,
            Before::Nothing,
            true,
        ),
        (
            "install h1 with SA_ONSTACK|SA_RESTART",
            usr2,
            Some(action(h1_ptr(), libc::SA_ONSTACK | libc::SA_RESTART, &[])),
            true,
            Before::Nothing,
            false,
        ),
        (
            "install h1 with an unknown flag bit (0x400)",
            usr2,
            Some(action(h1_ptr(), 0x400, &[])),
            true,
            Before::Nothing,
            false,
        ),
        (
            "SIG_IGN with SA_SIGINFO",
            usr2,
            Some(action(libc::SIG_IGN, libc::SA_SIGINFO, &[])),
            true,
            Before::Nothing,
            false,
        ),
        ("signal 0, read", 0, None, true, Before::Nothing, false),
        (
            "signal 0, install h1",
            0,
            h1a(),
            true,
            Before::Nothing,
            false,
        ),
        (
            "signal 65, SIG_DFL",
            65,
            dfl(),
            true,
            Before::Nothing,
            false,
        ),
        ("signal -1, read", -1, None, true, Before::Nothing, false),
        (
            "signal 32 (glibc's own), install h1",
            32,
            h1a(),
            true,
            Before::Nothing,
            false,
        ),
        (
            "signal 33 (glibc's own), read",
            33,
            None,
            true,
            Before::Nothing,
            false,
        ),
        (
            "SIGKILL, install h1",
            libc::SIGKILL,
            h1a(),
            true,
            Before::Nothing,
            false,
        ),
        (
            "SIGSTOP, SIG_DFL",
            libc::SIGSTOP,
            dfl(),
            true,
            Before::Nothing,
            false,
        ),
        (
            "SIGKILL, read",
            libc::SIGKILL,
            None,
            true,
            Before::Nothing,
            false,
        ),
    ];
    list.into_iter()
        .map(|(name, sig, act, old, before, d)| {
            case(name, move |api| do_sigaction(api, sig, act, old, before, d))
        })
        .collect()
}
