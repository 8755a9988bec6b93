//! A run's output at the run's offsets, read as bytes: what `read` shows and what a waiting
//! `read` searches. How the bytes are read so that offsets never go stale is the contract's
//! (`lnk_common::output_file`); this says what went wrong as an agent reads it.

use lnk_common::Causes;
use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use lnk_common::output_file::{ReadError, read_at_offsets};

use crate::tool_call::answer::ToolAnswer as Answer;

pub use lnk_common::output_file::OutputBytes as Bytes;

/// Up to `limit` bytes of run `id`'s output from `offset` (without one, the last `limit`),
/// never at stale offsets; a refusal that says why when the run or its file cannot be read.
pub fn read_bytes(
    state: &StateDir,
    id: &RunId,
    offset: Option<u64>,
    limit: u64,
) -> Result<Bytes, Answer> {
    read_at_offsets(state, id, offset, limit).map_err(|err| {
        Answer::refusal(match err {
            ReadError::Record(e) => return record_refusal(id, &e),
            ReadError::FilesFolder(e) => {
                format!("the files folder cannot be opened: {}", Causes(&e))
            }
            ReadError::File(e) => {
                format!("run {id}'s output file cannot be read: {}", Causes(&e))
            }
            ReadError::Gone => format!(
                "run {id}'s output file {} is gone",
                lnk_common::layout::output_relative_path(id).display()
            ),
            ReadError::KeepsChanging => {
                format!("run {id}'s output file keeps changing under the reader; try again")
            }
        })
    })
}

/// The refusal for run `id` whose record cannot be loaded.
pub fn record_refusal(id: &RunId, err: &lnk_common::Error) -> Answer {
    Answer::refusal(if err.is_not_found() {
        format!("there is no run {id}; `list` shows the runs")
    } else {
        format!("run {id} cannot be read: {}", Causes(err))
    })
}
