//! One state folder per project, under the state folder given (`serve --files-from roots`).
//!
//! A `serve` whose files folder is the client's root serves whatever project the host was
//! started in, with one `--state` for all of them. Each project's runs are kept in a state
//! folder of its own, `<state>/projects/<name>/`, laid out exactly as any state folder
//! ([`crate::layout`]: its own `start.lock`, slots, index, records), so that what one
//! project's session lists, reads, writes, stops or cancels can only be its own runs, and
//! `--background` counts the runs of one project.
//!
//! ```text
//! <state>/projects/                     0700, made by the first serve that picks a project
//! <state>/projects/<name>/              a project's state folder, 0700
//! ```
//!
//! `<name>` is `<label>-<digest>`: the label is the files folder's last component with every
//! character but `[A-Za-z0-9._-]` made `_`, at most [`LABEL_CHARS`] characters (for a person
//! looking at the folder), and the digest the first 16 bytes of the SHA-256 of the files
//! folder's canonical path, in hex (so two projects never share a folder, whatever their
//! names). Anything else under `projects/` is no project's, and left alone.
//!
//! The state folder given keeps its own runs too (those of a `serve --files`), as before.
//! Whatever covers every run of a state folder — a sweep, `stop --state`, `remove --state` —
//! covers it and each of its projects' folders ([`StateDir::with_projects`]).
//!
//! Format: the layout of the state folder given gains `projects/`; nothing else changes, and
//! nothing is migrated. Binaries that predate it see `projects/` as a name they do not know
//! and leave it alone, so a sweep or `stop --state` of an older `lnk-link-supervise` does not
//! reach the projects' runs: both binaries are installed together.

use std::fs::DirBuilder;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::{Error, Op};
use crate::layout::StateDir;

/// The folder of the projects' state folders, inside the state folder given.
pub const PROJECTS_DIR: &str = "projects";
/// The most characters of a project folder's label.
pub const LABEL_CHARS: usize = 40;
/// Bytes of the digest in a project folder's name (hex: twice as many characters).
const DIGEST_BYTES: usize = 16;

