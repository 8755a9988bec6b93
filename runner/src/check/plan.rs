//! What the probe is asked to try, built from serve's configuration, with what each path is
//! kept on serve's side to read the answer by.
//!
//! A folder that does not exist yet (a fresh machine: no keyring, no state folder) is looked
//! at through its nearest existing parent: if the sandbox shows that parent as it is, the
//! folder will be visible inside as soon as it is made.

use std::path::{Path, PathBuf};

use super::wire::{FileId, ProtectedTry, Request};
use crate::config::Config;

/// The name of the variable that holds serve's marker.
pub const MARKER_VARIABLE: &str = "LNK_SANDBOX_CHECK_MARKER";

/// A folder the sandbox must not show.
#[derive(Debug, Clone)]
pub struct Hidden {
    /// What it is, for a person ("the state folder").
    pub what: &'static str,
    /// The folder as serve was given it.
    pub folder: PathBuf,
    /// What is looked at: the folder itself, or its nearest existing parent.
    pub looked_at: PathBuf,
    /// Its identity outside.
    pub outside: FileId,
}

/// A file the sandbox must not let programs read.
#[derive(Debug, Clone)]
pub struct Secret {
    /// What it is ("the agent's key").
    pub what: &'static str,
    /// Where.
    pub path: PathBuf,
    /// The folder to hide to close it.
    pub hide: PathBuf,
}

/// A folder outside `--files` where nothing may be created.
#[derive(Debug, Clone)]
pub struct Outside {
    /// What it is ("serve's working folder").
    pub what: &'static str,
    /// The folder.
    pub folder: PathBuf,
}

/// A protected path of the files folder the probe tries to change.
#[derive(Debug, Clone)]
pub struct Protected {
    /// What it is, for a person.
    pub what: &'static str,
    /// The file to open for writing, or the folder to make a file in.
    pub path: PathBuf,
    /// Whether the probe makes a file in `path` (else it opens `path` for writing).
    pub create_in: bool,
    /// Of `path` and the folders above it inside the files folder, those missing before the
    /// probe (what a probe that got through made, to take away again).
    pub missing: Vec<PathBuf>,
}

/// The probe's request and how to read its answer.
#[derive(Debug, Clone)]
pub struct Plan {
    /// What the probe is sent.
    pub request: Request,
    /// The folders of [`Request::stat`], in order.
    pub hidden: Vec<Hidden>,
    /// The files of [`Request::read`], in order.
    pub secrets: Vec<Secret>,
    /// The way in, when there is one ([`Request::connect`]'s only socket), with its identity.
    pub way_in: Option<(PathBuf, Option<FileId>)>,
    /// The folders of [`Request::write`], in order.
    pub outside: Vec<Outside>,
    /// serve's own PID namespace.
    pub pid_namespace: Option<String>,
    /// The cache folders the probe writes into ([`super::caches`]), after the folders above in
    /// [`Request::stat`] and [`Request::write`].
    pub caches: Vec<CacheProbe>,
    /// The protected paths of [`Request::protected`], in order.
    pub protected: Vec<Protected>,
}

/// A cache folder the probe writes into.
#[derive(Debug, Clone)]
pub struct CacheProbe {
    /// What it is, for a person.
    pub what: String,
    /// The folder as the sandbox shows it (where the probe writes).
    pub inside: PathBuf,
    /// The user's folder (where serve looks).
    pub outside: PathBuf,
    /// Whether it is a `--cache` folder (else one found on this machine).
    pub given: bool,
    /// Its place in the request's `stat` (a `--cache` folder's: is it in the sandbox at all).
    pub stat_at: Option<usize>,
    /// Its place in the request's `write`.
    pub write_at: usize,
}

