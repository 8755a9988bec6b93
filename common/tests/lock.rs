//! The lock protocol with real files and real processes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lnk_common::lock::{create_locked, lock_blocking, try_lock_existing};
use lnk_common::{Error, LockGuard, LockState, RunId, StartLock, StateDir};

fn state() -> (tempfile::TempDir, StateDir) {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    (dir, state)
}

fn is_held(state: &StateDir, id: &RunId) -> bool {
    matches!(try_lock_existing(state, id).unwrap(), LockState::Held)
}

/// Whether the lock is free, or becomes free within 5 s.
///
/// Tests run on parallel threads, and a fork on any of them copies every descriptor of this
/// process — close-on-exec ones included — into the child until its `exec`: for that instant a
/// released lock can still look held. So "free" is awaited; "held" never needs to be.
fn is_free(state: &StateDir, id: &RunId) -> bool {
    lock_blocking(state, id, Duration::from_secs(5))
        .unwrap()
        .is_some()
}

#[test]
fn created_lock_is_held_until_dropped() {
    let (_dir, state) = state();
    let id = RunId::generate().unwrap();
    assert!(matches!(
        try_lock_existing(&state, &id).unwrap(),
        LockState::Missing
    ));

    let guard = create_locked(&state, &id).unwrap();
    assert_eq!(guard.path(), state.lock(&id));
    assert!(
        is_held(&state, &id),
        "a second open file description sees it held"
    );
    drop(guard);

    // Free: and whoever found it free holds it now.
    let sweeper = lock_blocking(&state, &id, Duration::from_secs(5))
        .unwrap()
        .expect("free after drop");
    assert!(is_held(&state, &id));
    drop(sweeper);
    assert!(is_free(&state, &id));
}

#[test]
fn the_rename_keeps_the_locked_inode_and_leaves_no_temporary() {
    let (_dir, state) = state();
    let id = RunId::generate().unwrap();
    let guard = create_locked(&state, &id).unwrap();
    let held = rustix::fs::fstat(guard.file().as_fd()).unwrap();
    let named = rustix::fs::stat(state.lock(&id)).unwrap();
    assert_eq!((held.st_dev, held.st_ino), (named.st_dev, named.st_ino));
    let listing = state.list().unwrap();
    assert!(listing.temporaries.is_empty(), "{listing:?}");
    assert!(listing.runs[&id].lock);
    assert!(
        !listing.runs[&id].record,
        "the lock exists before the record"
    );
}

#[test]
fn an_existing_run_cannot_be_created_again() {
    let (_dir, state) = state();
    let id = RunId::generate().unwrap();
    let _guard = create_locked(&state, &id).unwrap();
    match create_locked(&state, &id) {
        Err(Error::RunExists { id: found, .. }) => assert_eq!(found, id),
        other => panic!("expected RunExists, got {other:?}"),
    }
    assert!(state.list().unwrap().temporaries.is_empty());
    assert!(is_held(&state, &id), "the first lock is untouched");
}

#[test]
fn a_leaked_descriptor_makes_a_dead_holder_look_alive() {
    let (_dir, state) = state();
    let id = RunId::generate().unwrap();
    let guard = create_locked(&state, &id).unwrap();
    // The child inherits a duplicate of the locked descriptor (same open file description).
    let mut child = Command::new("sleep")
        .arg("60")
        .stdin(Stdio::from(guard.file().try_clone().unwrap()))
        .spawn()
        .unwrap();
    drop(guard);
    assert!(is_held(&state, &id), "the child's copy keeps the lock");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        is_free(&state, &id),
        "the kernel frees it when the last copy closes"
    );
}

#[test]
fn lock_descriptors_are_not_inherited_across_exec() {
    let (_dir, state) = state();
    let id = RunId::generate().unwrap();
    let _guard = create_locked(&state, &id).unwrap();
    let _start = StartLock::take(&state).unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg("for f in /proc/self/fd/*; do readlink \"$f\"; done")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let fds = String::from_utf8_lossy(&out.stdout);
    let state_path = state.path().to_string_lossy().into_owned();
    assert!(!fds.contains(&state_path), "a lock leaked: {fds}");
}

#[test]
fn lock_blocking_waits_for_release_and_times_out() {
    let (_dir, state) = state();
    let id = RunId::generate().unwrap();
    let guard = create_locked(&state, &id).unwrap();

    let start = Instant::now();
    match lock_blocking(&state, &id, Duration::from_millis(200)) {
        Err(Error::LockTimeout { waited, .. }) => assert!(waited >= Duration::from_millis(200)),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(start.elapsed() < Duration::from_secs(5));

    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        drop(guard);
    });
    let got = lock_blocking(&state, &id, Duration::from_secs(10)).unwrap();
    assert!(got.is_some());
    releaser.join().unwrap();

    let missing = RunId::generate().unwrap();
    assert!(
        lock_blocking(&state, &missing, Duration::from_secs(1))
            .unwrap()
            .is_none()
    );
}

