//! Where UTF-8 text may be cut: so that no cut splits a character.

/// How many bytes at the end of `bytes` begin a UTF-8 character that is not complete.
pub fn incomplete_suffix(bytes: &[u8]) -> usize {
    for back in 1..=3.min(bytes.len()) {
        let b = bytes[bytes.len() - back];
        if b & 0b1100_0000 == 0b1000_0000 {
            continue; // a continuation byte: look further back for the lead byte
        }
        let needed = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return 0,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

/// How many continuation bytes begin `bytes` (the rest of a character cut at the front).
pub fn continuation_prefix(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|b| *b & 0b1100_0000 == 0b1000_0000)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_character_cut_at_either_end() {
        let euro = "€".as_bytes(); // three bytes
        assert_eq!(incomplete_suffix(b"abc"), 0);
        assert_eq!(incomplete_suffix(&euro[..1]), 1);
        assert_eq!(incomplete_suffix(&euro[..2]), 2);
        assert_eq!(incomplete_suffix(euro), 0);
        assert_eq!(continuation_prefix(&euro[1..]), 2);
        assert_eq!(continuation_prefix(b"abc"), 0);
    }
}
