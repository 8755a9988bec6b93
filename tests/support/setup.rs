//! A test's own folder with `files/` in it, and the builder of the `serve` it starts there: the
//! flags, the sandbox prefix, the environment, the era the session opens in.
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use crate::bins::helpers_dir;
use crate::sandbox::{Sandbox, path_str};
use crate::serve::{Era, Serve};

/// The programs a default `serve` allows: all found on [`Setup::programs_path`].
pub const PROGRAMS: &[&str] = &[
    "sh",
    "cat",
    "echo",
    "env",
    "pwd",
    "sleep",
    "true",
    "touch",
    "lnk-test-procs",
    "lnk-test-write",
];

/// A test's own temporary folder, with `files/` in it, and the sandbox its calls use.
pub struct Setup {
    /// The sandbox of this test's calls.
    pub sandbox: Sandbox,
    /// The temporary folder; removed when the test ends.
    pub root: TempDir,
    /// `root/files`, canonical: the `--files` folder.
    pub files: PathBuf,
}

impl Setup {
    /// Makes the folder under cargo's target tmp folder, so it lies outside `/tmp` (which
    /// bubblewrap replaces with an empty tmpfs) and programs in it stay visible in the sandbox.
    pub fn new(sandbox: Sandbox) -> Self {
        let base = crate::bins::target_tmp();
        std::fs::create_dir_all(&base).unwrap_or_else(|err| panic!("creating {base:?}: {err}"));
        let root = tempfile::Builder::new()
            .prefix("command-")
            .tempdir_in(&base)
            .unwrap_or_else(|err| panic!("creating a temporary folder: {err}"));
        let files = root.path().join("files");
        std::fs::create_dir(&files).unwrap_or_else(|err| panic!("creating {files:?}: {err}"));
        let files = files
            .canonicalize()
            .unwrap_or_else(|err| panic!("canonicalizing {files:?}: {err}"));
        Setup {
            sandbox,
            root,
            files,
        }
    }

    /// A path inside the temporary folder.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    /// The default `--programs-path`: the helpers, then the system's folders.
    pub fn programs_path(&self) -> String {
        format!("{}:/usr/bin:/bin", path_str(&helpers_dir()))
    }

    /// The sandbox argv for `--files` = `files`: the helpers are visible in it, and nothing
    /// else of the test's folder (its state folder and keyring least of all).
    pub fn sandbox_argv(&self, files: &Path) -> Vec<String> {
        self.sandbox_argv_with(files, &[])
    }

    /// [`Setup::sandbox_argv`], with `visible` shown (read-only) too.
    pub fn sandbox_argv_with(&self, files: &Path, visible: &[PathBuf]) -> Vec<String> {
        let mut shown = vec![helpers_dir()];
        shown.extend_from_slice(visible);
        self.sandbox.argv(files, &shown)
    }

    /// A `serve` with the defaults: timeout 10s, output 64KiB, the [`PROGRAMS`].
    pub fn serve(&self) -> ServeBuilder<'_> {
        ServeBuilder {
            setup: self,
            files: self.files.clone(),
            files_flag: None,
            from_roots: false,
            programs_path: self.programs_path(),
            timeout: "10s".into(),
            output: "64KiB".into(),
            programs: PROGRAMS.iter().map(|p| (*p).to_owned()).collect(),
            vars: Vec::new(),
            extra: Vec::new(),
            era: Era::Legacy("2025-11-25"),
            sandbox: None,
            visible: Vec::new(),
            user: None,
            current_dir: None,
            env: Vec::new(),
            names: None,
        }
    }
}

/// The flags of one `serve`.
pub struct ServeBuilder<'a> {
    setup: &'a Setup,
    files: PathBuf,
    files_flag: Option<PathBuf>,
    from_roots: bool,
    programs_path: String,
    timeout: String,
    output: String,
    programs: Vec<String>,
    vars: Vec<String>,
    extra: Vec<String>,
    era: Era,
    sandbox: Option<Vec<String>>,
    visible: Vec<PathBuf>,
    user: Option<u32>,
    current_dir: Option<PathBuf>,
    env: Vec<(String, OsString)>,
    names: Option<crate::net::Names>,
}

