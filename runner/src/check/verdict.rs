//! The report: the probe's answer read against the plan and against what serve sees from
//! outside, one [`Finding`] per check. A leak refuses the start; a warning does not.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::plan::Plan;
use super::wire::{Answer, Reach};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckOutcome {
    /// It holds.
    Fine,
    /// It leaks: serve refuses to start.
    Leak,
    /// It does not leak what serve must protect, but a person should know.
    Warning,
}

/// One check: what was tried, what happened, and the sandbox flag that fixes it.
#[derive(Debug, Clone)]
pub struct Finding {
    /// How it came out.
    pub outcome: CheckOutcome,
    /// What was tried, for a person.
    pub tried: String,
    /// What happened.
    pub happened: String,
    /// What to change in the sandbox, when it did not hold.
    pub fix: Option<String>,
}

impl Finding {
    pub(super) fn fine(tried: impl Into<String>, happened: impl Into<String>) -> Self {
        Finding {
            outcome: CheckOutcome::Fine,
            tried: tried.into(),
            happened: happened.into(),
            fix: None,
        }
    }

    pub(super) fn bad(
        outcome: CheckOutcome,
        tried: impl Into<String>,
        happened: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Finding {
            outcome,
            tried: tried.into(),
            happened: happened.into(),
            fix: Some(fix.into()),
        }
    }

    /// The finding as one line of `lnk-link-run check`'s report.
    pub fn line(&self) -> String {
        let tag = match self.outcome {
            CheckOutcome::Fine => "ok  ",
            CheckOutcome::Leak => "LEAK",
            CheckOutcome::Warning => "warn",
        };
        let mut line = format!("{tag}  {}: {}", self.tried, self.happened);
        if let Some(fix) = &self.fix {
            let _ = write!(line, "; fix: {fix}");
        }
        line
    }

    /// The finding as part of a refusal or a warning: what was tried, what happened, the fix.
    pub fn short(&self) -> String {
        match &self.fix {
            Some(fix) => format!("{}: {} (fix: {fix})", self.tried, self.happened),
            None => format!("{}: {}", self.tried, self.happened),
        }
    }
}

/// How to hide a folder, for a fix.
fn hide_fix(folder: &std::path::Path, looked_at: &std::path::Path) -> String {
    if folder == looked_at {
        format!(
            "do not bind {} or a folder above it into the sandbox, or put `--tmpfs {}` after the \
             binds",
            folder.display(),
            folder.display()
        )
    } else {
        format!(
            "do not bind {} into the sandbox (bind only what programs need, as the README's \
             recommended line does)",
            looked_at.display()
        )
    }
}

/// Reads `answer` against `plan`. `appeared[i]` says whether the file the probe tried to create
/// in `plan.outside[i]` is there when serve looks from outside; `changed[i]` what the probe's
/// try at `plan.protected[i]` did, when it got through.
pub fn judge(
    plan: &Plan,
    answer: &Answer,
    appeared: &[bool],
    changed: &[Option<String>],
) -> Vec<Finding> {
    let mut findings = Vec::new();
    findings.push(capabilities(answer.capabilities));
    findings.push(environment(answer));
    for (i, hidden) in plan.hidden.iter().enumerate() {
        let seen = answer.stat.get(i).copied().flatten();
        let tried = if hidden.folder == hidden.looked_at {
            format!("{} {}", hidden.what, hidden.folder.display())
        } else {
            format!(
                "{} {} (not made yet: looked at {})",
                hidden.what,
                hidden.folder.display(),
                hidden.looked_at.display()
            )
        };
        findings.push(if seen == Some(hidden.outside) {
            let happened = if hidden.folder == hidden.looked_at {
                "the sandbox shows it as it is".to_owned()
            } else {
                format!(
                    "the sandbox shows {} as it is, so the folder will be visible once made",
                    hidden.looked_at.display()
                )
            };
            Finding::bad(
                CheckOutcome::Leak,
                tried,
                happened,
                hide_fix(&hidden.folder, &hidden.looked_at),
            )
        } else if seen.is_some() {
            Finding::fine(tried, "hidden (another, empty folder stands in its place)")
        } else {
            Finding::fine(tried, "hidden (nothing there)")
        });
    }
    for (i, secret) in plan.secrets.iter().enumerate() {
        let tried = format!("reading {} {}", secret.what, secret.path.display());
        findings.push(if answer.read.get(i).copied().unwrap_or(false) {
            Finding::bad(
                CheckOutcome::Leak,
                tried,
                "read from inside",
                hide_fix(&secret.hide, &secret.hide),
            )
        } else {
            Finding::fine(tried, "could not")
        });
    }
    if let Some((socket, outside)) = &plan.way_in {
        let tried = format!("connecting to the way in {}", socket.display());
        let reach = answer
            .connect
            .first()
            .copied()
            .unwrap_or(Reach::Unreachable);
        let folder = socket.parent().unwrap_or(socket);
        findings.push(match reach {
            Reach::Connected => Finding::bad(
                CheckOutcome::Leak,
                tried,
                "connected",
                hide_fix(folder, folder),
            ),
            Reach::Refused if outside.is_some() => Finding::bad(
                CheckOutcome::Leak,
                tried,
                "the socket is there (nothing listens now)",
                hide_fix(folder, folder),
            ),
            Reach::Refused | Reach::Unreachable => Finding::fine(tried, "could not"),
        });
    }
    let name = &plan.request.write_name;
    for (i, outside) in plan.outside.iter().enumerate() {
        let tried = format!(
            "creating {name} in {} {}",
            outside.what,
            outside.folder.display()
        );
        let inside = answer.write.get(i).copied().unwrap_or(false);
        let landed = appeared.get(i).copied().unwrap_or(false);
        findings.push(if landed {
            Finding::bad(
                CheckOutcome::Leak,
                tried,
                "it appeared there, outside --files",
                format!(
                    "bind {} read-only (--ro-bind) or not at all",
                    outside.folder.display()
                ),
            )
        } else if inside {
            Finding::fine(
                tried,
                "it went to a folder of the sandbox's own, not the real one",
            )
        } else {
            Finding::fine(tried, "could not")
        });
    }
    for (i, target) in plan.protected.iter().enumerate() {
        let (how, path) = if target.create_in {
            ("creating a file in", &target.path)
        } else {
            ("writing", &target.path)
        };
        let tried = format!("{how} {} {}", target.what, path.display());
        findings.push(match changed.get(i).cloned().flatten() {
            Some(happened) => Finding::bad(
                CheckOutcome::Leak,
                tried,
                format!(
                    "{happened}: something outside the sandbox (the user's git, editor or host) \
                     would later run or obey what a program writes there"
                ),
                "put `{protected}` right after the files folder's bind (`--bind {files} {files} \
                 {protected}`), as the recommended line does",
            ),
            None => Finding::fine(tried, "could not"),
        });
    }
    findings.push(pid_namespace(plan, answer));
    findings.push(sockets(answer));
    findings
}

