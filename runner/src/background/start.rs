//! `start`: checks a call as `command` does, then, under `start.lock` (shared), takes a free
//! slot (the cap: see `lnk_common::slot`), creates the run's lock (locked) and record, and
//! hands the lock and the slot to a new `lnk-link-supervise supervise` in a session of its own.

use std::process::{Command, Stdio};

use lnk_common::id::{AgentId, RunId};
use lnk_common::layout::StateDir;
use lnk_common::lock::{self, StartLock};
use lnk_common::record::{FileId, Launch, Limits, Program, Record, TellTo};
use lnk_common::safe_open::FilesDir;
use lnk_common::slot::Slot;
use lnk_common::status::Status;
use lnk_common::time::{UnixMs, duration_to_ms};
use serde_json::{Map, Value, json};

use super::detached;
use crate::answer::ToolAnswer as Answer;
use crate::config::{Background, Config};
use crate::context::ToolContext;
use crate::{program, tools, workdir};

/// `_meta` key: the conversation a run tells when it ends.
pub const META_THREAD: &str = "link.local/thread";
/// `_meta` key: how many hops of telling led to this call.
pub const META_HOPS: &str = "link.local/hops";
/// How long a start waits for `start.lock` (held only while another start counts and writes).
const START_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The `start` tool.
pub fn start(
    ctx: &ToolContext<'_>,
    background: &Background,
    arguments: &Map<String, Value>,
    meta: Option<&Map<String, Value>>,
) -> Answer {
    match prepare(ctx.config, background, arguments, meta)
        .and_then(|launch| launch_run(background, launch))
    {
        Ok(answer) | Err(answer) => answer,
    }
}

/// Checks the call and builds what the run will be.
fn prepare(
    config: &Config,
    background: &Background,
    arguments: &Map<String, Value>,
    meta: Option<&Map<String, Value>>,
) -> Result<Launch, Answer> {
    if arguments.contains_key("input") {
        return Err(Answer::refusal(
            "`start` takes no `input`: a background run's stdin is empty; use `command` for input",
        ));
    }
    let args = tools::command_args(arguments).map_err(Answer::refusal)?;
    let path = program::resolve(&args.program, &config.programs, &config.programs_path)
        .map_err(|e| Answer::refusal(e.to_string()))?;
    // Opened now as the supervisor will open it, so a folder it could not enter is refused
    // here rather than recorded lost later.
    let cwd = workdir::open(&config.files, &args.dir)
        .map(|workdir| workdir.path)
        .map_err(|e| Answer::refusal(e.to_string()))?;
    // With a way in, the end is told to the call's conversation, so there must be one.
    // Without one nobody is told: hosts that send no `_meta` can still start runs and follow
    // them with `list` and `read`, and the record's thread stays empty.
    let thread = match meta.and_then(|m| m.get(META_THREAD)) {
        Some(Value::String(thread)) if !thread.is_empty() => thread.clone(),
        Some(Value::String(_)) | None if background.way_in.is_none() => String::new(),
        Some(Value::String(_)) | None => {
            return Err(Answer::refusal(format!(
                "`start` needs a conversation to tell when the run ends (`_meta[\"{META_THREAD}\"]`, \
                 a string), and this call has none; use `command` to run it in the foreground"
            )));
        }
        Some(_) => {
            return Err(Answer::refusal(format!(
                "`_meta[\"{META_THREAD}\"]` must be a string: the conversation to tell"
            )));
        }
    };
    let hops = match meta.and_then(|m| m.get(META_HOPS)) {
        None | Some(Value::Null) => 0,
        Some(value) => match value.as_u64().and_then(|h| u32::try_from(h).ok()) {
            Some(hops) => hops,
            None => {
                return Err(Answer::refusal(format!(
                    "`_meta[\"{META_HOPS}\"]` must be a non-negative integer"
                )));
            }
        },
    };
    if hops >= background.hops {
        return Err(Answer::refusal(format!(
            "this call is {hops} hops deep and background runs may start only below {} hops; \
             run it in the foreground with `command` instead",
            background.hops
        )));
    }
    let tell_to = match &background.way_in {
        Some(way_in) => Some(TellTo {
            way_in: way_in.socket.clone(),
            agent: AgentId::parse(&way_in.agent).map_err(|e| Answer::refusal(e.to_string()))?,
            keyring: way_in.keyring.clone(),
        }),
        None => None,
    };
    let sandbox = config
        .sandbox
        .iter()
        .map(|word| word.to_str().map(str::to_owned))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| {
            Answer::refusal(
                "the sandbox's command line is not UTF-8; background runs cannot record it",
            )
        })?;
    Ok(Launch {
        files: config.files.clone(),
        sandbox,
        program: Program {
            name: args.program,
            args: args.args,
            dir: args.dir,
            path,
            cwd,
        },
        vars: config.vars.iter().cloned().collect(),
        limits: Limits {
            timeout_ms: duration_to_ms(background.timeout),
            output_cap_bytes: background.output,
            keep_ms: duration_to_ms(background.keep),
        },
        thread,
        hops,
        tell_to,
    })
}

