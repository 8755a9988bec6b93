//! Output made harmless for the host: escape sequences (OSC 52, OSC 0, OSC 8,
//! a screen clear, a cursor report), C0 and C1 control characters and the bidirectional
//! overrides, printed by a program (and passed in its arguments), arrive escaped in every tool's
//! text and structured value — `command`, `read`, `grep`, `watch` (task and call), a run's task
//! (working and completed), `list`, `stop` — and `read` with `raw: true` gives the bytes back
//! exactly.
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use crate::stdin::wait_output;
use crate::tasks::{declared, get, modern, start_task, wait_done};
use crate::watch::{watch_id, watch_task};
use lnk_tests::results::{is_error, ok, structured, text};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::ANSWER;
use lnk_tests::tools::{list, read, start, stop, tool};

both_sandboxes!(every_tool_shows_output_escaped);

/// What the program prints (and gets as its argument): each hostile sequence, named.
const PAYLOAD: &str = "osc52:\u{1b}]52;c;aGk=\u{7}|title:\u{1b}]0;pwned\u{1b}\\|\
                       link:\u{1b}]8;;http://evil/\u{1b}\\click\u{1b}]8;;\u{1b}\\|\
                       clear:\u{1b}[2J\u{1b}[H|report:\u{1b}[6n|c1:\u{9b}31m\u{9d}0;t|\
                       lre:\u{202a}rle:\u{202b}pdf:\u{202c}lro:\u{202d}rlo:\u{202e}|\
                       lri:\u{2066}rli:\u{2067}fsi:\u{2068}pdi:\u{2069}|\
                       bel:\u{7}bs:\u{8}cr:\rX|del:\u{7f}|tag:\u{e0041}|end";

/// How some of it must read once escaped.
const SHOWN: [&str; 9] = [
    "osc52:\\e]52;c;aGk=\\x07",
    "title:\\e]0;pwned\\e\\",
    "link:\\e]8;;http://evil/\\e\\click",
    "clear:\\e[2J\\e[H",
    "report:\\e[6n",
    "c1:\\u{9b}31m\\u{9d}0;t",
    "rlo:\\u{202e}",
    "pdi:\\u{2069}",
    "bs:\\x08cr:\\rX|del:\\x7f|tag:\\u{e0041}",
];

/// Fails when any string in `value` holds a character a terminal acts on or a person cannot
/// see: a C0 control but newline, tab and a carriage return before a newline; DEL; a C1
/// control; a bidirectional control; a tag character.
fn assert_harmless(what: &str, value: &Value) {
    match value {
        Value::String(text) => {
            let chars: Vec<char> = text.chars().collect();
            for (i, &c) in chars.iter().enumerate() {
                let next = chars.get(i + 1).copied();
                let bad = match c {
                    '\n' | '\t' => false,
                    '\r' => next != Some('\n'),
                    c if u32::from(c) < 0x20 => true,
                    '\u{7f}'..='\u{9f}' => true,
                    '\u{61c}' | '\u{200e}' | '\u{200f}' => true,
                    '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
                    '\u{e0000}'..='\u{e007f}' => true,
                    _ => false,
                };
                assert!(
                    !bad,
                    "{what}: U+{:04X} reaches the host in {text:?}",
                    u32::from(c)
                );
            }
        }
        Value::Array(items) => items.iter().for_each(|v| assert_harmless(what, v)),
        Value::Object(map) => map.values().for_each(|v| assert_harmless(what, v)),
        _ => {}
    }
}

/// `value` is harmless, and `text` shows every sequence escaped.
fn shown_escaped(what: &str, value: &Value, text: &str) {
    assert_harmless(what, value);
    for shown in SHOWN {
        assert!(text.contains(shown), "{what}: {shown:?} is not in {text:?}");
    }
}