fn capabilities(effective: Option<u64>) -> Finding {
    let tried = "the capabilities of a program";
    let Some(bits) = effective else {
        return Finding::bad(
            CheckOutcome::Leak,
            tried,
            "the probe could not read its own",
            "give the sandbox --cap-drop ALL",
        );
    };
    if bits == 0 {
        return Finding::fine(tried, "none");
    }
    let set = rustix::thread::CapabilitySet::from_bits_retain(bits);
    let names: Vec<String> = set.iter_names().map(|(n, _)| format!("CAP_{n}")).collect();
    let count = bits.count_ones();
    let shown = if names.len() > 3 {
        format!("{} and {} more", names[..3].join(", "), count as usize - 3)
    } else if names.is_empty() {
        format!("{count}")
    } else {
        names.join(", ")
    };
    Finding::bad(
        CheckOutcome::Leak,
        tried,
        format!("it has capabilities ({shown})"),
        "give the sandbox --cap-drop ALL",
    )
}

fn environment(answer: &Answer) -> Finding {
    let tried = "reading serve's environment";
    if let Some(place) = answer.marker_found_in.first() {
        let fix = if place == "its own environment" {
            "give the sandbox --clearenv"
        } else {
            "give the sandbox a PID and a user namespace of its own (--unshare-all)"
        };
        return Finding::bad(
            CheckOutcome::Leak,
            tried,
            format!("serve's marker is in {place}"),
            fix,
        );
    }
    if answer.serve_environ_read {
        return Finding::bad(
            CheckOutcome::Leak,
            tried,
            "it read serve's /proc/<pid>/environ",
            "give the sandbox a PID and a user namespace of its own (--unshare-all)",
        );
    }
    Finding::fine(
        tried,
        format!(
            "could not (serve's marker is in none of the {} environments it could read, and \
             serve's own is out of reach)",
            answer.environments_read
        ),
    )
}

fn pid_namespace(plan: &Plan, answer: &Answer) -> Finding {
    let tried = "the PID namespace";
    match (&plan.pid_namespace, &answer.pid_namespace) {
        (Some(outside), Some(inside)) if outside != inside => {
            Finding::fine(tried, "the sandbox has its own")
        }
        (Some(_), Some(_)) => Finding::bad(
            CheckOutcome::Warning,
            tried,
            "the sandbox shares serve's: its programs can see and signal Link Run's own \
             processes (a program that kills its call's reaper can leave processes running \
             after the call)",
            "give the sandbox --unshare-pid (or --unshare-all)",
        ),
        _ => Finding::bad(
            CheckOutcome::Warning,
            tried,
            "could not tell whether the sandbox has its own (no /proc/self/ns/pid)",
            "give the sandbox --unshare-pid and --proc /proc",
        ),
    }
}

fn sockets(answer: &Answer) -> Finding {
    let tried = format!(
        "connecting to Unix sockets outside --files (under /run, /var/run, /tmp, \
         $XDG_RUNTIME_DIR and the parents of --files; {} entries looked at)",
        answer.entries_searched
    );
    if answer.sockets_reachable == 0 {
        return Finding::fine(tried, "none reachable");
    }
    let named: Vec<String> = answer
        .sockets
        .iter()
        .map(|p: &PathBuf| p.display().to_string())
        .collect();
    Finding::bad(
        CheckOutcome::Warning,
        tried,
        format!(
            "{} reachable ({}{})",
            answer.sockets_reachable,
            named.join(", "),
            if answer.sockets_reachable > named.len() {
                ", …"
            } else {
                ""
            }
        ),
        "do not bind /run, /var/run, /tmp or the folders above --files (or put --tmpfs over \
         them)",
    )
}
