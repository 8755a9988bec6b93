//! The probe's side of the network checks (with `--net-allow`): from inside the sandbox, it
//! tries to reach serve's listeners on this machine's loopback directly, looks for a route
//! out (a UDP socket connected to an address, which sends nothing), and asks the proxy for a
//! name not on the allow-list. Each try is bounded: a connect waits [`WAIT`] at most.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use super::wire::{NetAnswer, NetRequest};

/// The longest a connection or an answer is waited for.
const WAIT: Duration = Duration::from_secs(2);
/// The most of the proxy's answer read.
const MAX_ANSWER: usize = 8192;

/// Tries what `request` asks.
pub fn probe(request: &NetRequest) -> NetAnswer {
    let (proxy_answer, proxy_refused) = ask_proxy(&request.proxy, &request.unlisted);
    NetAnswer {
        direct: request.direct.iter().map(|a| connects(a)).collect(),
        route: request.route.iter().map(|a| has_route(a)).collect(),
        proxy_answer,
        proxy_refused,
    }
}

/// Whether a TCP connection to `address` is made within [`WAIT`].
fn connects(address: &str) -> bool {
    address
        .parse::<SocketAddr>()
        .is_ok_and(|address| TcpStream::connect_timeout(&address, WAIT).is_ok())
}

/// Whether the sandbox has a route to `address`: a UDP socket connects to it (nothing is sent).
fn has_route(address: &str) -> bool {
    let Ok(address) = address.parse::<SocketAddr>() else {
        return false;
    };
    let local = match address {
        SocketAddr::V4(_) => "0.0.0.0:0",
        SocketAddr::V6(_) => "[::]:0",
    };
    UdpSocket::bind(local).is_ok_and(|socket| socket.connect(address).is_ok())
}

/// Asks the proxy at `proxy` for a tunnel to `unlisted`: its status line (or why none came),
/// and whether it is the proxy's refusal.
fn ask_proxy(proxy: &str, unlisted: &str) -> (String, bool) {
    let Ok(address) = proxy.parse::<SocketAddr>() else {
        return (format!("`{proxy}` is no address"), false);
    };
    let mut stream = match TcpStream::connect_timeout(&address, WAIT) {
        Ok(stream) => stream,
        Err(err) => return (format!("no connection to {proxy}: {err}"), false),
    };
    let _ = stream.set_read_timeout(Some(WAIT));
    let _ = stream.set_write_timeout(Some(WAIT));
    let request = format!("CONNECT {unlisted}:443 HTTP/1.1\r\nHost: {unlisted}:443\r\n\r\n");
    if let Err(err) = stream.write_all(request.as_bytes()) {
        return (format!("the request could not be sent: {err}"), false);
    }
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while answer.len() < MAX_ANSWER && !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(err) if answer.is_empty() => return (format!("no answer: {err}"), false),
            Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&answer);
    let status = text.lines().next().unwrap_or_default().to_owned();
    let refused = status.starts_with("HTTP/1.1 403")
        && text
            .lines()
            .any(|line| line.to_ascii_lowercase().starts_with("x-link-run-refused:"));
    if status.is_empty() {
        return ("no answer (the connection ended)".to_owned(), false);
    }
    (status, refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_in_reach_connects_and_loopback_has_a_route() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|err| panic!("binding: {err}"));
        let address = listener
            .local_addr()
            .unwrap_or_else(|err| panic!("{err}"))
            .to_string();
        assert!(connects(&address));
        assert!(has_route("127.0.0.1:9"));
        assert!(!connects("not an address"));
        // Nothing listens there: no answer, and no refusal of the proxy's.
        drop(listener);
        let (said, refused) = ask_proxy(&address, "unlisted.invalid");
        assert!(!refused, "{said}");
    }
}
