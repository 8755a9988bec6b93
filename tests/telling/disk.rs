//! The tests' side of the state folder and of `lnk-link-supervise`: a test folder with a keyring
//! and a way-in path, a `serve` that tells through it, `sweep`/`stop`/`remove` run as the
//! bridge would run them (bounded, their stderr kept), records edited as the lock protocol
//! allows (only while the test holds the run's lock), and decoy processes for the pid-reuse
//! guard.
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::wayin::{AGENT, Answer, WayIn, keygen};
use lnk_tests::bins::link_supervise;
use lnk_tests::bins::procs;
use lnk_tests::procs::alive;
use lnk_tests::procs::wait_no_supervisor;
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, path_str};
use lnk_tests::serve::{ANSWER, Serve};
use lnk_tests::setup::ServeBuilder;
use lnk_tests::tools::start;

/// How long a `sweep`, `stop` or `remove` may take here (they wait at most 15 s for a lock).
pub const CLI: Duration = Duration::from_secs(60);

/// A test folder for telling: [`Bg`]'s folders, a keyring with [`AGENT`]'s key pair, and the
/// path where the way in listens (or not).
pub struct Tell {
    /// `files/`, `state/`, the markers, and the cleanup of runs.
    pub bg: Bg,
    /// The keyring (`--keyring`).
    pub keyring: PathBuf,
    /// The way in's socket path (`--way-in`); nothing listens there until a test says so.
    pub socket: PathBuf,
}

impl Tell {
    /// A new test folder with a key pair for [`AGENT`].
    pub fn new(sandbox: Sandbox) -> Tell {
        let bg = Bg::new(sandbox);
        let keyring = bg.setup.path("keyring");
        keygen(&keyring, AGENT);
        let socket = bg.setup.path("way-in.sock");
        Tell {
            bg,
            keyring,
            socket,
        }
    }

    /// A stand-in way in at [`Tell::socket`].
    pub fn way_in(&self, answer: Answer) -> WayIn {
        WayIn::start(&self.socket, &self.keyring, answer)
    }

    /// A `serve` with these background flags that tells [`Tell::socket`] as [`AGENT`].
    pub fn serve(&self, flags: &Flags) -> ServeBuilder<'_> {
        self.serve_with(flags, AGENT, &self.keyring)
    }

    /// A `serve` that tells as `agent`, signing with `keyring`.
    pub fn serve_with(&self, flags: &Flags, agent: &str, keyring: &Path) -> ServeBuilder<'_> {
        let socket = path_str(&self.socket);
        let keyring = path_str(keyring);
        self.bg
            .serve(flags)
            .flags(&["--way-in", &socket, "--as", agent, "--keyring", &keyring])
    }

    /// The `--state` folder.
    pub fn state(&self) -> &Path {
        &self.bg.state
    }

    /// Runs `lnk-link-supervise sweep <state>`, which must succeed; its stderr.
    pub fn sweep(&self) -> String {
        let out = supervise_cli(&["sweep", &path_str(self.state())], CLI);
        assert!(out.status.success(), "sweep failed: {}", out.stderr);
        out.stderr
    }

    /// Runs a sweep as `serve` starts them (`--routine`); its stderr.
    pub fn routine_sweep(&self) -> String {
        let out = supervise_cli(&["sweep", &path_str(self.state()), "--routine"], CLI);
        assert!(out.status.success(), "sweep failed: {}", out.stderr);
        out.stderr
    }

    /// Starts `sh -c <script>` through `serve` and waits until it has ended on disk
    /// ([`Tell::wait_done`]): its id and its record (a real ended run, to plant copies of).
    pub fn ended_run(&self, serve: &mut Serve, script: &str) -> (String, Value) {
        let id = start(serve, json!({"program": "sh", "args": ["-c", script]}));
        let record = self.wait_done(&id);
        (id, record)
    }

    /// Waits until the run `id` has ended on disk and its supervisor is gone (so its end was
    /// recorded and its one try to tell is over); returns the record.
    pub fn wait_done(&self, id: &str) -> Value {
        self.bg
            .wait_record(id, ANSWER, |r| r["status"]["state"] != "running");
        wait_no_supervisor(id, ANSWER);
        self.bg
            .record(id)
            .unwrap_or_else(|| panic!("the record of {id} is gone"))
    }

    /// Rewrites the record of `id` as the lock protocol allows: holding the run's lock (free
    /// only once its supervisor is gone), whole, through a temporary file renamed over it.
    ///
    /// The lock is taken by a `flock` process of its own, not by this test process: while a
    /// test holds a descriptor, any other test thread that forks copies it into its child
    /// until that child's exec, and a sweep started right after would find the lock held.
    pub fn edit_record(&self, id: &str, edit: impl FnOnce(&mut Value)) {
        let lock_path = self.state().join(format!("{id}.lock"));
        let mut record = self
            .bg
            .record(id)
            .unwrap_or_else(|| panic!("no record of {id}"));
        let before = record.clone();
        edit(&mut record);
        let mut temp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(self.state())
            .unwrap();
        temp.write_all(&serde_json::to_vec_pretty(&record).unwrap())
            .unwrap();
        temp.as_file().sync_all().unwrap();
        let temp = temp.into_temp_path().keep().unwrap();
        let status = std::process::Command::new("flock")
            .arg("--nonblock")
            .arg(&lock_path)
            .arg("mv")
            .arg("-T")
            .arg(&temp)
            .arg(self.bg.record_path(id))
            .status()
            .unwrap_or_else(|e| panic!("running flock: {e}"));
        assert!(
            status.success(),
            "the lock of {id} is held (a supervisor or a sweep), or the rename failed: the \
             test may not write ({status})"
        );
        self.refile(&before, &record);
    }

    /// Files an edited record in the state folder's index as `lnk_common::index` documents
    /// it (names only; a writer of a record must keep them): `running/<id>` while running,
    /// `due/<minute of end + keep>/<id>` once ended, `untold/<id>` while a tell is due, and
    /// its `started` name for its (new) start time, in its minute's tenth of a second.
    pub fn refile(&self, before: &Value, record: &Value) {
        let index = self.state().join("index");
        let id = record["id"].as_str().unwrap();
        let minute = |ms: u64| format!("{:010}", ms / 60_000);
        let touch = |path: PathBuf| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, b"").unwrap();
        };
        let started = |r: &Value| {
            let ms = r["started_at_ms"].as_u64().unwrap();
            index
                .join("start-times")
                .join(minute(ms))
                .join(format!("{:03}", ms % 60_000 / 100))
                .join(format!("{ms:013}-{id}"))
        };
        let _ = std::fs::remove_file(started(before));
        touch(started(record));
        let untold = index.join("untold").join(id);
        if record["status"]["state"] == "running" {
            touch(index.join("running").join(id));
            let _ = std::fs::remove_file(&untold);
            return;
        }
        let ended = record["status"]["ended_at_ms"].as_u64().unwrap();
        let keep = record["launch"]["limits"]["keep_ms"].as_u64().unwrap();
        touch(index.join("due").join(minute(ended + keep)).join(id));
        let tell_due = !record["launch"]["tell_to"].is_null()
            && record["telling"]["told"] == false
            && now_ms().saturating_sub(ended) <= 10 * 60_000;
        if tell_due {
            touch(untold);
        } else {
            let _ = std::fs::remove_file(&untold);
        }
        let _ = std::fs::remove_file(index.join("running").join(id));
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    u64::try_from(since.as_millis()).unwrap()
}

