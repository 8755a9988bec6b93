//! A `tty` run's terminal: a pseudo-terminal of its own, made by the supervisor.
//!
//! The slave is the sandbox's stdin, stdout and stderr (handed to the gate, which makes it the
//! controlling terminal of the run's session and puts the sandbox's process group in its
//! foreground; Ctrl-C typed with `write` is passed on as SIGINT by the gate, see
//! [`super::stdin`]). The master stays with the
//! supervisor: it reads what the terminal shows (the run's output, echo included) and writes
//! what `write` types. The supervisor closes its slave once the gate has it, so that the
//! master reads end-of-file (EIO) when the run's last process lets go of the terminal.

use std::os::fd::OwnedFd;

use anyhow::{Context, Result};
use lnk_common::stdin::TermSize;
use rustix::pty::{OpenptFlags, grantpt, ioctl_tiocgptpeer, openpt, unlockpt};
use rustix::termios::{Winsize, tcsetwinsize};

/// The run's terminal.
#[derive(Debug)]
pub struct Terminal {
    /// The supervisor's side.
    pub master: OwnedFd,
    /// The run's side.
    pub slave: OwnedFd,
}

impl Terminal {
    /// A new pseudo-terminal of `size`, both sides close-on-exec and neither a controlling
    /// terminal of this process.
    pub fn open(size: TermSize) -> Result<Terminal> {
        let flags = OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC;
        let master = openpt(flags).context("opening a pseudo-terminal for the run")?;
        grantpt(&master).context("granting the run's pseudo-terminal")?;
        unlockpt(&master).context("unlocking the run's pseudo-terminal")?;
        // Through the master, not by its name in /dev/pts: nothing else can be opened here.
        let slave = ioctl_tiocgptpeer(&master, flags)
            .context("opening the run's side of its pseudo-terminal")?;
        let winsize = Winsize {
            ws_row: size.rows,
            ws_col: size.cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        tcsetwinsize(&slave, winsize).context("setting the run's terminal size")?;
        Ok(Terminal { master, slave })
    }
}