/// Counts, creates and hands over, under `start.lock`.
fn launch_run(background: &Background, launch: Launch) -> Result<Answer, Answer> {
    let state = StateDir::new(&background.state);
    let failed = |what: &str, err: &dyn std::fmt::Display| {
        tracing::error!("{what}: {err}");
        Answer::refusal(format!("the run could not be started: {what}: {err}"))
    };
    let files =
        FilesDir::open(&launch.files).map_err(|e| failed("opening the files folder", &e))?;
    let output_dir = files.ensure_background_dir().map_err(|e| {
        Answer::refusal(format!(
            "the run's output cannot go to `background/` in the files folder: {e}; remove or \
             rename what is there"
        ))
    })?;
    // Shared: starts do not wait for each other, only for a `stop`/`remove --state`.
    let _start_lock = StartLock::take_shared_within(&state, START_LOCK_WAIT)
        .map_err(|e| failed("taking start.lock", &e))?;
    let Some(slot) = Slot::take(&state, background.max_running)
        .map_err(|e| failed("taking a slot for the run", &e))?
    else {
        return Err(Answer::refusal(format!(
            "{} background runs are running, the limit; stop one (`list`, `stop`) or wait for \
             one to end",
            background.max_running
        )));
    };
    let id = RunId::generate().map_err(|e| failed("making an id", &e))?;
    let lock =
        lock::create_locked(&state, &id).map_err(|e| failed("creating the run's lock", &e))?;
    let output = output_dir.create_output(&id).map_err(|e| {
        Answer::refusal(format!(
            "the run's output file cannot be made in `background/`: {e}"
        ))
    });
    let output = match output {
        Ok(file) => file,
        Err(answer) => {
            let _ = lock.remove();
            return Err(answer);
        }
    };
    let boot_id =
        lnk_common::proc_info::boot_id().map_err(|e| failed("reading the boot id", &e))?;
    let mut record = Record::new(id.clone(), boot_id, UnixMs::now(), launch);
    record.output.file = FileId::of(&output).ok();
    drop(output);
    if let Err(err) = lnk_common::index::started(&state, &record) {
        let _ = lock.remove();
        return Err(failed("filing the run in the state folder's index", &err));
    }
    if let Err(err) = record.store(&state) {
        let _ = lock.remove();
        return Err(failed("writing the run's record", &err));
    }
    let mut command = Command::new(&background.supervise);
    command
        .arg("supervise")
        .arg(id.as_str())
        .arg("--state")
        .arg(&background.state)
        .stdin(Stdio::from(lock.into_file()))
        .stdout(Stdio::from(slot.into_file()))
        .stderr(detached::log(&state, &state.log(&id)));
    if let Err(err) = detached::spawn(&mut command, "supervisor") {
        record.status = Status::Lost {
            ended_at_ms: UnixMs::now(),
            exit: None,
        };
        let _ = record.store(&state);
        return Err(failed(
            &format!("starting {}", background.supervise.display()),
            &err,
        ));
    }
    let output = format!("background/{id}.out");
    let text = format!(
        "started background run {id}; its output goes to {output} in the files folder (`read` \
         shows it, `stop` ends it)"
    );
    Ok(Answer::ok(
        text,
        json!({"id": id.as_str(), "output": output}),
    ))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::config::WayIn;

    fn files_folder() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("a temporary folder: {e}"));
        let canonical = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        (dir, canonical)
    }

    fn config(files: PathBuf) -> Config {
        Config {
            files,
            programs_path: "/usr/bin:/bin".into(),
            timeout: Duration::from_secs(7),
            output: 64,
            programs: vec!["sleep".into()],
            vars: Vec::new(),
            background: None,
            sandbox: vec!["/usr/bin/bwrap".into(), "--unshare-all".into()],
        }
    }

    fn background(way_in: Option<WayIn>) -> Background {
        Background {
            state: PathBuf::from("/nonexistent/state"),
            max_running: 2,
            timeout: Duration::from_secs(60),
            output: 1024,
            keep: Duration::from_secs(3600),
            hops: 3,
            way_in,
            supervise: PathBuf::from("/nonexistent/lnk-link-supervise"),
        }
    }

    fn way_in() -> WayIn {
        WayIn {
            socket: PathBuf::from("/run/lnk/way-in.sock"),
            agent: "ada".into(),
            keyring: PathBuf::from("/home/ada/.config/lnk/keyring"),
        }
    }

    fn map(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn a_start_records_what_the_run_will_be() {
        let (_dir, files) = files_folder();
        let config = config(files.clone());
        let meta = map(json!({META_THREAD: "th-1", META_HOPS: 2}));
        let launch = prepare(
            &config,
            &background(Some(way_in())),
            &map(json!({"program": "sleep", "args": ["5"]})),
            Some(&meta),
        )
        .unwrap_or_else(|answer| panic!("{}", answer.text));
        assert_eq!(launch.files, files);
        assert_eq!(launch.sandbox, ["/usr/bin/bwrap", "--unshare-all"]);
        assert_eq!(launch.program.name, "sleep");
        assert_eq!(launch.program.args, ["5"]);
        assert_eq!(launch.program.cwd, files);
        assert_eq!(launch.thread, "th-1");
        assert_eq!(launch.hops, 2);
        assert_eq!(launch.limits.timeout_ms, 60_000);
        assert_eq!(launch.limits.output_cap_bytes, 1024);
        let tell_to = launch
            .tell_to
            .unwrap_or_else(|| panic!("a way in was given"));
        assert_eq!(tell_to.agent.as_str(), "ada");
    }

    #[test]
    fn without_a_way_in_a_start_needs_no_conversation() {
        let (_dir, files) = files_folder();
        let launch = prepare(
            &config(files),
            &background(None),
            &map(json!({"program": "sleep", "args": ["5"]})),
            None,
        )
        .unwrap_or_else(|answer| panic!("{}", answer.text));
        assert_eq!(launch.thread, "");
        assert!(launch.tell_to.is_none());
    }

    #[test]
    fn with_a_way_in_a_start_without_a_conversation_is_refused() {
        let (_dir, files) = files_folder();
        let config = config(files);
        for meta in [None, Some(map(json!({META_THREAD: ""})))] {
            let refused = prepare(
                &config,
                &background(Some(way_in())),
                &map(json!({"program": "sleep"})),
                meta.as_ref(),
            )
            .err()
            .unwrap_or_else(|| panic!("a way in needs a conversation"));
            assert!(
                refused.is_error && refused.text.contains(META_THREAD),
                "{}",
                refused.text
            );
        }
    }

    #[test]
    fn too_many_hops_input_and_bad_meta_are_refused() {
        let (_dir, files) = files_folder();
        let config = config(files);
        let cases = [
            (json!({"program": "sleep"}), json!({META_HOPS: 3}), "hops"),
            (
                json!({"program": "sleep", "input": "x"}),
                json!({}),
                "input",
            ),
            (
                json!({"program": "sleep"}),
                json!({META_HOPS: -1}),
                META_HOPS,
            ),
            (
                json!({"program": "sleep"}),
                json!({META_THREAD: 7}),
                META_THREAD,
            ),
            (json!({"program": "cat"}), json!({}), "sleep"),
        ];
        for (arguments, meta, says) in cases {
            let refused = prepare(
                &config,
                &background(None),
                &map(arguments),
                Some(&map(meta)),
            )
            .err()
            .unwrap_or_else(|| panic!("refused"));
            assert!(refused.text.contains(says), "{}", refused.text);
        }
    }
}
