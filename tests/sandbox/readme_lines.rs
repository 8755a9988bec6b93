//! Every host entry of the README uses the recommended sandbox line as written: each fenced
//! JSON, TOML or shell block that starts serve under bubblewrap ends serve's arguments with
//! exactly the elements of "### The recommended sandbox line", so the line the check and the
//! hostile payloads prove safe is the one people paste.
use lnk_tests::readme::{DOCS, recommended_elements};

/// The fenced blocks of the README: (info string, body).
fn blocks() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = DOCS.lines();
    while let Some(line) = lines.next() {
        let Some(info) = line.trim_start().strip_prefix("```") else {
            continue;
        };
        let mut body = String::new();
        for inner in lines.by_ref() {
            if inner.trim_start().starts_with("```") {
                break;
            }
            body.push_str(inner);
            body.push('\n');
        }
        out.push((info.trim().to_owned(), body));
    }
    out
}

/// Every array of strings in a JSON value that holds `/usr/bin/bwrap` or `bwrap`.
fn json_arrays(value: &serde_json::Value, out: &mut Vec<Vec<String>>) {
    match value {
        serde_json::Value::Array(items) => {
            let strings: Vec<String> = items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_owned))
                .collect();
            if strings.len() == items.len() && strings.iter().any(|s| s.ends_with("bwrap")) {
                out.push(strings);
            }
            items.iter().for_each(|i| json_arrays(i, out));
        }
        serde_json::Value::Object(map) => map.values().for_each(|v| json_arrays(v, out)),
        _ => {}
    }
}

/// The `name = [ ... ]` arrays of a TOML block, read as JSON (basic strings only, which is what
/// the host entries use).
fn toml_arrays(body: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(eq) = rest.find("= [") {
        let from = eq + 2;
        let Some(len) = rest[from..].find(']') else {
            break;
        };
        let array = &rest[from..=from + len];
        let parsed: Vec<String> = serde_json::from_str(array)
            .unwrap_or_else(|err| panic!("a TOML array the test cannot read ({err}): {array}"));
        if parsed.iter().any(|s| s.ends_with("bwrap")) {
            out.push(parsed);
        }
        rest = &rest[from + len..];
    }
    out
}

/// The words of each shell command in a block (quotes and `\` continuations undone).
fn shell_commands(body: &str) -> Vec<Vec<String>> {
    let joined = body.replace("\\\n", " ");
    let mut commands = Vec::new();
    for line in joined.lines() {
        let mut words = Vec::new();
        let mut word = String::new();
        let mut in_word = false;
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '\'' => {
                    in_word = true;
                    for q in chars.by_ref() {
                        if q == '\'' {
                            break;
                        }
                        word.push(q);
                    }
                }
                '"' => {
                    in_word = true;
                    while let Some(q) = chars.next() {
                        match q {
                            '"' => break,
                            '\\' => word.extend(chars.next()),
                            _ => word.push(q),
                        }
                    }
                }
                '\\' => {
                    in_word = true;
                    word.extend(chars.next());
                }
                '#' if !in_word => break,
                c if c.is_whitespace() => {
                    if in_word {
                        words.push(std::mem::take(&mut word));
                        in_word = false;
                    }
                }
                c => {
                    in_word = true;
                    word.push(c);
                }
            }
        }
        if in_word {
            words.push(word);
        }
        if words.iter().any(|w| w.ends_with("bwrap")) {
            commands.push(words);
        }
    }
    commands
}

#[test]
fn every_host_entry_ends_with_the_recommended_line() {
    let line = recommended_elements();
    let mut entries = 0;
    for (info, body) in blocks() {
        let arrays = match info.as_str() {
            "json" | "jsonc" => {
                let Ok(value) = serde_json::from_str::<serde_json::Value>(&body) else {
                    assert!(
                        !body.contains("bwrap"),
                        "a JSON block that does not parse:\n{body}"
                    );
                    continue;
                };
                let mut arrays = Vec::new();
                json_arrays(&value, &mut arrays);
                arrays
            }
            "toml" => toml_arrays(&body),
            "sh" | "bash" | "shell" | "console" => shell_commands(&body),
            _ => continue,
        };
        for args in arrays {
            entries += 1;
            let at = args
                .windows(2)
                .position(|pair| pair[0] == "--" && pair[1] == line[1])
                .unwrap_or_else(|| {
                    panic!(
                        "a host entry runs another sandbox than {}: {args:?}",
                        line[1]
                    )
                });
            assert_eq!(
                args[at..],
                line[..],
                "a host entry's sandbox is not the recommended line as written"
            );
        }
    }
    assert!(entries >= 2, "the README's host entries were not found");
}
