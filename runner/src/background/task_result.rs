//! What a run's task says: while the run runs, one line (how long, how many bytes, its last
//! line); once it has ended, a `CallToolResult` that reads like `command`'s — how it ended,
//! then the head and tail of its output within `--output` — in the text and in
//! `structuredContent` (the run as `list` shows it, plus `summary`, how it ended, and
//! `output`, the text kept). Claude Code hands the model only the structured value of a
//! completed task, so that value reads well alone.
//!
//! Only the output file's two ends are read, at most `--output` bytes, however long it is.

use std::fmt::Write;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::Duration;

use lnk_common::record::Record;
use lnk_common::status::Status;
use lnk_common::time::UnixMs;
use serde_json::json;

use crate::call::capture::HeadTail;
use crate::call::render;
use crate::config::Config;
use crate::tool_call::answer::ToolAnswer;

/// The characters of a run's command line and of its last line that a status shows.
const SHOWN_CHARS: usize = 80;
/// The bytes at the end of a running run's output that are searched for its last line.
const LAST_LINE_BYTES: u64 = 1024;

/// A running run's status: its one line, and when it last changed (its output's last write).
pub struct Live {
    /// How long it has run, how many bytes it wrote, its last line.
    pub message: String,
    /// When it last wrote, or started.
    pub updated: UnixMs,
}

/// A running run's status line.
pub fn live(record: &Record) -> Live {
    let elapsed = UnixMs::now().saturating_since(record.started_at_ms);
    let mut message = format!("running for {}", took(elapsed));
    let mut updated = record.started_at_ms;
    let mut bytes = record.output.written_bytes;
    let mut line = None;
    // Only the file the record names is the run's: a program in the files folder may have
    // put another one under its name.
    if let Ok(Some(file)) = output_file(record)
        && record.output.file == lnk_common::record::FileId::of(&file).ok()
        && let Ok(meta) = file.metadata()
    {
        bytes = bytes.max(record.output.dropped_bytes.saturating_add(meta.len()));
        if let Ok(modified) = meta.modified() {
            // The program can set its file's time: kept between the start and now.
            updated = UnixMs::from_system_time(modified)
                .max(record.started_at_ms)
                .min(UnixMs::now());
        }
        line = last_line(&file, meta.len());
    }
    let _ = write!(message, "; {bytes} bytes of output");
    if let Some(note) = record.summary().unwritten_note() {
        let _ = write!(message, " ({note})");
    }
    if let Some(line) = line {
        let _ = write!(message, "; last line: {line}");
    }
    Live { message, updated }
}

/// The run's program and arguments, shortened, as one line.
pub fn command_line(record: &Record) -> String {
    let program = &record.launch.program;
    let mut line = program.name.clone();
    for arg in &program.args {
        line.push(' ');
        line.push_str(arg);
    }
    lnk_common::summary::cut(&one_line(&line), SHOWN_CHARS)
}

/// How an ended run ended, in one line: `run … (sh -c …) exited with code 3 after 4.2 s`.
pub fn how_it_ended(record: &Record, cancelled: bool) -> String {
    let ended_at = record.status.ended_at().unwrap_or(record.started_at_ms);
    let after = took(ended_at.saturating_since(record.started_at_ms));
    let limits = &record.launch.limits;
    let end = match record.status {
        Status::Running => format!("is still running after {after}"),
        Status::Exited { exit, .. } => match exit {
            lnk_common::status::Exit::Code(code) => {
                format!(
                    "exited with code {code}{} after {after}",
                    render::code_note(code)
                )
            }
            lnk_common::status::Exit::Signal(signal) => format!(
                "was killed by signal {signal}{} after {after}",
                render::signal_name(signal)
                    .map(|name| format!(" ({name})"))
                    .unwrap_or_default()
            ),
        },
        Status::TimedOut { .. } => format!(
            "timed out after {} (its limit) and was killed with everything it started",
            humantime::format_duration(Duration::from_millis(limits.timeout_ms))
        ),
        Status::Stopped { .. } if cancelled => {
            format!("was cancelled after {after}: it and everything it started were stopped")
        }
        Status::Stopped { .. } => format!(
            "was stopped after {after} (asked with `stop`): it and everything it started were \
             killed"
        ),
        Status::Lost { .. } => match &record.failure {
            Some(failure) => format!("was lost: {}", one_line(failure)),
            None => format!(
                "was lost after {after}: its supervisor ended before it could record how the run \
                 ended (it was killed, or the machine restarted), and a sweep recorded it lost; \
                 what it started was killed"
            ),
        },
    };
    format!("run {} ({}) {end}", record.id, command_line(record))
}

