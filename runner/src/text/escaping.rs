//! Text made harmless for the host: what a program printed (and what an agent passed) is shown
//! with every character that could drive a terminal or hide text escaped as visible text.
//!
//! A host, or a person, that prints a tool's result to a terminal would otherwise let a program
//! set their clipboard (OSC 52), their window's title (OSC 0), plant a link whose text hides its
//! target (OSC 8), clear or repaint their screen (CSI), or make the terminal type an answer into
//! its own input (a cursor report, CSI 6n); and a model reads text that a person cannot see or
//! that is shown in another order than it is read. So, everywhere a text reaches the host (the
//! text block and the structured value alike), these are shown escaped:
//!
//! - every C0 control character but newline and tab, ESC among them (`\e`), and a carriage
//!   return unless a newline follows it (`\r`; `\r\n`, a terminal's line end, is kept), DEL,
//!   and every C1 control character (U+0080 to U+009F, the single-character CSI and OSC among
//!   them): an escape sequence thus shows as text, `\e]52;c;…`;
//! - the bidirectional controls (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069)
//!   and the other invisible format characters (U+180E, U+200B, U+2060 to U+206F, U+FEFF,
//!   U+FFF9 to U+FFFB), the line and paragraph separators (U+2028, U+2029), the tag
//!   characters a hidden text can be spelled in (U+E0000 to U+E007F), and the variation
//!   selectors beyond the sixteen emoji use (U+E0100 to U+E01EF).
//!
//! The joiners (U+200C, U+200D), the soft hyphen and the first sixteen variation selectors stay:
//! emoji and several scripts need them, and they hide nothing. A backslash is shown as it is, so
//! `\e` in a text may have been printed so; `read` with `raw: true` gives the bytes themselves.
//! Bytes that are not UTF-8 show as U+FFFD, as before.
//!
//! How it is written: `\e` (ESC), `\r`, `\0`, `\xNN` for the other C0 characters and DEL, and
//! `\u{NNNN}` for the rest; in [`one_line`] also `\n` and `\t`.
//!
//! Escaping makes a text longer (a control byte becomes up to four characters). Where a budget
//! holds (each end of a call's stream within `--output`/2, a `read`'s `limit`), it counts what
//! is shown, escapes included: [`front`] and [`back`] take whole characters, escaped, until the
//! budget is full, and say how many of the program's bytes that was, so that what is left out
//! is counted and a `read`'s `next_offset` is exact.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether newlines and tabs stay as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lines {
    /// Newlines, tabs and `\r\n` stay: a text of several lines.
    Kept,
    /// Escaped too: one line.
    Escaped,
}

/// Whether `c` is shown escaped whatever it is next to (newline, tab and carriage return are
/// decided by [`push`]).
fn is_hidden(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{61c}' | '\u{180e}' | '\u{200b}' | '\u{200e}' | '\u{200f}'
        | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{206f}'
        | '\u{feff}' | '\u{fff9}'..='\u{fffb}'
        | '\u{e0000}'..='\u{e007f}' | '\u{e0100}'..='\u{e01ef}')
}

/// Whether `c` (followed by `next`) must be written otherwise than as it is.
fn escapes(c: char, next: Option<char>, lines: Lines) -> bool {
    match c {
        '\n' | '\t' => lines == Lines::Escaped,
        '\r' => lines == Lines::Escaped || next != Some('\n'),
        c => is_hidden(c),
    }
}

/// Writes `c` as it is shown.
fn push(out: &mut String, c: char, next: Option<char>, lines: Lines) {
    if !escapes(c, next, lines) {
        out.push(c);
        return;
    }
    match c {
        '\u{1b}' => out.push_str("\\e"),
        '\r' => out.push_str("\\r"),
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\0' => out.push_str("\\0"),
        c if c.is_ascii() => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
}

/// `text` as shown: unchanged (borrowed) when nothing in it is escaped.
fn shown(text: &str, lines: Lines) -> Cow<'_, str> {
    let mut chars = text.chars().peekable();
    let mut at = 0;
    while let Some(c) = chars.next() {
        if escapes(c, chars.peek().copied(), lines) {
            let mut out = String::with_capacity(text.len() + 16);
            out.push_str(&text[..at]);
            let mut chars = text[at..].chars().peekable();
            while let Some(c) = chars.next() {
                push(&mut out, c, chars.peek().copied(), lines);
            }
            return Cow::Owned(out);
        }
        at += c.len_utf8();
    }
    Cow::Borrowed(text)
}

