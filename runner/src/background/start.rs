//! `start`: checks a call as `command` does, then, under `start.lock` (shared), takes a free
//! slot (the cap: see `lnk_common::slot`), creates the run's lock (locked) and record, and
//! hands the lock and the slot to a new `lnk-link-supervise supervise` in a session of its own.

use lnk_common::Causes;
use lnk_common::commands;
use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use lnk_common::lock::StartLock;
use lnk_common::record::{Launch, Limits, Program, Record, TellTo};
use lnk_common::run_files::{self, MakeStep};
use lnk_common::safe_open::FilesDir;
use lnk_common::slot::{Slot, SlotCursor};
use lnk_common::status::Status;
use lnk_common::time::{UnixMs, duration_to_ms};
use serde_json::{Map, Value, json};

use super::detached;
use crate::call::workdir;
use crate::config::{Background, Config};
use crate::program;
use crate::sandbox_line::pass::Passed;
use crate::tool_call::answer::{Reply, ToolAnswer as Answer};
use crate::tool_call::args;
use crate::tool_call::context::ToolContext;

/// `_meta` key: the conversation a run tells when it ends.
pub const META_THREAD: &str = "link.local/thread";
/// `_meta` key: how many hops of telling led to this call.
pub const META_HOPS: &str = "link.local/hops";
/// How long a start waits for `start.lock` (held only while another start counts and writes).
const START_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// Where this serve's next start looks for a free slot: after the one it took last, so that
/// starts one after another try one slot each however many runs are alive.
static SLOT_CURSOR: SlotCursor = SlotCursor::new();

/// The `start` tool. When the request declared the Tasks extension, the answer is the run's
/// task, made once its record exists (so that a `tasks/get` for it resolves).
pub fn start(
    ctx: &ToolContext<'_>,
    background: &Background,
    arguments: &Map<String, Value>,
    meta: Option<&Map<String, Value>>,
) -> Reply {
    match prepare_passing(ctx.config, background, arguments, meta, ctx.tasks).and_then(
        |(launch, passed)| {
            let (_, input) = super::stdin::parse(arguments)?;
            launch_run_with(background, (launch, passed), input.as_deref(), |_| Ok(()))
        },
    ) {
        Ok((_, record)) if ctx.tasks => Reply::Task(super::task::created(&record)),
        Ok((answer, _)) | Err(answer) => Reply::Tool(answer),
    }
}

/// [`prepare_passing`], without the descriptors (the tests look at the run only).
#[cfg(test)]
fn prepare(
    config: &Config,
    background: &Background,
    arguments: &Map<String, Value>,
    meta: Option<&Map<String, Value>>,
    follows_task: bool,
) -> Result<Launch, Answer> {
    prepare_passing(config, background, arguments, meta, follows_task).map(|(launch, _)| launch)
}

