//! The run's output file: what comes through the pipe is appended to
//! `<files>/background/<id>.out`, which is kept under its cap by newest-half rotation.
//!
//! When the file passes the cap, its newest half is copied (in the kernel) to a new file
//! beside it; the record is rewritten with the bytes cut added to `dropped_bytes` and the new
//! file's identity; then the new file is renamed over the old name. A reader that opens a
//! file whose identity is not the record's reloads the record, so offsets never go stale.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;

use anyhow::{Context, Result};
use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use lnk_common::record::{FileId, Record};
use lnk_common::safe_open::BackgroundDir;
use lnk_common::write::Durability;

/// The output file being written, and its counters.
pub struct OutputFile {
    background: BackgroundDir,
    file: File,
    /// The file's length.
    len: u64,
    /// Its cap.
    cap: u64,
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
        })
    }

    /// Appends `bytes`, rotating each time the file reaches its cap, so it never holds more
    /// than the cap.
    pub fn append(
        &mut self,
        mut bytes: &[u8],
        state: &StateDir,
        record: &mut Record,
    ) -> Result<()> {
        while !bytes.is_empty() {
            let room = usize::try_from(self.cap.saturating_sub(self.len)).unwrap_or(usize::MAX);
            let take = room.min(bytes.len());
            self.file.write_all(&bytes[..take]).with_context(|| {
                format!(
                    "writing the output file in {}",
                    self.background.path().display()
                )
            })?;
            self.len += take as u64;
            record.output.written_bytes += take as u64;
            bytes = &bytes[take..];
            if self.len >= self.cap {
                self.rotate(state, record)?;
            }
        }
        Ok(())
    }

    /// Keeps the newest half of the cap in a new file renamed over the old one.
    fn rotate(&mut self, state: &StateDir, record: &mut Record) -> Result<()> {
        let keep = (self.cap / 2).min(self.len);
        let cut = self.len - keep;
        let temp = self.background.create_rotation_temp(&record.id)?;
        let temp_name = temp.name().to_owned();
        let copied = copy_range(&self.file, self.len - keep, &temp.file, keep);
        if let Err(source) = copied {
            let _ = self.background.remove_rotation_leftovers(&record.id);
            let path = self.background.path().join(temp_name);
            return Err(source)
                .with_context(|| format!("copying the newest half to {}", path.display()));
        }
        record.output.dropped_bytes += cut;
        record.output.file = Some(FileId::of(&temp.file)?);
        // Rotations are frequent under a fast writer; the record only has to be whole for
        // readers here, and the end is written durably.
        record.store_with(state, Durability::Atomic)?;
        self.file = self.background.install_rotation(temp, &record.id)?;
        self.len = keep;
        Ok(())
    }
}

/// Copies `len` bytes of `from` at `offset` to the end of `to`, in the kernel where it can.
fn copy_range(from: &File, offset: u64, to: &File, len: u64) -> std::io::Result<()> {
    let mut offset = offset;
    let mut left = len;
    while left > 0 {
        let chunk = usize::try_from(left).unwrap_or(usize::MAX).min(1 << 30);
        let mut at = offset;
        match rustix::fs::copy_file_range(from.as_fd(), Some(&mut at), to.as_fd(), None, chunk) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the output file is shorter than its count",
                ));
            }
            Ok(n) => {
                offset += n as u64;
                left -= n as u64;
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::XDEV | rustix::io::Errno::NOSYS | rustix::io::Errno::INVAL) => {
                return copy_range_by_hand(from, offset, to, left);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// [`copy_range`] through a buffer, for file systems without `copy_file_range`.
fn copy_range_by_hand(from: &File, offset: u64, mut to: &File, len: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 64 * 1024];
    let mut offset = offset;
    let mut left = len;
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = from.read_at(&mut buf[..want], offset)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        to.write_all(&buf[..n])?;
        offset += n as u64;
        left -= n as u64;
    }
    Ok(())
}
