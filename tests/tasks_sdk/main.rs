//! Background runs as MCP tasks: the official MCP TypeScript
//! SDK v2 client (`@modelcontextprotocol/client` 2.4.0) with the Tasks extension's requester
//! (`@modelcontextprotocol/ext-tasks` 0.2.2) opens `lnk-link-run serve --state ...` over stdio in
//! the 2026-07-28 era, pinned and probed (`auto`), and checks that `start` becomes a task that
//! completes with a result whose `structuredContent` validates against `start`'s `outputSchema`,
//! that `tasks/cancel` brings a `sleep` to `cancelled`, that a task started by one serve is
//! completed for a second serve on the same state folder once the first has exited, and that a
//! `watch` is a task of its own that completes with the line its run printed (validating against
//! `watch`'s `outputSchema`) and, cancelled, leaves the run running. The checks
//! live in `conformance/tasks_client.mjs` (its reporting and small helpers in `tasks_report.mjs`);
//! this test builds serve's command line and runs the script, once with the tests' pass-through
//! sandbox prefix and once under bubblewrap with the README's recommended sandbox line.
//!
//! The packages (`conformance/package.json`, locked) are installed by `conformance/install.sh`
//! into a cache folder outside the repository (`$LNK_CONFORMANCE_CACHE`, by default
//! `~/.cache/lnk-link-run/conformance`), which also picks Node 20 or newer (`$LNK_NODE`, npm's
//! Node 22 in that cache or the hosts' cache, or `node` on PATH). Without npm, the registry or a
//! Node the test fails; with `LNK_ALLOW_SKIP=1` it prints "skipped: ..." and passes, unless
//! `LNK_REQUIRE_SDK=1`. Without `/usr/bin/bwrap` the bubblewrap run does the same, with
//! `LNK_REQUIRE_SANDBOX=1` in place of `LNK_REQUIRE_SDK=1`.
//!
//! Nothing is left running: after the script, no process may carry the test's temporary folder
//! or the cancelled `sleep`'s unique argument in its command line; whatever does is stopped and
//! killed by pid, and the test fails naming it.
//!
//! `LNK_SDK_TRACE=<file>` makes the script log every line on the wire to `<file>.tasks-<name>`;
//! without it a failed check prints its own wire lines.
//!
//! Run: `cargo test -p lnk-tests --test tasks_sdk` (it needs `lnk-link-run`,
//! `lnk-link-supervise` and `lnk-test-passthrough` built in the same target folder).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lnk_tests::bins::target_dir;
use lnk_tests::readme;
use lnk_tests::runs::Flags;
use lnk_tests::sandbox::path_str;
use lnk_tests::skip::skip_required_by;

/// npm may download Node itself on a fresh machine.
const INSTALL_DEADLINE: Duration = Duration::from_secs(900);
/// Two modes of seven checks, each bounded at 90 s by the script itself, most done in seconds.
const SCRIPT_DEADLINE: Duration = Duration::from_secs(480);
/// How long the cancelled run and the serves may take to be gone once the script has ended.
const GONE_WITHIN: Duration = Duration::from_secs(15);
/// `--background-timeout` and `--background-keep`, and the `ttlMs` they make (5 min + 1 h).
const BACKGROUND_TIMEOUT: &str = "5m";
const BACKGROUND_KEEP: &str = "1h";
const TTL_MS: u64 = (5 * 60 + 60 * 60) * 1000;

fn here() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A finished command: how it ended (`None`: killed at its deadline), its stdout and stderr.
struct Ran {
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
}

/// Runs `command` with its output in files (a long report can never block it), killing it by
/// its pid at `deadline`.
fn run(command: &mut Command, deadline: Duration) -> Ran {
    let logs = tempfile::tempdir().expect("a folder for the output");
    let stdout_path = logs.path().join("stdout");
    let stderr_path = logs.path().join("stderr");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(File::create(&stdout_path).expect("stdout file"))
        .stderr(File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .unwrap_or_else(|err| panic!("cannot run {command:?}: {err}"));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the command") {
            break Some(status);
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = std::fs::read_to_string(&stdout_path).unwrap_or_default();
    let mut stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    if status.is_none() {
        stderr.push_str(&format!(
            "\n{command:?} did not end within {deadline:?} and was killed\n"
        ));
    }
    Ran {
        status,
        stdout,
        stderr,
    }
}

/// The Node that runs the client, and the `node_modules` folder that has it.
#[derive(Clone)]
struct Client {
    node: PathBuf,
    modules: PathBuf,
}

/// Installs the packages into the cache (once per test process: both tests ask), or says why not.
fn client() -> Result<Client, String> {
    static INSTALLED: OnceLock<Result<Client, String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let script = here().join("conformance/install.sh");
            let ran = run(Command::new("bash").arg(&script), INSTALL_DEADLINE);
            match ran.status {
                Some(status) if status.success() => {}
                Some(status) if status.code() == Some(2) => {
                    return Err(ran.stderr.lines().last().unwrap_or("").trim().to_owned());
                }
                _ => panic!(
                    "{} failed:\n--- stdout\n{}\n--- stderr\n{}",
                    script.display(),
                    ran.stdout,
                    ran.stderr
                ),
            }
            let value = |key: &str| {
                ran.stdout
                    .lines()
                    .find_map(|line| line.strip_prefix(key))
                    .map(PathBuf::from)
                    .unwrap_or_else(|| panic!("install.sh printed no `{key}`: {}", ran.stdout))
            };
            Ok(Client {
                node: value("node="),
                modules: value("modules="),
            })
        })
        .clone()
}

