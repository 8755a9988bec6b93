//! `lnk-bench-ready <delay_ms> <hold_s>`: sleeps `delay_ms`, then prints `ready <ns>` —
//! CLOCK_REALTIME in nanoseconds since the Unix epoch, read just before the one write that
//! prints the line — and holds for `hold_s` seconds, as a server that says it is ready and
//! stays. A waiting `read` for `ready ` measures from that write to its answer.
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn main() -> ExitCode {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|arg| arg.parse().ok())
        .collect();
    let [delay_ms, hold_s] = args[..] else {
        eprintln!("usage: lnk-bench-ready <delay_ms> <hold_s>");
        return ExitCode::from(2);
    };
    std::thread::sleep(Duration::from_millis(delay_ms));
    let Ok(now) = SystemTime::now().duration_since(UNIX_EPOCH) else {
        eprintln!("lnk-bench-ready: the clock is before 1970");
        return ExitCode::FAILURE;
    };
    let line = format!("ready {}\n", now.as_nanos());
    if let Err(err) = std::io::stdout().lock().write_all(line.as_bytes()) {
        eprintln!("lnk-bench-ready: writing: {err}");
        return ExitCode::FAILURE;
    }
    std::thread::sleep(Duration::from_secs(hold_s));
    ExitCode::SUCCESS
}