/// The name of the state folder of the project whose files folder is `files` (canonical).
pub fn project_name(files: &Path) -> String {
    let label: String = files
        .file_name()
        .map(|name| String::from_utf8_lossy(name.as_bytes()).into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(LABEL_CHARS)
        .collect();
    let digest = Sha256::digest(files.as_os_str().as_bytes());
    format!("{label}-{}", hex::encode(&digest[..DIGEST_BYTES]))
}

/// Whether `name` is one [`project_name`] makes.
fn is_project_name(name: &str) -> bool {
    let Some((label, digest)) = name.rsplit_once('-') else {
        return false;
    };
    digest.len() == DIGEST_BYTES * 2
        && digest
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && label.chars().count() <= LABEL_CHARS
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

impl StateDir {
    /// The state folder of the project whose files folder is `files` (canonical): named only,
    /// nothing is made ([`StateDir::create_project`] makes it).
    pub fn project(&self, files: &Path) -> StateDir {
        StateDir::new(self.path().join(PROJECTS_DIR).join(project_name(files)))
    }

    /// This state folder, then each project's state folder under it (those whose name
    /// [`project_name`] could have made, and that are folders), in name order: every folder
    /// a sweep, `stop --state` or `remove --state` of this one covers. A project folder is
    /// trusted as any state folder is, when it is opened.
    pub fn with_projects(&self) -> Result<Vec<StateDir>, Error> {
        let mut all = vec![self.clone()];
        let dir = self.path().join(PROJECTS_DIR);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(all),
            Err(e) => return Err(Error::io(Op::List, &dir, e)),
        };
        let mut projects = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(Op::List, &dir, e))?;
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && entry.file_name().to_str().is_some_and(is_project_name) {
                projects.push(entry.path());
            }
        }
        projects.sort();
        all.extend(projects.into_iter().map(StateDir::new));
        Ok(all)
    }

    /// The state folder of the project whose files folder is `files` (canonical), made if it
    /// is missing and checked as any state folder ([`crate::trust`]). A new one is whole and
    /// indexed before its name appears — made under a temporary name in `projects/`, then
    /// renamed — so that a sweep of the state folder given never finds it half made; of two
    /// serves that make it at once, one's stays and the other's goes.
    pub fn create_project(&self, files: &Path) -> Result<StateDir, Error> {
        self.make_projects_dir()?;
        let project = self.project(files);
        if std::fs::symlink_metadata(project.path()).is_err() {
            let temp = self
                .path()
                .join(PROJECTS_DIR)
                .join(crate::layout::temp_name()?);
            DirBuilder::new()
                .mode(0o700)
                .create(&temp)
                .map_err(|e| Error::io(Op::MakeDir, &temp, e))?;
            let made = crate::index::init(&StateDir::new(&temp)).and_then(|()| {
                std::fs::rename(&temp, project.path())
                    .map_err(|e| Error::io(Op::MakeDir, project.path(), e))
            });
            if let Err(err) = made {
                // Ours is not needed when another serve's got there first.
                let _ = std::fs::remove_dir_all(&temp);
                if std::fs::symlink_metadata(project.path()).is_err() {
                    return Err(err);
                }
            }
        }
        crate::trust::check_state_folder(project.path())?;
        Ok(project)
    }

    /// Makes `projects/` (0700) if it is missing: before a project's folder is made.
    pub fn make_projects_dir(&self) -> Result<(), Error> {
        let dir = self.path().join(PROJECTS_DIR);
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| Error::io(Op::MakeDir, &dir, e))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_project_is_named_by_its_folder_and_a_digest_of_its_path() {
        let name = project_name(Path::new("/home/me/work"));
        let (label, digest) = name.rsplit_once('-').unwrap();
        assert_eq!(label, "work");
        assert_eq!(digest.len(), 32);
        assert!(is_project_name(&name), "{name}");
        // Two folders of the same name are two projects.
        assert_ne!(name, project_name(Path::new("/srv/work")));
        assert_eq!(name, project_name(Path::new("/home/me/work")));
        // A name of any bytes makes a label a person can read, and a folder name that fits.
        let odd = project_name(Path::new("/x/a b\u{e9}\n/../.."));
        assert!(is_project_name(&odd), "{odd}");
        let long = project_name(Path::new(&format!("/x/{}", "y".repeat(300))));
        assert!(long.len() <= LABEL_CHARS + 1 + 32 && is_project_name(&long));
        assert!(is_project_name(&project_name(Path::new("/"))));
        for other in [
            "work",
            "work-xyz",
            "a/b-0123456789abcdef0123456789abcdef",
            "",
        ] {
            assert!(!is_project_name(other), "{other}");
        }
    }

    #[test]
    fn every_folder_of_a_state_folder_is_itself_then_its_projects() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path().join("state"));
        assert_eq!(state.with_projects().unwrap(), vec![state.clone()]);
        let b = state.project(Path::new("/b"));
        let a = state.project(Path::new("/a"));
        assert_eq!(
            b.path().parent(),
            Some(state.path().join(PROJECTS_DIR).as_path())
        );
        assert_eq!(state.create_project(Path::new("/a")).unwrap(), a);
        assert_eq!(state.create_project(Path::new("/b")).unwrap(), b);
        // Made whole: indexed before it has its name; made once.
        assert!(crate::index::is_indexed(&a));
        std::fs::write(a.path().join("kept"), b"").unwrap();
        assert_eq!(state.create_project(Path::new("/a")).unwrap(), a);
        assert!(a.path().join("kept").exists());
        // Names no project has, and files, are no project's.
        std::fs::create_dir(state.path().join(PROJECTS_DIR).join("stray")).unwrap();
        let fake = format!("f-{}", "0".repeat(32));
        std::fs::write(state.path().join(PROJECTS_DIR).join(fake), b"").unwrap();
        let mut projects = vec![a, b];
        projects.sort_by(|x, y| x.path().cmp(y.path()));
        let mut want = vec![state.clone()];
        want.extend(projects);
        assert_eq!(state.with_projects().unwrap(), want);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(state.path().join(PROJECTS_DIR))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }
}
