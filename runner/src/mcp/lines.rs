//! Reading the protocol's lines from stdin, never holding more than a bound in memory.

use std::io::{self, BufRead};

/// The longest line read; a longer one is skipped without being held in memory.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// What one read gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A line (without its newline) is in the buffer.
    Whole,
    /// A line longer than the bound was skipped.
    TooLong,
    /// The input ended.
    End,
}

/// Reads the next line into `buf` (cleared first), up to `max` bytes.
pub fn read_line(reader: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> io::Result<Line> {
    buf.clear();
    let mut too_long = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if available.is_empty() {
            return Ok(match (too_long, buf.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::End,
                (false, false) => Line::Whole, // a last line without its newline
            });
        }
        let (chunk, found) = match available.iter().position(|b| *b == b'\n') {
            Some(at) => (&available[..at], Some(at)),
            None => (available, None),
        };
        if !too_long {
            if buf.len() + chunk.len() > max {
                too_long = true;
                buf.clear();
                buf.shrink_to(64 * 1024);
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        let used = found.map_or(chunk.len(), |at| at + 1);
        reader.consume(used);
        if found.is_some() {
            if too_long {
                return Ok(Line::TooLong);
            }
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(Line::Whole);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lines_and_skips_long_ones() {
        let input = b"one\r\ntwo-is-long\nthree";
        let mut reader = io::BufReader::with_capacity(4, &input[..]);
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut reader, &mut buf, 8).ok(), Some(Line::Whole));
        assert_eq!(buf, b"one");
        assert_eq!(
            read_line(&mut reader, &mut buf, 8).ok(),
            Some(Line::TooLong)
        );
        assert_eq!(read_line(&mut reader, &mut buf, 8).ok(), Some(Line::Whole));
        assert_eq!(buf, b"three");
        assert_eq!(read_line(&mut reader, &mut buf, 8).ok(), Some(Line::End));
    }
}
