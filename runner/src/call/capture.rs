//! A stream's output kept as a bounded head and tail, counting every byte.
//!
//! Memory never exceeds the limit, whatever the program writes: the head keeps the first half,
//! the tail is a ring holding the last half, and both grow only as bytes arrive.

use crate::text::{escaping, utf8};

/// The head and tail of one stream, and how many bytes it wrote in all.
#[derive(Debug)]
pub struct HeadTail {
    half: usize,
    head: Vec<u8>,
    /// The last bytes past the head; once it is full, `tail_start` is its oldest byte.
    tail: Vec<u8>,
    tail_start: usize,
    total: u64,
}

impl HeadTail {
    /// A buffer keeping the first `limit / 2` and the last `limit / 2` bytes.
    pub fn new(limit: u64) -> Self {
        let half = usize::try_from(limit / 2).unwrap_or(usize::MAX);
        Self {
            half,
            head: Vec::new(),
            tail: Vec::new(),
            tail_start: 0,
            total: 0,
        }
    }

    /// Every byte written so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Takes in bytes as they come.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.head.len() < self.half {
            let take = bytes.len().min(self.half - self.head.len());
            self.head.reserve_exact(take);
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.is_empty() || self.half == 0 {
            return;
        }
        if bytes.len() >= self.half {
            self.tail.clear();
            self.tail.reserve_exact(self.half);
            self.tail
                .extend_from_slice(&bytes[bytes.len() - self.half..]);
            self.tail_start = 0;
            return;
        }
        if self.tail.len() < self.half {
            let room = self.half - self.tail.len();
            let take = bytes.len().min(room);
            self.tail.reserve_exact(take);
            self.tail.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        // The ring is full: overwrite from its oldest byte on, wrapping once at most.
        while !bytes.is_empty() {
            let run = bytes.len().min(self.half - self.tail_start);
            self.tail[self.tail_start..self.tail_start + run].copy_from_slice(&bytes[..run]);
            self.tail_start = (self.tail_start + run) % self.half;
            bytes = &bytes[run..];
        }
    }

    /// Counts `bytes` that came between what was pushed before and what is pushed after
    /// without being seen (a file read at its two ends). The tail kept so far is no longer
    /// next to what comes after, so it is let go.
    pub fn skip(&mut self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        self.total += bytes;
        self.tail.clear();
        self.tail_start = 0;
    }

    /// The kept bytes as text: `(head, left_out, tail)`. Nothing is left out when the stream fit;
    /// then everything is in `head` and `tail` is empty. Cuts never split a UTF-8 character (the
    /// bytes of a character cut in two are counted as left out) and bytes that are not UTF-8 are
    /// shown as U+FFFD. The text is shown escaped ([`crate::text::escaping`]), and each end shows at
    /// most `limit / 2` bytes of it: what an escape pushes past that is left out (and counted)
    /// too.
    pub fn render(&self) -> Rendered {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let mut tail = Vec::with_capacity(self.tail.len());
        tail.extend_from_slice(&self.tail[self.tail_start..]);
        tail.extend_from_slice(&self.tail[..self.tail_start]);
        if kept == self.total {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            let (whole, used) = escaping::front(&all, self.half.saturating_mul(2), false);
            if used == all.len() {
                return Rendered {
                    head: whole,
                    left_out: 0,
                    tail: String::new(),
                };
            }
            // Escaped, it is longer than both ends together: cut in the middle.
            return self.ends(&all, &all);
        }
        let head = &self.head[..self.head.len() - utf8::incomplete_suffix(&self.head)];
        let tail = &tail[utf8::continuation_prefix(&tail)..];
        self.ends(head, tail)
    }

    /// The first `half` shown bytes of `head` and the last `half` of what `tail` holds past
    /// them (the two may be the same bytes), and what lies between, counted.
    fn ends(&self, head: &[u8], tail: &[u8]) -> Rendered {
        let (head_shown, head_used) = escaping::front(head, self.half, false);
        // When both are the same bytes, the tail begins where the head ended.
        let tail = if std::ptr::eq(head, tail) {
            &tail[head_used..]
        } else {
            tail
        };
        let (tail_shown, tail_skipped) = escaping::back(tail, self.half, false);
        let shown = (head_used + tail.len() - tail_skipped) as u64;
        Rendered {
            head: head_shown,
            left_out: self.total - shown,
            tail: tail_shown,
        }
    }
}

/// A stream's kept output, ready to show.
#[derive(Debug, PartialEq, Eq)]
pub struct Rendered {
    /// The first bytes (everything, when nothing was left out).
    pub head: String,
    /// How many bytes between head and tail are not shown.
    pub left_out: u64,
    /// The last bytes.
    pub tail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(limit: u64, chunks: &[&[u8]]) -> Rendered {
        let mut buffer = HeadTail::new(limit);
        for chunk in chunks {
            buffer.push(chunk);
        }
        buffer.render()
    }

