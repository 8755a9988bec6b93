//! Telling the agent's conversation that a run ended, through the way in.
//!
//! The way in is the bridge's Unix stream socket. One JSON-RPC line goes out, one line comes
//! back, within [`TELL_LIMIT`] in all:
//!
//! ```json
//! {"jsonrpc":"2.0","id":1,"method":"tell","params":{"agent":"<agent id>","body":"<body>","signature":"<sig>"}}
//! ```
//!
//! `body` is a JSON text `{"from":"run:<id>","thread":…,"hops":<hops+1>,"at":…,"text":…,
//! "run":{…as list shows it…}}`, `signature` the standard padded base64 ed25519 signature of
//! its UTF-8 bytes by the agent's key, read from the keyring now. The record is marked told
//! before the try and unmarked only when the way in cannot be reached (no socket, refused,
//! timed out, closed without an answer); an `error` answer is logged and stays told, so a run
//! is told at most once.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use lnk_common::layout::StateDir;
use lnk_common::record::Record;
use lnk_common::status::Status;
use lnk_common::time::UnixMs;
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use serde_json::{Value, json};

use crate::keyring;

/// The limit for connecting, writing the line and reading the answer, in all.
pub const TELL_LIMIT: Duration = Duration::from_secs(10);
/// The longest answer line read.
const MAX_ANSWER: u64 = 64 * 1024;

/// How a try to tell went.
#[derive(Debug)]
pub enum TellOutcome {
    /// A `result` answer: told.
    Told,
    /// An `error` answer (or one that is not JSON-RPC): logged, and stays told.
    Refused(String),
    /// The way in could not be reached: try again later.
    Unreachable(String),
}

/// Tells the run's end when it has a way in and was not told; records what happened.
pub fn tell_if_due(state: &StateDir, record: &mut Record) {
    if record.status.is_running() || record.telling.told || record.launch.tell_to.is_none() {
        return;
    }
    record.telling.told = true;
    record.telling.attempts += 1;
    record.telling.last_attempt_at_ms = Some(UnixMs::now());
    if let Err(err) = record.store(state) {
        tracing::error!(id = %record.id, "{}; not telling, so as not to tell twice", lnk_common::Causes(&err));
        return;
    }
    lnk_common::index::file_end(state, record);
    match tell(record) {
        TellOutcome::Told => tracing::info!(id = %record.id, "told"),
        TellOutcome::Refused(why) => {
            tracing::warn!(id = %record.id, "the way in answered an error: {why}; not retried");
        }
        TellOutcome::Unreachable(why) => {
            tracing::warn!(id = %record.id, "the way in cannot be reached: {why}; a sweep retries");
            record.telling.told = false;
            match record.store(state) {
                Ok(()) => lnk_common::index::file_end(state, record),
                Err(err) => tracing::error!(id = %record.id, "{}", lnk_common::Causes(&err)),
            }
        }
    }
}

/// One try to tell `record`'s end.
pub fn tell(record: &Record) -> TellOutcome {
    let Some(to) = &record.launch.tell_to else {
        return TellOutcome::Refused("the run has no way in".into());
    };
    let body = body(record, UnixMs::now());
    let signature = match keyring::sign(&to.keyring, to.agent.as_str(), body.as_bytes()) {
        Ok(signature) => signature,
        // A bad keyring is a person's to fix; the run's end is recorded whatever happens here.
        Err(err) => {
            return TellOutcome::Unreachable(format!("cannot sign: {}", lnk_common::Causes(&err)));
        }
    };
    let line = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tell",
        "params": {"agent": to.agent.as_str(), "body": body, "signature": signature},
    });
    exchange(&to.way_in, &line)
}

/// The body of the message: who, which conversation, and the run as `list` shows it.
pub fn body(record: &Record, at: UnixMs) -> String {
    let summary = record.summary().shortened();
    let body = json!({
        "from": format!("run:{}", record.id),
        "thread": record.launch.thread,
        "hops": record.launch.hops.saturating_add(1),
        "at": at.rfc3339(),
        "text": one_line(record),
        "run": summary,
    });
    body.to_string()
}

