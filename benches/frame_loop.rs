//! The frame loop of `examples/game_loop.rs` under 1 000 busy clients:
//! its frame period's p50, p99 and max with no load, with
//! `turn_with_budget` and with plain `turn`, and each p99 less the time
//! the game's thread waited for its core (the target: p99 under load
//! within 1.2× the p99 with none, where plain `turn` is not). The
//! example's docs have the figures, and where the tail comes from.
//!
//! `cargo bench --bench frame_loop` (`-- --clients N` for another load,
//! `-- --why` for the longest periods, each taken apart)

#[allow(dead_code)] // (its `main` and scene are the example's)
#[path = "../examples/game_loop.rs"]
mod game_loop;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let clients = args
        .iter()
        .position(|a| a == "--clients")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(1000);
    if let Err(e) = game_loop::measure(clients, args.iter().any(|a| a == "--why")) {
        eprintln!("frame_loop: {e}");
        std::process::exit(1);
    }
}
