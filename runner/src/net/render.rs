//! What an answer says of a sandbox's network: the structured value's `network` (absent
//! without `--net-allow`), its schema, and one line of the text per refused destination
//! ("refused: example.org:443, not on the allow-list").

use lnk_common::network::Network;
use serde_json::{Value, json};

/// The text's lines for `network`, each ending with a newline; empty when nothing was refused.
pub fn refusal_lines(network: &Network) -> String {
    let mut text = String::new();
    for line in network.refusal_lines() {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// What a `list` line adds for a run with a proxy: `; 3 connections, refused:
/// example.org:443 (not on the allow-list)`.
pub fn in_a_line(network: &Network) -> String {
    let mut line = format!("; {} connections through the proxy", network.connections);
    if !network.refused.is_empty() {
        let refused: Vec<String> = network
            .refused
            .iter()
            .map(|r| r.line().trim_start_matches("refused: ").to_owned())
            .collect();
        line.push_str(&format!(", refused: {}", refused.join("; ")));
    }
    line
}

/// The structured value's `network`.
pub fn structured(network: &Network) -> Value {
    serde_json::to_value(network).unwrap_or(Value::Null)
}

/// The schema of the structured value's `network`.
pub fn schema() -> Value {
    let count = json!({"type": "integer", "minimum": 0});
    json!({
        "type": "object",
        "description": "What the programs did through Link Run's proxy (only with --net-allow): connections made to allowed hosts, bytes from them (bytes_in) and to them (bytes_out), and each destination refused, how many times and why.",
        "properties": {
            "connections": count,
            "bytes_in": count,
            "bytes_out": count,
            "refused": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "host": {"type": "string", "description": "The host as the program named it; empty when it named none."},
                        "port": {"type": "integer", "minimum": 0, "maximum": 65535},
                        "count": count,
                        "why": {"type": "string"}
                    },
                    "required": ["host", "port", "count", "why"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["connections", "bytes_in", "bytes_out", "refused"],
        "additionalProperties": false
    })
}

#[cfg(test)]
mod tests {
    use lnk_common::network::Refused;

    use super::*;

    #[test]
    fn each_refused_destination_is_a_line_and_the_value_fits_its_schema() {
        let network = Network {
            connections: 2,
            bytes_in: 10,
            bytes_out: 5,
            refused: vec![Refused {
                host: "example.org".into(),
                port: 443,
                count: 1,
                why: "not on the allow-list".into(),
            }],
        };
        assert_eq!(
            refusal_lines(&network),
            "refused: example.org:443, not on the allow-list\n"
        );
        assert_eq!(refusal_lines(&Network::default()), "");
        let value = structured(&network);
        let schema = schema();
        let required = schema["required"].as_array().map(Vec::len);
        assert_eq!(required, Some(4));
        for key in ["connections", "bytes_in", "bytes_out", "refused"] {
            assert!(value.get(key).is_some(), "{key}");
            assert!(schema["properties"].get(key).is_some(), "{key}");
        }
    }
}
