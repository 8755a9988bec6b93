//! A connection served as the hub serves it, in this process: a program's socket on one side
//! (a TCP connection of the test's), hosts on this machine's loopback on the other, listed as
//! addresses.

#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::*;
use crate::net::allow::AllowList;

fn net(rules: &[String]) -> Arc<SandboxNet> {
    let allow = AllowList::parse(rules.iter().map(String::as_str)).unwrap();
    Arc::new(SandboxNet::new(Arc::new(allow), Duration::from_secs(30)).unwrap())
}

/// A program's connection to the proxy, served on a thread of its own.
fn program(net: &Arc<SandboxNet>) -> (TcpStream, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (served, _) = listener.accept().unwrap();
    served.set_nonblocking(true).unwrap();
    let open = net.admit().unwrap();
    let thread = std::thread::spawn(move || serve(OwnedFd::from(served), open));
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    (client, thread)
}

/// A host that sends back what it reads, until its end.
fn echo() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = stream.try_clone().unwrap();
                let mut writer = stream;
                let _ = std::io::copy(&mut reader, &mut writer);
                let _ = writer.shutdown(Shutdown::Write);
            });
        }
    });
    port
}

/// An HTTP host that answers each connection's first request (keeping the connection open,
/// as hosts do) and sends every request head it read, and the bytes after it, to `seen`.
fn http_host(seen: mpsc::Sender<Vec<u8>>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let seen = seen.clone();
            std::thread::spawn(move || {
                stream
                    .set_read_timeout(Some(Duration::from_millis(500)))
                    .unwrap();
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                while head_end(&got).is_none() {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let body = b"hello";
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n",
                    body.len()
                );
                stream.write_all(answer.as_bytes()).unwrap();
                stream.write_all(body).unwrap();
                // Whatever else comes on this connection, until it goes quiet.
                while let Ok(n @ 1..) = stream.read(&mut buf) {
                    got.extend_from_slice(&buf[..n]);
                }
                let _ = seen.send(got);
            });
        }
    });
    port
}

fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while head_end(&head).is_none() {
        assert_eq!(stream.read(&mut byte).unwrap(), 1, "{head:?}");
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

#[test]
fn a_tunnel_carries_anything_both_ways_and_counts_it() {
    let port = echo();
    let net = net(&[format!("127.0.0.1:{port}")]);
    let (mut client, thread) = program(&net);
    // Bytes sent with the request, before the proxy answered, go first.
    let early = b"early bytes|";
    let mut request = format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").into_bytes();
    request.extend_from_slice(early);
    client.write_all(&request).unwrap();
    assert!(read_head(&mut client).starts_with("HTTP/1.1 200"));
    let payload: Vec<u8> = (0..4_000_000u32).map(|n| (n % 251) as u8).collect();
    let mut writer = client.try_clone().unwrap();
    let sent = payload.clone();
    let writing = std::thread::spawn(move || {
        writer.write_all(&sent).unwrap();
        writer.shutdown(Shutdown::Write).unwrap();
    });
    let mut back = Vec::new();
    client.read_to_end(&mut back).unwrap();
    writing.join().unwrap();
    thread.join().unwrap();
    assert_eq!(&back[..early.len()], early);
    assert!(
        back[early.len()..] == payload[..],
        "the tunnel changed the bytes"
    );
    let figures = net.figures.snapshot();
    assert_eq!(figures.connections, 1);
    assert_eq!(figures.bytes_out, (early.len() + payload.len()) as u64);
    assert_eq!(figures.bytes_in, (early.len() + payload.len()) as u64);
}

#[test]
fn a_request_inside_a_tunnel_is_only_bytes_to_its_host() {
    let port = echo();
    let net = net(&[format!("127.0.0.1:{port}")]);
    let (mut client, thread) = program(&net);
    client
        .write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .unwrap();
    read_head(&mut client);
    let inner = b"CONNECT unlisted.example:443 HTTP/1.1\r\n\r\n";
    client.write_all(inner).unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    let mut back = Vec::new();
    client.read_to_end(&mut back).unwrap();
    thread.join().unwrap();
    assert_eq!(back, inner, "the echo got the inner request as data");
    assert!(net.figures.snapshot().refused.is_empty());
}

#[test]
fn an_unlisted_host_or_port_is_refused_with_why_and_counted() {
    let port = echo();
    let net = net(&[format!("127.0.0.1:{port}")]);
    for (request, host, listed_port) in [
        (
            "CONNECT unlisted.example:443 HTTP/1.1\r\n\r\n",
            "unlisted.example",
            443,
        ),
        ("CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n", "127.0.0.1", 1),
        (
            "GET http://unlisted.example/x HTTP/1.1\r\n\r\n",
            "unlisted.example",
            80,
        ),
    ] {
        let (mut client, thread) = program(&net);
        client.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).unwrap();
        thread.join().unwrap();
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
        assert!(answer.contains("X-Link-Run-Refused: "), "{answer}");
        assert!(
            answer.contains(&format!("refused {host}:{listed_port}")),
            "{answer}"
        );
        let figures = net.figures.snapshot();
        let refused = figures
            .refused
            .iter()
            .find(|r| r.host == host && r.port == listed_port);
        assert!(refused.is_some(), "{figures:?}");
    }
    assert_eq!(net.figures.snapshot().connections, 0);
}

