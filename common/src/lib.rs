//! Link Run's on-disk contract between `lnk-link-run` and `lnk-link-supervise`.
//!
//! The two binaries never call each other's code; they meet only on disk, in the **state
//! folder** (`--state`) and in the output files under the **files folder** (`--files`). This
//! crate is that meeting place: the names, the record, how it is written, the locks, the ids, and
//! how files under the (agent-writable) files folder are opened. What follows is enough to
//! implement the format from scratch.
//!
//! # The state folder
//!
//! Outside the files folder (no sandbox can write it), on a **local** file system (`flock(2)`
//! over NFS may hang or not exclude at all), owned by the user Link Run runs as and writable by
//! no one else (made 0700). Every program refuses another folder, and a file in it that is not
//! the user's regular file is damaged, never believed (`trust.rs`).
//!
//! | name | what |
//! |---|---|
//! | `start.lock` | flock taken **shared** by each `start` while it takes a slot, creates the new run's lock and writes its record; **exclusive** by `stop`/`remove --state`, so no run starts meanwhile |
//! | `slots/<k>` | the cap: a run's supervisor holds an exclusive flock on one slot `k < --background` for its whole life ([`slot`]) |
//! | `<id>.json` | the run's record (below), replaced whole by rename, never edited in place |
//! | `<id>.lock` | exclusive flock held by the run's supervisor for its whole life; 4 KiB reserved in it (length 0) where the supervisor keeps the run's end when the record cannot be written ([`record_store::KeptEnd`]) |
//! | `<id>.stop` | present (a regular file of the user's): the run is asked to stop; holding `tasks/cancel\n`, the stop was its task's client's ([`cancel`]) and the run's task reads `cancelled` |
//! | `<id>.log` | the run's supervisor's log (its stderr), so that no pipe of the MCP host is held by a process that outlives `serve`; removed with the run. Logs past 1 MiB when opened start again empty; each reserves 64 KiB past its end so that a full disk can still be reported in it |
//! | `<id>.in` | an interactive run's stdin channel: a Unix socket (0600) on which its supervisor answers `write` ([`stdin`]); removed when the run ends, by its supervisor or by the sweep that records it lost |
//! | `sweep.log` | the log of the sweeps `serve` starts |
//! | `<id>.damaged` | a record a sweep could not read or trust, moved aside for a person; never read by the programs |
//! | `watches/<id>/<tag>.json`, `<tag>.done` | run `<id>`'s watches, each an MCP task of its own (`<id>-<tag>`): what it waits for, and how it ended ([`watch`]); removed with the run |
//! | `index/…` | the index: names (hard links of the run's lock) that say which runs may run, when each started, when each is due, which are untold ([`index`]) |
//! | `projects/<name>/` | a project's own state folder, laid out as this one: the runs of a `serve --files-from roots`, whose files folder is the client's ([`projects`]). A sweep, `stop --state` and `remove --state` of the folder cover each |
//! | `tmp/.tmp-<random>` | a temporary file: a record being written, a lock being created. Older than 60 s ([`layout::TEMP_GRACE`]): a crash's leftover, which a sweep removes. (Folders made before `tmp/` may hold `.tmp-<random>` at the top; a sweep of such a folder removes them too) |
//!
//! Other names are reported (by a sweep that reads the whole folder) and left alone. `<id>` is
//! a run id: 12 to 32 characters of `[a-z0-9]` (new ones: 20, random), checked before any path
//! is built from it ([`id`]).
//!
//! ## What each operation costs
//!
//! A `start` takes `start.lock` (shared), one slot (one try when starts follow each other:
//! [`slot`]), and writes the run's lock, its index names and its record: a few files, whatever
//! the folder keeps and however many runs are alive. A `list` page reads the newest minutes of
//! `index/start-times/` and, in each, its newest tenths of a second (or `index/running/` for
//! `state: running`) and the records it shows, however many runs started within a minute. A
//! sweep reads `index/running/` (trying each lock), `index/untold/`, and the `index/due/`
//! minutes up to now. Removing a run removes its files by name. Only a folder made
//! before the index, swept once, and `remove --state` read the whole folder; the look for
//! records no index names reads its top level (the supervisor's sweep: one asked for by a person
//! or a bridge every time, `serve`'s routine ones only when the folder changed and at most every
//! ten minutes, as `index/looked` says).
//!
//! # The output file
//!
//! `<files>/background/<id>.out` holds the run's stdout and stderr together. It holds the bytes
//! `[dropped_bytes, dropped_bytes + length)` of everything the run wrote. Past the cap
//! (`limits.output_cap_bytes`) the supervisor copies the newest half to
//! `background/.tmp-<id>-next`, rewrites the record with `output.dropped_bytes` increased by
//! the bytes cut and `output.file` naming the new file's device and inode, then puts the new file
//! in place of `<id>.out` (an exchange of the two names, then the old one unlinked; a plain
//! rename over it where the exchange is not supported). A reader that opens a file whose
//! identity is not `output.file` reloads the record (a rotation is under way or happened in
//! between) and opens the file again, so it
//! never reads at stale offsets; if the identities still differ after a few tries, the file is
//! not the run's (the agent replaced it) and the reader says so rather than guess offsets.
//! Inode numbers are reused, so a newer file may carry an older one's identity: after reading,
//! the reader loads the record once more, and only a record with the same `output.file` and
//! `dropped_bytes` (each rotation raises it) proves the bytes were read at the right offsets.
//! Every open under the
//! files folder goes through a folder handle with `O_NOFOLLOW` at each step and checks for a
//! regular file ([`safe_open`]).
//!
//! # The record, `<id>.json`
//!
//! UTF-8 JSON, one object ([`record::Record`]). Times are whole milliseconds since the Unix epoch
//! (UTC), named `*_ms`; durations are milliseconds, sizes bytes; all are non-negative integers.
//! Paths are strings (so they must be UTF-8). Readers must ignore fields they do not know, at
//! any level, and writers that rewrite a record must keep them where they were ([`unknown`]).
//!
//! ```json
//! {
//!   "version": 1,
//!   "id": "k3v9x2m7q8w4n5p6r1t0",
//!   "boot_id": "6b0c2a52-3f1e-4d8a-9c7b-5e4f3a2b1c0d",
//!   "started_at_ms": 1714564800000,
//!   "launch": {
//!     "files": "/home/ada/work",
//!     "sandbox": ["bwrap", "--die-with-parent", "--bind", "/home/ada/work", "/home/ada/work"],
//!     "program": {"name": "cargo", "args": ["test", "--quiet"], "dir": "crates/app",
//!                 "path": "/usr/bin/cargo", "cwd": "/home/ada/work/crates/app"},
//!     "vars": {"DISPLAY": ":0"},
//!     "limits": {"timeout_ms": 3600000, "output_cap_bytes": 1048576, "keep_ms": 86400000},
//!     "thread": "th-42",
//!     "hops": 1,
//!     "tell_to": {"way_in": "/run/user/1000/lnk/way-in.sock", "agent": "ada",
//!                 "keyring": "/home/ada/.config/lnk/keyring"}
//!   },
//!   "group": {"pgid": 41234, "leader_pid": 41234, "leader_start_time": 9876543},
//!   "status": {"state": "exited", "ended_at_ms": 1714564805250, "exit": {"code": 0}},
//!   "output": {"written_bytes": 3145728, "dropped_bytes": 2097152,
//!              "file": {"dev": 2049, "ino": 1311768}},
//!   "telling": {"told": true, "attempts": 1, "last_attempt_at_ms": 1714564805300}
//! }
//! ```
//!
//! | field | meaning |
//! |---|---|
//! | `version` | the format version, 1. A reader refuses any other before reading on |
//! | `id` | the run id; must equal the `<id>` of the file name |
//! | `boot_id` | `/proc/sys/kernel/random/boot_id` (trimmed) at the start; pids below mean something only on this boot |
//! | `started_at_ms` | when `start` wrote the record |
//! | `launch` | what `start` decided; **never changes** afterwards |
//! | `launch.files` | the files folder, canonical |
//! | `launch.sandbox` | the sandbox command (after `--` on `serve`'s command line) |
//! | `launch.program.name`, `.args`, `.dir` | the program, arguments and working folder as the agent gave them (`dir` relative to `files`, `.` by default) |
//! | `launch.program.path`, `.cwd` | the program's executable found in `--programs-path`, and `dir` resolved to an absolute folder inside `files` |
//! | `launch.vars` | variables passed as `/usr/bin/env NAME=VALUE…` (object, possibly empty) |
//! | `launch.limits` | `timeout_ms` (`--background-timeout`), `output_cap_bytes` (`--background-output`), `keep_ms` (`--background-keep`) |
//! | `launch.thread`, `.hops` | the conversation to tell (empty when the run was started without one, which only a `serve` without a way in allows), and the call's hops (the message carries `hops + 1`) |
//! | `launch.tell_to` | `{way_in, agent, keyring}`: the way-in socket, the agent id (`[A-Za-z0-9][A-Za-z0-9._-]{0,63}`) and the keyring folder; `null` without a way in (never told) |
//! | `launch.stdin` | absent for an empty stdin that ends at once (every record before it); else `{"input_bytes": N, "mode": M}`: `N` bytes of `start`'s `input` (absent for none), handed to the supervisor on its fd 3, never stored; `M` is `"ends"`, `"interactive"` (stdin stays open, `write` adds to it through `<id>.in`) or `{"tty": {"cols": C, "rows": R}}` (stdin, stdout and stderr a terminal of the run's own) ([`stdin`]) |
//! | `launch.caches` | absent for none (every record before it); else the cache folders (`--cache`) the run's sandbox gets a writable layer of its own over, which the gate makes before it starts the sandbox (what the run writes there never reaches the user's folder) |
//! | `launch.net_allow` | absent without a proxy (every record before it); else the `--net-allow` rules the run's programs may reach through a proxy its supervisor holds, each in the form `--net-allow` reads (`name`, `name:port`, `*.suffix`, `10.0.0.5`, `[::1]:8080`). A build that does not know the field runs the run without the proxy: the sandbox's network stays cut, and the run reaches nothing |
//! | `group` | `null` until the supervisor has started the run's process group; then `pgid`, `leader_pid` (the gate: the run's reaper, which forks the sandbox into a group of its own; in records of older gates, the gate that `exec`ed the sandbox) and `leader_start_time` (`/proc/<pid>/stat` field 22). Pids are always greater than 1, and `pgid` equals `leader_pid` (the gate leads the group it makes); a record saying otherwise is refused |
//! | `supervisor` | absent until the supervisor can hear a stop (and in records of older supervisors); then `{"pid": P, "start_time": T}`, the supervisor's pid and start time (`/proc/<pid>/stat` field 22), written with `group`. A stop signals that process (SIGURG) only once the process at `P` is proven to have started at `T` on this boot (`lnk_proc::run::wake`) |
//! | `sandbox` | absent in records of older gates; written with `group`: `{"session": S, "pgid": P, "output_pipe": {dev, ino}}`, where `S` is the run's session (the gate leads it too, so `S` equals `group.leader_pid`; a record saying otherwise is refused), `P` the sandbox process's own group, `null` until the gate reports the sandbox started, and `output_pipe` the identity of the pipe the run writes its output to (absent in records of older supervisors). A sweep signals only processes proven the run's: in session `S` (in any group), started no earlier than the gate, and either started before a moment at which the gate was seen alive or holding `output_pipe` (after pid reuse, `S` and `P` may be another program's) |
//! | `left_running` | absent unless a sweep left processes running that looked like the run's but that nothing proved its own; then what, in words, with their pids |
//! | `failure` | absent unless the run could not start; then why, in words (the sandbox could not be executed, with the system's reason), and the run is `lost` |
//! | `status` | `{"state": "running"}`, or `{"state": S, "ended_at_ms": T, "exit": E}` with `S` one of `exited` (ended by itself), `timed_out`, `stopped` (`<id>.stop`), `lost` (supervisor quit or died) and `E` one of `{"code": n}`, `{"signal": n}` or `null` (unknown; never for `exited`) |
//! | `network` | absent for a run without `launch.net_allow` (and in older records); else what its programs did through the proxy, written by the supervisor once the run ended: `{"connections": N, "bytes_in": N, "bytes_out": N, "refused": [{"host", "port", "count", "why"}]}` ([`network`]) |
//! | `output.written_bytes` | everything the run wrote, dropped bytes included, as of the record's last write (exact once ended; while running, `dropped_bytes` + the file's length is the live figure) |
//! | `output.dropped_bytes` | bytes cut from the file's start by rotations, in all; never more than `written_bytes` |
//! | `output.file` | `{dev, ino}` of the output file `dropped_bytes` is for; `null` before it exists |
//! | `output.unwritten_bytes` | absent unless some of the run's output could not be written (the files folder had no room); then how many bytes, in all. They count in `written_bytes`, and in `dropped_bytes` once the supervisor could begin a new output file after them (it begins with a line that says how many bytes were lost); until then they lie past the end of the file, which holds the bytes before them |
//! | `output.no_room` | absent unless `unwritten_bytes` is there (and absent in records of older supervisors); then why, as the supervisor last saw it: `{"folder": "files"|"state", "errno": N}`, the folder that had no room and the system's error (`ENOSPC`, `EDQUOT`); a later version may name another folder |
//! | `telling.told` | set just **before** a try to tell; cleared only if the way in could not be reached (no socket, refused, timed out); an error answer stays told. So a run is told at most once |
//! | `telling.attempts`, `.last_attempt_at_ms` | how many tries, and when the last began (`null`: none) |
//!
//! A sweep tells an ended, untold run that has `tell_to` while its end is at most ten minutes old
//! ([`record::TELL_WINDOW`], [`record::Record::tell_due`]), and removes a run once its end is
//! older than `keep_ms` and it is told, has no `tell_to`, or is past the ten minutes
//! ([`record::Record::removable`]).
//!
//! # Writing a record
//!
//! Only the holder of the run's lock writes its record. It writes the whole record to
//! `<state>/tmp/.tmp-<random>` (`O_CREAT|O_EXCL|O_CLOEXEC`, 0600), `fsync`s it, renames it over
//! `<id>.json` and `fsync`s the folder ([`mod@write`], [`record_store`]). Readers take no lock and never see a torn
//! record. The one record written without the two `fsync`s is the first, by `start`, so that
//! its answer does not wait for the disk: the supervisor stores the record durably before the
//! run begins.
//!
//! # The lock protocol
//!
//! The flock lives on `<id>.lock`, never on the record (a rename would put an unlocked inode
//! under the record's name). `start` creates the lock file under a temporary name, takes its
//! flock, and renames it to `<id>.lock` before the record exists — the rename keeps the locked
//! inode — then hands the locked file to the supervisor as its stdin. Anyone may test a lock
//! with a non-blocking flock on a new open of `<id>.lock`: held means the supervisor lives; free
//! means it is gone, and the tester now holds it. A descriptor of the lock leaked into another
//! process keeps a dead supervisor looking alive, so all descriptors are close-on-exec. Removing
//! a run removes its lock file last, while holding it. Details: [`lock`].
//!
//! # Stopping
//!
//! Creating `<id>.stop` (never through a link: [`stop::request`]) asks the run to stop; then
//! its supervisor, named in the record (`supervisor`) and proven by its pid and start time, is
//! sent SIGURG, which it reads from a signalfd in the `poll` it sleeps in (`lnk_proc::run::wake`,
//! process machinery and no part of this contract): no polling, and no inotify instance per
//! run. It stops the run (SIGTERM, then SIGKILL two seconds later) and records `stopped`.
//!
//! # The operations both sides perform
//!
//! Each with both of its ends in one module, tested against each other here: making a run's
//! files and removing them ([`run_files`]), replacing the output file and reading it at the
//! run's offsets ([`output_file`]), asking a stop and hearing it ([`stop`]), an interactive
//! run's stdin channel ([`stdin`]).
//!
//! # What this crate is not
//!
//! No `unsafe` (forbidden), no process started, no signal sent: the process machinery both
//! binaries use (the reaper, `/proc`, signal masks, waking a supervisor) is `lnk-proc`'s, which
//! uses this crate and which this crate never names.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod cancel;
pub mod causes;
pub mod command_line;
pub mod commands;
pub mod error;
pub mod id;
pub mod index;
pub mod keys;
pub mod layout;
pub mod lock;
pub mod logs;
pub mod network;
pub mod output_file;
pub mod process_id;
pub mod projects;
pub mod record;
pub mod record_store;
pub mod run_files;
pub mod safe_open;
mod shown;
pub mod slot;
pub mod status;
pub mod stdin;
pub mod stop;
pub mod summary;
pub mod time;
mod trust;
pub mod unknown;
pub mod vars;
pub mod watch;
pub mod write;

pub use causes::Causes;
pub use error::{Error, Result};
pub use id::{AgentId, RunId};
pub use layout::StateDir;
pub use lock::{LockGuard, LockState, StartLock};
pub use process_id::ProcessId;
pub use record::Record;
pub use status::{Exit, State, Status};
pub use summary::RunSummary;
pub use time::UnixMs;
