//! The sandbox check proves each cache's layer: the probe creates a file in each `--cache`
//! folder from inside, and serve looks from outside that nothing landed in the user's folder.
//! A line that binds a cache of this machine read-write without a layer is refused, naming
//! `--cache` and `{caches}`; a `--cache` the line does not show is warned about. `config` puts
//! this machine's caches into the recommended line it builds, and the entry starts.
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use crate::world::{World, assert_unchanged, snapshot, users};
use lnk_tests::bins::link_run;
use lnk_tests::results::{ran, warnings};
use lnk_tests::runs::Flags;
use lnk_tests::sandbox::{Sandbox, path_str};
use lnk_tests::setup::ServeBuilder;

/// The variables by which the tools name their caches, taken out of a run's environment so
/// that only the test's home says where the caches are.
const CACHE_VARIABLES: &[&str] = &[
    "CARGO_HOME",
    "GOMODCACHE",
    "GOCACHE",
    "GOPATH",
    "GOENV",
    "PIP_CACHE_DIR",
    "PIP_CONFIG_FILE",
    "npm_config_cache",
    "NPM_CONFIG_CACHE",
    "npm_config_userconfig",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
];

/// `lnk-link-run <subcommand>` with `builder`'s arguments, as the world's user, with HOME the
/// world's home and no tool's cache variable but those of `envs`.
fn run(
    world: &World,
    subcommand: &str,
    builder: &ServeBuilder<'_>,
    envs: &[(&str, &Path)],
) -> Output {
    let mut argv = builder.argv();
    argv[0] = subcommand.into();
    let mut command = Command::new(link_run());
    if let Some(uid) = world.user {
        use std::os::unix::process::CommandExt;
        command.uid(uid).gid(uid);
    }
    for name in CACHE_VARIABLES {
        command.env_remove(name);
    }
    command
        .args(&argv)
        .env("HOME", world.bg.setup.root.path().join("home"))
        .envs(envs.iter().copied())
        .current_dir(world.bg.setup.root.path())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_check_proves_each_cache_layer() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    for user in users() {
        let world = World::new(user);
        let before = (snapshot(&world.registry), snapshot(&world.modcache));
        let out = run(&world, "check", &world.serve(world.line()), &[]);
        let report = stdout(&out);
        assert_eq!(out.status.code(), Some(0), "as {user:?}: {report}{out:?}");
        for cache in [&world.registry, &world.modcache] {
            let about = format!("in the cache --cache {}: ", path_str(cache));
            let line = report
                .lines()
                .find(|line| line.contains(&about))
                .unwrap_or_else(|| panic!("no line about {cache:?}:\n{report}"));
            assert!(
                line.starts_with("ok  ")
                    && line.ends_with("it went to the sandbox's own layer, not the user's folder"),
                "as {user:?}: {line}"
            );
        }
        assert_unchanged(&before.0, &snapshot(&world.registry), "after the check");
        assert_unchanged(&before.1, &snapshot(&world.modcache), "after the check");
    }
}

#[test]
fn a_cache_bound_read_write_without_its_layer_is_refused() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    for user in users() {
        let world = World::new(user);
        let registry = path_str(&world.registry);
        // No --cache: the registry is found as cargo finds it (CARGO_HOME), and bound as is.
        let line = {
            let mut line = lnk_tests::readme::recommended_sandbox(
                world.files(),
                &["--bind".into(), registry.clone(), registry.clone()],
            );
            line.retain(|w| w != "{caches}");
            line
        };
        let mut builder = world
            .bg
            .serve(&Flags::default())
            .programs(&["sh"])
            .sandbox(line);
        if let Some(uid) = user {
            builder = builder.run_as(uid);
        }
        let cargo_home = world.registry.parent().unwrap().to_path_buf();
        let out = run(&world, "serve", &builder, &[("CARGO_HOME", &cargo_home)]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "as {user:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
        for named in [
            format!("cargo's cache {registry}"),
            format!("--cache {registry}"),
            "{caches}".to_owned(),
            "it appeared in the user's cache folder".to_owned(),
        ] {
            assert!(
                stderr.contains(&named),
                "as {user:?}, {named:?} not in: {stderr}"
            );
        }
        let left: Vec<_> = std::fs::read_dir(&world.registry)
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(".lnk-sandbox-check")
            })
            .collect();
        assert!(
            left.is_empty(),
            "the probe's file was taken away again: {left:?}"
        );
    }
}

#[test]
fn a_cache_the_line_does_not_show_is_warned_about() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let world = World::new(None);
    let line = lnk_tests::readme::recommended_sandbox(world.files(), &[]);
    let mut serve = world.serve(line).start();
    let result = serve.call(json!({"program": "sh", "args": ["-c", "true"]}));
    assert_eq!(ran(&result)["exit_code"], 0, "{result}");
    let stderr = serve.stderr();
    let warned = warnings(&stderr);
    for cache in [&world.registry, &world.modcache] {
        let about = format!(
            "--cache {}: the sandbox does not show the cache",
            path_str(cache)
        );
        assert!(
            warned
                .iter()
                .any(|w| w.contains(&about) && w.contains("{caches}")),
            "{about:?} not in: {stderr}"
        );
    }
}

#[test]
fn config_puts_this_machine_s_caches_into_the_recommended_line() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let world = World::new(None);
    let files = path_str(world.files());
    let config = |extra: &[&str]| -> Value {
        let mut command = Command::new(link_run());
        for name in CACHE_VARIABLES {
            command.env_remove(name);
        }
        let out = command
            .args(["config", "claude-code", "--files", &files])
            .args(["--programs-path", "/usr/bin:/bin", "--timeout", "30s"])
            .args(["--output", "64KiB", "--program", "sh"])
            .args(extra)
            .env("HOME", world.bg.setup.root.path().join("home"))
            .env_remove("RUST_LOG")
            .current_dir(world.bg.setup.root.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "config: {out:?}");
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        doc["mcpServers"]["link-run"]["args"].clone()
    };
    let words = |args: &Value| -> Vec<String> {
        args.as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().to_owned())
            .collect()
    };
    // Found as cargo and Go find them in this home: both, and the word after the files' bind.
    let args = words(&config(&[]));
    for cache in [&world.registry, &world.modcache] {
        let flag = ["--cache".to_owned(), path_str(cache)];
        assert!(
            args.windows(2).any(|w| w == flag),
            "{cache:?} not in {args:?}"
        );
    }
    let bind = [
        "--bind".to_owned(),
        files.clone(),
        files.clone(),
        "{caches}".to_owned(),
    ];
    assert!(args.windows(4).any(|w| w == bind), "{args:?}");
    // The person's own --cache stands alone.
    let registry = path_str(&world.registry);
    let args = words(&config(&["--cache", &registry]));
    let caches: Vec<&String> = args
        .windows(2)
        .filter(|w| w[0] == "--cache")
        .map(|w| &w[1])
        .collect();
    assert_eq!(caches, [&registry], "{args:?}");
}
