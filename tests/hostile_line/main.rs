//! A hostile agent against `serve` started exactly as `lnk-link-run config claude-code --scope
//! user --files-from roots … --write` writes it into a home of the test's own: each test
//! plants what a person's machine may hold, runs the attack as the agent would (a shell
//! through git's `alias.x=!…`, which an allowed `git` gives it), and proves both that the
//! attack fails and that the same probe works where it should, so that none can pass
//! vacuously.
//!
//! Run: `cargo test -p lnk-tests --test hostile_line` (needs bubblewrap, git, and cargo
//! through rustup for the cargo home's test).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use lnk_tests::bins;
use lnk_tests::sandbox::{Sandbox, path_str};
use lnk_tests::serve::{ANSWER, Era, Serve};
use lnk_tests::toolchains::{on_path, rustup_home};

/// A home of the test's own (under `target/tmp`, which bubblewrap does not hide), with its
/// files folder `work`, a git repository.
struct Home {
    _root: tempfile::TempDir,
    home: PathBuf,
}

impl Home {
    fn new(prefix: &str) -> Home {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
        std::fs::create_dir_all(base).unwrap();
        let root = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(base)
            .unwrap();
        let home = root.path().canonicalize().unwrap().join("home");
        std::fs::create_dir_all(home.join("work")).unwrap();
        std::fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = Link Run Tester\n\temail = tester@example.org\n",
        )
        .unwrap();
        let home = Home { _root: root, home };
        home.git(&["init", "-q"]);
        home.git(&["commit", "-q", "--allow-empty", "-m", "first"]);
        home
    }

    fn files(&self) -> PathBuf {
        self.home.join("work")
    }

    /// The environment the person's shell gives `config`, their git and the host.
    fn env(&self) -> Vec<(&'static str, OsString)> {
        vec![
            ("HOME", self.home.clone().into_os_string()),
            ("PATH", std::env::var_os("PATH").unwrap_or_default()),
            ("USER", "root".into()),
            ("LANG", "C.UTF-8".into()),
        ]
    }

    /// The person's own git in the files folder, outside any sandbox.
    fn git(&self, args: &[&str]) -> std::process::Output {
        let out = Command::new("git")
            .args(args)
            .current_dir(self.files())
            .env_clear()
            .envs(self.env())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        out
    }

    /// `config claude-code --scope user --files-from roots … --write` with the README's
    /// flags, `programs` allowed, `path` as `--programs-path`; the entry it wrote.
    fn write_entry(&self, path: &str, programs: &[&str]) -> (PathBuf, Vec<String>) {
        let mut flags: Vec<String> = [
            "config",
            "claude-code",
            "--scope",
            "user",
            "--files-from",
            "roots",
            "--programs-path",
            path,
            "--timeout",
            "1m",
            "--output",
            "64KiB",
        ]
        .map(str::to_owned)
        .to_vec();
        for program in programs {
            flags.extend(["--program".to_owned(), (*program).to_owned()]);
        }
        flags.push("--write".to_owned());
        let out = Command::new(bins::link_run())
            .args(&flags)
            .current_dir(self.files())
            .env_clear()
            .envs(self.env())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "config --write failed: {stderr}");
        let written = std::fs::read(self.home.join(".claude.json")).unwrap();
        let entry: Value = serde_json::from_slice(&written).unwrap();
        let entry = &entry["mcpServers"]["link-run"];
        let args = entry["args"]
            .as_array()
            .unwrap_or_else(|| panic!("no args in {entry}"))
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect();
        (PathBuf::from(entry["command"].as_str().unwrap()), args)
    }

    /// `serve` as the host starts the entry: in the project's folder, with the person's
    /// environment.
    fn serve(&self, command: &Path, args: &[String]) -> Serve {
        let argv: Vec<OsString> = args.iter().map(OsString::from).collect();
        let env = self.env();
        let envs: Vec<(&str, &std::ffi::OsStr)> =
            env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
        let mut serve = Serve::spawn_program(
            command,
            &argv,
            Era::Legacy("2025-11-25"),
            &envs,
            Some(&self.files()),
            None,
        );
        serve.initialize("2025-11-25");
        serve
    }
}

/// Runs `program args` as a `command` call: its exit code and its stdout and stderr.
fn call(serve: &mut Serve, program: &str, args: &[&str]) -> (i64, String) {
    let id = serve.send_call(json!({"program": program, "args": args}), None);
    let result = serve.call_result(id, Duration::from_secs(90));
    let value = lnk_tests::results::structured(&result).clone();
    let code = value["exit_code"]
        .as_i64()
        .unwrap_or_else(|| panic!("`{program} {args:?}` did not run: {result}"));
    let text = |key: &str| value[key].as_str().unwrap_or_default().to_owned();
    (code, format!("{}{}", text("stdout"), text("stderr")))
}

/// A shell command run inside through git's alias, as an agent with `git` allowed can.
fn shell(serve: &mut Serve, script: &str) -> (i64, String) {
    let alias = format!("alias.x=!{script}");
    call(serve, "git", &["-c", &alias, "x"])
}

fn close(mut serve: Serve) {
    serve.close_stdin();
    let status = serve.wait_exit(ANSWER);
    assert!(
        status.success(),
        "serve ended with {status}: {}",
        serve.stderr()
    );
}

