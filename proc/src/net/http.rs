//! The two pieces of HTTP the proxy reads as bytes go by on a plain request: where a chunked
//! body ends ([`Chunked`]), so that nothing past the one request reaches the host, and the
//! host's answer head, which goes back with `Connection: close` ([`response_head`]), so that
//! the program asks its next request on a new connection, where the proxy reads it again.

/// A chunked body read as it goes: how much of what comes belongs to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chunked {
    state: State,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum State {
    /// The size line's hex digits so far (then an extension, then its CRLF).
    #[default]
    Start,
    Size(u64),
    Extension(u64),
    SizeLf(u64),
    Data(u64),
    DataCr,
    DataLf,
    /// After the last chunk: trailer lines, `empty` when the current line has nothing yet.
    Trailer {
        empty: bool,
    },
    TrailerLf {
        empty: bool,
    },
    Done,
}

impl Chunked {
    /// Reads `bytes`, the next of the body: how many of them belong to it (all, unless it ends
    /// among them). `Err` for bytes that are no chunked body.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<usize, &'static str> {
        let mut at = 0;
        while at < bytes.len() && self.state != State::Done {
            let byte = bytes[at];
            self.state = match self.state {
                State::Data(left) => {
                    let take = usize::try_from(left)
                        .unwrap_or(usize::MAX)
                        .min(bytes.len() - at);
                    at += take;
                    let left = left - take as u64;
                    self.state = if left == 0 {
                        State::DataCr
                    } else {
                        State::Data(left)
                    };
                    continue;
                }
                State::Start => State::Size(hex(byte).ok_or("a chunk size is not hex")?),
                State::Size(size) => match (byte, hex(byte)) {
                    (_, Some(digit)) => State::Size(
                        size.checked_mul(16)
                            .and_then(|s| s.checked_add(digit))
                            .ok_or("a chunk size is too large")?,
                    ),
                    (b';' | b' ' | b'\t', _) => State::Extension(size),
                    (b'\r', _) => State::SizeLf(size),
                    _ => return Err("a chunk size line is malformed"),
                },
                State::Extension(size) => match byte {
                    b'\r' => State::SizeLf(size),
                    b'\n' => return Err("a chunk size line ends without CR"),
                    _ => State::Extension(size),
                },
                State::SizeLf(size) => match byte {
                    b'\n' if size == 0 => State::Trailer { empty: true },
                    b'\n' => State::Data(size),
                    _ => return Err("a chunk size line ends without LF"),
                },
                State::DataCr => match byte {
                    b'\r' => State::DataLf,
                    _ => return Err("a chunk's data is longer than its size"),
                },
                State::DataLf => match byte {
                    b'\n' => State::Start,
                    _ => return Err("a chunk's data is longer than its size"),
                },
                State::Trailer { empty } => match byte {
                    b'\r' => State::TrailerLf { empty },
                    _ => State::Trailer { empty: false },
                },
                State::TrailerLf { empty } => match byte {
                    b'\n' if empty => State::Done,
                    b'\n' => State::Trailer { empty: true },
                    _ => return Err("a trailer line ends without LF"),
                },
                State::Done => State::Done,
            };
            at += 1;
        }
        Ok(at)
    }

    /// Whether the body has ended.
    pub fn done(&self) -> bool {
        self.state == State::Done
    }
}

fn hex(byte: u8) -> Option<u64> {
    (byte as char).to_digit(16).map(u64::from)
}

/// Headers of the host's answer that concern its connection only, replaced by
/// `Connection: close`.
const CONNECTION_HEADERS: &[&str] = &["connection", "keep-alive", "proxy-connection"];

/// A host's answer head, read whole: what goes to the program, and whether it is the final
/// answer (not a `1xx` interim one, after which another head comes). `Err`: not an answer.
pub fn response_head(head: &[u8]) -> Result<(Vec<u8>, bool), &'static str> {
    let text = std::str::from_utf8(head).map_err(|_| "the host's answer head is not UTF-8")?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut words = status_line.splitn(3, ' ');
    let (Some(version), Some(code)) = (words.next(), words.next()) else {
        return Err("the host's answer has no status line");
    };
    if !version.starts_with("HTTP/1.") || code.len() != 3 {
        return Err("the host's answer has no status line");
    }
    let code: u16 = code
        .parse()
        .map_err(|_| "the host's answer has no status")?;
    if (100..200).contains(&code) && code != 101 {
        return Ok((head.to_vec(), false));
    }
    let headers: Vec<&str> = lines.take_while(|line| !line.is_empty()).collect();
    let named: Vec<String> = headers
        .iter()
        .filter_map(|line| line.split_once(':'))
        .filter(|(name, _)| name.trim().eq_ignore_ascii_case("connection"))
        .flat_map(|(_, value)| value.split(','))
        .map(|token| token.trim().to_ascii_lowercase())
        .collect();
    let mut out = String::with_capacity(head.len() + 20);
    out.push_str(status_line);
    out.push_str("\r\n");
    for line in headers {
        let name = line
            .split_once(':')
            .map_or(line, |(name, _)| name)
            .trim()
            .to_ascii_lowercase();
        if CONNECTION_HEADERS.contains(&name.as_str()) || named.contains(&name) {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    Ok((out.into_bytes(), true))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_chunked_body_ends_after_its_trailers_whatever_the_pieces() {
        let body = b"4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nX-T: 1\r\n\r\nGET http://next/ HTTP/1.1";
        let end = body.len() - b"GET http://next/ HTTP/1.1".len();
        let mut whole = Chunked::default();
        assert_eq!(whole.feed(body).unwrap(), end);
        assert!(whole.done());
        for piece in 1..body.len() {
            let mut chunked = Chunked::default();
            let mut taken = 0;
            for part in body.chunks(piece) {
                taken += chunked.feed(part).unwrap();
                if chunked.done() {
                    break;
                }
            }
            assert_eq!(taken, end, "in pieces of {piece}");
        }
        let mut empty = Chunked::default();
        assert_eq!(empty.feed(b"0\r\n\r\nrest").unwrap(), 5);
    }

    #[test]
    fn what_is_no_chunked_body_is_an_error() {
        for bad in [
            &b"x\r\n"[..],
            b"4\nWiki",
            b"2\r\nabc\r\n",
            b"fffffffffffffffff\r\n",
        ] {
            assert!(Chunked::default().feed(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_final_answer_goes_back_with_connection_close() {
        let (head, last) = response_head(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive, X-Conn\r\n\
              Keep-Alive: timeout=5\r\nX-Conn: 1\r\n\r\n",
        )
        .unwrap();
        assert!(last);
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"
        );
        let (interim, last) = response_head(b"HTTP/1.1 100 Continue\r\n\r\n").unwrap();
        assert!(!last);
        assert_eq!(interim, b"HTTP/1.1 100 Continue\r\n\r\n");
        assert!(response_head(b"SSH-2.0\r\n\r\n").is_err());
    }
}
