//! Transactions: MULTI, EXEC, DISCARD (WATCH is not here).
//!
//! After `MULTI` a connection's commands are checked (known, right number
//! of arguments) and queued, each answered `+QUEUED`; `EXEC` runs them one
//! after another and answers an array of their replies. A command refused
//! while queueing dooms the transaction: `EXEC` then answers `EXECABORT`
//! and runs nothing, as Redis does. An error while running (`WRONGTYPE`)
//! is only that command's reply.
//!
//! Nothing else runs in between: the runtime has one thread, and the
//! queued commands run one after another without parking (the one wait
//! is a first SUBSCRIBE's, which flushes what is pending to the socket
//! before the writer fiber takes it over, and reads or writes no key), so
//! they are one step, as in Redis.
//! This is what client libraries' default pipelines send (redis-py's
//! `r.pipeline()` wraps its commands in MULTI / EXEC).

use crate::Conn;
use crate::commands::execute;
use crate::resp::{array, error, simple};

/// The commands of an open transaction.
#[derive(Default)]
pub struct Queue {
    commands: Vec<Vec<Vec<u8>>>,
    /// A command was refused while queueing: EXEC will refuse them all.
    doomed: bool,
}

impl Queue {
    /// Takes the arguments of a checked command, to run at EXEC.
    pub fn push(&mut self, args: &mut [Vec<u8>]) {
        self.commands
            .push(args.iter_mut().map(std::mem::take).collect());
    }

    /// How many commands wait.
    pub fn len(&self) -> usize {
        self.commands.len()
    }

    /// A command of the transaction was refused.
    pub fn doom(&mut self) {
        self.doomed = true;
    }
}

pub fn multi(c: &mut Conn, _: &mut [Vec<u8>]) {
    if c.multi.is_some() {
        return error(&mut c.out, "ERR MULTI calls can not be nested");
    }
    c.multi = Some(Queue::default());
    simple(&mut c.out, "OK");
}

pub fn exec(c: &mut Conn, _: &mut [Vec<u8>]) {
    let Some(queue) = c.multi.take() else {
        return error(&mut c.out, "ERR EXEC without MULTI");
    };
    if queue.doomed {
        return error(
            &mut c.out,
            "EXECABORT Transaction discarded because of previous errors.",
        );
    }
    array(&mut c.out, queue.commands.len() as i64);
    for mut args in queue.commands {
        // QUIT is never queued (it closes at once), so every command
        // continues the connection.
        execute(c, &mut args);
    }
}

pub fn discard(c: &mut Conn, _: &mut [Vec<u8>]) {
    match c.multi.take() {
        Some(_) => simple(&mut c.out, "OK"),
        None => error(&mut c.out, "ERR DISCARD without MULTI"),
    }
}
