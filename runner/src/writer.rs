//! The one owner of stdout: every protocol message goes through it, whole, one per line.

use std::io::Write;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;

enum Message {
    Line(Vec<u8>),
    Flush(SyncSender<()>),
}

/// How many messages may wait for stdout. When the client does not read, senders wait here,
/// and the reader of stdin with them, so memory stays bounded (backpressure).
const QUEUE: usize = 64;

/// A handle to send messages to stdout; clones share the one writer thread.
#[derive(Clone)]
pub struct Writer {
    tx: SyncSender<Message>,
}

impl Writer {
    /// Starts the writer thread on stdout.
    pub fn start() -> std::io::Result<(Writer, JoinHandle<()>)> {
        let (tx, rx) = sync_channel(QUEUE);
        let handle = std::thread::Builder::new()
            .name("stdout".into())
            .spawn(move || write_loop(rx))?;
        Ok((Writer { tx }, handle))
    }

    /// Queues one message, waiting while [`QUEUE`] messages wait already. A message that
    /// cannot be serialized cannot happen for a `Value`; a closed writer means the client is
    /// gone, and the message has no one to read it.
    pub fn send(&self, message: &Value) {
        match serde_json::to_vec(message) {
            Ok(mut line) => {
                line.push(b'\n');
                let _ = self.tx.send(Message::Line(line));
            }
            Err(err) => tracing::error!(%err, "a message could not be serialized"),
        }
    }

    /// Queues one message only if there is room at once: for progress, which must never hold
    /// up the call it reports on (its deadline is kept by the same thread).
    pub fn send_if_room(&self, message: &Value) {
        if let Ok(mut line) = serde_json::to_vec(message) {
            line.push(b'\n');
            let _ = self.tx.try_send(Message::Line(line));
        }
    }

    /// Waits until everything queued before is written, at most `limit` (a client that does
    /// not read cannot hold shutdown up).
    pub fn flush(&self, limit: Duration) {
        let deadline = std::time::Instant::now() + limit;
        let (done_tx, done_rx) = sync_channel(1);
        let mut flush = Message::Flush(done_tx);
        loop {
            match self.tx.try_send(flush) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) if std::time::Instant::now() < deadline => {
                    flush = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return,
            }
        }
        let _ = done_rx.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()));
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