#[test]
fn a_plain_request_goes_alone_and_comes_back_with_close() {
    let (seen_tx, seen) = mpsc::channel();
    let port = http_host(seen_tx);
    let net = net(&[format!("127.0.0.1:{port}")]);
    let (mut client, thread) = program(&net);
    // Two requests at once, the second for a host not on the list: only the first goes.
    let requests = format!(
        "GET http://127.0.0.1:{port}/first HTTP/1.1\r\nHost: other.example\r\n\
         Proxy-Connection: keep-alive\r\n\r\n\
         GET http://unlisted.example/second HTTP/1.1\r\n\r\n"
    );
    client.write_all(requests.as_bytes()).unwrap();
    let mut answer = String::new();
    client.read_to_string(&mut answer).unwrap();
    thread.join().unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.contains("Connection: close\r\n"), "{answer}");
    assert!(!answer.contains("keep-alive"), "{answer}");
    assert!(answer.ends_with("\r\n\r\nhello"), "{answer}");
    let got = String::from_utf8(seen.recv_timeout(Duration::from_secs(5)).unwrap()).unwrap();
    assert_eq!(
        got,
        format!("GET /first HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"),
        "the host got the first request alone, in origin form, with its own host"
    );
}

#[test]
fn a_chunked_body_goes_whole_and_nothing_after_it() {
    let (seen_tx, seen) = mpsc::channel();
    let port = http_host(seen_tx);
    let net = net(&[format!("127.0.0.1:{port}")]);
    let (mut client, thread) = program(&net);
    let body = "5\r\nhello\r\n0\r\n\r\n";
    let request = format!(
        "POST http://127.0.0.1:{port}/up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
         {body}GET http://127.0.0.1:{port}/smuggled HTTP/1.1\r\n\r\n"
    );
    client.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    client.read_to_string(&mut answer).unwrap();
    thread.join().unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let got = String::from_utf8(seen.recv_timeout(Duration::from_secs(5)).unwrap()).unwrap();
    assert!(got.ends_with(&format!("\r\n\r\n{body}")), "{got}");
    assert!(!got.contains("smuggled"), "{got}");
}

#[test]
fn a_stop_ends_an_open_tunnel() {
    let port = echo();
    let net = net(&[format!("127.0.0.1:{port}")]);
    let (mut client, thread) = program(&net);
    client
        .write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .unwrap();
    read_head(&mut client);
    net.stop();
    thread.join().unwrap();
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    assert!(net.wait_drained(Duration::ZERO));
}

#[test]
fn what_is_no_proxy_request_is_answered_400() {
    let net = net(&[]);
    let (mut client, thread) = program(&net);
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    client.read_to_string(&mut answer).unwrap();
    thread.join().unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let refused = net.figures.snapshot().refused;
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].host, "");
}
