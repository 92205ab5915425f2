//! examples/calloop_loop.rs, run and checked: a calloop loop drives a
//! fibra runtime as a source beside a calloop timer and a channel's
//! `ReadyFd`. Its fibers serve echo clients on loopback; the loop's timer
//! keeps firing while they work; their messages reach the loop through
//! the channel's fd alone; an idle loop sleeps. Bounds are generous (a
//! noisy 2-core VM): they tell working from broken, not fast from slow.

#[allow(dead_code)] // (its `main` and printing are the example's)
#[path = "../examples/calloop_loop.rs"]
mod calloop_loop;

use std::time::Duration;

use calloop_loop::{BUDGET, Config, TICK, p50_max, serve};

#[test]
fn calloop_drives_fibers_timer_and_channel() {
    let config = Config {
        clients: 8,
        requests: 150,
        idle: Duration::from_millis(400),
    };
    let r = serve(&config).expect("the loop ran");
    let total = (config.clients * config.requests) as u64;

    // Every client got every echo, right.
    assert_eq!(r.echoes_checked, total, "{r:#?}");

    // Every answer and every close reached the loop through the channel.
    assert_eq!(r.answered, total, "{r:#?}");
    let mut conns: Vec<_> = r.closed.iter().map(|&(c, _)| c).collect();
    conns.sort();
    assert_eq!(conns, (0..config.clients).collect::<Vec<_>>(), "{r:#?}");
    assert!(
        r.closed.iter().all(|&(_, n)| n == config.requests as u64),
        "{r:#?}"
    );

    // With no polling: `try_recv` is called only in the fd's callbacks,
    // each of which found something and ended on one `Empty`. (The
    // messages: one per answer, one per close, the idle phase's one.)
    assert_eq!(
        r.messages as u64,
        total + config.clients as u64 + 1,
        "{r:#?}"
    );
    assert_eq!(r.try_recvs, r.messages + r.drains, "{r:#?}");
    assert_eq!(
        r.empty_drains, 0,
        "the fd was readable with nothing to take"
    );

    // The runtime's callback made budgeted turns: most end near the
    // budget (one fiber's slice past it), not after every ready fiber.
    let (turn_p50, _) = p50_max(&r.turn_times);
    assert!(turn_p50 < BUDGET * 5, "turns p50 {turn_p50:?}: {r:#?}");

    // The loop's timer fired on its period while the fibers worked: a
    // tick waits at most for the turn in progress and the one dispatched
    // before it, not for the fibers to run out of work.
    let expected = (r.busy.as_secs_f64() / TICK.as_secs_f64()) as usize;
    assert!(
        r.tick_late.len() * 2 >= expected,
        "{} ticks in {:?}: {r:#?}",
        r.tick_late.len(),
        r.busy
    );
    let (late_p50, _) = p50_max(&r.tick_late);
    assert!(
        late_p50 < Duration::from_millis(20),
        "ticks late p50 {late_p50:?}"
    );

    // Idle, the loop blocks: it wakes for its timer and for the fiber's
    // one late message (a sleep's end, then the channel), no more.
    let idle_ticks_expected = (r.idle.as_secs_f64() / TICK.as_secs_f64()) as usize;
    assert!(r.idle_ticks * 2 >= idle_ticks_expected, "{r:#?}");
    assert!(
        r.idle_wakeups <= r.idle_ticks + 8,
        "an idle loop spun: {} wake-ups for {} ticks",
        r.idle_wakeups,
        r.idle_ticks
    );
    assert!(
        r.idle_turns <= 8,
        "the runtime's fd stayed readable with nothing to do: {r:#?}"
    );
    let late = r.late_message.expect("the late message reached the loop");
    assert!(late < Duration::from_secs(1), "late message took {late:?}");
}
