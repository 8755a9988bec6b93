//! What a sweep does with a run whose supervisor is gone: a run never told past its ten minutes
//! is not retried and goes after its keep; a supervisor killed with SIGKILL mid-run leaves a run
//! the sweep records `lost`, whose group it kills and which it tells once; a pid that now
//! belongs to another process (by start time), or a record from another boot, is never
//! signalled; told runs older than `--background-keep` go with their output, younger ones stay.
//!
//! Records are aged or crafted by the test only while it holds the run's lock, as a supervisor
//! would ([`Tell::edit_record`]).
use std::fs::File;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::disk::{CLI, Decoy, Tell, boot_id, exists, names, now_ms, spawn_cli};
use crate::told::the_message_about;
use crate::wayin::Answer;
use lnk_tests::procs::{alive, wait_for_role, wait_gone};
use lnk_tests::procs::{poll, sigkill, wait_group_gone, wait_no_supervisor, wait_supervisor};
use lnk_tests::runs::Flags;
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::ANSWER;
use lnk_tests::tools::{list, procs_args, start, stop, stopped_run};

both_sandboxes!(
    an_untold_run_past_ten_minutes_is_not_retried_and_goes_after_its_keep,
    a_supervisor_killed_mid_run_is_swept_lost_killed_and_told,
    the_pid_reuse_guard_spares_another_process,
    keep_removes_old_told_runs_with_their_output,
    sweeps_at_once_tell_each_run_once_and_leave_live_runs_alone,
    a_damaged_record_is_moved_aside_and_old_temporaries_go,
    a_record_naming_a_group_its_leader_does_not_lead_kills_nothing,
);

const MINUTE: u64 = 60_000;

/// Sets the record's start and end `ago_ms` before now (the end; the start a second earlier).
fn age(t: &Tell, id: &str, ended_ago_ms: u64) {
    let now = now_ms();
    t.edit_record(id, |r| {
        r["started_at_ms"] = json!(now - ended_ago_ms - 1000);
        r["status"]["ended_at_ms"] = json!(now - ended_ago_ms);
    });
}

/// Whether the state folder holds no file of run `id` (record, lock, stop request).
fn nothing_of(t: &Tell, id: &str) -> bool {
    !names(t.state()).iter().any(|n| n.starts_with(id))
}

fn an_untold_run_past_ten_minutes_is_not_retried_and_goes_after_its_keep(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let flags = Flags {
        keep: "1h",
        ..Flags::default()
    };
    let mut serve = t.serve(&flags).start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "echo out"]}),
    );
    // The way in is down at the end: untold.
    let record = t.wait_done(&id);
    assert_eq!(record["telling"]["told"], false, "{record}");
    assert_eq!(record["telling"]["attempts"], 1, "{record}");
    let output = t.bg.output_path(&id);
    assert!(output.is_file(), "{output:?}");
    let way = t.way_in(Answer::Result);

    // Ended eleven minutes ago: past the ten minutes of retries, within the keep of an hour.
    age(&t, &id, 11 * MINUTE);
    t.sweep();
    assert!(way.received().is_empty(), "retried: {:#?}", way.received());
    let record = t.bg.record(&id).expect("kept within its keep");
    assert_eq!(record["telling"]["told"], false, "{record}");
    assert_eq!(record["telling"]["attempts"], 1, "not retried: {record}");
    assert!(
        output.is_file(),
        "the output went before the keep: {output:?}"
    );

    // Ended more than the keep ago: removed with its output, still untold.
    age(&t, &id, 61 * MINUTE);
    t.sweep();
    assert!(way.received().is_empty(), "retried: {:#?}", way.received());
    assert!(
        t.bg.record(&id).is_none(),
        "the record stays after its keep"
    );
    assert!(!exists(&output), "the output file stays after its keep");
    assert!(nothing_of(&t, &id), "{:?}", names(t.state()));
    assert!(list(&mut serve).is_empty());
}

