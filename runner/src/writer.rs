//! The one owner of stdout: every protocol message goes through it, whole, one per line.

use std::io::Write;
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;

enum Message {
    Line(Vec<u8>),
    Flush(SyncSender<()>),
}

/// A handle to send messages to stdout; clones share the one writer thread.
#[derive(Clone)]
pub struct Writer {
    tx: Sender<Message>,
}

impl Writer {
    /// Starts the writer thread on stdout.
    pub fn start() -> std::io::Result<(Writer, JoinHandle<()>)> {
        let (tx, rx) = channel();
        let handle = std::thread::Builder::new()
            .name("stdout".into())
            .spawn(move || write_loop(rx))?;
        Ok((Writer { tx }, handle))
    }

    /// Queues one message. A message that cannot be serialized cannot happen for a `Value`;
    /// a closed writer means the client is gone, and the message has no one to read it.
    pub fn send(&self, message: &Value) {
        match serde_json::to_vec(message) {
            Ok(mut line) => {
                line.push(b'\n');
                let _ = self.tx.send(Message::Line(line));
            }
            Err(err) => tracing::error!(%err, "a message could not be serialized"),
        }
    }

    /// Waits until everything queued before is written, at most `limit`.
    pub fn flush(&self, limit: Duration) {
        let (done_tx, done_rx) = sync_channel(1);
        if self.tx.send(Message::Flush(done_tx)).is_ok() {
            let _ = done_rx.recv_timeout(limit);
        }
    }
}

fn write_loop(rx: Receiver<Message>) {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut broken = false;
    for message in rx {
        match message {
            Message::Line(line) if !broken => {
                if let Err(err) = out.write_all(&line).and_then(|()| out.flush()) {
                    tracing::debug!(%err, "stdout is closed; nothing more is written");
                    broken = true;
                }
            }
            Message::Line(_) => {}
            Message::Flush(done) => {
                let _ = out.flush();
                let _ = done.send(());
            }
        }
    }
}
