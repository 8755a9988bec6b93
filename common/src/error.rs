//! The errors of the on-disk contract.
//!
//! Every variant says what it was about — a path, a run id — and keeps the underlying cause as
//! its `#[source]`, so a binary adds its own context once and prints the whole chain. Messages are
//! lowercase fragments ("reading record /s/x.json"), meant to follow a caller's "while …: ".

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::id::{IdError, RunId};

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the contract's operations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A run id or an agent id that breaks the id rules, or no random one could be made.
    #[error(transparent)]
    Id(#[from] IdError),

    /// A process id that cannot name a process we may signal (0, 1 and negatives are special).
    #[error("invalid process id {pid}: must be greater than 1")]
    InvalidProcessId {
        /// The value found.
        pid: i64,
    },

    /// The system's random source failed.
    #[error("getting random bytes")]
    Random {
        /// The cause.
        #[source]
        source: getrandom::Error,
    },

    /// A system call on a path failed; the system's word for it ("No space left on device")
    /// is the source, which [`crate::Causes`] shows after the message.
    #[error("{op} {}", path.display())]
    Io {
        /// What was being done.
        op: Op,
        /// The path it was done to.
        path: PathBuf,
        /// The cause.
        #[source]
        cause: io::Error,
    },

    /// A rename failed.
    #[error("renaming {} to {}", from.display(), to.display())]
    Rename {
        /// The old name.
        from: PathBuf,
        /// The new name.
        to: PathBuf,
        /// The cause.
        #[source]
        cause: io::Error,
    },

    /// A record is not valid JSON of the expected shape.
    #[error("parsing record {}", path.display())]
    RecordParse {
        /// The record's path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },

    /// A record's `version` is one this build does not know.
    #[error(
        "record {} has format version {found}; this build reads and writes version {supported} only",
        path.display()
    )]
    RecordVersion {
        /// The record's path.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// The version this build knows.
        supported: u32,
    },

    /// A record parsed but says something impossible.
    #[error("record {} is inconsistent: {problem}", path.display())]
    RecordInvalid {
        /// The record's path.
        path: PathBuf,
        /// What is wrong.
        problem: RecordProblem,
    },

    /// A record could not be turned into JSON (for example a path that is not UTF-8).
    #[error("serializing the record of run {id}")]
    RecordSerialize {
        /// The run.
        id: RunId,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },

    /// A run's end could be neither stored nor kept in its lock file: the source is why it
    /// could not be stored; why it could not be kept is said in the message, as a second cause
    /// cannot be a source.
    #[error("storing the run's end, nor could it be kept in its lock file ({})", crate::Causes(&**kept))]
    EndNotKept {
        /// Why the record could not be stored.
        #[source]
        stored: Box<Error>,
        /// Why the end could not be kept.
        kept: Box<Error>,
    },

    /// A run with this id already has a lock file, so it cannot be created again.
    #[error("run {id} already exists ({} is present)", path.display())]
    RunExists {
        /// The run.
        id: RunId,
        /// The lock file found.
        path: PathBuf,
    },

    /// A descriptor offered as a run's lock is not that run's lock file.
    #[error("the descriptor offered is not the lock file {}", path.display())]
    NotTheLock {
        /// The lock file it should have been.
        path: PathBuf,
    },

    /// A lock that should have been ours is held through another open file description.
    #[error("lock {} is held by someone else", path.display())]
    LockHeldElsewhere {
        /// The lock file.
        path: PathBuf,
    },

    /// A lock stayed held for longer than the caller would wait.
    #[error("lock {} still held after {}", path.display(), humantime::format_duration(*waited))]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// How long we waited.
        waited: Duration,
    },

    /// A symbolic link where the contract allows none.
    #[error("refusing {}: it is a symbolic link", path.display())]
    Symlink {
        /// The path that is a link.
        path: PathBuf,
    },

    /// Something other than a regular file where one is required.
    #[error("refusing {}: it is a {kind}, not a regular file", path.display())]
    NotRegularFile {
        /// The path.
        path: PathBuf,
        /// What it is instead.
        kind: FileKind,
    },

    /// Something other than a folder where one is required.
    #[error("refusing {}: it is not a folder", path.display())]
    NotDirectory {
        /// The path.
        path: PathBuf,
    },

    /// A file or folder of the state folder that belongs to another user: it is not believed.
    #[error(
        "refusing {}: it belongs to uid {owner}, not to uid {user} (the user Link Run runs as); \
         another user could have planted it",
        path.display()
    )]
    Foreign {
        /// The path.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The user Link Run runs as (effective uid).
        user: u32,
    },

    /// A state folder that group or others may write.
    #[error(
        "refusing state folder {}: its mode {mode:04o} lets other users write it, so they could \
         plant records; chmod 700 it",
        path.display()
    )]
    OpenToOthers {
        /// The folder.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },

    /// A file we would write has other hard links, so writing it could change a file elsewhere.
    #[error("refusing {}: it has {links} hard links", path.display())]
    HardLinked {
        /// The path.
        path: PathBuf,
        /// Its link count.
        links: u64,
    },

    /// A name that must be a single plain component (no `/`, not `.` or `..`) is not.
    #[error("{name:?} is not a plain file name")]
    BadName {
        /// The name, cut to a readable length.
        name: String,
    },

    /// A `/proc` file did not have the expected shape.
    #[error("parsing {}: {problem}", path.display())]
    Proc {
        /// The `/proc` file.
        path: PathBuf,
        /// What was wrong.
        problem: &'static str,
    },
}