/// What a finished `lnk-link-supervise` said.
#[derive(Debug)]
pub struct CliOut {
    /// How it exited.
    pub status: ExitStatus,
    /// Its stderr (its logs).
    pub stderr: String,
}

/// A `lnk-link-supervise` started by a test, reading its stderr on a thread.
pub struct CliRun {
    child: Child,
    stderr: Option<JoinHandle<String>>,
    what: String,
}

/// Starts `lnk-link-supervise <args>` (logs at their default level).
pub fn spawn_cli(args: &[&str]) -> CliRun {
    let mut child = Command::new(link_supervise())
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("starting lnk-link-supervise: {err}"));
    let mut pipe = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = pipe.read_to_end(&mut text);
        String::from_utf8_lossy(&text).into_owned()
    });
    CliRun {
        child,
        stderr: Some(stderr),
        what: args.join(" "),
    }
}

impl CliRun {
    /// Waits for it to exit, polling until `within`; SIGKILLs it and fails after that.
    pub fn finish(mut self, within: Duration) -> CliOut {
        let deadline = Instant::now() + within;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "`lnk-link-supervise {}` did not end within {within:?}",
                    self.what
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let stderr = self.stderr.take().unwrap().join().unwrap();
        CliOut { status, stderr }
    }
}

impl Drop for CliRun {
    fn drop(&mut self) {
        if self.stderr.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs `lnk-link-supervise <args>` to its end, within `within`.
pub fn supervise_cli(args: &[&str], within: Duration) -> CliOut {
    spawn_cli(args).finish(within)
}

/// A process the test started in a process group of its own, carrying a marker: someone else's
/// process, as far as the runs are concerned. Killed and reaped when dropped.
pub struct Decoy {
    child: Child,
    /// Its pid (and its group's id).
    pub pid: i32,
    /// Its start time, `/proc/<pid>/stat` field 22.
    pub start_time: u64,
}

impl Decoy {
    /// Starts `lnk-test-procs linger <mark> 120` as the leader of a new group.
    pub fn start(mark: &str) -> Decoy {
        let child = Command::new(procs())
            .args(["linger", mark, "120"])
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|err| panic!("starting a decoy: {err}"));
        let pid = i32::try_from(child.id()).unwrap();
        let start_time = start_time(pid).unwrap_or_else(|| panic!("the decoy {pid} is gone"));
        Decoy {
            child,
            pid,
            start_time,
        }
    }

    /// Whether it still runs (not a zombie).
    pub fn alive(&self) -> bool {
        alive(self.pid)
    }
}

impl Drop for Decoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process's start time (`/proc/<pid>/stat` field 22), if it exists.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name start at field 3 (state); field 22 is the 20th of them.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// This machine's boot id.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .trim()
        .to_owned()
}

/// The names in a folder, sorted (none when it does not exist).
pub fn names(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Whether anything exists at `path` (a dangling link counts).
pub fn exists(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}
