//! rustup, and cargo: `~/.cargo/bin/cargo` is rustup's proxy (a link to, or a copy of, the
//! `rustup` binary), which runs the toolchain `$RUSTUP_HOME` (`~/.rustup`) picks. Its proxies'
//! folder and `$RUSTUP_HOME` are shown read-only; `CARGO_HOME` and `RUSTUP_HOME` are set as
//! the user has them, so that rustup inside finds what it finds outside. Of `$CARGO_HOME`
//! itself only `bin/` and cargo's own settings (`config.toml`, checked for tokens) are shown:
//! `credentials.toml` holds the registry tokens, and `registry/` and `git/` are caches.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::{Context, Found, Toolchain};

/// The names rustup's binary has: itself, and its installer.
const RUSTUP: [&str; 2] = ["rustup", "rustup-init"];

/// The programs that are cargo's or rustc's own, however installed.
const CARGO_PROGRAMS: [&str; 4] = ["cargo", "rustc", "rustdoc", "rustfmt"];

/// `CARGO_HOME`: the user's, else `~/.cargo`.
pub fn cargo_home(ctx: &Context) -> PathBuf {
    ctx.var_path("CARGO_HOME")
        .unwrap_or_else(|| ctx.home.join(".cargo"))
}

/// `RUSTUP_HOME`: the user's, else `~/.rustup`.
fn rustup_home(ctx: &Context) -> PathBuf {
    ctx.var_path("RUSTUP_HOME")
        .unwrap_or_else(|| ctx.home.join(".rustup"))
}

/// rustup's proxy (the program leads to the `rustup` binary, by a link or as a hard link of
/// it), or cargo installed some other way.
pub fn recognise(ctx: &Context, found: &Found) -> Option<Toolchain> {
    if is_rustup(&found.real, &found.folder) {
        let rustup_home = rustup_home(ctx);
        let cargo_home = cargo_home(ctx);
        let mut toolchain = Toolchain::named("rustup's proxy");
        toolchain.shown = vec![found.folder.clone(), rustup_home.clone()];
        toolchain.vars = vec![
            ("CARGO_HOME".to_owned(), cargo_home.clone()),
            ("RUSTUP_HOME".to_owned(), rustup_home.clone()),
        ];
        toolchain.settings = cargo_settings(&cargo_home);
        if !rustup_home.is_dir() {
            toolchain.notes.push(format!(
                "rustup's RUSTUP_HOME {} is not there: set RUSTUP_HOME where rustup keeps \
                 its toolchains",
                rustup_home.display()
            ));
        }
        return Some(toolchain);
    }
    let real_name = found.real.file_name()?.to_str()?;
    if CARGO_PROGRAMS.contains(&found.name.as_str()) || CARGO_PROGRAMS.contains(&real_name) {
        let cargo_home = cargo_home(ctx);
        let mut toolchain = Toolchain::named("cargo");
        toolchain.vars = vec![("CARGO_HOME".to_owned(), cargo_home.clone())];
        toolchain.settings = cargo_settings(&cargo_home);
        return Some(toolchain);
    }
    None
}

/// cargo's own settings in `cargo_home` (shown unless they hold a token; see
/// `machine::secrets`). `credentials.toml` is on the never-list.
fn cargo_settings(cargo_home: &Path) -> Vec<PathBuf> {
    vec![cargo_home.join("config.toml"), cargo_home.join("config")]
}

/// Whether `real` is the rustup binary: by its name, or as the same file as a `rustup`
/// beside the program (rustup installs its proxies as hard links where links are not
/// wanted).
fn is_rustup(real: &Path, folder: &Path) -> bool {
    if real
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|name| RUSTUP.contains(&name))
    {
        return true;
    }
    let same = |a: &Path, b: &Path| match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    };
    RUSTUP.iter().any(|name| same(real, &folder.join(name)))
}
