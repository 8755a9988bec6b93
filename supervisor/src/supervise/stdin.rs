//! The run's stdin, on the supervisor's side ([`lnk_common::stdin`]).
//!
//! - `ends` without input: `/dev/null`, as for every run before (the gate's own choice).
//! - `ends` with input: the pipe `start` filled and closed is the program's stdin itself; the
//!   supervisor only hands it on.
//! - `interactive`: a pipe of 64 KiB whose write end the supervisor holds, the input written to
//!   it first, and a channel `<state>/<id>.in` on which `write` sends more. Writes never block:
//!   what the pipe does not take at once is refused.
//! - `tty`: a pseudo-terminal of the run's own ([`super::tty`]); its master is written to as
//!   the pipe is, and read as the run's output.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};

use anyhow::{Context, Result, bail};
use lnk_common::layout::StateDir;
use lnk_common::record::Record;
use lnk_common::stdin::{self, ChannelReply, ChannelRequest, Listener, Mode, WRITE_MAX};
use rustix::io::Errno;
use rustix::pipe::{PipeFlags, pipe_with};
use rustix::process::Signal;

/// What the supervisor holds of the run's stdin.
#[derive(Debug, Default)]
pub struct RunStdin {
    /// The program's end, for the gate (above fd 4); `None`: `/dev/null`.
    pub for_gate: Option<OwnedFd>,
    /// Where `write`'s text goes (non-blocking): the pipe's write end or the terminal's
    /// master; `None` once closed, or for a run that is not interactive.
    writer: Option<OwnedFd>,
    /// The channel `write` reaches, for an interactive run.
    listener: Option<Listener>,
    /// Whether `write` closed it (`eof`), as opposed to the program.
    eof_sent: bool,
}

/// Takes over fd 3, the run's input `start` handed over (`--input`): a pipe, close-on-exec
/// from now on.
pub fn take_input() -> Result<File> {
    use lnk_proc::spawn::inherited::{self, Kind, OnExec};
    const INPUT_FD: i32 = 3;
    let fd = inherited::take(INPUT_FD, Kind::Pipe, OnExec::Close)
        .context("taking over fd 3, the run's input: it was not handed over as it should be")?;
    Ok(File::from(fd))
}

impl RunStdin {
    /// Sets up the run's stdin as its record says, with `input` the pipe `start` handed over.
    /// The terminal, for a `tty` run, is `terminal`'s master (already made).
    pub fn set_up(
        state: &StateDir,
        record: &Record,
        input: Option<File>,
        terminal: Option<&super::tty::Terminal>,
    ) -> Result<RunStdin> {
        let stdin = record.launch.stdin;
        let (for_gate, writer) = match (stdin.mode, terminal) {
            (Mode::Ends, _) => {
                let for_gate = input
                    .map(|file| above_4(&OwnedFd::from(file)))
                    .transpose()?;
                return Ok(RunStdin {
                    for_gate,
                    ..RunStdin::default()
                });
            }
            (Mode::Interactive, _) => {
                let (read, write) =
                    pipe_with(PipeFlags::CLOEXEC).context("making the run's stdin pipe")?;
                // The pipe's default size is the most a `write` may send, so that what is taken
                // is never more than a pipe's worth ahead of the program.
                let _ = rustix::pipe::fcntl_setpipe_size(&write, WRITE_MAX);
                (above_4(&read)?, write)
            }
            (Mode::Tty(_), Some(terminal)) => {
                // The master's description is shared with the output's reader, which therefore
                // reads without blocking too (it reads only what `poll` said is there).
                let master = rustix::io::fcntl_dupfd_cloexec(&terminal.master, 5)
                    .context("sharing the terminal's master")?;
                (above_4(&terminal.slave)?, master)
            }
            (Mode::Tty(_), None) => bail!("a run on a terminal without its terminal"),
        };
        rustix::fs::fcntl_setfl(&writer, rustix::fs::OFlags::NONBLOCK)
            .context("making the run's stdin non-blocking")?;
        if let Some(mut input) = input {
            let mut text = Vec::new();
            (&mut input)
                .take(WRITE_MAX as u64 + 1)
                .read_to_end(&mut text)
                .context("reading the run's input")?;
            write_all_now(&writer, &text).context("writing the run's input to its stdin")?;
        }
        let listener = Listener::bind(state, &record.id)?;
        Ok(RunStdin {
            for_gate: Some(for_gate),
            writer: Some(writer),
            listener: Some(listener),
            eof_sent: false,
        })
    }

