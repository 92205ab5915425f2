//! A calloop event loop (the kind a Wayland compositor built on smithay
//! runs) that owns the thread and drives a fibra runtime as one of its
//! sources. Three sources, each an fd or a time the loop waits on:
//!
//! - the runtime's fd, as a level-triggered `Generic` source whose
//!   callback makes one [`turn_with_budget`](fibra::Runtime::turn_with_budget)
//!   of 2 ms (checked between fibers), so the loop's other sources wait
//!   for the fibers a few ms at most, never until they run out of work;
//! - a calloop `Timer` every 10 ms (the loop's own periodic work);
//! - a [`fibra::channel`]'s [`ReadyFd`](fibra::channel::ReadyFd), as
//!   another `Generic` source whose callback drains the channel with
//!   `try_recv` until `Empty`: the fibers' results reach the loop with
//!   no polling.
//!
//! The fibers serve TCP echo clients on loopback (blocking code: one
//! fiber per connection, each answer costs 300 µs of CPU and is followed
//! by a `yield_now`, so a busy connection cannot hold a turn) and tell the
//! loop of every answer and every closed connection through the
//! channel. The clients are plain threads that check every echo. When
//! they are done, the loop idles for a while: it wakes only for its
//! timer and for one message a fiber sends late.
//!
//! `cargo run --release --example calloop_loop [-- --clients N --requests M]`
//! prints what happened, e.g.:
//!
//! ```text
//! 8 clients x 200 requests: 1600 echoes checked by the clients
//! busy 0.52 s: 231 wake-ups, 231 turns (budget 2 ms: p50 2.24 ms, max 2.31 ms)
//! channel: 1609 messages in 116 drains (0 empty)
//! timer every 10 ms: 51 ticks while the fibers served, late p50 3.30 ms, max 4.37 ms
//! idle 0.30 s: 36 wake-ups, 30 ticks, 4 turns; a late message took 0.02 ms to reach the loop
//! ```
//!
//! A tick is late by up to two turns: calloop runs a dispatch's timer
//! callbacks after its fd callbacks, so a tick that falls due during one
//! turn waits for it, and for the turn the next dispatch makes first.
//! Without the budget, the same loop's turns (and so its ticks) wait for
//! every ready fiber. Idle, the loop wakes for its ticks and the late
//! message only: neither the runtime's fd nor the channel's is readable
//! when there is nothing to do.
//!
//! `tests/calloop_loop.rs` runs it and checks each line.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

use calloop::generic::Generic;
use calloop::timer::{TimeoutAction, Timer};
use calloop::{EventLoop, Interest, Mode, PostAction};
use fibra::channel::{Sender, TryRecvError, unbounded};

/// The loop's own timer period.
pub const TICK: Duration = Duration::from_millis(10);
/// The longest slice of the loop one runtime callback gives the fibers.
pub const BUDGET: Duration = Duration::from_millis(2);
/// What one echo costs a fiber (simulated work).
const ANSWER_COST: Duration = Duration::from_micros(300);
/// One request, one answer.
const MSG: usize = 64;

/// What to run.
pub struct Config {
    /// Echo clients, each a thread of its own.
    pub clients: usize,
    /// Round trips each client makes.
    pub requests: usize,
    /// How long the loop idles once the clients are done.
    pub idle: Duration,
}

/// What the fibers tell the outer loop through the channel.
enum Event {
    /// A connection answered one request.
    Answered,
    /// Connection `conn` was closed after that many answers.
    Closed { conn: usize, answers: u64 },
    /// A fiber's message of the idle phase, and when it was sent.
    Late(Instant),
}

/// What happened, for `main` to print and the test to check.
#[derive(Debug, Default)]
pub struct Report {
    /// Echoes the client threads received and found right.
    pub echoes_checked: u64,
    /// `Answered` messages the loop took from the channel.
    pub answered: u64,
    /// (connection, answers) of each `Closed` message, in arrival order.
    pub closed: Vec<(usize, u64)>,
    /// How long the clients kept the fibers busy.
    pub busy: Duration,
    /// `dispatch` calls (each one wake-up of the loop) while busy.
    pub busy_wakeups: usize,
    /// Runtime callbacks (each one budgeted turn) while busy.
    pub busy_turns: usize,
    /// How long each of those turns took.
    pub turn_times: Vec<Duration>,
    /// Timer ticks while busy, and how late each fired.
    pub tick_late: Vec<Duration>,
    /// Callbacks of the channel's fd, messages taken by them, calls of
    /// `try_recv` (all made in those callbacks), callbacks that found
    /// nothing.
    pub drains: usize,
    pub messages: usize,
    pub try_recvs: usize,
    pub empty_drains: usize,
    /// The idle phase: how long, wake-ups, timer ticks, runtime turns.
    pub idle: Duration,
    pub idle_wakeups: usize,
    pub idle_ticks: usize,
    pub idle_turns: usize,
    /// From the idle phase's fiber sending its message to the loop
    /// taking it (`None`: it never came).
    pub late_message: Option<Duration>,
}

