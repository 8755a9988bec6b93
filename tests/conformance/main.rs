//! Conformance with a real MCP client that nobody here wrote: the official Python SDK (`mcp`
//! 2.3.0) drives `lnk-link-run serve` over stdio in each era it speaks ("auto", which probes
//! `server/discover`, "legacy", the `initialize` handshake, and "2026-07-28" pinned). The checks
//! live in `conformance/sdk_client.py` (the background tools' in `sdk_background.py`, what both
//! share in `sdk_checks.py`); this test builds the server's command line and runs the script,
//! once with the tests' pass-through sandbox prefix and once under bubblewrap with the README's
//! recommended sandbox line.
//!
//! The Python interpreter comes from `LNK_SDK_PYTHON`, else `<workspace>/.venv/bin/python` (which
//! `.ci/run` creates with `pip install mcp==2.3.0 jsonschema`). Without a Python that has `mcp` the
//! test fails; with `LNK_ALLOW_SKIP=1` it prints "skipped: ..." and passes, unless
//! `LNK_REQUIRE_SDK=1`. Without `/usr/bin/bwrap` the bubblewrap run does the same, with
//! `LNK_REQUIRE_SANDBOX=1` in place of `LNK_REQUIRE_SDK=1`.
//!
//! `LNK_SDK_TRACE=<file>` makes the script log every line on the wire to `<file>.passthrough` and
//! `<file>.bwrap`; without it, a failure reruns the failing era(s) with such a log and prints it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lnk_tests::bins::target_dir;
use lnk_tests::readme;
use lnk_tests::runs::Flags;
use lnk_tests::sandbox::path_str;
use lnk_tests::skip::skip_required_by;

/// The whole script (three eras) must end well within this; it bounds each era at 90 s itself.
const SCRIPT_DEADLINE: Duration = Duration::from_secs(360);

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lies in the workspace")
        .to_path_buf()
}

