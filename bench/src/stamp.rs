//! `lnk-bench-stamp <file>`: writes the time it runs (CLOCK_REALTIME, nanoseconds since the
//! Unix epoch, as decimal text) to `<file>` in its working folder, and exits at once. The file
//! is written under a temporary name and renamed, so a reader never sees half of it; the stamp
//! is taken first and the exit follows the rename, so it marks both when the program ran and,
//! within the rename, when it ended.
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

fn main() -> ExitCode {
    let now = SystemTime::now();
    let Some(name) = std::env::args_os().nth(1) else {
        eprintln!("usage: lnk-bench-stamp <file>");
        return ExitCode::from(2);
    };
    let Ok(since) = now.duration_since(UNIX_EPOCH) else {
        eprintln!("lnk-bench-stamp: the clock is before 1970");
        return ExitCode::FAILURE;
    };
    let mut temp = name.clone();
    temp.push(".tmp");
    let written = std::fs::write(&temp, since.as_nanos().to_string())
        .and_then(|()| std::fs::rename(&temp, &name));
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("lnk-bench-stamp: writing {}: {err}", name.to_string_lossy());
            ExitCode::FAILURE
        }
    }
}
