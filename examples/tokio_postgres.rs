//! tokio-postgres from fibers, with no tokio runtime (cargo feature
//! `tokio-io`): fibra's sockets implement tokio's `AsyncRead` and
//! `AsyncWrite`, so `Config::connect_raw` takes a `fibra::net::TcpStream`;
//! a fiber drives each connection's future, and every query is waited for
//! with `fibra::block_on_future`, which parks the fiber, not the thread.
//!
//! ```text
//! cargo run --release --features tokio-io --example tokio_postgres -- \
//!     "host=127.0.0.1 port=5432 user=postgres dbname=postgres" [FIBERS]
//! ```
//!
//! `FIBERS` fibers (default 100) each open a connection and run
//! `select pg_sleep(0.5)` at once: the run takes about half a second, on
//! one thread. `connect` below is the whole glue; copy it.

use std::time::Instant;

use fibra::block_on_future;
use tokio_postgres::{Client, Config, NoTls};

/// Opens a connection on a fibra socket and spawns the fiber that drives
/// it (the `Connection` future moves the bytes both ways, as a tokio task
/// spawned with `tokio::spawn(connection)` would). The fiber ends when the
/// client is dropped and the server has closed the connection.
fn connect(config: &Config) -> Result<Client, Box<dyn std::error::Error + Send + Sync>> {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        _ => "127.0.0.1".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let stream = fibra::net::TcpStream::connect((host.as_str(), port))?;
    stream.set_nodelay(true)?;
    let (client, connection) = block_on_future(config.connect_raw(stream, NoTls))?;
    fibra::Builder::new()
        .name("postgres-connection".into())
        .spawn(move || {
            if let Err(e) = block_on_future(connection) {
                eprintln!("connection error: {e}");
            }
        })?;
    Ok(client)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let config: Config = args
        .next()
        .unwrap_or_else(|| "host=127.0.0.1 user=postgres".into())
        .parse()
        .expect("a libpq-style connection string");
    let fibers: u32 = args.next().map_or(100, |n| n.parse().expect("a count"));
    fibra::run(move || {
        let start = Instant::now();
        let handles: Vec<_> = (0..fibers)
            .map(|i| {
                let config = config.clone();
                fibra::spawn(move || {
                    let client = connect(&config).expect("connect");
                    let i = i as i32;
                    let row = block_on_future(
                        client.query_one("select pg_sleep(0.5)::text, $1::int4 * 2", &[&i]),
                    )
                    .expect("query");
                    assert_eq!(row.get::<_, i32>(1), i * 2);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        println!(
            "{fibers} connections, {fibers} x pg_sleep(0.5) from fibers of one thread: {:.2?}",
            start.elapsed()
        );
    });
}
