//! The run's output file: what comes through the pipe is appended to
//! `<files>/background/<id>.out`, which is kept under its cap by newest-half rotation.
//!
//! When the file passes the cap, its newest half is copied (in the kernel) to a new file
//! beside it; the record is rewritten with the bytes cut added to `dropped_bytes` and the new
//! file's identity; then the new file is renamed over the old name. A reader that opens a
//! file whose identity is not the record's reloads the record, so offsets never go stale.
//!
//! **No room.** When the files folder is full (or its quota is), the output that cannot be
//! written is dropped and counted (`written_bytes`, `unwritten_bytes`), the run goes on, and the
//! supervisor's log says so once. The record is stored with the counts within [`RETRY`] (so
//! `list` and `read` show them), and a new file is tried each time output comes and, while the
//! run is quiet, after [`RETRY`], then twice as long each time up to [`MAX_BACKOFF`]; once there
//! is room, a new output file begins (renamed over the old one, as a
//! rotation's is) with one line that says how many bytes could not be written, and everything
//! before it counts in `dropped_bytes`. So the file always holds the bytes
//! `[dropped_bytes, dropped_bytes + length)` of everything the run wrote, and `list`, `read`,
//! the record and the file agree. The same when a rotation cannot be made for want of room in
//! the files folder or the state folder (the record of the rotation cannot be stored).

use std::fs::File;
use std::io::{self, Write};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use lnk_common::output_file::{self, NextOutput, ReplaceError};
use lnk_common::record::{FileId, NoRoom, NoRoomIn, Record};
use lnk_common::safe_open::{BackgroundDir, FilesDir};
use lnk_common::write::Durability;
use rustix::io::Errno;

/// How soon the record is stored with the bytes counted while there is no room, and how soon a
/// quiet run first tries again.
pub const RETRY: Duration = Duration::from_millis(250);
/// The longest a quiet run's supervisor waits between tries to begin a new file.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// The output file being written, and its counters.
pub struct OutputFile {
    background: BackgroundDir,
    file: File,
    /// The file's length.
    len: u64,
    /// Its cap.
    cap: u64,
    /// Output dropped for want of room, since the last byte written.
    gap: Option<Gap>,
}

/// Output that could not be written since the folder ran out of room.
struct Gap {
    /// Which folder had no room, for the log and the line in the new file.
    why: &'static str,
    /// Bytes dropped in this gap.
    bytes: u64,
    /// When a new file was last tried (or the gap began).
    tried_at: Instant,
    /// Whether bytes were dropped since the record was last stored.
    unstored: bool,
    /// How long after `tried_at` a quiet run tries again.
    backoff: Duration,
}

/// Why a rotation was not made.
enum Rotation {
    /// No room in a folder (the files folder or the state folder).
    NoRoom(NoRoom),
    /// Anything else.
    Failed(anyhow::Error),
}

/// What the log and the new file's first line say of a folder with no room.
fn full(room: NoRoom) -> &'static str {
    match room.folder {
        NoRoomIn::Files => "the files folder is full",
        NoRoomIn::State => "the state folder is full",
        NoRoomIn::Other => "a folder is full",
    }
}

/// `err`'s errno, for a [`NoRoom`] (ENOSPC when it has none).
fn errno_of(err: &io::Error) -> i32 {
    err.raw_os_error().unwrap_or(Errno::NOSPC.raw_os_error())
}

/// Whether `err` means there is no room (no space, or the quota).
fn no_room(err: &io::Error) -> bool {
    err.raw_os_error().is_some_and(|code| {
        code == Errno::NOSPC.raw_os_error() || code == Errno::DQUOT.raw_os_error()
    })
}

/// Writes `bytes` to `file`: how many were written, and the error that stopped it, if any.
fn write_counting(file: &mut File, bytes: &[u8]) -> (usize, Option<io::Error>) {
    let mut done = 0;
    while done < bytes.len() {
        match file.write(&bytes[done..]) {
            Ok(0) => return (done, Some(io::ErrorKind::WriteZero.into())),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (done, Some(e)),
        }
    }
    (done, None)
}