    /// The channel, to poll, for an interactive run.
    pub fn channel(&self) -> Option<impl AsFd + '_> {
        self.listener.as_ref().map(Listener::fd)
    }

    /// Answers every request waiting on the channel; `signal` is called for each Ctrl-C,
    /// Ctrl-\ or Ctrl-Z typed on the run's terminal, with the signal it stands for
    /// ([`Self::take`]).
    pub fn serve(&mut self, signal: &mut dyn FnMut(Signal)) {
        // A bound, so that a flood of requests cannot keep the run's output from being copied.
        for _ in 0..16 {
            let Some(listener) = &self.listener else {
                return;
            };
            match listener.next() {
                Ok(Some(request)) => {
                    let reply = self.take(&request, signal);
                    stdin::answer(&request.conn, &reply);
                }
                Ok(None) => return,
                Err(err) => {
                    tracing::warn!(
                        "accepting on the stdin channel: {}",
                        lnk_common::Causes(&err)
                    );
                    return;
                }
            }
        }
    }

    /// Writes a request's text to the program's stdin, as much as it takes at once. On a
    /// terminal whose signals are on (`ISIG`), each signal character (Ctrl-C, Ctrl-\ and
    /// Ctrl-Z, unless the program changed them) is not written but sent as `signal` (SIGINT,
    /// SIGQUIT, SIGTSTP), in its place in the text: the terminal would signal its foreground
    /// group, which under a sandbox that starts its program in a session of its own is the
    /// sandbox, not the program.
    fn take(&mut self, request: &ChannelRequest, signal: &mut dyn FnMut(Signal)) -> ChannelReply {
        if self.writer.is_none() {
            return if self.eof_sent {
                ChannelReply::Closed
            } else {
                ChannelReply::ProgramClosed
            };
        }
        let keys = self.writer.as_ref().map(signal_keys).unwrap_or_default();
        let of = |b: u8| keys.iter().find(|(key, _)| *key == b).map(|(_, sig)| *sig);
        let mut taken = 0;
        for part in request.text.split_inclusive(|b| of(*b).is_some()) {
            let (text, typed) = match part.split_last() {
                Some((last, text)) if of(*last).is_some() => (text, of(*last)),
                _ => (part, None),
            };
            match self.write_part(text) {
                ChannelReply::Taken { taken: n, .. } => taken += n,
                ChannelReply::Full { taken: n } => return ChannelReply::Full { taken: taken + n },
                other => return other,
            }
            if let Some(typed) = typed {
                signal(typed);
                taken += 1;
            }
        }
        if request.eof && !self.eof_sent {
            self.close();
        }
        ChannelReply::Taken {
            taken,
            closed: request.eof,
        }
    }

    /// Writes `text`, as much as the program's stdin takes at once.
    fn write_part(&mut self, text: &[u8]) -> ChannelReply {
        let Some(writer) = &self.writer else {
            return if self.eof_sent {
                ChannelReply::Closed
            } else {
                ChannelReply::ProgramClosed
            };
        };
        let mut taken = 0;
        while taken < text.len() {
            match rustix::io::write(writer, &text[taken..]) {
                Ok(n) => taken += n,
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => {
                    return ChannelReply::Full {
                        taken: taken as u64,
                    };
                }
                Err(Errno::PIPE | Errno::IO) => {
                    // EPIPE: nothing reads the pipe; EIO: the terminal's other side is closed.
                    self.writer = None;
                    return ChannelReply::ProgramClosed;
                }
                Err(err) => {
                    tracing::warn!("writing to the run's stdin: {}", lnk_common::Causes(&err));
                    return ChannelReply::Full {
                        taken: taken as u64,
                    };
                }
            }
        }
        ChannelReply::Taken {
            taken: taken as u64,
            closed: false,
        }
    }

    /// Ends the program's stdin: the pipe's write end is closed; on a terminal, end-of-file is
    /// typed (Ctrl-D at the start of a line) and the master stays, since it is the output too.
    fn close(&mut self) {
        self.eof_sent = true;
        if let Some(writer) = self.writer.take() {
            let is_tty = rustix::termios::isatty(&writer);
            if is_tty {
                let _ = rustix::io::write(&writer, b"\x04");
            }
        }
    }

    /// Once the run has ended: the channel goes (it is removed), and stdin is closed.
    pub fn end(&mut self) {
        self.listener = None;
        self.writer = None;
    }
}

/// The signal characters of the terminal `writer` is the master of, with the signal each
/// stands for, when its signals are on (`ISIG`): none for a pipe, or when the program turned
/// them off (raw mode); a character the program disabled is left out. Such characters are then
/// bytes like any other.
fn signal_keys(writer: &OwnedFd) -> Vec<(u8, Signal)> {
    use rustix::termios::{LocalModes, SpecialCodeIndex, tcgetattr};
    if !rustix::termios::isatty(writer) {
        return Vec::new();
    }
    // On a pseudo-terminal's master, the settings read are the terminal's (its slave's).
    let Ok(termios) = tcgetattr(writer) else {
        return Vec::new();
    };
    if !termios.local_modes.contains(LocalModes::ISIG) {
        return Vec::new();
    }
    [
        (SpecialCodeIndex::VINTR, Signal::INT),
        (SpecialCodeIndex::VQUIT, Signal::QUIT),
        (SpecialCodeIndex::VSUSP, Signal::TSTP),
    ]
    .into_iter()
    .map(|(index, signal)| (termios.special_codes[index], signal))
    .filter(|(key, _)| *key != 0)
    .collect()
}

/// `fd` again, above fd 4 (a gate's fds 3 and 4 are placed from the supervisor's), close-on-exec.
fn above_4(fd: &OwnedFd) -> Result<OwnedFd> {
    rustix::io::fcntl_dupfd_cloexec(fd, 5).context("placing the run's stdin")
}

/// Writes `text` whole without waiting (it is at most a pipe's worth, into an empty pipe).
fn write_all_now(writer: &OwnedFd, text: &[u8]) -> std::io::Result<()> {
    let mut rest = text;
    while !rest.is_empty() {
        match rustix::io::write(writer, rest) {
            Ok(n) => rest = &rest[n..],
            Err(Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}
