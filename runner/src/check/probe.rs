//! The probe's side: `lnk-link-run sandbox-probe`, run inside the sandbox exactly as a call's
//! program would be, with nothing in its environment. It reads serve's [`Request`] from stdin,
//! tries each thing from inside, and prints one [`Answer`] line. It only tries and reports;
//! what counts as a leak is decided by serve, which can also look from outside.
//!
//! Everything it does is bounded (bytes read, processes and folder entries looked at), opens
//! nothing that could block (`O_NONBLOCK`, non-blocking connects), and follows no link while
//! searching for sockets.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rustix::io::Errno;
use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

use super::wire::{ANSWER_PREFIX, Answer, FileId, ProtectedTry, Reach, Request};

/// The largest request read from stdin.
const MAX_REQUEST: u64 = 1 << 20;
/// The most of one process's environment read.
const MAX_ENVIRON: u64 = 1 << 20;
/// The most processes whose environment is read.
const MAX_PROCESSES: usize = 4096;
/// The most folder entries the socket search looks at.
const MAX_ENTRIES: usize = 4096;
/// How deep below a [`Request::scan_deep`] folder the socket search goes.
const SCAN_DEPTH: usize = 3;
/// How many reachable sockets are named.
const NAMED_SOCKETS: usize = 5;

/// Runs the probe: request on stdin, answer on stdout. Exit 0 when it answered.
pub fn run() -> ExitCode {
    let mut input = Vec::new();
    if let Err(err) = std::io::stdin().take(MAX_REQUEST).read_to_end(&mut input) {
        return fail(&format!(
            "cannot read the request: {}",
            lnk_common::Causes(&err)
        ));
    }
    let request: Request = match serde_json::from_slice(&input) {
        Ok(request) => request,
        Err(err) => {
            return fail(&format!(
                "the request is not one: {}",
                lnk_common::Causes(&err)
            ));
        }
    };
    let answer = probe(&request);
    let line = match serde_json::to_string(&answer) {
        Ok(json) => format!("{ANSWER_PREFIX}{json}\n"),
        Err(err) => {
            return fail(&format!(
                "cannot write the answer: {}",
                lnk_common::Causes(&err)
            ));
        }
    };
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(line.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => fail(&format!(
            "cannot write the answer: {}",
            lnk_common::Causes(&err)
        )),
    }
}

fn fail(message: &str) -> ExitCode {
    // stderr is serve's to read: it quotes it when the probe gives no answer.
    let _ = writeln!(std::io::stderr(), "lnk-link-run sandbox-probe: {message}");
    ExitCode::from(crate::exit_code::PROBE_FAILED)
}

/// Tries everything the request asks.
pub fn probe(request: &Request) -> Answer {
    let (marker_found_in, environments_read) = find_marker(&request.marker);
    let mut sockets = Sockets::new(&request.scan_skip);
    for folder in &request.scan_deep {
        sockets.search(folder, SCAN_DEPTH);
    }
    for folder in &request.scan_shallow {
        sockets.search(folder, 0);
    }
    Answer {
        capabilities: rustix::thread::capabilities(None)
            .ok()
            .map(|sets| sets.effective.bits()),
        pid_namespace: std::fs::read_link("/proc/self/ns/pid")
            .ok()
            .map(|link| link.to_string_lossy().into_owned()),
        marker_found_in,
        environments_read,
        serve_environ_read: reads_serves_environ(request.serve_pid, request.serve_start),
        stat: request.stat.iter().map(|p| FileId::of_path(p)).collect(),
        read: request.read.iter().map(|p| reads_a_byte(p)).collect(),
        connect: request.connect.iter().map(|p| connect(p)).collect(),
        write: request
            .write
            .iter()
            .map(|folder| creates(&folder.join(&request.write_name)))
            .collect(),
        sockets: sockets.named,
        sockets_reachable: sockets.reachable,
        entries_searched: sockets.entries,
        net: request.net.as_ref().map(super::net_probe::probe),
        protected: request
            .protected
            .iter()
            .map(|attempt| try_protected(attempt, &request.write_name))
            .collect(),
    }
}

