//! The recommended sandbox line, read from the documentation itself (`docs/sandbox.md`), so that
//! the tests run the line a person copies and nothing else: the block under "### The
//! recommended sandbox line" is
//! the elements of a JSON (and TOML) array, `"--", "/usr/bin/bwrap", …`, with `/home/me/work`
//! standing for the files folder.
use std::path::Path;

/// What a person copies from: the README and the pages of `docs/` that hold lines to copy
/// (the hosts' entries, the recommended sandbox line), one after the other, as built into the
/// tests (a change to any of them rebuilds them).
pub const DOCS: &str = concat!(
    include_str!("../../README.md"),
    "\n",
    include_str!("../../docs/hosts.md"),
    "\n",
    include_str!("../../docs/sandbox.md"),
);

/// The heading of the recommended line's subsection.
pub const HEADING: &str = "### The recommended sandbox line";

/// What the line writes for the files folder.
pub const FILES_PLACEHOLDER: &str = "/home/me/work";

/// The first fenced block after `heading` in the README, without its fences.
pub fn block_after(heading: &str) -> String {
    let at = DOCS
        .find(heading)
        .unwrap_or_else(|| panic!("the docs have no `{heading}`"));
    let rest = &DOCS[at..];
    let open = rest
        .find("\n```")
        .unwrap_or_else(|| panic!("no fenced block after `{heading}`"));
    let body = &rest[open + 4..];
    let body = &body[body.find('\n').unwrap_or(0) + 1..];
    let close = body
        .find("\n```")
        .unwrap_or_else(|| panic!("the block after `{heading}` is not closed"));
    body[..close].to_owned()
}

/// The recommended line's elements as the README writes them, the leading `--` included.
pub fn recommended_elements() -> Vec<String> {
    let block = block_after(HEADING);
    let array = format!("[{block}]");
    serde_json::from_str(&array).unwrap_or_else(|err| {
        panic!("the recommended line is not a JSON array's elements: {err}\n{block}")
    })
}

/// The recommended sandbox prefix (what follows serve's `--`) for `files`, with `extra` put
/// right before the files folder's bind (the tests bind their helper binaries there).
pub fn recommended_sandbox(files: &Path, extra: &[String]) -> Vec<String> {
    let mut elements = recommended_elements();
    assert_eq!(
        elements.first().map(String::as_str),
        Some("--"),
        "the recommended line starts with `--`: {elements:?}"
    );
    elements.remove(0);
    let files = files
        .to_str()
        .unwrap_or_else(|| panic!("test paths are UTF-8: {files:?}"));
    let bind = elements
        .windows(2)
        .position(|pair| pair[0] == "--bind" && pair[1] == FILES_PLACEHOLDER)
        .unwrap_or_else(|| panic!("the recommended line binds {FILES_PLACEHOLDER}: {elements:?}"));
    elements.splice(bind..bind, extra.iter().cloned());
    elements
        .into_iter()
        .map(|e| e.replace(FILES_PLACEHOLDER, files))
        .collect()
}

/// An entry's arguments without what `config` adds for the machine (docs/sandbox.md, "What
/// `config` adds for your machine"): every `--var` (the docs' entries hold none), and the
/// sandbox's words between `--tmpfs /tmp` and the files folder's `--bind`. Returns those
/// arguments, and the removed sandbox words.
pub fn without_machine_part(args: &[String]) -> (Vec<String>, Vec<String>) {
    let mut kept = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if word == "--" {
            kept.push(word.clone());
            kept.extend(words.by_ref().cloned());
            break;
        }
        if word == "--var" {
            words.next();
            continue;
        }
        kept.push(word.clone());
    }
    let start = kept
        .windows(2)
        .position(|pair| pair[0] == "--tmpfs" && pair[1] == "/tmp")
        .map(|at| at + 2);
    let end = kept.iter().rposition(|w| w == "--bind");
    let machine = match (start, end) {
        (Some(start), Some(end)) if start <= end => kept.drain(start..end).collect(),
        _ => Vec::new(),
    };
    (kept, machine)
}

/// The `--var`s among an entry's arguments, as `NAME=VALUE`.
pub fn vars(args: &[String]) -> Vec<String> {
    let end = args.iter().position(|w| w == "--").unwrap_or(args.len());
    args[..end]
        .windows(2)
        .filter(|pair| pair[0] == "--var")
        .map(|pair| pair[1].clone())
        .collect()
}
