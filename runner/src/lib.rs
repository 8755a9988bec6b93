//! Link Run's runner.
/// Entry point.
pub fn main() -> std::process::ExitCode {
    std::process::ExitCode::SUCCESS
}