/// The loop's state, handed to every callback.
#[derive(Default)]
struct Outer {
    idle: bool,
    report: Report,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1)?.parse().ok())
            .unwrap_or(default)
    };
    let config = Config {
        clients: arg("--clients", 8),
        requests: arg("--requests", 200),
        idle: Duration::from_millis(300),
    };
    match serve(&config) {
        Ok(r) => print(&config, &r),
        Err(e) => {
            eprintln!("calloop_loop: {e}");
            std::process::exit(1);
        }
    }
}

fn print(config: &Config, r: &Report) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (late_p50, late_max) = p50_max(&r.tick_late);
    let (turn_p50, turn_max) = p50_max(&r.turn_times);
    println!(
        "{} clients x {} requests: {} echoes checked by the clients",
        config.clients, config.requests, r.echoes_checked
    );
    println!(
        "busy {:.2} s: {} wake-ups, {} turns (budget {} ms: p50 {:.2} ms, max {:.2} ms)",
        r.busy.as_secs_f64(),
        r.busy_wakeups,
        r.busy_turns,
        BUDGET.as_millis(),
        ms(turn_p50),
        ms(turn_max),
    );
    println!(
        "channel: {} messages in {} drains ({} empty)",
        r.messages, r.drains, r.empty_drains
    );
    println!(
        "timer every {} ms: {} ticks while the fibers served, late p50 {:.2} ms, max {:.2} ms",
        TICK.as_millis(),
        r.tick_late.len(),
        ms(late_p50),
        ms(late_max)
    );
    println!(
        "idle {:.2} s: {} wake-ups, {} ticks, {} turns; a late message took {} to reach the loop",
        r.idle.as_secs_f64(),
        r.idle_wakeups,
        r.idle_ticks,
        r.idle_turns,
        r.late_message
            .map_or("forever".to_string(), |d| format!("{:.2} ms", ms(d)))
    );
}

/// The median and the largest of `times`.
pub fn p50_max(times: &[Duration]) -> (Duration, Duration) {
    let mut sorted = times.to_vec();
    sorted.sort();
    let p50 = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
    (p50, sorted.last().copied().unwrap_or_default())
}

/// Spins for `d`: a fiber's work.
fn work(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// One echo client (a plain thread): `requests` round trips, each echo
/// checked; returns how many were right.
fn client(addr: SocketAddr, id: usize, requests: usize) -> std::io::Result<u64> {
    let mut s = TcpStream::connect(addr)?;
    let mut checked = 0;
    for n in 0..requests {
        let mut msg = [0u8; MSG];
        msg[..8].copy_from_slice(&(id as u64).to_le_bytes());
        msg[8..16].copy_from_slice(&(n as u64).to_le_bytes());
        s.write_all(&msg)?;
        let mut echo = [0u8; MSG];
        s.read_exact(&mut echo)?;
        if echo == msg {
            checked += 1;
        }
    }
    Ok(checked)
}

/// The server's fibers: an acceptor, and one fiber per connection that
/// echoes and tells the loop.
fn serve_fibers(rt: &fibra::Runtime, events: Sender<Event>) -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let listener = fibra::net::TcpListener::from(listener);
    rt.spawn(move || {
        let mut conn_no = 0;
        while let Ok((mut conn, _)) = listener.accept() {
            let events = events.clone();
            let conn_id = conn_no;
            conn_no += 1;
            fibra::spawn(move || {
                let mut buf = [0u8; MSG];
                let mut answers = 0;
                while conn.read_exact(&mut buf).is_ok() {
                    work(ANSWER_COST);
                    if conn.write_all(&buf).is_err() {
                        break;
                    }
                    answers += 1;
                    let _ = events.send(Event::Answered);
                    // A busy client's next request is often there
                    // already: without this the fiber would answer on
                    // without ever parking, and a budget (checked
                    // between fibers) could not bound the turn.
                    fibra::yield_now();
                }
                let _ = events.send(Event::Closed {
                    conn: conn_id,
                    answers,
                });
            });
        }
    });
    Ok(addr)
}

/// The runtime's fd, borrowed for as long as the runtime is (a source
/// that holds it cannot outlive the runtime). A `Runtime` is `AsRawFd`;
/// calloop's `Generic` takes an `AsFd`.
fn fd_of(rt: &fibra::Runtime) -> BorrowedFd<'_> {
    // SAFETY: the runtime's fd is open as long as the runtime lives, and
    // the lifetime ties the borrow to it.
    unsafe { BorrowedFd::borrow_raw(rt.as_raw_fd()) }
}

