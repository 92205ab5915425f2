//! Graceful shutdown with a [`fibra::Group`]: a TCP job server whose
//! connections are the members of one group. On Ctrl-C it
//!
//! 1. stops accepting: the listener is closed, new connections are refused;
//! 2. gives the connections in flight a grace period (5 s, or `--grace
//!    SECS`): each answers the request it is on, or the next one it gets,
//!    and closes;
//! 3. cancels the connections left: each unwinds from where it waits, and
//!    its socket is closed as its destructors run;
//!
//! and prints what happened. A second Ctrl-C cancels at once.
//!
//! `cargo run --example shutdown -- 127.0.0.1:7878 --grace 5`, then
//! `nc 127.0.0.1 7878` in other terminals: type `work 3000` (a job of 3 s,
//! answered `done 3000`) or any line (echoed), and press Ctrl-C in the
//! server's. `tests/shutdown_example.rs` runs it with scripted clients.
//!
//! ```text
//! listening on 127.0.0.1:7878
//! Ctrl-C: stopped accepting; 2 in flight, 5s to finish
//! shut down: 1 finished, 1 cancelled
//! ```

use std::cell::Cell;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::rc::Rc;
use std::time::Duration;

use fibra::Group;
use fibra::net::{TcpListener, TcpStream};
use fibra::signal::{SIGINT, Signals};

/// The longest request line.
const MAX_LINE: usize = 4096;

/// A connection's end: the number of requests it served.
type Conn = io::Result<u64>;

fn main() {
    let mut addr = "127.0.0.1:7878".to_string();
    let mut grace = Duration::from_secs(5);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--grace" => match args.next().map(|s| s.parse::<f64>()) {
                Some(Ok(secs)) if secs >= 0.0 => grace = Duration::from_secs_f64(secs),
                _ => {
                    eprintln!("usage: shutdown [ADDR] [--grace SECS]");
                    std::process::exit(2);
                }
            },
            _ => addr = arg,
        }
    }
    if let Err(e) = serve(&addr, grace) {
        eprintln!("shutdown: {e}");
        std::process::exit(1);
    }
}

/// Serves on `addr` until Ctrl-C, then shuts down with `grace` for the
/// connections in flight.
pub fn serve(addr: &str, grace: Duration) -> io::Result<()> {
    // First of all: from here on, Ctrl-C is ours (it no longer kills).
    let mut ctrl_c = Signals::new(&[SIGINT])?;
    fibra::run(|| {
        let listener = TcpListener::bind(addr)?;
        println!("listening on {}", listener.local_addr()?);
        let conns: Rc<Group<Conn>> = Rc::new(Group::new());
        let closing = Rc::new(Cell::new(false));
        let acceptor = fibra::spawn({
            let (conns, closing) = (conns.clone(), closing.clone());
            move || accept(&listener, &conns, &closing)
        });

        ctrl_c.wait()?;
        acceptor.cancel(); // unwinds it from `accept`: the listener is closed
        let _ = acceptor.join();
        closing.set(true);
        while let Some(ended) = conns.try_join_next() {
            log(ended); // (ended before the Ctrl-C)
        }
        let in_flight = conns.len();
        println!("Ctrl-C: stopped accepting; {in_flight} in flight, {grace:?} to finish");
        let hurry = fibra::spawn({
            let conns = conns.clone();
            move || {
                if ctrl_c.wait().is_ok() {
                    println!("second Ctrl-C: cancelling now");
                    conns.cancel();
                }
            }
        });

        let mut tally = Tally::default();
        if fibra::timeout(grace, || tally.drain(&conns)).is_err() {
            conns.cancel(); // the grace is over
            tally.drain(&conns);
        }
        hurry.cancel();
        println!(
            "shut down: {} finished, {} cancelled",
            tally.finished, tally.cancelled
        );
        Ok(())
    })
}

/// Accepts connections, each a member of `conns`, until cancelled.
fn accept(listener: &TcpListener, conns: &Group<Conn>, closing: &Rc<Cell<bool>>) {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                let closing = closing.clone();
                conns.spawn(move || connection(stream, &closing));
            }
            Err(e) => {
                eprintln!("accept: {e}"); // (out of fds: back off)
                fibra::sleep(Duration::from_millis(10));
            }
        }
        // A long-lived group: collect the connections that ended.
        while let Some(ended) = conns.try_join_next() {
            log(ended);
        }
    }
}

/// One connection: a request line in, a line out. `work MS` is a job of
/// MS milliseconds (a query, a call to another service), answered
/// `done MS`; any other line is echoed. Once the server is closing, the
/// connection ends after the answer it is on.
fn connection(stream: TcpStream, closing: &Cell<bool>) -> Conn {
    let mut lines = BufReader::new(&stream);
    let mut line = String::new();
    let mut served = 0;
    loop {
        line.clear();
        let n = (&mut lines).take(MAX_LINE as u64).read_line(&mut line)?;
        if n == 0 {
            return Ok(served); // the client is done
        }
        if n == MAX_LINE && !line.ends_with('\n') {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "line too long"));
        }
        let request = line.trim_end();
        let reply = match request.strip_prefix("work ").map(str::parse) {
            Some(Ok(ms)) => {
                fibra::sleep(Duration::from_millis(ms));
                format!("done {ms}\n")
            }
            _ => format!("{request}\n"),
        };
        (&stream).write_all(reply.as_bytes())?;
        served += 1;
        if closing.get() {
            return Ok(served);
        }
    }
}

/// How the connections in flight at Ctrl-C ended.
#[derive(Default)]
struct Tally {
    finished: usize,
    cancelled: usize,
}

impl Tally {
    /// Waits for every member of `conns`, counting how each ended.
    fn drain(&mut self, conns: &Group<Conn>) {
        while let Some(ended) = conns.join_next() {
            match ended {
                Err(e) if e.is_cancelled() => self.cancelled += 1,
                ended => {
                    self.finished += 1;
                    log(ended);
                }
            }
        }
    }
}

/// Reports a connection that ended in an error.
fn log(ended: Result<Conn, fibra::JoinError>) {
    match ended {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => eprintln!("connection: {e}"),
        Err(e) => eprintln!("connection: {e}"),
    }
}
