//! What a request or a tool call answered, read the way the tests read it: the result or the
//! error of a JSON-RPC response, a tool result's text and structured value, whether it is an
//! error; and what serve logged at WARN or above.
use serde_json::{Value, json};

/// The `_meta` keys of a 2026-07-28 request.
pub fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "lnk-tests", "version": "0"},
    })
}

/// The `result` of a response; fails on an error response.
pub fn ok(response: &Value) -> Value {
    assert!(
        response.get("error").is_none() && response.get("result").is_some(),
        "expected a result: {response}"
    );
    response["result"].clone()
}

/// The `error.code` of a response; fails on a result.
pub fn error_code(response: &Value) -> i64 {
    response["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error response: {response}"))
}

/// The text blocks of a tool result, joined by newlines.
pub fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool result has content: {result}"))
        .iter()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the text of a `command` answer shows of one stream (`stdout` or `stderr`): the lines
/// after its `--- name: … ---` header up to the next header. The text ends a stream whose last
/// line has no newline with one; the structured value does not.
pub fn stream_in_text(text: &str, name: &str) -> String {
    let header = text
        .find(&format!("--- {name}: "))
        .unwrap_or_else(|| panic!("no {name} header: {text}"));
    let start = header
        + text[header..]
            .find("---\n")
            .map(|at| at + 4)
            .unwrap_or_else(|| panic!("an unfinished {name} header: {text}"));
    let end = text[start..]
        .find("--- stderr: ")
        .filter(|_| name == "stdout")
        .map_or(text.len(), |at| start + at);
    text[start..end].to_owned()
}

/// Checks that a `command` answer's structured `stdout` and `stderr` are what its text shows
/// of each stream.
pub fn assert_streams_match_the_text(result: &Value) {
    let text = text(result);
    let value = structured(result);
    for name in ["stdout", "stderr"] {
        let shown = value[name]
            .as_str()
            .unwrap_or_else(|| panic!("the structured value has `{name}`: {result}"));
        let section = stream_in_text(&text, name);
        let added_newline = !shown.is_empty() && !shown.ends_with('\n');
        let expected = if added_newline {
            section.strip_suffix('\n').unwrap_or(&section)
        } else {
            &section
        };
        assert_eq!(shown, expected, "{name} as the text shows it: {text:?}");
    }
}

/// The lines of serve's log (its stderr) at level WARN or ERROR: what it warned about.
pub fn warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|line| {
            // `<time>  WARN <target>: <message>`, as tracing's plain format writes a line.
            let level = line.split_whitespace().nth(1);
            matches!(level, Some("WARN" | "ERROR"))
        })
        .collect()
}

/// The structured value of a tool result.
pub fn structured(result: &Value) -> &Value {
    result
        .get("structuredContent")
        .unwrap_or_else(|| panic!("a tool result without structuredContent: {result}"))
}

/// Whether a tool result is a refusal.
pub fn is_error(result: &Value) -> bool {
    result.get("isError") == Some(&Value::Bool(true))
}

/// A `command` call's result that ran (not a refusal); returns its structured value.
pub fn ran(result: &Value) -> Value {
    assert!(!is_error(result), "the call was refused: {result}");
    structured(result).clone()
}
