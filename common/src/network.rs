//! What a call's or a run's programs did through Link Run's proxy (`--net-allow`): the
//! figures a `command` answer's `network` value carries and a run's record keeps
//! ([`crate::record::Record::network`]).
//!
//! On disk and in an answer, one JSON object:
//!
//! ```json
//! {"connections": 3, "bytes_in": 120433, "bytes_out": 2210,
//!  "refused": [{"host": "example.org", "port": 443, "count": 2, "why": "not on the allow-list"}]}
//! ```
//!
//! - `connections`: connections the proxy made for the programs to a host of the allow-list
//!   (a `CONNECT` tunnel, or one plain HTTP request);
//! - `bytes_in`: bytes from those hosts to the programs; `bytes_out`: bytes from the programs
//!   to those hosts (request heads and bodies included, the proxy's own answers not);
//! - `refused`: each destination the proxy refused, with how many times and why, in the order
//!   first refused. A request that named no destination (not a proxy request, or too slow to
//!   say one) has an empty `host` and port 0.

use serde::{Deserialize, Serialize};

/// The figures of one sandbox's use of the proxy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Network {
    /// Connections made to allowed hosts.
    pub connections: u64,
    /// Bytes from the hosts to the programs.
    pub bytes_in: u64,
    /// Bytes from the programs to the hosts.
    pub bytes_out: u64,
    /// What was refused, by destination and reason, in the order first refused.
    pub refused: Vec<Refused>,
}

/// One refused destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    /// The host as the program named it (a name or an address); empty when none was named.
    pub host: String,
    /// The port it asked for; 0 when none was named.
    pub port: u16,
    /// How many times.
    pub count: u64,
    /// Why, for a person: "not on the allow-list", "resolves to 127.0.0.1, a loopback address".
    pub why: String,
}

impl Refused {
    /// The line an answer's text says for it: `refused: example.org:443, not on the
    /// allow-list` (and how many times, past one).
    pub fn line(&self) -> String {
        let what = if self.host.is_empty() {
            "a request".to_owned()
        } else if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        };
        let times = if self.count > 1 {
            format!(" ({} times)", self.count)
        } else {
            String::new()
        };
        format!("refused: {what}, {}{times}", self.why)
    }
}

impl Network {
    /// The text's lines, one per refused destination.
    pub fn refusal_lines(&self) -> Vec<String> {
        self.refused.iter().map(Refused::line).collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_refusal_reads_as_one_line_naming_the_destination() {
        let mut refused = Refused {
            host: "example.org".into(),
            port: 443,
            count: 1,
            why: "not on the allow-list".into(),
        };
        assert_eq!(
            refused.line(),
            "refused: example.org:443, not on the allow-list"
        );
        refused.count = 3;
        refused.host = "::1".into();
        assert_eq!(
            refused.line(),
            "refused: [::1]:443, not on the allow-list (3 times)"
        );
        refused.host.clear();
        refused.count = 1;
        assert_eq!(refused.line(), "refused: a request, not on the allow-list");
    }

    #[test]
    fn the_json_is_the_documented_object() {
        let network = Network {
            connections: 1,
            bytes_in: 2,
            bytes_out: 3,
            refused: vec![Refused {
                host: "h".into(),
                port: 80,
                count: 1,
                why: "w".into(),
            }],
        };
        let json = serde_json::to_value(&network).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"connections": 1, "bytes_in": 2, "bytes_out": 3,
                "refused": [{"host": "h", "port": 80, "count": 1, "why": "w"}]})
        );
        assert_eq!(serde_json::from_value::<Network>(json).unwrap(), network);
    }
}