/// The person's global git configuration sends every repository's hooks to its own
/// `.githooks` (a relative `core.hooksPath`): a program that writes one there would have it
/// run by the person's next `git commit`, outside any sandbox. It must be read-only inside,
/// while a folder beside it stays writable.
#[test]
fn a_relative_hooks_path_of_the_persons_own_git_configuration_is_protected() {
    relative_hooks_path_is_protected(false);
}

/// The same, with the hooks path added to the person's configuration while serve runs, after a
/// call: serve's search for protected paths, kept while nothing in the files folder changes,
/// is not kept past it.
#[test]
fn a_hooks_path_the_person_adds_while_serve_runs_is_protected_in_the_next_call() {
    relative_hooks_path_is_protected(true);
}

fn relative_hooks_path_is_protected(added_while_serving: bool) {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let home = Home::new("hostile-hooks-");
    let marker = home.home.join("hook-ran");
    std::fs::write(
        home.home.join(".gitconfig"),
        "[user]\n\tname = Link Run Tester\n\temail = tester@example.org\n\
         [include]\n\tpath = ~/.gitconfig.hooks\n",
    )
    .unwrap();
    // Through an include, as dotfiles often hold it.
    let add_hooks_path = || {
        std::fs::write(
            home.home.join(".gitconfig.hooks"),
            "[core]\n\thooksPath = .githooks\n",
        )
        .unwrap();
    };
    if !added_while_serving {
        add_hooks_path();
    }
    let (command, args) = home.write_entry("/usr/local/bin:/usr/bin:/bin", &["git"]);
    let mut serve = home.serve(&command, &args);
    if added_while_serving {
        // Two calls that change nothing, so that a search is kept; then the person's change.
        for _ in 0..2 {
            let (code, said) = shell(&mut serve, "true");
            assert_eq!(code, 0, "{said}");
        }
        add_hooks_path();
    }

    let hook = format!(
        "mkdir -p .githooks && printf '#!/bin/sh\\ntouch {}\\n' > .githooks/pre-commit && \
         chmod +x .githooks/pre-commit && echo PLANT\"\"ED",
        path_str(&marker)
    );
    let (code, said) = shell(&mut serve, &hook);
    assert_ne!(code, 0, "the hook was written: {said}");
    assert!(!said.contains("PLANTED"), "{said}");
    // The probe itself works: the same writes in a folder of the agent's own.
    let (code, said) = shell(
        &mut serve,
        "mkdir -p tools && printf '#!/bin/sh\\n' > tools/pre-commit && \
         chmod +x tools/pre-commit && echo PLANT\"\"ED",
    );
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("PLANTED"), "{said}");
    assert!(home.files().join("tools/pre-commit").is_file());
    close(serve);

    assert!(
        !home.files().join(".githooks/pre-commit").exists(),
        "a hook landed in the person's hooks folder"
    );
    home.git(&["commit", "-q", "--allow-empty", "-m", "the person's"]);
    assert!(
        !marker.exists(),
        "the person's git commit ran the agent's hook"
    );
}

/// `~/.cargo/bin/cargo` is a link to rustup in another cargo home (a shared install's, another
/// user's), which holds that home's registry tokens: `config` must show its programs, never
/// the tokens beside them.
#[test]
fn a_cargo_home_reached_through_a_link_shows_no_tokens() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let Some(cargo) = on_path("cargo") else {
        panic!("no cargo on PATH: the tests run under cargo");
    };
    let real = cargo.canonicalize().unwrap();
    let Some(rustup_home) =
        rustup_home().filter(|_| real.file_name().is_some_and(|n| n == "rustup"))
    else {
        lnk_tests::skip::skip("this machine's cargo is not rustup's");
        return;
    };
    let home = Home::new("hostile-cargo-");
    // The shared cargo home: its own rustup (a hard link, else a copy), and its tokens.
    let shared = home.home.parent().unwrap().join("opt/cargo");
    std::fs::create_dir_all(shared.join("bin")).unwrap();
    let rustup = shared.join("bin/rustup");
    if std::fs::hard_link(&real, &rustup).is_err() {
        std::fs::copy(&real, &rustup).unwrap();
    }
    std::fs::write(
        shared.join("credentials.toml"),
        "[registry]\ntoken = \"SECRET-SHARED-CARGO\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(home.home.join(".cargo/bin")).unwrap();
    std::os::unix::fs::symlink(&rustup, home.home.join(".cargo/bin/cargo")).unwrap();
    std::os::unix::fs::symlink(&rustup_home, home.home.join(".rustup")).unwrap();

    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        path_str(&home.home.join(".cargo/bin"))
    );
    let (command, args) = home.write_entry(&path, &["cargo", "git"]);
    let mut serve = home.serve(&command, &args);

    // The toolchain runs: what it needs of the shared home is shown.
    let (code, said) = call(&mut serve, "cargo", &["--version"]);
    assert_eq!(code, 0, "cargo did not run: {said}");
    assert!(said.contains("cargo "), "{said}");
    let (code, said) = shell(&mut serve, &format!("ls {}", path_str(&shared.join("bin"))));
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("rustup"), "{said}");
    // Its tokens are not.
    let tokens = path_str(&shared.join("credentials.toml"));
    let (code, said) = shell(&mut serve, &format!("cat {tokens}"));
    assert_ne!(code, 0, "{said}");
    assert!(
        !said.contains("SECRET-SHARED-CARGO"),
        "the tokens were read: {said}"
    );
    let (code, said) = shell(&mut serve, &format!("ls -a {}", path_str(&shared)));
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("bin"), "{said}");
    assert!(
        !said.contains("credentials"),
        "the tokens were listed: {said}"
    );
    close(serve);
}