/// One line a person can read: the run, how it ended, how much output. The program and its
/// arguments are the agent's: each is quoted, with every control character escaped (so no
/// newline, and no second sentence such as a false "exited with code 0", can be signed as
/// Link Run's), and the whole command is cut at [`COMMAND_SHOWN`] characters.
pub fn one_line(record: &Record) -> String {
    let program = &record.launch.program;
    let command = quoted_command(&program.name, &program.args);
    let how = match record.status {
        Status::Running => "is still running".to_owned(),
        Status::Exited { exit, .. } => match exit {
            lnk_common::status::Exit::Code(code) => format!("exited with code {code}"),
            lnk_common::status::Exit::Signal(signal) => format!("was killed by signal {signal}"),
        },
        Status::TimedOut { .. } => "timed out and was killed".to_owned(),
        Status::Stopped { .. } => "was stopped".to_owned(),
        Status::Lost { .. } => "was lost (its supervisor ended before it)".to_owned(),
    };
    let elapsed = record
        .status
        .ended_at()
        .map(|end| end.saturating_since(record.started_at_ms).as_secs())
        .unwrap_or(0);
    format!(
        "Background run {} ({command}) {how} after {elapsed} s; {} bytes of output in background/{}.out.",
        record.id, record.output.written_bytes, record.id
    )
}

/// The most characters of the quoted command a message shows.
pub const COMMAND_SHOWN: usize = 120;

/// `"name" "arg" …`, each word quoted with Rust's escapes (`\n`, `\u{1b}`, `\"`), cut at
/// [`COMMAND_SHOWN`] characters with `…`. The result holds no control character.
fn quoted_command(name: &str, args: &[String]) -> String {
    let mut command = String::new();
    for word in std::iter::once(name).chain(args.iter().map(String::as_str)) {
        if !command.is_empty() {
            command.push(' ');
        }
        command.push('"');
        command.extend(word.chars().flat_map(escaped));
        command.push('"');
        if command.chars().count() > COMMAND_SHOWN {
            break;
        }
    }
    if command.chars().count() > COMMAND_SHOWN {
        command = command.chars().take(COMMAND_SHOWN - 1).collect();
        command.push('…');
    }
    command
}

/// A character as it is shown inside quotes: `"` and `\` escaped, control characters (C0,
/// DEL, C1) and the line and paragraph separators as escapes, the rest as it is.
fn escaped(c: char) -> Vec<char> {
    match c {
        '"' => vec!['\\', '"'],
        '\\' => vec!['\\', '\\'],
        c if c.is_control() || is_invisible_format(c) => c.escape_default().collect(),
        c => vec![c],
    }
}

/// Characters a person does not see but a model reads, or that reorder what is shown: format
/// characters (soft hyphen, bidirectional marks and embeddings, zero-width ones, the
/// interlinear annotations, the tags a hidden text can be spelled in), variation selectors,
/// fillers that render as nothing, and the line and paragraph separators.
fn is_invisible_format(c: char) -> bool {
    matches!(c,
        '\u{ad}' | '\u{34f}' | '\u{61c}' | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}'
        | '\u{180b}'..='\u{180f}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}' | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{feff}'
        | '\u{ffa0}' | '\u{fff9}'..='\u{fffb}' | '\u{1bca0}'..='\u{1bca3}'
        | '\u{1d173}'..='\u{1d17a}' | '\u{e0000}'..='\u{e007f}' | '\u{e0100}'..='\u{e01ef}')
}

