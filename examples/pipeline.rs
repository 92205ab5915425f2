//! A word count over stdin as a pipeline of fibers joined by channels —
//! the coroutine `wc` of the literature, with bounded channels for
//! back-pressure.
//!
//! `cat README.md | cargo run --example pipeline`
//!
//! ```text
//! reader ──lines──▶ splitter ──words──▶ counter
//! ```
//!
//! The reader gets stdin through `spawn_blocking` (stdin may be a file,
//! which epoll cannot watch), so the other stages run while it waits.

use std::collections::HashMap;
use std::io::{self, BufRead};

use fibra::sync::mpsc;

fn main() {
    // `main` returning the error would print it with `{:?}`
    // (`Os { code: 98, kind: AddrInUse, .. }`): say it plainly instead.
    if let Err(e) = run() {
        eprintln!("pipeline: {e}");
        std::process::exit(1);
    }
}

fn run() -> io::Result<()> {
    fibra::run(|| {
        let (line_tx, line_rx) = mpsc::sync_channel::<Vec<String>>(4);
        let (word_tx, word_rx) = mpsc::sync_channel::<String>(256);

        let reader = fibra::spawn(move || -> io::Result<()> {
            let mut lines = io::BufReader::new(io::stdin()).lines();
            loop {
                // Read a batch of lines off the runtime's thread.
                let (batch, rest) = fibra::spawn_blocking(move || {
                    let batch: Vec<io::Result<String>> = lines.by_ref().take(256).collect();
                    (batch, lines)
                });
                lines = rest;
                if batch.is_empty() {
                    return Ok(()); // end of input: dropping line_tx ends the pipeline
                }
                let batch = batch.into_iter().collect::<io::Result<Vec<_>>>()?;
                if line_tx.send(batch).is_err() {
                    return Ok(());
                }
            }
        });

        let splitter = fibra::spawn(move || {
            let mut lines = 0usize;
            for batch in line_rx {
                for line in batch {
                    lines += 1;
                    for word in line.split_whitespace() {
                        let word = word
                            .trim_matches(|c: char| !c.is_alphanumeric())
                            .to_lowercase();
                        if !word.is_empty() && word_tx.send(word).is_err() {
                            return lines;
                        }
                    }
                }
            }
            lines
        });

        let counter = fibra::spawn(move || {
            let mut counts: HashMap<String, usize> = HashMap::new();
            for word in word_rx {
                *counts.entry(word).or_default() += 1;
            }
            counts
        });

        reader.join().expect("reader")?;
        let lines = splitter.join().expect("splitter");
        let counts = counter.join().expect("counter");
        let words: usize = counts.values().sum();
        println!("{lines} lines, {words} words, {} distinct", counts.len());
        let mut top: Vec<_> = counts.into_iter().collect();
        top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        for (word, n) in top.iter().take(5) {
            println!("{n:>6} {word}");
        }
        Ok(())
    })
}
