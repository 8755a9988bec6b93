//! Secrets planted in a home — every path of the never-list, a cargo `config.toml` holding a
//! registry token — cannot be read, listed or found from inside the line `config` builds,
//! by a call or a background run, as root and as `nobody`; what the programs need (a
//! toolchain in the home, rustup's proxies, git's identity) is there. `config` ran the
//! sandbox check (it refuses a line that leaks), `check` passes the entry, and calls start
//! warm.
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::machine::{self, Machine};
use lnk_tests::sandbox::{Sandbox, path_str};
use lnk_tests::tools;

/// The never-list's paths in a home (the SPEC's, with a file in each folder), the agent's
/// keyring and the state folder among them.
const PLANTED: &[&str] = &[
    ".ssh/id_ed25519",
    ".gnupg/private-keys-v1.d/key.key",
    ".aws/credentials",
    ".azure/accessTokens.json",
    ".config/gcloud/credentials.db",
    ".kube/config",
    ".docker/config.json",
    ".config/gh/hosts.yml",
    ".git-credentials",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".mozilla/firefox/default/cookies.sqlite",
    ".config/google-chrome/Default/Cookies",
    ".config/chromium/Default/Login Data",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".local/share/fish/fish_history",
    ".config/lnk/keyring/agent-1.key",
    ".local/state/lnk/link-run/planted.txt",
    ".config/git/credentials",
    ".claude/.credentials.json",
];

/// The marker every secret holds, in two halves so that no call's arguments hold it whole.
const HALVES: (&str, &str) = ("planted-", "secret-4c1d");

/// A home with the secrets planted and what programs need beside them: a tool of the user's
/// own (`~/tools/bin/mytool`), rustup's proxies (a stand-in `rustup`, `cargo` a link to it,
/// and `~/.rustup`), git's identity, a cargo `config.toml` holding a token.
fn planted(machine: &Machine) {
    let marker = format!("{}{}", HALVES.0, HALVES.1);
    let home = &machine.home;
    for rel in PLANTED {
        let path = home.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("{marker}\n")).unwrap();
    }
    let executable = |rel: &str, text: &str| {
        let path = home.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    executable("tools/bin/mytool", "#!/bin/sh\necho mytool ran\n");
    executable("tools/share/data", "tool data\n");
    executable(
        ".cargo/bin/rustup",
        "#!/bin/sh\necho \"rustup's proxy as ${0##*/}\"\n",
    );
    std::os::unix::fs::symlink("rustup", home.join(".cargo/bin/cargo")).unwrap();
    std::fs::create_dir_all(home.join(".rustup")).unwrap();
    std::fs::write(home.join(".rustup/settings.toml"), "version = \"12\"\n").unwrap();
    std::fs::write(
        home.join(".cargo/config.toml"),
        format!("[registry]\ntoken = \"{marker}\"\n"),
    )
    .unwrap();
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = Planted Home\n\temail = planted@example.org\n",
    )
    .unwrap();
    machine.hand_over();
}

/// The shell lines that try to read, list and find the secrets; what they print must hold
/// neither the marker nor a planted path.
fn probes(home: &Path) -> Vec<String> {
    let home = path_str(home);
    let cats: Vec<String> = PLANTED
        .iter()
        .map(|rel| format!("cat '{home}/{rel}'"))
        .collect();
    let marker = format!("m={}; m=\"${{m}}{}\"", HALVES.0, HALVES.1);
    vec![
        format!(
            "{} ; cat '{home}/.cargo/config.toml'; cat '{home}/.gitconfig'; true",
            cats.join("; ")
        ),
        // The home, and all below it but the files folder (whose protected paths' placeholders,
        // `.claude` among them, are the agent's own folder's, not the home's).
        format!(
            "ls -a '{home}' '{home}/.config' '{home}/.cargo' '{home}/.local'; \
             for d in '{home}'/.[!.]* '{home}'/*; do [ \"$d\" = '{home}/work' ] || ls -aR \"$d\"; \
             done; true"
        ),
        "find / -path /proc -prune -o -print 2>&1; true".to_owned(),
        // Every file of the sandbox but the system's own folders (the host's, read-only,
        // which hold nothing of the test's home) and the kernel's.
        format!(
            "{marker}; for d in /* /.[!.]*; do case $d in /usr|/etc|/bin|/sbin|/lib|/lib64|\
             /lib32|/proc|/sys|/dev) ;; *) grep -rl \"$m\" \"$d\" 2>/dev/null;; esac; done; true"
        ),
    ]
}

