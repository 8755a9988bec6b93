//! The sandbox check's network part, with `--net-allow`: the probe runs as a call with a proxy
//! runs (under the stub, which hands the proxy its listener, cold or warm), and proves from
//! inside that it cannot connect anywhere but through the proxy: not to listeners serve opens
//! on this machine's loopback for the check, not along any route out (a UDP socket connected
//! to a documentation address), and that the proxy refuses a name not on the allow-list. The
//! proxy's own count of that refusal, read outside, is the other half of the proof.
//!
//! A sandbox that cannot run the stub, or whose loopback is down, cannot give its programs the
//! proxy: serve refuses to start, as it does for a line that leaks.

use std::net::TcpListener;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lnk_common::network::Network;
use lnk_proc::net::allow::Host;
use lnk_proc::net::{AllowList, PROXY_ADDRESS, Proxy};
use lnk_proc::reaper::{LEFTOVER_GRACE, Options};

use super::launch::{PROBE_DEADLINE, Ran, through_reaper};
use super::verdict::{CheckOutcome, Finding};
use super::wire::{NetAnswer, NetRequest, Request, SUBCOMMAND};
use crate::config::Config;

/// Where the probe looks for a route out: documentation addresses, to which a connected UDP
/// socket sends nothing.
const ROUTES: [&str; 2] = ["192.0.2.1:9", "[2001:db8::1]:9"];
/// The fix for a sandbox that reaches a network of its own.
const CUT: &str = "--unshare-net (part of --unshare-all): the sandbox's own network cut, so that \
                   programs reach hosts through Link Run's proxy alone";

/// The network part of a check: serve's listeners, held open while the probe runs, and what
/// the probe is asked.
#[derive(Debug)]
pub struct NetPlan {
    _listeners: Vec<TcpListener>,
    /// What the probe is asked.
    pub request: NetRequest,
}

impl NetPlan {
    /// Opens the listeners the probe must not reach, and picks a name `allow` does not list.
    pub fn new(allow: &AllowList, random: &str) -> std::io::Result<NetPlan> {
        let mut listeners = vec![TcpListener::bind("127.0.0.1:0")?];
        // A machine without IPv6 on its loopback has nothing there to reach.
        if let Ok(v6) = TcpListener::bind("[::1]:0") {
            listeners.push(v6);
        }
        let direct = listeners
            .iter()
            .map(|listener| listener.local_addr().map(|a| a.to_string()))
            .collect::<std::io::Result<Vec<_>>>()?;
        let unlisted = ["invalid", "test", "example"]
            .iter()
            .map(|top| format!("lnk-sandbox-check-{random}.{top}"))
            .find(|name| allow.check(&Host::Name(name.clone()), 443).is_err())
            .unwrap_or_else(|| format!("lnk-sandbox-check-{random}.invalid"));
        Ok(NetPlan {
            _listeners: listeners,
            request: NetRequest {
                direct,
                route: ROUTES.map(str::to_owned).to_vec(),
                proxy: PROXY_ADDRESS.to_string(),
                unlisted,
            },
        })
    }
}

/// Runs the probe as a cold call with a proxy runs: under a reaper started for it, which
/// starts the sandbox with the stub in it and hands it the probe, with a proxy for `allow`.
pub fn run_cold(
    config: &Config,
    allow: &Arc<AllowList>,
    request: &Request,
) -> std::io::Result<Ran> {
    let line = config.sandbox_line().map_err(std::io::Error::other)?;
    let no_vars: [(&str, &str); 0] = [];
    let argv = lnk_common::command_line::sandboxed(
        &line.words,
        no_vars,
        "/proc/self/exe".as_ref(),
        &[SUBCOMMAND],
    );
    let mut options = Options::new(argv, Duration::ZERO, LEFTOVER_GRACE);
    options.net = true;
    options.stub = Some(line.words.len());
    options.caches = config.layers();
    let workdir = crate::call::workdir::open(&config.files, ".")
        .map_err(|err| std::io::Error::other(err.to_string()))?;
    let (proxy, sandbox_end) = Proxy::start(Arc::clone(allow), PROBE_DEADLINE)?;
    let started = Instant::now();
    let reaper = crate::call::spawn::start(
        &options,
        &line.passed,
        workdir.handle.as_fd(),
        true,
        Some(sandbox_end.as_fd()),
    )?;
    drop(sandbox_end);
    let (answer, stderr, elapsed) = through_reaper("sandbox probe", request, reaper, started)?;
    Ok(Ran {
        answer,
        status: None,
        stderr,
        elapsed,
        network: Some(proxy.finish()),
    })
}

