//! Both halves of `--detached` against each other: this test binary starts itself through
//! `lnk_proc::spawn::detached::start`, and the program it started (this binary again, told
//! `--detached`) calls `fork_away` first thing, as `lnk-link-supervise` does. A harness of its
//! own (`harness = false`): the started program must have one thread to fork away.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use lnk_proc::proc_info::Stat;

/// The first argument of the started program.
const CHILD: &str = "detached-child";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(CHILD) {
        return child(&args);
    }
    parent();
    println!("test detached::both_halves ... ok");
    ExitCode::SUCCESS
}

/// The started program: forks away, then says on its stdout who it is, what it holds at fd 3
/// and fd 100, and its blocked signals.
fn child(args: &[String]) -> ExitCode {
    if args.last().map(String::as_str) != Some("--detached") {
        return ExitCode::from(3);
    }
    lnk_proc::spawn::detached::fork_away();
    let me = std::process::id();
    let stat = Stat::of(i32::try_from(me).unwrap()).unwrap();
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let blocked = status
        .lines()
        .find_map(|line| line.strip_prefix("SigBlk:"))
        .unwrap()
        .trim()
        .to_owned();
    let input = std::fs::read_to_string("/proc/self/fd/3").unwrap_or_default();
    let more = std::fs::read_to_string("/proc/self/fd/100").unwrap_or_default();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{me} {} {} {blocked} {input} {more}",
        stat.ppid, stat.session
    )
    .unwrap();
    ExitCode::SUCCESS
}

fn parent() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = |name: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, name).unwrap();
        OwnedFd::from(std::fs::File::open(&path).unwrap())
    };
    let (input, more) = (file("input"), file("more"));
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    // A signal blocked here, which the started program must not inherit.
    let mut blocked = nix::sys::signal::SigSet::empty();
    blocked.add(nix::sys::signal::Signal::SIGUSR1);
    blocked.thread_block().unwrap();

    let exe = std::env::current_exe().unwrap();
    let stdio = lnk_proc::spawn::detached::Stdio {
        stdout: Some(write.as_fd()),
        input: Some(input.as_fd()),
        more: &[(more.as_fd(), 100)],
        ..Default::default()
    };
    lnk_proc::spawn::detached::start(&exe, &[OsStr::new(CHILD)], stdio, "test program").unwrap();
    drop(write);
    // The pipe's end: every holder is gone, the process that went on included.
    let mut said = String::new();
    std::fs::File::from(read).read_to_string(&mut said).unwrap();
    let words: Vec<&str> = said.split_whitespace().collect();
    assert_eq!(words.len(), 6, "{said}");
    let me = std::process::id().to_string();
    let my_session = nix::unistd::getsid(None).unwrap().as_raw().to_string();
    let (pid, ppid, session) = (words[0], words[1], words[2]);
    assert_ne!(
        ppid, me,
        "the process that went on is not this one's child: {said}"
    );
    assert_ne!(session, my_session, "{said}");
    assert_ne!(
        session, pid,
        "it is the first process's session, not its own: {said}"
    );
    assert_eq!(u64::from_str_radix(words[3], 16).unwrap(), 0, "{said}");
    assert_eq!((words[4], words[5]), ("input", "more"), "{said}");

    // The first process, which exited once it had forked, is reaped here by a thread of
    // `start`'s: this process is left with no child.
    let deadline = Instant::now() + Duration::from_secs(10);
    let children = format!("/proc/self/task/{me}/children");
    loop {
        let left = std::fs::read_to_string(&children).unwrap();
        if left.trim().is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "a child is left: {left}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
