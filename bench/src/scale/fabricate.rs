//! The kept runs of item 6, written as the state folder's format says (`lnk_common`'s docs):
//! a record, a lock file and the index's names (links of the lock) each.

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::{Value, json};

use super::HOUR_MS;

/// The index's layout a folder is made with: version 2 files each run by start time under
/// `start-times/`, in the tenth of a second of its minute; version 1, as older serves made it,
/// under `started/`, straight in the minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IndexVersion {
    V1,
    V2,
}

/// How the kept runs' starts lie in time.
#[derive(Debug, Clone, Copy)]
pub(super) enum Spread {
    /// Over the last hour, as a busy hour of starts would be.
    Hour,
    /// All within one minute (a burst).
    Minute,
}

pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0))
}

fn minute(ms: u64) -> String {
    format!("{:010}", ms / 60_000)
}

fn touch(path: &Path) -> Result<()> {
    std::fs::write(path, b"").with_context(|| format!("writing {}", path.display()))
}

/// Makes `state` an indexed state folder (0700, `index/version` of `version`).
pub(super) fn make_state(state: &Path, version: IndexVersion) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(state.join("index"))?;
    std::fs::set_permissions(state, std::fs::Permissions::from_mode(0o700))?;
    let text = match version {
        IndexVersion::V1 => "1\n",
        IndexVersion::V2 => "2\n",
    };
    std::fs::write(state.join("index/version"), text)?;
    Ok(())
}

/// The kept runs to write.
pub(super) struct Kept<'a> {
    /// The runs' folder.
    pub(super) state: &'a Path,
    /// Their output files' folder, when they have some.
    pub(super) files: Option<&'a Path>,
    /// A record of a real run, made each of them.
    pub(super) template: &'a Value,
    /// How many.
    pub(super) n: usize,
    /// Their ids: `<prefix><number>`.
    pub(super) prefix: &'a str,
    /// How long ago the newest ended.
    pub(super) ended_ago_ms: u64,
    /// How their starts lie in time.
    pub(super) spread: Spread,
    /// The index layout of their names.
    pub(super) version: IndexVersion,
}

/// Writes `kept.n` ended, told runs, each started 5 s before its end. The `list` cursor of
/// the run in the middle (start time and id).
pub(super) fn fabricate(kept: &Kept<'_>) -> Result<String> {
    let now = now_ms();
    let mut record = kept.template.clone();
    record["launch"]["limits"]["keep_ms"] = json!(HOUR_MS);
    record["launch"]["tell_to"] = Value::Null;
    record["output"]["file"] = Value::Null;
    let index = kept.state.join("index");
    let n = kept.n.max(1) as u64;
    let span = match kept.spread {
        Spread::Hour => HOUR_MS,
        // Within one minute's folder: a bit under a minute, from the start of one.
        Spread::Minute => 59_000,
    };
    let newest = now - kept.ended_ago_ms - 5000;
    let newest = match kept.spread {
        Spread::Hour => newest,
        Spread::Minute => newest - newest % 60_000 + 59_999,
    };
    let mut made_dirs = std::collections::HashSet::new();
    let mut middle = String::new();
    for i in 0..kept.n {
        let id = format!("{}{i:0width$}", kept.prefix, width = 20 - kept.prefix.len());
        let started = newest - (i as u64 * span / n);
        let ended = started + 5000;
        if i == kept.n / 2 {
            middle = format!("{started}-{id}");
        }
        record["id"] = json!(id);
        record["started_at_ms"] = json!(started);
        record["status"] = json!({"state": "exited", "ended_at_ms": ended, "exit": {"code": 0}});
        record["telling"] = json!({"told": true, "attempts": 1, "last_attempt_at_ms": ended});
        std::fs::write(
            kept.state.join(format!("{id}.json")),
            serde_json::to_vec(&record)?,
        )?;
        let lock = kept.state.join(format!("{id}.lock"));
        touch(&lock)?;
        // The index's names are hard links of the lock, as a start and a supervisor make them.
        let mut link = |to: std::path::PathBuf| {
            if let Some(parent) = to.parent()
                && made_dirs.insert(parent.to_owned())
            {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::hard_link(&lock, &to).with_context(|| format!("linking {}", to.display()))
        };
        let started_dir = match kept.version {
            IndexVersion::V1 => index.join("started").join(minute(started)),
            IndexVersion::V2 => index
                .join("start-times")
                .join(minute(started))
                .join(format!("{:03}", started % 60_000 / 100)),
        };
        link(started_dir.join(format!("{started:013}-{id}")))?;
        link(index.join("due").join(minute(ended + HOUR_MS)).join(&id))?;
        if let Some(files) = kept.files {
            std::fs::write(
                files.join("background").join(format!("{id}.out")),
                b"output\n",
            )?;
        }
    }
    Ok(middle)
}