impl OutputFile {
    /// Opens the run's output file for appending (creating it when `start` did not).
    pub fn open(background: BackgroundDir, record: &mut Record) -> Result<Self> {
        let id: &RunId = &record.id;
        let file = match background.open_output_for_append(id) {
            Ok(file) => file,
            Err(e) if e.is_not_found() => background.create_output(id)?,
            Err(e) => return Err(e.into()),
        };
        let len = file
            .metadata()
            .with_context(|| {
                format!(
                    "inspecting the output file in {}",
                    background.path().display()
                )
            })?
            .len();
        record.output.file = Some(FileId::of(&file)?);
        record.output.written_bytes = record.output.dropped_bytes + len;
        Ok(Self {
            background,
            file,
            len,
            cap: record.launch.limits.output_cap_bytes,
            gap: None,
        })
    }

    /// Appends `bytes`, rotating each time the file reaches its cap, so it never holds more
    /// than the cap. Bytes for which there is no room are dropped and counted (see the module
    /// docs); only another failure is an error.
    pub fn append(
        &mut self,
        mut bytes: &[u8],
        state: &StateDir,
        record: &mut Record,
    ) -> Result<()> {
        if self.gap.is_some() && !self.resume(state, record) {
            self.drop_bytes(bytes.len() as u64, record);
            return Ok(());
        }
        while !bytes.is_empty() {
            let room = usize::try_from(self.cap.saturating_sub(self.len)).unwrap_or(usize::MAX);
            let take = room.min(bytes.len());
            let (written, failed) = write_counting(&mut self.file, &bytes[..take]);
            self.len += written as u64;
            record.output.written_bytes += written as u64;
            bytes = &bytes[written..];
            match failed {
                None => {}
                Some(err) if no_room(&err) => {
                    let room = NoRoom {
                        folder: NoRoomIn::Files,
                        errno: errno_of(&err),
                    };
                    self.no_room(room, &err.to_string(), record);
                    self.drop_bytes(bytes.len() as u64, record);
                    return Ok(());
                }
                Some(err) => {
                    return Err(err).with_context(|| {
                        format!(
                            "writing the output file in {}",
                            self.background.path().display()
                        )
                    });
                }
            }
            if self.len >= self.cap {
                match self.rotate(state, record) {
                    Ok(()) => {}
                    Err(Rotation::NoRoom(room)) => {
                        self.no_room(room, "the output file could not be rotated", record);
                        self.drop_bytes(bytes.len() as u64, record);
                        return Ok(());
                    }
                    Err(Rotation::Failed(err)) => return Err(err),
                }
            }
        }
        Ok(())
    }

    /// At the run's end: output dropped for want of room gets its line in a new file if there
    /// is room now; else the record's `unwritten_bytes` is what says it.
    pub fn finish(&mut self, state: &StateDir, record: &mut Record) {
        if let Some(gap) = &self.gap {
            let (why, bytes) = (gap.why, gap.bytes);
            if !self.resume(state, record) {
                tracing::warn!(id = %record.id, "{why}: {bytes} bytes of output could not be written, and still cannot be said in the output file");
            }
        }
    }

    /// Begins a gap, saying why once (and in the record, which the next store carries).
    fn no_room(&mut self, room: NoRoom, cause: &str, record: &mut Record) {
        if self.gap.is_some() {
            return;
        }
        record.output.no_room = Some(room);
        let why = full(room);
        tracing::warn!(
            id = %record.id,
            "{why} ({cause}): the run's output from byte {} on is counted but not written, and \
             the run goes on; writing resumes, in a new output file, once there is room",
            record.output.written_bytes
        );
        self.gap = Some(Gap {
            why,
            bytes: 0,
            tried_at: Instant::now(),
            unstored: false,
            backoff: RETRY,
        });
    }

    /// Counts `n` bytes that could not be written (the record is stored with them by
    /// [`OutputFile::tick`]).
    fn drop_bytes(&mut self, n: u64, record: &mut Record) {
        let Some(gap) = &mut self.gap else {
            return;
        };
        gap.bytes += n;
        gap.unstored = true;
        record.output.written_bytes += n;
        record.output.unwritten_bytes += n;
    }

    /// When the supervisor should call [`OutputFile::tick`], while output is being dropped.
    pub fn due(&self) -> Option<Instant> {
        let gap = self.gap.as_ref()?;
        Some(gap.tried_at + if gap.unstored { RETRY } else { gap.backoff })
    }

