//! Each manager's programs as they lie on disk (the managers' own layouts, made in a
//! temporary home), followed to what they need.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::PathBuf;

use super::*;
use crate::host_config::never::NeverList;

/// A temporary home (`<tmp>/home`) with a files folder in it, and the machine's other
/// folders beside it (`<tmp>/opt`, `<tmp>/run`).
struct Machine {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
}

impl Machine {
    fn new() -> Machine {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(home.join("work")).unwrap();
        Machine {
            _dir: dir,
            root,
            home,
        }
    }

    /// An executable file at `rel` (under the machine's root) holding `text`.
    fn program(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn file(&self, rel: &str, text: &str) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn link(&self, target: &str, rel: &str) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        symlink(target, path).unwrap();
    }

    /// What `programs` need, found on `path` (folders under the root), with `env`.
    fn needs(&self, path: &[&str], env: &[(&str, &str)], programs: &[&str]) -> Needs {
        let mut env: BTreeMap<String, OsString> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        env.entry("PATH".to_owned())
            .or_insert_with(|| OsString::from("/usr/bin:/bin"));
        let ctx = Context {
            home: self.home.clone(),
            env,
            programs_path: path.iter().map(|p| self.root.join(p)).collect(),
            guard: Guard {
                home: self.home.clone(),
                files: Some(self.home.join("work")),
                never: NeverList::new(&[&self.home], &[], &[self.home.join(".cargo")]),
            },
        };
        let programs: Vec<String> = programs.iter().map(|p| (*p).to_owned()).collect();
        discover(&ctx, &programs)
    }

    fn at(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
}

fn var<'a>(needs: &'a Needs, name: &str) -> Option<&'a str> {
    needs
        .vars
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn rustup_s_proxy_shows_its_folder_and_rustup_home_and_sets_both_homes() {
    let m = Machine::new();
    m.program("home/.cargo/bin/rustup", "\x7fELF");
    m.link("rustup", "home/.cargo/bin/cargo");
    m.file(
        "home/.cargo/credentials.toml",
        "[registry]\ntoken = \"x\"\n",
    );
    m.file("home/.cargo/config.toml", "[build]\njobs = 1\n");
    m.file(
        "home/.rustup/settings.toml",
        "default_toolchain = \"stable\"\n",
    );
    let needs = m.needs(&["home/.cargo/bin", "usr/bin"], &[], &["cargo"]);
    assert_eq!(
        needs.binds.iter().cloned().collect::<Vec<_>>(),
        [m.at("home/.cargo/bin"), m.at("home/.rustup")]
    );
    assert_eq!(
        var(&needs, "CARGO_HOME"),
        Some(m.at("home/.cargo").to_str().unwrap())
    );
    assert_eq!(
        var(&needs, "RUSTUP_HOME"),
        Some(m.at("home/.rustup").to_str().unwrap())
    );
    assert!(needs.settings.contains(&m.at("home/.cargo/config.toml")));
    assert!(
        needs.report[0].contains("rustup's proxy"),
        "{:?}",
        needs.report
    );
    assert!(needs.warnings.is_empty(), "{:?}", needs.warnings);
}

#[test]
fn rustup_s_homes_where_the_user_s_environment_puts_them_even_through_links() {
    let m = Machine::new();
    m.program("data/cargo/bin/rustup", "\x7fELF");
    m.link("rustup", "data/cargo/bin/cargo");
    std::fs::create_dir_all(m.at("data/rustup")).unwrap();
    // The home's `.rustup` is a link to the real one.
    m.link(m.at("data/rustup").to_str().unwrap(), "home/.rustup");
    let needs = m.needs(
        &["data/cargo/bin"],
        &[("CARGO_HOME", m.at("data/cargo").to_str().unwrap())],
        &["cargo"],
    );
    assert!(
        needs.binds.contains(&m.at("data/rustup")),
        "{:?}",
        needs.binds
    );
    assert!(
        needs.binds.contains(&m.at("data/cargo/bin")),
        "{:?}",
        needs.binds
    );
    assert!(needs.links.contains(&Link {
        at: m.at("home/.rustup"),
        target: m.at("data/rustup")
    }));
    assert_eq!(
        var(&needs, "RUSTUP_HOME"),
        Some(m.at("home/.rustup").to_str().unwrap())
    );
    assert_eq!(
        var(&needs, "CARGO_HOME"),
        Some(m.at("data/cargo").to_str().unwrap())
    );
}

