//! Real projects of each kind, made here, run under the line `config` builds for this
//! machine's own toolchains (cargo through rustup, python3 through pyenv's shims where the
//! machine has them, the system's cc, make, node, npm, git) and run directly on a copy at the
//! same path: each command must exit 0 both ways and make the same files.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::machine::{self, Machine};
use lnk_tests::sandbox::{Sandbox, path_str};
use lnk_tests::toolchains::on_path;

/// The identity the test's home gives git.
const IDENTITY: &str = "Link Run Tester <tester@example.org>";

/// The programs the projects run.
const PROGRAMS: &[&str] = &["cargo", "git", "make", "python3", "node", "npm", "sh"];

/// One command of a project: the folder (in the files folder), the program, its arguments.
type Step = (&'static str, &'static str, &'static [&'static str]);

/// The everyday commands, in order.
const STEPS: &[Step] = &[
    ("rust/app", "cargo", &["build", "--offline"]),
    ("rust/app", "cargo", &["test", "--offline"]),
    ("c", "make", &[]),
    ("c", "sh", &["-c", "./hello"]),
    ("py", "python3", &["-m", "unittest", "-v"]),
    ("py", "python3", &["-m", "venv", ".venv"]),
    ("node", "node", &["--test"]),
    ("node", "npm", &["test"]),
    ("repo", "git", &["init", "-q", "-b", "main"]),
    ("repo", "git", &["add", "."]),
    ("repo", "git", &["commit", "-q", "-m", "first"]),
    ("repo", "git", &["log", "--format=%an <%ae> %s"]),
    ("repo", "git", &["status", "--short"]),
];

/// The projects' files, written into `files`.
fn make_projects(files: &Path) {
    let write = |rel: &str, text: &str| {
        let path = files.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    // A crate with a path dependency; each its own workspace, so that cargo looks for no other
    // above it (the test's folder lies in Link Run's own workspace outside).
    write(
        "rust/dep/Cargo.toml",
        "[package]\nname = \"dep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    );
    write(
        "rust/dep/src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n",
    );
    write(
        "rust/app/Cargo.toml",
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n\n\
         [dependencies]\ndep = { path = \"../dep\" }\n",
    );
    write(
        "rust/app/src/main.rs",
        "fn main() {\n    println!(\"{}\", dep::add(2, 3));\n}\n\n#[cfg(test)]\nmod tests {\n    \
         #[test]\n    fn adds() {\n        assert_eq!(dep::add(2, 3), 5);\n    }\n}\n",
    );
    write(
        "c/hello.c",
        "#include <stdio.h>\nint main(void) { printf(\"hello from c\\n\"); return 0; }\n",
    );
    write("c/Makefile", "hello: hello.c\n\tcc -o hello hello.c\n");
    write("py/calc.py", "def add(a, b):\n    return a + b\n");
    write(
        "py/test_calc.py",
        "import unittest\nimport calc\n\n\nclass Add(unittest.TestCase):\n    def test_add(self):\n        \
         self.assertEqual(calc.add(2, 3), 5)\n",
    );
    write(
        "node/package.json",
        "{\"name\": \"calc\", \"version\": \"1.0.0\", \"scripts\": {\"test\": \"node --test\"}}\n",
    );
    write(
        "node/add.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\n\
         test('adds', () => assert.strictEqual(2 + 3, 5));\n",
    );
    write("repo/README", "a repository\n");
    write("repo/src/main.txt", "some text\n");
}

/// What is in `root`, relative, as a set; what two runs cannot share is left out: git's object
/// files (a commit's name holds its time; their number is kept) and rustc's incremental
/// sessions (named by time and chance); and Link Run's own placeholders in a git folder.
fn files_in(root: &Path) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut objects = 0;
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            let rel = path_str(path.strip_prefix(root).unwrap());
            let kind = entry.file_type().unwrap();
            if rel.contains("/.git/objects/") {
                if kind.is_dir() {
                    todo.push(path);
                } else {
                    objects += 1;
                }
                continue;
            }
            if rel.contains("/target/debug/incremental/") {
                continue;
            }
            // Link Run's placeholder for a repository's missing `config.worktree` (an empty
            // read-only file, made by the sandboxes that follow the repository's `git init`).
            if rel.ends_with("/.git/config.worktree")
                && std::fs::metadata(&path).is_ok_and(|m| m.len() == 0)
            {
                continue;
            }
            if kind.is_dir() {
                todo.push(path);
            }
            seen.insert(rel);
        }
    }
    seen.insert(format!("({objects} git objects)"));
    seen
}

