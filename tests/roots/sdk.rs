//! The official MCP Python SDK's client (`mcp` 2.3.0, from `LNK_SDK_PYTHON`, else the
//! workspace's `.venv`) gives its roots in both eras it speaks (`sdk_roots.py`): under the
//! pass-through prefix and under the recommended bubblewrap line, warm and cold. Without a
//! Python that has `mcp`, the test fails, or skips with `LNK_ALLOW_SKIP=1` (unless
//! `LNK_REQUIRE_SDK=1`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use lnk_tests::sandbox::{Sandbox, both_sandboxes_warm_and_cold};
use lnk_tests::setup::Setup;
use lnk_tests::skip::skip_required_by;

both_sandboxes_warm_and_cold!(the_sdk_client_gives_its_roots_in_both_eras);

/// The Python that has the SDK, or why there is none.
fn sdk_python() -> Result<PathBuf, String> {
    let python = std::env::var_os("LNK_SDK_PYTHON")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python"));
    let probe = Command::new(&python)
        .args(["-c", "import mcp, anyio"])
        .stdin(Stdio::null())
        .output()
        .map_err(|err| format!("cannot run {}: {err}", python.display()))?;
    if probe.status.success() {
        Ok(python)
    } else {
        Err(format!(
            "{} cannot import mcp: {}",
            python.display(),
            String::from_utf8_lossy(&probe.stderr).trim()
        ))
    }
}

fn the_sdk_client_gives_its_roots_in_both_eras(sandbox: Sandbox) {
    let python = match sdk_python() {
        Ok(python) => python,
        Err(why) => {
            skip_required_by("LNK_REQUIRE_SDK", &why);
            return;
        }
    };
    let setup = Setup::new(sandbox);
    let elsewhere = setup.path("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let mut command = Command::new(python);
    command
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("roots/sdk_roots.py"))
        .arg("--root")
        .arg(&setup.files)
        .arg("--elsewhere")
        .arg(&elsewhere)
        .args(["--modes", "auto,legacy"]);
    if lnk_tests::serve::is_cold() {
        // The SDK starts serve with an environment of its own: the script passes it on.
        command.arg("--cold");
    }
    command
        .arg("--")
        .arg(lnk_tests::bins::link_run())
        .args(setup.serve().files_from_roots().argv());
    let out = command.stdin(Stdio::null()).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "sdk_roots.py failed ({}): {said}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    for mode in ["auto", "legacy"] {
        assert!(said.contains(&format!("ok {mode}:")), "{said}");
    }
}