    /// While output is being dropped: once [`OutputFile::due`], tries to begin a new file, and
    /// stores the record with the counts if that cannot be done yet.
    pub fn tick(&mut self, state: &StateDir, record: &mut Record) {
        if self.due().is_none_or(|at| Instant::now() < at) || self.resume(state, record) {
            return;
        }
        let Some(gap) = &mut self.gap else {
            return;
        };
        if gap.unstored {
            gap.unstored = false;
            if let Err(err) = record.store_with(state, Durability::Atomic) {
                tracing::debug!(id = %record.id, "storing the counts of unwritten output: {}", lnk_common::Causes(&err));
            }
        } else {
            gap.backoff = (gap.backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Tries to end a gap: a new output file that begins with a line saying how many bytes
    /// could not be written, renamed over the old one once the record names it, with
    /// everything before it counted as dropped. Whether it did. A try that finds no room costs
    /// a file made, a write refused and the file removed.
    fn resume(&mut self, state: &StateDir, record: &mut Record) -> bool {
        let Some(gap) = &mut self.gap else {
            return true;
        };
        gap.tried_at = Instant::now();
        let (why, bytes) = (gap.why, gap.bytes);
        let line =
            format!("lnk-link-supervise: {why}: {bytes} bytes of output could not be written\n");
        let Ok(mut next) = NextOutput::begin(&self.background, &record.id) else {
            return false;
        };
        match write_counting(next.file(), line.as_bytes()) {
            (n, None) if n == line.len() => {}
            _ => {
                next.abandon(&self.background, &record.id);
                return false;
            }
        }
        let before = record.output;
        record.output.written_bytes += line.len() as u64;
        let dropped = before.written_bytes;
        match next.install(state, &self.background, record, dropped) {
            Ok(file) => {
                self.file = file;
                self.len = line.len() as u64;
                self.gap = None;
                tracing::info!(id = %record.id, "there is room again: {bytes} bytes of output could not be written; a new output file begins");
                true
            }
            Err(err) => {
                if matches!(err, ReplaceError::Install(_)) {
                    tracing::warn!(id = %record.id, "beginning a new output file: {}", lnk_common::Causes(&err));
                    // The record named the new file: it names the old one again.
                    record.output = before;
                    let _ = record.store_with(state, Durability::Atomic);
                    let _ = self.background.remove_rotation_leftovers(&record.id);
                } else {
                    record.output = before;
                }
                false
            }
        }
    }

    /// Keeps the newest `keep` bytes in a new file in the run's `background/`, renamed over the
    /// old one.
    fn rotate_here(
        &self,
        state: &StateDir,
        record: &mut Record,
        keep: u64,
    ) -> Result<File, ReplaceError> {
        output_file::rotate(state, &self.background, record, &self.file, self.len, keep)
    }

    /// `background/` was removed under the run (an `rm -rf`, a `git clean -fdx`): it is made
    /// again, as a start makes it. Whether it was.
    fn make_folder_again(&mut self, record: &Record) -> bool {
        match FilesDir::open(&record.launch.files).and_then(|files| files.ensure_background_dir()) {
            Ok(background) => {
                tracing::warn!(
                    id = %record.id,
                    "`background/` was removed while the run wrote to it: made again"
                );
                self.background = background;
                true
            }
            Err(err) => {
                tracing::warn!(id = %record.id, %err, "making `background/` again");
                false
            }
        }
    }

    /// Keeps the newest half of the cap in a new file renamed over the old one.
    fn rotate(&mut self, state: &StateDir, record: &mut Record) -> Result<(), Rotation> {
        // A program may have cut the file short (`: > background/<id>.out`): what it cut is
        // gone, and the count follows the file, so the copy asks for no byte it no longer has.
        if let Ok(meta) = self.file.metadata() {
            self.len = self.len.min(meta.len());
        }
        let keep = (self.cap / 2).min(self.len);
        let mut rotated = self.rotate_here(state, record, keep);
        if matches!(&rotated, Err(ReplaceError::Make(err)) if err.is_not_found())
            && self.make_folder_again(record)
        {
            rotated = self.rotate_here(state, record, keep);
        }
        match rotated {
            Ok(file) => {
                self.file = file;
                self.len = keep;
                Ok(())
            }
            Err(err) if err.io_cause().is_some_and(no_room) => Err(Rotation::NoRoom(NoRoom {
                folder: if matches!(err, ReplaceError::Store(_)) {
                    NoRoomIn::State
                } else {
                    NoRoomIn::Files
                },
                errno: err.io_cause().map_or(Errno::NOSPC.raw_os_error(), errno_of),
            })),
            Err(err) => Err(Rotation::Failed(anyhow::Error::new(err).context(format!(
                "rotating the output file in {}",
                self.background.path().display()
            )))),
        }
    }
}