/// Runs the whole thing: the server's fibers in a runtime driven by a
/// calloop loop, the clients on threads, then an idle phase.
pub fn serve(config: &Config) -> std::io::Result<Report> {
    let rt = fibra::Runtime::new()?;
    let (events, inbox) = unbounded::<Event>();
    let addr = serve_fibers(&rt, events.clone())?;

    let mut event_loop: EventLoop<'_, Outer> = EventLoop::try_new()?;
    let handle = event_loop.handle();

    // The runtime: readable whenever it has work. Level-triggered, so a
    // turn whose budget ran out (the fd stays readable) is followed by
    // another on the next dispatch, after the loop's other sources.
    let rt_ref = &rt;
    handle
        .insert_source(
            Generic::new(fd_of(&rt), Interest::READ, Mode::Level),
            move |_, _, outer: &mut Outer| {
                if outer.idle {
                    outer.report.idle_turns += 1;
                } else {
                    outer.report.busy_turns += 1;
                }
                let t = Instant::now();
                rt_ref.turn_with_budget(Some(Duration::ZERO), BUDGET);
                if !outer.idle {
                    outer.report.turn_times.push(t.elapsed());
                }
                Ok(PostAction::Continue)
            },
        )
        .map_err(|e| e.error)?;

    // The loop's own timer, rescheduled on its grid (a late tick does
    // not move the ones after it).
    handle
        .insert_source(Timer::from_duration(TICK), |deadline, _, outer| {
            let late = Instant::now().saturating_duration_since(deadline);
            if outer.idle {
                outer.report.idle_ticks += 1;
            } else {
                outer.report.tick_late.push(late);
            }
            let mut next = deadline + TICK;
            while next < Instant::now() {
                next += TICK; // missed ticks are skipped, not bunched
            }
            TimeoutAction::ToInstant(next)
        })
        .map_err(|e| e.error)?;

    // The channel: readable while it has something for `try_recv`.
    let inbox_fd = inbox.ready_fd()?;
    handle
        .insert_source(
            Generic::new(inbox_fd, Interest::READ, Mode::Level),
            move |_, _, outer| {
                let r = &mut outer.report;
                r.drains += 1;
                let mut took = 0;
                loop {
                    r.try_recvs += 1;
                    match inbox.try_recv() {
                        Ok(event) => {
                            took += 1;
                            match event {
                                Event::Answered => r.answered += 1,
                                Event::Closed { conn, answers } => r.closed.push((conn, answers)),
                                Event::Late(sent) => r.late_message = Some(sent.elapsed()),
                            }
                        }
                        Err(TryRecvError::Empty) => break, // the fd is clear again
                        Err(TryRecvError::Disconnected) => return Ok(PostAction::Remove),
                    }
                }
                r.messages += took;
                if took == 0 {
                    r.empty_drains += 1;
                }
                Ok(PostAction::Continue)
            },
        )
        .map_err(|e| e.error)?;

    let mut outer = Outer::default();
    // A loop that hangs is an error here, not a test that never ends.
    let give_up = Instant::now() + Duration::from_secs(60);
    let too_long = || std::io::Error::new(std::io::ErrorKind::TimedOut, "the loop hung");

    // Busy: the clients, until the loop has heard of every connection's
    // close.
    let start = Instant::now();
    let clients: Vec<_> = (0..config.clients)
        .map(|id| {
            let requests = config.requests;
            std::thread::spawn(move || client(addr, id, requests))
        })
        .collect();
    while outer.report.closed.len() < config.clients {
        event_loop.dispatch(None, &mut outer)?;
        outer.report.busy_wakeups += 1;
        if Instant::now() > give_up {
            return Err(too_long());
        }
    }
    outer.report.busy = start.elapsed();
    for c in clients {
        outer.report.echoes_checked += c.join().expect("a client panicked")?;
    }

    // Idle: only the timer, and one fiber's message halfway through.
    outer.idle = true;
    let half = config.idle / 2;
    rt.spawn(move || {
        fibra::sleep(half);
        let _ = events.send(Event::Late(Instant::now()));
    });
    let start = Instant::now();
    let end = start + config.idle;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        event_loop.dispatch(Some(left), &mut outer)?;
        outer.report.idle_wakeups += 1;
    }
    outer.report.idle = start.elapsed();
    // The loop (and its borrow of `rt`) goes first; dropping `rt` then
    // cancels the acceptor, still waiting for a connection.
    drop(event_loop);
    Ok(outer.report)
}
