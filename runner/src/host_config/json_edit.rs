//! Merging into a host's JSON file by splicing text: the members and array elements that are
//! already there are found with their byte spans (serde_json's `RawValue` borrows them from the
//! text), and only the new member or element is written in, so everything else — other servers,
//! settings, key order, spacing — stays byte for byte. Files with comments or trailing commas
//! (JSONC) are not JSON and are refused, with the entry printed for merging by hand.

use std::fmt;
use std::ops::Range;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::render::Json;

/// Why an edit was not made.
#[derive(Debug, PartialEq)]
pub enum EditError {
    /// The member is there already (the path, then the key).
    Exists(String),
    /// The text is not what was expected (why).
    Malformed(String),
}

/// An object's members in order: each key and its value's raw text.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Ordered;
        impl<'de> Visitor<'de> for Ordered {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, &'de RawValue>()? {
                    members.push((key, value));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(Ordered)
    }
}

/// Where `part` (a slice of `whole`) lies in `whole`.
fn span(whole: &str, part: &str) -> Range<usize> {
    let start = part.as_ptr() as usize - whole.as_ptr() as usize;
    start..start + part.len()
}

/// The leading spaces and tabs of the line that holds byte `at`.
fn line_indent(text: &str, at: usize) -> &str {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = &text[line_start..];
    let end = line
        .find(|c: char| c != ' ' && c != '\t')
        .unwrap_or(line.len());
    &line[..end]
}

/// Whether bytes `a` and `b` of `text` lie on the same line.
fn same_line(text: &str, a: usize, b: usize) -> bool {
    !text[a.min(b)..a.max(b)].contains('\n')
}

/// A JSON document being edited.
pub struct JsonDoc {
    text: String,
}

impl JsonDoc {
    /// `text` (empty: a new file), which must be a JSON object.
    pub fn new(text: &str) -> Result<JsonDoc, EditError> {
        let text = if text.trim().is_empty() {
            "{}\n".to_owned()
        } else {
            text.to_owned()
        };
        let doc = JsonDoc { text };
        doc.object_span(&[])?;
        Ok(doc)
    }

    /// The text as edited.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The span of the object at `path` (keys from the root) and `path.len()`; when a key of
    /// the path is missing, the span of the deepest object found and how many keys led to it.
    fn object_span(&self, path: &[&str]) -> Result<(Range<usize>, usize), EditError> {
        let trimmed = self.text.trim();
        let mut at = span(&self.text, trimmed);
        for (depth, key) in path.iter().enumerate() {
            let members = self.members(at.clone(), &path[..depth])?;
            match members.into_iter().find(|(k, _)| k == key) {
                Some((_, value)) => at = value,
                None => return Ok((at, depth)),
            }
        }
        self.members(at.clone(), path)?;
        Ok((at, path.len()))
    }

    /// The members of the object at `at`, with their values' spans.
    fn members(
        &self,
        at: Range<usize>,
        path: &[&str],
    ) -> Result<Vec<(String, Range<usize>)>, EditError> {
        let part = &self.text[at];
        let Members(members) = serde_json::from_str(part).map_err(|err| {
            let place = if path.is_empty() {
                "the file".to_owned()
            } else {
                format!("`{}`", path.join("."))
            };
            EditError::Malformed(format!(
                "{place} is not a plain JSON object ({err}; comments and trailing commas are \
                 not JSON)"
            ))
        })?;
        Ok(members
            .into_iter()
            .map(|(key, value)| (key, span(&self.text, value.get())))
            .collect())
    }

    /// Sets `path`.`key` to `value`. An existing member is replaced only with `force`, or left
    /// as it is when it holds `value` already and `same_is_fine`; the objects of `path` are
    /// made where missing.
    pub fn set(
        &mut self,
        path: &[&str],
        key: &str,
        value: &Json,
        force: bool,
        same_is_fine: bool,
    ) -> Result<(), EditError> {
        let (at, found) = self.object_span(path)?;
        if found < path.len() {
            // Make the rest of the path, with the member inside, as one new member.
            let mut nested = Json::Obj(vec![(key.to_owned(), value.clone())]);
            for missing in path[found + 1..].iter().rev() {
                nested = Json::Obj(vec![((*missing).to_owned(), nested)]);
            }
            return self.insert(at, path[found], &nested, &path[..found]);
        }
        let members = self.members(at.clone(), path)?;
        match members.iter().find(|(k, _)| k == key) {
            Some((_, existing)) if same_is_fine && self.holds(existing.clone(), value) => Ok(()),
            Some(_) if !force => Err(EditError::Exists(qualified(path, key))),
            Some((_, existing)) => {
                let indent = line_indent(&self.text, existing.start).to_owned();
                self.text
                    .replace_range(existing.clone(), &value.render(&indent));
                Ok(())
            }
            None => self.insert(at, key, value, path),
        }
    }

    /// Whether the value at `at` is `value`.
    fn holds(&self, at: Range<usize>, value: &Json) -> bool {
        let there = serde_json::from_str::<serde_json::Value>(&self.text[at]);
        let wanted = serde_json::from_str::<serde_json::Value>(&value.render(""));
        matches!((there, wanted), (Ok(a), Ok(b)) if a == b)
    }

