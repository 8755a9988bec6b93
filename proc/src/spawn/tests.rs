#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::process::{Command, Stdio};

use nix::sys::signal::{SigSet, Signal};

use super::*;
use crate::proc_info::Stat;

/// A status line's value as a hex mask (`SigBlk:\t0000…`).
fn mask(status: &str, name: &str) -> u64 {
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix(name))
        .unwrap_or_else(|| panic!("no {name} in {status}"));
    u64::from_str_radix(line.trim_start_matches(':').trim(), 16).unwrap()
}

/// Signals 1 to 31: bits 0 to 30 (glibc keeps its own two real-time signals for itself).
const STANDARD: u64 = (1 << 31) - 1;

fn file_with(dir: &std::path::Path, name: &str) -> OwnedFd {
    let path = dir.join(name);
    std::fs::write(&path, name).unwrap();
    OwnedFd::from(std::fs::File::open(&path).unwrap())
}

#[test]
fn a_spawned_program_has_no_signal_blocked_or_ignored_and_leads_a_group() {
    // This thread blocks two (the standard library ignores SIGPIPE for the whole process).
    let mut blocked = SigSet::empty();
    blocked.add(Signal::SIGUSR1);
    blocked.add(Signal::SIGTERM);
    let before = blocked
        .thread_swap_mask(nix::sys::signal::SigmaskHow::SIG_BLOCK)
        .unwrap();
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    let path = c"/bin/cat";
    let argv = [c"cat".to_owned(), c"/proc/self/status".to_owned()];
    let pid = spawn(&Program {
        path,
        argv: &argv,
        env: &[],
        leader: Leader::Group,
        place: &[(write.as_fd(), 1)],
    })
    .unwrap();
    before.thread_set_mask().unwrap();
    drop(write);
    let mut status = String::new();
    std::fs::File::from(read)
        .read_to_string(&mut status)
        .unwrap();
    // Unreaped, its stat stays.
    let stat = Stat::of(pid.as_raw_nonzero().get()).unwrap();
    rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()).unwrap();
    assert_eq!(mask(&status, "SigBlk") & STANDARD, 0, "{status}");
    assert_eq!(mask(&status, "SigIgn") & STANDARD, 0, "{status}");
    assert_eq!(stat.pgrp, pid.as_raw_nonzero().get());
}

#[test]
fn descriptors_that_are_each_others_targets_are_swapped_whole() {
    let dir = tempfile::tempdir().unwrap();
    let a = rustix::io::fcntl_dupfd_cloexec(file_with(dir.path(), "a"), 60).unwrap();
    let b = rustix::io::fcntl_dupfd_cloexec(file_with(dir.path(), "b"), 60).unwrap();
    let (an, bn) = (a.as_raw_fd(), b.as_raw_fd());
    let script = format!("cat /proc/self/fd/{an} /proc/self/fd/{bn}");
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    let argv = [
        c"sh".to_owned(),
        c"-c".to_owned(),
        CString::new(script).unwrap(),
    ];
    let place = [(a.as_fd(), bn), (b.as_fd(), an), (write.as_fd(), 1)];
    let pid = spawn(&Program {
        path: c"/bin/sh",
        argv: &argv,
        env: &[],
        leader: Leader::Session,
        place: &place,
    })
    .unwrap();
    drop(write);
    let mut out = String::new();
    std::fs::File::from(read).read_to_string(&mut out).unwrap();
    let stat = Stat::of(pid.as_raw_nonzero().get()).unwrap();
    rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()).unwrap();
    assert_eq!(out, "ba");
    assert_eq!(stat.session, pid.as_raw_nonzero().get());
    // The caller's own stay where they were.
    assert_eq!(
        rustix::io::fcntl_getfd(&a).unwrap(),
        rustix::io::FdFlags::CLOEXEC
    );
}

#[test]
fn a_program_that_cannot_be_run_is_said_at_once() {
    let argv = [c"nothing".to_owned()];
    let failed = spawn(&Program {
        path: c"/nonexistent/nothing",
        argv: &argv,
        env: &[],
        leader: Leader::Group,
        place: &[],
    });
    assert!(
        matches!(failed, Err(Failed::Spawn(rustix::io::Errno::NOENT))),
        "{failed:?}"
    );
}

#[test]
fn a_commands_child_does_its_steps_before_its_exec() {
    let dir = tempfile::tempdir().unwrap();
    let kept = file_with(dir.path(), "kept");
    let kept_fd = kept.as_raw_fd();
    let folder = OwnedFd::from(std::fs::File::open(dir.path()).unwrap());
    let script = format!("pwd; cat /proc/self/fd/{kept_fd}");
    let mut command = Command::new("/bin/sh");
    command.args(["-c", &script]).stdout(Stdio::piped());
    InChild {
        folder: Some(folder),
        layers: None,
        new_session: true,
        keep_open: vec![kept],
        parent_death: Some(rustix::process::Signal::KILL),
    }
    .arrange(&mut command);
    let mut child = command.spawn().unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let pid = i32::try_from(child.id()).unwrap();
    let stat = Stat::of(pid).unwrap();
    child.wait().unwrap();
    let real = dir.path().canonicalize().unwrap();
    assert_eq!(out, format!("{}\nkept", real.display()));
    assert_eq!(stat.session, pid);
}

#[test]
fn a_commands_child_holds_each_placed_descriptor_at_its_number() {
    let dir = tempfile::tempdir().unwrap();
    let fds: Vec<OwnedFd> = ["a", "b", "c"]
        .iter()
        .map(|n| file_with(dir.path(), n))
        .collect();
    let place: Vec<_> = fds
        .iter()
        .zip(100..)
        .map(|(fd, n)| (fd.as_fd(), n))
        .collect();
    let mut command = Command::new("/bin/sh");
    command
        .args([
            "-c",
            "cat /proc/self/fd/100 /proc/self/fd/101 /proc/self/fd/102; \
             test -e /proc/self/fd/103 && echo more",
        ])
        .stdout(Stdio::piped());
    place_in_child(&mut command, &place).unwrap();
    let out = command.output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "abc");
}
