//! A run's stdin, on the gate's side (`--run-stdin`): the pipe or terminal its supervisor
//! handed over on fd 4, made the sandbox's stdin once the gate is opened; on a terminal, the
//! session's controlling terminal with the sandbox's group in front.

use std::io::{self, Write};
use std::os::fd::OwnedFd;

use rustix::process::{Pid, Signal, kill_process_group};

/// On a run's own terminal (stdin is the controlling terminal the gate took), puts the
/// sandbox's process group in the foreground, so that it may read the terminal (a background
/// group that reads its terminal is stopped by SIGTTIN) and gets what the terminal itself
/// signals were its signal characters typed (the supervisor passes Ctrl-C, Ctrl-\ and Ctrl-Z
/// on to the run's programs itself, `crate::reaper::children::signal_programs`), and continues
/// it, had it read the terminal before this. A no-op for a gate whose run has
/// no terminal.
pub fn foreground(sandbox: Pid) {
    let stdin = rustix::stdio::stdin();
    if !rustix::termios::isatty(stdin) {
        return;
    }
    if let Err(err) = rustix::termios::tcsetpgrp(stdin, sandbox) {
        // Ctrl-C would then reach no one; the run goes on all the same.
        let _ = writeln!(
            io::stderr(),
            "reaper: the terminal's foreground: {}",
            lnk_common::Causes(&err)
        );
    }
    let _ = kill_process_group(sandbox, Signal::CONT);
}

/// Takes over fd 4, the run's stdin its supervisor handed over ([`super::launch`]),
/// to be closed once it is the sandbox's stdin: the gate must not hold the run's stdin, or a
/// program that closes its own would never be seen to.
pub fn take() -> io::Result<OwnedFd> {
    use crate::spawn::inherited::{self, Kind, OnExec};
    // By the launch contract (`--run-stdin`), the run's stdin: a pipe, a terminal or
    // `/dev/null`, put in place as the sandbox's stdin before it is closed.
    inherited::take(super::fds::RUN_STDIN_FD, Kind::Open, OnExec::Keep)
}
