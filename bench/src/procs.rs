//! What `/proc` says about a process: its memory (peak, RSS, PSS), its CPU time, and which processes are
//! still running with a marker in their command line.

use std::time::Duration;

use anyhow::{Context, Result, anyhow};

/// A field of `/proc/<pid>/status` given in kB (`VmHWM`, `VmRSS`), in bytes.
pub fn status_bytes(pid: u32, field: &str) -> Result<u64> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .ok_or_else(|| anyhow!("{path} has no {field}"))?;
    let kb: u64 = line
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .with_context(|| format!("{field} in {path} is not a number: {line:?}"))?;
    Ok(kb * 1024)
}

/// A process's proportional set size (`Pss` of `/proc/<pid>/smaps_rollup`), in bytes: its
/// private pages and its share of the pages it shares, what it costs the machine (RSS counts
/// every shared page whole in every process that maps it).
pub fn pss_bytes(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/smaps_rollup");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .ok_or_else(|| anyhow!("{path} has no Pss"))?;
    let kb: u64 = line
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .with_context(|| format!("Pss in {path} is not a number: {line:?}"))?;
    Ok(kb * 1024)
}

/// The CPU time (user + system) a process has used, its ended threads included.
pub fn cpu_time(pid: u32) -> Result<Duration> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    // Fields after the command name, which may hold spaces and parentheses: state is the first,
    // utime the 12th, stime the 13th.
    let after = stat
        .rfind(')')
        .ok_or_else(|| anyhow!("{path} is not a stat line"))?;
    let fields: Vec<&str> = stat[after + 1..].split_ascii_whitespace().collect();
    let tick = |i: usize| -> Result<u64> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| anyhow!("{path}: field {} missing", i + 3))
    };
    let ticks = tick(11)? + tick(12)?;
    let per_second = rustix::param::clock_ticks_per_second().max(1);
    Ok(Duration::from_secs_f64(ticks as f64 / per_second as f64))
}

/// The processes (other than this one) whose command line contains `marker`.
pub fn running_with(marker: &str) -> Vec<(u32, String)> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains(marker) {
            found.push((pid, text.trim_end().to_owned()));
        }
    }
    found
}
