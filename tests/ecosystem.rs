//! Blocking-style crates that know nothing of fibra, used unchanged over
//! fibra sockets: rustls (client and server), tungstenite (WebSocket) and
//! serde_json. Each takes a `Read + Write` and blocks in it; in a fiber
//! that parks the fiber, and the runtime serves the others.

use std::io::{BufReader, Read, Write};
use std::sync::Arc;
use std::time::Duration;

use fibra::net::{TcpListener, TcpStream};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};
use rustls::{ProtocolVersion, StreamOwned};

/// The bytes of message `n` of client `c`: every one different.
fn pattern(c: usize, n: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(31) ^ c.wrapping_mul(7) ^ n.wrapping_mul(13)) as u8)
        .collect()
}

/// A self-signed certificate for `localhost`, and configs that use it.
fn tls_configs() -> (Arc<ServerConfig>, Arc<ClientConfig>) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert: CertificateDer<'static> = made.cert.der().clone();
    let key: PrivateKeyDer<'static> =
        PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()).into();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .unwrap();
    let mut roots = RootCertStore::empty();
    roots.add(cert).unwrap();
    let client = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    (Arc::new(server), Arc::new(client))
}

#[test]
fn rustls_client_and_server_in_fibers() {
    const CLIENTS: usize = 20;
    const MESSAGES: usize = 50;
    let (server_config, client_config) = tls_configs();
    fibra::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // The server: a fiber per connection, echoing until close_notify.
        let server = fibra::spawn(move || {
            let mut echoes = Vec::new();
            for _ in 0..CLIENTS {
                let (sock, _) = listener.accept().unwrap();
                let config = server_config.clone();
                echoes.push(fibra::spawn(move || {
                    sock.set_read_timeout(Some(Duration::from_secs(30)))
                        .unwrap();
                    let conn = ServerConnection::new(config).unwrap();
                    let mut tls = StreamOwned::new(conn, sock);
                    let mut buf = [0u8; 8192];
                    let mut echoed = 0;
                    loop {
                        let n = tls.read(&mut buf).unwrap();
                        if n == 0 {
                            return echoed; // the client's close_notify
                        }
                        tls.write_all(&buf[..n]).unwrap();
                        echoed += n;
                    }
                }));
            }
            echoes.into_iter().map(|e| e.join().unwrap()).sum::<usize>()
        });
        // The clients: fibers of the same thread, all at once.
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let config = client_config.clone();
                fibra::spawn(move || {
                    let sock = TcpStream::connect(addr).unwrap();
                    sock.set_read_timeout(Some(Duration::from_secs(30)))
                        .unwrap();
                    let name = ServerName::try_from("localhost").unwrap();
                    let conn = ClientConnection::new(config, name).unwrap();
                    let mut tls = StreamOwned::new(conn, sock);
                    let mut sent = 0;
                    for n in 0..MESSAGES {
                        let msg = pattern(c, n, 1 + (n * 997) % 20_000);
                        tls.write_all(&msg).unwrap();
                        let mut back = vec![0u8; msg.len()];
                        tls.read_exact(&mut back).unwrap();
                        assert!(back == msg, "client {c}, message {n}: bytes differ");
                        sent += msg.len();
                    }
                    assert_eq!(tls.conn.protocol_version(), Some(ProtocolVersion::TLSv1_3));
                    tls.conn.send_close_notify();
                    tls.flush().unwrap();
                    sent
                })
            })
            .collect();
        let sent: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
        assert_eq!(server.join().unwrap(), sent);
    });
}

