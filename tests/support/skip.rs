//! A test that cannot run here (no bubblewrap, no SDK client, not root, a pid that cannot be
//! had) fails, unless a skip is asked for with `LNK_ALLOW_SKIP=1`: then it passes without
//! running and says so on the terminal. So a green run is one in which every test ran.
//!
//! `LNK_REQUIRE_SANDBOX=1` and `LNK_REQUIRE_SDK=1` (CI sets them) are still read: they keep
//! bubblewrap, or the SDK clients, required even where `LNK_ALLOW_SKIP=1` allows other skips.

/// The variable that lets a test that cannot run here pass without running.
pub const ALLOW_SKIP: &str = "LNK_ALLOW_SKIP";

/// Whether the variable `name` is `1`.
fn set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|value| value == "1")
}

/// The calling test cannot run here, because of `why`: it fails, or with `LNK_ALLOW_SKIP=1`
/// says it is skipped (the caller then returns without running).
pub fn skip(why: &str) {
    assert!(
        set(ALLOW_SKIP),
        "{why}: this test cannot run here (set {ALLOW_SKIP}=1 to skip it)"
    );
    say_skipped(why);
}

/// [`skip`] for what `require` (`LNK_REQUIRE_SANDBOX`, `LNK_REQUIRE_SDK`), when `1`, requires
/// whatever `LNK_ALLOW_SKIP` says.
pub fn skip_required_by(require: &str, why: &str) {
    assert!(
        !set(require),
        "{why}, and {require}=1 requires this test to run"
    );
    skip(why);
}

/// Says on the terminal that a test was skipped, and why. `eprintln!` would be captured with the
/// test's output and shown only if it failed; a write to the stderr handle is not captured, so
/// a person running `cargo test` sees every skip.
fn say_skipped(why: &str) {
    use std::io::Write;
    let line = format!(
        "skipped: {}: {why}\n",
        std::thread::current().name().unwrap_or("a test")
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
}