/// Checks the call and builds what the run will be, with the descriptors its sandbox line
/// names. A call whose host follows the run as a task (`follows_task`) needs no conversation:
/// the host learns of the end by itself.
fn prepare_passing(
    config: &Config,
    background: &Background,
    arguments: &Map<String, Value>,
    meta: Option<&Map<String, Value>>,
    follows_task: bool,
) -> Result<(Launch, Passed), Answer> {
    let (stdin, _) = super::stdin::parse(arguments)?;
    // `command`'s arguments, less those only `start` takes.
    let mut command = arguments.clone();
    for key in super::stdin::KEYS {
        command.remove(key);
    }
    if let Some(unknown) = command
        .keys()
        .find(|k| !["program", "args", "dir"].contains(&k.as_str()))
    {
        return Err(Answer::refusal(format!(
            "unknown argument `{}`; `start` takes program, args, dir, input, interactive, tty, \
             cols and rows",
            crate::mcp::protocol::cut_short(unknown)
        )));
    }
    let args = args::command_args(&command).map_err(Answer::refusal)?;
    let path = program::resolve(&args.program, &config.programs, &config.programs_path)
        .map_err(|e| Answer::refusal(e.to_string()))?;
    // Opened now as the supervisor will open it, so a folder it could not enter is refused
    // here rather than recorded lost later.
    let cwd = workdir::open(&config.files, &args.dir)
        .map(|workdir| workdir.path)
        .map_err(|e| Answer::refusal(e.to_string()))?;
    // With a way in, the end is told to the call's conversation, so there must be one —
    // unless the host follows the run as a task. Without one nobody is told: hosts that send
    // no `_meta` can still start runs and follow them with `list` and `read`, and the
    // record's thread stays empty.
    let thread = match meta.and_then(|m| m.get(META_THREAD)) {
        Some(Value::String(thread)) if !thread.is_empty() => thread.clone(),
        Some(Value::String(_)) | None if background.way_in.is_none() || follows_task => {
            String::new()
        }
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
    // No conversation, no one to tell.
    let tell_to = background
        .way_in
        .as_ref()
        .filter(|_| !thread.is_empty())
        .map(|way_in| TellTo {
            way_in: way_in.socket.clone(),
            agent: way_in.agent.clone(),
            keyring: way_in.keyring.clone(),
        });
    let line = config.sandbox_line().map_err(|why| {
        Answer::refusal(format!(
            "the run's sandbox cannot be made: {why}. Nothing ran"
        ))
    })?;
    let sandbox = line
        .words
        .iter()
        .map(|word| word.to_str().map(str::to_owned))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| {
            Answer::refusal(
                "the sandbox's command line is not UTF-8; background runs cannot record it",
            )
        })?;
    Ok((
        Launch {
            files: config.files.clone(),
            sandbox,
            program: Program {
                name: args.program,
                args: args.args,
                dir: args.dir,
                path,
                cwd,
            },
            vars: config.program_vars().into_iter().collect(),
            limits: Limits {
                timeout_ms: duration_to_ms(background.timeout),
                output_cap_bytes: background.output,
                keep_ms: duration_to_ms(background.keep),
            },
            thread,
            hops,
            tell_to,
            stdin,
            caches: config.layers(),
            net_allow: config
                .net
                .as_ref()
                .map(|allow| allow.texts())
                .unwrap_or_default(),
        },
        line.passed,
    ))
}

/// The steps of a start that create something, in order; a failure at any of them leaves
/// nothing behind (`lnk_common::run_files`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StartStep {
    /// A step of making the run's files.
    Made(MakeStep),
    /// The supervisor, started detached.
    Supervisor,
}

/// Counts, creates and hands over, under `start.lock`; the answer, and the run's record as
/// it was made.
#[cfg(test)]
fn launch_run(background: &Background, launch: Launch) -> Result<(Answer, Record), Answer> {
    launch_run_failing(background, launch, |_| Ok(()))
}

/// [`launch_run`], with `fail` able to make any [`StartStep`] fail (the tests inject failures).
#[cfg(test)]
fn launch_run_failing(
    background: &Background,
    launch: Launch,
    fail: impl Fn(StartStep) -> std::io::Result<()>,
) -> Result<(Answer, Record), Answer> {
    launch_run_with(background, (launch, Passed::default()), None, fail)
}

