//! An agent's project as a user has it: a repository at the top with a commit and git's
//! sample hooks, a repository nested two levels down (`vendor/lib`), an editor's and a host's
//! settings, and the agent's own program in `bin/`; the protected paths to attack in it, what
//! they hold seen from outside, and calls that run an attack.
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::world::World;
use lnk_tests::results::{ran, text};
use lnk_tests::sandbox::path_str;
use lnk_tests::serve::Serve;
use lnk_tests::tools::{start, wait_ended};

/// The nested repository.
pub const NESTED: &str = "vendor/lib";

/// Every protected path to attack, read-only ones (relative to the files folder): each name
/// at the top, what the repositories' git folders hold, and the nested repository's parts.
pub const READ_ONLY: &[&str] = &[
    ".mcp.json",
    ".envrc",
    ".gitmodules",
    ".gitconfig",
    ".bashrc",
    ".bash_profile",
    ".zshrc",
    ".zprofile",
    ".profile",
    ".ripgreprc",
    ".vscode",
    ".vscode/settings.json",
    ".idea",
    ".claude",
    ".claude/settings.json",
    ".gemini",
    ".codex",
    ".agents",
    ".cursor",
    ".devcontainer",
    ".devcontainer.json",
    ".github/workflows",
    ".git/config",
    ".git/config.worktree",
    ".git/hooks",
    ".git/hooks/pre-commit.sample",
    "vendor/lib/.git/config",
    "vendor/lib/.git/config.worktree",
    "vendor/lib/.git/hooks",
    "vendor/lib/.vscode",
];

/// The folders pinned: writable inside, but never renamed or removed.
pub const PINNED: &[&str] = &[".git", ".github", "vendor", "vendor/lib", "vendor/lib/.git"];

