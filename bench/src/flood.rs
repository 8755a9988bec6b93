//! `lnk-bench-flood <bytes>`: writes `<bytes>` bytes of a fixed 64 KiB buffer to stdout as fast
//! as it can, with one `write` per buffer and no user-space buffering in between.
use std::io::Write;
use std::os::fd::AsFd;
use std::process::ExitCode;

/// The size of the buffer written again and again.
const CHUNK: usize = 64 * 1024;

fn main() -> ExitCode {
    let arg = std::env::args().nth(1);
    let Some(total) = arg.as_deref().and_then(|a| a.parse::<u64>().ok()) else {
        eprintln!("usage: lnk-bench-flood <bytes>");
        return ExitCode::from(2);
    };
    // Printable lines of 64 bytes, so that a head or tail of it reads as text.
    let mut buf = vec![0u8; CHUNK];
    for (i, b) in buf.iter_mut().enumerate() {
        *b = if i % 64 == 63 {
            b'\n'
        } else {
            b'a' + (i % 26) as u8
        };
    }
    let stdout = std::io::stdout();
    // Whatever the std handle buffered (nothing) goes first; then raw writes on its descriptor.
    let _ = stdout.lock().flush();
    let fd = stdout.as_fd();
    let mut left = total;
    while left > 0 {
        let want = usize::try_from(left).unwrap_or(CHUNK).min(CHUNK);
        match rustix::io::write(fd, &buf[..want]) {
            Ok(0) => {
                eprintln!("lnk-bench-flood: stdout took no bytes");
                return ExitCode::FAILURE;
            }
            Ok(n) => left -= n as u64,
            Err(rustix::io::Errno::INTR) => {}
            Err(err) => {
                eprintln!("lnk-bench-flood: writing stdout failed: {err}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
