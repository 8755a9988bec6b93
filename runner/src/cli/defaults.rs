//! Where things are when no flag says: `lnk-link-supervise` beside this executable, and
//! Link's keyring.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::paths::{absolute, must_be_absolute};
use super::refusal::{Refusal, refuse};

/// `lnk-link-supervise`: `$LNK_SUPERVISE`, else next to this executable.
pub(super) fn find_supervise() -> Result<PathBuf, Refusal> {
    let path = match std::env::var_os("LNK_SUPERVISE").filter(|v| !v.is_empty()) {
        Some(path) => absolute(Path::new(&path), "LNK_SUPERVISE")?,
        None => match std::env::current_exe() {
            Ok(exe) => exe.with_file_name(lnk_common::commands::SUPERVISOR),
            Err(e) => {
                return refuse(format!(
                    "cannot find this executable to find lnk-link-supervise beside it: {e}"
                ));
            }
        },
    };
    if !crate::program::is_executable_file(&path) {
        return refuse(format!(
            "background runs need lnk-link-supervise, and {} is not an executable file \
             (install it beside lnk-link-run or set LNK_SUPERVISE)",
            path.display()
        ));
    }
    Ok(path)
}

/// Link's keyring, from this process's environment: [`keyring_from`].
pub(super) fn default_keyring() -> Result<PathBuf, Refusal> {
    keyring_from(&|name| std::env::var_os(name))
}

/// Link's keyring: `$LNK_KEYRING`, else `$XDG_CONFIG_HOME/lnk/keyring`, else
/// `~/.config/lnk/keyring`, with `var` reading the environment. A relative
/// `$XDG_CONFIG_HOME` is ignored, as the XDG base directory rules say; a relative
/// `$LNK_KEYRING` or `$HOME` is refused like a relative flag. An empty variable is unset.
fn keyring_from(var: &dyn Fn(&str) -> Option<OsString>) -> Result<PathBuf, Refusal> {
    let non_empty = |name: &str| var(name).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("LNK_KEYRING") {
        let dir = PathBuf::from(dir);
        must_be_absolute(&dir, "LNK_KEYRING")?;
        return Ok(dir);
    }
    if let Some(dir) = non_empty("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
    {
        return Ok(dir.join("lnk/keyring"));
    }
    if let Some(home) = non_empty("HOME") {
        let home = PathBuf::from(home);
        must_be_absolute(&home, "HOME")?;
        return Ok(home.join(".config/lnk/keyring"));
    }
    refuse("--keyring is not given and neither LNK_KEYRING, XDG_CONFIG_HOME nor HOME is set")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// [`keyring_from`] over these variables alone.
    fn keyring(vars: &[(&str, &str)]) -> Result<PathBuf, String> {
        let var = |name: &str| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| OsString::from(v))
        };
        keyring_from(&var).map_err(|e| e.to_string())
    }

    #[test]
    fn the_keyring_comes_from_lnk_keyring_then_xdg_then_home() {
        let all = [
            ("LNK_KEYRING", "/k"),
            ("XDG_CONFIG_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(keyring(&all), Ok(PathBuf::from("/k")));
        assert_eq!(keyring(&all[1..]), Ok(PathBuf::from("/x/lnk/keyring")));
        assert_eq!(
            keyring(&all[2..]),
            Ok(PathBuf::from("/h/.config/lnk/keyring"))
        );
        // Empty is unset; a relative XDG_CONFIG_HOME is ignored.
        let odd = [
            ("LNK_KEYRING", ""),
            ("XDG_CONFIG_HOME", "rel"),
            ("HOME", "/h"),
        ];
        assert_eq!(keyring(&odd), Ok(PathBuf::from("/h/.config/lnk/keyring")));
    }

    #[test]
    fn a_relative_keyring_or_home_or_none_is_refused() {
        let err = keyring(&[("LNK_KEYRING", "k")]).unwrap_err();
        assert!(err.starts_with("LNK_KEYRING k is relative"), "{err}");
        let err = keyring(&[("HOME", "~")]).unwrap_err();
        assert!(err.starts_with("HOME ~ starts with `~`"), "{err}");
        let err = keyring(&[]).unwrap_err();
        assert!(
            err.contains("neither LNK_KEYRING, XDG_CONFIG_HOME nor HOME"),
            "{err}"
        );
    }
}
