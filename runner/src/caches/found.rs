//! This machine's caches, found as each tool finds its own: its environment variable first,
//! then its settings file, then its default.
//!
//! | tool | folders | from |
//! |---|---|---|
//! | cargo | `registry/`, `git/` of `CARGO_HOME` | `CARGO_HOME`, else `~/.cargo` |
//! | npm | its cache | `npm_config_cache` (any case), else `cache=` in the user's `.npmrc` (`npm_config_userconfig`, else `~/.npmrc`), else `~/.npm` |
//! | pip | its cache | `PIP_CACHE_DIR`, else `cache-dir` in `[global]` of pip's files (`/etc/xdg/pip/pip.conf`, `/etc/pip.conf`, `~/.pip/pip.conf`, `$XDG_CONFIG_HOME/pip/pip.conf`, `PIP_CONFIG_FILE`; the last one read wins), else `$XDG_CACHE_HOME/pip` or `~/.cache/pip`; none with `PIP_NO_CACHE_DIR` |
//! | Go | `GOMODCACHE`, `GOCACHE` | each variable, else Go's env file (`GOENV`, else `$XDG_CONFIG_HOME/go/env` or `~/.config/go/env`), else `$GOPATH/pkg/mod` (`GOPATH`'s first folder, else `~/go`) and `$XDG_CACHE_HOME/go-build` or `~/.cache/go-build`; none for `GOCACHE=off` |
//!
//! Only folders that exist are found, and only absolute paths are taken (`~/` and `$HOME/` are
//! the home, as the tools read them). Reading `.npmrc` (which may hold tokens) takes its
//! `cache` line alone; the file itself is never bound.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A cache found: the tool's name and its folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Whose cache (`cargo`, `npm`, `pip`, `go`).
    pub tool: &'static str,
    /// The folder, as the tool names it.
    pub path: PathBuf,
}

/// The caches of this machine for the person whose home is `home`, from this process's
/// environment.
pub fn on_this_machine(home: &Path) -> Vec<Found> {
    find(home, &|name| std::env::var_os(name), Path::new("/etc"))
}

/// The caches for `home`, with `var` as the environment and `etc` as the system's settings
/// folder.
pub fn find(home: &Path, var: &dyn Fn(&str) -> Option<OsString>, etc: &Path) -> Vec<Found> {
    let tools = Tools { home, var, etc };
    let mut found = Vec::new();
    let cargo_home = tools.path_var("CARGO_HOME").unwrap_or(home.join(".cargo"));
    for sub in ["registry", "git"] {
        found.push(("cargo", Some(cargo_home.join(sub))));
    }
    found.push(("npm", Some(tools.npm())));
    found.push(("pip", tools.pip()));
    found.push(("go", tools.go("GOMODCACHE")));
    found.push(("go", tools.go("GOCACHE")));
    let mut out: Vec<Found> = Vec::new();
    for (tool, path) in found {
        let Some(path) = path else { continue };
        if path.is_dir() && !out.iter().any(|f| f.path == path) {
            out.push(Found { tool, path });
        }
    }
    out
}

struct Tools<'a> {
    home: &'a Path,
    var: &'a dyn Fn(&str) -> Option<OsString>,
    etc: &'a Path,
}

