//! `start`'s stdin arguments (`input`, `interactive`, `tty`, `cols`, `rows`), and the pipe that
//! hands `input` to the run's supervisor (its fd 3) without writing it to the disk.

use std::os::fd::OwnedFd;

use lnk_common::stdin::{DEFAULT_SIZE, Mode, Stdin, TTY_INPUT_MAX, TermSize, WRITE_MAX};
use rustix::pipe::{PipeFlags, fcntl_getpipe_size, fcntl_setpipe_size, pipe_with};
use serde_json::{Map, Value};

use crate::tool_call::answer::ToolAnswer as Answer;

/// `start`'s arguments that set up stdin; `command_args` does not know them.
pub const KEYS: [&str; 5] = ["input", "interactive", "tty", "cols", "rows"];

/// The largest terminal a run may ask for, in columns or rows.
const MOST_CELLS: u64 = 1000;

/// Reads `start`'s stdin arguments: how stdin is set up, and `input`'s text.
pub fn parse(arguments: &Map<String, Value>) -> Result<(Stdin, Option<String>), Answer> {
    let flag = |key: &str| match arguments.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(Answer::refusal(format!("`{key}` must be true or false"))),
    };
    let interactive = flag("interactive")?;
    let tty = flag("tty")?;
    let size = |key: &str, default: u16| match arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => match value.as_u64() {
            Some(n) if (1..=MOST_CELLS).contains(&n) => {
                Ok(Some(u16::try_from(n).unwrap_or(default)))
            }
            _ => Err(Answer::refusal(format!(
                "`{key}` must be an integer from 1 to {MOST_CELLS}: the terminal's size"
            ))),
        },
    };
    let cols = size("cols", DEFAULT_SIZE.cols)?;
    let rows = size("rows", DEFAULT_SIZE.rows)?;
    if !tty && (cols.is_some() || rows.is_some()) {
        return Err(Answer::refusal(
            "`cols` and `rows` are the size of a run's terminal: pass them with `tty: true`",
        ));
    }
    let input = match arguments.get("input") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(_) => return Err(Answer::refusal("`input` must be a string")),
    };
    let input_bytes = input.as_ref().map_or(0, String::len);
    if input_bytes > WRITE_MAX {
        return Err(Answer::refusal(format!(
            "`input` is {input_bytes} bytes; a run takes at most {WRITE_MAX} at its start. Start \
             it with `interactive: true` and send the rest with `write`, or put the text in a \
             file in the files folder and have the program read it"
        )));
    }
    if tty && input_bytes > TTY_INPUT_MAX {
        return Err(Answer::refusal(format!(
            "`input` is {input_bytes} bytes; a run on a terminal takes at most {TTY_INPUT_MAX} at \
             its start (what a terminal holds before its program reads). Send the rest with \
             `write` once it runs"
        )));
    }
    let mode = if tty {
        Mode::Tty(TermSize {
            cols: cols.unwrap_or(DEFAULT_SIZE.cols),
            rows: rows.unwrap_or(DEFAULT_SIZE.rows),
        })
    } else if interactive {
        Mode::Interactive
    } else {
        Mode::Ends
    };
    let stdin = Stdin {
        input_bytes: u64::try_from(input_bytes).unwrap_or(u64::MAX),
        mode,
    };
    Ok((stdin, input.filter(|text| !text.is_empty())))
}

/// A pipe holding `input`, its write end closed: the read end, for the supervisor. The pipe is
/// made large enough first, so the write never waits (`input` is at most [`WRITE_MAX`]).
pub fn input_pipe(input: &[u8]) -> std::io::Result<OwnedFd> {
    let (read, write) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
    if fcntl_getpipe_size(&write)? < input.len() {
        fcntl_setpipe_size(&write, input.len())?;
    }
    let mut rest = input;
    while !rest.is_empty() {
        match rustix::io::write(&write, rest) {
            Ok(n) => rest = &rest[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    drop(write);
    // The supervisor reads it as it likes: blocking.
    rustix::fs::fcntl_setfl(&read, rustix::fs::OFlags::empty())?;
    Ok(read)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    fn parsed(value: Value) -> Result<(Stdin, Option<String>), Answer> {
        match value {
            Value::Object(map) => parse(&map),
            _ => unreachable!(),
        }
    }

    #[test]
    fn reads_each_setup() {
        let (stdin, input) = parsed(json!({})).unwrap();
        assert!(stdin.is_default() && input.is_none());
        let (stdin, input) = parsed(json!({"input": "ab"})).unwrap();
        assert_eq!((stdin.input_bytes, stdin.mode), (2, Mode::Ends));
        assert_eq!(input.as_deref(), Some("ab"));
        let (stdin, _) = parsed(json!({"interactive": true})).unwrap();
        assert_eq!(stdin.mode, Mode::Interactive);
        let (stdin, _) = parsed(json!({"tty": true, "cols": 120})).unwrap();
        assert_eq!(
            stdin.tty(),
            Some(TermSize {
                cols: 120,
                rows: 24
            })
        );
    }

    #[test]
    fn refuses_with_a_reason() {
        for bad in [
            json!({"interactive": "yes"}),
            json!({"cols": 100}),
            json!({"tty": true, "rows": 0}),
            json!({"tty": true, "cols": 5000}),
            json!({"input": 3}),
            json!({"input": "x".repeat(WRITE_MAX + 1)}),
            json!({"tty": true, "input": "x".repeat(TTY_INPUT_MAX + 1)}),
        ] {
            assert!(parsed(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_pipe_holds_the_input_and_ends() {
        use std::io::Read;
        let text = vec![b'x'; WRITE_MAX];
        let mut read = std::fs::File::from(input_pipe(&text).unwrap());
        let mut back = Vec::new();
        read.read_to_end(&mut back).unwrap();
        assert_eq!(back, text);
    }
}
