//! The project `check` and `config` check the sandbox on when serve's files folder comes from
//! the client (`--files-from roots`): serve checks each project's folder when it is chosen,
//! but a person setting a host up wants to know now whether the line confines. The folder
//! they run the command in stands for a project when it may be one; else (their home, `/`) a
//! fresh empty folder of the system's temporary folder does, removed afterwards.

use std::path::{Path, PathBuf};

use super::client_root::{Forbidden, check_folder};
use crate::config::{Config, FilesFrom};

/// A project for the sandbox check, and the temporary folder made for it (removed when this
/// is dropped).
pub struct StandIn {
    /// serve's configuration for that project.
    pub config: Config,
    /// What stands for a project, and why, for a person.
    pub note: Option<String>,
    made: Option<PathBuf>,
}

impl StandIn {
    /// The temporary folder made to stand for a project, if one was.
    pub fn made(&self) -> Option<&Path> {
        self.made.as_deref()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        if let Some(made) = &self.made
            && let Err(err) = std::fs::remove_dir(made)
        {
            tracing::warn!(folder = %made.display(), %err, "cannot remove the stand-in project folder");
        }
    }
}

/// The configuration to check: `config` itself with `--files`; with `--files-from roots`, the
/// configuration of a project that stands for every project.
pub fn stand_in(config: &Config) -> Result<StandIn, String> {
    if config.files_from == FilesFrom::Flag {
        return Ok(StandIn {
            config: config.clone(),
            note: None,
            made: None,
        });
    }
    let here = &config.files;
    let why_not = match check_folder(here, "the folder", &Forbidden::of(config)) {
        Ok(folder) => {
            return Ok(StandIn {
                note: Some(format!(
                    "--files-from roots: each session's project folder is checked when serve \
                     chooses it; here the folder this runs in, {}, stands for one",
                    folder.display()
                )),
                config: config.for_project(folder),
                made: None,
            });
        }
        Err(why) if here.as_os_str().is_empty() => why,
        Err(_) => format!("{} may not be a project's folder", here.display()),
    };
    let made = temporary_folder(&std::env::temp_dir())?;
    Ok(StandIn {
        note: Some(format!(
            "--files-from roots: each session's project folder is checked when serve chooses \
             it; {why_not}, so an empty folder, {}, stands for one",
            made.display()
        )),
        config: config.for_project(made.clone()),
        made: Some(made),
    })
}

/// A fresh empty folder in `parent` (0700), canonical.
fn temporary_folder(parent: &Path) -> Result<PathBuf, String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|err| format!("no random source: {err}"))?;
    let path = parent.join(format!("lnk-link-run-project-{}", hex::encode(bytes)));
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&path)
        .and_then(|()| path.canonicalize())
        .map_err(|err| format!("making {}: {}", path.display(), lnk_common::Causes(&err)))
}