/// What a probe printed must hold no secret: not the marker, no planted path.
fn assert_nothing_found(printed: &str, home: &Path, what: &str) {
    let marker = format!("{}{}", HALVES.0, HALVES.1);
    assert!(
        !printed.contains(&marker),
        "{what} read a secret:\n{printed}"
    );
    // `cat`'s own word that a path is not there names the path: not a finding.
    let printed: String = printed
        .lines()
        .filter(|l| !(l.starts_with("cat: ") && l.ends_with(": No such file or directory")))
        .map(|l| format!("{l}\n"))
        .collect();
    for rel in PLANTED {
        let path = path_str(&home.join(rel));
        let name = rel.rsplit('/').next().unwrap_or(rel);
        assert!(!printed.contains(&path), "{what} found {path}:\n{printed}");
        // A listing shows no secret's own name, nor the folder that holds it (but for the
        // folders that also hold what is shown, like `.cargo/bin`).
        let top = rel.split('/').next().unwrap_or(rel);
        let listed = |n: &str| printed.lines().any(|line| line.trim() == n);
        assert!(!listed(name), "{what} listed {rel}:\n{printed}");
        assert!(
            !listed(top) || [".cargo", ".config", ".local"].contains(&top),
            "{what} listed {top}:\n{printed}"
        );
    }
}

fn secrets_stay_hidden(user: Option<u32>) {
    let machine = Machine::new("real-secrets-", user);
    planted(&machine);
    let home = machine.home.clone();
    let path = format!(
        "{}:{}:/usr/bin:/bin",
        path_str(&home.join("tools/bin")),
        path_str(&home.join(".cargo/bin"))
    );
    let programs = ["sh", "cat", "git", "mytool", "cargo"];
    let (args, said) = machine.config(
        &machine::flags(&path, &programs, &home),
        &machine.env(&path),
    );
    assert!(
        said.contains(".cargo/config.toml is not shown") && said.contains("`token`"),
        "config says why cargo's config.toml is left out: {said}"
    );
    // `check` passes the entry as written, run as the same user.
    let mut check = std::process::Command::new(lnk_tests::bins::link_run());
    if let Some(uid) = user {
        use std::os::unix::process::CommandExt;
        check.uid(uid).gid(uid);
    }
    let out = check
        .arg("check")
        .args(&args[1..])
        .current_dir(machine.files())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "check of config's entry:\n{report}"
    );

    // A file of the agent's own that holds the marker: the probes must find it, so that
    // finding nothing else means something.
    std::fs::write(
        machine.files().join("control.txt"),
        format!("{}{}\n", HALVES.0, HALVES.1),
    )
    .unwrap();
    machine.hand_over();
    let mut serve = machine.serve(&args);
    let controls = [
        "Planted Home",
        ".gitconfig",
        "tools/bin/mytool",
        "work/control.txt",
    ];
    for (index, probe) in probes(&home).iter().enumerate() {
        let (_, stdout, stderr) = machine::call(&mut serve, "sh", &["-c", probe], ".");
        let control = controls[index];
        assert!(
            stdout.contains(control),
            "probe {index} ({user:?}) did not find {control}, so it proves nothing:\n{stdout}{stderr}"
        );
        assert_nothing_found(
            &format!("{stdout}{stderr}"),
            &home,
            &format!("probe {index} ({user:?})"),
        );
    }
    // What the programs need is there.
    let (code, stdout, _) = machine::call(&mut serve, "mytool", &[], ".");
    assert_eq!((code, stdout.as_str()), (0, "mytool ran\n"));
    let (code, stdout, _) = machine::call(&mut serve, "cargo", &[], ".");
    assert_eq!((code, stdout.as_str()), (0, "rustup's proxy as cargo\n"));
    let (code, stdout, stderr) = machine::call(&mut serve, "git", &["config", "user.email"], ".");
    assert_eq!(
        (code, stdout.as_str()),
        (0, "planted@example.org\n"),
        "{stderr}"
    );
    // A background run gets the same line.
    let script = format!("git config user.name; {}", probes(&home)[0]);
    let id = tools::start(&mut serve, json!({"program": "sh", "args": ["-c", script]}));
    tools::wait_ended(&mut serve, &id, Duration::from_secs(30));
    let (printed, _) = tools::read_ok(&mut serve, json!({"id": id}));
    assert!(
        printed.starts_with("Planted Home\n"),
        "the run saw git's identity: {printed}"
    );
    assert_nothing_found(&printed, &home, &format!("a background run ({user:?})"));
    let stderr = serve.stderr();
    machine::close(serve, &home);
    assert!(
        stderr.contains("calls start warm"),
        "calls did not start warm: {stderr}"
    );
    assert!(
        lnk_tests::results::warnings(&stderr).is_empty(),
        "serve warned: {stderr}"
    );
}

#[test]
fn planted_secrets_stay_hidden_as_root_and_as_nobody_while_the_work_runs() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    secrets_stay_hidden(None);
    if rustix::process::geteuid().is_root() {
        secrets_stay_hidden(Some(65534));
    } else {
        eprintln!("note: not root, so serve runs only as this user (no `nobody` half)");
    }
}