fn a_supervisor_killed_mid_run_is_swept_lost_killed_and_told(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let way = t.way_in(Answer::Result);
    let mut serve = t.serve(&Flags::default()).start();
    let mark = t.bg.marker();
    // A program with a grandchild: `tree` lingers, and so does its child `linger`.
    let id = start(&mut serve, procs_args("tree", &mark, 120));
    let grandchild = wait_for_role(&mark, "linger", ANSWER);
    wait_for_role(&mark, "tree", ANSWER);
    let supervisor = wait_supervisor(&id, ANSWER);
    let (pgid, _leader) = t.bg.group(&id);

    sigkill(supervisor.pid);
    wait_no_supervisor(&id, ANSWER);
    // Only a zombie has surely let go of the run's lock (the command line goes first).
    assert!(lnk_tests::procs::wait_dead(supervisor.pid, ANSWER));
    // The run's gate, told by its parent-death signal, stops the run at once: nothing of it
    // waits for a sweep. The record still says running: only a sweep may say otherwise.
    wait_gone(&mark, Duration::from_secs(10));
    let record = t.bg.record(&id).unwrap();
    assert_eq!(record["status"]["state"], "running", "{record}");
    assert!(way.received().is_empty(), "{:#?}", way.received());

    // A new serve sweeps at its start.
    drop(serve);
    let _serve = t.serve(&Flags::default()).start();
    let record =
        t.bg.wait_record(&id, ANSWER, |r| r["status"]["state"] != "running");
    assert_eq!(record["status"]["state"], "lost", "{record}");
    assert!(record["status"]["ended_at_ms"].is_u64(), "{record}");
    wait_gone(&mark, Duration::from_secs(10));
    wait_group_gone(pgid, Duration::from_secs(10));
    assert!(!alive(grandchild.pid), "the grandchild survived the sweep");

    let got = way.wait_for(1, ANSWER);
    let body = the_message_about(&got, &id);
    assert_eq!(body["run"]["state"], "lost", "{body}");
    assert!(body["run"]["ended_at"].is_string(), "{body}");
    let told = poll(ANSWER, || {
        t.bg.record(&id)
            .is_some_and(|r| r["telling"]["told"] == true && r["telling"]["attempts"] == 1)
    });
    assert!(told, "{:?}", t.bg.record(&id));

    // Once.
    t.sweep();
    assert_eq!(way.received().len(), 1, "{:#?}", way.received());
}

/// Makes the record of `id` say `running` for the group led by `pid` (started at `start_time`)
/// on boot `boot`, as a supervisor that died would have left it, untold.
fn craft_running(t: &Tell, id: &str, pid: i32, start_time: u64, boot: &str) {
    t.edit_record(id, |r| {
        r["status"] = json!({"state": "running"});
        r["group"] = json!({"pgid": pid, "leader_pid": pid, "leader_start_time": start_time});
        // The gate leads the run's session too: a record naming another is damaged.
        r["sandbox"] = json!({"session": pid, "pgid": null});
        r["boot_id"] = json!(boot);
        r["telling"] = json!({"told": false, "attempts": 0, "last_attempt_at_ms": null});
    });
}