/// An ended run's result: `how` it ended, then the head and tail of its output within
/// `--output`; a refusal (`isError`) only for a run that was lost.
pub fn ended(config: &Config, record: &Record, how: &str) -> ToolAnswer {
    let dropped = record.output.dropped_bytes;
    // What the record says the run wrote, once it has ended; a run whose supervisor died may
    // have written more than its record says, which the file then holds.
    let lost = record.status.state() == lnk_common::status::State::Lost;
    let recorded = record.output.written_bytes.saturating_sub(dropped);
    let unread = |problem: String| (HeadTail::new(0), 0, Some(problem));
    let (kept, file_bytes, problem) = match output_file(record) {
        Ok(Some(file)) if record.output.file != lnk_common::record::FileId::of(&file).ok() => {
            unread("its output file was replaced by another one, which is not shown".to_owned())
        }
        Ok(Some(file)) => match ends(&file, config.output, (!lost).then_some(recorded)) {
            Ok((kept, len)) => (kept, len, None),
            Err(e) => unread(format!(
                "its output cannot be read: {}",
                lnk_common::Causes(&e)
            )),
        },
        Ok(None) => unread("its output file is gone".to_owned()),
        Err(e) => unread(format!("its output cannot be read: {e}")),
    };
    let output_bytes = if lost {
        record
            .output
            .written_bytes
            .max(dropped.saturating_add(file_bytes))
    } else {
        record.output.written_bytes
    };
    let rendered = kept.render();
    let left_out = rendered.left_out;
    let shown = render::shown(rendered);
    let mut text = format!("{how}\n");
    if let Some(network) = &record.network {
        text.push_str(&crate::net::render::refusal_lines(network));
    }
    let _ = write!(
        text,
        "--- output (stdout and stderr together): {output_bytes} bytes"
    );
    if left_out > 0 {
        let _ = write!(text, ", {left_out} left out between head and tail");
    }
    if dropped > 0 {
        let _ = write!(
            text,
            "; the first {dropped} were dropped from its file, which keeps the newest {}",
            record.launch.limits.output_cap_bytes
        );
    }
    let summary = record.summary().shortened();
    if let Some(note) = summary.unwritten_note() {
        let _ = write!(text, "; {note}");
    }
    text.push_str(" ---\n");
    if let Some(problem) = &problem {
        let _ = writeln!(text, "({problem})");
    }
    text.push_str(&shown);
    if !shown.is_empty() && !shown.ends_with('\n') {
        text.push('\n');
    }
    let mut summary = super::list::shown_summary(record);
    summary.output_bytes = output_bytes;
    let mut structured = serde_json::to_value(summary).unwrap_or_else(|_| json!({}));
    if let Some(object) = structured.as_object_mut() {
        object.insert("summary".into(), json!(how));
        object.insert("output".into(), json!(shown));
    }
    let mut answer = ToolAnswer::ok(text, structured);
    answer.is_error = record.status.state() == lnk_common::status::State::Lost;
    answer
}

/// The run's output file, opened for reading through the files folder (never through a
/// link); `None` when it is gone.
fn output_file(record: &Record) -> Result<Option<File>, String> {
    let files = lnk_common::safe_open::FilesDir::open(&record.launch.files)
        .map_err(|e| lnk_common::Causes(&e).to_string())?;
    let Some(dir) = files
        .open_background_dir()
        .map_err(|e| lnk_common::Causes(&e).to_string())?
    else {
        return Ok(None);
    };
    dir.open_output_for_read(&record.id)
        .map_err(|e| lnk_common::Causes(&e).to_string())
}

