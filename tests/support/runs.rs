//! Background runs for the tests: a test folder with a state folder beside `files/`, a `serve`
//! with the background flags, the records on disk, and a guard that kills whatever a test's runs
//! left behind, however the test ends. The tools themselves are in [`crate::tools`].
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};
use serde_json::Value;

use crate::bins::link_supervise;
use crate::procs::{marker, with_marker};
use crate::procs::{poll, sigkill, supervisors};
use crate::sandbox::{Sandbox, path_str};
use crate::serve::ANSWER;
use crate::setup::{ServeBuilder, Setup};

/// The background flags of a `serve`.
#[derive(Clone, Copy, Debug)]
pub struct Flags {
    /// `--background`.
    pub background: u32,
    /// `--background-timeout`.
    pub timeout: &'static str,
    /// `--background-output`.
    pub output: &'static str,
    /// `--background-keep`.
    pub keep: &'static str,
    /// `--hops`.
    pub hops: u32,
}

impl Flags {
    /// `--state <state>` and these flags, in the order `serve` and `config` are given them in
    /// the tests.
    pub fn args(&self, state: &str) -> Vec<String> {
        [
            "--state",
            state,
            "--background",
            &self.background.to_string(),
            "--background-timeout",
            self.timeout,
            "--background-output",
            self.output,
            "--background-keep",
            self.keep,
            "--hops",
            &self.hops.to_string(),
        ]
        .map(str::to_owned)
        .to_vec()
    }
}

impl Default for Flags {
    fn default() -> Self {
        Flags {
            background: 4,
            timeout: "2m",
            output: "1MiB",
            keep: "1h",
            hops: 3,
        }
    }
}

/// A test's folder (`files/`, and `state/` beside it, which `serve` creates), and the markers of
/// its runs. Dropping it kills what the test's runs left: their supervisors, their groups (from
/// the records) and any process carrying one of its markers.
pub struct Bg {
    /// The folder, the files folder and the sandbox.
    pub setup: Setup,
    /// The `--state` folder.
    pub state: PathBuf,
    markers: RefCell<Vec<String>>,
}

impl Bg {
    /// A new test folder; checks that both binaries are built.
    pub fn new(sandbox: Sandbox) -> Bg {
        link_supervise();
        let setup = Setup::new(sandbox);
        let state = setup.path("state");
        Bg {
            setup,
            state,
            markers: RefCell::new(Vec::new()),
        }
    }

    /// A marker no other process carries, killed (if still running) when the test ends.
    pub fn marker(&self) -> String {
        let mark = marker();
        self.markers.borrow_mut().push(mark.clone());
        mark
    }

