//! The one owner of stdout: every protocol message goes through it, whole, one per line.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};

use serde_json::Value;

enum Message {
    Line(Vec<u8>),
    Flush(SyncSender<()>),
}

/// How many messages may wait for stdout. When the client does not read, senders wait here,
/// and the reader of stdin with them, so memory stays bounded (backpressure).
const QUEUE: usize = 64;
/// How often a sender waiting for room looks again, and at whether the client left.
const WAIT_STEP: Duration = Duration::from_millis(2);

/// How long a sender waits for room after the client closed stdin with no line written
/// meanwhile: a client that sent its last request may still read every answer (then lines
/// keep going out), but one that reads nothing more must not hold the server forever.
const STALL_AFTER_STDIN_CLOSED: Duration = Duration::from_secs(2);

/// A handle to send messages to stdout; clones share the one writer thread.
#[derive(Clone)]
pub struct Writer {
    tx: SyncSender<Message>,
    /// Set once the server shuts down, or once the client closed stdin and stopped reading:
    /// from then on a sender never waits, and what finds no room is dropped (no one will
    /// read it).
    closing: Arc<AtomicBool>,
    /// Lines written to stdout so far: whether the client still reads.
    written: Arc<AtomicU64>,
}

impl Writer {
    /// Starts the writer thread on stdout.
    pub fn start() -> std::io::Result<(Writer, JoinHandle<()>)> {
        let (tx, rx) = sync_channel(QUEUE);
        let written = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&written);
        let handle = std::thread::Builder::new()
            .name("stdout".into())
            .spawn(move || write_loop(rx, &counter))?;
        let closing = Arc::new(AtomicBool::new(false));
        Ok((
            Writer {
                tx,
                closing,
                written,
            },
            handle,
        ))
    }

    /// From now on, senders do not wait for room: shutdown has begun.
    pub fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }

    /// Queues one message, waiting while [`QUEUE`] messages wait already — unless the server
    /// is closing, or the client has closed stdin and reads no more: then the stdin reader,
    /// blocked here, must get back to see the end of its input. A client that closed stdin
    /// after its last request but still reads gets every answer. A message that cannot be
    /// serialized cannot happen for a `Value`; a closed writer means the client is gone.
    pub fn send(&self, message: &Value) {
        let mut line = match serde_json::to_vec(message) {
            Ok(line) => line,
            Err(err) => return tracing::error!(%err, "a message could not be serialized"),
        };
        line.push(b'\n');
        let mut message = Message::Line(line);
        // Since when the client's stdin has been closed with no line written, if it is.
        let mut stalled_since: Option<(Instant, u64)> = None;
        loop {
            match self.tx.try_send(message) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => return,
                Err(TrySendError::Full(back)) => {
                    if self.closing.load(Ordering::SeqCst) {
                        return;
                    }
                    if stdin_closed() {
                        let written = self.written.load(Ordering::SeqCst);
                        match stalled_since {
                            Some((since, before)) if before == written => {
                                if since.elapsed() >= STALL_AFTER_STDIN_CLOSED {
                                    self.close();
                                    return;
                                }
                            }
                            _ => stalled_since = Some((Instant::now(), written)),
                        }
                    }
                    message = back;
                    std::thread::sleep(WAIT_STEP);
                }
            }
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

/// Whether the client closed its end of stdin (a pipe reports it at once, unread data or not).
fn stdin_closed() -> bool {
    let stdin = rustix::stdio::stdin();
    let mut fds = [PollFd::new(&stdin, PollFlags::IN)];
    let zero = Timespec::default();
    matches!(poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
        && fds[0].revents().intersects(PollFlags::HUP | PollFlags::ERR)
}

fn write_loop(rx: Receiver<Message>, written: &AtomicU64) {
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
                written.fetch_add(1, Ordering::SeqCst);
            }
            Message::Line(_) => {}
            Message::Flush(done) => {
                let _ = out.flush();
                let _ = done.send(());
            }
        }
    }
}
