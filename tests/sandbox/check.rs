//! The sandbox check: `lnk-link-run check` reports each check and exits 0 or 1; serve refuses to
//! start, in one line that names the leak and the flag that closes it, under a sandbox that
//! leaks; it warns, and starts, under one that only shares its PID namespace or shows sockets;
//! `--no-sandbox-check` skips it with one warning, and `check` with it answers that serve starts.
//! Each as root and, where the tests run as root, as `nobody`.
use std::collections::BTreeMap;
use std::os::unix::net::UnixListener;
use std::path::Path;

use serde_json::json;

use crate::world::{World, running_as_root, users};
use lnk_tests::results::{ran, text, warnings};
use lnk_tests::sandbox::{Sandbox, path_str};

/// The lines of a `check` report, with its exit code.
fn check_report(world: &World, sandbox: Vec<String>) -> (i32, Vec<String>) {
    let out = world.run("check", &world.serve(sandbox));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let code = out
        .status
        .code()
        .unwrap_or_else(|| panic!("check was killed: {out:?}"));
    assert!(
        code == 0 || code == 1,
        "check exits 0 or 1, not {code}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    (code, stdout.lines().map(str::to_owned).collect())
}

/// The report's line about `what` (the start of the text after its tag), failing if none.
fn line_about<'a>(report: &'a [String], what: &str) -> &'a str {
    report
        .iter()
        .find(|line| line.get(6..).is_some_and(|rest| rest.starts_with(what)))
        .unwrap_or_else(|| {
            panic!(
                "no line about {what:?} in the report:\n{}",
                report.join("\n")
            )
        })
}

/// Every path below `root` with its size, to show that a refusal wrote nothing.
fn snapshot(root: &Path) -> BTreeMap<String, u64> {
    let mut seen = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().map(Result::unwrap) {
            let meta = entry.path().symlink_metadata().unwrap();
            if meta.is_dir() {
                todo.push(entry.path());
            }
            seen.insert(
                path_str(&entry.path()),
                if meta.is_file() { meta.len() } else { 0 },
            );
        }
    }
    seen
}

/// serve under `sandbox` refuses to start: exit 2, one line on stderr holding every one of
/// `names`, nothing on stdout, nothing written in the world's folder. Returns the line.
fn refuses(world: &World, sandbox: Vec<String>, names: &[&str]) -> String {
    let before = snapshot(world.root());
    let out = world.run("serve", &world.serve(sandbox.clone()));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(2),
        "serve started under {sandbox:?}: {stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "a refusal writes nothing on stdout: {out:?}"
    );
    let line = stderr.trim_end_matches('\n');
    assert_eq!(line.lines().count(), 1, "a refusal is one line: {stderr:?}");
    for name in names {
        assert!(
            line.contains(name),
            "the refusal does not name {name:?}: {line}"
        );
    }
    assert_eq!(
        before,
        snapshot(world.root()),
        "a refused start wrote something"
    );
    line.to_owned()
}

#[test]
fn the_recommended_line_passes_as_root_and_as_nobody() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    for user in users() {
        for fresh in [false, true] {
            let world = World::new(user, fresh);
            let (code, report) = check_report(&world, world.recommended());
            let shown = report.join("\n");
            assert_eq!(code, 0, "as {user:?}, fresh {fresh}:\n{shown}");
            for line in report.iter().filter(|l| !l.starts_with("sandbox:")) {
                assert!(
                    line.starts_with("ok  ") || line.starts_with("the probe took"),
                    "as {user:?}, fresh {fresh}, not ok: {line}\n{shown}"
                );
            }
            for what in [
                "the capabilities",
                "reading serve's environment",
                "the state folder",
                "the keyring folder",
                "reading the agent's key",
                "reading the state folder's start.lock",
                "creating .lnk-sandbox-check-",
                "the PID namespace",
                "connecting to Unix sockets",
            ] {
                line_about(&report, what);
            }
            if !fresh {
                line_about(&report, "reading a record of the state folder");
                line_about(&report, "connecting to the way in");
            }
            // And serve starts under it, on a fresh machine too, and runs calls.
            let mut serve = world
                .serve(world.line_with(|_| {}))
                .programs(&["echo"])
                .start();
            let result = serve.call(json!({"program": "echo", "args": ["works"]}));
            assert_eq!(
                ran(&result)["exit_code"],
                0,
                "as {user:?}, fresh {fresh}: {result}"
            );
            assert!(text(&result).contains("works"), "{result}");
            let stderr = serve.stderr();
            assert_eq!(
                warnings(&stderr),
                Vec::<&str>::new(),
                "no warning under the recommended line: {stderr}"
            );
        }
    }
}