/// A number for `sleep` that no other process on the machine has among its arguments: 600
/// seconds and a fraction made of this process's pid, a counter and the time.
fn unique_sleep() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "600.{}{}{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Every live (not zombie) process, other than this one, whose command line contains `folder`
/// or has `argument` as one of its arguments: pid and command line.
fn leftovers(folder: &str, argument: &str) -> Vec<(i32, String)> {
    let own = i32::try_from(std::process::id()).expect("a pid");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        panic!("cannot read /proc");
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != own)
        .filter_map(|pid| {
            // A zombie's cmdline reads empty, so dead but unreaped processes drop out here.
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let argv: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            let line = argv.join(" ");
            (line.contains(folder) || argv.iter().any(|a| a == argument)).then_some((pid, line))
        })
        .collect()
}

/// Waits until nothing carries `folder` or `argument`; what still does at the deadline is stopped
/// (`lnk-link-supervise stop --state`), then SIGKILLed by pid, and returned.
fn leave_nothing(folder: &str, argument: &str, state: &Path) -> Vec<(i32, String)> {
    let deadline = Instant::now() + GONE_WITHIN;
    loop {
        let left = leftovers(folder, argument);
        if left.is_empty() {
            return left;
        }
        if Instant::now() > deadline {
            let supervise = target_dir().join("lnk-link-supervise");
            let _ = run(
                Command::new(&supervise)
                    .arg("stop")
                    .arg("--state")
                    .arg(state),
                Duration::from_secs(30),
            );
            for (pid, _) in leftovers(folder, argument) {
                if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs the script against serve with the sandbox prefix that `sandbox` makes for a files folder.
fn tasks(name: &str, unchecked: bool, sandbox: impl Fn(&Path) -> Vec<OsString>) {
    let client = match client() {
        Ok(client) => client,
        Err(why) => return skip_required_by("LNK_REQUIRE_SDK", &why),
    };
    let serve = target_dir().join("lnk-link-run");
    assert!(
        serve.is_file(),
        "{} is missing: cargo test builds it",
        serve.display()
    );

    // The files folder and the state folder side by side in one temporary folder, whose path
    // every process of the test carries: serve, the sandbox, the supervisors.
    let temp = tempfile::tempdir().expect("a temporary folder");
    let root = temp
        .path()
        .canonicalize()
        .expect("canonical temporary folder");
    let files = root.join("files");
    std::fs::create_dir(&files).expect("the files folder");
    let state = root.join("state");
    let sleep = unique_sleep();

    let mut command = Command::new(&client.node);
    command
        .env("LNK_CONFORMANCE_MODULES", &client.modules)
        .arg(here().join("conformance/tasks_client.mjs"))
        .args(["--modes", "pin,auto"])
        .args(["--expect-ttl-ms", &TTL_MS.to_string()])
        .args(["--sleep", &sleep]);
    if let Some(trace) = std::env::var_os("LNK_SDK_TRACE") {
        let mut trace = trace;
        trace.push(format!(".tasks-{name}"));
        command.arg("--trace").arg(trace);
    }
    command
        .arg("--")
        .arg(&serve)
        .arg("serve")
        .arg("--files")
        .arg(&files)
        .args(["--programs-path", "/usr/bin:/bin"])
        .args(["--program", "echo", "--program", "sh", "--program", "sleep"])
        .args(["--timeout", "10s", "--output", "64KiB"])
        .args(
            Flags {
                timeout: BACKGROUND_TIMEOUT,
                keep: BACKGROUND_KEEP,
                ..Flags::default()
            }
            .args(&path_str(&state)),
        )
        .args(unchecked.then_some("--no-sandbox-check"))
        .arg("--")
        .args(sandbox(&files));
    let ran = run(&mut command, SCRIPT_DEADLINE);

    let folder = root.to_str().expect("test paths are UTF-8");
    let left = leave_nothing(folder, &sleep, &state);
    eprintln!("{}", ran.stdout);
    let mut failures = Vec::new();
    if !ran.status.is_some_and(|s| s.success()) {
        failures.push(format!(
            "the TypeScript client failed:\n--- stdout\n{}\n--- stderr\n{}",
            ran.stdout, ran.stderr
        ));
    }
    if !left.is_empty() {
        failures.push(format!(
            "still running {GONE_WITHIN:?} after the client ended (now stopped and killed): {left:#?}"
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn tasks_sdk_without_sandbox() {
    let passthrough = target_dir().join("lnk-test-passthrough");
    assert!(
        passthrough.is_file(),
        "{} is missing: cargo test builds it",
        passthrough.display()
    );
    // No sandbox, on purpose: serve is told not to check it.
    tasks("passthrough", true, |_files| {
        vec![passthrough.clone().into_os_string()]
    });
}

#[test]
fn tasks_sdk_under_bubblewrap() {
    let probe = readme::recommended_sandbox(Path::new("/"), &[]);
    if !Path::new(&probe[0]).is_file() {
        return skip_required_by("LNK_REQUIRE_SANDBOX", &format!("{} is not there", probe[0]));
    }
    // The README's recommended line, as a person copies it.
    tasks("bwrap", false, |files| {
        readme::recommended_sandbox(files, &[])
            .into_iter()
            .map(OsString::from)
            .collect()
    });
}
