//! A program's request to the proxy, read from its head: `CONNECT host:port` (a tunnel that
//! carries anything: https, git over https) or a plain HTTP request with an absolute URI
//! (`GET http://host[:port]/path`), which the proxy sends on as the one request of its
//! connection: in origin form, with the URI's host as `Host`, hop-by-hop headers taken out and
//! `Connection: close`. Anything else is not a proxy request.
//!
//! Bodies are framed as HTTP/1.1 frames them: `Content-Length` or `Transfer-Encoding:
//! chunked`. A request that frames its body ambiguously (both, several lengths that differ,
//! another transfer coding) is refused: the proxy and the host must agree on where the
//! request ends, or a second request could ride in its body.

use super::allow::Host;
use super::why::Why;

/// The largest request head read.
pub const MAX_HEAD: usize = 32 * 1024;
/// The most header lines in a head.
const MAX_HEADERS: usize = 128;
/// Headers that concern one connection only, never sent on (with those `Connection` names).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
    "host",
    "expect",
];

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// A tunnel to `host:port`.
    Connect {
        /// Its host.
        host: Host,
        /// Its port.
        port: u16,
    },
    /// One plain HTTP request.
    Http(HttpRequest),
}

/// A plain HTTP request, as it goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// Its host.
    pub host: Host,
    /// Its port.
    pub port: u16,
    /// The head to send the host.
    pub head: Vec<u8>,
    /// How its body is framed.
    pub body: Framing,
    /// Whether the program waits for `100 Continue` before it sends the body (the proxy says it
    /// and does not ask the host).
    pub expects_continue: bool,
}

/// How a request's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// It has none.
    None,
    /// After this many bytes.
    Length(u64),
    /// After its last chunk and trailers.
    Chunked,
}

/// A request the proxy cannot serve: the host and port it named, when it named them, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The host as written (empty when none could be read).
    pub host: String,
    /// The port (0 when none could be read).
    pub port: u16,
    /// Why.
    pub why: Why,
}

/// Where a head ends (the index past its empty line), if it is whole in `buf`.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| at + 4)
}

/// Reads a request head (up to and with its empty line).
pub fn read(head: &[u8]) -> Result<Asked, Unreadable> {
    let unreadable = |why: &str| Unreadable {
        host: String::new(),
        port: 0,
        why: Why::NotAProxyRequest(why.to_owned()),
    };
    let text = std::str::from_utf8(head).map_err(|_| unreadable("its head is not UTF-8"))?;
    // A lone CR or LF, or another control character, in a line: the host might read the head
    // otherwise than the proxy does.
    let body_of_head = &text[..text.len().saturating_sub(4)];
    if body_of_head
        .split("\r\n")
        .any(|line| line.chars().any(|c| c.is_control() && c != '\t'))
    {
        return Err(unreadable("its head holds a control character"));
    }
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut words = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(unreadable("its first line is not `METHOD TARGET HTTP/1.x`"));
    };
    if !is_token(method) || !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(unreadable("its first line is not `METHOD TARGET HTTP/1.x`"));
    }
    let mut headers: Vec<(&str, &str)> = Vec::new();
    for line in lines.take_while(|line| !line.is_empty()) {
        if headers.len() >= MAX_HEADERS {
            return Err(unreadable("it has too many header lines"));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(unreadable("a header line has no `:`"));
        };
        if !is_token(name) {
            return Err(unreadable(
                "a header's name is not a token (or a line is folded)",
            ));
        }
        headers.push((name, value.trim_matches([' ', '\t'])));
    }
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = authority(target, None)?;
        return Ok(Asked::Connect { host, port });
    }
    http(method, target, version, &headers).map(Asked::Http)
}

