//! The two sandbox prefixes every call test runs under: the tests' pass-through helper ("no
//! sandbox") and bubblewrap with the README's recommended line (read from README.md), plus a
//! read-only bind of the tests' helper binaries. The bubblewrap half fails when `bwrap` is
//! missing or cannot make a sandbox here, unless a skip is asked for (`LNK_ALLOW_SKIP=1`, see
//! [`crate::skip`]).
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Which prefix `serve` puts before each call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sandbox {
    /// `lnk-test-passthrough`, which execs its arguments: the call runs without a sandbox.
    Passthrough,
    /// The README's recommended `/usr/bin/bwrap …` line, with a trailing `--`.
    Bwrap,
    /// The same line without a PID namespace (`--unshare-all` less `--unshare-pid`), still with
    /// `--new-session`: the sandbox's programs share serve's PID namespace and start outside the
    /// call's process group, so only Link Run's reapers hold them. Used by the containment
    /// tests only.
    BwrapSharedPid,
}

impl Sandbox {
    /// The sandbox argv for a `serve` whose files folder is `files`. `visible` are other paths
    /// the sandboxed programs must see (helper binaries): under bubblewrap they are bound
    /// read-only, since the recommended line shows nothing of the host but the system's folders.
    pub fn argv(self, files: &Path, visible: &[PathBuf]) -> Vec<String> {
        match self {
            // No trailing `--`: the runner adds one before the program.
            Sandbox::Passthrough => vec![path_str(&crate::bins::passthrough())],
            // A trailing `--`, as people write it: the runner must not add another.
            Sandbox::Bwrap => {
                let mut argv = bwrap_line(files, visible);
                argv.push("--".into());
                argv
            }
            Sandbox::BwrapSharedPid => {
                let mut argv = Vec::new();
                for arg in bwrap_line(files, visible) {
                    if arg == "--unshare-all" {
                        argv.extend(UNSHARE_ALL_BUT_PID.iter().map(|flag| (*flag).to_owned()));
                    } else {
                        argv.push(arg);
                    }
                }
                assert!(
                    argv.iter().any(|arg| arg == "--new-session")
                        && !argv.iter().any(|arg| arg.starts_with("--unshare-pid")),
                    "the shared-PID line keeps --new-session and drops the PID namespace: {argv:?}"
                );
                argv.push("--".into());
                argv
            }
        }
    }

    /// Whether serve checks this sandbox at start: the pass-through prefix is no sandbox, on
    /// purpose, so its half runs with `--no-sandbox-check`; the bubblewrap lines with the check
    /// (the shared-PID one passes it, with a warning).
    pub fn checked(self) -> bool {
        self != Sandbox::Passthrough
    }

    /// Whether tests can run under this sandbox here. When they cannot, the test fails or, with
    /// `LNK_ALLOW_SKIP=1`, says it is skipped (and then passes without running).
    pub fn usable(self) -> bool {
        if self == Sandbox::Passthrough {
            return true;
        }
        static BWRAP: OnceLock<Result<(), String>> = OnceLock::new();
        match BWRAP.get_or_init(probe_bwrap) {
            Ok(()) => true,
            Err(why) => {
                crate::skip::skip_required_by("LNK_REQUIRE_SANDBOX", why);
                false
            }
        }
    }
}

/// The word serve fills in with the protected paths' binds.
pub const PROTECTED: &str = "{protected}";

/// What `--unshare-all` stands for, less `--unshare-pid`.
const UNSHARE_ALL_BUT_PID: &[&str] = &[
    "--unshare-user-try",
    "--unshare-ipc",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
];

/// The README's recommended line for `files`, with `visible` bound read-only before the files
/// folder.
pub fn bwrap_line(files: &Path, visible: &[PathBuf]) -> Vec<String> {
    let mut extra = Vec::new();
    for path in visible {
        extra.extend(["--ro-bind".into(), path_str(path), path_str(path)]);
    }
    crate::readme::recommended_sandbox(files, &extra)
}

/// Checks that the recommended line can make a sandbox on this machine.
fn probe_bwrap() -> Result<(), String> {
    let files = std::env::current_dir().map_err(|err| format!("no working folder: {err}"))?;
    // Run by hand here, not by serve: the word serve fills in for the protected paths is left
    // out (it only adds binds).
    let line: Vec<String> = bwrap_line(&files, &[])
        .into_iter()
        .filter(|word| word != PROTECTED)
        .collect();
    let Some((program, args)) = line.split_first() else {
        return Err("the recommended line is empty".into());
    };
    if !Path::new(program).is_file() {
        return Err(format!("bwrap missing ({program} is not there)"));
    }
    let out = Command::new(program)
        .args(args)
        .args(["--", "/bin/true"])
        .stdin(Stdio::null())
        .output()
        .map_err(|err| format!("bwrap cannot be started: {err}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "bwrap cannot make a sandbox here ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A path as a `String`: the tests only make UTF-8 paths.
pub fn path_str(path: &Path) -> String {
    path.to_str()
        .unwrap_or_else(|| panic!("test paths are UTF-8: {path:?}"))
        .to_owned()
}

/// One test, `$test`, of the body `super::$body` under one sandbox, with warm calls (the
/// default) or cold ones (`LNK_COLD_START=1`, [`crate::serve::cold_starts`]): the one piece the
/// macros that run a body under several sandboxes are made of. A bubblewrap sandbox that cannot
/// run here is skipped, or fails, as [`Sandbox::usable`] says.
#[doc(hidden)]
#[macro_export]
macro_rules! sandbox_test {
    ($test:ident, $body:ident, $sandbox:ident, warm) => {
        #[test]
        fn $test() {
            if $crate::sandbox::Sandbox::$sandbox.usable() {
                super::$body($crate::sandbox::Sandbox::$sandbox);
            }
        }
    };
    ($test:ident, $body:ident, $sandbox:ident, cold) => {
        #[test]
        fn $test() {
            if $crate::sandbox::Sandbox::$sandbox.usable() {
                $crate::serve::cold_starts(|| super::$body($crate::sandbox::Sandbox::$sandbox));
            }
        }
    };
}

/// Makes, for each named test body `fn name(sandbox: Sandbox)`, a module `name` with two tests,
/// `name::passthrough` and `name::bwrap`.
#[macro_export]
macro_rules! both_sandboxes {
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                $crate::sandbox_test!(passthrough, $name, Passthrough, warm);
                $crate::sandbox_test!(bwrap, $name, Bwrap, warm);
            }
        )+
    };
}
pub use crate::both_sandboxes;

/// As [`both_sandboxes`], and each twice: with warm calls (the default) and with cold ones:
/// `name::passthrough`, `name::bwrap`, `name::passthrough_cold` and `name::bwrap_cold`.
#[macro_export]
macro_rules! both_sandboxes_warm_and_cold {
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                $crate::sandbox_test!(passthrough, $name, Passthrough, warm);
                $crate::sandbox_test!(bwrap, $name, Bwrap, warm);
                $crate::sandbox_test!(passthrough_cold, $name, Passthrough, cold);
                $crate::sandbox_test!(bwrap_cold, $name, Bwrap, cold);
            }
        )+
    };
}
pub use crate::both_sandboxes_warm_and_cold;

/// Says on the terminal that a test was skipped, and why. `eprintln!` would be captured with the
/// test's output and shown only if it failed; a write to the stderr handle is not captured, so
/// a person running `cargo test` sees every skip.
pub fn say_skipped(why: &str) {
    use std::io::Write;
    let line = format!(
        "skipped: {}: {why}\n",
        std::thread::current().name().unwrap_or("a test")
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
}
