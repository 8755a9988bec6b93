//! `read` with `grep`: the lines of the kept output that match a regular
//! expression, each with its offset, within `limit`, with how many matched in all — over
//! 100,000 lines; and its refusals.
use serde_json::{Value, json};

use lnk_tests::results::{is_error, structured, text};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::{ANSWER, Serve};
use lnk_tests::tools::{read, read_ok, start, wait_ended};

both_sandboxes!(grep_finds_lines_among_100000, bad_greps_are_refused);

/// `read` with `grep`: its structured value, after checking the text says the same.
fn grep(serve: &mut Serve, arguments: Value) -> Value {
    let result = read(serve, arguments);
    assert!(!is_error(&result), "{result}");
    let value = structured(&result).clone();
    let said = text(&result);
    for found in value["matches"].as_array().into_iter().flatten() {
        let line = format!(
            "{}: {}\n",
            found["offset"],
            found["line"].as_str().unwrap_or("")
        );
        assert!(said.contains(&line), "{line:?} is not in the text: {said}");
    }
    value
}

/// Where line `n` of `line 1\n`, `line 2\n`, … starts.
fn offset_of(n: u64) -> u64 {
    (1..n).map(|i| format!("line {i}\n").len() as u64).sum()
}

fn grep_finds_lines_among_100000(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let flags = Flags {
        output: "4MiB",
        ..Flags::default()
    };
    let mut serve = bg.serve(&flags).output("64KiB").start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "i=1; while [ $i -le 100000 ]; do echo \"line $i\"; i=$((i+1)); done"]}),
    );
    let run = wait_ended(&mut serve, &id, std::time::Duration::from_secs(120));
    assert_eq!(run["output_bytes"], offset_of(100_001), "{run}");
    // Every line ending in 77: a thousand of them.
    let value = grep(&mut serve, json!({"id": id, "grep": "^line [0-9]*77$"}));
    assert_eq!(value["lines_matched"], 1000, "{value}");
    let matches = value["matches"].as_array().expect("matches");
    assert_eq!(matches.len(), 1000);
    assert_eq!(
        matches[0],
        json!({"offset": offset_of(77), "line": "line 77"})
    );
    assert_eq!(
        matches[999],
        json!({"offset": offset_of(99_977), "line": "line 99977"})
    );
    assert_eq!(value["next_offset"], offset_of(100_001), "{value}");
    // Each offset is where its line is.
    let (at, _) = read_ok(
        &mut serve,
        json!({"id": id, "offset": offset_of(50_077), "limit": 11}),
    );
    assert_eq!(at, "line 50077\n");
    // Within `limit`: the first ones, how many in all, and where to go on.
    let value = grep(&mut serve, json!({"id": id, "grep": "77$", "limit": 100}));
    let shown = value["matches"].as_array().expect("matches").len();
    assert!((1..20).contains(&shown), "{value}");
    let total = value["lines_matched"].as_u64().unwrap_or(0);
    // 77, 177, …, and 770-779's 777, 1077, 1770-1779's 1777, …: whatever ends in 77.
    assert_eq!(
        total,
        (1..=100_000u64).filter(|n| n % 100 == 77).count() as u64
    );
    let next = value["next_offset"].as_u64().expect("next_offset");
    let last_shown = value["matches"][shown - 1]["offset"].as_u64().unwrap_or(0);
    assert!(next > last_shown, "{value}");
    let more = grep(
        &mut serve,
        json!({"id": id, "grep": "77$", "limit": 100, "offset": next}),
    );
    assert_eq!(more["matches"][0]["offset"], next, "{more}");
    assert_eq!(
        more["lines_matched"].as_u64().unwrap_or(0),
        total - shown as u64
    );
    // None at all.
    let none = grep(&mut serve, json!({"id": id, "grep": "^nothing"}));
    assert_eq!(
        (&none["lines_matched"], &none["matches"]),
        (&json!(0), &json!([]))
    );
}

fn bad_greps_are_refused(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "echo hi"]}),
    );
    wait_ended(&mut serve, &id, ANSWER);
    for (arguments, says) in [
        (json!({"id": id, "grep": "("}), "not a regular expression"),
        (json!({"id": id, "grep": ""}), "1 to 1024"),
        (json!({"id": id, "grep": 3}), "must be a string"),
        (
            json!({"id": id, "grep": "hi", "wait_ms": 10}),
            "not `wait_ms`",
        ),
        (
            json!({"id": id, "grep": "hi", "raw": true}),
            "not `wait_ms`, `until` or `raw`",
        ),
    ] {
        let refused = read(&mut serve, arguments.clone());
        assert!(is_error(&refused), "{arguments}: {refused}");
        assert!(
            text(&refused).contains(says),
            "{arguments}: {}",
            text(&refused)
        );
    }
}
