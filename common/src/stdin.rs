//! A run's stdin: how `start` sets it up (the record's `launch.stdin`), and the channel through
//! which `write` reaches an interactive run's supervisor, `<state>/<id>.in`.
//!
//! # In the record
//!
//! `launch.stdin` (absent in older records, and for a run whose stdin is empty):
//!
//! ```json
//! {"input_bytes": 12, "mode": "ends"}
//! {"mode": "interactive"}
//! {"mode": {"tty": {"cols": 80, "rows": 24}}}
//! ```
//!
//! `input_bytes` is the length of `start`'s `input`, handed to the supervisor on its fd 3 (a
//! pipe `start` filled and closed: the record never holds the text). `mode` says what follows
//! it: `ends` (stdin ends after the input, or at once without one), `interactive` (a pipe the
//! supervisor holds open, which `write` adds to), or `tty` (the run's stdin, stdout and stderr
//! are a pseudo-terminal of its own, of that size, whose master the supervisor holds).
//!
//! # The channel
//!
//! An interactive run's supervisor listens on `<state>/<id>.in`, a Unix `SOCK_SEQPACKET` socket
//! made mode 0600 inside the 0700 state folder, which no sandbox sees. It answers only a peer of
//! its own user (`SO_PEERCRED`). One connection carries one request and one reply:
//!
//! - the request, one message: a flags byte ([`EOF_FLAG`]: close stdin after the text), then
//!   the text's bytes, at most [`WRITE_MAX`];
//! - the reply, one message: a [`ChannelReply`] as JSON.
//!
//! The supervisor writes the text to the program's stdin without blocking: what the pipe (or
//! the terminal) does not take at once is not queued, and the reply says how much went in. The
//! socket is removed when the run ends, by its supervisor, or by the sweep that records it lost.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::net::{
    AddressFamily, RecvFlags, SendFlags, SocketAddrUnix, SocketFlags, SocketType, sockopt,
};
use serde::{Deserialize, Serialize};

use crate::id::RunId;
use crate::layout::StateDir;

/// The most `input` a `start` takes, and the most one `write` sends: 64 KiB, a pipe's default
/// capacity, so that what is taken never waits in Link Run for the program.
pub const WRITE_MAX: usize = 64 * 1024;
/// The most `input` a `start` on a terminal (`tty`) takes: what a terminal holds before its
/// program reads (a pseudo-terminal takes about 8 KiB, echo included, and a line of its
/// program's at most 4095 bytes in the terminal's own mode); more is sent with `write`.
pub const TTY_INPUT_MAX: usize = 4096;
/// The request's flag: close the program's stdin once the text is written.
pub const EOF_FLAG: u8 = 1;
/// A terminal's size when `start` names none.
pub const DEFAULT_SIZE: TermSize = TermSize { cols: 80, rows: 24 };
/// How long either side waits for the other's message on a connection.
pub const EXCHANGE_WAIT: Duration = Duration::from_secs(2);

/// How a run's stdin is set up (`launch.stdin`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stdin {
    /// Bytes of `start`'s `input`, handed to the supervisor on its fd 3; 0 for none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub input_bytes: u64,
    /// What follows the input.
    #[serde(default)]
    pub mode: Mode,
}

/// What a run's stdin is after its input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// It ends (today's runs: empty).
    #[default]
    Ends,
    /// A pipe the supervisor holds open; `write` adds to it.
    Interactive,
    /// A pseudo-terminal of the run's own, for stdin, stdout and stderr.
    Tty(TermSize),
}

/// A terminal's size in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TermSize {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Stdin {
    /// Whether this is an empty stdin that ends at once (what older records meant).
    pub fn is_default(&self) -> bool {
        *self == Stdin::default()
    }

    /// Whether `write` may add to it: `interactive` or `tty`.
    pub fn stays_open(&self) -> bool {
        !matches!(self.mode, Mode::Ends)
    }

    /// The terminal's size, for a run on a terminal.
    pub fn tty(&self) -> Option<TermSize> {
        match self.mode {
            Mode::Tty(size) => Some(size),
            _ => None,
        }
    }
}

/// The supervisor's answer to a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum ChannelReply {
    /// Every byte was taken; `closed` when stdin was closed after them (the request's eof).
    Taken {
        /// Bytes the program's stdin took.
        taken: u64,
        /// Whether stdin is closed now.
        closed: bool,
    },
    /// Only `taken` bytes fit at once: the program is not reading. The rest was not sent, and
    /// stdin stays open.
    Full {
        /// Bytes the program's stdin took.
        taken: u64,
    },
    /// Stdin was closed by an earlier eof.
    Closed,
    /// The program's side of stdin is closed: it closed it, or it ended.
    ProgramClosed,
    /// The request was malformed.
    Invalid {
        /// Why.
        why: String,
    },
}

/// `<state>/<id>.in`.
pub fn channel_path(state: &StateDir, id: &RunId) -> PathBuf {
    state.stdin_channel(id)
}

