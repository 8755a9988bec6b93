//! Item 5: from a run's end to a stand-in way in holding the message.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

use super::figures::{ms_row, now_ns, ns_diff_ms, read_stamp};
use super::place::{AGENT, Bins, Place};
use super::runs::{END_LIMIT, WARMUP, record_u64, start_run, wait_ended};
use crate::report::Report;

/// The answer of the stand-in way in.
const WAY_IN_ANSWER: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";

/// A message the stand-in way in got, and when it had the whole line.
struct Arrival {
    at_ns: u128,
    line: String,
}

/// A stand-in for the bridge's way in: a Unix-socket listener that reads one line per
/// connection, notes when it arrived, and answers `result`.
struct WayIn {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    messages: Receiver<Arrival>,
}

impl WayIn {
    fn start(path: &Path) -> Result<WayIn> {
        let listener =
            UnixListener::bind(path).with_context(|| format!("listening on {}", path.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let (send, messages) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("way in".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if flag.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(mut stream) = stream else { continue };
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                    let mut line = String::new();
                    if BufReader::new(&stream).read_line(&mut line).is_err() {
                        continue;
                    }
                    let at_ns = now_ns();
                    let _ = stream.write_all(WAY_IN_ANSWER);
                    if send.send(Arrival { at_ns, line }).is_err() {
                        break;
                    }
                }
            })
            .context("starting the way in")?;
        Ok(WayIn {
            path: path.to_owned(),
            stop,
            thread: Some(thread),
            messages,
        })
    }

    /// The next message from run `id` (others are skipped), within `within`.
    fn next_from(&self, id: &str, within: Duration) -> Result<Arrival> {
        let deadline = Instant::now() + within;
        let from = format!("run:{id}");
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            let arrival = match self.messages.recv_timeout(wait) {
                Ok(arrival) => arrival,
                Err(RecvTimeoutError::Timeout) => bail!("run {id} was not told within {within:?}"),
                Err(RecvTimeoutError::Disconnected) => bail!("the way in stopped"),
            };
            let message: Value = serde_json::from_str(&arrival.line).with_context(|| {
                format!("the way in got a line that is not JSON: {}", arrival.line)
            })?;
            let body: Value = message["params"]["body"]
                .as_str()
                .map(serde_json::from_str)
                .transpose()?
                .ok_or_else(|| anyhow!("a message without a body: {message}"))?;
            if body["from"] == json!(from) {
                return Ok(arrival);
            }
        }
    }
}

impl Drop for WayIn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accepting thread, which sees the flag and ends.
        let _ = UnixStream::connect(&self.path);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Item 5: runs of the stamp writer that tell a stand-in way in; from the program's end to the
/// message held there.
pub(super) fn telling(report: &mut Report, bins: &Bins, place: &Place, n: usize) -> Result<()> {
    let keygen = Command::new(&bins.supervise)
        .arg("keygen")
        .arg("--keyring")
        .arg(&place.keyring)
        .args(["--as", AGENT])
        .stdin(Stdio::null())
        .output()
        .context("running lnk-link-supervise keygen")?;
    if !keygen.status.success() {
        bail!("keygen failed: {}", String::from_utf8_lossy(&keygen.stderr));
    }
    let way_in = WayIn::start(&place.way_in)?;
    let mut serve = place.serve(bins, "telling", &place.telling, true)?;
    let mut from_program = Vec::with_capacity(n);
    let mut from_record = Vec::with_capacity(n);
    let mut to_record = Vec::with_capacity(n);
    for i in 0..WARMUP.min(n) + n {
        let name = format!("stamp-tell-{i}");
        let (id, _) = start_run(&mut serve, "lnk-bench-stamp", &[&name])?;
        let arrival = way_in.next_from(&id, END_LIMIT)?;
        let stamp = read_stamp(&place.files, &name, END_LIMIT)?;
        let record = wait_ended(&place.telling, &id, END_LIMIT, Duration::from_millis(1))?;
        let ended_ns = u128::from(record_u64(&record, "/status/ended_at_ms")?) * 1_000_000;
        if i >= WARMUP.min(n) {
            from_program.push(ns_diff_ms(arrival.at_ns, stamp));
            from_record.push(ns_diff_ms(arrival.at_ns, ended_ns));
            to_record.push(ns_diff_ms(ended_ns, stamp));
        }
    }
    serve.shutdown()?;
    drop(way_in);
    report.section(&format!(
        "5. telling: {n} runs of a program that stamps the time and exits, to a stand-in way in"
    ));
    report.row(ms_row(
        "program's end -> message held by the way in",
        &from_program,
        Some(("< 50 ms", 50.0)),
    ));
    report.row(ms_row(
        "  of which: end -> record's ended_at (1 ms res.)",
        &to_record,
        None,
    ));
    report.row(ms_row(
        "  of which: record's ended_at -> message held",
        &from_record,
        None,
    ));
    Ok(())
}
