//! A test helper that writes many bytes fast: `lnk-test-write (<fd> <count> <hex unit>)...`
//! writes, for each triple in turn, `count` bytes to fd 1 (stdout) or 2 (stderr), made of the
//! bytes `hex unit` repeated (the last repetition cut short). Byte `i` of such a stream is
//! `unit[i % unit.len()]`, so a test can tell exactly which bytes it should see.
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() || !args.len().is_multiple_of(3) {
        eprintln!("usage: lnk-test-write (<1|2> <count> <hex unit>)...");
        return ExitCode::from(2);
    }
    for triple in args.chunks(3) {
        let [fd, count, unit] = triple else {
            return ExitCode::from(2);
        };
        let (Ok(count), Some(unit)) = (count.parse::<u64>(), hex(unit)) else {
            eprintln!("lnk-test-write: bad count {count:?} or unit {unit:?}");
            return ExitCode::from(2);
        };
        let written = match fd.as_str() {
            "1" => write_repeated(&mut std::io::stdout().lock(), count, &unit),
            "2" => write_repeated(&mut std::io::stderr().lock(), count, &unit),
            _ => {
                eprintln!("lnk-test-write: fd must be 1 or 2, not {fd:?}");
                return ExitCode::from(2);
            }
        };
        if let Err(err) = written {
            eprintln!("lnk-test-write: {err}");
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

/// Writes `count` bytes of `unit` repeated, in large blocks.
fn write_repeated(out: &mut impl Write, count: u64, unit: &[u8]) -> std::io::Result<()> {
    // A block that is a whole number of units, about 64 KiB, so every block starts a unit.
    let reps = (65536 / unit.len()).max(1);
    let block = unit.repeat(reps);
    let mut left = count;
    while left > 0 {
        let n = usize::try_from(left.min(block.len() as u64)).unwrap_or(block.len());
        out.write_all(&block[..n])?;
        left -= n as u64;
    }
    out.flush()
}

/// Decodes a non-empty hex string.
fn hex(text: &str) -> Option<Vec<u8>> {
    hex::decode(text).ok().filter(|bytes| !bytes.is_empty())
}