/// Counts, creates and hands over, under `start.lock`, with the run's `input` (handed to the
/// supervisor on its fd 3) and `fail` able to make any [`StartStep`] fail (the tests inject
/// failures); the answer, and the run's record as it was made.
fn launch_run_with(
    background: &Background,
    (launch, passed): (Launch, Passed),
    input: Option<&str>,
    fail: impl Fn(StartStep) -> std::io::Result<()>,
) -> Result<(Answer, Record), Answer> {
    let state = StateDir::new(&background.state);
    let files_folder = launch.files.clone();
    let failed = |what: &str, err: &(dyn std::error::Error + 'static)| {
        let why = Causes(err);
        tracing::error!("{what}: {why}");
        Answer::refusal(format!("the run could not be started: {what}: {why}"))
    };
    // What can fail without creating anything comes first.
    let boot_id = lnk_proc::proc_info::boot_id().map_err(|e| failed("reading the boot id", &e))?;
    let id = RunId::generate().map_err(|e| failed("making an id", &e))?;
    let files =
        FilesDir::open(&launch.files).map_err(|e| failed("opening the files folder", &e))?;
    let output_dir = files.ensure_background_dir().map_err(|e| {
        Answer::refusal(format!(
            "the run's output cannot go to `background/` in the files folder: {}; remove or \
             rename what is there",
            Causes(&e)
        ))
    })?;
    // Shared: starts do not wait for each other, only for a `stop`/`remove --state`.
    let _start_lock = StartLock::take_shared_within(&state, START_LOCK_WAIT)
        .map_err(|e| failed("taking start.lock", &e))?;
    let Some(slot) = Slot::take(&state, background.max_running, &SLOT_CURSOR)
        .map_err(|e| failed("taking a slot for the run", &e))?
    else {
        return Err(Answer::refusal(format!(
            "{} background runs are running, the limit; stop one (`list`, `stop`) or wait for \
             one to end",
            background.max_running
        )));
    };
    let mut record = Record::new(id.clone(), boot_id, UnixMs::now(), launch);
    let made = run_files::make_failing(&state, &output_dir, &mut record, |step| {
        fail(StartStep::Made(step))
    });
    let mut made = made.map_err(|e| match e.step {
        MakeStep::Output => Answer::refusal(format!(
            "the run's output file cannot be made in `background/`: {}",
            Causes(&e.source)
        )),
        step => failed(step.doing(), &e.source),
    })?;
    // Its sandbox comes up after this answer: what it binds must stay until then.
    crate::sandbox_line::protected::run_started(&files_folder);
    let spawned = fail(StartStep::Supervisor).and_then(|()| {
        // The input goes through a pipe, never the disk; the record holds its length only.
        let input = input
            .map(|text| super::stdin::input_pipe(text.as_bytes()))
            .transpose()?;
        let state_flag = format!("--{}", commands::STATE);
        let input_flag = format!("--{}", commands::INPUT);
        let mut args: Vec<&std::ffi::OsStr> = vec![
            commands::SUPERVISE.as_ref(),
            id.as_str().as_ref(),
            state_flag.as_ref(),
            background.state.as_os_str(),
        ];
        if input.is_some() {
            args.push(input_flag.as_ref());
        }
        let stdio = detached::Stdio {
            stdin: Some(made.hand_over_lock()?.into()),
            stdout: Some(slot.into_file().into()),
            // Opened here, not by the supervisor, so that a supervisor that fails at once
            // (its folder refused, its command line) still says why.
            stderr: detached::log(&state, &state.log(&id)),
            input,
            passed,
        };
        detached::spawn(&background.supervise, &args, stdio, "supervisor")
    });
    if let Err(err) = spawned {
        // The record exists: the run is recorded lost (a sweep removes it in time), rather
        // than unmade.
        made.keep();
        record.status = Status::Lost {
            ended_at_ms: UnixMs::now(),
            exit: None,
        };
        if record.store(&state).is_ok() {
            lnk_common::index::file_end(&state, &record);
        }
        return Err(failed(
            &format!("starting {}", background.supervise.display()),
            &err,
        ));
    }
    made.keep();
    let output = lnk_common::layout::output_relative_path(&id)
        .display()
        .to_string();
    let text = format!(
        "started background run {id}; its output goes to {output} in the files folder (`read` \
         shows it, `stop` ends it)"
    );
    Ok((
        Answer::ok(text, json!({"id": id.as_str(), "output": output})),
        record,
    ))
}

#[cfg(test)]
mod tests;
