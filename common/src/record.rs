//! The run record, `<state>/<id>.json`: everything a run needs, and everything a sweep needs to
//! clean up after it.
//!
//! The record is plain serde data. What `start` decided (the [`Launch`]) never changes; what
//! happened since (the [`Group`], the [`Status`], the [`Output`] counters, the [`Telling`]) is
//! updated by whoever holds the run's lock (see [`crate::lock`]), each time by writing the whole
//! record anew ([`crate::write`]). See the crate docs for the JSON, field by field.
//!
//! # Versions
//!
//! `version` is 1. A reader refuses any other version with [`Error::RecordVersion`], before
//! looking at anything else. Within version 1, a field may be added, at any level, only if old
//! readers can ignore it (they do: unknown fields are kept — top-level ones in
//! [`Record::unknown`], deeper ones in [`Record::nested_unknown`] — and written back where they
//! were, so an old writer does not drop them either; a `status`'s own unknown fields are kept
//! only while its state stays the same) and new readers can do without it
//! (`#[serde(default)]`). Any change of an existing field's meaning is version 2. The fixture
//! `tests/data/record-v1-newer.json` holds such fields at every level.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Op, RecordProblem};
use crate::id::{AgentId, RunId};
use crate::network::Network;
use crate::process_id::ProcessId;
use crate::status::Status;
use crate::time::UnixMs;
use crate::vars::Vars;

/// The record format version this build reads and writes.
pub const RECORD_VERSION: u32 = 1;

/// How long after its end a run that was not told is still retried (by each sweep).
pub const TELL_WINDOW: Duration = Duration::from_secs(10 * 60);

/// A run record (format version 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Always [`RECORD_VERSION`].
    pub version: u32,
    /// The run's id; the same as in the file's name.
    pub id: RunId,
    /// `/proc/sys/kernel/random/boot_id` when the run started: pids mean nothing on another boot.
    pub boot_id: String,
    /// When `start` wrote the record.
    pub started_at_ms: UnixMs,
    /// What to run, and the limits: fixed at start.
    pub launch: Launch,
    /// The run's process group, once the supervisor has started it (`null` until then).
    pub group: Option<Group>,
    /// The run's session and the sandbox's own group, once the supervisor has started the
    /// gate; absent in records of older gates, which became the sandbox by `exec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxGroup>,
    /// The run's supervisor, which a stop signals ([`crate::stop`]); written with `group`, once
    /// the supervisor can hear that signal. Absent until then, and in records of older
    /// supervisors, which watched their lock file instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supervisor: Option<Supervisor>,
    /// Why the run was lost, when Link Run knows: it could not start (the sandbox could not be
    /// executed, the gate could not set up), or its supervisor failed; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// What a sweep left running because nothing proved it the run's (its gate was gone, and
    /// after pid reuse the run's session and groups may be another program's), in words with
    /// the pids; absent when nothing was left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_running: Option<String>,
    /// Running, or how it ended.
    pub status: Status,
    /// What the run's programs did through its proxy ([`Launch::net_allow`]), written once
    /// the run ended; absent before, for a run without one, and in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    /// The output file's counters.
    pub output: Output,
    /// Whether the run's end has been told.
    pub telling: Telling,
    /// Top-level fields this build does not know (written by a newer one), kept so a rewrite
    /// keeps them.
    #[serde(flatten)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
    /// Fields this build does not know below the top level, found when the record was read and
    /// put back when it is written ([`crate::unknown`]).
    #[serde(skip)]
    pub nested_unknown: crate::unknown::NestedUnknowns,
}

