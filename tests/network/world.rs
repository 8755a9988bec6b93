//! A test's network: a registry (a simple index, a wheel, a file) and a forge (a repository
//! served dumb) as sites on this machine's loopback, a host that echoes, the names that lead
//! to them, and a `serve` whose proxy allows them.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::Value;

use lnk_tests::net::{Echo, Names, Site, dumb_repository, simple_index};
use lnk_tests::results::{structured, text};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::Sandbox;
use lnk_tests::setup::ServeBuilder;

/// The user the tests run serve as when not as root.
pub const NOBODY: u32 = 65534;
/// What the registry's `/hello` holds.
pub const HELLO: &str = "hello from the registry\n";
/// What the forge's repository's README holds.
pub const README: &str = "hello from the forge\n";
/// The programs the calls run.
const PROGRAMS: &[&str] = &["curl", "python3", "git", "sh", "cat", "env", "sleep"];

/// Whether the tests can run here: root (the mount namespace of the names, `nobody`), and the
/// programs the calls use. A reason when not.
pub fn usable() -> bool {
    if !rustix::process::geteuid().is_root() {
        lnk_tests::skip::skip("the network tests need root (a mount namespace for their names)");
        return false;
    }
    for program in [
        "/usr/bin/curl",
        "/usr/bin/python3",
        "/usr/bin/git",
        "/usr/bin/unshare",
    ] {
        if !Path::new(program).exists() {
            lnk_tests::skip::skip(&format!("{program} is missing"));
            return false;
        }
    }
    Sandbox::Bwrap.usable()
}

/// The stand-ins and their names.
pub struct World {
    /// The test's folder, `files/` and `state/` in it (its runs are killed with it).
    pub bg: Bg,
    /// The registry.
    pub registry: Site,
    /// The forge.
    pub forge: Site,
    /// The host that echoes.
    pub echo: Echo,
    /// The names.
    pub names: Names,
    /// The user serve runs as (`None`: root).
    pub user: Option<u32>,
}

impl World {
    /// The stand-ins, for a serve that runs as `user` under `sandbox`.
    pub fn new(sandbox: Sandbox, user: Option<u32>) -> World {
        let bg = Bg::new(sandbox);
        let setup = &bg.setup;
        let sites = setup.path("sites");
        let registry_root = sites.join("registry");
        let forge_root = sites.join("forge");
        for dir in [&registry_root, &forge_root] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(registry_root.join("hello"), HELLO).unwrap();
        simple_index(&registry_root);
        dumb_repository(&forge_root, README);
        let names = Names::new(
            setup.root.path(),
            &[
                ("registry.test", "127.0.0.1"),
                ("forge.test", "127.0.0.1"),
                ("unlisted.test", "127.0.0.1"),
                ("loopback.test", "127.0.0.1"),
                ("private.test", "10.0.0.1"),
            ],
        );
        if let Some(uid) = user {
            let root = setup.root.path();
            std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
            chown_all(&setup.files, uid);
        }
        World {
            registry: Site::serve(&registry_root),
            forge: Site::serve(&forge_root),
            echo: Echo::start(),
            bg,
            names,
            user,
        }
    }

    /// The rules that allow the registry, the forge and the echo: each by name, and its
    /// loopback address at its port (the names lead to this machine's loopback, which only a
    /// listed address opens).
    pub fn rules(&self) -> Vec<String> {
        let (r, f, e) = (self.registry.port(), self.forge.port(), self.echo.port());
        vec![
            format!("registry.test:{r}"),
            format!("forge.test:{f}"),
            format!("forge.test:{e}"),
            format!("127.0.0.1:{r}"),
            format!("127.0.0.1:{f}"),
            format!("127.0.0.1:{e}"),
        ]
    }

    /// The files folder.
    pub fn files(&self) -> &Path {
        &self.bg.setup.files
    }

    /// A serve with these names, as this world's user, allowing `rules`.
    pub fn serve(&self, rules: &[String]) -> ServeBuilder<'_> {
        self.with_rules(self.bg.setup.serve(), rules)
    }

    /// [`World::serve`] with background runs (the state folder beside `files/`).
    pub fn serve_with_runs(&self, rules: &[String]) -> ServeBuilder<'_> {
        self.with_rules(self.bg.serve(&Flags::default()), rules)
    }

    fn with_rules<'a>(&self, builder: ServeBuilder<'a>, rules: &[String]) -> ServeBuilder<'a> {
        let mut flags: Vec<&str> = Vec::new();
        for rule in rules {
            flags.extend(["--net-allow", rule]);
        }
        let mut builder = builder
            .programs(PROGRAMS)
            .timeout("60s")
            .flags(&flags)
            .names(&self.names);
        if let Some(uid) = self.user {
            builder = builder.run_as(uid);
        }
        builder
    }
}

/// Makes `uid` the owner of `path` and everything below it.
pub fn chown_all(path: &Path, uid: u32) {
    let owner = Some(rustix::process::Uid::from_raw(uid));
    let group = Some(rustix::process::Gid::from_raw(uid));
    rustix::fs::chown(path, owner, group).unwrap();
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_all(&entry.unwrap().path(), uid);
        }
    }
}

/// The call's `network` value; fails when it has none.
pub fn network(result: &Value) -> Value {
    let value = structured(result)["network"].clone();
    assert!(value.is_object(), "no network in {result}");
    value
}

/// The call's stdout, failing unless it exited 0.
pub fn stdout_ok(result: &Value) -> String {
    let value = structured(result);
    assert_eq!(value["exit_code"], 0, "{}", text(result));
    value["stdout"].as_str().unwrap_or_default().to_owned()
}

/// Whether the call's `refused` names `host` at `port`, for a reason that says `why`.
pub fn refused(result: &Value, host: &str, port: u16, why: &str) -> bool {
    let network = network(result);
    let named = network["refused"].as_array().is_some_and(|refused| {
        refused.iter().any(|r| {
            r["host"] == host
                && r["port"] == port
                && r["why"].as_str().is_some_and(|w| w.contains(why))
        })
    });
    let line = format!("refused: {host}:{port}, ");
    named
        && text(result)
            .lines()
            .any(|l| l.starts_with(&line) && l.contains(why))
}
