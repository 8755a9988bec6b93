//! `config --write` in project scope after the agent's programs replaced the host's files, and
//! the folders above them, with links to the user's own files and to unrelated ones (finding
//! 14: a `.claude/settings.local.json` linked to `~/.claude/settings.json` got
//! `enabledMcpjsonServers` there): it refuses, says why, and nothing outside the files folder
//! changes, no backup is made beside the link's target, whether the sandbox check runs first
//! (it refuses a link at a protected name) or not (the writer refuses every link on the way).
use std::ffi::OsString;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use crate::project::make;
use crate::world::World;
use lnk_tests::sandbox::{Sandbox, path_str};

/// The user's own files outside the files folder, and what they hold.
fn outside(root: &Path) -> Vec<(PathBuf, String)> {
    let home = root.join("home");
    vec![
        (
            home.join(".claude/settings.json"),
            "{\"model\": \"mine\"}\n".into(),
        ),
        (home.join(".claude.json"), "{\"mcpServers\": {}}\n".into()),
        (
            home.join(".gemini/settings.json"),
            "{\"theme\": \"Dark\"}\n".into(),
        ),
        (
            root.join("unrelated.json"),
            "{\"data\": [1, 2, 3]}\n".into(),
        ),
    ]
}

/// Every file in `folder`, recursively, with its bytes.
fn listing(folder: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().path())
    {
        if entry.is_symlink() {
            found.push((entry.clone(), b"a link".to_vec()));
        } else if entry.is_dir() {
            found.extend(listing(&entry));
        } else {
            found.push((entry.clone(), std::fs::read(&entry).unwrap()));
        }
    }
    found.sort();
    found
}

fn config(world: &World, host: &str, check: bool) -> std::process::Output {
    let files = world.files();
    let mut argv: Vec<OsString> = [
        "config",
        host,
        "--scope",
        "project",
        "--write",
        "--files",
        &path_str(files),
        "--programs-path",
        "/usr/bin:/bin",
        "--program",
        "ls",
        "--timeout",
        "30s",
        "--output",
        "64KiB",
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    if !check {
        argv.push("--no-sandbox-check".into());
    }
    std::process::Command::new(lnk_tests::bins::link_run())
        .args(argv)
        .current_dir(world.root())
        .env("HOME", world.root().join("home"))
        .env("XDG_CONFIG_HOME", world.root().join("home/.config"))
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

/// What the agent linked: a path in the files folder, and where it leads.
type Links = Vec<(&'static str, PathBuf)>;
/// A host, and the links made before its `config --write` (given the test's folder).
type Case = (&'static str, fn(&Path) -> Links);

#[test]
fn config_refuses_links_the_agent_made_and_changes_nothing_outside() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let cases: Vec<Case> = vec![
        ("claude-code", |root| {
            vec![(
                ".claude/settings.local.json",
                root.join("home/.claude/settings.json"),
            )]
        }),
        ("claude-code", |root| {
            vec![(".mcp.json", root.join("unrelated.json"))]
        }),
        ("claude-code", |root| {
            vec![(".claude", root.join("home/.claude"))]
        }),
        ("gemini", |root| {
            vec![(".gemini", root.join("home/.gemini"))]
        }),
        ("vscode", |root| {
            vec![(".vscode/mcp.json", root.join("unrelated.json"))]
        }),
    ];
    for check in [true, false] {
        for (host, links) in &cases {
            let world = World::new(None, true);
            let files = world.files().to_path_buf();
            make(&files, true);
            for (path, text) in outside(world.root()) {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, text).unwrap();
            }
            let links = links(world.root());
            for (rel, target) in &links {
                let at = files.join(rel);
                if at.is_dir() {
                    std::fs::remove_dir_all(&at).unwrap();
                } else {
                    let _ = std::fs::remove_file(&at);
                }
                std::fs::create_dir_all(at.parent().unwrap()).unwrap();
                symlink(target, &at).unwrap();
            }
            let before = listing(&world.root().join("home"));
            let unrelated = std::fs::read(world.root().join("unrelated.json")).unwrap();
            let out = config(&world, host, check);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{host} {links:?}: {err}");
            assert!(
                err.contains("symbolic link") && err.contains(links[0].0),
                "{host}, check {check}: the refusal says why: {err}"
            );
            assert_eq!(
                listing(&world.root().join("home")),
                before,
                "{host}: changed outside"
            );
            assert_eq!(
                std::fs::read(world.root().join("unrelated.json")).unwrap(),
                unrelated
            );
            assert_eq!(
                std::fs::read_dir(world.root())
                    .unwrap()
                    .filter_map(Result::ok)
                    .filter(|e| { e.file_name().to_string_lossy().contains(".bak") })
                    .count(),
                0
            );
        }
    }
}
