//! The entries as text: a small JSON value whose keys keep the order they are given in (the
//! order the hosts' own documentation and the README show), written two spaces per level, with
//! serve's long `args` packed as the README writes them: a flag and its values together, lines
//! of at most [`WIDTH`] characters, the sandbox from a line of its own.

/// The longest line the packed `args` make, where a flag and its values fit.
pub const WIDTH: usize = 100;

/// A JSON value with ordered keys.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// A string.
    Str(String),
    /// A whole number.
    Num(u64),
    /// true or false.
    Bool(bool),
    /// Strings on one line: `["a", "b"]`.
    Strings(Vec<String>),
    /// serve's arguments, packed over several lines.
    Args(Vec<String>),
    /// An object, its members in this order.
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// An object of `members`.
    #[cfg(test)]
    pub fn obj<const N: usize>(members: [(&str, Json); N]) -> Json {
        Json::Obj(
            members
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        )
    }

    /// The value on one line, as a one-line command takes it.
    pub fn compact(&self) -> String {
        match self {
            Json::Strings(items) | Json::Args(items) => {
                let items: Vec<String> = items.iter().map(|s| quote(s)).collect();
                format!("[{}]", items.join(","))
            }
            Json::Obj(members) => {
                let members: Vec<String> = members
                    .iter()
                    .map(|(key, value)| format!("{}:{}", quote(key), value.compact()))
                    .collect();
                format!("{{{}}}", members.join(","))
            }
            other => other.render(""),
        }
    }

    /// The value as text, its first line where the caller puts it and the next ones indented
    /// by `indent` (the indentation of the line it starts on).
    pub fn render(&self, indent: &str) -> String {
        match self {
            Json::Str(text) => quote(text),
            Json::Num(n) => n.to_string(),
            Json::Bool(b) => b.to_string(),
            Json::Strings(items) => {
                let items: Vec<String> = items.iter().map(|s| quote(s)).collect();
                format!("[{}]", items.join(", "))
            }
            // The continuation lines line up after `"args": [`, as in the README.
            Json::Args(items) => {
                let quoted: Vec<String> = items.iter().map(|s| quote(s)).collect();
                let column = indent.len() + "\"args\": [".len();
                let starts = line_starts(items, &quoted, column);
                format!("[{}]", join_lines(&quoted, &starts, &" ".repeat(column)))
            }
            Json::Obj(members) if members.is_empty() => "{}".to_owned(),
            Json::Obj(members) => {
                let inner = format!("{indent}  ");
                let lines: Vec<String> = members
                    .iter()
                    .map(|(key, value)| format!("{inner}{}: {}", quote(key), value.render(&inner)))
                    .collect();
                format!("{{\n{}\n{indent}}}", lines.join(",\n"))
            }
        }
    }
}

/// `text` as a JSON string.
pub fn quote(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

/// The indices of `items` that start a line when they are written (as `quoted`) from column
/// `start`: a group is a word starting with `-` and the words after it that do not; groups fill
/// a line up to [`WIDTH`]; the sandbox (`--` and its program) starts a line.
pub fn line_starts(items: &[String], quoted: &[String], start: usize) -> Vec<usize> {
    // Each group: its first index, its width, and whether it is the sandbox's start.
    let mut groups: Vec<(usize, usize, bool)> = Vec::new();
    for (i, (item, text)) in items.iter().zip(quoted).enumerate() {
        let after_separator =
            i > 0 && items[i - 1] == "--" && groups.last().is_some_and(|g| g.0 == i - 1);
        match groups.last_mut() {
            Some(group) if !item.starts_with('-') || after_separator => group.1 += 2 + text.len(),
            _ => groups.push((i, text.len(), item == "--")),
        }
    }
    let mut starts = Vec::new();
    let mut width = 0;
    for (first, len, separator) in groups {
        if starts.is_empty() || separator || start + width + 2 + len + 1 > WIDTH {
            starts.push(first);
            width = len;
        } else {
            width += 2 + len;
        }
    }
    starts
}

/// `quoted` joined with `, `, and with `,\n` and `pad` before each index of `starts`.
pub fn join_lines(quoted: &[String], starts: &[usize], pad: &str) -> String {
    let mut out = String::new();
    for (i, text) in quoted.iter().enumerate() {
        if i > 0 {
            out.push(',');
            if starts.contains(&i) {
                out.push('\n');
                out.push_str(pad);
            } else {
                out.push(' ');
            }
        }
        out.push_str(text);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn objects_keep_their_order_and_parse() {
        let args: Vec<String> = ["serve", "--files", "/w", "--", "/usr/bin/bwrap", "--bind"]
            .into_iter()
            .map(str::to_owned)
            .chain(["/w".to_owned(), "/w".to_owned()])
            .collect();
        let entry = Json::obj([
            ("command", Json::Str("/bin/lnk-link-run".into())),
            ("args", Json::Args(args.clone())),
            ("timeout", Json::Num(300000)),
            ("trust", Json::Bool(true)),
        ]);
        let text = Json::obj([("mcpServers", Json::obj([("link-run", entry)]))]).render("");
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            parsed["mcpServers"]["link-run"]["args"],
            serde_json::json!(args)
        );
        assert!(text.find("\"command\"").unwrap() < text.find("\"args\"").unwrap());
        assert!(
            text.contains("\n               \"--\", \"/usr/bin/bwrap\", \"--bind\""),
            "{text}"
        );
    }
}