/// A Unix socket address for `path`: the path itself, or, when it is longer than a socket
/// address holds, the same file reached through a handle on its folder
/// (`/proc/self/fd/<n>/<name>`), returned with the handle to keep open meanwhile.
fn address(path: &Path) -> io::Result<(SocketAddrUnix, Option<OwnedFd>)> {
    if let Ok(addr) = SocketAddrUnix::new(path) {
        return Ok((addr, None));
    }
    let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    let handle = rustix::fs::open(
        folder,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let mut short = OsString::from(format!("/proc/self/fd/{}/", handle.as_raw_fd()));
    short.push(name);
    Ok((SocketAddrUnix::new(Path::new(&short))?, Some(handle)))
}

fn with_path(path: &Path, what: &str) -> impl Fn(io::Error) -> io::Error + use<> {
    let path = path.display().to_string();
    let what = what.to_owned();
    move |err| {
        io::Error::new(
            err.kind(),
            format!("{what} {path}: {}", crate::Causes(&err)),
        )
    }
}

/// Whether the peer of `conn` runs as this process's user.
fn peer_is_me(conn: &OwnedFd) -> io::Result<bool> {
    let peer = sockopt::socket_peercred(conn)?;
    Ok(peer.uid == rustix::process::geteuid())
}

/// Why a request could not be sent.
#[derive(Debug)]
pub enum SendError {
    /// No supervisor listens there (yet, or any more).
    NoChannel(io::Error),
    /// Anything else, said with the path.
    Io(io::Error),
}

/// Sends one request to run `id`'s supervisor and waits up to [`EXCHANGE_WAIT`] for its reply.
pub fn send(
    state: &StateDir,
    id: &RunId,
    text: &[u8],
    eof: bool,
) -> Result<ChannelReply, SendError> {
    let path = channel_path(state, id);
    let io_err = with_path(&path, "the run's stdin channel");
    let (addr, _handle) = address(&path).map_err(|e| SendError::Io(io_err(e)))?;
    let conn = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| SendError::Io(io_err(e.into())))?;
    match rustix::net::connect(&conn, &addr) {
        Ok(()) => {}
        Err(e @ (rustix::io::Errno::NOENT | rustix::io::Errno::CONNREFUSED)) => {
            return Err(SendError::NoChannel(io_err(e.into())));
        }
        Err(e) => return Err(SendError::Io(io_err(e.into()))),
    }
    let exchange = || -> io::Result<ChannelReply> {
        if !peer_is_me(&conn)? {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "its listener runs as another user",
            ));
        }
        set_timeouts(&conn)?;
        let mut message = Vec::with_capacity(text.len() + 1);
        message.push(if eof { EOF_FLAG } else { 0 });
        message.extend_from_slice(text);
        rustix::net::send(&conn, &message, SendFlags::NOSIGNAL)?;
        let mut buf = vec![0u8; 4096];
        let (n, _) = rustix::net::recv(&conn, &mut buf, RecvFlags::empty())?;
        serde_json::from_slice(&buf[..n]).map_err(io::Error::other)
    };
    exchange().map_err(|e| SendError::Io(io_err(e)))
}

fn set_timeouts(conn: &OwnedFd) -> io::Result<()> {
    sockopt::set_socket_timeout(conn, sockopt::Timeout::Recv, Some(EXCHANGE_WAIT))?;
    sockopt::set_socket_timeout(conn, sockopt::Timeout::Send, Some(EXCHANGE_WAIT))?;
    Ok(())
}

/// The supervisor's end: a listening socket at `<state>/<id>.in`, removed when dropped.
#[derive(Debug)]
pub struct Listener {
    socket: OwnedFd,
    path: PathBuf,
}

/// One request, read from a connection.
#[derive(Debug)]
pub struct ChannelRequest {
    /// The connection, to answer on.
    pub conn: OwnedFd,
    /// The text to write.
    pub text: Vec<u8>,
    /// Whether to close stdin after it.
    pub eof: bool,
}

