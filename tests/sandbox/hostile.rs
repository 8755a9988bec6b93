//! Hostile payloads under the README's own recommended line, exactly as written there (the
//! files folder put in place of `/home/me/work`, nothing added): the helper
//! `lnk-test-hostile`, copied into the files folder as an agent's own program would be, tries
//! to read the agent's key and serve's environment, connect to sockets outside the files folder
//! (the way in, one in the test's folder, and the host's `/run` and `/tmp`), flock
//! `start.lock`, remount `/`, unmount the `--tmpfs` over `/tmp`, write outside `--files`, and
//! leave the call in a session of its own. Every attempt fails, from a call and from a
//! background run, as root and as `nobody`.
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::world::{World, chown_all, running_as_root, users};
use lnk_tests::procs::{marker, wait_gone};
use lnk_tests::results::{ran, text};
use lnk_tests::sandbox::{Sandbox, path_str};
use lnk_tests::serve::Serve;
use lnk_tests::tools::{start, wait_ended};

/// A listening socket the test made, removed when dropped.
struct Listening {
    path: PathBuf,
    _listener: UnixListener,
}

impl Listening {
    /// Listens at `path`, open to everyone (so only the sandbox can keep a program from it).
    fn at(path: PathBuf) -> Listening {
        let listener = UnixListener::bind(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        Listening {
            path,
            _listener: listener,
        }
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Fails on any `BROKE` line of an attack's output, and on one that held nothing.
fn all_held(attack: &[String], user: Option<u32>, how: &str, output: &str) {
    let broke: Vec<&str> = output.lines().filter(|l| l.starts_with("BROKE")).collect();
    assert!(
        broke.is_empty(),
        "as {user:?}, {how}, `{}` got through:\n{output}",
        attack.join(" ")
    );
    assert!(
        output
            .lines()
            .any(|l| l.starts_with("held") || l.starts_with("made")),
        "as {user:?}, {how}, `{}` said nothing: {output:?}",
        attack.join(" ")
    );
}

/// Runs an attack as a `command` call; its stdout.
fn by_call(serve: &mut Serve, attack: &[String]) -> String {
    let result = serve.call(json!({"program": "lnk-test-hostile", "args": attack}));
    assert_eq!(ran(&result)["exit_code"], 0, "{result}");
    text(&result)
}

/// Runs an attack as a background run; its output file.
fn by_run(world: &World, serve: &mut Serve, attack: &[String]) -> String {
    let id = start(
        serve,
        json!({"program": "lnk-test-hostile", "args": attack}),
    );
    let run: Value = wait_ended(serve, &id, Duration::from_secs(30));
    assert_eq!(run["exit_code"], 0, "{run}");
    std::fs::read_to_string(world.bg.output_path(&id)).unwrap()
}

#[test]
fn hostile_payloads_fail_under_the_recommended_line() {
    hostile_payloads_fail();
}

/// The same with cold calls (`LNK_COLD_START=1`).
#[test]
fn hostile_payloads_fail_under_the_recommended_line_cold() {
    lnk_tests::serve::cold_starts(hostile_payloads_fail);
}

fn hostile_payloads_fail() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    for user in users() {
        let world = World::new(user, false);
        // The agent's own program, in its files folder.
        let bin = world.files().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let hostile = bin.join("lnk-test-hostile");
        std::fs::copy(env!("CARGO_BIN_EXE_lnk-test-hostile"), &hostile).unwrap();
        let cwd = world.root().join("serve-cwd");
        std::fs::create_dir(&cwd).unwrap();
        if let Some(uid) = user {
            chown_all(world.root(), uid);
        }
        // Sockets outside the files folder that listen, and are open to anyone.
        let mark = marker();
        let mut sockets = vec![Listening::at(world.root().join("outside.sock"))];
        if running_as_root() {
            for folder in ["/run", "/tmp"] {
                sockets.push(Listening::at(
                    Path::new(folder).join(format!("{mark}.sock")),
                ));
            }
        }
        let line = world.recommended();
        assert_eq!(line[0], "/usr/bin/bwrap", "{line:?}");
        let secret = marker();
        let mut serve = world
            .serve(line)
            .programs_path(&path_str(&bin))
            .programs(&["lnk-test-hostile"])
            .env("LNK_TEST_API_TOKEN", &secret)
            .current_dir(&cwd)
            .start();

        let name = format!("written-by-{mark}");
        let outside: Vec<PathBuf> = [
            world.bg.state.clone(),
            world.keyring.clone(),
            world.root().to_path_buf(),
            cwd.clone(),
            PathBuf::from("/"),
            PathBuf::from("/usr"),
            PathBuf::from("/etc"),
        ]
        .to_vec();
        let mut connect = vec!["connect".to_owned(), path_str(&world.way_in)];
        connect.extend(sockets.iter().map(|s| path_str(&s.path)));
        let mut write = vec!["write".to_owned(), name.clone()];
        write.extend(outside.iter().map(|p| path_str(p)));
        let key = path_str(&world.keyring.join("agent-1.key"));
        let lock = path_str(&world.bg.state.join("start.lock"));
        let attacks: Vec<Vec<String>> = vec![
            vec!["read-key".into(), key],
            vec!["read-env".into(), secret.clone()],
            connect,
            vec!["flock".into(), lock],
            vec!["remount".into()],
            vec!["umount".into(), "/tmp".into(), "/proc".into()],
            write,
        ];
        for attack in &attacks {
            all_held(attack, user, "from a call", &by_call(&mut serve, attack));
            all_held(
                attack,
                user,
                "from a run",
                &by_run(&world, &mut serve, attack),
            );
        }
        for folder in &outside {
            let path = folder.join(&name);
            let landed = path.symlink_metadata().is_ok();
            let _ = std::fs::remove_file(&path);
            assert!(!landed, "as {user:?}, a program wrote {}", path.display());
        }
        // A program that leaves the call in a session of its own is gone with the call, and
        // with the run.
        let away = marker();
        let attack = vec!["setsid".to_owned(), away.clone(), "60".to_owned()];
        all_held(&attack, user, "from a call", &by_call(&mut serve, &attack));
        wait_gone(&away, Duration::from_secs(10));
        let away = marker();
        let attack = vec!["setsid".to_owned(), away.clone(), "60".to_owned()];
        all_held(
            &attack,
            user,
            "from a run",
            &by_run(&world, &mut serve, &attack),
        );
        wait_gone(&away, Duration::from_secs(10));
    }
}