/// What `start` decided; never changes afterwards.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launch {
    /// The files folder, canonical (absolute, no links).
    pub files: PathBuf,
    /// The sandbox command: what comes after `--` on `serve`'s command line.
    pub sandbox: Vec<String>,
    /// The program, as the agent named it and as it was resolved.
    pub program: Program,
    /// Variables passed through `/usr/bin/env` (`--var`); empty for none.
    pub vars: Vars,
    /// The limits in force.
    pub limits: Limits,
    /// The conversation (`_meta["link.local/thread"]`) to tell at the end.
    pub thread: String,
    /// The call's hops (`_meta["link.local/hops"]`); the message at the end carries `hops + 1`.
    pub hops: u32,
    /// Where and as whom to tell the end; `null` when `serve` had no way in (never told).
    pub tell_to: Option<TellTo>,
    /// How the run's stdin is set up ([`crate::stdin`]); absent for an empty stdin that ends
    /// at once, as in older records.
    #[serde(default, skip_serializing_if = "crate::stdin::Stdin::is_default")]
    pub stdin: crate::stdin::Stdin,
    /// The cache folders the run's sandbox gets a writable layer of its own over, which its
    /// gate makes before the sandbox starts (`--cache`, when serve could make the layers);
    /// absent for none, as in older records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caches: Vec<PathBuf>,
    /// The hosts the run's programs may reach through a proxy of Link Run's, held by its
    /// supervisor (`--net-allow`, each in the form it reads); absent without one, as in older
    /// records. A build that does not know it runs the run without the proxy: its sandbox's
    /// network stays cut, so the run reaches nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub net_allow: Vec<String>,
}

/// The program of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Program {
    /// The name the agent gave (a bare name from the `--program` list).
    pub name: String,
    /// The arguments the agent gave.
    pub args: Vec<String>,
    /// The working folder the agent gave, relative to the files folder (`.` by default).
    pub dir: String,
    /// The executable found for `name` in `--programs-path` (absolute).
    pub path: PathBuf,
    /// `dir` resolved: the absolute, canonical working folder, inside `files`.
    pub cwd: PathBuf,
}

/// A run's limits, as integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// `--background-timeout`: the group is killed this long after the start (milliseconds).
    pub timeout_ms: u64,
    /// `--background-output`: the output file's cap (bytes).
    pub output_cap_bytes: u64,
    /// `--background-keep`: how long an ended run is kept (milliseconds).
    pub keep_ms: u64,
}

/// Where and as whom to tell a run's end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TellTo {
    /// The way in: the bridge's Unix stream socket (`--way-in`).
    pub way_in: PathBuf,
    /// The agent the message is signed as (`--as`).
    pub agent: AgentId,
    /// The keyring folder holding `<agent>.key` (`--keyring`, or its default resolved at start).
    pub keyring: PathBuf,
}

/// The run's process group, as the supervisor recorded it before opening the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    /// The process group id (the gate process made itself the group's leader).
    pub pgid: ProcessId,
    /// The leader's pid: the gate, which stays the group's (and the session's) only member and
    /// forks the sandbox into a group of its own (older gates became the sandbox by `exec`).
    pub leader_pid: ProcessId,
    /// The leader's start time: `/proc/<pid>/stat` field 22, clock ticks after boot.
    pub leader_start_time: u64,
}

/// Where the run's processes are, beyond the gate's group: the session the gate leads (every
/// process of the run is in it unless it made a session of its own) and the process group the
/// gate made for the sandbox. A sweep that finds the gate gone signals only processes proven
/// the run's by these (see `lnk-link-supervise`'s `reclaim`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxGroup {
    /// The run's session id: the gate's pid (`group.leader_pid`), since the gate leads it.
    pub session: ProcessId,
    /// The sandbox process's own group (its pid); `null` until the gate reported it started.
    pub pgid: Option<ProcessId>,
    /// The run's output pipe (stdout and stderr of the gate and of everything it starts), by
    /// identity; absent in records of older supervisors. A process that holds it was given it
    /// by the run: with the gate gone, it is what proves a process the run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_pipe: Option<FileId>,
}

/// The run's supervisor process: its pid and start time, which together name it on this boot
/// however pids are reused (`lnk_proc::proc_info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Supervisor {
    /// Its pid.
    pub pid: ProcessId,
    /// Its start time: `/proc/<pid>/stat` field 22, clock ticks after boot.
    pub start_time: u64,
}

