//! `lnk-link-run`: Link Run's MCP server over stdio.
fn main() -> std::process::ExitCode {
    lnk_link_run::main()
}
