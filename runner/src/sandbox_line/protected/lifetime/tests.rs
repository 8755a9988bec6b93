#![allow(clippy::unwrap_used)]
use super::*;
use crate::sandbox_line::protected::scan;
use lnk_common::record::FileId;
use std::fs;
use std::process::{Command, Stdio};

/// A files folder with its placeholders made and listed, and a lease on it whose lists live
/// in a folder of the test's own.
fn made() -> (tempfile::TempDir, tempfile::TempDir, Lease) {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().canonicalize().unwrap();
    let registry = tempfile::tempdir().unwrap();
    let found = scan::scan(&files, None).unwrap();
    let lease = Lease {
        files: files.clone(),
        dir: rustix::fs::open(
            registry.path(),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .unwrap(),
        key: key(&files),
        lock: rustix::fs::open("/dev/null", OFlags::RDONLY, Mode::empty()).unwrap(),
    };
    let text: String = found.made.iter().map(line).collect();
    fs::write(registry.path().join(lease.list()), text).unwrap();
    (dir, registry, lease)
}

fn listed(registry: &tempfile::TempDir, lease: &Lease) -> Vec<Made> {
    fs::read_to_string(registry.path().join(lease.list()))
        .unwrap()
        .lines()
        .filter_map(parse)
        .collect()
}

fn entries(files: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(files)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_listed_placeholder_round_trips() {
    let made = Made {
        rel: PathBuf::from("a b/.git/hooks\nx"),
        kind: Placeholder::File,
        id: FileId { dev: 7, ino: 42 },
    };
    assert_eq!(parse(line(&made).trim_end()), Some(made));
    assert_eq!(parse("x 1 2 61"), None);
}

#[test]
fn unused_placeholders_are_removed_and_nothing_else() {
    let (_dir, registry, lease) = made();
    fs::write(lease.files.join("mine.txt"), "the user's").unwrap();
    clean_up(&lease);
    assert_eq!(entries(&lease.files), ["mine.txt"]);
    assert!(listed(&registry, &lease).is_empty());
}

#[test]
fn what_the_user_replaced_or_filled_is_theirs_and_stays() {
    let (_dir, registry, lease) = made();
    // Replaced as `config --write` does: the placeholder folder taken away, a file put there.
    fs::remove_dir(lease.files.join(".mcp.json")).unwrap();
    fs::write(lease.files.join(".mcp.json"), "{}").unwrap();
    // Filled.
    fs::write(lease.files.join(".vscode/settings.json"), "{}").unwrap();
    clean_up(&lease);
    assert_eq!(entries(&lease.files), [".mcp.json", ".vscode"]);
    assert_eq!(
        fs::read_to_string(lease.files.join(".mcp.json")).unwrap(),
        "{}"
    );
    // The replaced one is no placeholder of ours any more; the filled one is, should it be
    // emptied again.
    let left: Vec<PathBuf> = listed(&registry, &lease)
        .into_iter()
        .map(|m| m.rel)
        .collect();
    assert_eq!(left, [PathBuf::from(".vscode")]);
}

#[test]
fn a_placeholder_a_sandbox_still_has_a_mount_on_stays() {
    if !Path::new("/usr/bin/bwrap").exists() {
        return;
    }
    let (_dir, registry, lease) = made();
    let vscode = lease.files.join(".vscode");
    let vscode = vscode.to_str().unwrap();
    let mut sandbox = Command::new("/usr/bin/bwrap")
        .args(["--dev-bind", "/", "/", "--ro-bind", vscode, vscode])
        .args(["--unshare-user", "--unshare-pid", "--die-with-parent"])
        .args(["--", "/bin/sh", "-c", "echo up; exec sleep 30"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut up = [0u8; 3];
    std::io::Read::read_exact(sandbox.stdout.as_mut().unwrap(), &mut up).unwrap();
    clean_up(&lease);
    let _ = sandbox.kill();
    let _ = sandbox.wait();
    assert_eq!(entries(&lease.files), [".vscode"]);
    let left: Vec<PathBuf> = listed(&registry, &lease)
        .into_iter()
        .map(|m| m.rel)
        .collect();
    assert_eq!(left, [PathBuf::from(".vscode")]);
    // Once the sandbox is gone (its inner process dies with bubblewrap's, a moment later), it
    // goes too.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !entries(&lease.files).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        clean_up(&lease);
    }
    assert!(entries(&lease.files).is_empty());
}