#[test]
fn env_as_a_sandbox_is_reported_leak_by_leak() {
    for user in users() {
        let world = World::new(user, false);
        let (code, report) = check_report(&world, vec!["/usr/bin/env".into()]);
        let shown = report.join("\n");
        assert_eq!(code, 1, "as {user:?}:\n{shown}");
        let mut leaks = vec![
            "reading serve's environment",
            "the state folder",
            "the keyring folder",
            "reading the agent's key",
            "reading the state folder's start.lock",
            "reading a record of the state folder",
            "connecting to the way in",
            "creating .lnk-sandbox-check-",
        ];
        if user.is_none() && running_as_root() {
            leaks.push("the capabilities");
        }
        for what in leaks {
            let line = line_about(&report, what);
            assert!(line.starts_with("LEAK"), "as {user:?}: {line}\n{shown}");
            assert!(line.contains("; fix: "), "a leak names its fix: {line}");
        }
        assert!(
            line_about(&report, "the PID namespace").starts_with("warn"),
            "{shown}"
        );
        assert!(
            report
                .last()
                .is_some_and(|l| l.ends_with("serve would refuse to start")),
            "{shown}"
        );
        // What the probe created outside was taken away again.
        for folder in [
            world.bg.state.as_path(),
            world.keyring.as_path(),
            world.root(),
        ] {
            let left: Vec<_> = std::fs::read_dir(folder)
                .unwrap()
                .filter_map(Result::ok)
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(".lnk-sandbox-check")
                })
                .collect();
            assert!(left.is_empty(), "the check left {left:?}");
        }
        // serve refuses, in one line naming the leaks.
        let mut names = vec![
            "serve's environment",
            "state folder",
            "agent's key",
            "way in",
        ];
        if user.is_none() && running_as_root() {
            names.push("--cap-drop ALL");
        }
        refuses(&world, vec!["/usr/bin/env".into()], &names);
    }
}

#[test]
fn a_bwrap_line_without_a_pid_namespace_is_a_warning() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    for user in users() {
        let world = World::new(user, false);
        let shared = world.line_with(|line| {
            let at = line.iter().position(|a| a == "--unshare-all").unwrap();
            line.splice(
                at..=at,
                [
                    "--unshare-user",
                    "--unshare-ipc",
                    "--unshare-net",
                    "--unshare-uts",
                    "--unshare-cgroup-try",
                ]
                .map(String::from),
            );
        });
        let (code, report) = check_report(&world, shared.clone());
        let shown = report.join("\n");
        assert_eq!(code, 0, "as {user:?}:\n{shown}");
        let pid = line_about(&report, "the PID namespace");
        assert!(pid.starts_with("warn"), "{shown}");
        assert!(
            pid.contains("--unshare-pid") && pid.contains("reaper"),
            "{pid}"
        );
        // serve starts, and says so once on stderr.
        let mut serve = world.serve(shared).programs(&["true"]).start();
        let result = serve.call(json!({"program": "true"}));
        assert_eq!(ran(&result)["exit_code"], 0, "{result}");
        let stderr = serve.stderr();
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("PID namespace"))
            .collect();
        assert_eq!(warnings.len(), 1, "{stderr}");
        assert!(warnings[0].contains("WARN"), "{stderr}");
    }
}

#[test]
fn serve_names_each_leak_and_the_flag_that_closes_it() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    for user in users() {
        let world = World::new(user, false);
        let plus = |extra: &[&Path]| {
            world.line_with(|line| {
                let at = line.iter().position(|a| a == "--bind").unwrap();
                for path in extra {
                    let path = path_str(path);
                    line.splice(at..at, ["--ro-bind".to_owned(), path.clone(), path]);
                }
            })
        };
        let key = path_str(&world.keyring.join("agent-1.key"));
        refuses(
            &world,
            plus(&[&world.keyring]),
            &["the agent's key", &key, "--tmpfs"],
        );
        let state = path_str(&world.bg.state);
        refuses(
            &world,
            plus(&[&world.bg.state]),
            &["the state folder", &state, "--tmpfs"],
        );
        let bridge = world.way_in.parent().unwrap();
        refuses(&world, plus(&[bridge]), &["the way in", "connected"]);
        let root = path_str(world.root());
        let writable = world.line_with(|line| {
            let at = line.iter().position(|a| a == "--bind").unwrap();
            line.splice(at..at, ["--bind".to_owned(), root.clone(), root.clone()]);
        });
        refuses(&world, writable, &["appeared there", "--ro-bind", &root]);
        if user.is_none() && running_as_root() {
            let with_caps = world.line_with(|line| {
                let at = line.iter().position(|a| a == "--cap-drop").unwrap();
                line.drain(at..at + 2);
            });
            refuses(
                &world,
                with_caps,
                &["capabilities", "CAP_", "--cap-drop ALL"],
            );
        }
    }
}

#[test]
fn a_sandbox_that_cannot_run_the_probe_is_refused_naming_the_way_out() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let world = World::new(None, false);
    let without_proc = world.line_with(|line| {
        let at = line.iter().position(|a| a == "--proc").unwrap();
        line.drain(at..at + 2);
    });
    refuses(
        &world,
        without_proc,
        &["could not run its probe", "--no-sandbox-check"],
    );
}

#[test]
fn no_sandbox_check_starts_with_one_warning() {
    let world = World::new(None, false);
    let mut serve = world
        .serve(vec!["/usr/bin/env".into()])
        .flags(&["--no-sandbox-check"])
        .programs(&["true"])
        .start();
    let result = serve.call(json!({"program": "true"}));
    assert_eq!(ran(&result)["exit_code"], 0, "{result}");
    let stderr = serve.stderr();
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("--no-sandbox-check"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("WARN") && lines[0].contains("not checked"),
        "{stderr}"
    );
    drop(serve);
}

