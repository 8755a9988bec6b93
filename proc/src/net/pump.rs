//! Moving bytes from one socket to another without copying them through this process:
//! `splice(2)` from the socket into a pipe and from the pipe into the other socket, each
//! direction a [`Flow`], both driven by one thread in one `poll` ([`run`]) with the sandbox's
//! stop, the connection's idle limit and its deadline.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;
use rustix::net::{SendFlags, Shutdown};
use rustix::pipe::{PipeFlags, SpliceFlags};

use crate::poll::poll_until;

/// The pipe each direction asks for: fewer system calls and wake-ups than the default 64 KiB
/// (pages are lent to it by the socket, not copied; a pipe past the user's share of pipe
/// memory gets less, which still works).
const PIPE_SIZE: usize = 1024 * 1024;

/// One direction of a connection.
pub(super) struct Flow<'a> {
    from: BorrowedFd<'a>,
    to: BorrowedFd<'a>,
    read_end: OwnedFd,
    write_end: OwnedFd,
    capacity: usize,
    /// Bytes in the pipe.
    buffered: usize,
    /// The pipe took nothing though `from` had bytes: wait until some leave it.
    pipe_full: bool,
    /// Bytes to send before anything from `from` (a rewritten head, bytes read with a head).
    pending: Vec<u8>,
    sent: usize,
    /// Bytes of `from` still to move (`None`: until its end).
    limit: Option<u64>,
    eof: bool,
    /// Whether `to`'s sending side is shut once everything came through.
    shut_at_end: bool,
    shut: bool,
    count: &'a AtomicU64,
}

impl<'a> Flow<'a> {
    /// A direction from `from` to `to`: `pending` first, then `limit` bytes of `from` (all of
    /// it with `None`), counted into `count`.
    pub(super) fn new(
        from: BorrowedFd<'a>,
        to: BorrowedFd<'a>,
        pending: Vec<u8>,
        limit: Option<u64>,
        shut_at_end: bool,
        count: &'a AtomicU64,
    ) -> io::Result<Self> {
        let (read_end, write_end) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
        let capacity = rustix::pipe::fcntl_setpipe_size(&write_end, PIPE_SIZE)
            .or_else(|_| rustix::pipe::fcntl_getpipe_size(&write_end))?;
        Ok(Flow {
            from,
            to,
            read_end,
            write_end,
            capacity,
            buffered: 0,
            pipe_full: false,
            pending,
            sent: 0,
            limit,
            eof: false,
            shut_at_end,
            shut: false,
            count,
        })
    }

    fn reading(&self) -> bool {
        !self.eof
            && self.limit != Some(0)
            && self.sent == self.pending.len()
            && self.buffered < self.capacity
            && !self.pipe_full
    }

    fn writing(&self) -> bool {
        self.sent < self.pending.len() || self.buffered > 0
    }

    /// Whether everything this direction carries has come through.
    pub(super) fn finished(&self) -> bool {
        (self.eof || self.limit == Some(0)) && !self.writing()
    }