#[test]
fn adopt_checks_the_descriptor() {
    let (_dir, state) = state();
    let id = RunId::generate().unwrap();
    let other = RunId::generate().unwrap();
    let guard = create_locked(&state, &id).unwrap();
    let _other_guard = create_locked(&state, &other).unwrap();

    // A second open of the same file: another open file description, so not ours.
    let fresh = File::open(state.lock(&id)).unwrap();
    assert!(matches!(
        LockGuard::adopt(&state, &id, fresh),
        Err(Error::LockHeldElsewhere { .. })
    ));
    // Another run's lock file.
    let wrong = File::open(state.lock(&other)).unwrap();
    assert!(matches!(
        LockGuard::adopt(&state, &id, wrong),
        Err(Error::NotTheLock { .. })
    ));
    // A duplicate of the locked descriptor: adopted, and it keeps the lock after the original
    // closes — the hand-over from `start` to the supervisor.
    let dup = guard.file().try_clone().unwrap();
    drop(guard);
    let adopted = LockGuard::adopt(&state, &id, dup).unwrap();
    assert!(is_held(&state, &id));
    let fd = adopted.into_owned_fd();
    assert!(is_held(&state, &id));
    drop(fd);
    assert!(is_free(&state, &id));
}

#[test]
fn removing_a_run_removes_its_lock_last_while_held() {
    let (_dir, state) = state();
    let id = RunId::generate().unwrap();
    let guard = create_locked(&state, &id).unwrap();
    guard.remove().unwrap();
    assert!(matches!(
        try_lock_existing(&state, &id).unwrap(),
        LockState::Missing
    ));
}

#[test]
fn start_lock_excludes_other_takers() {
    let (_dir, state) = state();
    let first = StartLock::take(&state).unwrap();
    match StartLock::take_within(&state, Duration::from_millis(100)) {
        Err(Error::LockTimeout { path, .. }) => assert_eq!(path, state.start_lock()),
        other => panic!("expected a timeout, got {other:?}"),
    }
    drop(first);
    let _second = StartLock::take_within(&state, Duration::from_secs(5)).unwrap();
    assert!(state.list().unwrap().start_lock);
}

const ADOPT_CHILD_STATE: &str = "LNK_COMMON_TEST_ADOPT_STATE";
const ADOPT_CHILD_ID: &str = "LNK_COMMON_TEST_ADOPT_ID";

/// The supervisor's side of the hand-over, in a real child process: this test binary run again
/// with the locked file as its stdin.
#[test]
fn adopt_stdin_takes_the_lock_from_fd_0() {
    if let (Ok(dir), Ok(id)) = (
        std::env::var(ADOPT_CHILD_STATE),
        std::env::var(ADOPT_CHILD_ID),
    ) {
        adopt_child(&dir, &id);
        return;
    }

    let (_dir, state) = state();
    let id = RunId::generate().unwrap();
    let guard = create_locked(&state, &id).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "adopt_stdin_takes_the_lock_from_fd_0",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ADOPT_CHILD_STATE, state.path())
        .env(ADOPT_CHILD_ID, id.as_str())
        .stdin(Stdio::from(guard.into_file()))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Our copy went to the child with `into_file` + `Stdio::from`: only the child holds it now.
    let stdout = child.stdout.take().unwrap();
    let mut said = String::new();
    for line in BufReader::new(stdout).lines() {
        // libtest prints "test <name> ... " before our words, on the same line.
        let line = line.unwrap();
        if let Some(at) = line.find("adopted").or_else(|| line.find("failed:")) {
            said = line[at..].to_owned();
            break;
        }
    }
    assert_eq!(said, "adopted; fd 0 is /dev/null");
    assert!(is_held(&state, &id), "the child holds the lock");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        is_free(&state, &id),
        "freed when the holder dies, however it dies"
    );
}

#[allow(clippy::print_stdout)]
fn adopt_child(dir: &str, id: &str) {
    let state = StateDir::new(dir);
    let id = RunId::parse(id).unwrap();
    match LockGuard::adopt_stdin(&state, &id) {
        Ok(guard) => {
            let fd0 = std::fs::read_link("/proc/self/fd/0").unwrap();
            println!("adopted; fd 0 is {}", fd0.display());
            // Hold the lock until the parent kills us (or, should the parent have died, a while).
            let _guard = guard;
            std::thread::sleep(Duration::from_secs(120));
            std::process::exit(2);
        }
        Err(e) => {
            println!("failed: {e}");
            std::process::exit(1);
        }
    }
}

#[test]
fn a_fifo_in_place_of_a_lock_or_a_record_is_refused_without_hanging() {
    let (dir, state) = state();
    let id = RunId::parse("fifofifofifo1").unwrap();
    for name in ["fifofifofifo1.lock", "fifofifofifo1.json", "start.lock"] {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.path().join(name),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
    }
    // Each would block forever on a FIFO without a writer; on a deadline, so a hang fails.
    let (tx, rx) = std::sync::mpsc::channel();
    let checked = state.clone();
    std::thread::spawn(move || {
        let lock = try_lock_existing(&checked, &id).map(|_| ());
        let record = lnk_common::record::Record::load(&checked, &id).map(|_| ());
        let start = StartLock::take_within(&checked, Duration::from_secs(1)).map(|_| ());
        let _ = tx.send((lock, record, start));
    });
    let (lock, record, start) = rx.recv_timeout(Duration::from_secs(10)).expect("no hang");
    for result in [lock, record, start] {
        assert!(
            matches!(result, Err(Error::NotRegularFile { .. })),
            "{result:?}"
        );
    }
}
