use super::*;
use crate::caches::{CacheFolder, Caches};
use crate::check::wire::Request;

fn config(unlayered: Option<&str>) -> Config {
    Config {
        caches: Caches {
            folders: vec![CacheFolder {
                path: "/h/.cargo/registry".into(),
                real: "/h/.cargo/registry".into(),
            }],
            unlayered: unlayered.map(str::to_owned),
        },
        ..crate::testing::config("/w", &["/usr/bin/bwrap"])
    }
}

/// A plan with the given cache and a found one (npm's), as [`plan`] makes it.
fn plan_of() -> Plan {
    let mut plan = Plan {
        request: Request {
            write_name: ".lnk-sandbox-check-x".into(),
            ..Request::default()
        },
        hidden: Vec::new(),
        secrets: Vec::new(),
        way_in: None,
        outside: Vec::new(),
        pid_namespace: None,
        caches: Vec::new(),
        protected: Vec::new(),
    };
    plan.request.stat.push("/h/.cargo/registry".into());
    plan.request.write.push("/h/.cargo/registry".into());
    plan.request.write.push("/h/.npm".into());
    plan.caches = vec![
        CacheProbe {
            what: "the cache --cache /h/.cargo/registry".into(),
            inside: "/h/.cargo/registry".into(),
            outside: "/h/.cargo/registry".into(),
            given: true,
            stat_at: Some(0),
            write_at: 0,
        },
        CacheProbe {
            what: "npm's cache /h/.npm".into(),
            inside: "/h/.npm".into(),
            outside: "/h/.npm".into(),
            given: false,
            stat_at: None,
            write_at: 1,
        },
    ];
    plan
}

fn answer(seen: bool, wrote: [bool; 2]) -> Answer {
    let id = lnk_common::record::FileId { dev: 1, ino: 2 };
    Answer {
        stat: vec![seen.then_some(id)],
        write: wrote.to_vec(),
        ..Answer::default()
    }
}

fn outcomes(findings: &[Finding]) -> Vec<CheckOutcome> {
    findings.iter().map(|f| f.outcome).collect()
}

#[test]
fn a_write_that_stays_in_the_layer_is_fine_and_one_that_lands_is_a_leak() {
    let plan = plan_of();
    let layered = config(None);
    let findings = judge(
        &plan,
        &layered,
        &answer(true, [true, false]),
        &[false, false],
    );
    assert_eq!(
        outcomes(&findings),
        [CheckOutcome::Fine, CheckOutcome::Fine]
    );
    assert!(
        findings[0].happened.contains("the sandbox's own layer"),
        "{findings:?}"
    );
    // The found cache bound read-write: the file landed in the user's folder.
    let findings = judge(&plan, &layered, &answer(true, [true, true]), &[false, true]);
    assert_eq!(
        outcomes(&findings),
        [CheckOutcome::Fine, CheckOutcome::Leak]
    );
    let fix = findings[1].fix.clone().unwrap_or_default();
    assert!(
        fix.contains("--cache /h/.npm") && fix.contains("{caches}"),
        "{fix}"
    );
}

#[test]
fn without_layers_a_cache_bound_read_write_is_a_leak_and_the_fallback_a_warning() {
    let plan = plan_of();
    let unlayered = config(Some("the cache layer could not be made: …"));
    let findings = judge(
        &plan,
        &unlayered,
        &answer(true, [true, false]),
        &[true, false],
    );
    assert_eq!(
        outcomes(&findings),
        [
            CheckOutcome::Warning,
            CheckOutcome::Leak,
            CheckOutcome::Fine
        ]
    );
    assert!(
        findings[0].happened.contains("bound read-only instead"),
        "{findings:?}"
    );
    let fix = findings[1].fix.clone().unwrap_or_default();
    assert!(
        fix.contains("{caches}") && fix.contains("read-only"),
        "{fix}"
    );
    // Read-only, as {caches} binds it then: the probe could not write.
    let findings = judge(
        &plan,
        &unlayered,
        &answer(true, [false, false]),
        &[false, false],
    );
    assert_eq!(
        outcomes(&findings),
        [
            CheckOutcome::Warning,
            CheckOutcome::Fine,
            CheckOutcome::Fine
        ]
    );
    assert!(findings[1].happened.contains("read-only"), "{findings:?}");
}

#[test]
fn a_cache_the_sandbox_does_not_show_is_a_warning() {
    let findings = judge(
        &plan_of(),
        &config(None),
        &answer(false, [false, false]),
        &[false, false],
    );
    assert_eq!(
        outcomes(&findings),
        [CheckOutcome::Warning, CheckOutcome::Fine]
    );
    assert!(
        findings[0]
            .fix
            .as_deref()
            .unwrap_or_default()
            .contains("{caches}")
    );
}
