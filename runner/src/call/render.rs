//! A finished call as the agent reads it: a text with each stream once, and the figures as a
//! structured value.

use std::fmt::Write;
use std::time::Duration;

use serde_json::{Value, json};

use crate::call::capture::{HeadTail, Rendered};
use crate::call::{CallOutcome, Exit};

/// The answer's text: how it ended, then each stream's head, what was left out, and tail.
pub fn text(outcome: &CallOutcome, timeout: Duration) -> String {
    let ms = outcome.elapsed.as_millis();
    let mut text = if outcome.timed_out {
        format!(
            "timed out after {ms} ms (the limit is {}); the program and everything it started \
             were killed",
            humantime::format_duration(timeout)
        )
    } else {
        match outcome.exit {
            Exit::Code(code) => format!("exited with code {code}{} after {ms} ms", code_note(code)),
            Exit::Signal(signal) => {
                format!(
                    "killed by signal {signal}{} after {ms} ms",
                    signal_name(signal)
                        .map(|name| format!(" ({name})"))
                        .unwrap_or_default()
                )
            }
        }
    };
    text.push('\n');
    if outcome.leftovers_killed {
        text.push_str("it left processes running; they were killed a second after it exited\n");
    }
    if let Some(network) = &outcome.network {
        text.push_str(&crate::net::render::refusal_lines(network));
    }
    stream_section(&mut text, "stdout", &outcome.stdout);
    stream_section(&mut text, "stderr", &outcome.stderr);
    text
}

/// What the text shows of one stream, as the structured value carries it too: the head, then
/// — when bytes were left out — a line saying how many, and the tail.
pub fn stream(kept: &HeadTail) -> String {
    shown(kept.render())
}

/// Kept output as shown: the head, then — when bytes were left out — a line saying how many,
/// and the tail.
pub fn shown(rendered: Rendered) -> String {
    let mut shown = rendered.head;
    if rendered.left_out > 0 {
        if !shown.is_empty() && !shown.ends_with('\n') {
            shown.push('\n');
        }
        let _ = writeln!(shown, "[... {} bytes left out ...]", rendered.left_out);
        shown.push_str(&rendered.tail);
    }
    shown
}

/// A stream in the text: a header line with its counts, then [`stream`], ended by a newline
/// (added when the stream's last line has none).
fn stream_section(text: &mut String, name: &str, kept: &HeadTail) {
    let rendered = kept.render();
    let left_out = rendered.left_out;
    let shown = shown(rendered);
    let total = kept.total();
    if left_out == 0 {
        let _ = writeln!(text, "--- {name}: {total} bytes ---");
    } else {
        let _ = writeln!(text, "--- {name}: {total} bytes, {left_out} left out ---");
    }
    text.push_str(&shown);
    if !shown.is_empty() && !shown.ends_with('\n') {
        text.push('\n');
    }
}

/// An exit code above 128 is how a sandbox (bubblewrap, a shell) reports that the program
/// inside was killed by signal N − 128: say so, so the agent does not read it as the
/// program's own code.
pub fn code_note(code: i32) -> String {
    match code.checked_sub(128).and_then(signal_name) {
        Some(name) => format!(" (128 + {}: {name} inside the sandbox)", code - 128),
        None => String::new(),
    }
}

/// The name of signal `signal` (`SIGTERM`), when it is one.
pub fn signal_name(signal: i32) -> Option<&'static str> {
    nix::sys::signal::Signal::try_from(signal)
        .ok()
        .map(|signal| signal.as_str())
}

/// The structured value of the `command` tool: the figures, and each stream as the text
/// shows it ([`stream`]), for hosts that hand the model nothing else.
pub fn structured(outcome: &CallOutcome) -> Value {
    let (exit_code, signal) = match outcome.exit {
        Exit::Code(code) => (Some(code), None),
        Exit::Signal(signal) => (None, Some(signal)),
    };
    let mut value = json!({
        "exit_code": exit_code,
        "signal": signal,
        "timed_out": outcome.timed_out,
        "stdout": stream(&outcome.stdout),
        "stderr": stream(&outcome.stderr),
        "stdout_bytes": outcome.stdout.total(),
        "stderr_bytes": outcome.stderr.total(),
        "elapsed_ms": u64::try_from(outcome.elapsed.as_millis()).unwrap_or(u64::MAX),
        "leftovers_killed": outcome.leftovers_killed,
    });
    if let Some(network) = &outcome.network {
        value["network"] = crate::net::render::structured(network);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(exit: Exit, out: &[u8], limit: u64) -> CallOutcome {
        let mut stdout = HeadTail::new(limit);
        stdout.push(out);
        CallOutcome {
            exit,
            timed_out: false,
            leftovers_killed: false,
            elapsed: Duration::from_millis(12),
            stdout,
            stderr: HeadTail::new(limit),
            network: None,
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
    fn structured_value_has_the_figures_and_the_output() {
        let value = structured(&outcome(Exit::Code(0), b"abc", 64));
        assert_eq!(
            value,
            json!({"exit_code": 0, "signal": null, "timed_out": false, "stdout": "abc",
                   "stderr": "", "stdout_bytes": 3, "stderr_bytes": 0, "elapsed_ms": 12,
                   "leftovers_killed": false})
        );
    }

    #[test]
    fn the_structured_streams_are_cut_as_the_text_is() {
        for (bytes, limit) in [
            (&b"0123456789"[..], 4),
            (b"line one\nline two\nline three\n", 12),
            (b"no newline", 64),
            (
                "h\u{e9}llo w\u{f6}rld \u{20ac}\u{20ac}\u{20ac}".as_bytes(),
                9,
            ),
            (b"", 8),
        ] {
            let outcome = outcome(Exit::Code(1), bytes, limit);
            let text = text(&outcome, Duration::from_secs(1));
            let value = structured(&outcome);
            let shown = value["stdout"].as_str().unwrap_or_default().to_owned();
            let start = text.find("---\n").map_or(0, |at| at + 4);
            let end = text.find("--- stderr").unwrap_or(text.len());
            let mut section = text[start..end].to_owned();
            if !shown.ends_with('\n') && section.ends_with('\n') {
                section.pop();
            }
            assert_eq!(shown, section, "{bytes:?} at {limit}: {text}");
        }
        let cut = structured(&outcome(Exit::Code(0), b"0123456789", 4));
        assert_eq!(cut["stdout"], "01\n[... 6 bytes left out ...]\n89");
    }

    #[test]
    fn a_code_above_128_is_read_as_a_signal_inside_the_sandbox() {
        let text = text(&outcome(Exit::Code(143), b"", 8), Duration::from_secs(1));
        assert!(
            text.starts_with("exited with code 143 (128 + 15: SIGTERM inside the sandbox) after"),
            "{text}"
        );
        let plain = super::text(&outcome(Exit::Code(3), b"", 8), Duration::from_secs(1));
        assert!(plain.starts_with("exited with code 3 after"), "{plain}");
        let odd = super::text(&outcome(Exit::Code(250), b"", 8), Duration::from_secs(1));
        assert!(odd.starts_with("exited with code 250 after"), "{odd}");
    }
}
