//! A real build under the recommended line: `cargo build --offline` of a crate whose dependency
//! is only in the test's own `CARGO_HOME` registry (fetched there, outside the sandbox, from a
//! stand-in registry on 127.0.0.1 that is then stopped), with the toolchain bound read-only and
//! the registry as a `--cache`. Its build script writes into the dependency's sources in the
//! registry, a later call touches the registry and changes a downloaded `.crate`: all of it
//! succeeds inside, the next sandbox sees none of it, and the user's registry is byte for byte
//! as it was. Warm and cold, as root and as `nobody` (who runs the toolchain through a tree of
//! hard links to its files when it lies in root's home, which it cannot enter).
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::registry::{GREETING, StandIn, project};
use crate::world::{assert_unchanged, chown_all, snapshot, users, with_caches};
use lnk_tests::results::{ran, text, warnings};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, path_str};
use lnk_tests::serve::{Serve, cold_starts};

/// The toolchain that builds these tests (`CARGO`, which cargo gives the tests it runs): its
/// folder (`…/bin/cargo`'s grandparent), with links resolved.
fn toolchain() -> PathBuf {
    let cargo = std::env::var_os("CARGO").expect("cargo gives its tests CARGO");
    let cargo = Path::new(&cargo).canonicalize().unwrap();
    cargo.parent().and_then(Path::parent).unwrap().to_path_buf()
}

/// Whether `nobody` can reach and read `path`: every folder above it open to others.
fn readable_by_others(path: &Path) -> bool {
    path.ancestors().all(|p| {
        std::fs::metadata(p).is_ok_and(|m| {
            let mode = m.permissions().mode();
            if m.is_dir() {
                mode & 0o005 == 0o005
            } else {
                mode & 0o004 != 0
            }
        })
    })
}

/// The toolchain as `user` can run it: this one, or, where it lies in a home `nobody` cannot
/// enter (a rustup in root's), a tree of hard links to its files (readable by all, as rustup
/// leaves them) under `root`, which `nobody` can enter. `None` when neither can be had.
fn toolchain_for(user: Option<u32>, root: &Path) -> Option<PathBuf> {
    let toolchain = toolchain();
    if user.is_none() || readable_by_others(&toolchain.join("bin/cargo")) {
        return Some(toolchain);
    }
    let links = root.join("toolchain");
    let linked = Command::new("cp")
        .arg("-al")
        .arg(&toolchain)
        .arg(&links)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    if !linked.status.success() || !readable_by_others(&links.join("bin/cargo")) {
        eprintln!(
            "note: the toolchain {} is not readable by nobody and cannot be linked where it is \
             ({}), so the offline build runs as root only",
            toolchain.display(),
            String::from_utf8_lossy(&linked.stderr).trim()
        );
        return None;
    }
    Some(links)
}

fn call(serve: &mut Serve, program: &str, args: &[&str], dir: &str) -> Value {
    serve.call(json!({"program": program, "args": args, "dir": dir}))
}

fn offline_build() {
    for user in users() {
        let bin = toolchain().join("bin");
        let bg = Bg::new(Sandbox::Bwrap);
        let root = bg.setup.root.path().to_path_buf();
        let home = root.join("home");
        let cargo_home = home.join(".cargo");
        let registry = cargo_home.join("registry");
        // Outside the sandbox: the user fetches the dependency into their registry.
        let config = {
            let standin = StandIn::start(&root.join("standin"));
            project(&root.join("fetcher"), &standin.cargo_config(), false);
            let fetched = Command::new(bin.join("cargo"))
                .args(["build", "--quiet"])
                .current_dir(root.join("fetcher"))
                .env("CARGO_HOME", &cargo_home)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert!(
                fetched.status.success(),
                "the user's own build: {fetched:?}"
            );
            standin.cargo_config()
        };
        project(&bg.setup.files.join("proj"), &config, true);
        if let Some(uid) = user {
            std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
            chown_all(&root, uid);
        }
        // After the chown: links share their files' owner, which must stay the toolchain's.
        let Some(toolchain) = toolchain_for(user, &root) else {
            continue;
        };
        let bin = toolchain.join("bin");
        let before = snapshot(&registry);

        let path = format!("{}:/usr/bin:/bin", path_str(&bin));
        let line = with_caches(
            lnk_tests::readme::recommended_sandbox(
                &bg.setup.files,
                &[
                    "--ro-bind".into(),
                    path_str(&toolchain),
                    path_str(&toolchain),
                ],
            ),
            &bg.setup.files,
        );
        let mut builder = bg
            .serve(&Flags::default())
            .flags(&["--cache", &path_str(&registry)])
            .programs(&["cargo", "sh"])
            .programs_path(&path)
            .timeout("5m")
            .var(&format!("PATH={path}"))
            .var(&format!("CARGO_HOME={}", path_str(&cargo_home)))
            .var(&format!("HOME={}", path_str(&home)))
            .var("TMPDIR=/tmp")
            .sandbox(line);
        if let Some(uid) = user {
            builder = builder.run_as(uid);
        }
        let mut serve = builder.start();

        let result = call(&mut serve, "cargo", &["build", "--offline"], "proj");
        let shown = text(&result);
        assert_eq!(ran(&result)["exit_code"], 0, "as {user:?}: {shown}");
        assert!(
            shown.contains("the build script wrote into the registry"),
            "as {user:?}: {shown}"
        );
        assert_unchanged(&before, &snapshot(&registry), "after the build");

        let script = r#"set -e
./target/debug/proj
touch "$CARGO_HOME/registry/touched"
for crate in "$CARGO_HOME"/registry/cache/*/cachedep-0.1.0.crate; do echo junk >> "$crate"; done
echo touched-the-registry"#;
        let result = call(&mut serve, "sh", &["-c", script], "proj");
        let shown = text(&result);
        assert_eq!(ran(&result)["exit_code"], 0, "as {user:?}: {shown}");
        assert!(shown.contains(GREETING), "{shown}");
        assert!(shown.contains("touched-the-registry"), "{shown}");
        assert_unchanged(&before, &snapshot(&registry), "after touching the registry");

        // A later sandbox builds from the user's registry as it is.
        let script = r#"ls "$CARGO_HOME"/registry/src/*/cachedep-0.1.0/ "$CARGO_HOME"/registry/"#;
        let result = call(&mut serve, "sh", &["-c", script], "proj");
        let shown = text(&result);
        assert!(
            !shown.contains("poisoned") && !shown.contains("touched"),
            "{shown}"
        );
        assert!(shown.contains("Cargo.toml"), "{shown}");
        let stderr = serve.stderr();
        assert_eq!(
            warnings(&stderr),
            Vec::<&str>::new(),
            "as {user:?}: {stderr}"
        );
    }
}

#[test]
fn an_offline_build_writes_only_its_layer_warm() {
    if Sandbox::Bwrap.usable() {
        offline_build();
    }
}

#[test]
fn an_offline_build_writes_only_its_layer_cold() {
    if Sandbox::Bwrap.usable() {
        cold_starts(offline_build);
    }
}
