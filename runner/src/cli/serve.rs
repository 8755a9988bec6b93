//! The checks of the flags every call runs under: the files folder, the programs, the
//! limits; then the background flags and the sandbox.

use super::args::{FilesFromArg, ServeArgs};
use super::paths::{canonical_folder, must_be_absolute};
use super::refusal::{Refusal, refuse, required};
use super::sandbox::sandbox_with_absolute_program;
use crate::config::{Config, FilesFrom};

/// What `--files` is for, when it is missing.
const FILES_ARE_FOR: &str = "the folder the calls work in (or --files-from roots: the folder the \
                             host was started in, each session its own project)";

impl ServeArgs {
    /// Checks every flag, in the order a person reads them, into a [`Config`].
    pub(super) fn check(self) -> Result<Config, Refusal> {
        if self.sandbox.is_empty() {
            return refuse(
                "a sandbox is required after `--` (for instance the README's recommended line, \
                 `-- /usr/bin/bwrap --ro-bind /usr /usr ... --bind <files> <files> \
                 --unshare-all --cap-drop ALL --die-with-parent --clearenv`); lnk-link-run \
                 never runs programs without one",
            );
        }
        let (files, files_from) = match (&self.files, self.files_from) {
            (Some(_), Some(_)) => {
                return refuse(
                    "--files and --files-from roots cannot both be given: --files names one \
                     folder for every session, --files-from roots takes each session's project \
                     from the client",
                );
            }
            (files, None) => {
                let files = required(files.clone(), "--files", FILES_ARE_FOR)?;
                must_be_absolute(&files, "--files")?;
                (canonical_folder(&files, "--files")?, FilesFrom::Flag)
            }
            // The project is chosen once the client is known; until then, the folder serve
            // was started in stands for it.
            (None, Some(FilesFromArg::Roots)) => (
                std::env::current_dir()
                    .and_then(|dir| dir.canonicalize())
                    .unwrap_or_default(),
                FilesFrom::Roots,
            ),
        };
        let programs_path = required(
            self.programs_path.clone(),
            "--programs-path",
            "the folders where the allowed programs are found",
        )?;
        if !programs_path
            .as_encoded_bytes()
            .split(|b| *b == b':')
            .any(|folder| folder.first() == Some(&b'/'))
        {
            return refuse(
                "--programs-path has no absolute folder: give the folders where programs are \
                 found, like /usr/bin:/bin",
            );
        }
        let timeout = required(self.timeout, "--timeout", "a call's time limit, e.g. 30s")?;
        let output = required(
            self.output,
            "--output",
            "the output kept per call, e.g. 64KiB",
        )?;
        if output < 2 {
            return refuse("--output must be at least 2 bytes (half for the head, half the tail)");
        }
        if self.programs.is_empty() {
            return refuse("at least one --program is required: the programs the agent may run");
        }
        let mut programs: Vec<String> = Vec::new();
        for name in &self.programs {
            if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                return refuse(format!(
                    "--program `{name}` is not a bare program name (no `/`)"
                ));
            }
            if !programs.contains(name) {
                programs.push(name.clone());
            }
        }
        if let Err(refusal) = crate::program::all_found(
            &programs,
            &programs_path,
            std::env::var_os("PATH").as_deref(),
        ) {
            return refuse(refusal);
        }
        let background = self.check_background(&files, files_from)?;
        let caches = super::caches::check(&self.caches, &files, background.as_ref())?;
        let net = match lnk_proc::net::AllowList::parse(self.net_allow.iter().map(String::as_str)) {
            Ok(allow) if allow.is_empty() => None,
            Ok(allow) => Some(std::sync::Arc::new(allow)),
            Err(why) => return refuse(format!("--net-allow {why}")),
        };
        let sandbox = sandbox_with_absolute_program(&self.sandbox)?;
        Ok(Config {
            files,
            files_from,
            programs_path,
            timeout,
            output,
            programs,
            vars: self.vars,
            background,
            net,
            sandbox,
            caches: crate::caches::Caches::new(caches),
        })
    }
}
