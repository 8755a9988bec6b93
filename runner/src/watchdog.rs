//! The watchdog: the one process that kills the calls' groups when `serve` dies abruptly.
//!
//! `PR_SET_PDEATHSIG` reaches only a call's first process; what it started lives on when
//! `serve` is killed with SIGKILL and the sandbox has no PID namespace of its own. So `serve`
//! starts `lnk-link-run watchdog` once, in a process group of its own (a signal to `serve`'s
//! group does not reach it), with a pipe as its stdin, and tells it each call's group as the
//! call starts (`+<pgid>`) and ends (`-<pgid>`). When the pipe ends — `serve` exited, however
//! — the watchdog kills every group it still holds and exits. A call's group is forgotten only
//! after the call killed what it left, so the watchdog never signals a group id that is not
//! a call's.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Mutex;

use rustix::process::{Pid, Signal, kill_process_group};

/// `serve`'s end of the pipe to its watchdog.
pub struct Watchdog {
    pipe: Mutex<Option<File>>,
}

impl Watchdog {
    /// Starts the watchdog from this very executable.
    pub fn start() -> std::io::Result<Self> {
        // `/proc/self/exe` is this very executable even when its file was replaced since.
        let mut child = Command::new("/proc/self/exe")
            .arg0("lnk-link-run")
            .arg("watchdog")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()?;
        let pipe = child
            .stdin
            .take()
            .map(|stdin| File::from(std::os::fd::OwnedFd::from(stdin)));
        // The watchdog outlives `serve` by design and is reaped by whoever inherits it; this
        // thread reaps it when it ends first.
        std::thread::Builder::new()
            .name("watchdog reaper".into())
            .spawn(move || {
                let _ = child.wait();
            })?;
        Ok(Self {
            pipe: Mutex::new(pipe),
        })
    }

    /// A call's group started.
    pub fn watch(&self, group: Pid) {
        self.tell(&format!("+{}\n", group.as_raw_nonzero()));
    }

    /// A call's group is dealt with.
    pub fn forget(&self, group: Pid) {
        self.tell(&format!("-{}\n", group.as_raw_nonzero()));
    }

    fn tell(&self, line: &str) {
        let mut pipe = crate::sync::lock(&self.pipe);
        if let Some(file) = pipe.as_mut() {
            // One short line is one atomic write on a pipe (under PIPE_BUF).
            if let Err(err) = file.write_all(line.as_bytes()) {
                tracing::warn!(%err, "the watchdog is gone; calls die with serve only through their sandbox");
                *pipe = None;
            }
        }
    }
}

/// The watchdog's own life: read `+pgid`/`-pgid` lines until stdin ends, then kill what is left.
pub fn run() -> ExitCode {
    let mut groups: HashSet<i32> = HashSet::new();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let (sign, number) = line.split_at(line.len().min(1));
        let Ok(pgid) = number.parse::<i32>() else {
            continue;
        };
        match sign {
            "+" => {
                groups.insert(pgid);
            }
            "-" => {
                groups.remove(&pgid);
            }
            _ => {}
        }
    }
    for pgid in groups {
        if let Some(group) = Pid::from_raw(pgid) {
            let _ = kill_process_group(group, Signal::KILL);
        }
    }
    ExitCode::SUCCESS
}
