//! A machine for the real-work tests: a home of its own (as root, or owned by `nobody`) with
//! the agent's folder `work` in it, `lnk-link-run config` run there as a person runs it (with
//! an environment of the test's choosing and nothing else), and the entry it printed started
//! as a host starts it.
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use lnk_tests::bins;
use lnk_tests::runs::Flags;
use lnk_tests::sandbox::path_str;
use lnk_tests::serve::{ANSWER, Era, Serve};

/// A test's own home, with `work` (the files folder) in it.
pub struct Machine {
    _root: tempfile::TempDir,
    /// The home.
    pub home: PathBuf,
    /// The user `config` and serve run as (`None`: this process's).
    pub user: Option<u32>,
}

impl Machine {
    /// A fresh home under the target's tmp folder; for `user`, everything of it is theirs and
    /// the folder above it lets them pass.
    pub fn new(prefix: &str, user: Option<u32>) -> Machine {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
        std::fs::create_dir_all(base).unwrap();
        let root = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(base)
            .unwrap();
        let home = root.path().canonicalize().unwrap().join("home");
        std::fs::create_dir_all(home.join("work")).unwrap();
        if user.is_some() {
            std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Machine {
            _root: root,
            home,
            user,
        }
    }

    /// The files folder.
    pub fn files(&self) -> PathBuf {
        self.home.join("work")
    }

    /// Gives everything of the home to the machine's user (after the test made its files).
    pub fn hand_over(&self) {
        if let Some(uid) = self.user {
            chown_all(&self.home, uid);
        }
    }

    /// The person's environment for `config`: this home, `path`, a user and a language.
    pub fn env(&self, path: &str) -> Vec<(String, OsString)> {
        let user = if self.user.is_some() {
            "nobody"
        } else {
            "root"
        };
        vec![
            ("HOME".into(), self.home.clone().into_os_string()),
            ("PATH".into(), path.into()),
            ("USER".into(), user.into()),
            ("LANG".into(), "C.UTF-8".into()),
        ]
    }

    /// `lnk-link-run config claude-code <flags>` as the machine's user, in the files folder,
    /// with `env` and nothing else.
    pub fn run_config(&self, flags: &[String], env: &[(String, OsString)]) -> Output {
        let mut command = Command::new(bins::link_run());
        if let Some(uid) = self.user {
            use std::os::unix::process::CommandExt;
            command.uid(uid).gid(uid);
        }
        command
            .arg("config")
            .arg("claude-code")
            .args(flags)
            .current_dir(self.files())
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// The entry's arguments `config` printed for `flags`, and what it said on stderr.
    pub fn config(&self, flags: &[String], env: &[(String, OsString)]) -> (Vec<String>, String) {
        let out = self.run_config(flags, env);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "config failed: {stderr}");
        let doc: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|err| panic!("config printed no JSON: {err}: {stderr}"));
        let args = doc["mcpServers"]["link-run"]["args"]
            .as_array()
            .unwrap_or_else(|| panic!("no args in {doc}"))
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect();
        (args, stderr)
    }

    /// serve started with the entry's `args` as a host starts it (in the files folder, as the
    /// machine's user, with `RUST_LOG=info` so that it says how calls start), initialized.
    pub fn serve(&self, args: &[String]) -> Serve {
        let argv: Vec<OsString> = args.iter().map(OsString::from).collect();
        let info = OsString::from("info");
        let mut serve = Serve::spawn_program(
            &bins::link_run(),
            &argv,
            Era::Legacy("2025-11-25"),
            &[("RUST_LOG", info.as_os_str())],
            Some(&self.files()),
            self.user,
        );
        serve.initialize("2025-11-25");
        serve
    }
}

/// serve's flags for `programs` on `path`, with a state folder in the home.
pub fn flags(path: &str, programs: &[&str], home: &Path) -> Vec<String> {
    let mut flags: Vec<String> = [
        "--files",
        "~/work",
        "--programs-path",
        path,
        "--timeout",
        "2m",
        "--output",
        "1MiB",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    for program in programs {
        flags.extend(["--program".to_owned(), (*program).to_owned()]);
    }
    let state = path_str(&home.join(".local/state/lnk/link-run"));
    flags.extend(
        Flags {
            background: 2,
            timeout: "1m",
            ..Flags::default()
        }
        .args(&state),
    );
    flags
}

/// One call of `program` with `args` in `dir` (relative to the files folder): its exit code
/// and its stdout and stderr as the structured value holds them.
pub fn call(serve: &mut Serve, program: &str, args: &[&str], dir: &str) -> (i64, String, String) {
    let id = serve.send_call(json!({"program": program, "args": args, "dir": dir}), None);
    let result = serve.call_result(id, Duration::from_secs(150));
    let value = lnk_tests::results::structured(&result).clone();
    let code = value["exit_code"]
        .as_i64()
        .unwrap_or_else(|| panic!("`{program} {args:?}` did not run: {result}"));
    let text = |key: &str| value[key].as_str().unwrap_or_default().to_owned();
    (code, text("stdout"), text("stderr"))
}

/// Closes serve and waits for its end, and for every process that names `home` to end.
pub fn close(mut serve: Serve, home: &Path) {
    serve.close_stdin();
    let status = serve.wait_exit(ANSWER);
    assert!(
        status.success(),
        "serve ended with {status}: {}",
        serve.stderr()
    );
    lnk_tests::procs::wait_gone(&path_str(home), Duration::from_secs(10));
}

/// Gives `path` and everything below it to `uid`.
pub fn chown_all(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_all(&entry.unwrap().path(), uid);
        }
    }
}
