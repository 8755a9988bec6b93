//! Writing a host's file: parent folders made, the file as it was kept beside it as a backup
//! (`<file>.bak`, or `<file>.bak.1`, `.bak.2`, … so that no earlier backup is lost), and the new
//! text written to a temporary file in the same folder and renamed over it, so that the host
//! never reads half a file. A file that is a symbolic link (a dotfiles checkout) is written
//! where the link leads.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The file's text, or empty when it does not exist yet.
pub fn read(path: &Path) -> Result<Option<String>, String> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(format!("cannot read {}: {err}", path.display())),
    }
}

/// What [`replace`] did.
pub struct Written {
    /// The file written.
    pub path: PathBuf,
    /// Where the file as it was is kept, when there was one.
    pub backup: Option<PathBuf>,
}

/// The first of `<file>.bak`, `<file>.bak.1`, … that does not exist.
fn backup_name(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".bak");
    let first = PathBuf::from(&name);
    if first.symlink_metadata().is_err() {
        return first;
    }
    (1u32..)
        .map(|n| {
            let mut numbered = name.clone();
            numbered.push(format!(".{n}"));
            PathBuf::from(numbered)
        })
        .find(|candidate| candidate.symlink_metadata().is_err())
        .unwrap_or(first)
}

/// Replaces `path` with `text`, keeping a backup of what was there.
pub fn replace(path: &Path, text: &str) -> Result<Written, String> {
    // Through a link to its target, so that the link stays a link.
    let path = match path.canonicalize() {
        Ok(target) => target,
        Err(_) => path.to_path_buf(),
    };
    let folder = path
        .parent()
        .ok_or_else(|| format!("{} has no folder", path.display()))?;
    fs::create_dir_all(folder)
        .map_err(|err| format!("cannot make the folder {}: {err}", folder.display()))?;
    let existing = fs::metadata(&path).ok();
    let backup = match &existing {
        Some(_) => {
            let backup = backup_name(&path);
            fs::copy(&path, &backup).map_err(|err| {
                format!(
                    "cannot keep {} as {}: {err}",
                    path.display(),
                    backup.display()
                )
            })?;
            Some(backup)
        }
        None => None,
    };
    let file_name = path
        .file_name()
        .ok_or_else(|| format!("{} names no file", path.display()))?;
    let mut temporary_name = std::ffi::OsString::from(".");
    temporary_name.push(file_name);
    temporary_name.push(format!(".link-run-{}.tmp", std::process::id()));
    let temporary = folder.join(temporary_name);
    // The new file gets the old one's permissions (a file of secrets stays private).
    let mode = existing.map_or(0o644, |m| m.permissions().mode() & 0o7777);
    let written = (|| -> std::io::Result<()> {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&temporary)?;
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        fs::rename(&temporary, &path)
    })();
    if let Err(err) = written {
        let _ = fs::remove_file(&temporary);
        return Err(format!("cannot write {}: {err}", path.display()));
    }
    tracing::debug!(path = %path.display(), "written");
    Ok(Written { path, backup })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_file_is_replaced_with_a_backup_and_no_backup_is_lost() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/settings.json");
        let first = replace(&path, "one").unwrap();
        assert!(first.backup.is_none());
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let second = replace(&path, "two").unwrap();
        assert_eq!(fs::read_to_string(second.backup.unwrap()).unwrap(), "one");
        let third = replace(&path, "three").unwrap();
        let backup = third.backup.unwrap();
        assert!(backup.to_string_lossy().ends_with(".bak.1"), "{backup:?}");
        assert_eq!(fs::read_to_string(backup).unwrap(), "two");
        assert_eq!(fs::read_to_string(&path).unwrap(), "three");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(fs::read_dir(path.parent().unwrap()).unwrap().count(), 3);
    }
}