impl Error {
    /// Whether the root cause is "no such file or folder".
    pub fn is_not_found(&self) -> bool {
        match self {
            Error::Io { cause, .. } | Error::Rename { cause, .. } => {
                cause.kind() == io::ErrorKind::NotFound
            }
            _ => false,
        }
    }

    /// Whether it is a folder where a file was wanted (which a program in the files folder can
    /// put at any name there).
    pub fn is_folder(&self) -> bool {
        matches!(
            self,
            Error::NotRegularFile {
                kind: FileKind::Directory,
                ..
            }
        )
    }

    /// An I/O failure of `op` on `path`.
    pub fn io(op: Op, path: impl Into<PathBuf>, source: impl Into<io::Error>) -> Self {
        Error::Io {
            op,
            path: path.into(),
            cause: source.into(),
        }
    }
}

/// What is inconsistent in a record that parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordProblem {
    /// The `id` inside is not the id in the file name.
    #[error("it names run {found}, but its file is for run {expected}")]
    IdMismatch {
        /// The id from the file name.
        expected: RunId,
        /// The id inside the record.
        found: RunId,
    },
    /// More bytes dropped than written.
    #[error("dropped_bytes {dropped} exceeds written_bytes {written}")]
    DroppedOverWritten {
        /// `output.dropped_bytes`.
        dropped: u64,
        /// `output.written_bytes`.
        written: u64,
    },
    /// The boot id is empty.
    #[error("boot_id is empty")]
    EmptyBootId,
    /// The group's id is not its leader's pid (the gate leads the group it made).
    #[error("group.pgid {pgid} is not group.leader_pid {leader}")]
    GroupNotLed {
        /// `group.pgid`.
        pgid: i32,
        /// `group.leader_pid`.
        leader: i32,
    },
    /// The run's session is not its gate's (the gate leads the session it made), or there is
    /// no gate for it.
    #[error("sandbox.session {session} is not group.leader_pid {leader:?}")]
    SessionNotLed {
        /// `sandbox.session`.
        session: i32,
        /// `group.leader_pid`, if any.
        leader: Option<i32>,
    },
}

/// The operation an [`Error::Io`] was doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Op {
    /// Opening an existing file or folder.
    Open,
    /// Creating a file.
    Create,
    /// Creating a folder.
    MakeDir,
    /// Reading.
    Read,
    /// Writing.
    Write,
    /// `fsync`.
    Sync,
    /// Removing a name.
    Remove,
    /// `stat`/`fstat`.
    Stat,
    /// Taking or testing a flock.
    Lock,
    /// Listing a folder.
    List,
    /// Changing descriptor flags or duplicating a descriptor.
    Descriptor,
    /// Reserving space in a file (`fallocate`).
    Reserve,
    /// Signalling a process (the path names it: `/proc/<pid>`).
    Signal,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Open => "opening",
            Op::Create => "creating",
            Op::MakeDir => "creating folder",
            Op::Read => "reading",
            Op::Write => "writing",
            Op::Sync => "syncing",
            Op::Remove => "removing",
            Op::Stat => "inspecting",
            Op::Lock => "locking",
            Op::List => "listing",
            Op::Descriptor => "setting up the descriptor of",
            Op::Reserve => "reserving space in",
            Op::Signal => "signalling",
        })
    }
}

/// The kind of a file system object, for messages about the wrong kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileKind {
    /// A regular file.
    Regular,
    /// A folder.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A FIFO (named pipe).
    Fifo,
    /// A Unix socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// Something that refuses to be opened and could not be told apart.
    Special,
}

impl FileKind {
    pub(crate) fn from_file_type(t: rustix::fs::FileType) -> Self {
        use rustix::fs::FileType as T;
        match t {
            T::RegularFile => FileKind::Regular,
            T::Directory => FileKind::Directory,
            T::Symlink => FileKind::Symlink,
            T::Fifo => FileKind::Fifo,
            T::Socket => FileKind::Socket,
            T::CharacterDevice => FileKind::CharDevice,
            T::BlockDevice => FileKind::BlockDevice,
            _ => FileKind::Special,
        }
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::Regular => "regular file",
            FileKind::Directory => "folder",
            FileKind::Symlink => "symbolic link",
            FileKind::Fifo => "fifo",
            FileKind::Socket => "socket",
            FileKind::CharDevice => "character device",
            FileKind::BlockDevice => "block device",
            FileKind::Special => "special file",
        })
    }
}