#[test]
fn a_pyenv_shim_shows_pyenv_root_named_in_it() {
    let m = Machine::new();
    let root = m.at("home/.pyenv");
    m.program(
        "home/.pyenv/shims/python3",
        &format!(
            "#!/usr/bin/env bash\nset -e\nprogram=\"${{0##*/}}\"\n\nexport PYENV_ROOT=\"{}\"\n\
             exec \"{}/libexec/pyenv\" exec \"$program\" \"$@\"\n",
            root.display(),
            root.display()
        ),
    );
    m.program("home/.pyenv/libexec/pyenv", "#!/usr/bin/env bash\n");
    m.program("home/.pyenv/versions/3.12.1/bin/python3.12", "\x7fELF");
    let needs = m.needs(&["home/.pyenv/shims", "usr/bin"], &[], &["python3"]);
    assert!(needs.binds.contains(&root), "{:?}", needs.binds);
    assert_eq!(var(&needs, "PYENV_ROOT"), Some(root.to_str().unwrap()));
    assert!(needs.settings.contains(&m.at("home/.python-version")));
    assert!(
        needs.report[0].contains("pyenv's shim"),
        "{:?}",
        needs.report
    );
}

#[test]
fn nvm_s_node_and_npm_show_the_version_s_folder_and_keep_npm_s_relative_link() {
    let m = Machine::new();
    let version = "home/.nvm/versions/node/v20.11.0";
    m.program(&format!("{version}/bin/node"), "\x7fELF");
    m.program(
        &format!("{version}/lib/node_modules/npm/bin/npm-cli.js"),
        "#!/usr/bin/env node\n",
    );
    m.link(
        "../lib/node_modules/npm/bin/npm-cli.js",
        &format!("{version}/bin/npm"),
    );
    let bin = format!("{version}/bin");
    let needs = m.needs(&[&bin], &[], &["npm", "node"]);
    assert_eq!(
        needs.binds.iter().cloned().collect::<Vec<_>>(),
        [
            m.at(version),
            m.at(&format!("{version}/lib/node_modules/npm"))
        ]
    );
    assert!(needs.links.contains(&Link {
        at: m.at(&format!("{version}/bin/npm")),
        target: PathBuf::from("../lib/node_modules/npm/bin/npm-cli.js")
    }));
    assert!(needs.report[0].contains("nvm's Node"), "{:?}", needs.report);
    // npm's `env node` found on the programs path: nothing added to PATH.
    assert!(needs.path.is_empty(), "{:?}", needs.path);
}

#[test]
fn fnm_s_per_shell_folder_is_followed_and_warned_about() {
    let m = Machine::new();
    let install = "home/.local/share/fnm/node-versions/v20.11.0/installation";
    m.program(&format!("{install}/bin/node"), "\x7fELF");
    m.link(
        m.at(&format!("{install}/bin")).to_str().unwrap(),
        "run/fnm_multishells/123_456/bin",
    );
    let needs = m.needs(&["run/fnm_multishells/123_456/bin"], &[], &["node"]);
    assert!(needs.binds.contains(&m.at(install)), "{:?}", needs.binds);
    assert!(needs.links.contains(&Link {
        at: m.at("run/fnm_multishells/123_456/bin"),
        target: m.at(&format!("{install}/bin"))
    }));
    assert!(needs.report[0].contains("fnm's Node"), "{:?}", needs.report);
    assert!(
        needs
            .warnings
            .iter()
            .any(|w| w.contains("goes away with that shell")),
        "{:?}",
        needs.warnings
    );
}

#[test]
fn volta_s_shim_shows_volta_home() {
    let m = Machine::new();
    m.program("home/.volta/bin/volta-shim", "\x7fELF");
    m.link("volta-shim", "home/.volta/bin/node");
    let needs = m.needs(&["home/.volta/bin"], &[], &["node"]);
    assert!(
        needs.binds.contains(&m.at("home/.volta")),
        "{:?}",
        needs.binds
    );
    assert_eq!(
        var(&needs, "VOLTA_HOME"),
        Some(m.at("home/.volta").to_str().unwrap())
    );
}

