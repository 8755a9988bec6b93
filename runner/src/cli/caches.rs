//! The checks of `--cache`: each an absolute path of an existing folder, and never one that
//! would show what no sandbox may see, or cover what the sandbox must see as it is.

use std::path::{Component, Path, PathBuf};

use super::paths::must_be_absolute;
use super::refusal::{Refusal, refuse};
use crate::caches::CacheFolder;
use crate::config::Background;
use crate::sandbox_line::never_list;

/// The cache folders of `given`, checked, without repeats. Each must be an absolute path
/// without `..`, of an existing folder that is not `/`, the home or a folder holding it, not
/// inside `--files` nor holding it, never on the never-list (nor inside or holding a path on
/// it: the keyring and the state folder among them), and not inside or holding another cache.
pub(super) fn check(
    given: &[PathBuf],
    files: &Path,
    background: Option<&Background>,
) -> Result<Vec<CacheFolder>, Refusal> {
    check_with(given, files, background, never_list::home())
}

/// [`check`], with `home` as the person's home.
fn check_with(
    given: &[PathBuf],
    files: &Path,
    background: Option<&Background>,
    home: Option<PathBuf>,
) -> Result<Vec<CacheFolder>, Refusal> {
    let home_real = home.as_deref().and_then(|h| h.canonicalize().ok());
    let mut others: Vec<(&str, &Path)> = Vec::new();
    if let Some(background) = background {
        others.push(("the state folder", &background.state));
        if let Some(way_in) = &background.way_in {
            others.push(("the keyring", &way_in.keyring));
        }
    }
    let mut folders: Vec<CacheFolder> = Vec::new();
    for path in given {
        must_be_absolute(path, "--cache")?;
        if path.components().any(|c| c == Component::ParentDir) {
            return refuse(format!(
                "--cache {} holds `..`: give the folder's own path",
                path.display()
            ));
        }
        // `.` and repeated `/` go; the path stays as the tools name it.
        let path: PathBuf = path.components().collect();
        let real = match path.canonicalize() {
            Ok(real) if real.is_dir() => real,
            Ok(_) => return refuse(format!("--cache {} is not a folder", path.display())),
            Err(err) => return refuse(format!("--cache {}: {err}", path.display())),
        };
        for form in [&path, &real] {
            if never_list::overlap(form, files) {
                return refuse(format!(
                    "--cache {} {} --files {}: the files folder is the sandbox's own, and a \
                     cache layer would stand over it; give the tool's cache folder alone",
                    path.display(),
                    if form.starts_with(files) {
                        "lies inside"
                    } else {
                        "holds"
                    },
                    files.display()
                ));
            }
            let holds_home = [home.as_deref(), home_real.as_deref()]
                .into_iter()
                .flatten()
                .any(|home| home.starts_with(form));
            if holds_home {
                return refuse(format!(
                    "--cache {} is the home or holds it: give the tool's cache folder alone \
                     (like ~/.cargo/registry), never the home",
                    path.display()
                ));
            }
            let homes = [home.as_deref(), home_real.as_deref()];
            for home in homes.into_iter().flatten() {
                if let Some(never) = never_list::touches(form, Some(home), &[]) {
                    return refuse(never_refusal(&path, &never));
                }
            }
            if let Some(never) = never_list::touches(form, None, &others) {
                return refuse(never_refusal(&path, &never));
            }
        }
        if let Some(other) = folders
            .iter()
            .find(|f| f.real != real && overlaps(f, &real))
        {
            return refuse(format!(
                "--cache {} and --cache {} lie one inside the other: give each cache folder \
                 once, without its parent or its children",
                other.path.display(),
                path.display()
            ));
        }
        if !folders.iter().any(|f| f.real == real) {
            folders.push(CacheFolder { path, real });
        }
    }
    Ok(folders)
}

fn overlaps(folder: &CacheFolder, real: &Path) -> bool {
    never_list::overlap(&folder.real, real)
}

fn never_refusal(path: &Path, never: &str) -> String {
    format!(
        "--cache {} touches {never}, which no sandbox line of Link Run's shows (it is, holds or \
         lies inside it): give the tool's cache folder alone",
        path.display()
    )
}

#[cfg(test)]
mod tests;
