//! The words the machine's part adds to the recommended line, in an order bubblewrap can
//! make them: the home as an empty `--tmpfs` first, then what is shown of it and of the rest
//! of the machine, a mount's folders before what lies in them (a bind inside the home after
//! the home's tmpfs, or the tmpfs would hide it). They go right before the files folder's
//! bind, so that a files folder inside the home (`~/work`) is bound over the tmpfs, writable.
//!
//! What the recommended line shows already (the system's folders, the files folder) is left
//! out, and so is a bind or a link inside another bind (the bind brings it as it is).

use std::path::{Path, PathBuf};

use super::settings::Shown;
use crate::host_config::toolchains::Link;
use crate::host_config::toolchains::roots::shown_by_system;

/// One mount of the machine's part.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Mount {
    /// An empty tmpfs (the home).
    Tmpfs(PathBuf),
    /// A read-only bind of a whole folder or file that exists.
    Bind(PathBuf),
    /// A read-only bind of a settings file, skipped if it is gone by the time a sandbox is
    /// made.
    BindTry(Shown),
    /// A symbolic link made again.
    Symlink(Link),
}

impl Mount {
    /// Where it lands inside.
    fn dest(&self) -> &Path {
        match self {
            Mount::Tmpfs(path) | Mount::Bind(path) => path,
            Mount::BindTry(shown) => &shown.dest,
            Mount::Symlink(link) => &link.at,
        }
    }

    fn words(&self) -> Vec<String> {
        let text = |p: &Path| p.to_string_lossy().into_owned();
        match self {
            Mount::Tmpfs(path) => vec!["--tmpfs".into(), text(path)],
            Mount::Bind(path) => vec!["--ro-bind".into(), text(path), text(path)],
            Mount::BindTry(shown) => vec![
                "--ro-bind-try".into(),
                text(&shown.source),
                text(&shown.dest),
            ],
            Mount::Symlink(link) => vec!["--symlink".into(), text(&link.target), text(&link.at)],
        }
    }
}

/// What goes in the machine's part.
#[derive(Debug)]
pub struct Parts<'a> {
    /// The home, resolved, to be an empty tmpfs (`None`: no tmpfs).
    pub home: Option<&'a Path>,
    /// The files folder, resolved (`None` with `--files-from roots`).
    pub files: Option<&'a Path>,
    /// Folders and files to bind read-only, resolved.
    pub binds: Vec<PathBuf>,
    /// Links to make again.
    pub links: Vec<Link>,
    /// Settings files and `--read` paths.
    pub shown: Vec<Shown>,
}

/// The words, in order, and the binds kept (those not shown already nor inside another).
pub fn words(parts: Parts<'_>) -> (Vec<String>, Vec<PathBuf>) {
    let outside =
        |p: &Path| !shown_by_system(p) && !parts.files.is_some_and(|files| p.starts_with(files));
    let mut binds: Vec<PathBuf> = parts.binds.iter().filter(|b| outside(b)).cloned().collect();
    binds.sort();
    binds.dedup();
    // A bind inside another is brought by it.
    let inside_a_bind =
        |p: &Path, binds: &[PathBuf]| binds.iter().any(|b| p != b && p.starts_with(b));
    let kept: Vec<PathBuf> = binds
        .iter()
        .filter(|b| !inside_a_bind(b, &binds))
        .cloned()
        .collect();
    let shown_by = |p: &Path| kept.iter().any(|b| p.starts_with(b)) || !outside(p);
    let mut mounts: Vec<Mount> = Vec::new();
    if let Some(home) = parts.home {
        mounts.push(Mount::Tmpfs(home.to_path_buf()));
    }
    mounts.extend(kept.iter().cloned().map(Mount::Bind));
    for link in parts.links {
        let mount = Mount::Symlink(link);
        if !shown_by(mount.dest()) && !mounts.contains(&mount) {
            mounts.push(mount);
        }
    }
    for shown in parts.shown {
        let mount = Mount::BindTry(shown);
        if !shown_by(mount.dest()) && !mounts.contains(&mount) {
            mounts.push(mount);
        }
    }
    // The home's tmpfs first, then each mount after those above it.
    mounts.sort_by(|a, b| {
        let rank = |m: &Mount| (!matches!(m, Mount::Tmpfs(_)), m.dest().components().count());
        rank(a).cmp(&rank(b)).then_with(|| a.dest().cmp(b.dest()))
    });
    (mounts.iter().flat_map(Mount::words).collect(), kept)
}
