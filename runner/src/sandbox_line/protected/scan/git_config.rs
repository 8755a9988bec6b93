//! Git's configuration files as Link Run reads them: the paths a configuration's text names
//! (`core.hooksPath`, `include.path`, `includeIf.<condition>.path`) and `~` expanded as git
//! expands it. Read both for a repository's own configuration ([`super::config_named`]) and for the
//! user's ([`super::user_config`]).

use std::ffi::OsString;
use std::path::Path;

/// The paths a configuration's text names: `core.hooksPath`'s, then the included files'.
pub(super) fn named_paths(text: &str) -> (Vec<String>, Vec<String>) {
    let mut hooks = Vec::new();
    let mut includes = Vec::new();
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix('[') {
            let Some(end) = rest.find(']') else { continue };
            section = rest[..end]
                .split(['"', ' ', '\t'])
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase();
        let value = unquote(value);
        if value.is_empty() {
            continue;
        }
        match (section.as_str(), key.as_str()) {
            ("core", "hookspath") => hooks.push(value),
            ("include" | "includeif", "path") => includes.push(value),
            _ => {}
        }
    }
    (hooks, includes)
}

/// A value as git reads it: a comment after it left out, quotes taken away.
fn unquote(value: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = value.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => {
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            }
            '#' | ';' if !quoted => break,
            c => out.push(c),
        }
    }
    out.trim().to_owned()
}

/// `value` with a leading `~/` (or a lone `~`) made the home's path, as git expands it; `None`
/// for `~user/…`, or `~` without a home.
pub(super) fn expand_home(value: &str, home: Option<&Path>) -> Option<String> {
    let Some(rest) = value.strip_prefix('~') else {
        return Some(value.to_owned());
    };
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    let mut full = OsString::from(home?.as_os_str());
    full.push(rest);
    full.into_string().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_home_is_expanded_as_git_expands_it() {
        let home = Some(Path::new("/h"));
        assert_eq!(expand_home("~/x", home).as_deref(), Some("/h/x"));
        assert_eq!(expand_home("~", home).as_deref(), Some("/h"));
        assert_eq!(expand_home(".githooks", home).as_deref(), Some(".githooks"));
        assert_eq!(expand_home("~bob/x", home), None);
        assert_eq!(expand_home("~/x", None), None);
    }

    #[test]
    fn the_hooks_path_and_the_includes_are_read_as_git_reads_them() {
        let text = "[core]\n\trepositoryformatversion = 0\n\tHooksPath = \".githooks\" # ours\n\
                    [include]\n\tpath = ../shared.cfg\n\
                    [includeIf \"gitdir:~/work/\"]\n\tpath=extra.cfg ; note\n\
                    [remote \"origin\"]\n\tpath = not-this\n";
        let (hooks, includes) = named_paths(text);
        assert_eq!(hooks, [".githooks"]);
        assert_eq!(includes, ["../shared.cfg", "extra.cfg"]);
    }
}
