//! Background runs, on the runner's side: the `start`, `list`, `read`, `write`, `stop` and `watch`
//! tools, and each run and each watch as an MCP task (`tasks/get`, `tasks/cancel`, `tasks/update`).
//!
//! The runner never supervises: `start` writes the record and hands the run's locked lock
//! file to `lnk-link-supervise supervise`, and the other tools only read records and output
//! files (and ask for a stop by creating `<id>.stop`). Everything they share with the
//! supervisor is in `lnk-common`.

mod args;
mod detached;
mod grep;
mod lines;
mod list;
mod list_page;
mod orphans;
mod output;
mod read;
mod read_wait;
mod schema;
mod start;
mod stdin;
mod stop;
mod sweep_thread;
mod task;
mod task_fields;
mod task_result;
mod wait;
mod watch;
mod watch_asked;
mod watch_result;
mod watch_search;
mod watch_task;
mod watcher;
mod write;

pub use list::list;
pub use read::read;
pub use schema::definitions;
pub use start::{META_HOPS, META_THREAD, start};
pub use stop::stop;
pub use sweep_thread::start_sweeps;
pub use task::task_method;
pub use watch::watch;
pub use write::write;
