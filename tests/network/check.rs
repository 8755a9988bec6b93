//! The sandbox check with `--net-allow`, through `check` and `serve`: the recommended line
//! passes, and says what it proved of the network; a line that leaves the sandbox this
//! machine's network, or a prefix that cannot run Link Run's stub, is refused; `--net-allow`
//! values that are no allow-list are refused at start; `config` passes the flag on.

use std::ffi::OsString;
use std::process::{Command, Output};

use lnk_tests::bins::{helpers_dir, link_run};
use lnk_tests::sandbox::{Sandbox, bwrap_line};
use lnk_tests::setup::ServeBuilder;

use super::world::{World, usable};

mod under_bubblewrap {
    lnk_tests::sandbox_test!(
        the_recommended_line_passes_and_says_why,
        the_recommended_line_passes_and_says_why,
        Bwrap,
        warm
    );
    lnk_tests::sandbox_test!(
        a_line_that_shares_the_network_is_refused,
        a_line_that_shares_the_network_is_refused,
        Bwrap,
        warm
    );
    lnk_tests::sandbox_test!(
        a_prefix_that_cannot_run_the_stub_is_refused,
        a_prefix_that_cannot_run_the_stub_is_refused,
        Bwrap,
        warm
    );
    lnk_tests::sandbox_test!(
        what_is_no_allow_list_is_refused_at_start,
        what_is_no_allow_list_is_refused_at_start,
        Bwrap,
        warm
    );
}

/// `lnk-link-run <subcommand>` with `builder`'s flags, to its end.
fn run(subcommand: &str, builder: &ServeBuilder<'_>) -> Output {
    let mut argv = builder.argv();
    argv[0] = OsString::from(subcommand);
    Command::new(link_run())
        .args(argv)
        .output()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn the_recommended_line_passes_and_says_why(sandbox: Sandbox) {
    if !usable() {
        return;
    }
    let world = World::new(sandbox, None);
    let checked = run("check", &world.serve(&world.rules()));
    let report = stdout(&checked);
    assert!(checked.status.success(), "{report}{}", stderr(&checked));
    for line in [
        "ok    a direct connection to serve's listener on this machine's loopback (127.0.0.1:",
        "ok    a route out of the sandbox (192.0.2.1:9, [2001:db8::1]:9): none",
        "ok    Link Run's proxy at 127.0.0.1:3128, asked for a name not on the allow-list \
         (lnk-sandbox-check-",
    ] {
        assert!(report.contains(line), "no `{line}` in:\n{report}");
    }
    assert!(report.ends_with("serve would start\n"), "{report}");
    // serve starts with it, warm: its calls have their proxy (fetches.rs shows them work).
    let serve = world.serve(&world.rules()).start();
    assert!(!serve.stderr().contains("refus"), "{}", serve.stderr());
    serve.check_stdout();
}

fn a_line_that_shares_the_network_is_refused(sandbox: Sandbox) {
    if !usable() {
        return;
    }
    let world = World::new(sandbox, None);
    let mut line = Vec::new();
    for word in bwrap_line(world.files(), &[helpers_dir()]) {
        if word == "--unshare-all" {
            line.extend(
                [
                    "--unshare-user-try",
                    "--unshare-ipc",
                    "--unshare-pid",
                    "--unshare-uts",
                    "--unshare-cgroup-try",
                ]
                .map(str::to_owned),
            );
        } else {
            line.push(word);
        }
    }
    let builder = world.serve(&world.rules()).sandbox(line);
    let checked = run("check", &builder);
    let report = stdout(&checked);
    assert_eq!(checked.status.code(), Some(1), "{report}");
    for leak in [
        "LEAK  a direct connection to serve's listener on this machine's loopback",
        "LEAK  a route out of the sandbox",
        "LEAK  Link Run's proxy at 127.0.0.1:3128",
    ] {
        assert!(report.contains(leak), "no `{leak}` in:\n{report}");
    }
    assert!(report.contains("fix: --unshare-net"), "{report}");
    // serve refuses to start, in one line that names the leak and the fix.
    let refused = run("serve", &builder);
    let said = stderr(&refused);
    assert!(!refused.status.success(), "{said}");
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains("this machine's loopback") && said.contains("--unshare-net"),
        "{said}"
    );
}

fn a_prefix_that_cannot_run_the_stub_is_refused(sandbox: Sandbox) {
    if !usable() {
        return;
    }
    let world = World::new(sandbox, None);
    // The recommended line, then a shell that closes the stub's channel before it runs.
    let mut line = bwrap_line(world.files(), &[helpers_dir()]);
    line.extend(["--", "/bin/sh", "-c", "exec 4>&-; shift; exec \"$@\"", "sh"].map(str::to_owned));
    let builder = world.serve(&world.rules()).sandbox(line);
    let checked = run("check", &builder);
    let report = stdout(&checked);
    assert_eq!(checked.status.code(), Some(1), "{report}");
    assert!(
        report.contains("FAIL  running the probe: the sandbox check could not run its probe"),
        "{report}"
    );
    let refused = run("serve", &builder);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("could not run its probe"),
        "{}",
        stderr(&refused)
    );
}

fn what_is_no_allow_list_is_refused_at_start(sandbox: Sandbox) {
    if !usable() {
        return;
    }
    let world = World::new(sandbox, None);
    for (rule, says) in [
        ("*", "allows every host"),
        ("*:443", "allows every host"),
        ("registry.test:0", "is not a port"),
        ("0x7f000001", "reads as an address"),
        ("a*.test", "may only stand first"),
    ] {
        let refused = run("serve", &world.serve(&[rule.to_owned()]));
        let said = stderr(&refused);
        assert!(!refused.status.success(), "{rule}: {said}");
        assert_eq!(said.lines().count(), 1, "{said}");
        assert!(
            said.starts_with("lnk-link-run: --net-allow ") && said.contains(says),
            "{rule}: {said}"
        );
    }
    // config passes the flag on, into the host's entry.
    let mut argv = world.serve(&world.rules()).argv();
    argv[0] = OsString::from("claude-code");
    let config = Command::new(link_run())
        .arg("config")
        .args(argv)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let entry = stdout(&config);
    assert!(config.status.success(), "{entry}{}", stderr(&config));
    let rule = &world.rules()[0];
    assert!(
        entry.contains("\"--net-allow\",") && entry.contains(rule.as_str()),
        "{entry}"
    );
}