/// The Python that has the SDK, or why there is none.
fn sdk_python() -> Result<PathBuf, String> {
    let python = match std::env::var_os("LNK_SDK_PYTHON").filter(|p| !p.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => {
            let venv = workspace_root().join(".venv/bin/python");
            if !venv.exists() {
                return Err(format!(
                    "no LNK_SDK_PYTHON and no {} (python3 -m venv .venv && .venv/bin/pip install mcp==2.3.0 jsonschema)",
                    venv.display()
                ));
            }
            venv
        }
    };
    let probe = Command::new(&python)
        .args(["-c", "import mcp, jsonschema, anyio"])
        .stdin(Stdio::null())
        .output();
    match probe {
        Ok(out) if out.status.success() => Ok(python),
        Ok(out) => Err(format!(
            "{} cannot import mcp and jsonschema: {}",
            python.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(err) => Err(format!("cannot run {}: {err}", python.display())),
    }
}

/// Runs the script against `serve` with `sandbox` as its prefix; returns (success, stdout, stderr).
fn run_script(
    python: &Path,
    files: &Path,
    sandbox: &[OsString],
    unchecked: bool,
    modes: &str,
    trace: Option<&Path>,
) -> (bool, String, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/sdk_client.py");
    let serve = target_dir().join("lnk-link-run");
    assert!(
        serve.is_file(),
        "{} is missing: cargo test builds it",
        serve.display()
    );

    // The state folder for background runs, outside the files folder.
    let state_folder = tempfile::tempdir().expect("a state folder");
    let state = state_folder.path().join("state");
    let mut command = Command::new(python);
    command.arg(&script).args(["--modes", modes]);
    if let Some(trace) = trace {
        command.arg("--trace").arg(trace);
    }
    command
        .arg("--")
        .arg(&serve)
        .arg("serve")
        .arg("--files")
        .arg(files)
        .args(["--programs-path", "/usr/bin:/bin"])
        .args(["--program", "echo", "--program", "sh", "--program", "sleep"])
        .args(["--timeout", "10s", "--output", "64KiB"])
        .args(
            Flags {
                timeout: "60s",
                ..Flags::default()
            }
            .args(&path_str(&state)),
        )
        .args(unchecked.then_some("--no-sandbox-check"))
        .arg("--")
        .args(sandbox);

    // Output goes to files, not pipes, so a long report can never block the script.
    let logs = tempfile::tempdir().expect("a folder for the script's output");
    let stdout_path = logs.path().join("stdout");
    let stderr_path = logs.path().join("stderr");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(File::create(&stdout_path).expect("stdout file"))
        .stderr(File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .unwrap_or_else(|err| panic!("cannot run {}: {err}", python.display()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the script") {
            break Some(status);
        }
        if started.elapsed() > SCRIPT_DEADLINE {
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
            "\nthe script did not end within {SCRIPT_DEADLINE:?} and was killed\n"
        ));
    }
    (status.is_some_and(|s| s.success()), stdout, stderr)
}

/// Runs every era with the sandbox prefix that `sandbox` makes for a files folder; on failure,
/// reruns the failed eras with a wire log and fails with all of it.
fn conform(name: &str, unchecked: bool, sandbox: impl Fn(&Path) -> Vec<OsString>) {
    let python = match sdk_python() {
        Ok(python) => python,
        Err(why) => return skip_required_by("LNK_REQUIRE_SDK", &why),
    };
    let folder = tempfile::tempdir().expect("a files folder");
    let files = folder
        .path()
        .canonicalize()
        .expect("canonical files folder");
    let trace = std::env::var_os("LNK_SDK_TRACE").map(|path| {
        let mut path = path;
        path.push(format!(".{name}"));
        PathBuf::from(path)
    });

    let modes = "auto,legacy,2026-07-28";
    let (ok, stdout, stderr) = run_script(
        &python,
        &files,
        &sandbox(&files),
        unchecked,
        modes,
        trace.as_deref(),
    );
    eprintln!("{stdout}");
    if ok {
        return;
    }

    // Which eras failed, from the script's "FAIL [<era>]" lines, to rerun them with a wire log.
    let failed: Vec<&str> = ["auto", "legacy", "2026-07-28"]
        .into_iter()
        .filter(|era| stdout.contains(&format!("FAIL [{era}]")))
        .collect();
    let mut report = format!("the SDK client failed:\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    if trace.is_none() && !failed.is_empty() {
        let logs = tempfile::tempdir().expect("a folder for the wire log");
        let wire = logs.path().join("wire.log");
        let rerun = tempfile::tempdir().expect("a files folder");
        let rerun = rerun.path().canonicalize().expect("canonical files folder");
        let failed = failed.join(",");
        let _ = run_script(
            &python,
            &rerun,
            &sandbox(&rerun),
            unchecked,
            &failed,
            Some(&wire),
        );
        let log = std::fs::read_to_string(&wire).unwrap_or_default();
        report.push_str(&format!(
            "\n--- wire log of a rerun of {failed} (--> client to server, <-- server to client)\n{log}"
        ));
    }
    panic!("{report}");
}

#[test]
fn sdk_client_without_sandbox() {
    let passthrough = target_dir().join("lnk-test-passthrough");
    assert!(
        passthrough.is_file(),
        "{} is missing: cargo test builds it",
        passthrough.display()
    );
    // No sandbox, on purpose: serve is told not to check it.
    conform("passthrough", true, |_files| {
        vec![passthrough.clone().into_os_string()]
    });
}

#[test]
fn sdk_client_under_bubblewrap() {
    let probe = readme::recommended_sandbox(Path::new("/"), &[]);
    if !Path::new(&probe[0]).is_file() {
        return skip_required_by("LNK_REQUIRE_SANDBOX", &format!("{} is not there", probe[0]));
    }
    // The README's recommended line, as a person copies it.
    conform("bwrap", false, |files| {
        readme::recommended_sandbox(files, &[])
            .into_iter()
            .map(OsString::from)
            .collect()
    });
}
