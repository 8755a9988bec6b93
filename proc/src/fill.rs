//! Reading a descriptor until a buffer is full: the fixed-size messages of the spares' control
//! socket, the stub's channel and the cache layers' answer.

use std::io;
use std::os::fd::AsFd;

use rustix::io::Errno;

/// Fills `buf` from `fd`, reading again after a signal; `false` when `fd` ended first.
pub(crate) fn fill(fd: impl AsFd, buf: &mut [u8]) -> io::Result<bool> {
    let mut at = 0;
    while at < buf.len() {
        match rustix::io::read(fd.as_fd(), &mut buf[at..]) {
            Ok(0) => return Ok(false),
            Ok(n) => at += n,
            Err(Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(true)
}