fn every_tool_shows_output_escaped(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = modern(&bg, &Flags::default());
    let printing =
        json!({"program": "sh", "args": ["-c", "printf '%s\\n' \"$1\"; sleep 60", "sh", PAYLOAD]});

    let result = serve
        .call(json!({"program": "sh", "args": ["-c", "printf '%s\\n' \"$1\"", "sh", PAYLOAD]}));
    shown_escaped("command's text", &result, &text(&result));
    let stdout = structured(&result)["stdout"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    shown_escaped("command's stdout", &result, &stdout);

    let id = start(&mut serve, printing.clone());
    wait_output(&mut serve, &id, "end", ANSWER);
    let result = read(&mut serve, json!({"id": id, "offset": 0}));
    shown_escaped("read's text", &result, &text(&result));
    let value = structured(&result).clone();
    shown_escaped(
        "read's structured text",
        &result,
        value["text"].as_str().unwrap_or(""),
    );
    assert_eq!(value["next_offset"], PAYLOAD.len() + 1, "{value}");
    // Read a few bytes of text at a time: each read's escapes stay whole within its limit,
    // and `next_offset` goes on exactly where the text stopped.
    let whole = value["text"].as_str().unwrap_or("").to_owned();
    let (mut pieces, mut offset) = (String::new(), 0u64);
    while offset < PAYLOAD.len() as u64 + 1 {
        let piece = read(&mut serve, json!({"id": id, "offset": offset, "limit": 7}));
        let piece = structured(&piece).clone();
        let text = piece["text"].as_str().unwrap_or("");
        // Within the limit, unless one escape alone is longer (it is shown whole).
        assert!(
            text.len() <= 7 || (text.starts_with("\\u{") && text.ends_with('}') && text.len() <= 9),
            "{piece}"
        );
        let next = piece["next_offset"].as_u64().expect("next_offset");
        assert!(next > offset, "{piece}");
        pieces.push_str(text);
        offset = next;
    }
    assert_eq!(pieces, whole);
    // The bytes themselves, for an agent that needs them.
    let raw = read(&mut serve, json!({"id": id, "offset": 0, "raw": true}));
    assert!(!is_error(&raw), "{raw}");
    let encoded = structured(&raw)["base64"]
        .as_str()
        .expect("base64")
        .to_owned();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&encoded)
        .expect("base64");
    assert_eq!(bytes, format!("{PAYLOAD}\n").into_bytes());
    assert!(text(&raw).ends_with(&encoded), "{raw}");
    assert_harmless("read raw", &raw);

    let result = read(&mut serve, json!({"id": id, "grep": "osc52"}));
    let line = structured(&result)["matches"][0]["line"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    shown_escaped("grep's line", &result, &line);

    let created = watch_task(&mut serve, json!({"id": id, "until": "osc52", "offset": 0}));
    let done = wait_done(&mut serve, &watch_id(&created, &id), ANSWER);
    let line = structured(&done["result"])["line"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    shown_escaped("a watch's task", &done, &line);
    shown_escaped("a watch's task text", &done, &text(&done["result"]));
    let called = tool(
        &mut serve,
        "watch",
        json!({"id": id, "until": "osc52", "offset": 0}),
        None,
    );
    shown_escaped("a watch's call", &called, &text(&called));

    let runs = list(&mut serve);
    let run = runs.iter().find(|r| r["id"] == id).expect("listed");
    assert_harmless("list's run", run);
    // Arguments are cut to 256 characters in all: the payload's start is shown.
    let shown = run["args"][3].as_str().unwrap_or("");
    for start in &SHOWN[..4] {
        assert!(shown.contains(start), "{start:?} is not in {shown:?}");
    }
    let listed = tool(&mut serve, "list", json!({}), None);
    assert_harmless("list's text", &listed);
    let stopped = stop(&mut serve, &id);
    let args = structured(&stopped)["args"][3]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert_harmless("stop", &stopped);
    assert!(args.starts_with(SHOWN[0]), "{args}");

    // A run's task: its status while it runs (its last line), and its result.
    let task = start_task(&mut serve, printing);
    let task_id = task["taskId"].as_str().expect("a task id").to_owned();
    assert_harmless("the task's start", &task);
    wait_output(&mut serve, &task_id, "end", ANSWER);
    let working = get(&mut serve, &task_id);
    assert_eq!(working["status"], "working", "{working}");
    let message = working["statusMessage"].as_str().unwrap_or("").to_owned();
    assert_harmless("the task's status", &working);
    // (Its last line is what follows the last carriage return, as a terminal draws it.)
    assert!(
        message.contains("del:\\x7f|tag:\\u{e0041}|end"),
        "{message}"
    );
    stop(&mut serve, &task_id);
    let done = wait_done(&mut serve, &task_id, Duration::from_secs(20));
    let output = structured(&done["result"])["output"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    shown_escaped("the task's result", &done, &output);
    shown_escaped("the task's result text", &done, &text(&done["result"]));
    let _ = ok(&declared(
        &mut serve,
        "tasks/get",
        json!({"taskId": task_id}),
    ));
}
