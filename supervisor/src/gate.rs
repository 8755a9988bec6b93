//! `gate`: the first process of a background run's group.
//!
//! The supervisor starts `lnk-link-supervise gate -- <sandbox>...` as the leader of a new
//! process group, with a pipe as its stdin. The gate waits for one byte on that pipe, which
//! the supervisor writes only once the record names the group; then it puts an empty stdin in
//! place and `exec`s the sandbox, which stays the same process and so the group's leader. If
//! the pipe closes first (the supervisor died before it could record the group), the gate
//! exits and nothing runs, so no process can be left that a sweep cannot find.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::ExitCode;

/// The byte that opens the gate.
pub const OPEN: u8 = b'g';

/// Exit code when the supervisor went away before opening the gate.
pub const CLOSED_EXIT: u8 = 125;
/// Exit code when the sandbox could not be executed.
pub const EXEC_FAILED_EXIT: u8 = 127;

/// Waits on stdin for the gate to open, then becomes `argv`.
pub fn run(argv: &[OsString]) -> ExitCode {
    let Some((program, args)) = argv.split_first() else {
        tracing::error!("gate: nothing to run");
        return ExitCode::from(EXEC_FAILED_EXIT);
    };
    let mut byte = [0u8; 1];
    let opened = loop {
        match std::io::stdin().lock().read(&mut byte) {
            Ok(1) => break byte[0] == OPEN,
            Ok(_) => break false,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break false,
        }
    };
    if !opened {
        tracing::warn!("gate: the supervisor went away before the run was recorded; not running");
        return ExitCode::from(CLOSED_EXIT);
    }
    // The run's stdin is empty, as a foreground call's is without input.
    match std::fs::File::open("/dev/null") {
        Ok(null) => {
            if let Err(err) = rustix::stdio::dup2_stdin(&null) {
                tracing::error!(%err, "gate: cannot give the run an empty stdin");
                return ExitCode::from(EXEC_FAILED_EXIT);
            }
        }
        Err(err) => {
            tracing::error!(%err, "gate: cannot open /dev/null");
            return ExitCode::from(EXEC_FAILED_EXIT);
        }
    }
    // The sandbox starts with an empty environment, as a foreground call's does: nothing of the
    // supervisor's (serve's, inherited) can be read from inside.
    let err = std::process::Command::new(program)
        .args(args)
        .env_clear()
        .exec();
    tracing::error!(%err, program = %program.to_string_lossy(), "gate: cannot run the sandbox");
    ExitCode::from(EXEC_FAILED_EXIT)
}
