//! Every protected path, every way in, from inside, under the README's recommended line, with
//! warm calls and cold ones, as root and as `nobody`: the agent's program writes, creates,
//! truncates, renames over, swaps, removes, links, and renames the folders above each
//! protected path, and the git folders and the folders above the nested repository; git itself
//! is told to set a hook path, a file-system monitor, an ssh command and an alias; and a `git
//! init` is tried where there is no repository. Nothing gets through (the program says so, and
//! what each path holds is the same seen from outside), while git still commits.
use crate::project::{
    NESTED, PINNED, READ_ONLY, all_held, attack, by_call, by_run, call, git, make, pins, serve,
    snapshot,
};
use crate::world::{World, chown_all, users};
use lnk_tests::sandbox::{Sandbox, path_str};

#[test]
fn every_way_in_is_refused_warm() {
    every_way_in_is_refused();
}

#[test]
fn every_way_in_is_refused_cold() {
    lnk_tests::serve::cold_starts(every_way_in_is_refused);
}

fn every_way_in_is_refused() {
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
        let mut serve = serve(&world);
        // The placeholders are there once serve has made its first sandbox (the check's).
        let before = snapshot(&files, READ_ONLY);
        let pinned = pins(&files);
        for placeholder in [
            ".mcp.json",
            ".envrc",
            ".gemini",
            ".github/workflows",
            ".devcontainer.json",
            ".git/config.worktree",
            "vendor/lib/.git/config.worktree",
        ] {
            assert_ne!(before[placeholder], "missing", "as {user:?}: {placeholder}");
        }
        let how = format!("as {user:?}, from a call");
        all_held(
            &how,
            &by_call(&mut serve, &attack("plant", &files, READ_ONLY)),
        );
        all_held(&how, &by_call(&mut serve, &attack("unpin", &files, PINNED)));
        // Git itself, told to plant something.
        for args in [
            vec!["config", "core.fsmonitor", "touch /tmp/planted"],
            vec!["config", "core.hooksPath", "hooks-of-mine"],
            vec!["config", "core.sshCommand", "touch /tmp/planted"],
            vec!["config", "alias.st", "!touch /tmp/planted"],
            vec![
                "-C",
                NESTED,
                "config",
                "core.fsmonitor",
                "touch /tmp/planted",
            ],
        ] {
            let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
            let ran = call(&mut serve, "git", &args);
            assert_ne!(
                ran["exit_code"], 0,
                "as {user:?}: git {args:?} got through: {ran}"
            );
        }
        // From a background run too.
        if world.bg.state.exists() {
            let output = by_run(&world, &mut serve, &attack("plant", &files, READ_ONLY));
            all_held(&format!("as {user:?}, from a run"), &output);
        }
        assert_eq!(snapshot(&files, READ_ONLY), before, "as {user:?}: changed");
        assert_eq!(
            pins(&files),
            pinned,
            "as {user:?}: a pinned folder was replaced"
        );
        // And git still does its work, at the top and in the nested repository.
        for dir in [".", NESTED] {
            let script = format!(
                "cd {dir} && echo more >> file && git add file && git -c user.name=A -c \
                 user.email=a@example.invalid commit -qm more && git log --oneline | wc -l"
            );
            let ran = call(&mut serve, "sh", &["-c".to_owned(), script]);
            assert_eq!(ran["exit_code"], 0, "as {user:?}: a commit in {dir}: {ran}");
            assert_eq!(ran["stdout"], "2\n", "as {user:?}: {ran}");
        }
    }
}

#[test]
fn placeholders_are_folders_git_does_not_see_but_a_home_gets_files_for_its_start_up_files() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    for home in [false, true] {
        let world = World::new(None, false);
        let files = world.files().to_path_buf();
        make(&files, true);
        let line = world.recommended();
        let bin = files.join("bin");
        let mut builder = world
            .serve(line)
            .programs_path(&format!("{}:/usr/bin:/bin", path_str(&bin)))
            .programs(&["git", "sh"]);
        if home {
            builder = builder.env("HOME", files.as_os_str());
        }
        let mut serve = builder.start();
        let gitconfig = std::fs::symlink_metadata(files.join(".gitconfig")).unwrap();
        assert_eq!(gitconfig.is_file(), home, "home {home}");
        assert!(files.join(".mcp.json").is_dir());
        // The user's git (with that home) sees no new file and still works.
        let home_var = if home {
            files.clone()
        } else {
            world.root().to_path_buf()
        };
        let status = std::process::Command::new("git")
            .args([
                "-c",
                "safe.directory=*",
                "status",
                "--porcelain",
                "--untracked-files=all",
            ])
            .current_dir(&files)
            .env("HOME", &home_var)
            .env("GIT_CEILING_DIRECTORIES", lnk_tests::bins::target_tmp())
            .output()
            .unwrap();
        assert!(status.status.success(), "home {home}: {status:?}");
        let listed = String::from_utf8_lossy(&status.stdout).into_owned();
        for name in [".mcp.json", ".envrc", ".gemini", ".github"] {
            assert!(
                !listed.contains(name),
                "home {home}: {name} shows in git status:\n{listed}"
            );
        }
        // And the agent's own `git add -A` commits no placeholder.
        let ran = call(
            &mut serve,
            "sh",
            &[
                "-c".to_owned(),
                "git add -A && git -c user.name=A -c user.email=a@example.invalid commit -qm all \
                 && git show --stat --format= HEAD"
                    .to_owned(),
            ],
        );
        let stat = ran["stdout"].as_str().unwrap_or_default().to_owned();
        for name in [".mcp.json", ".envrc", ".gitmodules", ".gemini"] {
            assert!(!stat.contains(name), "home {home}: committed {name}: {ran}");
        }
    }
}

#[test]
fn no_git_init_at_the_top_and_a_repository_made_below_is_protected_from_the_next_call() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    for user in users() {
        let world = World::new(user, false);
        let files = world.files().to_path_buf();
        make(&files, false);
        if let Some(uid) = user {
            chown_all(world.root(), uid);
        }
        let mut serve = serve(&world);
        let ran = call(&mut serve, "git", &["init".to_owned()]);
        assert_ne!(
            ran["exit_code"], 0,
            "as {user:?}: git init at the top: {ran}"
        );
        let ran = call(
            &mut serve,
            "sh",
            &[
                "-c".to_owned(),
                "mkdir -p .git/hooks; echo x > .git/HEAD".to_owned(),
            ],
        );
        assert_ne!(ran["exit_code"], 0, "{ran}");
        // The placeholder stands in for the repository, empty.
        let top = files.join(".git");
        assert!(top.is_dir(), "as {user:?}");
        assert_eq!(std::fs::read_dir(&top).unwrap().count(), 0, "as {user:?}");
        assert!(
            !git(&files, &["rev-parse", "--git-dir"], user)
                .status
                .success()
        );
        // Below the top a program may make one; the next sandbox protects it.
        let made = call(
            &mut serve,
            "git",
            &["init".to_owned(), "-q".to_owned(), "mine".to_owned()],
        );
        assert_eq!(made["exit_code"], 0, "{made}");
        let next = by_call(
            &mut serve,
            &attack("plant", &files, &["mine/.git/config", "mine/.git/hooks"]),
        );
        all_held(
            &format!("as {user:?}, a repository made in an earlier call"),
            &next,
        );
    }
}