/// Tries to change a protected path: what it did, or `None` when it could not.
fn try_protected(attempt: &ProtectedTry, name: &str) -> Option<String> {
    match attempt {
        ProtectedTry::Write(path) => std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(
                (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32,
            )
            .open(path)
            .ok()
            .map(|_| "opened it for writing".to_owned()),
        ProtectedTry::CreateIn(folder) => {
            let made = !folder.exists() && std::fs::create_dir_all(folder).is_ok();
            creates(&folder.join(name)).then(|| {
                if made {
                    format!("made the folder and {name} in it")
                } else {
                    format!("made {name} in it")
                }
            })
        }
    }
}

/// Where the marker is: this process's own environment, and every `/proc/<pid>/environ` it can
/// read (bubblewrap's own process is pid 1 in its PID namespace). Returns the places and how
/// many environments were read.
fn find_marker(marker: &str) -> (Vec<String>, usize) {
    let mut found = Vec::new();
    let mut read = 1;
    if marker.is_empty() {
        return (found, 0);
    }
    if std::env::vars_os().any(|(_, value)| value.as_bytes() == marker.as_bytes()) {
        found.push("its own environment".to_owned());
    }
    let Ok(pids) = lnk_proc::proc_info::pids() else {
        return (found, read);
    };
    for pid in pids.take(MAX_PROCESSES) {
        let path = PathBuf::from(format!("/proc/{pid}/environ"));
        let Some(environ) = read_bounded(&path, MAX_ENVIRON) else {
            continue;
        };
        read += 1;
        let needle = marker.as_bytes();
        if environ.split(|b| *b == 0).any(|var| {
            var.iter()
                .position(|b| *b == b'=')
                .is_some_and(|eq| &var[eq + 1..] == needle)
        }) {
            found.push(path.display().to_string());
        }
    }
    (found, read)
}

/// Whether serve's own environment can be read: `/proc/<serve_pid>` is serve (same start
/// time, so not some process of the sandbox's own PID namespace that has the same number) and
/// its `environ` reads.
fn reads_serves_environ(pid: i32, start: Option<u64>) -> bool {
    let Some(start) = start else {
        return false;
    };
    let stat = read_bounded(Path::new(&format!("/proc/{pid}/stat")), 4096);
    let same = stat
        .as_deref()
        .and_then(|s| std::str::from_utf8(s).ok())
        .and_then(lnk_proc::proc_info::parse_start_time)
        == Some(start);
    same && read_bounded(Path::new(&format!("/proc/{pid}/environ")), MAX_ENVIRON).is_some()
}

/// The first `max` bytes of a file, opened without blocking; `None` when it cannot be read.
fn read_bounded(path: &Path, max: u64) -> Option<Vec<u8>> {
    let file = open_nonblocking(path).ok()?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
}

/// Whether a byte of `path` can be read (an empty file that opens counts as read: its name and
/// its emptiness are what there was to read).
fn reads_a_byte(path: &Path) -> bool {
    let Ok(mut file) = open_nonblocking(path) else {
        return false;
    };
    let mut byte = [0u8; 1];
    file.read(&mut byte).is_ok()
}

/// Whether a new file can be made at `path` (never following a link, never replacing one).
fn creates(path: &Path) -> bool {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
        .open(path)
        .is_ok()
}

/// Connects to the Unix socket at `path` without waiting: a stream socket first, a datagram
/// one when the socket is of that type.
pub fn connect(path: &Path) -> Reach {
    let Ok(addr) = SocketAddrUnix::new(path) else {
        return Reach::Unreachable;
    };
    match connect_as(&addr, SocketType::STREAM) {
        Err(Errno::PROTOTYPE) => match connect_as(&addr, SocketType::DGRAM) {
            Ok(()) => Reach::Connected,
            Err(Errno::CONNREFUSED) => Reach::Refused,
            Err(_) => Reach::Unreachable,
        },
        Ok(()) => Reach::Connected,
        // Listening, with a full backlog: reachable all the same.
        Err(Errno::AGAIN | Errno::INPROGRESS) => Reach::Connected,
        Err(Errno::CONNREFUSED) => Reach::Refused,
        Err(_) => Reach::Unreachable,
    }
}

fn connect_as(addr: &SocketAddrUnix, kind: SocketType) -> Result<(), Errno> {
    let socket = rustix::net::socket_with(
        AddressFamily::UNIX,
        kind,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )?;
    rustix::net::connect(&socket, addr)
}

/// The search for reachable Unix sockets.
struct Sockets {
    skip: Vec<PathBuf>,
    named: Vec<PathBuf>,
    reachable: usize,
    entries: usize,
}

impl Sockets {
    fn new(skip: &[PathBuf]) -> Self {
        Sockets {
            skip: skip.to_vec(),
            named: Vec::new(),
            reachable: 0,
            entries: 0,
        }
    }

    /// Looks at `folder`'s entries, and `depth` levels of folders below (links not followed).
    fn search(&mut self, folder: &Path, depth: usize) {
        if self.skip.iter().any(|skip| folder.starts_with(skip)) {
            return;
        }
        let Ok(entries) = std::fs::read_dir(folder) else {
            return;
        };
        for entry in entries.filter_map(Result::ok) {
            if self.entries >= MAX_ENTRIES {
                return;
            }
            self.entries += 1;
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if self.skip.iter().any(|skip| path.starts_with(skip)) {
                continue;
            }
            use std::os::unix::fs::FileTypeExt;
            if kind.is_socket() {
                if connect(&path) == Reach::Connected {
                    self.reachable += 1;
                    if self.named.len() < NAMED_SOCKETS && !self.named.contains(&path) {
                        self.named.push(path);
                    }
                }
            } else if kind.is_dir() && depth > 0 {
                self.search(&path, depth - 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_listening_socket_and_tells_a_dead_one_apart() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let live = dir.path().join("live.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&live)
            .unwrap_or_else(|e| panic!("binding {live:?}: {e}"));
        let dead = dir.path().join("dead.sock");
        drop(
            std::os::unix::net::UnixListener::bind(&dead)
                .unwrap_or_else(|e| panic!("binding {dead:?}: {e}")),
        );
        assert_eq!(connect(&live), Reach::Connected);
        assert_eq!(connect(&dead), Reach::Refused);
        assert_eq!(connect(&dir.path().join("none")), Reach::Unreachable);
        let mut search = Sockets::new(&[]);
        search.search(dir.path(), 0);
        assert_eq!(search.named, vec![live.clone()]);
        let mut skipping = Sockets::new(&[live]);
        skipping.search(dir.path(), 0);
        assert_eq!(skipping.reachable, 0);
    }

    #[test]
    fn finds_the_marker_in_its_own_environment_only_by_value() {
        let (found, read) = find_marker("no-process-holds-this-value-4f7c1e");
        assert!(found.is_empty(), "{found:?}");
        assert!(read >= 1);
    }

    #[test]
    fn creates_once_and_never_through_a_link() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("new");
        assert!(creates(&path));
        assert!(!creates(&path), "an existing file is not created again");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &link)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!creates(&link));
        assert!(!dir.path().join("elsewhere").exists());
    }
}