fn the_pid_reuse_guard_spares_another_process(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let way = t.way_in(Answer::Result);
    let mut serve = t.serve(&Flags::default()).start();
    let ids: Vec<String> = (0..3)
        .map(|_| start(&mut serve, json!({"program": "true"})))
        .collect();
    for id in &ids {
        t.wait_done(id);
    }
    assert_eq!(way.received().len(), 3, "{:#?}", way.received());

    // Processes of the test's own, each the leader of a group of its own, that these records
    // will name as their run's leader.
    let mark = t.bg.marker();
    let reused = Decoy::start(&mark);
    let other_boot = Decoy::start(&mark);
    let recorded = Decoy::start(&mark);
    let boot = boot_id();
    let another_boot = "00000000-0000-4000-8000-000000000000";
    assert_ne!(boot, another_boot);
    // Its leader pid now belongs to another process: another start time.
    craft_running(&t, &ids[0], reused.pid, reused.start_time + 1, &boot);
    // From another boot: even the same start time means nothing.
    craft_running(
        &t,
        &ids[1],
        other_boot.pid,
        other_boot.start_time,
        another_boot,
    );
    // The control: the recorded process itself, which the sweep does kill.
    craft_running(&t, &ids[2], recorded.pid, recorded.start_time, &boot);

    t.sweep();
    for id in &ids {
        let record = t.bg.record(id).unwrap();
        assert_eq!(record["status"]["state"], "lost", "{record}");
        assert_eq!(record["telling"]["told"], true, "{record}");
    }
    assert!(
        reused.alive(),
        "the sweep killed a process that reused the leader's pid"
    );
    assert!(
        other_boot.alive(),
        "the sweep killed by a pid from another boot"
    );
    let killed = poll(Duration::from_secs(10), || !recorded.alive());
    assert!(
        killed,
        "the control: the recorded leader itself was not killed"
    );

    // Each told once more, as lost.
    let got = way.received();
    assert_eq!(got.len(), 6, "{got:#?}");
    for id in &ids {
        let lost: Vec<&Value> = got
            .iter()
            .filter(|m| m.body["from"] == format!("run:{id}") && m.body["run"]["state"] == "lost")
            .map(|m| &m.body)
            .collect();
        assert_eq!(lost.len(), 1, "{id}: {got:#?}");
    }
    assert!(got.iter().all(|m| m.problem.is_none()), "{got:#?}");
    drop((reused, other_boot, recorded));
    wait_gone(&mark, Duration::from_secs(10));
}

fn keep_removes_old_told_runs_with_their_output(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let way = t.way_in(Answer::Result);
    let flags = Flags {
        keep: "1m",
        ..Flags::default()
    };
    let mut serve = t.serve(&flags).start();
    let old = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "echo old"]}),
    );
    let young = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "echo young"]}),
    );
    for id in [&old, &young] {
        let record = t.wait_done(id);
        assert_eq!(record["telling"]["told"], true, "{record}");
        assert!(t.bg.output_path(id).is_file());
    }
    assert_eq!(way.received().len(), 2);

    // With a keep of a minute: one ended two minutes ago, one half a minute ago.
    age(&t, &old, 2 * MINUTE);
    age(&t, &young, MINUTE / 2);
    t.sweep();
    assert!(t.bg.record(&old).is_none(), "the old run stays");
    assert!(!exists(&t.bg.output_path(&old)), "the old output stays");
    assert!(nothing_of(&t, &old), "{:?}", names(t.state()));
    assert!(t.bg.record(&young).is_some(), "the young run went");
    assert!(t.bg.output_path(&young).is_file(), "the young output went");
    let runs = list(&mut serve);
    let ids: Vec<&Value> = runs.iter().map(|r| &r["id"]).collect();
    assert_eq!(ids, [&json!(young)], "{runs:#?}");
    assert_eq!(way.received().len(), 2, "{:#?}", way.received());
}

fn sweeps_at_once_tell_each_run_once_and_leave_live_runs_alone(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let mut serve = t.serve(&Flags::default()).start();
    let mark = t.bg.marker();
    let live = start(&mut serve, procs_args("tree", &mark, 120));
    let program = wait_for_role(&mark, "linger", ANSWER);
    let supervisor = wait_supervisor(&live, ANSWER);
    // Three runs end while the way in is down: untold.
    let ended: Vec<String> = (0..3)
        .map(|_| {
            start(
                &mut serve,
                json!({"program": "sh", "args": ["-c", "exit 0"]}),
            )
        })
        .collect();
    for id in &ended {
        assert_eq!(t.wait_done(id)["telling"]["told"], false);
    }

    // The way in comes up; three sweeps at once.
    let way = t.way_in(Answer::Result);
    let state = lnk_tests::sandbox::path_str(t.state());
    let sweeps: Vec<_> = (0..3).map(|_| spawn_cli(&["sweep", &state])).collect();
    for sweep in sweeps {
        let out = sweep.finish(CLI);
        assert!(out.status.success(), "a sweep failed: {}", out.stderr);
    }
    let got = way.received();
    assert_eq!(got.len(), 3, "each told once: {got:#?}");
    for id in &ended {
        the_message_about(&got, id);
        let record = t.bg.record(id).unwrap();
        assert_eq!(record["telling"]["told"], true, "{record}");
    }

    // The live run's supervisor holds its lock: the sweeps left it alone.
    let record = t.bg.record(&live).unwrap();
    assert_eq!(record["status"]["state"], "running", "{record}");
    assert!(
        alive(supervisor.pid) && alive(program.pid),
        "a sweep touched a live run"
    );
    assert_eq!(record["telling"]["attempts"], 0, "{record}");
    // Stopped, it is told once too.
    let run = stopped_run(&stop(&mut serve, &live));
    assert_eq!(run["state"], "stopped", "{run}");
    wait_gone(&mark, Duration::from_secs(10));
    wait_no_supervisor(&live, ANSWER);
    assert_eq!(
        the_message_about(&way.received(), &live)["run"]["state"],
        "stopped"
    );
}