impl Listener {
    /// Listens at `<state>/<id>.in`, made 0600 (a name left there by a crash is replaced).
    /// Non-blocking and close-on-exec, for the supervisor's `poll`.
    pub fn bind(state: &StateDir, id: &RunId) -> io::Result<Listener> {
        let path = channel_path(state, id);
        let io_err = with_path(&path, "listening on the run's stdin channel");
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_err(e)),
            _ => {}
        }
        let socket = rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            None,
        )
        .map_err(|e| io_err(e.into()))?;
        let (addr, _handle) = address(&path).map_err(&io_err)?;
        rustix::net::bind(&socket, &addr).map_err(|e| io_err(e.into()))?;
        let listener = Listener { socket, path };
        // The folder is the user's alone already; the mode says so of the socket itself.
        rustix::fs::chmod(&listener.path, rustix::fs::Mode::from_raw_mode(0o600))
            .map_err(|e| io_err(e.into()))?;
        rustix::net::listen(&listener.socket, 8).map_err(|e| io_err(e.into()))?;
        Ok(listener)
    }

    /// The socket, to poll: readable when a request waits.
    pub fn fd(&self) -> impl AsFd + '_ {
        &self.socket
    }

    /// The next waiting request, if any (`None`: none waits). A connection from another
    /// user, or one that sends nothing within [`EXCHANGE_WAIT`], is dropped unanswered.
    pub fn next(&self) -> io::Result<Option<ChannelRequest>> {
        loop {
            let conn = match rustix::net::accept_with(&self.socket, SocketFlags::CLOEXEC) {
                Ok(conn) => conn,
                Err(rustix::io::Errno::AGAIN) => return Ok(None),
                Err(rustix::io::Errno::INTR | rustix::io::Errno::CONNABORTED) => continue,
                Err(e) => return Err(e.into()),
            };
            match read_request(conn) {
                Ok(Some(request)) => return Ok(Some(request)),
                Ok(None) => {}
                Err(err) => {
                    tracing::warn!("a request on the stdin channel: {}", crate::Causes(&err))
                }
            }
        }
    }
}

/// Reads the one message of a connection; `None` for a peer of another user.
fn read_request(conn: OwnedFd) -> io::Result<Option<ChannelRequest>> {
    if !peer_is_me(&conn)? {
        tracing::warn!("refused a connection to the stdin channel from another user");
        return Ok(None);
    }
    set_timeouts(&conn)?;
    let mut buf = vec![0u8; WRITE_MAX + 2];
    let (n, whole) = rustix::net::recv(&conn, &mut buf, RecvFlags::TRUNC)?;
    if n == 0 || whole > WRITE_MAX + 1 {
        let why = if n == 0 {
            "an empty request".to_owned()
        } else {
            format!("{} bytes at once; at most {WRITE_MAX}", whole - 1)
        };
        answer(&conn, &ChannelReply::Invalid { why });
        return Ok(None);
    }
    buf.truncate(n);
    let eof = buf[0] & EOF_FLAG != 0;
    buf.remove(0);
    Ok(Some(ChannelRequest {
        conn,
        text: buf,
        eof,
    }))
}

/// Answers a request (best effort: a peer that left hears nothing).
pub fn answer(conn: &OwnedFd, reply: &ChannelReply) {
    match serde_json::to_vec(reply) {
        Ok(bytes) => {
            if let Err(err) = rustix::net::send(conn, &bytes, SendFlags::NOSIGNAL) {
                tracing::warn!("answering on the stdin channel: {}", crate::Causes(&err));
            }
        }
        Err(err) => tracing::warn!("answering on the stdin channel: {}", crate::Causes(&err)),
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                tracing::warn!(path = %self.path.display(), "removing the stdin channel: {}", crate::Causes(&e));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn older_records_mean_an_empty_stdin() {
        let stdin: Stdin = serde_json::from_str("{}").unwrap();
        assert!(stdin.is_default() && !stdin.stays_open());
        let tty: Stdin =
            serde_json::from_str(r#"{"mode": {"tty": {"cols": 100, "rows": 30}}}"#).unwrap();
        assert_eq!(
            tty.tty(),
            Some(TermSize {
                cols: 100,
                rows: 30
            })
        );
        assert!(tty.stays_open());
        let back = serde_json::to_value(Stdin {
            input_bytes: 3,
            mode: Mode::Interactive,
        })
        .unwrap();
        assert_eq!(
            back,
            serde_json::json!({"input_bytes": 3, "mode": "interactive"})
        );
    }

    #[test]
    fn a_request_and_its_reply() {
        let dir = tempfile::tempdir().unwrap();
        // A folder deep enough that its path does not fit a socket address.
        let deep = dir.path().join("x".repeat(60)).join("y".repeat(60));
        let state = StateDir::new(&deep);
        state.create().unwrap();
        let id = RunId::generate().unwrap();
        assert!(matches!(
            send(&state, &id, b"x", false),
            Err(SendError::NoChannel(_))
        ));
        let listener = Listener::bind(&state, &id).unwrap();
        let mode = std::fs::metadata(channel_path(&state, &id)).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
            0o600
        );
        assert!(listener.next().unwrap().is_none());
        let client = std::thread::spawn({
            let state = state.clone();
            let id = id.clone();
            move || send(&state, &id, b"hello\n", true)
        });
        let request = loop {
            if let Some(request) = listener.next().unwrap() {
                break request;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(
            (request.text.as_slice(), request.eof),
            (&b"hello\n"[..], true)
        );
        answer(
            &request.conn,
            &ChannelReply::Taken {
                taken: 6,
                closed: true,
            },
        );
        let reply = client.join().unwrap().unwrap();
        assert_eq!(
            reply,
            ChannelReply::Taken {
                taken: 6,
                closed: true
            }
        );
        drop(listener);
        assert!(
            !channel_path(&state, &id).exists(),
            "removed with its listener"
        );
    }
}
