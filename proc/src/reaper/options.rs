//! A reaper's command line, written by its parent and read by the reaper before anything else
//! (no clap: it runs once per call, and its start-up is per-call overhead):
//!
//! ```text
//! <binary> <subcommand> [--stop-grace-ms N] [--leftover-grace-ms N] [--wait-open]
//!                       [--null-stdin] [--run-stdin] [--hold-start PATH] [--hold-exec PATH]
//!                       [--warm-files PATH --warm-id DEV:INO [--warm-dir REL] [--warm-only]]
//!                       [--cache FOLDER]... [--net] [--stub N] -- <sandbox> <args>...
//! ```
//!
//! A spare reaper reads the same arguments from its control socket ([`super::spare`]).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// The flag that names a cache folder the sandbox gets a layer over (repeated for each).
pub const CACHE: &str = "--cache";

/// How a reaper runs its sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// At a stop, how long between SIGTERM and SIGKILL (zero: SIGKILL at once).
    pub stop_grace: Duration,
    /// After the sandbox process ends, how long what it left may go on before it is killed.
    pub leftover_grace: Duration,
    /// Wait for the open byte ([`super::OPEN`]) on stdin before starting anything (a run's
    /// gate); stdin then becomes `/dev/null`.
    pub wait_open: bool,
    /// Put `/dev/null` in place of stdin before starting anything (a spare's stdin is a pipe,
    /// for the calls that have input).
    pub null_stdin: bool,
    /// With `wait_open`: once opened, the run's stdin is fd 4 (a pipe or a terminal its
    /// supervisor handed over, [`super::Launch::run_stdin`]) rather than `/dev/null`.
    pub run_stdin: bool,
    /// Test hook: hold before forking the sandbox (see [`super::hold`]). Always `None` in a
    /// build without the `test-hooks` feature.
    pub hold_start: Option<PathBuf>,
    /// Test hook: hold the sandbox's process before its exec. Always `None` in a build without
    /// the `test-hooks` feature.
    pub hold_exec: Option<PathBuf>,
    /// For a spare with a warm sandbox ([`super::warm`]): where the call runs, as the stub
    /// inside finds it. `None`: the call starts cold.
    pub warm: Option<crate::stub::wire::Place>,
    /// The warm sandbox or nothing: a stub that fails is reported as the reaper's failure
    /// instead of starting the call cold (the sandbox check's warm probe).
    pub warm_only: bool,
    /// The cache folders the sandbox gets a layer of its own over ([`super::layers`]), made
    /// between the sandbox process's fork and its exec.
    pub caches: Vec<PathBuf>,
    /// The call has a proxy (`--net-allow`, [`crate::net`]): the sandbox's end of its channel
    /// is the reaper's fd 5 ([`super::Launch::net`]), or came with a spare's spec, and goes to
    /// the stub with the call.
    pub net: bool,
    /// The sandbox runs the stub whichever way it starts (a call with a proxy): the first this
    /// many words of `argv` are the sandbox's own, and a cold start starts the sandbox with
    /// the stub in it and hands it the call at once ([`super::warm::cold_stub`]).
    pub stub: Option<usize>,
    /// The sandbox and what it runs.
    pub argv: Vec<OsString>,
}

impl Options {
    /// Options for `argv` with these graces, no gate and no holds.
    pub fn new(argv: Vec<OsString>, stop_grace: Duration, leftover_grace: Duration) -> Self {
        Options {
            stop_grace,
            leftover_grace,
            wait_open: false,
            null_stdin: false,
            run_stdin: false,
            hold_start: None,
            hold_exec: None,
            warm: None,
            warm_only: false,
            caches: Vec::new(),
            net: false,
            stub: None,
            argv,
        }
    }

