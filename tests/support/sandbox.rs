//! The two sandbox prefixes every call test runs under: the tests' pass-through helper ("no
//! sandbox") and bubblewrap as the issue gives it. The bubblewrap half skips, saying so on stderr,
//! when `bwrap` is missing or cannot make a sandbox here, unless `LNK_REQUIRE_SANDBOX=1`, where it
//! fails instead.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Which prefix `serve` puts before each call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sandbox {
    /// `lnk-test-passthrough`, which execs its arguments: the call runs without a sandbox.
    Passthrough,
    /// `bwrap ... --unshare-all --die-with-parent --new-session --clearenv --`.
    Bwrap,
}

impl Sandbox {
    /// The sandbox argv for a `serve` whose files folder is `files`. `visible` are other paths
    /// the sandboxed programs must see (helper binaries): under bubblewrap, those below `/tmp`
    /// are bound back read-only, since `--tmpfs /tmp` hides the host's `/tmp`.
    pub fn argv(self, files: &Path, visible: &[PathBuf]) -> Vec<String> {
        match self {
            // No trailing `--`: the runner adds one before the program.
            Sandbox::Passthrough => vec![path_str(Path::new(env!(
                "CARGO_BIN_EXE_lnk-test-passthrough"
            )))],
            // A trailing `--`, as the issue writes it: the runner must not add another.
            Sandbox::Bwrap => {
                let mut argv: Vec<String> = [
                    "bwrap",
                    "--ro-bind",
                    "/",
                    "/",
                    "--dev",
                    "/dev",
                    "--proc",
                    "/proc",
                    "--tmpfs",
                    "/tmp",
                ]
                .map(String::from)
                .to_vec();
                for path in visible.iter().filter(|p| p.starts_with("/tmp")) {
                    argv.extend(["--ro-bind".into(), path_str(path), path_str(path)]);
                }
                argv.extend(["--bind".into(), path_str(files), path_str(files)]);
                argv.extend(
                    [
                        "--unshare-all",
                        "--die-with-parent",
                        "--new-session",
                        "--clearenv",
                        "--",
                    ]
                    .map(String::from),
                );
                argv
            }
        }
    }

    /// Whether tests can run under this sandbox here; prints why not (the test then passes
    /// without running) or, with `LNK_REQUIRE_SANDBOX=1`, fails.
    pub fn usable(self) -> bool {
        if self == Sandbox::Passthrough {
            return true;
        }
        static BWRAP: OnceLock<Result<(), String>> = OnceLock::new();
        match BWRAP.get_or_init(probe_bwrap) {
            Ok(()) => true,
            Err(why) if std::env::var_os("LNK_REQUIRE_SANDBOX").is_some_and(|v| v == "1") => {
                panic!("LNK_REQUIRE_SANDBOX=1 but {why}")
            }
            Err(why) => {
                eprintln!("skipped: {why}");
                false
            }
        }
    }
}

/// Finds `bwrap` on PATH and checks that it can make the tests' sandbox on this machine.
fn probe_bwrap() -> Result<(), String> {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|dir| dir.join("bwrap").is_file()))
        .unwrap_or(false);
    if !on_path {
        return Err("bwrap missing (not on PATH)".into());
    }
    let out = Command::new("bwrap")
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--",
            "/bin/true",
        ])
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

/// Makes, for each named test body `fn name(sandbox: Sandbox)`, a module `name` with two tests,
/// `name::passthrough` and `name::bwrap`.
macro_rules! both_sandboxes {
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                use $crate::sandbox::Sandbox;

                #[test]
                fn passthrough() {
                    super::$name(Sandbox::Passthrough);
                }

                #[test]
                fn bwrap() {
                    if Sandbox::Bwrap.usable() {
                        super::$name(Sandbox::Bwrap);
                    }
                }
            }
        )+
    };
}
pub(crate) use both_sandboxes;
