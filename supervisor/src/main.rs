//! `lnk-link-supervise`: Link Run's supervisor of background runs.
fn main() -> std::process::ExitCode {
    lnk_link_supervise::main()
}
