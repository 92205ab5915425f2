//! `signal` and `siginterrupt` (glibc's `signal` installs what an
//! earlier `siginterrupt` chose), with the machinery of `signals.rs`.

use libc::{c_int, sighandler_t};

use crate::api::Api;
use crate::harness::{Case, Record, case, errno_name};
use crate::signals::{Before, current_action, deliver, h1_ptr, h2_ptr, handler_name, restore};
use crate::sys::call;

/// signal(sig, handler) twice (`then`, if any), each return value named,
/// the action as read back, and (if `deliver_after`) a delivery.
pub(crate) fn do_signal(
    api: &Api,
    sig: c_int,
    handler: sighandler_t,
    then: Option<sighandler_t>,
    interrupt: bool,
    deliver_after: bool,
) -> Record {
    restore(api);
    if interrupt {
        // SAFETY: siginterrupt takes a signal number.
        unsafe { (api.siginterrupt)(libc::SIGUSR2, 1) };
    }
    // SAFETY: signal(3) with a handler of ours or a disposition.
    let (r, e) = call(|| unsafe { (api.signal)(sig, handler) });
    let mut rec = Record::new(0, e).int("returned", handler_name(r));
    if let Some(h) = then {
        // SAFETY: as above.
        let (r2, e2) = call(|| unsafe { (api.signal)(sig, h) });
        rec = rec.int(
            "then_returned",
            format!("{} errno={}", handler_name(r2), errno_name(e2)),
        );
    }
    rec = rec.out("now", current_action(api));
    if deliver_after {
        rec = rec.out("delivered", deliver());
    }
    if interrupt {
        // SAFETY: as above.
        unsafe { (api.siginterrupt)(libc::SIGUSR2, 0) };
    }
    restore(api);
    rec
}

/// A signal case: name, signal, handler, a second handler, siginterrupt
/// first, a delivery after.
pub(crate) type SignalRow = (
    &'static str,
    c_int,
    sighandler_t,
    Option<sighandler_t>,
    bool,
    bool,
);

pub(crate) fn signal_cases() -> Vec<Case> {
    let usr2 = libc::SIGUSR2;
    let h1p = h1_ptr();
    let h2p = h2_ptr();
    let list: Vec<SignalRow> = vec![
        (
            "install h1 (returns SIG_DFL), deliver",
            usr2,
            h1p,
            None,
            false,
            true,
        ),
        (
            "install h1, then h2 (returns h1)",
            usr2,
            h1p,
            Some(h2p),
            false,
            false,
        ),
        (
            "install h1, then SIG_DFL",
            usr2,
            h1p,
            Some(libc::SIG_DFL),
            false,
            false,
        ),
        (
            "SIG_IGN, then SIG_DFL",
            usr2,
            libc::SIG_IGN,
            Some(libc::SIG_DFL),
            false,
            false,
        ),
        ("SIG_DFL", usr2, libc::SIG_DFL, None, false, false),
        (
            "SIG_ERR as the handler",
            usr2,
            libc::SIG_ERR,
            None,
            false,
            false,
        ),
        (
            "install h1 after siginterrupt(SIGUSR2, 1)",
            usr2,
            h1p,
            None,
            true,
            false,
        ),
        ("signal 0", 0, h1p, None, false, false),
        ("signal 65", 65, libc::SIG_IGN, None, false, false),
        ("signal -1", -1, libc::SIG_DFL, None, false, false),
        ("signal 32 (glibc's own)", 32, h1p, None, false, false),
        (
            "SIGKILL, SIG_IGN",
            libc::SIGKILL,
            libc::SIG_IGN,
            None,
            false,
            false,
        ),
        ("SIGSTOP, h1", libc::SIGSTOP, h1p, None, false, false),
    ];
    list.into_iter()
        .map(|(name, sig, h, then, intr, d)| {
            case(name, move |api| do_signal(api, sig, h, then, intr, d))
        })
        .collect()
}

/// siginterrupt(sig, flag) after `before`; the action read back, then
/// (if `then_signal`) the action `signal(SIGUSR2, h2)` installs (glibc's
/// `signal` remembers siginterrupt's choice), and (if `deliver_after`) a
/// delivery.
pub(crate) fn do_siginterrupt(
    api: &Api,
    sig: c_int,
    flag: c_int,
    before: Before,
    then_signal: bool,
    deliver_after: bool,
) -> Record {
    restore(api);
    before.install(api);
    // SAFETY: siginterrupt takes a signal number and a flag.
    let (r, e) = call(|| unsafe { (api.siginterrupt)(sig, flag) });
    let mut rec = Record::new(r, e).out("now", current_action(api));
    if then_signal {
        // SAFETY: a handler of ours.
        unsafe { (api.signal)(libc::SIGUSR2, h2_ptr()) };
        rec = rec.out("after_signal", current_action(api));
    }
    if deliver_after {
        rec = rec.out("delivered", deliver());
    }
    // SAFETY: as above.
    unsafe { (api.siginterrupt)(libc::SIGUSR2, 0) };
    restore(api);
    rec
}

pub(crate) fn siginterrupt_cases() -> Vec<Case> {
    let usr2 = libc::SIGUSR2;
    let list: Vec<(&str, c_int, c_int, Before, bool, bool)> = vec![
        (
            "SIGUSR2 at SIG_DFL, flag 1",
            usr2,
            1,
            Before::Nothing,
            false,
            false,
        ),
        (
            "SIGUSR2 with h1 (SA_RESTART), flag 1, deliver",
            usr2,
            1,
            Before::H1,
            false,
            true,
        ),
        (
            "SIGUSR2 with h3 (SA_SIGINFO), flag 1",
            usr2,
            1,
            Before::H3,
            false,
            false,
        ),
        ("SIGUSR2 with h1, flag 0", usr2, 0, Before::H1, false, false),
        ("SIGUSR2 with h3, flag 0", usr2, 0, Before::H3, false, false),
        (
            "flag 1, then signal(SIGUSR2, h2)",
            usr2,
            1,
            Before::Nothing,
            true,
            false,
        ),
        (
            "flag 0, then signal(SIGUSR2, h2)",
            usr2,
            0,
            Before::Nothing,
            true,
            false,
        ),
        ("signal 0", 0, 1, Before::Nothing, false, false),
        ("signal 65", 65, 1, Before::Nothing, false, false),
        ("signal -1", -1, 0, Before::Nothing, false, false),
        (
            "signal 32 (glibc's own)",
            32,
            1,
            Before::Nothing,
            false,
            false,
        ),
        ("SIGKILL", libc::SIGKILL, 1, Before::Nothing, false, false),
    ];
    list.into_iter()
        .map(|(name, sig, flag, before, then, d)| {
            case(name, move |api| {
                do_siginterrupt(api, sig, flag, before, then, d)
            })
        })
        .collect()
}
