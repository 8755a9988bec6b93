//! The binaries and the temporary folders of one benchmark run, and the serves started over
//! them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::bins::sibling;
use crate::foreground::system_program;
use crate::serve::{Serve, ServeArgs};

/// `--background-output` of every serve here.
pub(super) const OUTPUT_CAP: u64 = 1 << 20;
/// The same, as the flag reads it.
pub(super) const OUTPUT_CAP_FLAG: &str = "1MiB";
/// The agent id whose key signs what the runs tell.
pub(super) const AGENT: &str = "bench";
/// The programs every serve may run.
const ALLOWED: [&str; 5] = [
    "true",
    "sleep",
    "lnk-bench-stamp",
    "lnk-bench-flood",
    "lnk-bench-ready",
];

/// The binaries next to this one.
pub(crate) struct Bins {
    pub(super) run: PathBuf,
    pub(crate) supervise: PathBuf,
    pub(super) passthrough: PathBuf,
    pub(super) flood: PathBuf,
    pub(super) stamp: PathBuf,
    pub(super) ready: PathBuf,
}

impl Bins {
    pub(super) fn find() -> Result<Bins> {
        Ok(Bins {
            run: sibling("lnk-link-run")?,
            supervise: sibling("lnk-link-supervise")?,
            passthrough: sibling("lnk-test-passthrough")?,
            flood: sibling("lnk-bench-flood")?,
            stamp: sibling("lnk-bench-stamp")?,
            ready: sibling("lnk-bench-ready")?,
        })
    }
}

/// The temporary folders of one run.
pub(crate) struct Place {
    pub(crate) root: tempfile::TempDir,
    pub(crate) files: PathBuf,
    pub(super) programs: PathBuf,
    pub(super) keyring: PathBuf,
    pub(super) way_in: PathBuf,
    /// Items 1 to 3.
    pub(super) state: PathBuf,
    /// Item 4: the fabricated records.
    pub(super) swept: PathBuf,
    /// Item 5: runs that tell.
    pub(super) telling: PathBuf,
}

impl Place {
    pub(super) fn new(bins: &Bins, tmp: Option<&Path>) -> Result<Place> {
        let mut builder = tempfile::Builder::new();
        builder.prefix("lnk-bench-bg-");
        let root = match tmp {
            Some(dir) => builder.tempdir_in(dir),
            None => builder.tempdir(),
        }
        .context("creating a temporary folder")?;
        let at = |name: &str| root.path().join(name);
        let place = Place {
            files: at("files"),
            programs: at("programs"),
            keyring: at("keyring"),
            way_in: at("way-in.sock"),
            state: at("state"),
            swept: at("swept"),
            telling: at("telling"),
            root,
        };
        for dir in [&place.files, &place.programs] {
            std::fs::create_dir(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let links = [
            ("true", system_program("true")?),
            ("sleep", system_program("sleep")?),
            ("lnk-bench-flood", bins.flood.clone()),
            ("lnk-bench-stamp", bins.stamp.clone()),
            ("lnk-bench-ready", bins.ready.clone()),
        ];
        for (name, target) in links {
            std::os::unix::fs::symlink(&target, place.programs.join(name))
                .with_context(|| format!("linking {name} to {}", target.display()))?;
        }
        Ok(place)
    }

    fn log(&self, name: &str) -> PathBuf {
        self.root.path().join(format!("serve-{name}.log"))
    }

    /// A serve over `state`, telling the stand-in way in when `tell` is set.
    pub(super) fn serve(&self, bins: &Bins, name: &str, state: &Path, tell: bool) -> Result<Serve> {
        self.serve_capped(bins, name, state, tell, 1000)
    }

    /// [`Place::serve`] with `--background cap`.
    pub(crate) fn serve_capped(
        &self,
        bins: &Bins,
        name: &str,
        state: &Path,
        tell: bool,
        cap: u32,
    ) -> Result<Serve> {
        let cap = cap.to_string();
        let mut extra: Vec<OsString> = vec!["--state".into(), state.into()];
        for (flag, value) in [
            ("--background", cap.as_str()),
            ("--background-timeout", "60s"),
            ("--background-output", OUTPUT_CAP_FLAG),
            ("--background-keep", "1h"),
            ("--hops", "5"),
        ] {
            extra.push(flag.into());
            extra.push(value.into());
        }
        if tell {
            extra.extend([
                "--way-in".into(),
                self.way_in.clone().into(),
                "--as".into(),
                AGENT.into(),
                "--keyring".into(),
                self.keyring.clone().into(),
            ]);
        }
        Serve::start(
            name,
            &ServeArgs {
                binary: &bins.run,
                files: &self.files,
                programs: &self.programs,
                output: "64KiB",
                allowed: &ALLOWED,
                extra,
                sandbox: vec![bins.passthrough.clone().into_os_string()],
                sandbox_check: false,
                log: self.log(name),
            },
        )
    }
}
