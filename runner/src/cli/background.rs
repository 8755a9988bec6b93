//! The checks of `--state` and the flags that come with it: the limits of background runs
//! and the way in.

use std::path::Path;

use super::args::ServeArgs;
use super::defaults::{default_keyring, find_supervise};
use super::paths::{absolute, absolute_state, must_be_absolute};
use super::refusal::{Refusal, refuse, required};
use crate::config::{Background, FilesFrom, WayIn};

impl ServeArgs {
    /// The background half: `None` without `--state`, whose flags then may not be given.
    /// With `--files-from roots` (`files_from`), the state folder and the keyring are checked
    /// against each project's folder when it is chosen (`crate::project`), not here.
    pub(super) fn check_background(
        &self,
        files: &Path,
        files_from: FilesFrom,
    ) -> Result<Option<Background>, Refusal> {
        let fixed = files_from == FilesFrom::Flag;
        let Some(state) = &self.state else {
            let stray = [
                (self.background.is_some(), "--background"),
                (self.background_timeout.is_some(), "--background-timeout"),
                (self.background_output.is_some(), "--background-output"),
                (self.background_keep.is_some(), "--background-keep"),
                (self.hops.is_some(), "--hops"),
                (self.way_in.is_some(), "--way-in"),
                (self.agent.is_some(), "--as"),
                (self.keyring.is_some(), "--keyring"),
            ];
            if let Some((_, flag)) = stray.iter().find(|(given, _)| *given) {
                return refuse(format!("{flag} needs --state: it is about background runs"));
            }
            return Ok(None);
        };
        let what = "with --state, background runs need it";
        let max_running = required(self.background, "--background", what)?;
        if max_running == 0 {
            return refuse("--background must be at least 1");
        }
        let timeout = required(self.background_timeout, "--background-timeout", what)?;
        let output = required(self.background_output, "--background-output", what)?;
        if output < 2 {
            return refuse("--background-output must be at least 2 bytes");
        }
        let keep = required(self.background_keep, "--background-keep", what)?;
        let hops = required(self.hops, "--hops", what)?;
        must_be_absolute(state, "--state")?;
        let state = absolute_state(state)?;
        if fixed && state.starts_with(files) {
            return refuse(format!(
                "--state {} lies inside --files {}: the sandboxed programs could write it",
                state.display(),
                files.display()
            ));
        }
        let way_in = match (&self.way_in, &self.agent) {
            (None, None) => {
                if self.keyring.is_some() {
                    return refuse("--keyring needs --way-in and --as: it signs what runs tell");
                }
                None
            }
            (Some(_), None) => return refuse("--way-in needs --as <agent id>: whose key signs"),
            (None, Some(_)) => return refuse("--as needs --way-in <socket>: where runs tell"),
            (Some(socket), Some(agent)) => {
                must_be_absolute(socket, "--way-in")?;
                let Ok(agent) = lnk_common::AgentId::parse(agent) else {
                    return refuse(format!(
                        "--as `{agent}` is not an agent id ([A-Za-z0-9][A-Za-z0-9._-]{{0,63}})"
                    ));
                };
                let keyring = match &self.keyring {
                    Some(dir) => {
                        must_be_absolute(dir, "--keyring")?;
                        dir.clone()
                    }
                    None => default_keyring()?,
                };
                // Runs tell from their supervisor, and later sweeps from wherever they are
                // started: the record holds absolute paths.
                let keyring = absolute(&keyring, "--keyring")?;
                if fixed
                    && (keyring.starts_with(files)
                        || keyring.canonicalize().is_ok_and(|k| k.starts_with(files)))
                {
                    return refuse(format!(
                        "the keyring {} lies inside --files {}: sandboxed programs could \
                         read or replace the agent's key",
                        keyring.display(),
                        files.display()
                    ));
                }
                Some(WayIn {
                    socket: absolute(socket, "--way-in")?,
                    agent,
                    keyring,
                })
            }
        };
        let supervise = find_supervise()?;
        Ok(Some(Background {
            supervise,
            given_state: state.clone(),
            state,
            max_running,
            timeout,
            output,
            keep,
            hops,
            way_in,
        }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use crate::cli::command::tests::{parse, serve_line};

    /// The refusal of `serve` over a fresh files folder with `extra` flags.
    fn refused(extra: &[&str]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let line = serve_line(dir.path(), extra);
        let words: Vec<&str> = line.iter().map(String::as_str).collect();
        parse(&words).unwrap_err()
    }

    #[test]
    fn background_flags_need_state() {
        assert_eq!(
            refused(&["--hops", "2"]),
            "--hops needs --state: it is about background runs"
        );
        assert_eq!(
            refused(&["--as", "ada"]),
            "--as needs --state: it is about background runs"
        );
    }

    #[test]
    fn with_state_the_limits_and_the_way_in_are_checked() {
        let state = tempfile::tempdir().unwrap();
        let state = state.path().join("state");
        let state = state.to_string_lossy();
        let limits = [
            "--state",
            &state,
            "--background",
            "2",
            "--background-timeout",
            "1m",
            "--background-output",
            "1MiB",
            "--background-keep",
            "1h",
            "--hops",
            "3",
        ];
        let without = |flag: &str| {
            let mut flags = limits.to_vec();
            let at = flags.iter().position(|f| *f == flag).unwrap();
            flags.drain(at..at + 2);
            refused(&flags)
        };
        assert_eq!(
            without("--hops"),
            "--hops is required: with --state, background runs need it"
        );
        let with = |extra: &[&str]| refused(&[&limits[..], extra].concat());
        assert_eq!(
            with(&["--way-in", "/run/w.sock"]),
            "--way-in needs --as <agent id>: whose key signs"
        );
        assert_eq!(
            with(&["--as", "ada"]),
            "--as needs --way-in <socket>: where runs tell"
        );
        assert_eq!(
            with(&["--way-in", "/run/w.sock", "--as", ".ada"]),
            "--as `.ada` is not an agent id ([A-Za-z0-9][A-Za-z0-9._-]{0,63})"
        );
        assert_eq!(
            with(&["--keyring", "/k"]),
            "--keyring needs --way-in and --as: it signs what runs tell"
        );
    }
}
