//! Link Run's benchmarks.
fn main() {}