/// `check --no-sandbox-check` answers what serve does with the same arguments: serve starts,
/// so the last line says it would start and the exit is 0, whether the probe finds leaks (a
/// pass-through prefix) or cannot run at all (a prefix that runs nothing). The checks are still
/// reported, for the person to read.
#[test]
fn check_with_no_sandbox_check_answers_that_serve_starts() {
    let world = World::new(None, false);
    for (prefix, shown) in [("/usr/bin/env", "LEAK  "), ("/bin/false", "FAIL  ")] {
        let unchecked = world
            .serve(vec![prefix.into()])
            .flags(&["--no-sandbox-check"]);
        let out = world.run("check", &unchecked);
        let report = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = report.lines().collect();
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("note: --no-sandbox-check")),
            "{prefix}: {report}"
        );
        assert!(
            lines.iter().any(|l| l.starts_with(shown)),
            "{prefix}: {report}"
        );
        let last = lines.last().copied().unwrap_or_default();
        assert!(last.contains("serve would start"), "{prefix}: {report}");
        assert_eq!(out.status.code(), Some(0), "{prefix}: {report}");
        // And serve with the same arguments does start.
        let mut serve = world
            .serve(vec![prefix.into()])
            .flags(&["--no-sandbox-check"])
            .programs(&["true"])
            .start();
        let listed = serve.request("tools/list", json!({}));
        assert!(
            listed.to_string().contains("\"command\""),
            "{prefix}: {listed}"
        );
        drop(serve);
        // Without the flag, the same prefix is refused, and check says so.
        let checked = world.run("check", &world.serve(vec![prefix.into()]));
        let report = String::from_utf8_lossy(&checked.stdout);
        assert_eq!(checked.status.code(), Some(1), "{prefix}: {report}");
        assert!(
            report
                .lines()
                .last()
                .is_some_and(|l| l.ends_with("serve would refuse to start")),
            "{prefix}: {report}"
        );
    }
}

#[test]
fn sockets_are_a_warning_and_warnings_come_only_when_serve_starts() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let world = World::new(None, false);
    let runtime = world.root().join("runtime");
    std::fs::create_dir(&runtime).unwrap();
    let socket = runtime.join("session-bus");
    let _listener = UnixListener::bind(&socket).unwrap();
    let shown = path_str(&runtime);
    let line = world.line_with(|line| {
        let at = line.iter().position(|a| a == "--bind").unwrap();
        line.splice(
            at..at,
            ["--ro-bind".to_owned(), shown.clone(), shown.clone()],
        );
    });
    let mut serve = world
        .serve(line.clone())
        .env("XDG_RUNTIME_DIR", &runtime)
        .programs(&["true"])
        .start();
    let stderr = serve.stderr();
    let warning = stderr
        .lines()
        .find(|l| l.contains("Unix sockets"))
        .unwrap_or_else(|| panic!("no warning about the socket: {stderr}"));
    assert!(warning.contains(&path_str(&socket)), "{warning}");
    let result = serve.call(json!({"program": "true"}));
    assert_eq!(ran(&result)["exit_code"], 0, "{result}");
    drop(serve);
    // With a leak besides, the refusal is the one line: no warning before it.
    let key = world.keyring.clone();
    let leaking = world.line_with(|line| {
        let at = line.iter().position(|a| a == "--bind").unwrap();
        for path in [path_str(&runtime), path_str(&key)] {
            line.splice(at..at, ["--ro-bind".to_owned(), path.clone(), path]);
        }
    });
    let out = world.run(
        "serve",
        &world.serve(leaking).env("XDG_RUNTIME_DIR", &runtime),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}

#[test]
fn a_line_that_names_the_files_folder_as_a_word_binds_it() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    for user in users() {
        let world = World::new(user, false);
        let files = path_str(world.files());
        let line = world.line_with(|line| {
            for word in line.iter_mut().filter(|w| **w == files) {
                *word = "{files}".to_owned();
            }
        });
        assert!(
            line.iter().any(|w| w == "{files}"),
            "the tests' line binds the files folder: {line:?}"
        );
        let (code, report) = check_report(&world, line.clone());
        assert_eq!(code, 0, "as {user:?}:\n{}", report.join("\n"));
        assert!(
            report[0].contains(&format!("--bind {files} {files}")),
            "the report shows the line as calls run it: {}",
            report[0]
        );
        let mut serve = world.serve(line).programs(&["sh"]).start();
        let result = serve.call(json!({"program": "sh", "args": ["-c", "echo made > here; pwd"]}));
        assert_eq!(ran(&result)["exit_code"], 0, "as {user:?}: {result}");
        assert!(text(&result).contains(&files), "{result}");
        assert_eq!(
            std::fs::read_to_string(world.files().join("here")).unwrap(),
            "made\n",
            "the program wrote in the files folder itself"
        );
    }
}
