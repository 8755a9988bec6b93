use super::*;

fn text(text: &str) -> Cow<'_, str> {
    shown(text, Lines::Kept)
}

fn bytes(bytes: &[u8]) -> String {
    front(bytes, usize::MAX, false).0
}

#[test]
fn controls_escapes_and_bidi_are_shown_escaped() {
    let cases = [
        ("\u{1b}]52;c;aGk=\u{7}", "\\e]52;c;aGk=\\x07"),
        ("\u{1b}]0;title\u{1b}\\", "\\e]0;title\\e\\"),
        ("\u{1b}]8;;http://x\u{1b}\\text", "\\e]8;;http://x\\e\\text"),
        ("\u{1b}[2J\u{1b}[6n", "\\e[2J\\e[6n"),
        ("\u{9b}31m\u{9d}0;t", "\\u{9b}31m\\u{9d}0;t"),
        (
            "a\u{202e}b\u{2066}c\u{2069}",
            "a\\u{202e}b\\u{2066}c\\u{2069}",
        ),
        ("bs\u{8}del\u{7f}nul\u{0}", "bs\\x08del\\x7fnul\\0"),
        ("tag\u{e0041}zw\u{200b}", "tag\\u{e0041}zw\\u{200b}"),
    ];
    for (raw, shown) in cases {
        assert_eq!(text(raw), shown, "{raw:?}");
        assert_eq!(bytes(raw.as_bytes()), shown, "{raw:?}");
        assert_eq!(front(raw.as_bytes(), usize::MAX, false).1, raw.len());
    }
}

#[test]
fn lines_tabs_and_terminal_line_ends_stay() {
    assert!(matches!(text("a\tb\nc\r\nd"), Cow::Borrowed(_)));
    assert_eq!(text("over\rwrite"), "over\\rwrite");
    assert_eq!(text("end\r"), "end\\r");
    assert_eq!(one_line("a\tb\nc\r\n"), "a\\tb\\nc\\r\\n");
    // Emoji and scripts keep their joiners and selectors.
    let family = "👨\u{200d}👩\u{200d}👧 ❤\u{fe0f} \u{200c}";
    assert!(matches!(text(family), Cow::Borrowed(_)));
}

#[test]
fn bytes_that_are_not_utf8_show_replaced() {
    assert_eq!(bytes(b"ok \xff\xfe \x1b"), "ok \u{fffd}\u{fffd} \\e");
}

#[test]
fn the_budget_counts_what_is_shown() {
    let raw = "ab\u{1b}cd".as_bytes();
    // `ab\ecd` is six bytes shown for five.
    assert_eq!(front(raw, 6, false), ("ab\\ecd".to_owned(), 5));
    // The escape is never cut in two.
    assert_eq!(front(raw, 3, false), ("ab".to_owned(), 2));
    assert_eq!(front(raw, 4, false), ("ab\\e".to_owned(), 3));
    assert_eq!(back(raw, 3, false), ("cd".to_owned(), 3));
    assert_eq!(back(raw, 4, false), ("\\ecd".to_owned(), 2));
    // A reader always moves on.
    assert_eq!(front("€".as_bytes(), 1, true), ("€".to_owned(), 3));
    assert_eq!(front("€".as_bytes(), 1, false), (String::new(), 0));
    assert_eq!(
        back("\u{202e}".as_bytes(), 1, true),
        ("\\u{202e}".to_owned(), 0)
    );
}

#[test]
fn a_kept_carriage_return_left_alone_at_a_cut_is_left_for_later() {
    let raw = b"line\r\nnext";
    assert_eq!(front(raw, 5, false), ("line".to_owned(), 4));
    assert_eq!(front(raw, 6, false), ("line\r\n".to_owned(), 6));
    assert_eq!(front(b"\r\n", 0, true), ("\\r".to_owned(), 1));
}

#[test]
fn a_characters_shown_size_is_what_is_written() {
    for c in [
        'a', 'é', '€', '🙂', '\u{1b}', '\r', '\n', '\t', '\0', '\u{7}', '\u{7f}', '\u{9b}',
    ]
    .into_iter()
    .chain([
        '\u{202e}',
        '\u{2066}',
        '\u{feff}',
        '\u{e0041}',
        '\u{e0100}',
        '\u{61c}',
    ]) {
        for next in [None, Some('\n'), Some('x')] {
            let mut out = String::new();
            push(&mut out, c, next, Lines::Kept);
            assert_eq!(
                shown_len(c, next),
                out.len(),
                "{c:?} before {next:?}: {out}"
            );
        }
    }
}