    /// The arguments after the subcommand, for the parent's command line.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "--stop-grace-ms".into(),
            self.stop_grace.as_millis().to_string().into(),
            "--leftover-grace-ms".into(),
            self.leftover_grace.as_millis().to_string().into(),
        ];
        if self.wait_open {
            args.push("--wait-open".into());
        }
        if self.null_stdin {
            args.push("--null-stdin".into());
        }
        if self.run_stdin {
            args.push("--run-stdin".into());
        }
        for (flag, path) in [
            ("--hold-start", &self.hold_start),
            ("--hold-exec", &self.hold_exec),
        ] {
            if let Some(path) = path {
                args.extend([flag.into(), path.clone().into_os_string()]);
            }
        }
        if let Some(place) = &self.warm {
            place.push_args(&mut args);
        }
        if self.warm_only {
            args.push("--warm-only".into());
        }
        for cache in &self.caches {
            args.extend([CACHE.into(), cache.clone().into_os_string()]);
        }
        if self.net {
            args.push("--net".into());
        }
        if let Some(words) = self.stub {
            args.extend(["--stub".into(), words.to_string().into()]);
        }
        args.push("--".into());
        args.extend(self.argv.iter().cloned());
        args
    }

    /// Reads the arguments after the subcommand.
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Self, String> {
        let mut options = Options::new(Vec::new(), Duration::ZERO, Duration::ZERO);
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
            match arg.to_str() {
                Some("--") => {
                    options.argv = args.collect();
                    if options.argv.is_empty() {
                        return Err("nothing to run after `--`".into());
                    }
                    return Ok(options);
                }
                Some(name @ ("--stop-grace-ms" | "--leftover-grace-ms")) => {
                    let raw = value(name)?;
                    let ms: u64 = raw
                        .to_str()
                        .and_then(|text| text.parse().ok())
                        .ok_or_else(|| format!("{name}: not a number of milliseconds"))?;
                    let grace = Duration::from_millis(ms);
                    if name == "--stop-grace-ms" {
                        options.stop_grace = grace;
                    } else {
                        options.leftover_grace = grace;
                    }
                }
                Some("--wait-open") => options.wait_open = true,
                Some("--null-stdin") => options.null_stdin = true,
                Some("--run-stdin") => options.run_stdin = true,
                // Test hooks: refused as unknown in a build without them.
                #[cfg(feature = "test-hooks")]
                Some(name @ "--hold-start") => options.hold_start = Some(value(name)?.into()),
                #[cfg(feature = "test-hooks")]
                Some(name @ "--hold-exec") => options.hold_exec = Some(value(name)?.into()),
                Some(name @ ("--warm-files" | "--warm-id" | "--warm-dir")) => {
                    let place = options.warm.get_or_insert_with(Default::default);
                    place.parse_arg(name, value(name)?)?;
                }
                Some("--warm-only") => options.warm_only = true,
                Some(CACHE) => options.caches.push(value(CACHE)?.into()),
                Some("--net") => options.net = true,
                Some(name @ "--stub") => {
                    let raw = value(name)?;
                    let words = raw
                        .to_str()
                        .and_then(|text| text.parse().ok())
                        .ok_or_else(|| format!("{name}: not a number of words"))?;
                    options.stub = Some(words);
                }
                _ => return Err(format!("unknown argument {}", arg.to_string_lossy())),
            }
        }
        Err("no `--` before the sandbox".into())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn reads_back_what_it_writes() {
        let mut options = Options::new(
            vec!["bwrap".into(), "--".into(), "/bin/true".into()],
            Duration::from_secs(2),
            Duration::from_millis(1500),
        );
        assert_eq!(Options::parse(options.to_args()).unwrap(), options);
        options.wait_open = true;
        options.null_stdin = true;
        options.run_stdin = true;
        assert_eq!(Options::parse(options.to_args()).unwrap(), options);
        #[cfg(feature = "test-hooks")]
        {
            options.hold_start = Some("/tmp/a b".into());
            options.hold_exec = Some("/tmp/c".into());
            assert_eq!(Options::parse(options.to_args()).unwrap(), options);
        }
        options.warm = Some(crate::stub::wire::Place {
            files: "/w/files".into(),
            dir: "a/b".into(),
            id: (3, 7),
        });
        options.warm_only = true;
        assert_eq!(Options::parse(options.to_args()).unwrap(), options);
        options.caches = vec!["/home/me/.cargo/registry".into(), "/c, d:e".into()];
        options.net = true;
        options.stub = Some(1);
        assert_eq!(Options::parse(options.to_args()).unwrap(), options);
    }

    /// A build without the `test-hooks` feature (a release build, or `cargo test -p lnk-proc`
    /// alone) takes no hold, whatever a reaper's command line says.
    #[cfg(not(feature = "test-hooks"))]
    #[test]
    fn without_test_hooks_no_hold_is_taken() {
        let parse = |args: &[&str]| Options::parse(args.iter().map(OsString::from));
        assert!(parse(&["--hold-start", "/tmp/h", "--", "x"]).is_err());
        assert!(parse(&["--hold-exec", "/tmp/h", "--", "x"]).is_err());
        use crate::reaper::hold::{self, Step};
        for step in [
            Step::CallReaper,
            Step::CallExec,
            Step::RunReaper,
            Step::RunExec,
        ] {
            assert_eq!(hold::path_for(step), None);
        }
        assert_eq!(hold::gate_path(), None);
    }

    #[test]
    fn refuses_what_it_does_not_know() {
        let parse = |args: &[&str]| Options::parse(args.iter().map(OsString::from));
        assert!(parse(&[]).is_err());
        assert!(parse(&["--"]).is_err());
        assert!(parse(&["--stop-grace-ms"]).is_err());
        assert!(parse(&["--stop-grace-ms", "soon", "--", "x"]).is_err());
        assert!(parse(&["--what", "--", "x"]).is_err());
        assert!(parse(&["--stub", "two", "--", "x"]).is_err());
        assert_eq!(parse(&["--", "x"]).unwrap().argv, [OsString::from("x")]);
    }
}