fn a_damaged_record_is_moved_aside_and_old_temporaries_go(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let mut serve = t.serve(&Flags::default()).start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "exit 0"]}),
    );
    assert_eq!(t.wait_done(&id)["telling"]["told"], false);
    let way = t.way_in(Answer::Result);

    // A record that is not one (torn by something else than Link Run: its index names are
    // there, as they are for every record written), a crash's temporary file and one being
    // written now.
    let damaged = "zzzzzzzzzzzzzzzzdamaged";
    std::fs::write(t.bg.record_path(damaged), b"{\"version\": 1, \"id\": ").unwrap();
    std::fs::write(t.state().join("index/running").join(damaged), b"").unwrap();
    let old_temp = t.state().join("tmp/.tmp-leftoverofacrash01");
    let young_temp = t.state().join("tmp/.tmp-beingwrittennow001");
    std::fs::write(&old_temp, b"{").unwrap();
    std::fs::write(&young_temp, b"{").unwrap();
    let two_minutes_ago = SystemTime::now() - Duration::from_secs(120);
    File::options()
        .write(true)
        .open(&old_temp)
        .unwrap()
        .set_modified(two_minutes_ago)
        .unwrap();

    let stderr = t.sweep();
    assert!(
        stderr.contains(damaged),
        "the damaged record is not reported: {stderr}"
    );
    assert!(
        !exists(&t.bg.record_path(damaged)),
        "{:?}",
        names(t.state())
    );
    assert!(
        exists(&t.state().join(format!("{damaged}.damaged"))),
        "not moved aside: {:?}",
        names(t.state())
    );
    assert!(!exists(&old_temp), "a crash's temporary file stays");
    assert!(exists(&young_temp), "a temporary file in use went");
    // The sweep went on: the real run was told.
    let got = way.received();
    assert_eq!(got.len(), 1, "{got:#?}");
    the_message_about(&got, &id);
    // And the tools still work beside it.
    let runs = list(&mut serve);
    assert!(runs.iter().any(|r| r["id"] == id), "{runs:#?}");
    // A second sweep: nothing more.
    t.sweep();
    assert_eq!(way.received().len(), 1);
    assert!(exists(&t.state().join(format!("{damaged}.damaged"))));
}

/// A record edited to name another process group than its leader's (the leader itself gone):
/// the sweep reports it damaged and moves it aside, and the group it names lives on.
fn a_record_naming_a_group_its_leader_does_not_lead_kills_nothing(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let _way = t.way_in(Answer::Result);
    let mut serve = t.serve(&Flags::default()).start();
    let id = start(&mut serve, json!({"program": "true"}));
    t.wait_done(&id);
    let mark = t.bg.marker();
    let victim = Decoy::start(&mark);
    let boot = boot_id();
    t.edit_record(&id, |r| {
        r["status"] = json!({"state": "running"});
        r["group"] = json!({"pgid": victim.pid, "leader_pid": 4_000_000, "leader_start_time": 1});
        r["boot_id"] = json!(boot);
    });
    t.sweep();
    assert!(
        victim.alive(),
        "the sweep killed a group the record's leader does not lead"
    );
    assert!(t.bg.record(&id).is_none(), "the record was not moved aside");
    assert!(exists(&t.state().join(format!("{id}.damaged"))));
    drop(victim);
    wait_gone(&mark, Duration::from_secs(10));
}
