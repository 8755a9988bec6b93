#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use super::*;

/// A home with `folders` made in it, and the environment `vars`.
fn found(
    folders: &[&str],
    files: &[(&str, &str)],
    vars: &[(&str, &str)],
) -> (PathBuf, Vec<(String, PathBuf)>) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.keep().canonicalize().unwrap();
    for folder in folders {
        std::fs::create_dir_all(home.join(folder)).unwrap();
    }
    for (file, text) in files {
        let path = home.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text.replace("HOME", home.to_str().unwrap())).unwrap();
    }
    let vars: HashMap<String, OsString> = vars
        .iter()
        .map(|(k, v)| {
            (
                (*k).to_owned(),
                v.replace("HOME", home.to_str().unwrap()).into(),
            )
        })
        .collect();
    let found = find(&home, &|name| vars.get(name).cloned(), &home.join("etc"));
    let list = found
        .into_iter()
        .map(|f| {
            (
                f.tool.to_owned(),
                f.path.strip_prefix(&home).unwrap().to_path_buf(),
            )
        })
        .collect();
    (home, list)
}

fn list(pairs: &[(&str, &str)]) -> Vec<(String, PathBuf)> {
    pairs
        .iter()
        .map(|(t, p)| ((*t).to_owned(), PathBuf::from(p)))
        .collect()
}

#[test]
fn each_tool_s_default_folder_is_found_when_it_exists() {
    let (_, got) = found(
        &[
            ".cargo/registry",
            ".cargo/git",
            ".cargo/bin",
            ".npm",
            ".cache/pip",
            "go/pkg/mod",
            ".cache/go-build",
        ],
        &[],
        &[],
    );
    assert_eq!(
        got,
        list(&[
            ("cargo", ".cargo/registry"),
            ("cargo", ".cargo/git"),
            ("npm", ".npm"),
            ("pip", ".cache/pip"),
            ("go", "go/pkg/mod"),
            ("go", ".cache/go-build"),
        ])
    );
    let (_, none) = found(&[".cargo/bin"], &[], &[]);
    assert_eq!(none, list(&[]));
}

#[test]
fn the_tools_variables_come_first() {
    let (_, got) = found(
        &[
            "c/registry",
            "n",
            "p",
            "gm",
            "gc",
            "x/pip",
            ".cargo/registry",
        ],
        &[],
        &[
            ("CARGO_HOME", "HOME/c"),
            ("npm_config_cache", "HOME/n"),
            ("PIP_CACHE_DIR", "HOME/p"),
            ("GOMODCACHE", "HOME/gm"),
            ("GOCACHE", "HOME/gc"),
            ("XDG_CACHE_HOME", "HOME/x"),
        ],
    );
    assert_eq!(
        got,
        list(&[
            ("cargo", "c/registry"),
            ("npm", "n"),
            ("pip", "p"),
            ("go", "gm"),
            ("go", "gc")
        ])
    );
    // Relative values are not the tools' folders: the default stands.
    let (_, got) = found(&[".cargo/registry"], &[], &[("CARGO_HOME", "c")]);
    assert_eq!(got, list(&[("cargo", ".cargo/registry")]));
}

#[test]
fn the_tools_settings_files_come_next() {
    let (_, got) = found(
        &["npm-cache", "pip-cache", "gp/pkg/mod", "gc"],
        &[
            (
                ".npmrc",
                "//registry/:_authToken=secret\ncache = ~/npm-cache\n",
            ),
            (
                ".config/pip/pip.conf",
                "[install]\ncache-dir = /nowhere\n[global]\ncache-dir = HOME/pip-cache\n",
            ),
            (".config/go/env", "GOPATH=HOME/gp\nGOCACHE=HOME/gc\n"),
        ],
        &[],
    );
    assert_eq!(
        got,
        list(&[
            ("npm", "npm-cache"),
            ("pip", "pip-cache"),
            ("go", "gp/pkg/mod"),
            ("go", "gc")
        ])
    );
}

#[test]
fn a_cache_turned_off_is_not_found() {
    let (_, got) = found(
        &[".cache/pip", ".cache/go-build", "off"],
        &[],
        &[("PIP_NO_CACHE_DIR", "1"), ("GOCACHE", "off")],
    );
    assert_eq!(got, list(&[]));
}

#[test]
fn ini_values_are_read_from_their_section() {
    let text = "# c\n[global]\ntimeout = 3\ncache_dir: /a\n[other]\ncache-dir = /b\n";
    assert_eq!(
        ini_value(text, "global", &["cache-dir", "cache_dir"]),
        Some("/a".into())
    );
    assert_eq!(ini_value(text, "none", &["cache-dir"]), None);
}