/// What one step gave: its exit code, the files it made, its stdout where it is the point
/// (the program built, git's log).
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    code: i64,
    made: Vec<String>,
    stdout: Option<String>,
}

/// Whether the step's stdout is compared: what a built program printed, git's log.
fn compares_stdout(step: &Step) -> bool {
    matches!(step, (_, "sh", _) | (_, "git", ["log", ..]))
}

/// The folders holding each program on this process's `PATH`, in order (rustup's proxies
/// rather than a toolchain's own `bin`, which cargo puts first for what it runs).
fn programs_path() -> String {
    let mut folders: Vec<PathBuf> = Vec::new();
    for program in PROGRAMS {
        let found = on_path(program).unwrap_or_else(|| panic!("`{program}` is not on PATH"));
        let mut folder = found.parent().unwrap().to_path_buf();
        if *program == "cargo"
            && let Some(cargo_home) = std::env::var_os("CARGO_HOME")
            && PathBuf::from(&cargo_home).join("bin/cargo").is_file()
        {
            folder = PathBuf::from(cargo_home).join("bin");
        }
        if !folders.contains(&folder) {
            folders.push(folder);
        }
    }
    folders
        .iter()
        .map(|f| path_str(f))
        .collect::<Vec<_>>()
        .join(":")
}

#[test]
fn each_project_s_commands_run_under_config_s_line_as_they_run_directly() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let machine = Machine::new("real-work-", None);
    std::fs::write(
        machine.home.join(".gitconfig"),
        "[user]\n\tname = Link Run Tester\n\temail = tester@example.org\n",
    )
    .unwrap();
    let path = programs_path();
    let mut env = machine.env(&path);
    // rustup's homes, where the machine has them (a person with rustup has them at these
    // places in their own home; the test's home is another).
    for name in ["CARGO_HOME", "RUSTUP_HOME"] {
        if let Some(value) = std::env::var_os(name) {
            env.push((name.to_owned(), value));
        }
    }
    let (args, said) = machine.config(&machine::flags(&path, PROGRAMS, &machine.home), &env);
    let files = machine.files();
    make_projects(&files);
    let mut serve = machine.serve(&args);
    let mut inside = Vec::new();
    for step in STEPS {
        let before = files_in(&files);
        let (code, stdout, stderr) = machine::call(&mut serve, step.1, step.2, step.0);
        let made = files_in(&files).difference(&before).cloned().collect();
        assert_eq!(
            code, 0,
            "{step:?} failed inside: {stdout}\n{stderr}\nconfig said:\n{said}"
        );
        inside.push(Outcome {
            code,
            made,
            stdout: compares_stdout(step).then_some(stdout),
        });
    }
    let warnings: Vec<String> = lnk_tests::results::warnings(&serve.stderr())
        .iter()
        .map(|l| (*l).to_owned())
        .collect();
    let warm = serve.stderr().contains("calls start warm");
    machine::close(serve, &machine.home);
    assert!(warnings.is_empty(), "serve warned: {warnings:?}");
    assert!(warm, "calls did not start warm");

    // The same commands directly, with the same variables, on a copy at the same path.
    let sandboxed = machine.home.join("work-sandboxed");
    std::fs::rename(&files, &sandboxed).unwrap();
    std::fs::create_dir(&files).unwrap();
    make_projects(&files);
    let vars: Vec<(String, String)> = lnk_tests::readme::vars(&args)
        .iter()
        .map(|v| {
            let (name, value) = v.split_once('=').unwrap();
            (name.to_owned(), value.to_owned())
        })
        .collect();
    for (step, inside) in STEPS.iter().zip(&inside) {
        let before = files_in(&files);
        let out = Command::new(step.1)
            .args(step.2)
            .current_dir(files.join(step.0))
            .env_clear()
            .envs(vars.iter().map(|(n, v)| (n, v)))
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|err| panic!("{step:?} directly: {err}"));
        let made: Vec<String> = files_in(&files).difference(&before).cloned().collect();
        let directly = Outcome {
            code: i64::from(out.status.code().unwrap_or(-1)),
            made,
            stdout: compares_stdout(step)
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned()),
        };
        assert_eq!(
            *inside,
            directly,
            "{step:?}: inside the sandbox (left) and directly (right) differ; directly it said \
             {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let log = inside[11].stdout.clone().unwrap_or_default();
    assert_eq!(
        log.trim(),
        format!("{IDENTITY} first"),
        "git used the home's identity"
    );
    assert_eq!(inside[3].stdout.as_deref(), Some("hello from c\n"));
}