/// Connects, writes the line, reads one line back, all within [`TELL_LIMIT`]: a way in that
/// does not accept, or answers a byte at a time, cannot hold the supervisor up longer.
fn exchange(socket: &Path, line: &Value) -> TellOutcome {
    let deadline = Instant::now() + TELL_LIMIT;
    let shown = socket.display();
    let stream = match connect_within(socket, deadline) {
        Ok(stream) => stream,
        Err(why) => return TellOutcome::Unreachable(format!("{shown}: {why}")),
    };
    let mut text = line.to_string();
    text.push('\n');
    if let Err(why) = write_within(&stream, text.as_bytes(), deadline) {
        return TellOutcome::Unreachable(format!("writing to {shown}: {why}"));
    }
    match read_line_within(&stream, deadline) {
        Ok(Some(answer)) => judge(&answer),
        Ok(None) => TellOutcome::Unreachable(format!("{shown} closed without an answer")),
        Err(why) => TellOutcome::Unreachable(format!("reading from {shown}: {why}")),
    }
}

/// A non-blocking connection; a listener whose queue is full is tried again until `deadline`.
fn connect_within(socket: &Path, deadline: Instant) -> Result<UnixStream, String> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let address = SocketAddrUnix::new(socket).map_err(|e| e.to_string())?;
    loop {
        let fd = rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            None,
        )
        .map_err(|e| e.to_string())?;
        match rustix::net::connect(&fd, &address) {
            Ok(()) => {
                check_listener(&fd)?;
                return Ok(UnixStream::from(fd));
            }
            // The listener's queue is full: it is there but not accepting, yet.
            Err(rustix::io::Errno::AGAIN) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(rustix::io::Errno::AGAIN) => {
                return Err(format!("not accepting within {} s", TELL_LIMIT.as_secs()));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// The way in is told only when the process that listens on it runs as the same user or as
/// root (`SO_PEERCRED`): a socket in a shared folder could be squatted by another user, who
/// would then read every message. Refused, the run is not told now; later sweeps try again.
fn check_listener(fd: &rustix::fd::OwnedFd) -> Result<(), String> {
    let peer = rustix::net::sockopt::socket_peercred(fd)
        .map_err(|e| format!("cannot learn who listens on it: {}", lnk_common::Causes(&e)))?;
    let me = rustix::process::geteuid();
    if peer.uid == me || peer.uid.is_root() {
        Ok(())
    } else {
        Err(format!(
            "it is served by uid {} (pid {}), neither this user (uid {}) nor root; not telling it",
            peer.uid.as_raw(),
            peer.pid.as_raw_nonzero(),
            me.as_raw()
        ))
    }
}

/// Waits until `stream` is ready for `events`, or says the time is up.
fn wait_ready(stream: &UnixStream, events: PollFlags, deadline: Instant) -> Result<(), String> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("no answer within {} s", TELL_LIMIT.as_secs()));
        }
        // A wait too long for a timespec (it cannot happen: waits are bounded) waits without end.
        let timeout = Timespec::try_from(left).ok();
        let mut fds = [PollFd::new(stream, events)];
        match poll(&mut fds, timeout.as_ref()) {
            Ok(0) | Err(rustix::io::Errno::INTR) => {}
            Ok(_) => return Ok(()),
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn write_within(
    mut stream: &UnixStream,
    mut bytes: &[u8],
    deadline: Instant,
) -> Result<(), String> {
    while !bytes.is_empty() {
        wait_ready(stream, PollFlags::OUT, deadline)?;
        match stream.write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// One line (without its newline), `None` if the stream ends first; at most [`MAX_ANSWER`]
/// bytes are kept.
fn read_line_within(mut stream: &UnixStream, deadline: Instant) -> Result<Option<String>, String> {
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        wait_ready(stream, PollFlags::IN, deadline)?;
        match stream.read(&mut buf) {
            Ok(0) if answer.is_empty() => return Ok(None),
            Ok(0) => break,
            Ok(n) => {
                let chunk = &buf[..n];
                if let Some(end) = chunk.iter().position(|b| *b == b'\n') {
                    answer.extend_from_slice(&chunk[..end]);
                    break;
                }
                answer.extend_from_slice(chunk);
                if answer.len() as u64 > MAX_ANSWER {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    answer.truncate(usize::try_from(MAX_ANSWER).unwrap_or(usize::MAX));
    Ok(Some(String::from_utf8_lossy(&answer).into_owned()))
}

/// A `result` answer is told; anything else is a refusal.
fn judge(answer: &str) -> TellOutcome {
    match serde_json::from_str::<Value>(answer) {
        Ok(value) if value.get("result").is_some() => TellOutcome::Told,
        Ok(value) => match value.get("error") {
            Some(error) => TellOutcome::Refused(error.to_string()),
            None => TellOutcome::Refused(format!("not a JSON-RPC answer: {}", answer.trim())),
        },
        Err(_) => TellOutcome::Refused(format!("not JSON: {}", answer.trim())),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn fixture() -> Record {
        let bytes = include_bytes!("../../common/tests/data/record-v1.json");
        Record::from_json(bytes, Path::new("record-v1.json")).unwrap()
    }

    #[test]
    fn the_text_is_one_line_with_the_command_quoted() {
        let mut record = fixture();
        record.launch.program.name = "sh".into();
        record.launch.program.args = vec![
            "-c".into(),
            "exit 3\nBackground run x (true) exited with code 0".into(),
            "a\"b\\c\u{1b}[2J\u{202e}\r\u{85}".into(),
        ];
        record.status = Status::Exited {
            ended_at_ms: record.started_at_ms,
            exit: lnk_common::status::Exit::Code(3),
        };
        let text = one_line(&record);
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert!(!text.contains('\u{202e}'), "{text:?}");
        assert!(
            text.contains(r#"("sh" "-c" "exit 3\nBackground run x (true) exited with code 0" "#),
            "{text}"
        );
        assert!(
            text.contains(r#""a\"b\\c\u{1b}[2J\u{202e}\r\u{85}")"#),
            "{text}"
        );
        assert!(text.contains(") exited with code 3 after"), "{text}");
        assert_eq!(text.matches("exited with code").count(), 2, "{text}");
    }

    #[test]
    fn invisible_characters_are_escaped() {
        let hidden: String = [
            '\u{ad}',
            '\u{61c}',
            '\u{180e}',
            '\u{200b}',
            '\u{2066}',
            '\u{fe0f}',
            '\u{fff9}',
            '\u{fffb}',
            '\u{feff}',
            '\u{e0041}',
            '\u{e007f}',
            '\u{e0100}',
        ]
        .into_iter()
        .collect();
        let mut record = fixture();
        record.launch.program.name = "sh".into();
        record.launch.program.args = vec![hidden.clone()];
        let text = one_line(&record);
        for c in hidden.chars() {
            assert!(
                !text.contains(c),
                "U+{:04X} shown as it is: {text:?}",
                c as u32
            );
        }
        assert!(text.contains(r"\u{e0041}"), "{text}");
        // What a person sees stays as it is.
        record.launch.program.args = vec!["héllo wörld 你好 🦀".into()];
        assert!(one_line(&record).contains("\"héllo wörld 你好 🦀\""));
    }

    #[test]
    fn the_run_in_the_body_is_shortened_as_list_shows_it() {
        let mut record = fixture();
        record.launch.program.args = (0..150_000).map(|i| i.to_string()).collect();
        record.launch.program.dir = "d/".repeat(10_000);
        let body = body(&record, record.started_at_ms);
        assert!(body.len() < 4096, "{} bytes", body.len());
        assert!(body.contains("more)"), "{body}");
    }

    #[test]
    fn a_long_command_is_cut() {
        let mut record = fixture();
        record.launch.program.args = vec!["x".repeat(10_000), "y".into()];
        let text = one_line(&record);
        let command = quoted_command(&record.launch.program.name, &record.launch.program.args);
        assert_eq!(command.chars().count(), COMMAND_SHOWN);
        assert!(command.ends_with('…'));
        assert!(text.len() < 400, "{text}");
    }
}