/// `text` as one line, every character the module names escaped, newlines and tabs too (a
/// status, a quoted argument).
pub fn one_line(text: &str) -> String {
    shown(text, Lines::Escaped).into_owned()
}

/// The characters of `bytes`, each with how many of its bytes it is: what is not UTF-8 as
/// U+FFFD, one for each sequence `String::from_utf8_lossy` would replace.
fn chars(bytes: &[u8]) -> impl Iterator<Item = (usize, char)> + '_ {
    bytes.utf8_chunks().flat_map(|chunk| {
        let invalid = chunk.invalid();
        let replaced =
            (!invalid.is_empty()).then_some((invalid.len(), char::REPLACEMENT_CHARACTER));
        chunk
            .valid()
            .chars()
            .map(|c| (c.len_utf8(), c))
            .chain(replaced)
    })
}

/// How many bytes `c` (followed by `next`) takes once shown.
fn shown_len(c: char, next: Option<char>) -> usize {
    if !escapes(c, next, Lines::Kept) {
        return c.len_utf8();
    }
    match c {
        '\u{1b}' | '\r' | '\n' | '\t' | '\0' => 2,
        c if c.is_ascii() => 4,
        // `\u{` + its hex digits + `}`.
        c => 4 + (u32::BITS - u32::from(c).leading_zeros()).div_ceil(4) as usize,
    }
}

/// Whether `bytes` are shown as they are: UTF-8 with nothing to escape.
fn as_they_are(bytes: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if escapes(c, chars.peek().copied(), Lines::Kept) {
            return None;
        }
    }
    Some(text)
}

/// The first characters of `bytes` as shown, as many as fit in `budget` bytes of shown text
/// (with `at_least_one`, the first one even when it does not fit, so that a reader moves on):
/// the text, and how many of the program's bytes it shows.
pub fn front(bytes: &[u8], budget: usize, at_least_one: bool) -> (String, usize) {
    if bytes.len() <= budget
        && let Some(text) = as_they_are(bytes)
    {
        return (text.to_owned(), bytes.len());
    }
    let mut out = String::with_capacity(bytes.len().min(budget));
    let mut used = 0;
    let mut chars = chars(bytes).peekable();
    while let Some((raw, c)) = chars.next() {
        let next = chars.peek().map(|(_, c)| *c);
        let fits = out.len().saturating_add(shown_len(c, next)) <= budget;
        let first_anyway = at_least_one && used == 0;
        if !(fits || first_anyway) {
            break;
        }
        push(&mut out, c, next, Lines::Kept);
        used += raw;
    }
    // A carriage return kept because a newline follows it, which was left out: alone at the
    // end it could send the cursor back over what is printed after. Its newline did not fit,
    // so neither would `\\r`: it is left for what comes after, unless it is all there is.
    if used < bytes.len() && out.ends_with('\r') {
        out.pop();
        if used == 1 {
            out.push_str("\\r");
        } else {
            used -= 1;
        }
    }
    (out, used)
}

/// The last characters of `bytes` as shown, as many as fit in `budget` bytes of shown text
/// (with `at_least_one`, the last one even when it does not fit): the text, and how many of the
/// program's bytes at the front of `bytes` it leaves out.
pub fn back(bytes: &[u8], budget: usize, at_least_one: bool) -> (String, usize) {
    if bytes.len() <= budget
        && let Some(text) = as_they_are(bytes)
    {
        return (text.to_owned(), 0);
    }
    // Each character's bytes and shown size, to count from the end.
    let mut sizes: Vec<(usize, usize)> = Vec::with_capacity(bytes.len());
    let mut all = chars(bytes).peekable();
    while let Some((raw, c)) = all.next() {
        sizes.push((raw, shown_len(c, all.peek().map(|(_, c)| *c))));
    }
    let mut size = 0usize;
    let mut first = sizes.len();
    for (i, &(_, shown)) in sizes.iter().enumerate().rev() {
        let fits = size.saturating_add(shown) <= budget;
        let last_anyway = at_least_one && first == sizes.len();
        if !(fits || last_anyway) {
            break;
        }
        size += shown;
        first = i;
    }
    let skipped: usize = sizes[..first].iter().map(|(raw, _)| raw).sum();
    // The characters from a character's start are those of the whole from there on.
    let mut out = String::with_capacity(size);
    let mut rest = chars(&bytes[skipped..]).peekable();
    while let Some((_, c)) = rest.next() {
        push(&mut out, c, rest.peek().map(|(_, c)| *c), Lines::Kept);
    }
    (out, skipped)
}

#[cfg(test)]
mod tests;