impl Tools<'_> {
    /// A variable's value as an absolute path (`~/` the home); `None` when unset, empty or
    /// relative.
    fn path_var(&self, name: &str) -> Option<PathBuf> {
        let value = (self.var)(name)?;
        self.path(value.to_str()?)
    }

    /// `text` as an absolute path: `~/…`, `$HOME/…` and `${HOME}/…` in the home.
    fn path(&self, text: &str) -> Option<PathBuf> {
        let text = text.trim();
        let text = text
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
            .unwrap_or(text);
        let rest = ["~/", "$HOME/", "${HOME}/"]
            .iter()
            .find_map(|prefix| text.strip_prefix(prefix));
        let path = match rest {
            Some(rest) => self.home.join(rest),
            None if text == "~" => self.home.to_path_buf(),
            None => PathBuf::from(text),
        };
        (path.is_absolute() && !text.is_empty()).then_some(path)
    }

    /// Where XDG says (`$XDG_<NAME>`, absolute), else `~/<default>`.
    fn xdg(&self, name: &str, default: &str) -> PathBuf {
        self.path_var(name)
            .unwrap_or_else(|| self.home.join(default))
    }

    fn npm(&self) -> PathBuf {
        for name in ["npm_config_cache", "NPM_CONFIG_CACHE"] {
            if let Some(path) = self.path_var(name) {
                return path;
            }
        }
        let userconfig = ["npm_config_userconfig", "NPM_CONFIG_USERCONFIG"]
            .iter()
            .find_map(|name| self.path_var(name))
            .unwrap_or_else(|| self.home.join(".npmrc"));
        let from_file = read_small(&userconfig).and_then(|text| {
            text.lines()
                .filter_map(|line| line.split_once('='))
                .filter(|(key, _)| key.trim() == "cache")
                .filter_map(|(_, value)| self.path(value))
                .next_back()
        });
        from_file.unwrap_or_else(|| self.home.join(".npm"))
    }

    fn pip(&self) -> Option<PathBuf> {
        if (self.var)("PIP_NO_CACHE_DIR").is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
        {
            return None;
        }
        if let Some(path) = self.path_var("PIP_CACHE_DIR") {
            return Some(path);
        }
        let config = self.xdg("XDG_CONFIG_HOME", ".config");
        let mut files = vec![
            self.etc.join("xdg/pip/pip.conf"),
            self.etc.join("pip.conf"),
            self.home.join(".pip/pip.conf"),
            config.join("pip/pip.conf"),
        ];
        files.extend(self.path_var("PIP_CONFIG_FILE"));
        let from_files = files
            .iter()
            .filter_map(|file| read_small(file))
            .filter_map(|text| ini_value(&text, "global", &["cache-dir", "cache_dir"]))
            .filter_map(|value| self.path(&value))
            .next_back();
        Some(from_files.unwrap_or_else(|| self.xdg("XDG_CACHE_HOME", ".cache").join("pip")))
    }

    fn go(&self, name: &str) -> Option<PathBuf> {
        let env_file = self
            .path_var("GOENV")
            .unwrap_or_else(|| self.xdg("XDG_CONFIG_HOME", ".config").join("go/env"));
        let from_file = |key: &str| {
            read_small(&env_file).and_then(|text| {
                text.lines()
                    .filter_map(|line| line.split_once('='))
                    .filter(|(k, _)| k.trim() == key)
                    .map(|(_, v)| v.trim().to_owned())
                    .next_back()
            })
        };
        let setting = |key: &str| {
            (self.var)(key)
                .and_then(|v| v.into_string().ok())
                .filter(|v| !v.is_empty())
                .or_else(|| from_file(key))
        };
        if let Some(value) = setting(name) {
            return if value == "off" {
                None
            } else {
                self.path(&value)
            };
        }
        if name == "GOCACHE" {
            return Some(self.xdg("XDG_CACHE_HOME", ".cache").join("go-build"));
        }
        let gopath = setting("GOPATH")
            .and_then(|v| v.split(':').next().and_then(|first| self.path(first)))
            .unwrap_or_else(|| self.home.join("go"));
        Some(gopath.join("pkg/mod"))
    }
}

/// A settings file's text, when it is there and small (64 KiB at most).
fn read_small(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > 64 * 1024 {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// The last value of one of `keys` in `[section]` of an INI file (`key = value` or
/// `key: value`).
fn ini_value(text: &str, section: &str, keys: &[&str]) -> Option<String> {
    let mut current = String::new();
    let mut found = None;
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name.trim().to_owned();
            continue;
        }
        if current != section {
            continue;
        }
        let Some((key, value)) = line.split_once(['=', ':']) else {
            continue;
        };
        if keys.contains(&key.trim()) {
            found = Some(value.trim().to_owned());
        }
    }
    found
}

#[cfg(test)]
mod tests;
