//! Text as the agent and the host are shown it: made harmless ([`escaping`]: every character that
//! could drive a terminal or hide text shown as visible text) and cut only between whole
//! characters ([`utf8`]).

pub mod escaping;
pub mod utf8;
