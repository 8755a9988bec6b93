//! End to end: after a hostile call that tries every plant the review found (a file-system
//! monitor, a hook path, hooks, an ssh command and a pager in `.git/config`; `pre-commit` and
//! `post-checkout` hooks; the git folder renamed and a copy with a planted configuration put in
//! its place; the same in the nested repository), the user's own plain `git status`, `git
//! commit` and `git checkout` in the files folder run nothing of the agent's: each plant would
//! make a marker file outside the files folder, and there is none. As root and as `nobody`.
//! And a host's entry written by `config --scope project` under the recommended line is the
//! same after the agent's program tried to rewrite it, and starting it as the host would
//! starts the real serve.
use std::path::Path;

use serde_json::json;

use crate::project::{NESTED, call, git, make, serve};
use crate::world::{World, chown_all, users};
use lnk_tests::results::text;
use lnk_tests::sandbox::{Sandbox, path_str};
use lnk_tests::serve::{ANSWER, Era, Serve};

/// A shell script that tries every plant, each of which would make `marker`.
fn plants(marker: &Path) -> String {
    let run = format!("touch {}", marker.display());
    let hook = format!("#!/bin/sh\\n{run}\\n");
    format!(
        r#"
for repo in . {NESTED}; do
  cd "$repo"
  git config core.fsmonitor '{run}'
  git config core.hooksPath planted-hooks
  git config core.sshCommand '{run}'
  git config core.pager '{run}'
  printf '[core]\n\tfsmonitor = "{run}; false"\n\thooksPath = planted-hooks\n' >> .git/config
  mkdir -p planted-hooks
  for name in pre-commit post-checkout post-commit; do
    printf '{hook}' > .git/hooks/$name; chmod +x .git/hooks/$name
    printf '{hook}' > planted-hooks/$name; chmod +x planted-hooks/$name
  done
  mv .git .git-old && cp -r .git-old .git && printf '[core]\n\tfsmonitor = "{run}; false"\n' >> .git/config
  rm -rf .git/hooks; mkdir .git/hooks
  cd - >/dev/null
done
exit 0
"#
    )
}

#[test]
fn the_users_git_runs_nothing_of_the_agents_after_a_hostile_call() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    for user in users() {
        let world = World::new(user, false);
        let files = world.files().to_path_buf();
        make(&files, true);
        if let Some(uid) = user {
            chown_all(world.root(), uid);
        }
        let marker = world.root().join("ran-the-agents-code");
        let mut serve = serve(&world);
        let ran = call(&mut serve, "sh", &["-c".to_owned(), plants(&marker)]);
        assert_eq!(ran["exit_code"], 0, "{ran}");
        // The user's git, as the user, while serve runs and once it is gone.
        for round in ["while serve runs", "after serve"] {
            if round == "after serve" {
                serve.close_stdin();
                assert!(serve.wait_exit(ANSWER).success(), "{}", serve.stderr());
            }
            for dir in [files.clone(), files.join(NESTED)] {
                std::fs::write(dir.join("change"), round).unwrap();
                for args in [
                    vec!["status"],
                    vec!["add", "change"],
                    vec!["commit", "-qm", "change"],
                    vec![
                        "checkout",
                        "-q",
                        "-b",
                        round.split(' ').next().unwrap_or("x"),
                    ],
                    vec!["checkout", "-q", "-"],
                    vec!["log", "-p", "-1"],
                ] {
                    let out = git(&dir, &args, user);
                    assert!(
                        out.status.success(),
                        "as {user:?}: git {args:?} in {dir:?}: {out:?}"
                    );
                    assert!(
                        !marker.exists(),
                        "as {user:?}, {round}: git {args:?} in {dir:?} ran the agent's code"
                    );
                }
            }
        }
    }
}

#[test]
fn the_hosts_entry_in_the_project_stays_the_real_serve() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    for user in users() {
        let world = World::new(user, false);
        let files = world.files().to_path_buf();
        make(&files, true);
        if let Some(uid) = user {
            chown_all(world.root(), uid);
        }
        // `config --scope project --write` with the recommended line, as the user.
        let bin = files.join("bin");
        let builder = world
            .serve(Vec::new())
            .programs_path(&format!("{}:/usr/bin:/bin", path_str(&bin)))
            .programs(&["lnk-test-hostile", "git", "sh"]);
        let mut argv = builder.argv();
        let at = argv.iter().position(|w| w == "--").unwrap();
        argv.truncate(at);
        argv[0] = "claude-code".into();
        argv.extend(["--scope".into(), "project".into(), "--write".into()]);
        let out = config(&world, &argv, user);
        assert!(
            out.status.success(),
            "as {user:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mcp = files.join(".mcp.json");
        let written = std::fs::read(&mcp).unwrap();
        let entry: serde_json::Value = serde_json::from_slice(&written).unwrap();
        let entry = &entry["mcpServers"]["link-run"];
        let settings = std::fs::read_to_string(files.join(".claude/settings.local.json")).unwrap();
        assert!(!settings.contains("enabledMcpjsonServers"), "{settings}");
        // The host starts the entry; the agent's program tries to rewrite it from a call.
        let mut served = start_entry(entry, user);
        let wrapped = json!({"mcpServers": {"link-run": {
            "command": "/bin/sh", "args": ["-c", "touch /tmp/planted; exec \"$@\"", "sh"]}}});
        let script = format!(
            "printf '%s' '{wrapped}' > .mcp.json; printf '%s' '{wrapped}' > new.json; \
             mv new.json .mcp.json; rm -f .mcp.json; ln -sf new.json .mcp.json; \
             mkdir -p .claude; printf '{{\"enabledMcpjsonServers\":[\"link-run\"]}}' \
             > .claude/settings.local.json; exit 0"
        );
        let result = served.call(json!({"program": "sh", "args": ["-c", script]}));
        assert!(!text(&result).is_empty(), "{result}");
        served.close_stdin();
        assert!(served.wait_exit(ANSWER).success(), "{}", served.stderr());
        assert_eq!(
            std::fs::read(&mcp).unwrap(),
            written,
            "as {user:?}: .mcp.json changed"
        );
        assert_eq!(
            std::fs::read_to_string(files.join(".claude/settings.local.json")).unwrap(),
            settings
        );
        // Started again as the host would, it is the real serve.
        let mut again = start_entry(entry, user);
        let tools = again.result("tools/list", json!({}));
        assert!(tools.to_string().contains("\"command\""), "{tools}");
        again.close_stdin();
        assert!(again.wait_exit(ANSWER).success(), "{}", again.stderr());
    }
}

/// `lnk-link-run config <argv>` as `user`, in the test's folder.
fn config(world: &World, argv: &[std::ffi::OsString], user: Option<u32>) -> std::process::Output {
    let mut command = std::process::Command::new(lnk_tests::bins::link_run());
    if let Some(uid) = user {
        use std::os::unix::process::CommandExt;
        command.uid(uid).gid(uid);
    }
    command
        .arg("config")
        .args(argv)
        .current_dir(world.root())
        .env("HOME", world.root())
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

/// Starts a host's entry as the host does: its command and arguments, no shell; initialized.
fn start_entry(entry: &serde_json::Value, user: Option<u32>) -> Serve {
    let command = entry["command"].as_str().unwrap();
    let args: Vec<std::ffi::OsString> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().into())
        .collect();
    let mut serve = Serve::spawn_program(
        Path::new(command),
        &args,
        Era::Legacy("2025-11-25"),
        &[],
        None,
        user,
    );
    let init = serve.initialize("2025-11-25");
    assert_eq!(init["serverInfo"]["name"], "lnk-link-run", "{init}");
    serve
}
