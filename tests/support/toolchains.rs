//! The machine's own toolchains in a test's home: cargo put into `<home>/.cargo/bin` as a
//! rustup install in that home would have it (links to the machine's `rustup` binary for cargo
//! and rustup's other proxies, and `<home>/.rustup` a link to the machine's rustup home), so that an entry with
//! `--programs-path <home>/.cargo/bin:…` finds a cargo that runs. Where the machine's cargo is
//! not rustup's, it is linked as it is.
use std::path::{Path, PathBuf};

/// The executable `name` on this process's `PATH` (absolute folders), if any.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|folder| folder.is_absolute())
        .map(|folder| folder.join(name))
        .find(|candidate| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The machine's rustup home: `$RUSTUP_HOME` (rustup sets it for what it runs, `cargo test`
/// included), else `~/.rustup`.
pub fn rustup_home() -> Option<PathBuf> {
    std::env::var_os("RUSTUP_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".rustup")))
        .filter(|p| p.is_dir())
}

/// Puts cargo into `home/.cargo/bin` (see the module's doc). Panics when the machine has no
/// cargo on `PATH`: the tests run under cargo.
pub fn give_cargo(home: &Path) {
    let cargo = on_path("cargo").unwrap_or_else(|| panic!("no cargo on PATH"));
    let real = cargo
        .canonicalize()
        .unwrap_or_else(|err| panic!("{cargo:?}: {err}"));
    let bin = home.join(".cargo/bin");
    std::fs::create_dir_all(&bin).unwrap_or_else(|err| panic!("{bin:?}: {err}"));
    let rustup = real.file_name().is_some_and(|n| n == "rustup");
    std::os::unix::fs::symlink(&real, bin.join("cargo"))
        .unwrap_or_else(|err| panic!("linking cargo into {bin:?}: {err}"));
    if rustup {
        // rustup's other proxies beside it (cargo runs `rustc` from PATH).
        let proxies = cargo.parent().and_then(|f| std::fs::read_dir(f).ok());
        for proxy in proxies.into_iter().flatten().filter_map(Result::ok) {
            let name = proxy.file_name();
            let link = bin.join(&name);
            if name != "cargo"
                && !link.exists()
                && proxy.path().canonicalize().is_ok_and(|p| p == real)
            {
                std::os::unix::fs::symlink(&real, &link)
                    .unwrap_or_else(|err| panic!("linking {link:?}: {err}"));
            }
        }
    }
    if rustup && let Some(rustup_home) = rustup_home() {
        std::os::unix::fs::symlink(&rustup_home, home.join(".rustup"))
            .unwrap_or_else(|err| panic!("linking {rustup_home:?} into {home:?}: {err}"));
    }
}
