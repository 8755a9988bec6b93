//! Where the binaries the tests drive are: Link Run's two and this package's helpers, all built
//! into `target/<profile>/`, the folder above the test executable's `deps/`. (Cargo's
//! `CARGO_BIN_EXE_<name>` is given to test targets only, not to this library.)
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `target/<profile>/`: the running test executable is `target/<profile>/deps/<test>-<hash>`.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|err| panic!("no current exe: {err}"));
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| panic!("no target folder above {exe:?}"))
}

/// Cargo's folder for the tests' temporary files (`target/tmp`, what `CARGO_TARGET_TMPDIR`
/// names to a test target): outside `/tmp`, which bubblewrap replaces with an empty tmpfs.
pub fn target_tmp() -> PathBuf {
    let profile = target_dir();
    profile
        .parent()
        .map(|target| target.join("tmp"))
        .unwrap_or_else(|| panic!("no folder above {profile:?}"))
}

/// This package's helper binary `name`, which `cargo test` builds beside the test executables.
fn helper(name: &str) -> PathBuf {
    let bin = target_dir().join(name);
    assert!(
        bin.is_file(),
        "{bin:?} is missing: run `cargo build -p lnk-tests` (or `cargo test` from the root)"
    );
    bin
}

/// The `lnk-test-procs` helper (absolute; visible in both sandboxes).
pub fn procs() -> String {
    utf8(helper("lnk-test-procs"))
}

/// The `lnk-test-write` helper (absolute; visible in both sandboxes).
pub fn write() -> String {
    utf8(helper("lnk-test-write"))
}

/// A path as a `String`: the target folder's paths are UTF-8 wherever the tests run.
fn utf8(path: PathBuf) -> String {
    path.into_os_string()
        .into_string()
        .unwrap_or_else(|path| panic!("test paths are UTF-8: {path:?}"))
}

/// The `lnk-test-passthrough` helper: a sandbox prefix that runs its arguments as they are.
pub fn passthrough() -> PathBuf {
    helper("lnk-test-passthrough")
}

/// The `lnk-link-run` binary, beside this test's `deps/` folder in `target/<profile>/`.
pub fn link_run() -> PathBuf {
    let bin = crate::bins::target_dir().join("lnk-link-run");
    assert!(
        bin.is_file(),
        "{bin:?} is missing: run `cargo test --workspace` from the root, which builds it with \
         the test hooks"
    );
    bin
}

/// The folder of this package's helper binaries (`lnk-test-procs`, `lnk-test-write`).
pub fn helpers_dir() -> PathBuf {
    crate::bins::target_dir()
}

/// `lnk-link-supervise`, which `serve` finds beside itself in `target/<profile>/`.
pub fn link_supervise() -> PathBuf {
    let bin = link_run().with_file_name("lnk-link-supervise");
    assert!(
        bin.is_file(),
        "{bin:?} is missing: run `cargo test --workspace` from the root, which builds it with \
         the test hooks"
    );
    bin
}

/// The test hooks' variables: lnk-proc's `reaper::hold`, read only by a build with its
/// `test-hooks` feature.
pub const TEST_HOOKS: [&str; 2] = ["LNK_HOLD", "LNK_SUPERVISE_HOLD_GATE"];

/// Panics, saying how to build them, unless `lnk-link-run` and `lnk-link-supervise` have the
/// test hooks, as `cargo test --workspace` builds them (this package's dev-dependency on
/// lnk-proc turns its `test-hooks` feature on). A `cargo build` has none, and takes no hold: a
/// test of one would fail for a reason of the build's. A binary names `LNK_HOLD` only when it
/// has them; each test binary looks once.
pub fn require_test_hooks() {
    static CHECKED: OnceLock<Result<(), String>> = OnceLock::new();
    let checked = CHECKED.get_or_init(|| {
        for bin in [link_run(), link_supervise()] {
            let bytes = std::fs::read(&bin).map_err(|err| format!("reading {bin:?}: {err}"))?;
            if !bytes
                .windows(TEST_HOOKS[0].len())
                .any(|w| w == TEST_HOOKS[0].as_bytes())
            {
                return Err(format!(
                    "{bin:?} was built without the test hooks (`cargo build`?): run \
                     `cargo test --workspace` from the root, which builds it with them"
                ));
            }
        }
        Ok(())
    });
    if let Err(err) = checked {
        panic!("{err}");
    }
}
