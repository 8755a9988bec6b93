#![allow(clippy::print_stdout)]
//! A test helper that plays the hostile agent's program: each subcommand tries one attack from
//! inside the sandbox and prints one line per attempt, `held: <attack>: <why>` when it failed
//! or `BROKE: <attack>: <what it got>` when it succeeded. It always exits 0, so a test reads
//! its lines and fails on any `BROKE`.
//!
//! - `read-key <key file>`: read the agent's key, and list its folder.
//! - `read-env <marker>`: find the marker serve holds in its environment (this process's own,
//!   and every `/proc/<pid>/environ`).
//! - `connect <socket>...`: connect to each socket, then to every socket under `/run`,
//!   `/var/run` and `/tmp`.
//! - `flock <file>`: take `start.lock`'s lock.
//! - `remount`: remount `/` and `/usr` read-write.
//! - `umount <path>...`: unmount each (a `--tmpfs`, say).
//! - `write <name> <folder>...`: create `<folder>/<name>` (the test looks from outside).
//! - `setsid <marker> <secs>`: start `linger <marker> <secs>` in a new session (a double fork:
//!   the child it starts is reparented), and exit at once.
//! - `plant <path>...`, `unpin <folder>...`: change protected paths every way a program could
//!   (see `hostile/plant.rs`).
//! - `linger <marker> <secs>`: sleep.
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use rustix::fs::{FlockOperation, flock};
use rustix::mount::{MountFlags, UnmountFlags, mount_remount, unmount};
use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

/// Attacks on the protected paths of the files folder.
mod plant;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((what, rest)) = args.split_first() else {
        eprintln!("usage: lnk-test-hostile <attack> <args>...");
        return ExitCode::from(2);
    };
    match (what.as_str(), rest) {
        ("read-key", [key]) => read_key(Path::new(key)),
        ("read-env", [marker]) => read_env(marker),
        ("connect", sockets) => connect_all(sockets),
        ("flock", [file]) => take_lock(Path::new(file)),
        ("remount", []) => remount(),
        ("umount", paths) => paths.iter().for_each(|p| umount(Path::new(p))),
        ("write", [name, folders @ ..]) => folders
            .iter()
            .for_each(|folder| write(&Path::new(folder).join(name))),
        ("setsid", [marker, secs]) => return setsid_away(marker, secs),
        ("plant", paths) => plant::plant(paths),
        ("unpin", paths) => plant::unpin(paths),
        ("linger", [_marker, secs]) => {
            std::thread::sleep(Duration::from_secs(secs.parse().unwrap_or(60)));
        }
        _ => {
            eprintln!("lnk-test-hostile: unknown attack {args:?}");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}

fn held(attack: &str, why: impl std::fmt::Display) {
    println!("held: {attack}: {why}");
}

fn broke(attack: &str, what: impl std::fmt::Display) {
    println!("BROKE: {attack}: {what}");
}

fn read_key(key: &Path) {
    match std::fs::read(key) {
        Ok(bytes) => broke(
            "read the key",
            format!("{} bytes of {}", bytes.len(), key.display()),
        ),
        Err(err) => held("read the key", err),
    }
    let folder = key.parent().unwrap_or(key);
    match std::fs::read_dir(folder) {
        Ok(entries) => {
            let names: Vec<String> = entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            if names.is_empty() {
                held("list the keyring", "an empty folder stands in its place");
            } else {
                broke("list the keyring", names.join(", "));
            }
        }
        Err(err) => held("list the keyring", err),
    }
}

fn read_env(marker: &str) {
    if std::env::vars_os().any(|(_, v)| v.to_string_lossy().contains(marker)) {
        broke(
            "read serve's environment",
            "in this program's own environment",
        );
    }
    let mut read = 0;
    for entry in std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
    {
        let path = entry.path().join("environ");
        let Ok(mut file) = std::fs::File::open(&path) else {
            continue;
        };
        let mut bytes = Vec::new();
        if file.read_to_end(&mut bytes).is_err() {
            continue;
        }
        read += 1;
        if String::from_utf8_lossy(&bytes).contains(marker) {
            broke("read serve's environment", path.display());
        }
    }
    held(
        "read serve's environment",
        format!("not in the {read} environments readable"),
    );
}

fn connect(path: &Path) -> Result<(), String> {
    let addr = SocketAddrUnix::new(path).map_err(|e| e.to_string())?;
    for kind in [SocketType::STREAM, SocketType::DGRAM, SocketType::SEQPACKET] {
        let socket = rustix::net::socket_with(
            AddressFamily::UNIX,
            kind,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            None,
        )
        .map_err(|e| e.to_string())?;
        match rustix::net::connect(&socket, &addr) {
            Ok(()) | Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INPROGRESS) => {
                return Ok(());
            }
            Err(rustix::io::Errno::PROTOTYPE) => continue,
            Err(err) => return Err(err.to_string()),
        }
    }
    Err("not a stream or datagram socket".into())
}

fn connect_all(sockets: &[String]) {
    let mut found: Vec<PathBuf> = sockets.iter().map(PathBuf::from).collect();
    for root in ["/run", "/var/run", "/tmp"] {
        find_sockets(Path::new(root), 4, &mut found);
    }
    for socket in &found {
        match connect(socket) {
            Ok(()) => broke("connect to a socket", socket.display()),
            Err(err) => held(
                "connect to a socket",
                format!("{}: {err}", socket.display()),
            ),
        }
    }
    held("connect to a socket", format!("{} tried", found.len()));
}

fn find_sockets(folder: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(folder)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
    {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_socket() {
            found.push(entry.path());
        } else if kind.is_dir() && depth > 0 {
            find_sockets(&entry.path(), depth - 1, found);
        }
    }
}

fn take_lock(file: &Path) {
    match std::fs::File::open(file) {
        Ok(file) => match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => broke("flock start.lock", "holding it"),
            Err(err) => held("flock start.lock", err),
        },
        Err(err) => held("flock start.lock", format!("{}: {err}", file.display())),
    }
}

fn remount() {
    for target in ["/", "/usr"] {
        for flags in [MountFlags::empty(), MountFlags::BIND] {
            match mount_remount(target, flags, "") {
                Ok(()) => broke("remount read-write", format!("{target} ({flags:?})")),
                Err(err) => held("remount read-write", format!("{target}: {err}")),
            }
        }
    }
}

fn umount(path: &Path) {
    match unmount(path, UnmountFlags::DETACH) {
        Ok(()) => broke("unmount", path.display()),
        Err(err) => held("unmount", format!("{}: {err}", path.display())),
    }
}

fn write(path: &Path) {
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path);
    // Whether it landed outside is for the test to see: inside, a tmpfs may take it.
    match made {
        Ok(_) => println!("made: {}", path.display()),
        Err(err) => held(
            "write outside --files",
            format!("{}: {err}", path.display()),
        ),
    }
}

#[allow(unsafe_code)]
fn setsid_away(marker: &str, secs: &str) -> ExitCode {
    let Ok(me) = std::env::current_exe() else {
        return ExitCode::from(1);
    };
    let mut child = Command::new(me);
    child
        .args(["linger", marker, secs])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: the closure runs between fork and exec and makes one system call, setsid,
    // which is async-signal-safe; it allocates nothing and takes no lock.
    unsafe {
        child.pre_exec(|| rustix::process::setsid().map(drop).map_err(Into::into));
    }
    match child.spawn() {
        Ok(_) => {
            println!("made: a process in a session of its own");
            ExitCode::SUCCESS
        }
        Err(err) => {
            held("setsid away", err);
            ExitCode::SUCCESS
        }
    }
}