/// A plain HTTP request's head as it goes on, and its framing.
fn http(
    method: &str,
    target: &str,
    version: &str,
    headers: &[(&str, &str)],
) -> Result<HttpRequest, Unreadable> {
    let lower = target.to_ascii_lowercase();
    let rest = if lower.starts_with("http://") {
        &target["http://".len()..]
    } else if lower.starts_with("https://") {
        return Err(Unreadable {
            host: String::new(),
            port: 0,
            why: Why::NotAProxyRequest(
                "an https:// URI is asked for with CONNECT, not sent to the proxy".into(),
            ),
        });
    } else {
        return Err(Unreadable {
            host: String::new(),
            port: 0,
            why: Why::NotAProxyRequest(
                "its target is not an absolute http:// URI (is the program using the proxy \
                 as its server?)"
                    .into(),
            ),
        });
    };
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (written, path) = rest.split_at(split);
    let (host, port) = authority(written, Some(80))?;
    let refuse = |why: &str| Unreadable {
        host: host.text(),
        port,
        why: Why::NotAProxyRequest(why.to_owned()),
    };
    let path = match path.split('#').next().unwrap_or_default() {
        "" => "/".to_owned(),
        query if query.starts_with('?') => format!("/{query}"),
        path => path.to_owned(),
    };
    let named_by_connection: Vec<String> = headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, value)| value.split(','))
        .map(|token| token.trim().to_ascii_lowercase())
        .collect();
    let mut lengths = headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .flat_map(|(_, value)| value.split(','))
        .map(str::trim);
    let length = match lengths.next() {
        None => None,
        Some(first) => {
            let n = first
                .parse::<u64>()
                .ok()
                .filter(|_| first.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| refuse("its Content-Length is not a number"))?;
            if lengths.any(|other| other != first) {
                return Err(refuse("it gives several Content-Lengths"));
            }
            Some(n)
        }
    };
    let codings: Vec<&str> = headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("transfer-encoding"))
        .map(|(_, value)| *value)
        .collect();
    let body = match (codings.as_slice(), length) {
        ([], None) => Framing::None,
        ([], Some(n)) => Framing::Length(n),
        ([coding], None) if coding.eq_ignore_ascii_case("chunked") => Framing::Chunked,
        (_, Some(_)) => {
            return Err(refuse(
                "it gives both a Content-Length and a Transfer-Encoding",
            ));
        }
        _ => return Err(refuse("its Transfer-Encoding is not `chunked` alone")),
    };
    let expects_continue = headers.iter().any(|(name, value)| {
        name.eq_ignore_ascii_case("expect") && value.eq_ignore_ascii_case("100-continue")
    });
    let mut head = format!("{method} {path} {version}\r\n");
    let shown_host = match (&host, port) {
        (Host::Address(std::net::IpAddr::V6(v6)), 80) => format!("[{v6}]"),
        (Host::Address(std::net::IpAddr::V6(v6)), port) => format!("[{v6}]:{port}"),
        (host, 80) => host.text(),
        (host, port) => format!("{}:{port}", host.text()),
    };
    head.push_str(&format!("Host: {shown_host}\r\n"));
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if HOP_BY_HOP.contains(&lower.as_str()) || named_by_connection.contains(&lower) {
            continue;
        }
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("Connection: close\r\n\r\n");
    Ok(HttpRequest {
        host,
        port,
        head: head.into_bytes(),
        body,
        expects_continue,
    })
}

/// Reads `host[:port]` (`[v6][:port]`); without a port, `default` or an error.
fn authority(text: &str, default: Option<u16>) -> Result<(Host, u16), Unreadable> {
    let refuse = |host: &str, port: u16, why: String| Unreadable {
        host: host.to_owned(),
        port,
        why: Why::NotAProxyRequest(why),
    };
    if text.contains('@') {
        return Err(refuse(
            "",
            0,
            "its host has user information (`user@host`); send credentials as a header".into(),
        ));
    }
    let (host, port) = match text.rfind(':') {
        Some(at) if !text[at..].contains(']') => (&text[..at], Some(&text[at + 1..])),
        _ => (text, None),
    };
    let port = match (port, default) {
        (Some(digits), _) => digits
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0 && digits.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| refuse(host, 0, format!("`{digits}` is not a port")))?,
        (None, Some(default)) => default,
        (None, None) => return Err(refuse(host, 0, "CONNECT needs `host:port`".into())),
    };
    // A bracket-less IPv6 address has colons of its own: it needs its brackets.
    if host.contains(':') && !host.starts_with('[') {
        return Err(refuse(
            host,
            port,
            "an IPv6 address is written in brackets".into(),
        ));
    }
    let parsed = Host::parse(host).map_err(|why| Unreadable {
        host: host.to_owned(),
        port,
        why: Why::NotAHost(why),
    })?;
    Ok((parsed, port))
}

/// Whether `text` is an HTTP token (a method, a header's name).
fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests;
