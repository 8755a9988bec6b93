//! The check of the cache folders: the probe creates a file in each (the `--cache` folders and
//! the caches found on this machine, [`crate::caches::found`]), and serve looks from outside
//! whether it landed in the user's folder. A cache the agent's programs can write is a cache
//! that runs at the user's next build, outside any sandbox: serve refuses such a line, naming
//! `--cache` and `{caches}` (each sandbox's own layer) as the fix. It warns when a `--cache`
//! folder is not in the sandbox at all, and when the layers cannot be made here.

use super::plan::{CacheProbe, Plan};
use super::verdict::{CheckOutcome, Finding};
use super::wire::Answer;
use crate::config::Config;

/// Adds the cache folders to `plan`: the `--cache` folders, then this machine's caches that are
/// not among them (and not inside `--files`, which programs may write by design).
pub fn plan(plan: &mut Plan, config: &Config) {
    for folder in &config.caches.folders {
        let stat_at = plan.request.stat.len();
        plan.request.stat.push(folder.path.clone());
        let write_at = plan.request.write.len();
        plan.request.write.push(folder.path.clone());
        plan.caches.push(CacheProbe {
            what: format!("the cache --cache {}", folder.path.display()),
            inside: folder.path.clone(),
            outside: folder.real.clone(),
            given: true,
            stat_at: Some(stat_at),
            write_at,
        });
    }
    let Some(home) = crate::sandbox_line::never_list::home() else {
        return;
    };
    for found in crate::caches::found::on_this_machine(&home) {
        let real = found
            .path
            .canonicalize()
            .unwrap_or_else(|_| found.path.clone());
        if config.caches.holds(&found.path) || config.caches.holds(&real) {
            continue;
        }
        if real.starts_with(&config.files) || found.path.starts_with(&config.files) {
            continue;
        }
        let write_at = plan.request.write.len();
        plan.request.write.push(found.path.clone());
        plan.caches.push(CacheProbe {
            what: format!("{}'s cache {}", found.tool, found.path.display()),
            inside: found.path.clone(),
            outside: real,
            given: false,
            stat_at: None,
            write_at,
        });
    }
}

/// For each cache of `plan`, whether the file the probe tried to create there (`name`) is in
/// the user's folder, looked at from outside; it is taken away again.
pub fn landed(plan: &Plan, name: &str) -> Vec<bool> {
    plan.caches
        .iter()
        .map(|cache| {
            let path = cache.outside.join(name);
            let landed = path.symlink_metadata().is_ok();
            if landed && let Err(err) = std::fs::remove_file(&path) {
                tracing::warn!(path = %path.display(), %err, "cannot remove the sandbox check's file");
            }
            landed
        })
        .collect()
}

/// The findings of the caches: one per cache, and one when the layers cannot be made here.
pub fn judge(plan: &Plan, config: &Config, answer: &Answer, landed: &[bool]) -> Vec<Finding> {
    let name = &plan.request.write_name;
    let mut findings = Vec::new();
    if let Some(warning) = config.caches.warning() {
        findings.push(Finding::bad(
            CheckOutcome::Warning,
            "making each sandbox's cache layers",
            warning,
            "allow unprivileged user namespaces for lnk-link-run and lnk-link-supervise",
        ));
    }
    for (i, cache) in plan.caches.iter().enumerate() {
        let tried = format!("creating {name} in {}", cache.what);
        let inside = answer.write.get(cache.write_at).copied().unwrap_or(false);
        let seen = cache
            .stat_at
            .and_then(|at| answer.stat.get(at).copied().flatten());
        let finding = if landed.get(i).copied().unwrap_or(false) {
            Finding::bad(
                CheckOutcome::Leak,
                tried,
                "it appeared in the user's cache folder, where the user's next build would run \
                 what the agent put there",
                fix(cache, config),
            )
        } else if inside {
            Finding::fine(
                tried,
                "it went to the sandbox's own layer, not the user's folder",
            )
        } else if cache.given && seen.is_none() {
            Finding::bad(
                CheckOutcome::Warning,
                tried,
                "the sandbox does not show the cache, so programs cannot read it",
                "put the word {caches} in the sandbox line (after the binds of the folders \
                 above it, and after a --tmpfs over the home)",
            )
        } else if cache.given {
            Finding::fine(tried, "could not (the cache is read-only in the sandbox)")
        } else {
            Finding::fine(tried, "could not")
        };
        findings.push(finding);
    }
    findings
}

/// What to do about a cache the sandbox lets programs write.
fn fix(cache: &CacheProbe, config: &Config) -> String {
    let folder = cache.inside.display();
    if cache.given && config.caches.unlayered.is_some() {
        return format!(
            "bind {folder} only through the word {{caches}}, which binds it read-only here \
             (the layers cannot be made on this machine), or read-only (--ro-bind) yourself"
        );
    }
    if cache.given {
        return format!(
            "bind {folder} only through the word {{caches}} (each sandbox's own layer), never \
             read-write with --bind"
        );
    }
    format!(
        "give serve --cache {folder} and bind it with the word {{caches}} in place of its bind \
         (each sandbox then writes to a layer of its own), or bind it read-only (--ro-bind)"
    )
}

#[cfg(test)]
mod tests;
