//! The variables a run passes through `/usr/bin/env` (`--var NAME=VALUE`).
//!
//! On disk a plain JSON object, `{"DISPLAY": ":0"}`. Values may be sensitive (an `XAUTHORITY`
//! path today, who knows what tomorrow), so `Debug` shows the names only: a record can be logged.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Variable names and values, in name order.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Vars(pub BTreeMap<String, String>);

impl Vars {
    /// No variables.
    pub fn new() -> Self {
        Vars(BTreeMap::new())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Names and values, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }
}

impl FromIterator<(String, String)> for Vars {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> Self {
        Vars(iter.into_iter().collect())
    }
}

impl fmt::Debug for Vars {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.keys().map(|name| (name, "<redacted>")))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn debug_hides_values_and_json_is_an_object() {
        let vars: Vars = [("XAUTHORITY".to_owned(), "/secret/path".to_owned())]
            .into_iter()
            .collect();
        let debug = format!("{vars:?}");
        assert!(debug.contains("XAUTHORITY"), "{debug}");
        assert!(!debug.contains("/secret/path"), "{debug}");
        assert_eq!(
            serde_json::to_string(&vars).unwrap(),
            r#"{"XAUTHORITY":"/secret/path"}"#
        );
    }
}
