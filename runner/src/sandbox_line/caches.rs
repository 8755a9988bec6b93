//! `{caches}`: the cache folders (`--cache`) bound into the sandbox at their own paths.
//!
//! Read-write where every sandbox gets a layer of its own over them (the reaper makes it in the
//! sandbox's process before its exec, [`lnk_proc::reaper::layers`]): the bind then shows the
//! layer, and what a program writes never reaches the user's folder. Read-only where the
//! layers cannot be made here: a cache is never bound read-write without its layer.

use std::ffi::OsString;

use crate::caches::Caches;

/// The word that stands for the cache folders' binds.
pub const CACHES: &str = "{caches}";

/// The binds `{caches}` stands for: `--bind <real> <path>` for each folder (its real path
/// outside, where the layer is; the path programs name inside), or `--ro-bind` when the layers
/// cannot be made. Nothing without `--cache`.
pub fn binds(caches: &Caches) -> Vec<OsString> {
    let flag = if caches.unlayered.is_some() {
        "--ro-bind"
    } else {
        "--bind"
    };
    caches
        .folders
        .iter()
        .flat_map(|folder| {
            [
                OsString::from(flag),
                folder.real.clone().into_os_string(),
                folder.path.clone().into_os_string(),
            ]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::path::PathBuf;

    use super::*;
    use crate::caches::CacheFolder;
    use crate::testing::words;

    fn caches(unlayered: Option<&str>) -> Caches {
        Caches {
            folders: vec![
                CacheFolder {
                    path: "/home/me/.cargo/registry".into(),
                    real: "/home/me/.cargo/registry".into(),
                },
                CacheFolder {
                    path: "/home/me/.npm".into(),
                    real: "/data/npm".into(),
                },
            ],
            unlayered: unlayered.map(str::to_owned),
        }
    }

    #[test]
    fn each_cache_is_bound_read_write_over_its_layer() {
        let line = words(&["bwrap", "--bind", "{files}", "{files}", "{caches}", "--x"]);
        let expanded = crate::sandbox_line::expand(&line, &PathBuf::from("/w"), &caches(None))
            .unwrap()
            .words;
        assert_eq!(
            expanded,
            words(&[
                "bwrap",
                "--bind",
                "/w",
                "/w",
                "--bind",
                "/home/me/.cargo/registry",
                "/home/me/.cargo/registry",
                "--bind",
                "/data/npm",
                "/home/me/.npm",
                "--x"
            ])
        );
    }

    #[test]
    fn without_layers_each_cache_is_bound_read_only() {
        let binds = binds(&caches(Some("no user namespaces")));
        assert_eq!(binds.len(), 6);
        assert_eq!(binds[0], "--ro-bind");
        assert_eq!(binds[3], "--ro-bind");
    }

    #[test]
    fn without_caches_the_word_is_nothing() {
        let line = words(&["bwrap", "{caches}", "--x"]);
        let expanded = crate::sandbox_line::expand(&line, &PathBuf::from("/w"), &Caches::default())
            .unwrap()
            .words;
        assert_eq!(expanded, words(&["bwrap", "--x"]));
    }
}
