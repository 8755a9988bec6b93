//! A run's output line by line, and what a line is matched against: what a watch waits for
//! and what `read`'s `grep` finds.
//!
//! A line is what lies between two newlines, without its newline and without a carriage return
//! just before it (a terminal's line end), at the run's offset of its first byte. The last bytes
//! of the output, not yet ended by a newline, are a line only once nothing more can come (the
//! run has ended) or, for `grep`, which looks at the output as it is now. A line longer than
//! [`LINE_MAX`] is looked at in pieces of that size, so that a program that never writes a
//! newline cannot make a reader hold or search its whole output at once.
//!
//! A pattern is a plain text (found anywhere in a line) or a regular expression of the `regex`
//! crate, which matches in time linear in the line's length whatever the pattern (no
//! backtracking), and whose compiled size is bounded ([`REGEX_SIZE`]): an agent's pattern
//! cannot make serve spin or grow.

use std::ops::ControlFlow;

/// The longest pattern, in bytes.
pub const PATTERN_BYTES: usize = 1024;
/// The longest line looked at whole.
pub const LINE_MAX: usize = 64 * 1024;
/// The most memory a compiled regular expression may take (the `regex` crate's size limit).
const REGEX_SIZE: usize = 1 << 20;
/// The most memory its lazy DFA may take while it matches.
const DFA_SIZE: usize = 2 << 20;

/// What a line is matched against.
#[derive(Debug, Clone)]
pub struct Matcher {
    regex: regex::bytes::Regex,
    pattern: String,
    is_regex: bool,
}

impl Matcher {
    /// A plain text, or with `is_regex` a regular expression; a refusal that says what is wrong
    /// with it (`what` names the argument).
    pub fn new(pattern: &str, is_regex: bool, what: &str) -> Result<Matcher, String> {
        if pattern.is_empty() || pattern.len() > PATTERN_BYTES {
            return Err(format!(
                "`{what}` must be a text of 1 to {PATTERN_BYTES} bytes"
            ));
        }
        if pattern.contains('\n') {
            return Err(format!(
                "`{what}` holds a newline, but the output is matched one line at a time"
            ));
        }
        let source = if is_regex {
            pattern.to_owned()
        } else {
            regex::escape(pattern)
        };
        let regex = regex::bytes::RegexBuilder::new(&source)
            .size_limit(REGEX_SIZE)
            .dfa_size_limit(DFA_SIZE)
            .build()
            .map_err(|err| match err {
                regex::Error::CompiledTooBig(_) => format!(
                    "`{what}` is too large a regular expression once compiled (at most {} KiB): \
                     make it simpler",
                    REGEX_SIZE / 1024
                ),
                err => format!(
                    "`{what}` is not a regular expression of the `regex` crate's syntax: {}",
                    crate::text::escaping::one_line(&err.to_string())
                ),
            })?;
        Ok(Matcher {
            regex,
            pattern: pattern.to_owned(),
            is_regex,
        })
    }

    /// The pattern as given.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Whether it is a regular expression (else a plain text).
    pub fn is_regex(&self) -> bool {
        self.is_regex
    }

    /// Whether `line` matches.
    pub fn is_match(&self, line: &[u8]) -> bool {
        self.regex.is_match(line)
    }
}

/// A line of the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// The run's offset of its first byte.
    pub offset: u64,
    /// Its bytes, without its newline (nor a carriage return before it).
    pub bytes: &'a [u8],
    /// The run's offset just past it, its newline included.
    pub end: u64,
}

/// What [`for_each_line`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scanned {
    /// How many bytes it went through: the next look starts at the offset after them (the
    /// start of a line not ended yet, or past the line it stopped at).
    pub used: usize,
    /// Whether `each` asked to stop.
    pub stopped: bool,
}

/// Calls `each` for every line of `bytes`, read from the run's offset `from`, in order, until
/// it breaks. The bytes after the last newline are a line only when `last` (nothing more will
/// come, or it is wanted as it is) or when they are [`LINE_MAX`] long.
pub fn for_each_line(
    from: u64,
    bytes: &[u8],
    last: bool,
    mut each: impl FnMut(Line<'_>) -> ControlFlow<()>,
) -> Scanned {
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let window = &rest[..rest.len().min(LINE_MAX)];
        let (line, taken) = match memchr::memchr(b'\n', window) {
            Some(newline) => (&rest[..newline], newline + 1),
            None if window.len() == LINE_MAX => (window, LINE_MAX),
            None if last => (rest, rest.len()),
            None => break,
        };
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let offset = from + at as u64;
        at += taken;
        if each(Line {
            offset,
            bytes: line,
            end: from + at as u64,
        })
        .is_break()
        {
            return Scanned {
                used: at,
                stopped: true,
            };
        }
    }
    Scanned {
        used: at,
        stopped: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(from: u64, bytes: &[u8], last: bool) -> (Vec<(u64, String)>, usize) {
        let mut seen = Vec::new();
        let scanned = for_each_line(from, bytes, last, |line| {
            seen.push((
                line.offset,
                String::from_utf8_lossy(line.bytes).into_owned(),
            ));
            ControlFlow::Continue(())
        });
        (seen, scanned.used)
    }

    #[test]
    fn lines_end_at_newlines_and_the_unended_one_waits() {
        let (seen, used) = lines(100, b"one\r\ntwo\nthr", false);
        assert_eq!(seen, vec![(100, "one".to_owned()), (105, "two".to_owned())]);
        assert_eq!(used, 9);
        let (seen, used) = lines(100, b"one\nthr", true);
        assert_eq!(seen.last(), Some(&(104, "thr".to_owned())));
        assert_eq!(used, 7);
    }

    #[test]
    fn a_long_line_is_looked_at_in_pieces() {
        let long = vec![b'x'; LINE_MAX + 10];
        let (seen, used) = lines(0, &long, false);
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].1.len(), LINE_MAX);
        assert_eq!(used, LINE_MAX);
    }

    #[test]
    fn a_break_stops_past_its_line() {
        let scanned = for_each_line(0, b"a\nready\nb\n", false, |line| {
            if line.bytes == b"ready" {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert_eq!(
            scanned,
            Scanned {
                used: 8,
                stopped: true
            }
        );
    }

    #[test]
    fn patterns_are_plain_text_or_linear_regular_expressions() {
        let plain = Matcher::new("a.b", false, "until").unwrap_or_else(|e| panic!("{e}"));
        assert!(plain.is_match(b"x a.b y") && !plain.is_match(b"axb"));
        let regex =
            Matcher::new("^listening on :[0-9]+$", true, "until").unwrap_or_else(|e| panic!("{e}"));
        assert!(regex.is_match(b"listening on :8080"));
        assert!(!regex.is_match(b"not listening on :8080"));
        // Bytes that are not UTF-8 are matched around.
        assert!(plain.is_match(b"\xff a.b \xfe"));
        for (pattern, is_regex, says) in [
            ("", false, "1 to"),
            ("a\nb", false, "newline"),
            ("(unclosed", true, "not a regular expression"),
            ("\\w{1000}{1000}", true, "too large"),
        ] {
            let refused = Matcher::new(pattern, is_regex, "until").err();
            assert!(
                refused.as_deref().is_some_and(|e| e.contains(says)),
                "{pattern}: {refused:?}"
            );
        }
        let long = "x".repeat(PATTERN_BYTES + 1);
        assert!(Matcher::new(&long, false, "until").is_err());
    }
}
