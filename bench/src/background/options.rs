//! What `lnk-bench background` measures, and how often: its command line.

use std::path::PathBuf;

/// What to measure, and how often.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Timed `start` calls of `true`, one after another (item 1).
    #[arg(long, default_value_t = 200)]
    pub starts: usize,
    /// Timed runs of the stamp writer, from `start` to the program running (item 2).
    #[arg(long, default_value_t = 50)]
    pub to_running: usize,
    /// Bytes the flood writer writes in the background (item 3).
    #[arg(long, default_value_t = 1 << 30)]
    pub flood_bytes: u64,
    /// Background floods (item 3).
    #[arg(long, default_value_t = 3)]
    pub flood_runs: usize,
    /// Ended, told, young records in the swept state folder (item 4).
    #[arg(long, default_value_t = 10_000)]
    pub records: usize,
    /// Timed sweeps, and as many timed `list` calls, of that folder (item 4).
    #[arg(long, default_value_t = 5)]
    pub sweeps: usize,
    /// Timed `tasks/get` calls of a running and of an ended run, and timed `start`s with and
    /// without the Tasks extension, each (item 7, over the swept folder).
    #[arg(long, default_value_t = 200)]
    pub tasks: usize,
    /// Timed waiting `read`s, each for the `ready` a run prints (item 8).
    #[arg(long, default_value_t = 50)]
    pub waits: usize,
    /// `read`s left waiting at once on a run that writes nothing (item 8).
    #[arg(long, default_value_t = 50)]
    pub idle_reads: usize,
    /// How long they wait while serve's CPU is measured, in seconds (items 8 and 9).
    #[arg(long, default_value_t = 50)]
    pub idle_secs: u64,
    /// Timed watches (tasks), each for the `ready` a run prints (item 9, over the swept folder).
    #[arg(long, default_value_t = 50)]
    pub watches: usize,
    /// Watches left waiting at once on a run that writes nothing (item 9).
    #[arg(long, default_value_t = 50)]
    pub idle_watches: usize,
    /// Timed runs from their end to the stand-in way in holding the message (item 5).
    #[arg(long, default_value_t = 20)]
    pub tells: usize,
    /// Only item 6 (its figures alone, a run at a time).
    #[arg(long)]
    pub scale_only: bool,
    /// The scale of item 6: runs kept and running, runs expired at once.
    #[command(flatten)]
    pub scale: crate::scale::Options,
    /// Where the temporary folders go (state folders, files folder, keyring, way in); it
    /// should be a local disk like the one a real state folder lies on. Default: $TMPDIR.
    #[arg(long, value_name = "DIR")]
    pub tmp: Option<PathBuf>,
}
