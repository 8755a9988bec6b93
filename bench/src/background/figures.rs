//! Clock readings, the program's stamps, and the report's figures.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};

use crate::report::Row;
use crate::stats;

/// CLOCK_REALTIME now, in nanoseconds since the epoch.
pub(super) fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Waits for the stamp file `name` in the files folder; the time it holds (nanoseconds).
pub(super) fn read_stamp(files: &Path, name: &str, within: Duration) -> Result<u128> {
    let path = files.join(name);
    let deadline = Instant::now() + within;
    loop {
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                return text
                    .trim()
                    .parse()
                    .with_context(|| format!("{} holds no time: {text:?}", path.display()));
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(err).with_context(|| format!("reading {}", path.display())),
        }
        if Instant::now() >= deadline {
            bail!("the program never wrote {}", path.display());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Nanoseconds `later - earlier` as signed milliseconds.
pub(super) fn ns_diff_ms(later: u128, earlier: u128) -> f64 {
    (later as f64 - earlier as f64) / 1e6
}

pub(super) fn ms_row(label: &str, values: &[f64], target: Option<(&str, f64)>) -> Row {
    let (median, p90) = stats::median_p90(values);
    Row::value_n(
        label,
        values.len(),
        format!("{median:.3} ms"),
        format!("{p90:.3} ms"),
        target.map(|(text, limit)| (text.to_owned(), median < limit)),
    )
}

pub(super) fn kib(bytes: u64) -> String {
    format!("{} KiB", bytes.div_ceil(1024))
}