/// The output file's counters.
///
/// The file holds the bytes `[dropped_bytes, dropped_bytes + its length)` of everything the run
/// wrote. While the run writes, the live total is `dropped_bytes` + the file's length; the record
/// is rewritten at each rotation and at the end, when `written_bytes` is exact.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Output {
    /// Bytes the run wrote in all, dropped ones included (as of the record's last write).
    pub written_bytes: u64,
    /// Bytes cut from the file's start by rotations, in all.
    pub dropped_bytes: u64,
    /// The file that `dropped_bytes` is for; `null` before the file exists. A reader that opens a
    /// file with another identity reloads the record (a rotation happened since).
    pub file: Option<FileId>,
    /// Bytes the run wrote that could not be written to the output file (no room in the files
    /// folder), in all: counted in `written_bytes`, and in `dropped_bytes` once a new output
    /// file begins after them. Absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unwritten_bytes: u64,
    /// Why they could not be written, as the supervisor last saw it. Absent when none were, or
    /// in records of older supervisors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_room: Option<NoRoom>,
}

/// Why output could not be written: a folder had no room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoRoom {
    /// Which folder.
    pub folder: NoRoomIn,
    /// The system's error number (`ENOSPC`, `EDQUOT`).
    pub errno: i32,
}

/// The folder that had no room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoRoomIn {
    /// The files folder: the output file, or a rotation's copy of it.
    Files,
    /// The state folder: the record of a rotation.
    State,
    /// A folder a later version names.
    #[serde(other)]
    Other,
}

impl NoRoom {
    /// In words: `the files folder was full (No space left on device)`.
    pub fn describe(&self) -> String {
        let folder = match self.folder {
            NoRoomIn::Files => "the files folder",
            NoRoomIn::State => "the state folder",
            NoRoomIn::Other => "a folder",
        };
        let cause = std::io::Error::from_raw_os_error(self.errno).to_string();
        // "No space left on device (os error 28)": the number says nothing to a reader.
        let cause = cause.split(" (os error").next().unwrap_or(&cause);
        format!("{folder} was full ({cause})")
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A file's identity: device and inode numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FileId {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

/// Whether the end was told, and the tries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Telling {
    /// Set just before a try and cleared only when the way in could not be reached, so a run is
    /// told at most once by a successful try.
    pub told: bool,
    /// How many tries were made.
    pub attempts: u32,
    /// When the last try began.
    pub last_attempt_at_ms: Option<UnixMs>,
}

impl Record {
    /// A new record for a run about to start: running, no group, nothing written, untold.
    pub fn new(id: RunId, boot_id: String, started_at_ms: UnixMs, launch: Launch) -> Self {
        Record {
            version: RECORD_VERSION,
            id,
            boot_id,
            started_at_ms,
            launch,
            group: None,
            sandbox: None,
            supervisor: None,
            failure: None,
            left_running: None,
            status: Status::Running,
            network: None,
            output: Output::default(),
            telling: Telling::default(),
            unknown: serde_json::Map::new(),
            nested_unknown: crate::unknown::NestedUnknowns::default(),
        }
    }

    /// Parses and checks a record's bytes; `path` is for messages.
    ///
    /// The version is checked first, so a newer format is refused as such rather than as
    /// malformed.
    pub fn from_json(bytes: &[u8], path: &Path) -> Result<Self, Error> {
        #[derive(Deserialize)]
        struct VersionOnly {
            version: u32,
        }
        let parse_error = |source| Error::RecordParse {
            path: path.to_owned(),
            source,
        };
        let VersionOnly { version } = serde_json::from_slice(bytes).map_err(parse_error)?;
        if version != RECORD_VERSION {
            return Err(Error::RecordVersion {
                path: path.to_owned(),
                found: version,
                supported: RECORD_VERSION,
            });
        }
        let read: serde_json::Value = serde_json::from_slice(bytes).map_err(parse_error)?;
        let mut record: Record = serde_json::from_value(read.clone()).map_err(parse_error)?;
        let known = serde_json::to_value(&record).map_err(parse_error)?;
        record.nested_unknown = crate::unknown::NestedUnknowns::between(&read, &known);
        record.check(path)?;
        Ok(record)
    }

    /// The record as JSON (pretty, ending with a newline), after checking it.
    pub fn to_json(&self) -> Result<Vec<u8>, Error> {
        let path = Path::new(&self.id.to_string()).with_extension("json");
        self.check(&path)?;
        let serialize_error = |source| Error::RecordSerialize {
            id: self.id.clone(),
            source,
        };
        let mut bytes = if self.nested_unknown.is_empty() {
            serde_json::to_vec_pretty(self).map_err(serialize_error)?
        } else {
            let mut value = serde_json::to_value(self).map_err(serialize_error)?;
            self.nested_unknown.put_into(&mut value);
            serde_json::to_vec_pretty(&value).map_err(serialize_error)?
        };
        bytes.push(b'\n');
        Ok(bytes)
    }