impl ServeBuilder<'_> {
    /// The sandbox prefix after `--`, instead of the setup's.
    pub fn sandbox(mut self, argv: Vec<String>) -> Self {
        self.sandbox = Some(argv);
        self
    }

    /// A folder of the test's the sandboxed programs must see (read-only), such as a
    /// `--programs-path` folder of its own.
    pub fn visible(mut self, path: &Path) -> Self {
        self.visible.push(path.to_path_buf());
        self
    }

    /// Runs serve as this user (and group of the same number), with no other groups; the tests
    /// run as root, so this is how they run serve as an ordinary user (`nobody`).
    pub fn run_as(mut self, uid: u32) -> Self {
        self.user = Some(uid);
        self
    }

    /// Runs serve with `names` as its `/etc/hosts` (in a mount namespace of its own), so that
    /// its proxy resolves the tests' names ([`crate::net::Names`]).
    pub fn names(mut self, names: &crate::net::Names) -> Self {
        self.names = Some(names.clone());
        self
    }

    /// The folder serve starts in (hosts often start it in the agent's folder).
    pub fn current_dir(mut self, dir: &Path) -> Self {
        self.current_dir = Some(dir.to_path_buf());
        self
    }

    /// The variables added to serve's environment.
    pub fn envs(&self) -> &[(String, OsString)] {
        &self.env
    }

    /// One more variable in serve's environment.
    pub fn env(mut self, name: &str, value: impl Into<OsString>) -> Self {
        self.env.push((name.to_owned(), value.into()));
        self
    }

    /// `--timeout`.
    pub fn timeout(mut self, value: &str) -> Self {
        value.clone_into(&mut self.timeout);
        self
    }

    /// `--output`.
    pub fn output(mut self, value: &str) -> Self {
        value.clone_into(&mut self.output);
        self
    }

    /// The `--files` flag's value, when it is not the (canonical) files folder itself; the
    /// sandbox still binds the canonical folder.
    pub fn files_flag(mut self, path: &Path) -> Self {
        self.files_flag = Some(path.to_path_buf());
        self
    }

    /// `--files-from roots` in place of `--files`: the files folder is the client's first root
    /// (else the folder serve starts in), and the sandbox line binds the word `{files}`, which
    /// serve fills in.
    pub fn files_from_roots(mut self) -> Self {
        self.from_roots = true;
        self
    }

    /// `--programs-path`.
    pub fn programs_path(mut self, value: &str) -> Self {
        value.clone_into(&mut self.programs_path);
        self
    }

    /// The `--program` list, instead of [`PROGRAMS`].
    pub fn programs(mut self, names: &[&str]) -> Self {
        self.programs = names.iter().map(|p| (*p).to_owned()).collect();
        self
    }

    /// One more `--var NAME=VALUE`.
    pub fn var(mut self, assignment: &str) -> Self {
        self.vars.push(assignment.to_owned());
        self
    }

    /// More flags, put before `--`.
    pub fn flags(mut self, flags: &[&str]) -> Self {
        self.extra.extend(flags.iter().map(|f| (*f).to_owned()));
        self
    }

    /// How [`ServeBuilder::start`] opens the session.
    pub fn era(mut self, era: Era) -> Self {
        self.era = era;
        self
    }

    /// The arguments after the binary's name.
    pub fn argv(&self) -> Vec<OsString> {
        let files: [OsString; 2] = if self.from_roots {
            ["--files-from".into(), "roots".into()]
        } else {
            [
                "--files".into(),
                self.files_flag.as_ref().unwrap_or(&self.files).into(),
            ]
        };
        let mut argv: Vec<OsString> = vec!["serve".into()];
        argv.extend(files);
        argv.extend([
            "--programs-path".into(),
            self.programs_path.clone().into(),
            "--timeout".into(),
            self.timeout.clone().into(),
            "--output".into(),
            self.output.clone().into(),
        ]);
        for program in &self.programs {
            argv.extend(["--program".into(), program.into()]);
        }
        for var in &self.vars {
            argv.extend(["--var".into(), var.into()]);
        }
        argv.extend(self.extra.iter().map(OsString::from));
        if !self.setup.sandbox.checked() {
            argv.push("--no-sandbox-check".into());
        }
        argv.push("--".into());
        let sandbox = match &self.sandbox {
            Some(sandbox) => sandbox.clone(),
            None if self.from_roots => self
                .setup
                .sandbox_argv_with(Path::new(crate::roots::FILES_WORD), &self.visible),
            None => self.setup.sandbox_argv_with(&self.files, &self.visible),
        };
        argv.extend(sandbox.into_iter().map(OsString::from));
        argv
    }

    /// Starts the server without any message sent.
    pub fn spawn(&self) -> Serve {
        self.spawn_env(&[])
    }

    fn spawn_env(&self, envs: &[(&str, &std::ffi::OsStr)]) -> Serve {
        let mut all: Vec<(&str, &std::ffi::OsStr)> = self
            .env
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_os_str()))
            .collect();
        all.extend_from_slice(envs);
        if let Some(names) = &self.names {
            let (program, argv) = names.wrap(&crate::bins::link_run(), &self.argv(), self.user);
            return Serve::spawn_program(
                &program,
                &argv,
                self.era,
                &all,
                self.current_dir.as_deref(),
                None,
            );
        }
        Serve::spawn_env(
            &self.argv(),
            self.era,
            &all,
            self.current_dir.as_deref(),
            self.user,
        )
    }

    /// As [`ServeBuilder::start`], with more variables in the server's environment (test hooks
    /// such as `LNK_SUPERVISE_HOLD_GATE`, which only some test binaries use: the binaries must
    /// have them, [`crate::bins::require_test_hooks`]).
    pub fn start_env(&self, envs: &[(&str, &std::ffi::OsStr)]) -> Serve {
        if envs
            .iter()
            .any(|(name, _)| crate::bins::TEST_HOOKS.contains(name))
        {
            crate::bins::require_test_hooks();
        }
        let mut serve = self.spawn_env(envs);
        if let Era::Legacy(version) = self.era {
            let result = serve.initialize(version);
            assert_eq!(result["protocolVersion"], version, "{result}");
        }
        serve
    }

    /// Starts the server and opens the session (`initialize` + `notifications/initialized` in
    /// the legacy era; nothing in the modern one).
    pub fn start(&self) -> Serve {
        let mut serve = self.spawn();
        if let Era::Legacy(version) = self.era {
            let result = serve.initialize(version);
            assert_eq!(result["protocolVersion"], version, "{result}");
        }
        serve
    }
}
