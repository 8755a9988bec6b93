//! A foreground call's pipes: its stdout and stderr read into their head and tail, its input
//! written to its stdin, all non-blocking, serviced from the call's one `poll`.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::process::{ChildStderr, ChildStdin, ChildStdout};

use rustix::event::{PollFd, PollFlags, Timespec, poll};

use crate::call::capture::HeadTail;
use lnk_proc::reaper::Reaper;

/// Bytes read from a pipe at a time.
const READ_CHUNK: usize = 128 * 1024;
/// Reads from one pipe per wake-up at most.
const READS_PER_WAKE: usize = 16;
/// The pipe size asked for, so that a fast writer needs fewer wake-ups.
const PIPE_SIZE: usize = 1024 * 1024;

impl Running {
    /// Takes the call's pipes from its reaper, made non-blocking (and larger, where the system
    /// lets them be).
    pub fn open(
        input: Option<crate::call::input::Input>,
        output: u64,
        reaper: &mut Reaper,
    ) -> io::Result<Running> {
        let call = Running {
            stdout: reaper.child.stdout.take(),
            stderr: reaper.child.stderr.take(),
            stdin: reaper.child.stdin.take(),
            input,
            out: HeadTail::new(output),
            err: HeadTail::new(output),
            buf: vec![0; READ_CHUNK],
        };
        for pipe in [
            call.stdout.as_ref().map(|p| p.as_fd()),
            call.stderr.as_ref().map(|p| p.as_fd()),
        ]
        .into_iter()
        .flatten()
        {
            // A larger pipe only saves wake-ups; the default size works too.
            let _ = rustix::pipe::fcntl_setpipe_size(pipe, PIPE_SIZE);
            // Non-blocking, so a wake-up reads all that is there before polling again.
            rustix::io::ioctl_fionbio(pipe, true)?;
        }
        if let Some(stdin) = &call.stdin {
            rustix::io::ioctl_fionbio(stdin, true)?;
        }
        Ok(call)
    }
}

/// Which entry of the poll set is which pipe.
#[derive(Debug, Default)]
pub struct Slots {
    stdout: Option<usize>,
    stderr: Option<usize>,
    stdin: Option<usize>,
}

/// The pipes of a running call and what came through them.
pub struct Running {
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    stdin: Option<ChildStdin>,
    /// What is left to write to stdin; freed as it is written.
    input: Option<crate::call::input::Input>,
    pub out: HeadTail,
    pub err: HeadTail,
    buf: Vec<u8>,
}

impl Running {
    pub fn pipes_closed(&self) -> bool {
        self.stdout.is_none() && self.stderr.is_none()
    }

    pub fn poll_fds<'a>(&'a self, fds: &mut Vec<PollFd<'a>>) -> Slots {
        let mut slots = Slots::default();
        if let Some(pipe) = &self.stdout {
            fds.push(PollFd::new(pipe, PollFlags::IN));
            slots.stdout = Some(fds.len() - 1);
        }
        if let Some(pipe) = &self.stderr {
            fds.push(PollFd::new(pipe, PollFlags::IN));
            slots.stderr = Some(fds.len() - 1);
        }
        if let Some(pipe) = &self.stdin {
            fds.push(PollFd::new(pipe, PollFlags::OUT));
            slots.stdin = Some(fds.len() - 1);
        }
        slots
    }

    /// Reads what is ready and writes input where there is room.
    pub fn service(&mut self, slots: &Slots, ready: &[bool]) {
        let is_ready = |slot: Option<usize>| slot.is_some_and(|i| ready[i]);
        if is_ready(slots.stdout) {
            read_into(&mut self.stdout, &mut self.out, &mut self.buf);
        }
        if is_ready(slots.stderr) {
            read_into(&mut self.stderr, &mut self.err, &mut self.buf);
        }
        if is_ready(slots.stdin) {
            self.feed_input();
        }
        if self
            .input
            .as_ref()
            .is_none_or(crate::call::input::Input::is_done)
        {
            // All written (or the program stopped reading): close stdin so the program sees
            // the end, and free what is left.
            self.stdin = None;
            self.input = None;
        }
    }

    fn feed_input(&mut self) {
        let (Some(pipe), Some(input)) = (&mut self.stdin, &mut self.input) else {
            return;
        };
        match pipe.write(input.pending()) {
            Ok(n) => input.advance(n),
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            // The program closed its stdin (EPIPE) or the pipe failed: stop feeding it.
            Err(_) => self.stdin = None,
        }
    }

    /// Reads whatever is already in the pipes, without waiting for more.
    pub fn drain_available(&mut self) {
        for _ in 0..64 {
            let mut fds = Vec::with_capacity(2);
            let slots = self.poll_fds(&mut fds);
            if fds.is_empty() {
                return;
            }
            let zero = Timespec::default();
            if !matches!(poll(&mut fds, Some(&zero)), Ok(n) if n > 0) {
                return;
            }
            let ready: Vec<bool> = fds.iter().map(|fd| !fd.revents().is_empty()).collect();
            drop(fds);
            self.service(
                &Slots {
                    stdin: None,
                    ..slots
                },
                &ready,
            );
        }
    }
}

/// Reads what the pipe holds, a bounded number of chunks, so one fast stream cannot starve
/// the other or the deadline.
fn read_into<P: Read>(pipe: &mut Option<P>, kept: &mut HeadTail, buf: &mut [u8]) {
    for _ in 0..READS_PER_WAKE {
        let Some(reader) = pipe else { return };
        match reader.read(buf) {
            Ok(0) => *pipe = None,
            Ok(n) => kept.push(&buf[..n]),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return,
            Err(_) => *pipe = None,
        }
    }
}