#[test]
fn an_asdf_shim_shows_its_data_and_follows_the_asdf_it_runs_from_path() {
    let m = Machine::new();
    m.program(
        "home/.asdf/shims/ruby",
        "#!/usr/bin/env bash\n# asdf-plugin: ruby 3.3.0\nexec asdf exec \"ruby\" \"$@\"\n",
    );
    m.program("opt/asdf/bin/asdf", "\x7fELF");
    let user_path = format!("{}:/usr/bin", m.at("opt/asdf/bin").display());
    let needs = m.needs(&["home/.asdf/shims"], &[("PATH", &user_path)], &["ruby"]);
    assert!(
        needs.binds.contains(&m.at("home/.asdf")),
        "{:?}",
        needs.binds
    );
    assert!(needs.binds.contains(&m.at("opt/asdf")), "{:?}", needs.binds);
    // `asdf`, and the shim's `bash`, from the user's PATH.
    assert_eq!(
        needs.path,
        [m.at("opt/asdf/bin"), PathBuf::from("/usr/bin")]
    );
    assert_eq!(
        var(&needs, "ASDF_DATA_DIR"),
        Some(m.at("home/.asdf").to_str().unwrap())
    );
    assert!(needs.settings.contains(&m.at("home/.tool-versions")));
}

#[test]
fn mise_s_shim_shows_its_data_and_state_and_names_its_settings() {
    let m = Machine::new();
    m.program("home/.local/bin/mise", "\x7fELF");
    m.link("../../../bin/mise", "home/.local/share/mise/shims/node");
    std::fs::create_dir_all(m.at("home/.local/state/mise")).unwrap();
    let needs = m.needs(&["home/.local/share/mise/shims"], &[], &["node"]);
    assert!(
        needs.binds.contains(&m.at("home/.local/share/mise")),
        "{:?}",
        needs.binds
    );
    assert!(
        needs.binds.contains(&m.at("home/.local/state/mise")),
        "{:?}",
        needs.binds
    );
    // The binary itself, not the whole of `~/.local/bin`.
    assert!(
        needs.binds.contains(&m.at("home/.local/bin/mise")),
        "{:?}",
        needs.binds
    );
    assert!(!needs.binds.contains(&m.at("home/.local/bin")));
    assert!(
        needs
            .settings
            .contains(&m.at("home/.config/mise/config.toml"))
    );
    assert_eq!(
        var(&needs, "MISE_DATA_DIR"),
        Some(m.at("home/.local/share/mise").to_str().unwrap())
    );
}

#[test]
fn an_install_under_opt_and_a_pipx_tool_show_their_roots_only() {
    let m = Machine::new();
    m.program("opt/go/bin/go", "\x7fELF");
    m.link(
        "/usr/bin/python3",
        "home/.local/share/pipx/venvs/tool/bin/python",
    );
    let python = m.at("home/.local/share/pipx/venvs/tool/bin/python");
    m.program(
        "home/.local/share/pipx/venvs/tool/bin/tool",
        &format!("#!{}\nimport tool\n", python.display()),
    );
    m.link("../share/pipx/venvs/tool/bin/tool", "home/.local/bin/tool");
    let needs = m.needs(&["opt/go/bin", "home/.local/bin"], &[], &["go", "tool"]);
    assert_eq!(
        needs.binds.iter().cloned().collect::<Vec<_>>(),
        [m.at("home/.local/share/pipx/venvs/tool"), m.at("opt/go")]
    );
    assert!(needs.links.contains(&Link {
        at: m.at("home/.local/bin/tool"),
        target: PathBuf::from("../share/pipx/venvs/tool/bin/tool")
    }));
}

#[test]
fn a_program_in_a_secret_s_folder_is_not_shown() {
    let m = Machine::new();
    m.program("home/.ssh/bin/tool", "\x7fELF");
    let needs = m.needs(&["home/.ssh/bin"], &[], &["tool"]);
    assert!(needs.binds.is_empty(), "{:?}", needs.binds);
    assert!(
        needs
            .warnings
            .iter()
            .any(|w| w.contains("may not run inside")),
        "{:?}",
        needs.warnings
    );
}

#[test]
fn an_env_name_not_on_the_programs_path_is_found_on_the_user_s_path_and_added() {
    let m = Machine::new();
    m.program("home/tools/bin/script", "#!/usr/bin/env helper-interp\n");
    m.program("opt/interp/bin/helper-interp", "\x7fELF");
    let user_path = m.at("opt/interp/bin").display().to_string();
    let needs = m.needs(&["home/tools/bin"], &[("PATH", &user_path)], &["script"]);
    assert_eq!(needs.path, [m.at("opt/interp/bin")]);
    assert!(
        needs.binds.contains(&m.at("opt/interp")),
        "{:?}",
        needs.binds
    );
    assert!(
        needs.binds.contains(&m.at("home/tools")),
        "{:?}",
        needs.binds
    );
}
