//! Run ids and agent ids.
//!
//! A run id names the run's files in the state folder (`<id>.json`, `<id>.lock`, `<id>.stop`) and
//! its output (`background/<id>.out`), so an id is checked **before** any path is built from it:
//! [`RunId`]'s only constructors, [`RunId::parse`] and [`RunId::generate`], enforce
//! `[a-z0-9]{12,32}`. Nothing in that alphabet can be `.`, `..` or contain `/`.
//!
//! New ids are 20 characters drawn uniformly from the 36 letters and digits with the system's
//! random source (about 103 bits): unguessable, so an agent cannot aim at another run's files,
//! and collision-free in practice (a collision is still refused, see [`crate::lock`]).
//!
//! An [`AgentId`] (`[A-Za-z0-9][A-Za-z0-9._-]{0,63}`) names the agent's key files in a keyring
//! (`<agent>.key`, `<agent>.pub`); its first character can never be `.`, so it is never `..`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::shown::shown;

/// The shortest run id accepted.
pub const RUN_ID_MIN_LEN: usize = 12;
/// The longest run id accepted.
pub const RUN_ID_MAX_LEN: usize = 32;
/// The length of ids this crate generates: ~103 random bits, well inside the accepted range.
pub const RUN_ID_GENERATED_LEN: usize = 20;
/// The longest agent id accepted.
pub const AGENT_ID_MAX_LEN: usize = 64;

const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// An id that could not be had: text that breaks the id rules (nothing was built from it), or
/// no random bytes for a new one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IdError {
    /// A run id that breaks the id rules.
    #[error("invalid run id {shown:?}: {problem}")]
    InvalidRunId {
        /// The offending text, cut to a readable length.
        shown: String,
        /// What is wrong with it.
        problem: IdProblem,
    },

    /// An agent id that breaks the agent id rules.
    #[error("invalid agent id {shown:?}: {problem}")]
    InvalidAgentId {
        /// The offending text, cut to a readable length.
        shown: String,
        /// What is wrong with it.
        problem: IdProblem,
    },

    /// The system's random source failed.
    #[error("getting random bytes")]
    Random {
        /// The cause.
        #[source]
        source: getrandom::Error,
    },
}

/// What is wrong with an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdProblem {
    /// No characters at all.
    #[error("it is empty")]
    Empty,
    /// Fewer characters than the minimum.
    #[error("it has {len} characters, fewer than {min}")]
    TooShort {
        /// Its length.
        len: usize,
        /// The minimum.
        min: usize,
    },
    /// More characters than the maximum.
    #[error("it has {len} characters, more than {max}")]
    TooLong {
        /// Its length.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// A character outside the allowed set.
    #[error("character {ch:?} at position {at} is not allowed")]
    BadChar {
        /// The character.
        ch: char,
        /// Its position, counted in characters from 0.
        at: usize,
    },
}

/// A checked run id: 12 to 32 characters of `[a-z0-9]`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId(String);

impl RunId {
    /// A new random id of [`RUN_ID_GENERATED_LEN`] characters.
    pub fn generate() -> Result<Self, IdError> {
        random_token(RUN_ID_GENERATED_LEN).map(RunId)
    }

    /// Checks `text` against the id rules; the only way from outside text to a `RunId`.
    pub fn parse(text: &str) -> Result<Self, IdError> {
        check(
            text,
            |_, c| c.is_ascii_lowercase() || c.is_ascii_digit(),
            RUN_ID_MIN_LEN,
            RUN_ID_MAX_LEN,
        )
        .map(|()| RunId(text.to_owned()))
        .map_err(|problem| IdError::InvalidRunId {
            shown: shown(text),
            problem,
        })
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A checked agent id: `[A-Za-z0-9][A-Za-z0-9._-]{0,63}`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentId(String);

impl AgentId {
    /// Checks `text` against the agent id rules.
    pub fn parse(text: &str) -> Result<Self, IdError> {
        check(
            text,
            |at, c| c.is_ascii_alphanumeric() || (at > 0 && matches!(c, '.' | '_' | '-')),
            1,
            AGENT_ID_MAX_LEN,
        )
        .map(|()| AgentId(text.to_owned()))
        .map_err(|problem| IdError::InvalidAgentId {
            shown: shown(text),
            problem,
        })
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Checks characters first (so `../x` is reported for its `.`), then the length.
fn check(
    text: &str,
    allowed: impl Fn(usize, char) -> bool,
    min: usize,
    max: usize,
) -> Result<(), IdProblem> {
    if text.is_empty() {
        return Err(IdProblem::Empty);
    }
    if let Some((at, ch)) = text.chars().enumerate().find(|&(at, c)| !allowed(at, c)) {
        return Err(IdProblem::BadChar { ch, at });
    }
    // Every character is ASCII now, so bytes and characters agree.
    let len = text.len();
    if len < min {
        return Err(IdProblem::TooShort { len, min });
    }
    if len > max {
        return Err(IdProblem::TooLong { len, max });
    }
    Ok(())
}

/// `len` characters drawn uniformly from `[a-z0-9]`.
///
/// Bytes of 252 or more are thrown away (252 = 7 × 36), so `byte % 36` carries no bias.
pub(crate) fn random_token(len: usize) -> Result<String, IdError> {
    const UNBIASED_BELOW: u8 = 252;
    let mut out = String::with_capacity(len);
    let mut buf = [0u8; 64];
    while out.len() < len {
        getrandom::fill(&mut buf).map_err(|source| IdError::Random { source })?;
        for &b in buf.iter().filter(|&&b| b < UNBIASED_BELOW) {
            if out.len() == len {
                break;
            }
            out.push(char::from(ALPHABET[usize::from(b % 36)]));
        }
    }
    Ok(out)
}

macro_rules! text_id_impls {
    ($ty:ident) => {
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($ty), self.0)
            }
        }

        impl AsRef<str> for $ty {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl FromStr for $ty {
            type Err = IdError;
            fn from_str(text: &str) -> Result<Self, IdError> {
                $ty::parse(text)
            }
        }

        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        /// Deserializing checks the rules too: a record cannot smuggle in a bad id.
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                $ty::parse(&text).map_err(serde::de::Error::custom)
            }
        }
    };
}