/// The user's git, with an identity, in `dir`, as `user` (`None`: this process's); it looks
/// for a repository no higher than the tests' folder (which lies in Link Run's own).
pub fn git(dir: &Path, args: &[&str], user: Option<u32>) -> std::process::Output {
    let mut command = Command::new("git");
    command
        .args(["-c", "user.name=Me", "-c", "user.email=me@example.invalid"])
        .args(["-c", "init.defaultBranch=main", "-c", "safe.directory=*"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CEILING_DIRECTORIES", lnk_tests::bins::target_tmp())
        .env("HOME", "/nonexistent")
        .env_remove("GIT_DIR");
    if let Some(uid) = user {
        use std::os::unix::process::CommandExt;
        command.uid(uid).gid(uid);
    }
    command.output().unwrap()
}

fn git_ok(dir: &Path, args: &[&str]) {
    let out = git(dir, args, None);
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// Makes the project in `files` (with a repository at the top when `top_repository`), the
/// agent's program in `files/bin`.
pub fn make(files: &Path, top_repository: bool) {
    if top_repository {
        git_ok(files, &["init", "-q"]);
        std::fs::write(files.join("README"), "mine\n").unwrap();
        git_ok(files, &["add", "README"]);
        git_ok(files, &["commit", "-qm", "first"]);
    }
    let nested = files.join(NESTED);
    std::fs::create_dir_all(&nested).unwrap();
    git_ok(&nested, &["init", "-q"]);
    std::fs::write(nested.join("lib.c"), "int x;\n").unwrap();
    git_ok(&nested, &["add", "lib.c"]);
    git_ok(&nested, &["commit", "-qm", "lib"]);
    std::fs::create_dir_all(nested.join(".vscode")).unwrap();
    std::fs::write(nested.join(".vscode/tasks.json"), "{}\n").unwrap();
    std::fs::create_dir(files.join(".vscode")).unwrap();
    std::fs::write(files.join(".vscode/settings.json"), "{\"mine\": true}\n").unwrap();
    std::fs::create_dir(files.join(".claude")).unwrap();
    std::fs::write(files.join(".claude/settings.json"), "{\"mine\": true}\n").unwrap();
    let bin = files.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::copy(
        env!("CARGO_BIN_EXE_lnk-test-hostile"),
        bin.join("lnk-test-hostile"),
    )
    .unwrap();
}

/// `serve` for the world under the README's recommended line, allowing the agent's program,
/// git and sh.
pub fn serve(world: &World) -> Serve {
    let line = world.recommended();
    assert!(line.iter().any(|w| w == "{protected}"), "{line:?}");
    let bin = world.files().join("bin");
    world
        .serve(line)
        .programs_path(&format!("{}:/usr/bin:/bin", path_str(&bin)))
        .programs(&["lnk-test-hostile", "git", "sh"])
        .start()
}

/// What a path holds, seen from outside: its kind and identity, and for a file its bytes, for
/// a folder each entry's, recursively.
pub fn snapshot(files: &Path, rels: &[&str]) -> BTreeMap<String, String> {
    let mut seen = BTreeMap::new();
    for rel in rels {
        look(&files.join(rel), rel, &mut seen);
    }
    seen
}

fn look(path: &Path, rel: &str, seen: &mut BTreeMap<String, String>) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        seen.insert(rel.to_owned(), "missing".into());
        return;
    };
    let kind = if meta.is_dir() {
        "folder"
    } else if meta.is_symlink() {
        "link"
    } else {
        "file"
    };
    let mut what = format!(
        "{kind} {}:{} mode {:o}",
        meta.dev(),
        meta.ino(),
        meta.mode()
    );
    if meta.is_file() {
        what.push_str(&format!(" {:?}", std::fs::read(path).unwrap()));
    }
    seen.insert(rel.to_owned(), what);
    if meta.is_dir() {
        let mut names: Vec<PathBuf> = std::fs::read_dir(path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for name in names {
            let child = format!("{rel}/{}", name.file_name().unwrap().to_string_lossy());
            look(&name, &child, seen);
        }
    }
}

/// The pinned folders' identities, from outside.
pub fn pins(files: &Path) -> Vec<(String, u64)> {
    PINNED
        .iter()
        .map(|rel| {
            let meta = std::fs::symlink_metadata(files.join(rel)).unwrap();
            assert!(meta.is_dir(), "{rel} is no folder any more");
            ((*rel).to_owned(), meta.ino())
        })
        .collect()
}

/// Fails on any `BROKE` line, and on output that held nothing.
pub fn all_held(how: &str, output: &str) {
    let broke: Vec<&str> = output.lines().filter(|l| l.starts_with("BROKE")).collect();
    assert!(
        broke.is_empty(),
        "{how}: got through:\n{}",
        broke.join("\n")
    );
    assert!(
        output.lines().any(|l| l.starts_with("held")),
        "{how}: said nothing: {output:?}"
    );
}

/// Runs `program args` as a `command` call; its structured value.
pub fn call(serve: &mut Serve, program: &str, args: &[String]) -> Value {
    let result = serve.call(json!({"program": program, "args": args}));
    ran(&result)
}

/// Runs an attack of the agent's program as a call; its stdout.
pub fn by_call(serve: &mut Serve, attack: &[String]) -> String {
    let result = serve.call(json!({"program": "lnk-test-hostile", "args": attack}));
    assert_eq!(ran(&result)["exit_code"], 0, "{result}");
    text(&result)
}

/// Runs an attack of the agent's program as a background run; its output.
pub fn by_run(world: &World, serve: &mut Serve, attack: &[String]) -> String {
    let id = start(
        serve,
        json!({"program": "lnk-test-hostile", "args": attack}),
    );
    let run: Value = wait_ended(serve, &id, Duration::from_secs(60));
    assert_eq!(run["exit_code"], 0, "{run}");
    std::fs::read_to_string(world.bg.output_path(&id)).unwrap()
}

/// `word` followed by the absolute paths of `rels` in `files`.
pub fn attack(word: &str, files: &Path, rels: &[&str]) -> Vec<String> {
    std::iter::once(word.to_owned())
        .chain(rels.iter().map(|rel| path_str(&files.join(rel))))
        .collect()
}