/// What the probe's network answer says, with what the proxy counted (`seen`).
pub fn judge(plan: &NetPlan, answer: Option<&NetAnswer>, seen: Option<&Network>) -> Vec<Finding> {
    let request = &plan.request;
    let Some(answer) = answer else {
        return vec![Finding::bad(
            CheckOutcome::Leak,
            "the network",
            "the probe did not try it",
            "a sandbox that runs the probe whole",
        )];
    };
    let mut findings = Vec::new();
    let direct = format!(
        "a direct connection to serve's listener on this machine's loopback ({})",
        request.direct.join(", ")
    );
    findings.push(if answer.direct.iter().any(|connected| *connected) {
        Finding::bad(
            CheckOutcome::Leak,
            direct,
            "it connected: programs reach this machine's network without the proxy",
            CUT,
        )
    } else {
        Finding::fine(direct, "out of reach")
    });
    let route = format!("a route out of the sandbox ({})", request.route.join(", "));
    findings.push(if answer.route.iter().any(|route| *route) {
        Finding::bad(
            CheckOutcome::Leak,
            route,
            "the sandbox has one: programs may send anywhere it leads (UDP, DNS, any port) \
             without the proxy",
            CUT,
        )
    } else {
        Finding::fine(route, "none: the sandbox has its own loopback only")
    });
    let counted = seen.is_some_and(|seen| {
        seen.refused
            .iter()
            .any(|refused| refused.host == request.unlisted)
    });
    let proxy = format!(
        "Link Run's proxy at {}, asked for a name not on the allow-list ({})",
        request.proxy, request.unlisted
    );
    findings.push(if answer.proxy_refused && counted {
        Finding::fine(proxy, "it refused it, and counted the refusal")
    } else {
        Finding::bad(
            CheckOutcome::Leak,
            proxy,
            format!(
                "the programs cannot use it ({}{})",
                answer.proxy_answer,
                if counted {
                    ""
                } else {
                    "; the proxy saw no request"
                }
            ),
            "a sandbox whose own loopback is up (bubblewrap brings it up with --unshare-net) \
             and that runs Link Run's stub as it runs the probe",
        )
    });
    findings
}

#[cfg(test)]
mod tests {
    use lnk_common::network::Refused;

    use super::*;

    fn plan() -> NetPlan {
        let allow = AllowList::parse(["pkg.example"]).unwrap_or_else(|e| panic!("{e}"));
        NetPlan::new(&allow, "abc").unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_cut_sandbox_whose_proxy_refuses_passes() {
        let plan = plan();
        assert_eq!(plan.request.unlisted, "lnk-sandbox-check-abc.invalid");
        let answer = NetAnswer {
            direct: vec![false; plan.request.direct.len()],
            route: vec![false, false],
            proxy_answer: "HTTP/1.1 403 Forbidden".into(),
            proxy_refused: true,
        };
        let seen = Network {
            refused: vec![Refused {
                host: plan.request.unlisted.clone(),
                port: 443,
                count: 1,
                why: "not on the allow-list".into(),
            }],
            ..Network::default()
        };
        let findings = judge(&plan, Some(&answer), Some(&seen));
        assert!(
            findings.iter().all(|f| f.outcome == CheckOutcome::Fine),
            "{findings:?}"
        );
    }

    #[test]
    fn a_reachable_network_or_a_silent_proxy_refuses_the_line() {
        let plan = plan();
        let answer = NetAnswer {
            direct: vec![true],
            route: vec![true, false],
            proxy_answer: "no connection".into(),
            proxy_refused: false,
        };
        let findings = judge(&plan, Some(&answer), None);
        assert_eq!(findings.len(), 3);
        assert!(
            findings.iter().all(|f| f.outcome == CheckOutcome::Leak),
            "{findings:?}"
        );
        assert!(
            findings[0]
                .fix
                .as_deref()
                .is_some_and(|fix| fix.contains("--unshare-net"))
        );
        let none = judge(&plan, None, None);
        assert_eq!(none[0].outcome, CheckOutcome::Leak);
    }
}