/// The head and tail of `file` within `limit` bytes, and its length (at most `most` when
/// given: bytes past it are not the run's): only its two ends are read.
fn ends(file: &File, limit: u64, most: Option<u64>) -> std::io::Result<(HeadTail, u64)> {
    let len = file.metadata()?.len().min(most.unwrap_or(u64::MAX));
    let mut kept = HeadTail::new(limit);
    let half = limit / 2;
    if len <= half.saturating_mul(2) {
        kept.push(&read_at(file, 0, len)?);
    } else {
        kept.push(&read_at(file, 0, half)?);
        kept.skip(len - 2 * half);
        kept.push(&read_at(file, len - half, half)?);
    }
    Ok((kept, len))
}

/// Up to `count` bytes of `file` from `offset` (fewer when it is shorter by then).
fn read_at(file: &File, offset: u64, count: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = vec![0u8; usize::try_from(count).unwrap_or(0)];
    let mut got = 0;
    while got < bytes.len() {
        match file.read_at(&mut bytes[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    bytes.truncate(got);
    Ok(bytes)
}

/// The last line of a file `len` bytes long that has anything but blanks, shortened.
fn last_line(file: &File, len: u64) -> Option<String> {
    let from = len.saturating_sub(LAST_LINE_BYTES);
    let bytes = read_at(file, from, len - from).ok()?;
    let skip = if from > 0 {
        crate::text::utf8::continuation_prefix(&bytes)
    } else {
        0
    };
    let text = String::from_utf8_lossy(&bytes[skip..]);
    // A terminal's progress line ends in `\r` and is drawn over: its last drawing counts.
    let line = text
        .split(['\n', '\r'])
        .map(str::trim)
        .rfind(|line| !line.is_empty())?;
    Some(lnk_common::summary::cut(&one_line(line), SHOWN_CHARS))
}

/// `text` as one line, every control and invisible character escaped
/// ([`crate::text::escaping::one_line`]), so that a status stays one line and reads as it shows.
fn one_line(text: &str) -> String {
    crate::text::escaping::one_line(text)
}

/// A duration as a person reads it: `850 ms`, `4.2 s`, `3m 12s`, `2h 5m`.
pub fn took(elapsed: Duration) -> String {
    let ms = elapsed.as_millis();
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", elapsed.as_secs_f64())
    } else if ms < 3_600_000 {
        format!("{}m {}s", ms / 60_000, ms / 1000 % 60)
    } else {
        format!("{}h {}m", ms / 3_600_000, ms / 60_000 % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_a_person_says_them() {
        assert_eq!(took(Duration::from_millis(850)), "850 ms");
        assert_eq!(took(Duration::from_millis(4_240)), "4.2 s");
        assert_eq!(took(Duration::from_secs(192)), "3m 12s");
        assert_eq!(took(Duration::from_secs(7_500)), "2h 5m");
    }

    #[test]
    fn a_status_line_stays_one_line() {
        assert_eq!(one_line("a\tb\u{1b}[1mc"), "a\\tb\\e[1mc");
        assert_eq!(
            one_line("x\u{2028}y\u{202E}z\u{200B}"),
            "x\\u{2028}y\\u{202e}z\\u{200b}"
        );
    }

    #[test]
    fn only_the_ends_of_a_long_file_are_kept() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("out");
        let body: Vec<u8> = (0..10_000u32)
            .flat_map(|i| format!("{i}\n").into_bytes())
            .collect();
        std::fs::write(&path, &body).unwrap_or_else(|e| panic!("{e}"));
        let file = File::open(&path).unwrap_or_else(|e| panic!("{e}"));
        let (kept, len) = ends(&file, 64, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(len, body.len() as u64);
        let rendered = kept.render();
        assert!(rendered.head.starts_with("0\n1\n2\n"), "{}", rendered.head);
        assert!(rendered.tail.ends_with("9998\n9999\n"), "{}", rendered.tail);
        assert_eq!(rendered.left_out, len - 64);
        assert_eq!(last_line(&file, len).as_deref(), Some("9999"));
        let (short, _) = ends(&file, 1 << 20, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(short.render().left_out, 0);
        // Bytes past what the run wrote are not shown.
        let (cut, len) = ends(&file, 1 << 20, Some(4)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((cut.render().head.as_str(), len), ("0\n1\n", 4));
    }
}
