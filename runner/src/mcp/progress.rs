//! Progress notifications for a call that asked for them (`_meta.progressToken`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp::protocol::Era;
use crate::mcp::stdout::Writer;

/// Where a call's progress goes: `notifications/progress` with the call's token.
pub struct ProgressSink {
    writer: Writer,
    token: Value,
    with_message: bool,
    last_sent: Option<u64>,
}

impl ProgressSink {
    /// A sink for the call whose token is `token`, in `era`.
    pub fn new(writer: Writer, token: Value, era: &Era) -> Self {
        Self {
            writer,
            token,
            with_message: era.has_progress_message(),
            last_sent: None,
        }
    }

    /// Reports the whole seconds elapsed and the bytes of output seen. `progress` must
    /// increase from one notification to the next, so a second already reported is skipped;
    /// and a notification never waits for room, so progress cannot hold up the call.
    pub fn report(&mut self, elapsed: Duration, bytes: u64) {
        let seconds = elapsed.as_secs();
        if self.last_sent.is_some_and(|last| seconds <= last) {
            return;
        }
        self.last_sent = Some(seconds);
        let mut params = json!({"progressToken": self.token, "progress": seconds});
        if self.with_message {
            params["message"] = json!(format!("{seconds} s, {bytes} bytes of output"));
        }
        self.writer.send_if_room(&json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": params,
        }));
    }
}
