//! An error with the causes behind it, for a message a person or an agent reads:
//! `parsing record /s/abc.json: expected value at line 1 column 1`, not just its first part.
//!
//! Every message both binaries build from an error goes through [`Causes`], in agent texts and
//! in logs alike. A cause whose text the message already holds (an error that prints its source
//! itself) is not printed again.

use std::fmt;

/// Shows an error, then each cause in turn, `: `-separated.
pub struct Causes<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for Causes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = self.0.to_string();
        let mut source = self.0.source();
        while let Some(cause) = source {
            let text = cause.to_string();
            if !text.is_empty() && !shown.contains(&text) {
                shown.push_str(": ");
                shown.push_str(&text);
            }
            source = cause.source();
        }
        f.write_str(&shown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("opening {path}")]
    struct Opening {
        path: &'static str,
        #[source]
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("reading the record: {0}")]
    struct SaysItsCause(#[source] std::io::Error);

    fn not_found() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::NotFound)
    }

    #[test]
    fn each_cause_is_shown_once() {
        let opening = Opening {
            path: "/s/a.json",
            source: not_found(),
        };
        assert_eq!(
            Causes(&opening).to_string(),
            format!("opening /s/a.json: {}", not_found())
        );
        let says = SaysItsCause(not_found());
        assert_eq!(
            Causes(&says).to_string(),
            format!("reading the record: {}", not_found())
        );
    }
}