impl Plan {
    /// The plan for `config`, with `marker` as the value serve holds in its environment.
    pub fn new(config: &Config, marker: &str, write_name: &str) -> Plan {
        let mut plan = Plan {
            request: Request {
                marker: marker.to_owned(),
                serve_pid: rustix::process::getpid().as_raw_nonzero().get(),
                serve_start: lnk_common::ProcessId::this()
                    .ok()
                    .and_then(|pid| lnk_proc::proc_info::start_time(pid).ok().flatten()),
                write_name: write_name.to_owned(),
                ..Request::default()
            },
            hidden: Vec::new(),
            secrets: Vec::new(),
            way_in: None,
            outside: Vec::new(),
            pid_namespace: std::fs::read_link("/proc/self/ns/pid")
                .ok()
                .map(|link| link.to_string_lossy().into_owned()),
            caches: Vec::new(),
            protected: Vec::new(),
        };
        plan.protected_paths(&config.files);
        if let Some(background) = &config.background {
            let state = &background.state;
            plan.hide("the state folder", state);
            plan.secret(
                "the state folder's start.lock",
                &state.join("start.lock"),
                state,
            );
            if let Some(record) = first_record(state) {
                plan.secret("a record of the state folder", &record, state);
            }
            plan.no_writes("the state folder", state);
            // With --files-from roots, the state folder given keeps every project's.
            let given = &background.given_state;
            if given != state {
                plan.hide("the state folder given (every project's)", given);
                plan.no_writes("the state folder given (every project's)", given);
            }
            if let Some(way_in) = &background.way_in {
                let keyring = &way_in.keyring;
                plan.hide("the keyring folder", keyring);
                let (key, _) = lnk_common::keys::key_paths(keyring, way_in.agent.as_str());
                plan.secret("the agent's key", &key, keyring);
                plan.no_writes("the keyring folder", keyring);
                let socket = &way_in.socket;
                plan.request.connect.push(socket.clone());
                plan.way_in = Some((socket.clone(), FileId::of_path(socket)));
                if FileId::of_path(socket).is_none()
                    && let Some(parent) = socket.parent()
                {
                    plan.hide("the way in's folder", parent);
                }
                plan.request.scan_skip.push(socket.clone());
            }
        }
        if let Ok(cwd) = std::env::current_dir()
            && !cwd.starts_with(&config.files)
        {
            plan.no_writes("serve's working folder", &cwd);
        }
        if let Some(parent) = config.files.parent() {
            plan.no_writes("the parent of --files", parent);
        }
        plan.request.scan_deep = ["/run", "/var/run", "/tmp"].map(PathBuf::from).to_vec();
        if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from)
            && runtime.is_absolute()
            && !plan.request.scan_deep.contains(&runtime)
        {
            plan.request.scan_deep.push(runtime);
        }
        plan.request.scan_shallow = config
            .files
            .ancestors()
            .skip(1)
            .map(Path::to_path_buf)
            .collect();
        plan.request.scan_skip.push(config.files.clone());
        // The caches come last ([`super::caches::plan`], by the check once the plan is made):
        // their places in `stat` and `write` come after every folder's above.
        plan
    }

    /// One protected path of each kind ([`crate::sandbox_line::protected`]): a host's project
    /// file, a project settings folder, the CI workflows, the repository's configuration and
    /// hooks (or, without a repository, a `git init` at the top), and a nested repository's
    /// configuration.
    fn protected_paths(&mut self, files: &Path) {
        let mut add = |what: &'static str, rel: &str, create_in: bool| {
            let path = files.join(rel);
            let missing = path
                .ancestors()
                .take_while(|p| *p != files)
                .filter(|p| p.symlink_metadata().is_err())
                .map(Path::to_path_buf)
                .collect();
            let attempt = if create_in {
                ProtectedTry::CreateIn(path.clone())
            } else {
                ProtectedTry::Write(path.clone())
            };
            self.request.protected.push(attempt);
            self.protected.push(Protected {
                what,
                path,
                create_in,
                missing,
            });
        };
        add("a host's project file", ".mcp.json", false);
        add("a host's project settings", ".claude", true);
        add("the CI workflows", ".github/workflows", true);
        // The same tries whatever the sandboxes made before (a placeholder `.git` is no
        // repository), so that a warm probe tries what the cold one did.
        let git = files.join(".git");
        if git.join("HEAD").is_file() {
            add("the repository's configuration", ".git/config", false);
            add("the repository's hooks", ".git/hooks", true);
        } else if git.is_dir() || git.symlink_metadata().is_err() {
            add("a repository at the top (a `git init`)", ".git", true);
        }
        if let Some(nested) = nested_repository(files) {
            let config = nested.join(".git/config");
            if let Some(rel) = config.strip_prefix(files).ok().and_then(Path::to_str) {
                let rel = rel.to_owned();
                add("a nested repository's configuration", &rel, false);
            }
        }
    }

    fn hide(&mut self, what: &'static str, folder: &Path) {
        let Some((looked_at, outside)) = nearest_existing(folder) else {
            return;
        };
        self.request.stat.push(looked_at.clone());
        self.hidden.push(Hidden {
            what,
            folder: folder.to_path_buf(),
            looked_at,
            outside,
        });
    }

    fn secret(&mut self, what: &'static str, path: &Path, hide: &Path) {
        self.request.read.push(path.to_path_buf());
        self.secrets.push(Secret {
            what,
            path: path.to_path_buf(),
            hide: hide.to_path_buf(),
        });
    }

    fn no_writes(&mut self, what: &'static str, folder: &Path) {
        let Some((folder, _)) = nearest_existing(folder) else {
            return;
        };
        if self.outside.iter().any(|o| o.folder == folder) {
            return;
        }
        self.request.write.push(folder.clone());
        self.outside.push(Outside { what, folder });
    }
}

/// The first repository nested in `files` (a folder down to three levels below it holding a
/// `.git` folder with a `HEAD`), looked for in a bounded number of folders.
fn nested_repository(files: &Path) -> Option<PathBuf> {
    let skip = crate::sandbox_line::protected::names::NOT_SEARCHED;
    let mut level = vec![files.to_path_buf()];
    let mut looked = 0;
    for _ in 0..crate::sandbox_line::protected::names::NESTED_LEVELS {
        let mut next = Vec::new();
        for folder in &level {
            let Ok(entries) = std::fs::read_dir(folder) else {
                continue;
            };
            for entry in entries.filter_map(Result::ok) {
                looked += 1;
                if looked > 2000 {
                    return None;
                }
                let name = entry.file_name();
                if name == ".git" || skip.iter().any(|s| name == *s) {
                    continue;
                }
                if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let path = entry.path();
                if path.join(".git/HEAD").is_file() {
                    return Some(path);
                }
                next.push(path);
            }
        }
        level = next;
    }
    None
}

/// `path` if it exists, else its nearest existing parent, with its identity.
fn nearest_existing(path: &Path) -> Option<(PathBuf, FileId)> {
    path.ancestors()
        .find_map(|p| FileId::of_path(p).map(|id| (p.to_path_buf(), id)))
}

/// A record of the state folder, if it keeps any (the first `*.json` found).
fn first_record(state: &Path) -> Option<PathBuf> {
    std::fs::read_dir(state)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "json"))
}
