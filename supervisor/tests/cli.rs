//! The supervisor's own checks of its binary: `gate` and `keygen`. The background runs end to
//! end are in the workspace's `tests/`. (An integration test here also makes `cargo test`
//! build `lnk-link-supervise` for them.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use assert_cmd::cargo::CommandCargoExt;

fn supervise() -> Command {
    Command::cargo_bin("lnk-link-supervise").unwrap()
}

#[test]
fn gate_runs_nothing_when_the_pipe_closes_first() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let mut child = supervise()
        .args(["gate", "--", "touch"])
        .arg(&marker)
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    drop(child.stdin.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(125));
    assert!(
        !marker.exists(),
        "the gate ran its program without being opened"
    );
}

#[test]
fn gate_runs_its_program_once_opened_with_an_empty_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let mut child = supervise()
        .args([
            "gate",
            "--",
            "sh",
            "-c",
            "touch \"$0\"; read x && touch \"$0.read\"; exit 4",
        ])
        .arg(&marker)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"g").unwrap();
    let status = child.wait().unwrap();
    // The gate reports the program's exit to its supervisor (on fd 3, absent here) and ends
    // well itself, once everything the program started is gone.
    assert!(status.success(), "{status}");
    assert!(marker.exists(), "the program did not run");
    // The program's stdin is empty (not the gate's pipe, still open here): `read` failed.
    assert!(
        !dir.path().join("ran.read").exists(),
        "the program read the gate's pipe"
    );
    drop(stdin);
}

#[test]
fn keygen_writes_a_private_key_pair_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let keyring = dir.path().join("keyring");
    let run = || {
        supervise()
            .args(["keygen", "--keyring"])
            .arg(&keyring)
            .args(["--as", "agent-7"])
            .output()
            .unwrap()
    };
    assert!(run().status.success());
    let key = keyring.join("agent-7.key");
    assert_eq!(key.metadata().unwrap().permissions().mode() & 0o777, 0o600);
    let public = std::fs::read_to_string(keyring.join("agent-7.pub")).unwrap();
    assert_eq!(public.trim().len(), 64);
    let before = std::fs::read(&key).unwrap();
    let again = run();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists"));
    assert_eq!(std::fs::read(&key).unwrap(), before);
}

#[test]
fn keygen_refuses_a_bad_agent_id() {
    let dir = tempfile::tempdir().unwrap();
    let out = supervise()
        .args(["keygen", "--keyring"])
        .arg(dir.path())
        .args(["--as", "../evil"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn an_error_is_said_once_with_its_cause() {
    let out = supervise()
        .args(["keygen", "--keyring", "/dev/null/x", "--as", "ada"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(
        stderr.matches("Not a directory").count(),
        1,
        "the cause once: {stderr}"
    );
}
