//! The attack: `PATH` holds `.` (or an empty entry), the sandbox is given as a bare name, and the
//! agent writes its own `bwrap` into its files folder. Calls start in that folder, and hosts often
//! start serve there too, so a name looked up again there finds the agent's program, which then
//! runs with no sandbox at all. serve resolves the name once, at start, through the absolute
//! folders of `PATH` only; calls, runs and the record use that path.
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use lnk_tests::results::{ran, text};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes, path_str};
use lnk_tests::setup::Setup;
use lnk_tests::tools::{start, wait_ended};

both_sandboxes!(
    a_call_never_runs_the_agents_sandbox,
    a_run_never_runs_the_agents_sandbox
);

/// The sandbox argv with its program as a bare name, and the `PATH` that finds the real one
/// after a `.` and an empty entry.
fn bare_sandbox(setup: &Setup) -> (Vec<String>, String) {
    let mut argv = setup.sandbox_argv(&setup.files);
    let real = PathBuf::from(&argv[0]);
    let name = real.file_name().unwrap().to_str().unwrap().to_owned();
    let folder = real.parent().unwrap().to_path_buf();
    argv[0] = name;
    let path = format!(".::{}:/usr/bin:/bin", path_str(&folder));
    (argv, path)
}

/// Writes the agent's fake sandbox, named `name`, into `folder`: it leaves `mark` and runs
/// nothing.
fn plant(folder: &Path, name: &str, mark: &Path) {
    let fake = folder.join(name);
    std::fs::write(
        &fake,
        format!("#!/bin/sh\necho \"$@\" >> '{}'\nexit 0\n", path_str(mark)),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn a_call_never_runs_the_agents_sandbox(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let (argv, path) = bare_sandbox(&setup);
    let mark = setup.path("the-agents-sandbox-ran");
    plant(&setup.files, &argv[0], &mark);
    let mut serve = setup
        .serve()
        .sandbox(argv)
        .current_dir(&setup.files)
        .env("PATH", &path)
        .start();
    let result = serve.call(json!({"program": "echo", "args": ["through the real sandbox"]}));
    assert_eq!(ran(&result)["exit_code"], 0, "{result}");
    assert!(
        text(&result).contains("through the real sandbox"),
        "{result}"
    );
    assert!(
        !mark.exists(),
        "the agent's own sandbox program ran: {:?}",
        std::fs::read_to_string(&mark)
    );
}

fn a_run_never_runs_the_agents_sandbox(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let (argv, path) = bare_sandbox(&bg.setup);
    let mark = bg.setup.path("the-agents-sandbox-ran");
    plant(&bg.setup.files, &argv[0], &mark);
    let mut serve = bg
        .serve(&Flags::default())
        .sandbox(argv.clone())
        .current_dir(&bg.setup.files)
        .env("PATH", &path)
        .start();
    let id = start(
        &mut serve,
        json!({"program": "echo", "args": ["through the real sandbox"]}),
    );
    let run = wait_ended(&mut serve, &id, Duration::from_secs(30));
    assert_eq!(run["exit_code"], 0, "{run}");
    let output = std::fs::read_to_string(bg.output_path(&id)).unwrap();
    assert!(output.contains("through the real sandbox"), "{output:?}");
    assert!(
        !mark.exists(),
        "the agent's own sandbox program ran: {:?}",
        std::fs::read_to_string(&mark)
    );
    let record = bg.record(&id).unwrap();
    let recorded = record["launch"]["sandbox"][0].as_str().unwrap().to_owned();
    assert!(
        Path::new(&recorded).is_absolute() && recorded.ends_with(&format!("/{}", argv[0])),
        "the record keeps the sandbox program resolved at start: {recorded:?}"
    );
}
