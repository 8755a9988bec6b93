//! A path followed as the kernel follows it, component by component, noting each symbolic
//! link on the way: inside the sandbox each one is made again where it is not already shown,
//! so that a path resolves inside as it does outside (a link relative to its own folder, like
//! npm's `bin/npm -> ../lib/node_modules/npm/bin/npm-cli.js`, would lead elsewhere if only
//! the file it names were bound at the link's place).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// At most this many links are followed in one path, as the kernel's own limit.
const MAX_LINKS: usize = 40;

/// A symbolic link met on the way: where it is (its folder resolved) and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Link {
    /// The link itself; its folder holds no link.
    pub at: PathBuf,
    /// What it points to, as written in it.
    pub target: PathBuf,
}

/// A path followed to what it names.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The links met, in order.
    pub links: Vec<Link>,
    /// Where the path leads, with no link in it; its missing part, if any, as named.
    pub real: PathBuf,
    /// Whether `real` exists.
    pub exists: bool,
}

/// `path` (absolute) followed link by link.
pub fn resolve(path: &Path) -> Resolved {
    let mut links = Vec::new();
    let mut current = PathBuf::from("/");
    let mut todo: VecDeque<OsString> = parts(path);
    while let Some(part) = todo.pop_front() {
        if part == ".." {
            current.pop();
            continue;
        }
        let next = current.join(&part);
        match next.symlink_metadata() {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&next);
                let Ok(target) = target.map_err(drop).and_then(|t| {
                    if links.len() < MAX_LINKS {
                        Ok(t)
                    } else {
                        Err(())
                    }
                }) else {
                    return missing(links, next, todo);
                };
                if target.is_absolute() {
                    current = PathBuf::from("/");
                }
                for (at, part) in parts(&target).into_iter().enumerate() {
                    todo.insert(at, part);
                }
                links.push(Link { at: next, target });
            }
            Ok(_) => current = next,
            Err(_) => return missing(links, next, todo),
        }
    }
    Resolved {
        links,
        real: current,
        exists: true,
    }
}

/// The components of `path` that name something (`.` and the root left out).
fn parts(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_owned()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// A path whose part from `next` on does not exist: the rest as named.
fn missing(links: Vec<Link>, next: PathBuf, rest: VecDeque<OsString>) -> Resolved {
    let mut real = next;
    for part in rest {
        if part == ".." {
            real.pop();
        } else {
            real.push(part);
        }
    }
    Resolved {
        links,
        real,
        exists: false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_on_the_way_are_noted_where_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("install/bin")).unwrap();
        std::fs::create_dir_all(root.join("install/lib/npm/bin")).unwrap();
        std::fs::write(root.join("install/lib/npm/bin/npm-cli.js"), "").unwrap();
        symlink("../lib/npm/bin/npm-cli.js", root.join("install/bin/npm")).unwrap();
        symlink(root.join("install"), root.join("current")).unwrap();
        let resolved = resolve(&root.join("current/bin/npm"));
        assert!(resolved.exists);
        assert_eq!(resolved.real, root.join("install/lib/npm/bin/npm-cli.js"));
        assert_eq!(
            resolved.links,
            [
                Link {
                    at: root.join("current"),
                    target: root.join("install")
                },
                Link {
                    at: root.join("install/bin/npm"),
                    target: PathBuf::from("../lib/npm/bin/npm-cli.js")
                },
            ]
        );
    }

    #[test]
    fn a_missing_part_is_kept_as_named_and_a_loop_ends() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let resolved = resolve(&root.join("no/such/../file"));
        assert!(!resolved.exists);
        assert_eq!(resolved.real, root.join("no/file"));
        symlink("loop", root.join("loop")).unwrap();
        let resolved = resolve(&root.join("loop"));
        assert_eq!(resolved.links.len(), MAX_LINKS);
        assert!(!resolved.exists);
    }
}