    /// Moves what can move now, without waiting; whether anything moved. `readable`: the
    /// last `poll` found `from` readable.
    fn step(&mut self, readable: bool) -> Result<bool, Errno> {
        let mut moved = false;
        loop {
            let mut progress = false;
            while self.sent < self.pending.len() {
                let flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
                match rustix::net::send(self.to, &self.pending[self.sent..], flags) {
                    Ok(n) => {
                        self.sent += n;
                        self.count.fetch_add(n as u64, Ordering::Relaxed);
                        progress = true;
                    }
                    Err(Errno::AGAIN) => break,
                    Err(Errno::INTR) => {}
                    Err(err) => return Err(err),
                }
            }
            if self.sent == self.pending.len() && !self.pending.is_empty() {
                self.pending = Vec::new();
                self.sent = 0;
            }
            if self.pending.is_empty() && self.buffered > 0 {
                match splice(self.read_end.as_fd(), self.to, self.buffered) {
                    Ok(n) if n > 0 => {
                        self.buffered -= n;
                        self.pipe_full = false;
                        self.count.fetch_add(n as u64, Ordering::Relaxed);
                        progress = true;
                    }
                    Ok(_) | Err(Errno::AGAIN) => {}
                    Err(err) => return Err(err),
                }
            }
            if self.reading() {
                let room = self.capacity - self.buffered;
                let len = self
                    .limit
                    .map_or(room, |left| room.min(usize::try_from(left).unwrap_or(room)));
                match splice(self.from, self.write_end.as_fd(), len) {
                    Ok(0) => {
                        self.eof = true;
                        progress = true;
                    }
                    Ok(n) => {
                        self.buffered += n;
                        self.limit = self.limit.map(|left| left - n as u64);
                        progress = true;
                    }
                    // Readable, yet nothing came: the pipe holds as much as it can.
                    Err(Errno::AGAIN) if readable && self.buffered > 0 => self.pipe_full = true,
                    Err(Errno::AGAIN) => {}
                    Err(err) => return Err(err),
                }
            }
            if !progress {
                break;
            }
            moved = true;
        }
        if self.finished() && self.shut_at_end && !self.shut {
            // The other side may have gone already; its end is seen when it is read.
            let _ = rustix::net::shutdown(self.to, Shutdown::Write);
            self.shut = true;
        }
        Ok(moved)
    }
}

fn splice(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> Result<usize, Errno> {
    loop {
        let flags = SpliceFlags::MOVE | SpliceFlags::NONBLOCK;
        match rustix::pipe::splice(from, None, to, None, len, flags) {
            Err(Errno::INTR) => {}
            other => return other,
        }
    }
}

/// How a connection's flows ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// Everything came through both ways.
    Done,
    /// The sandbox's proxy was stopped (its call or run ended).
    Stopped,
    /// Nothing moved for the idle limit.
    Idle,
    /// The connection's deadline passed.
    TimeUp,
    /// A socket failed (a reset, a peer gone).
    Failed(Errno),
}

/// Limits of one connection's life.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounds<'a> {
    /// Readable once the sandbox's proxy stops.
    pub(super) stop: BorrowedFd<'a>,
    /// When the connection ends at the latest.
    pub(super) deadline: Instant,
    /// How long nothing may move.
    pub(super) idle: Duration,
}

/// Drives `flows` until all are finished, or the bounds end them.
pub(super) fn run(flows: &mut [Flow<'_>], bounds: Bounds<'_>) -> End {
    let mut last = Instant::now();
    let mut readable = vec![false; flows.len()];
    loop {
        for (flow, readable) in flows.iter_mut().zip(&readable) {
            match flow.step(*readable) {
                Ok(true) => last = Instant::now(),
                Ok(false) => {}
                Err(err) => return End::Failed(err),
            }
        }
        if flows.iter().all(Flow::finished) {
            return End::Done;
        }
        let now = Instant::now();
        if now >= bounds.deadline {
            return End::TimeUp;
        }
        if now >= last + bounds.idle {
            return End::Idle;
        }
        let mut fds = Vec::with_capacity(2 * flows.len() + 1);
        let mut read_slots = vec![None; flows.len()];
        for (at, flow) in flows.iter().enumerate() {
            if flow.reading() {
                read_slots[at] = Some(fds.len());
                fds.push(PollFd::new(&flow.from, PollFlags::IN));
            }
            if flow.writing() {
                fds.push(PollFd::new(&flow.to, PollFlags::OUT));
            }
        }
        fds.push(PollFd::new(&bounds.stop, PollFlags::IN));
        let wake = bounds.deadline.min(last + bounds.idle);
        match poll_until(&mut fds, Some(wake)) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(err) => return End::Failed(err),
        }
        if fds.last().is_some_and(|stop| !stop.revents().is_empty()) {
            return End::Stopped;
        }
        for (readable, slot) in readable.iter_mut().zip(&read_slots) {
            *readable = slot.is_some_and(|at| !fds[at].revents().is_empty());
        }
    }
}
