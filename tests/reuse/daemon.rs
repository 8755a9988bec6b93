//! The run's session id taken by a `setsid` daemon after pid reuse: the sweep leaves the
//! daemon's child running, records the run `lost`, and says in its log and in the record what
//! it left.
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use rustix::process::{Pid, Signal, WaitOptions};

use lnk_tests::bins::link_supervise;
use lnk_tests::bins::procs;
use lnk_tests::procs::{alive, wait_dead, wait_for_role, with_marker};
use lnk_tests::procs::{signal, wait_supervisor};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes, path_str};
use lnk_tests::serve::ANSWER;
use lnk_tests::skip::skip;
use lnk_tests::tools::{procs_args, start};

both_sandboxes!(a_sweep_leaves_a_daemon_that_took_the_runs_session_after_pid_reuse);

/// One test at a time cycles the pids.
static CYCLING: Mutex<()> = Mutex::new(());

/// How many times the pid is tried for before the test gives up (another process may take it
/// first, each time).
const TRIES: usize = 200;

/// `/proc/<pid>/stat`'s process group and session.
fn group_and_session(pid: i32) -> Option<(i32, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some((fields.get(2)?.parse().ok()?, fields.get(3)?.parse().ok()?))
}

/// Whether any process (a zombie too) has `id` as its pid, its group or its session.
fn id_in_use(id: i32) -> bool {
    std::path::Path::new(&format!("/proc/{id}")).exists()
        || std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .any(|pid| group_and_session(pid).is_some_and(|(g, s)| g == id || s == id))
}

/// Reaps `pid` if it is this process's child (a zombie reparented here, or one to come).
fn reap(pid: i32) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = rustix::process::waitpid(Some(pid), WaitOptions::empty());
    }
}

/// This process's children that are not `but`: the run's processes reparented here.
fn my_children(but: &[i32]) -> Vec<i32> {
    let me = std::process::id();
    let mut all = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{me}/task"))
        .unwrap()
        .flatten()
    {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        all.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    }
    all.retain(|pid| !but.contains(pid));
    all
}

/// Starts `command` with `target` as its pid, cycling the pid counter to it: through
/// `ns_last_pid` when it can be written, else by starting short-lived processes until the
/// counter is just below it. `None` when the pids cannot be cycled (the test fails, or is
/// skipped with `LNK_ALLOW_SKIP=1`).
fn start_as(target: i32, mut command: impl FnMut() -> Command) -> Option<Child> {
    let pid_max: i32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let writable = std::fs::write("/proc/sys/kernel/ns_last_pid", (target - 1).to_string()).is_ok();
    if !writable && pid_max > 100_000 {
        skip(&format!(
            "the pid counter cannot be set (/proc/sys/kernel/ns_last_pid is not writable) and \
             cycling {pid_max} pids by starting processes takes too long"
        ));
        return None;
    }
    for _ in 0..TRIES {
        if writable {
            std::fs::write("/proc/sys/kernel/ns_last_pid", (target - 1).to_string()).unwrap();
        } else {
            // Start processes until the last one had the pid before the target.
            loop {
                let mut filler = Command::new("/bin/true").spawn().unwrap();
                let pid = i32::try_from(filler.id()).unwrap();
                filler.wait().unwrap();
                if pid == target - 1 {
                    break;
                }
            }
        }
        let mut child = command().spawn().unwrap();
        if i32::try_from(child.id()).unwrap() == target {
            return Some(child);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    skip(&format!(
        "another process took pid {target} first, {TRIES} times"
    ));
    None
}

fn a_sweep_leaves_a_daemon_that_took_the_runs_session_after_pid_reuse(sandbox: Sandbox) {
    let _one = CYCLING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // What the run leaves once its supervisor is killed is reparented here and reaped here.
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).unwrap();
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("tree", &mark, 120));
    wait_for_role(&mark, "linger", ANSWER);
    let supervisor = wait_supervisor(&id, ANSWER);
    let (_, gate) = bg.group(&id);
    let session = gate;
    // Both reapers gone at once, as a crash leaves them; then what ran in the run ends too,
    // so that nothing holds the run's ids.
    signal(supervisor.pid, Signal::STOP);
    signal(gate, Signal::KILL);
    signal(supervisor.pid, Signal::KILL);
    reap(supervisor.pid);
    for program in with_marker(&mark) {
        signal(program.pid, Signal::KILL);
    }
    let serve_pid = serve.pid();
    let settled = lnk_tests::procs::poll(ANSWER, || {
        for child in my_children(&[serve_pid]) {
            signal(child, Signal::KILL);
            reap(child);
        }
        !id_in_use(session)
    });
    assert!(settled, "the run's session {session} is still in use");
    // The daemon: `setsid` makes pid `session` a session's leader; it starts a child and exits.
    let mark2 = bg.marker();
    let daemon = start_as(session, || {
        let mut command = Command::new("setsid");
        command
            .args([
                "sh",
                "-c",
                "\"$0\" linger \"$1\" 300 & exit 0",
                &procs(),
                &mark2,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command
    });
    let Some(mut daemon) = daemon else {
        drop(serve);
        return;
    };
    assert!(daemon.wait().unwrap().success());
    let child = wait_for_role(&mark2, "linger", ANSWER);
    assert_eq!(
        group_and_session(child.pid),
        Some((session, session)),
        "the daemon's child is in the run's recorded session and group"
    );

    let sweep = Command::new(link_supervise())
        .args(["sweep", &path_str(&bg.state)])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&sweep.stderr).into_owned();
    assert!(sweep.status.success(), "the sweep failed: {log}");
    let daemon_lives = alive(child.pid);
    signal(child.pid, Signal::KILL);
    reap(child.pid);
    assert!(
        daemon_lives,
        "the sweep killed another program's daemon: {log}"
    );
    let record = bg.record(&id).unwrap_or_else(|| panic!("no record"));
    assert_eq!(record["status"]["state"], "lost", "{record}");
    let left = record["left_running"].as_str().unwrap_or_default();
    assert!(
        left.contains(&child.pid.to_string()) && left.contains("left running"),
        "the record does not say what was left: {record}"
    );
    assert!(
        log.contains("left running") && log.contains(&child.pid.to_string()),
        "the sweep's log does not say what was left: {log}"
    );
    assert!(wait_dead(child.pid, Duration::from_secs(10)));
    drop(serve);
}
