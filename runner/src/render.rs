//! A finished call as the agent reads it: a text with each stream once, and the figures as a
//! structured value.

use std::fmt::Write;
use std::time::Duration;

use serde_json::{Value, json};

use crate::call::{Exit, Outcome};
use crate::capture::HeadTail;

/// The answer's text: how it ended, then each stream's head, what was left out, and tail.
pub fn text(outcome: &Outcome, timeout: Duration) -> String {
    let ms = outcome.elapsed.as_millis();
    let mut text = if outcome.timed_out {
        format!(
            "timed out after {ms} ms (the limit is {}); the program and everything it started \
             were killed",
            humantime::format_duration(timeout)
        )
    } else {
        match outcome.exit {
            Exit::Code(code) => format!("exited with code {code} after {ms} ms"),
            Exit::Signal(signal) => {
                format!(
                    "killed by signal {signal}{} after {ms} ms",
                    signal_name(signal)
                )
            }
        }
    };
    text.push('\n');
    if outcome.leftovers_killed {
        text.push_str("it left processes running; they were killed a second after it exited\n");
    }
    stream(&mut text, "stdout", &outcome.stdout);
    stream(&mut text, "stderr", &outcome.stderr);
    text
}

fn stream(text: &mut String, name: &str, kept: &HeadTail) {
    let rendered = kept.render();
    let total = kept.total();
    if rendered.left_out == 0 {
        let _ = writeln!(text, "--- {name}: {total} bytes ---");
    } else {
        let _ = writeln!(
            text,
            "--- {name}: {total} bytes, {} left out ---",
            rendered.left_out
        );
    }
    push_block(text, &rendered.head);
    if rendered.left_out > 0 {
        let _ = writeln!(text, "[... {} bytes left out ...]", rendered.left_out);
        push_block(text, &rendered.tail);
    }
}

fn push_block(text: &mut String, block: &str) {
    text.push_str(block);
    if !block.is_empty() && !block.ends_with('\n') {
        text.push('\n');
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        1 => " (SIGHUP)",
        2 => " (SIGINT)",
        6 => " (SIGABRT)",
        9 => " (SIGKILL)",
        11 => " (SIGSEGV)",
        13 => " (SIGPIPE)",
        15 => " (SIGTERM)",
        _ => "",
    }
}

/// The structured value of the `command` tool.
pub fn structured(outcome: &Outcome) -> Value {
    let (exit_code, signal) = match outcome.exit {
        Exit::Code(code) => (Some(code), None),
        Exit::Signal(signal) => (None, Some(signal)),
    };
    json!({
        "exit_code": exit_code,
        "signal": signal,
        "timed_out": outcome.timed_out,
        "stdout_bytes": outcome.stdout.total(),
        "stderr_bytes": outcome.stderr.total(),
        "elapsed_ms": u64::try_from(outcome.elapsed.as_millis()).unwrap_or(u64::MAX),
        "leftovers_killed": outcome.leftovers_killed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(exit: Exit, out: &[u8], limit: u64) -> Outcome {
        let mut stdout = HeadTail::new(limit);
        stdout.push(out);
        Outcome {
            exit,
            timed_out: false,
            leftovers_killed: false,
            elapsed: Duration::from_millis(12),
            stdout,
            stderr: HeadTail::new(limit),
        }
    }

    #[test]
    fn text_holds_exit_and_streams() {
        let text = text(
            &outcome(Exit::Code(3), b"hello", 64),
            Duration::from_secs(1),
        );
        assert_eq!(
            text,
            "exited with code 3 after 12 ms\n--- stdout: 5 bytes ---\nhello\n--- stderr: 0 bytes ---\n"
        );
    }

    #[test]
    fn text_says_what_was_left_out() {
        let text = text(
            &outcome(Exit::Signal(9), b"0123456789", 4),
            Duration::from_secs(1),
        );
        assert!(
            text.starts_with("killed by signal 9 (SIGKILL) after 12 ms\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "--- stdout: 10 bytes, 6 left out ---\n01\n[... 6 bytes left out ...]\n89\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn structured_value_has_the_figures() {
        let value = structured(&outcome(Exit::Code(0), b"abc", 64));
        assert_eq!(
            value,
            json!({"exit_code": 0, "signal": null, "timed_out": false, "stdout_bytes": 3,
                   "stderr_bytes": 0, "elapsed_ms": 12, "leftovers_killed": false})
        );
    }
}