#[test]
fn tungstenite_echo_200_clients_100_messages() {
    use tungstenite::Message;
    const CLIENTS: usize = 200;
    const MESSAGES: usize = 100;
    // The server: on a runtime of two workers, a fiber per connection.
    let server = fibra::Runtime::builder().workers(2).build().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    server.spawn(move || {
        loop {
            let (sock, _) = listener.accept().unwrap();
            fibra::spawn(move || {
                sock.set_read_timeout(Some(Duration::from_secs(30)))
                    .unwrap();
                let mut ws = tungstenite::accept(sock).unwrap();
                loop {
                    match ws.read() {
                        Ok(msg @ (Message::Text(_) | Message::Binary(_))) => ws.send(msg).unwrap(),
                        Ok(_) => {} // ping, pong, close: tungstenite answers them
                        Err(tungstenite::Error::ConnectionClosed) => return,
                        Err(e) => panic!("server: {e}"),
                    }
                }
            });
        }
    });
    // The clients: fibers of this thread's runtime.
    let total = fibra::run(|| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                fibra::spawn(move || {
                    let sock = TcpStream::connect(addr).unwrap();
                    sock.set_read_timeout(Some(Duration::from_secs(30)))
                        .unwrap();
                    let (mut ws, response) = tungstenite::client(format!("ws://{addr}/echo"), sock)
                        .map_err(|e| e.to_string())
                        .unwrap();
                    assert_eq!(response.status(), 101);
                    let mut bytes = 0;
                    for n in 0..MESSAGES {
                        // Lengths across the 7-bit, 16-bit and 64-bit frame headers.
                        let len = [0, 1, 125, 126, 1000, 65_535, 65_536, 70_000][n % 8];
                        let len = if n % 8 >= 5 && c % 20 != 0 {
                            len / 64
                        } else {
                            len
                        };
                        let data = pattern(c, n, len);
                        let msg = if n % 2 == 0 {
                            let text: String =
                                data.iter().map(|b| (b'a' + b % 26) as char).collect();
                            Message::text(text)
                        } else {
                            Message::binary(data)
                        };
                        ws.send(msg.clone()).unwrap();
                        let back = ws.read().unwrap();
                        assert!(back == msg, "client {c}, message {n}: differs");
                        bytes += msg.len();
                    }
                    ws.close(None).unwrap();
                    // Until the server's close frame comes back.
                    loop {
                        match ws.read() {
                            Ok(_) => {}
                            Err(tungstenite::Error::ConnectionClosed) => break,
                            Err(e) => panic!("client {c} closing: {e}"),
                        }
                    }
                    bytes
                })
            })
            .collect();
        clients
            .into_iter()
            .map(|c| c.join().unwrap())
            .sum::<usize>()
    });
    assert!(total > CLIENTS * MESSAGES);
    drop(server); // cancels the accept loop
}

#[test]
fn serde_json_from_a_socket() {
    use serde_json::{Value, json};
    fibra::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = fibra::spawn(move || {
            let (mut sock, _) = listener.accept().unwrap();
            // A stream of values, each written in small pieces so that
            // values are split across reads.
            for i in 0..1000 {
                let v = json!({"id": i, "name": format!("fiber-{i}"), "tags": ["a", i % 7], "ok": i % 2 == 0});
                let text = serde_json::to_vec(&v).unwrap();
                for piece in text.chunks(7) {
                    sock.write_all(piece).unwrap();
                }
                if i % 100 == 0 {
                    fibra::yield_now();
                }
            }
            // Then one large document, and the end of the stream.
            let big = json!({"rows": (0..20_000).map(|i| json!([i, format!("row {i}")])).collect::<Vec<_>>()});
            let text = serde_json::to_vec(&big).unwrap();
            for piece in text.chunks(4096) {
                sock.write_all(piece).unwrap();
                fibra::yield_now();
            }
            sock.shutdown(std::net::Shutdown::Write).unwrap();
        });
        let sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut values =
            serde_json::Deserializer::from_reader(BufReader::new(sock)).into_iter::<Value>();
        for i in 0..1000 {
            let v = values.next().unwrap().unwrap();
            assert_eq!(v["id"], i);
            assert_eq!(v["name"], format!("fiber-{i}"));
        }
        let big = values.next().unwrap().unwrap();
        let rows = big["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 20_000);
        assert_eq!(rows[19_999], json!([19_999, "row 19999"]));
        assert!(values.next().is_none());
        writer.join().unwrap();

        // serde_json::from_reader: one value, read to the end of the stream.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = fibra::spawn(move || {
            let (mut sock, _) = listener.accept().unwrap();
            for piece in br#"{"hello": "fibra", "n": [1, 2, 3]}"#.chunks(5) {
                sock.write_all(piece).unwrap();
                fibra::sleep(Duration::from_millis(1));
            }
        });
        let sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let v: Value = serde_json::from_reader(sock).unwrap();
        assert_eq!(v, json!({"hello": "fibra", "n": [1, 2, 3]}));
        writer.join().unwrap();
    });
}