text_id_impls!(RunId);
text_id_impls!(AgentId);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn run_problem(text: &str) -> IdProblem {
        match RunId::parse(text) {
            Err(IdError::InvalidRunId { problem, .. }) => problem,
            other => panic!("{text:?} should be refused, got {other:?}"),
        }
    }

    fn agent_problem(text: &str) -> IdProblem {
        match AgentId::parse(text) {
            Err(IdError::InvalidAgentId { problem, .. }) => problem,
            other => panic!("{text:?} should be refused, got {other:?}"),
        }
    }

    #[test]
    fn generated_ids_are_valid_and_distinct() {
        let ids: Vec<RunId> = (0..200).map(|_| RunId::generate().unwrap()).collect();
        for id in &ids {
            assert_eq!(id.as_str().len(), RUN_ID_GENERATED_LEN);
            assert_eq!(RunId::parse(id.as_str()).unwrap(), *id);
        }
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len());
    }

    #[test]
    fn generated_ids_use_the_whole_alphabet() {
        let mut seen = [false; 36];
        for _ in 0..100 {
            for c in RunId::generate().unwrap().as_str().bytes() {
                let at = ALPHABET.iter().position(|&a| a == c).unwrap();
                seen[at] = true;
            }
        }
        assert!(
            seen.iter().all(|&s| s),
            "2000 draws should hit all 36 characters"
        );
    }

    #[test]
    fn run_id_lengths() {
        assert!(RunId::parse(&"a".repeat(12)).is_ok());
        assert!(RunId::parse(&"9".repeat(32)).is_ok());
        assert_eq!(run_problem(""), IdProblem::Empty);
        assert_eq!(
            run_problem(&"a".repeat(11)),
            IdProblem::TooShort { len: 11, min: 12 }
        );
        assert_eq!(
            run_problem(&"a".repeat(33)),
            IdProblem::TooLong { len: 33, max: 32 }
        );
    }

    #[test]
    fn run_id_characters() {
        assert_eq!(run_problem("../x"), IdProblem::BadChar { ch: '.', at: 0 });
        assert_eq!(
            run_problem("abcdefghijkL"),
            IdProblem::BadChar { ch: 'L', at: 11 }
        );
        assert_eq!(
            run_problem("abcdef/hijkl"),
            IdProblem::BadChar { ch: '/', at: 6 }
        );
        assert_eq!(
            run_problem("abcdef-hijkl"),
            IdProblem::BadChar { ch: '-', at: 6 }
        );
        assert_eq!(
            run_problem("abcdefghijk\0"),
            IdProblem::BadChar { ch: '\0', at: 11 }
        );
        assert_eq!(
            run_problem("abcdéfghijkl"),
            IdProblem::BadChar { ch: 'é', at: 4 }
        );
        assert_eq!(
            run_problem(" abcdefghijkl"),
            IdProblem::BadChar { ch: ' ', at: 0 }
        );
    }

    #[test]
    fn run_id_error_message_is_bounded() {
        let long = "A".repeat(10_000);
        let message = RunId::parse(&long).unwrap_err().to_string();
        assert!(message.len() < 200, "{message}");
        assert!(message.starts_with("invalid run id \"AAAA"), "{message}");
    }

    #[test]
    fn run_id_serde_checks() {
        let id = RunId::parse("abcdefghijkl").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"abcdefghijkl\"");
        assert_eq!(
            serde_json::from_str::<RunId>("\"abcdefghijkl\"").unwrap(),
            id
        );
        let err = serde_json::from_str::<RunId>("\"../../etc/passwd\"").unwrap_err();
        assert!(err.to_string().contains("invalid run id"), "{err}");
    }

    #[test]
    fn agent_ids() {
        for good in ["a", "Z", "0", "agent-1.main_x", &"a".repeat(64)] {
            assert!(AgentId::parse(good).is_ok(), "{good}");
        }
        assert_eq!(agent_problem(""), IdProblem::Empty);
        assert_eq!(agent_problem("."), IdProblem::BadChar { ch: '.', at: 0 });
        assert_eq!(agent_problem(".."), IdProblem::BadChar { ch: '.', at: 0 });
        assert_eq!(agent_problem("-a"), IdProblem::BadChar { ch: '-', at: 0 });
        assert_eq!(agent_problem("a/b"), IdProblem::BadChar { ch: '/', at: 1 });
        assert_eq!(agent_problem("a b"), IdProblem::BadChar { ch: ' ', at: 1 });
        assert_eq!(
            agent_problem(&"a".repeat(65)),
            IdProblem::TooLong { len: 65, max: 64 }
        );
    }
}
