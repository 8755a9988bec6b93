//! A hostile agent against `serve` started exactly as `lnk-link-run config claude-code --scope
//! user --files-from roots … --write` writes it into a home of the test's own: against the
//! network's allow-list (`--net-allow`, the registry a stand-in on this machine's loopback
//! named through a hosts file in a mount namespace of serve's own), and against the protected
//! paths when serve runs as an ordinary user, whose programs may change the mode of what that
//! user owns. Each test proves both that the attack fails and that the same probe works where
//! it should, so that none can pass vacuously.
//!
//! Run: `cargo test -p lnk-tests --test hostile_net` (needs root, to run serve as `nobody`
//! and to give it its own hosts file, bubblewrap, git, curl and python3).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use lnk_tests::bins;
use lnk_tests::net::Names;
use lnk_tests::results::text;
use lnk_tests::sandbox::Sandbox;
use lnk_tests::serve::{ANSWER, Era, Serve};

/// The allow-list against other spellings of a host, smuggling and redirects.
mod network;
/// The protected paths against a folder's permissions taken away.
mod protected;

/// The user the tests run serve as when it is not root.
const NOBODY: u32 = 65534;

/// Whether these tests can run here: root, bubblewrap and the programs they use.
fn usable() -> bool {
    if !rustix::process::geteuid().is_root() {
        lnk_tests::skip::skip("these tests need root (serve as `nobody`, a hosts file of its own)");
        return false;
    }
    for program in [
        "/usr/bin/git",
        "/usr/bin/curl",
        "/usr/bin/python3",
        "/usr/bin/setpriv",
        "/usr/bin/unshare",
    ] {
        if !Path::new(program).exists() {
            lnk_tests::skip::skip(&format!("{program} is missing"));
            return false;
        }
    }
    Sandbox::Bwrap.usable()
}

/// A home of the test's own (under `target/tmp`, which bubblewrap does not hide), owned by the
/// user serve runs as, with its files folder `work`, a git repository.
struct Home {
    root: tempfile::TempDir,
    home: PathBuf,
    user: Option<u32>,
}

impl Home {
    fn new(prefix: &str, user: Option<u32>) -> Home {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
        std::fs::create_dir_all(base).unwrap();
        let root = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(base)
            .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let home = root.path().canonicalize().unwrap().join("home");
        std::fs::create_dir_all(home.join("work")).unwrap();
        std::fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = Link Run Tester\n\temail = tester@example.org\n",
        )
        .unwrap();
        let home = Home { root, home, user };
        home.hand_over();
        home.git(&["init", "-q"]);
        home.git(&["commit", "-q", "--allow-empty", "-m", "first"]);
        home
    }

    fn files(&self) -> PathBuf {
        self.home.join("work")
    }

    /// Makes the whole home the user's (after the test planted what the person has).
    fn hand_over(&self) {
        if let Some(uid) = self.user {
            let status = Command::new("chown")
                .args(["-R", &format!("{uid}:{uid}")])
                .arg(&self.home)
                .status()
                .unwrap();
            assert!(status.success());
        }
    }

    /// The environment the person's shell gives `config`, their git and the host.
    fn env(&self) -> Vec<(&'static str, OsString)> {
        let user = if self.user.is_some() {
            "nobody"
        } else {
            "root"
        };
        vec![
            ("HOME", self.home.clone().into_os_string()),
            ("PATH", "/usr/bin:/bin".into()),
            ("USER", user.into()),
            ("LANG", "C.UTF-8".into()),
        ]
    }

    /// `program args` as the person, in the files folder (as the user, when there is one).
    fn run(&self, program: &str, args: &[&str]) -> std::process::Output {
        let mut command = match self.user {
            Some(uid) => {
                let uid = uid.to_string();
                let mut c = Command::new("setpriv");
                c.args(["--reuid", &uid, "--regid", &uid, "--clear-groups", "--"]);
                c.arg(program);
                c
            }
            None => Command::new(program),
        };
        command
            .args(args)
            .current_dir(self.files())
            .env_clear()
            .envs(self.env())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// The person's own git in the files folder.
    fn git(&self, args: &[&str]) -> std::process::Output {
        let out = self.run("git", args);
        assert!(out.status.success(), "git {args:?}: {out:?}");
        out
    }

    /// `config claude-code --scope user --files-from roots … --write` with the README's flags,
    /// `programs` allowed and `extra` flags; the entry it wrote.
    fn write_entry(&self, programs: &[&str], extra: &[String]) -> (PathBuf, Vec<String>) {
        let mut flags: Vec<String> = [
            "config",
            "claude-code",
            "--scope",
            "user",
            "--files-from",
            "roots",
            "--programs-path",
            "/usr/bin:/bin",
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
        flags.extend(extra.iter().cloned());
        flags.push("--write".to_owned());
        let link_run = bins::link_run();
        let args: Vec<&str> = flags.iter().map(String::as_str).collect();
        let out = self.run(link_run.to_str().unwrap(), &args);
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
    /// environment, as the person, and with `names` as its hosts file when given.
    fn serve(&self, command: &Path, args: &[String], names: Option<&Names>) -> Serve {
        let argv: Vec<OsString> = args.iter().map(OsString::from).collect();
        let env = self.env();
        let envs: Vec<(&str, &std::ffi::OsStr)> =
            env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
        let files = self.files();
        let mut serve = match names {
            Some(names) => {
                let (program, argv) = names.wrap(command, &argv, self.user);
                Serve::spawn_program(
                    &program,
                    &argv,
                    Era::Legacy("2025-11-25"),
                    &envs,
                    Some(&files),
                    None,
                )
            }
            None => Serve::spawn_program(
                command,
                &argv,
                Era::Legacy("2025-11-25"),
                &envs,
                Some(&files),
                self.user,
            ),
        };
        serve.initialize("2025-11-25");
        serve
    }
}

/// Runs `program args` as a `command` call: its exit code (`None` when nothing ran), its
/// answer's text, and its stdout.
fn call(serve: &mut Serve, program: &str, args: &[&str]) -> (Option<i64>, String, String) {
    let id = serve.send_call(json!({"program": program, "args": args}), None);
    let result = serve.call_result(id, Duration::from_secs(90));
    let value = result.get("structuredContent").cloned().unwrap_or_default();
    let stdout = value["stdout"].as_str().unwrap_or_default().to_owned();
    (value["exit_code"].as_i64(), text(&result), stdout)
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