    /// Adds `item` to the array `path`.`key` unless it holds it already; the array and the
    /// objects of `path` are made where missing.
    pub fn add_to_array(&mut self, path: &[&str], key: &str, item: &str) -> Result<(), EditError> {
        let (at, found) = self.object_span(path)?;
        let wanted = Json::Strings(vec![item.to_owned()]);
        if found < path.len() {
            return self.set(path, key, &wanted, false, false);
        }
        let members = self.members(at, path)?;
        let Some((_, array)) = members.into_iter().find(|(k, _)| k == key) else {
            return self.set(path, key, &wanted, false, false);
        };
        let elements: Vec<&RawValue> =
            serde_json::from_str(&self.text[array.clone()]).map_err(|_| {
                EditError::Malformed(format!("`{}` is not an array", qualified(path, key)))
            })?;
        if elements
            .iter()
            .any(|e| serde_json::from_str::<String>(e.get()).is_ok_and(|s| s == item))
        {
            return Ok(());
        }
        let quoted = super::render::quote(item);
        let spans: Vec<Range<usize>> = elements.iter().map(|e| span(&self.text, e.get())).collect();
        match spans.last() {
            None => self.text.replace_range(array, &format!("[{quoted}]")),
            Some(last) if same_line(&self.text, array.start, last.start) => {
                self.text.insert_str(last.end, &format!(", {quoted}"));
            }
            Some(last) => {
                let indent = line_indent(&self.text, last.start).to_owned();
                self.text
                    .insert_str(last.end, &format!(",\n{indent}{quoted}"));
            }
        }
        Ok(())
    }

    /// Inserts the member `key`: `value` as the last of the object at `at`.
    fn insert(
        &mut self,
        at: Range<usize>,
        key: &str,
        value: &Json,
        path: &[&str],
    ) -> Result<(), EditError> {
        let members = self.members(at.clone(), path)?;
        let object_indent = line_indent(&self.text, at.start).to_owned();
        let quoted = super::render::quote(key);
        match members.last() {
            None => {
                let inner = format!("{object_indent}  ");
                let text = format!(
                    "{{\n{inner}{quoted}: {}\n{object_indent}}}",
                    value.render(&inner)
                );
                self.text.replace_range(at, &text);
            }
            Some((_, last)) => {
                let indent = if same_line(&self.text, at.start, last.start) {
                    format!("{object_indent}  ")
                } else {
                    line_indent(&self.text, last.start).to_owned()
                };
                let text = format!(",\n{indent}{quoted}: {}", value.render(&indent));
                self.text.insert_str(last.end, &text);
            }
        }
        Ok(())
    }
}

/// `path`.`key` for a person.
fn qualified(path: &[&str], key: &str) -> String {
    path.iter()
        .copied()
        .chain(std::iter::once(key))
        .collect::<Vec<_>>()
        .join(".")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::{Value, json};

    fn parsed(doc: &JsonDoc) -> Value {
        serde_json::from_str(doc.text()).unwrap()
    }

    #[test]
    fn a_member_is_spliced_in_and_the_rest_stays_byte_for_byte() {
        let before = "{\n    \"zeta\": 1,\n    \"mcpServers\": {\n        \"other\": {\"command\": \"x\"}\n    },\n    \"alpha\": [1, 2]\n}\n";
        let mut doc = JsonDoc::new(before).unwrap();
        let entry = Json::obj([("command", Json::Str("/b".into()))]);
        doc.set(&["mcpServers"], "link-run", &entry, false, false)
            .unwrap();
        let after = doc.text();
        assert!(after.starts_with("{\n    \"zeta\": 1,\n    \"mcpServers\": {\n        \"other\": {\"command\": \"x\"},\n        \"link-run\": {"), "{after}");
        assert!(
            after.ends_with("    },\n    \"alpha\": [1, 2]\n}\n"),
            "{after}"
        );
        assert_eq!(
            parsed(&doc)["mcpServers"]["link-run"],
            json!({"command": "/b"})
        );
        assert_eq!(
            doc.set(&["mcpServers"], "link-run", &entry, false, false),
            Err(EditError::Exists("mcpServers.link-run".into()))
        );
        let other = Json::obj([("command", Json::Str("/c".into()))]);
        doc.set(&["mcpServers"], "link-run", &other, true, false)
            .unwrap();
        assert_eq!(
            parsed(&doc)["mcpServers"]["link-run"],
            json!({"command": "/c"})
        );
        assert_eq!(parsed(&doc)["mcpServers"]["other"], json!({"command": "x"}));
    }

    #[test]
    fn missing_objects_and_arrays_are_made_and_arrays_grow_once() {
        let mut doc = JsonDoc::new("").unwrap();
        doc.add_to_array(&["permissions"], "allow", "mcp__link-run")
            .unwrap();
        doc.add_to_array(&[], "enabledMcpjsonServers", "link-run")
            .unwrap();
        doc.add_to_array(&[], "enabledMcpjsonServers", "link-run")
            .unwrap();
        assert_eq!(
            parsed(&doc),
            json!({"permissions": {"allow": ["mcp__link-run"]}, "enabledMcpjsonServers": ["link-run"]})
        );
        let mut doc =
            JsonDoc::new("{\"permissions\": {\"allow\": [\"Bash(ls)\"], \"deny\": []}}").unwrap();
        doc.add_to_array(&["permissions"], "allow", "mcp__link-run")
            .unwrap();
        assert_eq!(
            doc.text(),
            "{\"permissions\": {\"allow\": [\"Bash(ls)\", \"mcp__link-run\"], \"deny\": []}}"
        );
    }

    #[test]
    fn what_is_not_a_json_object_is_refused() {
        assert!(matches!(JsonDoc::new("[1]"), Err(EditError::Malformed(_))));
        assert!(matches!(
            JsonDoc::new("{\n // a comment\n \"a\": 1\n}"),
            Err(EditError::Malformed(_))
        ));
        let mut doc = JsonDoc::new("{\"mcpServers\": 3}").unwrap();
        let entry = Json::obj([("command", Json::Str("/b".into()))]);
        assert!(matches!(
            doc.set(&["mcpServers"], "link-run", &entry, false, false),
            Err(EditError::Malformed(_))
        ));
    }
}