    /// A `serve` with `--state` and these background flags.
    pub fn serve(&self, flags: &Flags) -> ServeBuilder<'_> {
        let owned = flags.args(&path_str(&self.state));
        let borrowed: Vec<&str> = owned.iter().map(String::as_str).collect();
        self.setup.serve().flags(&borrowed)
    }

    /// `<state>/<id>.json`.
    pub fn record_path(&self, id: &str) -> PathBuf {
        self.state.join(format!("{id}.json"))
    }

    /// `<files>/background/<id>.out`.
    pub fn output_path(&self, id: &str) -> PathBuf {
        self.setup
            .files
            .join("background")
            .join(format!("{id}.out"))
    }

    /// The record of `id`, if it exists (records are renamed into place, never torn).
    pub fn record(&self, id: &str) -> Option<Value> {
        let path = self.record_path(id);
        let bytes = std::fs::read(&path).ok()?;
        Some(serde_json::from_slice(&bytes).unwrap_or_else(|err| {
            panic!(
                "{path:?} is not JSON ({err}): {}",
                String::from_utf8_lossy(&bytes)
            )
        }))
    }

    /// Waits until the record of `id` exists and satisfies `pred`.
    pub fn wait_record(&self, id: &str, within: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        let mut last = None;
        let found = poll(within, || {
            last = self.record(id);
            last.as_ref().is_some_and(&pred)
        });
        assert!(
            found,
            "the record of {id} did not get there within {within:?}: {last:#?}"
        );
        last.unwrap_or_else(|| unreachable!("found"))
    }

    /// The ids of the records in the state folder.
    pub fn record_ids(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.state) else {
            return Vec::new();
        };
        let mut ids: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_suffix(".json")
                    .map(String::from)
            })
            .collect();
        ids.sort();
        ids
    }

    /// The recorded process group of `id` (pgid, leader pid), once the supervisor wrote it.
    pub fn group(&self, id: &str) -> (i32, i32) {
        let record = self.wait_record(id, ANSWER, |r| r["group"].is_object());
        let pid = |key: &str| {
            record["group"][key]
                .as_i64()
                .and_then(|p| i32::try_from(p).ok())
                .filter(|p| *p > 1)
                .unwrap_or_else(|| panic!("group.{key} is a pid: {record}"))
        };
        (pid("pgid"), pid("leader_pid"))
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // What the supervisors and sweeps logged says why a run ended as it did.
            for entry in std::fs::read_dir(&self.state)
                .into_iter()
                .flatten()
                .flatten()
            {
                let path = entry.path();
                if path.extension().is_some_and(|e| e == "log")
                    && let Ok(text) = std::fs::read_to_string(&path)
                {
                    eprintln!("--- {} ---\n{text}--- end ---", path.display());
                }
            }
        }
        // A test that passed must leave no supervisor behind: each quits once its run's end is
        // recorded.
        let mut lingering: Vec<String> = Vec::new();
        if !std::thread::panicking() {
            let ids = self.record_ids();
            poll(Duration::from_secs(10), || {
                lingering = ids
                    .iter()
                    .filter(|id| !supervisors(id).is_empty())
                    .cloned()
                    .collect();
                lingering.is_empty()
            });
        }
        for id in self.record_ids() {
            for supervisor in supervisors(&id) {
                sigkill(supervisor.pid);
            }
            let record = std::fs::read(self.record_path(&id))
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
            let pgid = record
                .as_ref()
                .filter(|r| r["status"]["state"] == "running")
                .and_then(|r| r["group"]["pgid"].as_i64())
                .and_then(|p| i32::try_from(p).ok())
                .filter(|p| *p > 1)
                .and_then(Pid::from_raw);
            if let Some(pgid) = pgid {
                // Gone already is fine: this only cleans up after a failed test.
                let _gone = kill_process_group(pgid, Signal::KILL);
            }
        }
        for mark in self.markers.borrow().iter() {
            for proc in with_marker(mark) {
                sigkill(proc.pid);
            }
        }
        assert!(
            lingering.is_empty(),
            "supervisors still ran 10 s after the test: {lingering:?}; records: {:#?}",
            lingering
                .iter()
                .map(|id| self.record(id))
                .collect::<Vec<_>>()
        );
    }
}

/// Every path under `root` (folders end with `/`), with files' sizes and links' targets, so a
/// test can tell that nothing was written.
pub fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let mut seen = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let rel = path_str(path.strip_prefix(root).unwrap_or(&path));
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                seen.insert(format!("{rel}/"), String::new());
                todo.push(path);
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).map(|t| path_str(&t));
                seen.insert(rel, format!("-> {}", target.unwrap_or_default()));
            } else {
                seen.insert(rel, format!("{} bytes", meta.len()));
            }
        }
    }
    seen
}

/// The printable ASCII unit the tests' writers repeat: 89 bytes (a prime, so no rotation or
/// block boundary lines up with it), so a byte's offset decides its value.
pub fn unit() -> Vec<u8> {
    (0x21u8..0x21 + 89).collect()
}

/// Bytes `[from, from + len)` of what `lnk-test-write` writes with `unit`.
pub fn pattern(unit: &[u8], from: u64, len: usize) -> String {
    let n = unit.len() as u64;
    (0..len as u64)
        .map(|i| {
            let at = usize::try_from((from + i) % n).unwrap_or(0);
            char::from(unit[at])
        })
        .collect()
}
