//! Background runs with `--net-allow`: the run's supervisor holds its proxy, so a run that
//! outlives serve still reaches its hosts (and only them); its record keeps its figures once
//! it ended, and `list` and `read` show them, from another serve.

use std::time::Duration;

use serde_json::json;

use lnk_tests::results::{structured, text};
use lnk_tests::sandbox::Sandbox;
use lnk_tests::tools::{list, read, start, tool};

use super::world::{HELLO, World, usable};

mod under_the_recommended_line {
    lnk_tests::sandbox_test!(
        a_run_keeps_its_proxy_after_serve_is_gone,
        a_run_keeps_its_proxy_after_serve_is_gone,
        Bwrap,
        warm
    );
    lnk_tests::sandbox_test!(
        a_run_keeps_its_proxy_after_serve_is_gone_cold,
        a_run_keeps_its_proxy_after_serve_is_gone,
        Bwrap,
        cold
    );
}

fn a_run_keeps_its_proxy_after_serve_is_gone(sandbox: Sandbox) {
    if !usable() {
        return;
    }
    let world = World::new(sandbox, None);
    let r = world.registry.port();
    let mut serve = world.serve_with_runs(&world.rules()).start();
    let script = format!(
        "sleep 3; curl -sS --fail http://registry.test:{r}/hello; \
         curl -sS http://unlisted.test:{r}/x; echo end"
    );
    let id = start(&mut serve, json!({"program": "sh", "args": ["-c", script]}));
    // serve is gone (SIGKILL) before the run fetches anything.
    drop(serve);
    let ended = world
        .bg
        .wait_record(&id, Duration::from_secs(60), |record| {
            record["status"]["state"] != "running"
        });
    assert_eq!(ended["status"]["state"], "exited", "{ended}");
    let figures = &ended["network"];
    assert_eq!(figures["connections"], 1, "{ended}");
    assert_eq!(
        figures["refused"],
        json!([{"host": "unlisted.test", "port": r, "count": 1, "why": "not on the allow-list"}]),
        "{ended}"
    );
    assert!(
        ended["launch"]["net_allow"]
            .as_array()
            .is_some_and(|rules| rules.len() == 6)
    );
    let output = std::fs::read_to_string(world.bg.output_path(&id)).unwrap();
    assert!(output.starts_with(HELLO), "{output}");
    assert!(
        output.contains(&format!(
            "Link Run's proxy refused unlisted.test:{r}: not on the allow-list"
        )),
        "{output}"
    );
    assert_eq!(world.registry.requests(), ["GET /hello HTTP/1.1"]);

    // Another serve shows the figures: list (its line and its value) and read.
    let mut again = world.serve_with_runs(&world.rules()).start();
    let runs = list(&mut again);
    let run = runs.iter().find(|run| run["id"] == id.as_str()).unwrap();
    assert_eq!(run["network"], *figures, "{run}");
    let listed = tool(&mut again, "list", json!({}), None);
    assert!(
        text(&listed).contains(&format!(
            "1 connections through the proxy, refused: unlisted.test:{r}, not on the allow-list"
        )),
        "{}",
        text(&listed)
    );
    let read = read(&mut again, json!({"id": id}));
    assert_eq!(structured(&read)["network"], *figures, "{read}");
}