    /// Whether a sweep should try to tell this run now: it ended, has a way in, is not told, and
    /// ended no more than [`TELL_WINDOW`] before `now`.
    pub fn tell_due(&self, now: UnixMs) -> bool {
        match self.status.ended_at() {
            Some(ended) => {
                self.launch.tell_to.is_some()
                    && !self.telling.told
                    && now.saturating_since(ended) <= TELL_WINDOW
            }
            None => false,
        }
    }

    /// Whether a sweep may remove this run: it ended more than its keep before `now`, and it
    /// was told, or has no one to tell, or is past the [`TELL_WINDOW`].
    pub fn removable(&self, now: UnixMs) -> bool {
        let Some(ended) = self.status.ended_at() else {
            return false;
        };
        let age = now.saturating_since(ended);
        let done_telling = self.telling.told || self.launch.tell_to.is_none() || age > TELL_WINDOW;
        age > self.launch.limits.keep() && done_telling
    }

    fn check(&self, path: &Path) -> Result<(), Error> {
        let invalid = |problem| Error::RecordInvalid {
            path: path.to_owned(),
            problem,
        };
        if self.version != RECORD_VERSION {
            return Err(Error::RecordVersion {
                path: path.to_owned(),
                found: self.version,
                supported: RECORD_VERSION,
            });
        }
        if self.boot_id.trim().is_empty() {
            return Err(invalid(RecordProblem::EmptyBootId));
        }
        // The gate makes the group and leads it: a record naming another group would have a
        // sweep signal processes that are not the run's.
        if let Some(group) = &self.group
            && group.pgid != group.leader_pid
        {
            return Err(invalid(RecordProblem::GroupNotLed {
                pgid: group.pgid.get(),
                leader: group.leader_pid.get(),
            }));
        }
        // The gate leads the run's session as it leads its group: a record naming another
        // session would have a sweep prove processes the run's that are not.
        if let Some(sandbox) = &self.sandbox {
            let leader = self.group.map(|g| g.leader_pid);
            if leader != Some(sandbox.session) {
                return Err(invalid(RecordProblem::SessionNotLed {
                    session: sandbox.session.get(),
                    leader: leader.map(ProcessId::get),
                }));
            }
        }
        if self.output.dropped_bytes > self.output.written_bytes {
            return Err(invalid(RecordProblem::DroppedOverWritten {
                dropped: self.output.dropped_bytes,
                written: self.output.written_bytes,
            }));
        }
        Ok(())
    }
}

impl Launch {
    /// The full command line the run executes (see [`crate::command_line`]):
    /// `<sandbox>... -- [/usr/bin/env NAME=VALUE...] <program path> <args>...`.
    pub fn argv(&self) -> Vec<std::ffi::OsString> {
        crate::command_line::sandboxed(
            &self.sandbox,
            self.vars.iter(),
            self.program.path.as_os_str(),
            &self.program.args,
        )
    }
}

impl Limits {
    /// The timeout as a `Duration`.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// The keep as a `Duration`.
    pub fn keep(&self) -> Duration {
        Duration::from_millis(self.keep_ms)
    }
}

impl FileId {
    /// The identity of an open file.
    pub fn of(file: &impl AsFd) -> Result<Self, Error> {
        let stat =
            rustix::fs::fstat(file.as_fd()).map_err(|e| Error::io(Op::Stat, "<open file>", e))?;
        Ok(Self::from_stat(&stat))
    }

    /// The identity of what `path` leads to (links followed), if anything is there.
    pub fn of_path(path: &Path) -> Option<Self> {
        rustix::fs::stat(path)
            .ok()
            .map(|stat| Self::from_stat(&stat))
    }

    /// The identity in a `stat` result.
    // st_dev and st_ino are u64 on some targets and narrower on others.
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    pub fn from_stat(stat: &rustix::fs::Stat) -> Self {
        FileId {
            dev: stat.st_dev as u64,
            ino: stat.st_ino as u64,
        }
    }
}

#[cfg(test)]
mod tests;
