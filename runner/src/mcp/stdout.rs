//! The one owner of stdout: every protocol message goes through it, whole, one per line.
//!
//! A message is written by the thread that sends it when nothing is queued and stdout can take
//! it at once (a line of at most [`AT_ONCE`] bytes, stdout writable): the answer of a call goes
//! out from the call's own thread, without waking another. Everything else is queued for the
//! writer thread, which writes in order and waits for a client that reads slowly. Either way a
//! line is written whole, under one lock, and never before a line queued ahead of it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, TryLockError};
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

/// The longest line a sender writes itself: at most this many bytes go into a pipe that has
/// room whole, in one write, without blocking (`PIPE_BUF`).
const AT_ONCE: usize = 4096;

/// A handle to send messages to stdout; clones share the one writer thread.
#[derive(Clone)]
pub struct Writer {
    tx: SyncSender<Message>,
    /// Set once the server shuts down, or once the client closed stdin and stopped reading:
    /// from then on a sender never waits, and what finds no room is dropped (no one will
    /// read it).
    closing: Arc<AtomicBool>,
    /// What the senders and the writer thread share.
    stdout: Arc<Stdout>,
}

/// stdout, as the senders and the writer thread share it.
#[derive(Default)]
struct Stdout {
    /// Lines queued for the writer thread and not yet written: a sender writes itself only
    /// when there are none, so that no line overtakes one queued before it.
    queued: AtomicUsize,
    /// Held while a line is written; whether stdout is closed (nothing more is written).
    broken: Mutex<bool>,
    /// Lines written to stdout so far: whether the client still reads.
    written: AtomicU64,
}

impl Writer {
    /// Starts the writer thread on stdout.
    pub fn start() -> std::io::Result<(Writer, JoinHandle<()>)> {
        let (tx, rx) = sync_channel(QUEUE);
        let stdout = Arc::new(Stdout::default());
        let shared = Arc::clone(&stdout);
        let handle = std::thread::Builder::new()
            .name("stdout".into())
            .spawn(move || write_loop(rx, &shared))?;
        let closing = Arc::new(AtomicBool::new(false));
        Ok((
            Writer {
                tx,
                closing,
                stdout,
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
        if self.stdout.write_now(&line) {
            return;
        }
        let mut message = Message::Line(line);
        // Since when the client's stdin has been closed with no line written, if it is.
        let mut stalled_since: Option<(Instant, u64)> = None;
        loop {
            match self.queue(message) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => return,
                Err(TrySendError::Full(back)) => {
                    if self.closing.load(Ordering::SeqCst) {
                        return;
                    }
                    if stdin_closed() {
                        let written = self.stdout.written.load(Ordering::SeqCst);
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
            if !self.stdout.write_now(&line) {
                let _ = self.queue(Message::Line(line));
            }
        }
    }

    /// Queues a line for the writer thread, counted as queued while it waits.
    fn queue(&self, message: Message) -> Result<(), TrySendError<Message>> {
        self.stdout.queued.fetch_add(1, Ordering::SeqCst);
        let queued = self.tx.try_send(message);
        if queued.is_err() {
            self.stdout.queued.fetch_sub(1, Ordering::SeqCst);
        }
        queued
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

impl Stdout {
    /// Writes `line` from the sender's thread when nothing is queued, no one else is writing,
    /// it is short and stdout can take it now; whether it did (or dropped it, stdout being
    /// closed).
    fn write_now(&self, line: &[u8]) -> bool {
        if line.len() > AT_ONCE || self.queued.load(Ordering::SeqCst) != 0 {
            return false;
        }
        let mut broken = match self.broken.try_lock() {
            Ok(broken) => broken,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return false,
        };
        // A line queued meanwhile goes first; so does a client that cannot take it now.
        if self.queued.load(Ordering::SeqCst) != 0 || !(*broken || stdout_writable()) {
            return false;
        }
        self.write(&mut broken, line);
        true
    }

    /// Writes `line` whole, under the lock whose guard is `broken`.
    fn write(&self, broken: &mut bool, line: &[u8]) {
        if !*broken && let Err(err) = write_all(line) {
            tracing::debug!(%err, "stdout is closed; nothing more is written");
            *broken = true;
        }
        self.written.fetch_add(1, Ordering::SeqCst);
    }
}

/// Whether stdout can take a short line now.
fn stdout_writable() -> bool {
    let stdout = rustix::stdio::stdout();
    let mut fds = [PollFd::new(&stdout, PollFlags::OUT)];
    let zero = Timespec::default();
    matches!(poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
        && fds[0].revents().contains(PollFlags::OUT)
}

/// Writes all of `bytes` to stdout.
fn write_all(mut bytes: &[u8]) -> std::io::Result<()> {
    let stdout = rustix::stdio::stdout();
    while !bytes.is_empty() {
        match rustix::io::write(stdout, bytes) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

fn write_loop(rx: Receiver<Message>, stdout: &Stdout) {
    for message in rx {
        match message {
            Message::Line(line) => {
                let mut broken = crate::sync::lock(&stdout.broken);
                stdout.write(&mut broken, &line);
                drop(broken);
                stdout.queued.fetch_sub(1, Ordering::SeqCst);
            }
            // Lines are written whole, unbuffered: everything queued before is out.
            Message::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}
