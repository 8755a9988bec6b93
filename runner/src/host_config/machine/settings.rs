//! Per-user settings that hold no secret, shown read-only at their own place: git's identity
//! and settings (`~/.gitconfig` and the files it includes, `~/.config/git/config`, `ignore`,
//! `attributes`; never `~/.config/git/credentials`), and what a toolchain reads (cargo's
//! `config.toml`, `~/.python-version`, `~/.tool-versions`, mise's configuration). Only files
//! that exist when `config` runs are shown, each read first: one that holds a secret (see
//! [`super::secrets`]) or is on the never-list is left out, with a warning saying why.
//! `config --read <path>` adds a path by hand.

use std::path::{Path, PathBuf};

use super::secrets::secret_in;
use crate::host_config::never::NeverList;
use crate::host_config::toolchains::symlinks::{Link, resolve};

/// A file or folder shown read-only: bound from `source` (as named; bubblewrap follows a
/// link) at `dest` (its folder resolved, so that the bind lands where the path leads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// The path as the user names it.
    pub source: PathBuf,
    /// Where it is bound inside.
    pub dest: PathBuf,
}

impl Shown {
    /// `path` shown at its own place; the links on the way to its folder go to `links`.
    pub fn at_own_place(path: &Path, links: &mut Vec<Link>) -> Shown {
        let (parent, name) = match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) => (parent, name),
            _ => {
                return Shown {
                    source: path.to_path_buf(),
                    dest: path.to_path_buf(),
                };
            }
        };
        let resolved = resolve(parent);
        links.extend(resolved.links);
        Shown {
            source: path.to_path_buf(),
            dest: resolved.real.join(name),
        }
    }
}

/// What the settings give: files shown, and what was left out and why.
#[derive(Debug, Default)]
pub struct Settings {
    /// Files shown read-only.
    pub shown: Vec<Shown>,
    /// Links on the way to them.
    pub links: Vec<Link>,
    /// What was left out, and why.
    pub warnings: Vec<String>,
}

/// git's settings files for `home`, with `XDG_CONFIG_HOME` as the user has it.
pub fn git_files(home: &Path, xdg_config: Option<&Path>) -> Vec<PathBuf> {
    let config = xdg_config.map_or_else(|| home.join(".config"), Path::to_path_buf);
    vec![
        home.join(".gitconfig"),
        config.join("git/config"),
        config.join("git/ignore"),
        config.join("git/attributes"),
    ]
}

/// The files of `wanted` that exist and hold no secret, and the files git's ones include.
pub fn gather(wanted: &[PathBuf], home: &Path, never: &NeverList) -> Settings {
    let mut settings = Settings::default();
    let mut todo: Vec<(PathBuf, usize)> = wanted.iter().map(|p| (p.clone(), 0)).collect();
    let mut seen: Vec<PathBuf> = Vec::new();
    while let Some((path, depth)) = todo.pop() {
        if seen.contains(&path) || !path.is_file() {
            continue;
        }
        seen.push(path.clone());
        if let Some(secret) = never.blocks(&path) {
            settings.warnings.push(format!(
                "{} is not shown to the sandbox: it is or leads to {}, which is never shown",
                path.display(),
                secret.display()
            ));
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        if let Some(why) = secret_in(&text) {
            settings.warnings.push(format!(
                "{} is not shown to the sandbox: {why}; move the secret out of it (or give \
                 `--read {} --force` to show it anyway)",
                path.display(),
                path.display()
            ));
            continue;
        }
        if depth < 3 && is_git_config(&path) {
            for included in git_includes(&text, &path, home) {
                todo.push((included, depth + 1));
            }
        }
        settings
            .shown
            .push(Shown::at_own_place(&path, &mut settings.links));
    }
    settings.shown.sort_by(|a, b| a.dest.cmp(&b.dest));
    settings
}

/// Whether `path` is one of git's configuration files (or one they include: named like one).
fn is_git_config(path: &Path) -> bool {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    name.contains("gitconfig")
        || (name == "config" && path.parent().is_some_and(|p| p.ends_with("git")))
}

/// The files a git configuration includes (`[include]` and `[includeIf …]`'s `path = …`):
/// `~/…` in the home, relative ones beside the including file.
fn git_includes(text: &str, file: &Path, home: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut in_include = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_include = line.to_ascii_lowercase().starts_with("[include");
            continue;
        }
        if !in_include {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if !key.trim().eq_ignore_ascii_case("path") {
            continue;
        }
        let value = value.trim().trim_matches('"');
        let path = if let Some(rest) = value.strip_prefix("~/") {
            home.join(rest)
        } else if Path::new(value).is_absolute() {
            PathBuf::from(value)
        } else {
            file.parent().unwrap_or(home).join(value)
        };
        found.push(path);
    }
    found
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn git_s_files_and_their_includes_are_shown_unless_they_hold_a_secret() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        std::fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = Me\n[include]\n\tpath = ~/.gitconfig-work\n\
             [includeIf \"gitdir:~/corp/\"]\n\tpath = corp.gitconfig\n",
        )
        .unwrap();
        std::fs::write(home.join(".gitconfig-work"), "[user]\n\temail = me@corp\n").unwrap();
        std::fs::write(
            home.join("corp.gitconfig"),
            "[http]\n\textraHeader = Authorization: Bearer x\n",
        )
        .unwrap();
        std::fs::create_dir_all(home.join(".config/git")).unwrap();
        std::fs::write(home.join(".config/git/ignore"), "target/\n").unwrap();
        std::fs::write(home.join(".config/git/credentials"), "https://u:p@h\n").unwrap();
        let never = NeverList::new(&[&home], &[], &[]);
        let mut wanted = git_files(&home, None);
        wanted.push(home.join(".config/git/credentials"));
        let settings = gather(&wanted, &home, &never);
        let shown: Vec<PathBuf> = settings.shown.iter().map(|s| s.dest.clone()).collect();
        assert_eq!(
            shown,
            [
                home.join(".config/git/ignore"),
                home.join(".gitconfig"),
                home.join(".gitconfig-work"),
            ]
        );
        let warnings = settings.warnings.join("\n");
        assert!(
            warnings.contains("corp.gitconfig is not shown"),
            "{warnings}"
        );
        assert!(warnings.contains("extraheader"), "{warnings}");
        assert!(!warnings.contains("Bearer"), "never the value: {warnings}");
        assert!(warnings.contains("credentials is not shown"), "{warnings}");
    }
}
