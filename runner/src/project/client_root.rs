//! A client's root, and the folder a project may be: a root's `file://` URI made a path, and
//! the checks every project folder passes before anything runs there, whether it is the
//! client's first root or the folder serve was started in.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// What a person can do about a refused project folder.
pub const WHAT_TO_DO: &str = "start the host in the project's own folder (for instance `cd \
     ~/work/app && claude`), or give serve --files <folder> in place of --files-from roots";

/// The roots a client sent (`ListRootsResult`): the first root's URI, `None` for no roots, or
/// why the answer is not one.
pub fn first_root(result: &Value) -> Result<Option<String>, String> {
    let Some(roots) = result.get("roots").and_then(Value::as_array) else {
        return Err("the client's roots/list answer has no `roots` list".to_owned());
    };
    let Some(first) = roots.first() else {
        return Ok(None);
    };
    match first.get("uri").and_then(Value::as_str) {
        Some(uri) => Ok(Some(uri.to_owned())),
        None => Err("the client's first root has no `uri` text".to_owned()),
    }
}

/// A root's URI as an absolute path: `file://` with an empty host or `localhost`, then an
/// absolute path, percent-decoded; no query, no fragment, no NUL.
pub fn uri_path(uri: &str) -> Result<PathBuf, String> {
    let shown = crate::mcp::protocol::cut_short(uri);
    let refuse = |why: &str| Err(format!("the client's first root `{shown}` {why}"));
    let Some((scheme, rest)) = uri.split_once(':') else {
        return refuse("is not a URI (a root is a file:// URI of an absolute folder)");
    };
    if !scheme.eq_ignore_ascii_case("file") {
        return refuse("is not a file:// URI: Link Run works in folders of this machine only");
    }
    let Some(rest) = rest.strip_prefix("//") else {
        return refuse("is not an absolute file:// URI (file:///<absolute path>)");
    };
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
        return refuse("names another machine: Link Run works in folders of this machine only");
    }
    if path.is_empty() {
        return refuse("holds no path");
    }
    if path.contains(['?', '#']) {
        return refuse("has a query or a fragment, which a folder's URI has not");
    }
    let bytes: Vec<u8> = percent_encoding::percent_decode_str(path).collect();
    if bytes.contains(&0) {
        return refuse("holds a NUL byte");
    }
    Ok(PathBuf::from(OsString::from_vec(bytes)))
}

/// What no project folder may hold or lie in: the home, the state folder, the keyring.
#[derive(Debug, Clone, Default)]
pub struct Forbidden {
    /// The user's home, canonical, when it can be found.
    pub home: Option<PathBuf>,
    /// The state folder as given (`--state`), resolved where it exists.
    pub state: Option<PathBuf>,
    /// The keyring (`--keyring`, with `--way-in`), resolved where it exists.
    pub keyring: Option<PathBuf>,
    /// The cache folders (`--cache`), as they really are: a project's folder is bound
    /// read-write as it is, so it may neither hold one nor lie in one.
    pub caches: Vec<PathBuf>,
}

impl Forbidden {
    /// What `config` forbids: this user's home, its state folder and keyring.
    pub fn of(config: &crate::config::Config) -> Forbidden {
        let background = config.background.as_ref();
        Forbidden {
            home: std::env::home_dir().and_then(|home| home.canonicalize().ok()),
            state: background.map(|b| resolved(&b.given_state)),
            keyring: background
                .and_then(|b| b.way_in.as_ref())
                .map(|w| resolved(&w.keyring)),
            caches: config
                .caches
                .folders
                .iter()
                .map(|cache| cache.real.clone())
                .collect(),
        }
    }
}

/// `path` with its nearest existing part resolved (a folder that does not exist yet is
/// compared by where it will be).
fn resolved(path: &Path) -> PathBuf {
    for existing in path.ancestors() {
        if let Ok(canonical) = existing.canonicalize() {
            let rest = path.strip_prefix(existing).unwrap_or(Path::new(""));
            return canonical.join(rest);
        }
    }
    path.to_path_buf()
}

/// `folder` (absolute; `what` names it for a person) canonical, if a project may be there:
/// an existing folder, not `/`, not the home nor a folder that holds it, not holding nor lying
/// in the state folder or the keyring. Else one line: why, and what to do.
pub fn check_folder(folder: &Path, what: &str, forbidden: &Forbidden) -> Result<PathBuf, String> {
    let refuse = |why: String| Err(format!("{what} {} {why}; {WHAT_TO_DO}", folder.display()));
    if !folder.is_absolute() {
        return refuse("is not an absolute path".to_owned());
    }
    let canonical = match folder.canonicalize() {
        Ok(canonical) => canonical,
        Err(err) => return refuse(format!("cannot be used: {}", lnk_common::Causes(&err))),
    };
    if !canonical.is_dir() {
        return refuse("is not a folder".to_owned());
    }
    if canonical == Path::new("/") {
        return refuse(
            "is the whole file system: the agent's programs could write anywhere you can"
                .to_owned(),
        );
    }
    if let Some(home) = &forbidden.home {
        if *home == canonical {
            return refuse(
                "is your home folder, which holds your keys and settings: the agent's programs \
                 could read and change them"
                    .to_owned(),
            );
        }
        if home.starts_with(&canonical) {
            return refuse(format!(
                "holds your home folder {}, with your keys and settings",
                home.display()
            ));
        }
    }
    let kept_folders = [
        (forbidden.state.as_ref(), "the state folder"),
        (forbidden.keyring.as_ref(), "the keyring"),
    ]
    .into_iter()
    .chain(
        forbidden
            .caches
            .iter()
            .map(|cache| (Some(cache), "a cache folder (--cache)")),
    );
    for (kept, name) in kept_folders {
        let Some(kept) = kept else { continue };
        if *kept == canonical {
            return refuse(format!(
                "is {name}, which no program of the agent's may reach"
            ));
        }
        if kept.starts_with(&canonical) {
            return refuse(format!(
                "holds {name} {}, which no program of the agent's may reach",
                kept.display()
            ));
        }
        if canonical.starts_with(kept) {
            return refuse(format!(
                "lies inside {name} {}, which no program of the agent's may reach",
                kept.display()
            ));
        }
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests;
