//! What a record holds that this build does not know, at every level, so that rewriting a
//! record keeps it.
//!
//! A newer `start` may add a field anywhere (inside `launch`, `group`, `output`…); an older
//! supervisor that rewrites the record must not drop it. Top-level fields are kept by
//! [`crate::record::Record::unknown`]; the rest are found when the record is read — every key of
//! the file that this build's own rendering of the record lacks, with where it was — and put
//! back where they were when it is written. A key inside a tagged object (`status`, whose
//! `state` names its variant) is put back only while the tag is the same: the facts of one
//! state do not carry over to another.

use serde_json::{Map, Value};

/// The key that names a tagged object's variant.
const TAG: &str = "state";

/// The unknown keys below the top level of a record, and where each was.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NestedUnknowns(Vec<Unknown>);

#[derive(Debug, Clone, PartialEq)]
struct Unknown {
    /// The keys leading to the object that held it (never empty: top-level keys are kept
    /// elsewhere).
    path: Vec<String>,
    key: String,
    value: Value,
    /// That object's tag when it was read, if it had one.
    tag: Option<Value>,
}

impl NestedUnknowns {
    /// The keys of `read` (a record as the file held it) that `known` (this build's rendering of
    /// the same record) lacks, below the top level.
    pub fn between(read: &Value, known: &Value) -> Self {
        let mut found = Vec::new();
        if let (Value::Object(read), Value::Object(known)) = (read, known) {
            for (key, value) in read {
                if let Some(shape) = known.get(key) {
                    collect(value, shape, &mut vec![key.clone()], &mut found);
                }
            }
        }
        NestedUnknowns(found)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Puts each unknown key back into `record` (this build's rendering), where its object still
    /// is and still has the same tag, unless the key is there already.
    pub fn put_into(&self, record: &mut Value) {
        for unknown in &self.0 {
            let Some(object) = object_at(record, &unknown.path) else {
                continue;
            };
            if object.get(TAG).cloned() != unknown.tag {
                continue;
            }
            object
                .entry(unknown.key.clone())
                .or_insert_with(|| unknown.value.clone());
        }
    }
}

fn collect(read: &Value, known: &Value, path: &mut Vec<String>, found: &mut Vec<Unknown>) {
    let (Value::Object(read), Value::Object(known)) = (read, known) else {
        return;
    };
    for (key, value) in read {
        match known.get(key) {
            None => found.push(Unknown {
                path: path.clone(),
                key: key.clone(),
                value: value.clone(),
                tag: read.get(TAG).cloned(),
            }),
            Some(shape) => {
                path.push(key.clone());
                collect(value, shape, path, found);
                path.pop();
            }
        }
    }
}

fn object_at<'a>(value: &'a mut Value, path: &[String]) -> Option<&'a mut Map<String, Value>> {
    let mut here = value;
    for key in path {
        here = here.as_object_mut()?.get_mut(key)?;
    }
    here.as_object_mut()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_unknowns_are_found_and_put_back_where_they_were() {
        let read =
            json!({"a": 1, "launch": {"x": 1, "new": [1, 2], "limits": {"t": 1, "deep": true}}});
        let known = json!({"a": 1, "launch": {"x": 1, "limits": {"t": 1}}});
        let unknowns = NestedUnknowns::between(&read, &known);
        let mut rewritten = json!({"a": 2, "launch": {"x": 3, "limits": {"t": 4}}});
        unknowns.put_into(&mut rewritten);
        assert_eq!(
            rewritten,
            json!({"a": 2, "launch": {"x": 3, "new": [1, 2], "limits": {"t": 4, "deep": true}}})
        );
    }

    #[test]
    fn a_tagged_object_keeps_them_only_in_the_same_state() {
        let read = json!({"status": {"state": "running", "since": 5}});
        let known = json!({"status": {"state": "running"}});
        let unknowns = NestedUnknowns::between(&read, &known);
        let mut same = json!({"status": {"state": "running"}});
        unknowns.put_into(&mut same);
        assert_eq!(same["status"]["since"], 5);
        let mut ended = json!({"status": {"state": "exited", "exit": {"code": 0}}});
        unknowns.put_into(&mut ended);
        assert!(ended["status"].get("since").is_none(), "{ended}");
    }

    #[test]
    fn a_known_key_is_never_overwritten() {
        let read = json!({"output": {"written_bytes": 1, "extra": 9}});
        let known = json!({"output": {"written_bytes": 1}});
        let unknowns = NestedUnknowns::between(&read, &known);
        let mut rewritten = json!({"output": {"written_bytes": 7, "extra": 1}});
        unknowns.put_into(&mut rewritten);
        assert_eq!(
            rewritten,
            json!({"output": {"written_bytes": 7, "extra": 1}})
        );
    }
}