    #[test]
    fn bytes_skipped_between_the_ends_are_counted_as_left_out() {
        let mut buffer = HeadTail::new(8);
        buffer.push(b"abcd");
        buffer.skip(100);
        buffer.push(b"wxyz");
        assert_eq!(buffer.total(), 108);
        let r = buffer.render();
        assert_eq!(
            (r.head.as_str(), r.left_out, r.tail.as_str()),
            ("abcd", 100, "wxyz")
        );
    }

    #[test]
    fn short_output_is_kept_whole() {
        let r = kept(16, &[b"hello ", b"world"]);
        assert_eq!(r.head, "hello world");
        assert_eq!(r.left_out, 0);
        assert_eq!(r.tail, "");
    }

    #[test]
    fn output_that_just_fits_is_kept_whole() {
        let r = kept(8, &[b"abcd", b"efgh"]);
        assert_eq!((r.head.as_str(), r.left_out), ("abcdefgh", 0));
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_counts_the_rest() {
        let data: Vec<u8> = (0..1000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let mut buffer = HeadTail::new(10);
        for chunk in data.chunks(7) {
            buffer.push(chunk);
        }
        let r = buffer.render();
        assert_eq!(buffer.total(), 1000);
        assert_eq!(r.head.as_bytes(), &data[..5]);
        assert_eq!(r.tail.as_bytes(), &data[995..]);
        assert_eq!(r.left_out, 990);
    }

    #[test]
    fn one_large_write_keeps_its_end() {
        let data: Vec<u8> = (0..100u8).map(|i| b'!' + i % 90).collect();
        let mut buffer = HeadTail::new(20);
        buffer.push(&data[..3]);
        buffer.push(&data[3..]);
        let r = buffer.render();
        assert_eq!(r.head.as_bytes(), &data[..10]);
        assert_eq!(r.tail.as_bytes(), &data[90..]);
        assert_eq!(r.left_out, 80);
    }

    #[test]
    fn cuts_never_split_a_character() {
        // "é" is two bytes; a head of 3 bytes would end in the middle of the second one.
        let text = "aéé".repeat(10);
        let r = kept(6, &[text.as_bytes()]);
        assert_eq!(r.head, "aé");
        assert!(r.tail.chars().all(|c| c != '\u{FFFD}'), "{:?}", r.tail);
        assert_eq!(
            r.left_out as usize + r.head.len() + r.tail.len(),
            text.len()
        );
    }

    #[test]
    fn four_byte_characters_cut_at_both_ends() {
        let text = "🙂".repeat(10); // 40 bytes
        let r = kept(10, &[text.as_bytes()]);
        assert_eq!(r.head, "🙂");
        assert_eq!(r.tail, "🙂");
        assert_eq!(r.left_out, 32);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_replaced_not_dropped() {
        let r = kept(64, &[b"ok \xff\xfe end"]);
        assert_eq!(r.head, "ok \u{FFFD}\u{FFFD} end");
    }

    #[test]
    fn a_zero_limit_keeps_nothing_but_counts() {
        let mut buffer = HeadTail::new(1);
        buffer.push(b"abc");
        let r = buffer.render();
        assert_eq!((r.head.as_str(), r.left_out, r.tail.as_str()), ("", 3, ""));
    }

    #[test]
    fn escapes_are_shown_and_count_against_each_end() {
        // Short: all of it, escaped.
        let r = kept(64, &[b"a\x1b[2Jb"]);
        assert_eq!((r.head.as_str(), r.left_out), ("a\\e[2Jb", 0));
        // Eight ESC bytes fit the limit of 8 raw, not once escaped (16 bytes): cut in the
        // middle, what did not fit counted as left out.
        let r = kept(8, &[b"\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b"]);
        assert_eq!(
            (r.head.as_str(), r.left_out, r.tail.as_str()),
            ("\\e\\e", 4, "\\e\\e")
        );
        // Past the limit: each end within its half, shown.
        let r = kept(8, &[b"\x1b\x1bxyz", &[b'.'; 100], b"\x1b\x1b\x1b\x1b"]);
        assert_eq!((r.head.as_str(), r.tail.as_str()), ("\\e\\e", "\\e\\e"));
        assert_eq!(r.left_out, 109 - 4);
    }

    #[test]
    fn memory_stays_bounded() {
        let mut buffer = HeadTail::new(1024);
        let chunk = vec![b'x'; 65536];
        for _ in 0..100 {
            buffer.push(&chunk);
        }
        assert!(buffer.head.capacity() <= 1024 && buffer.tail.capacity() <= 1024);
        assert_eq!(buffer.total(), 6_553_600);
    }
}
