//! Link Run's benchmarks: `lnk-bench foreground` measures `lnk-link-run serve` against
//! baselines taken in the same run; `lnk-bench background` measures background runs (`start`,
//! the supervisor's output cap, sweep, `list`, telling) against the issues' targets;
//! `lnk-bench check` measures what the sandbox check adds to serve's start; `lnk-bench
//! machine` the line `config` builds for this machine against the README's; `lnk-bench
//! caches` what the agent's cache layers add to a call; `lnk-bench network` what
//! `--net-allow` costs (`bench/run.sh` builds everything and runs them all).
//
// A benchmark's whole job is to print its report on stdout.
#![allow(clippy::print_stdout)]

mod background;
mod bins;
mod caches;
mod check;
mod foreground;
mod line;
mod machine;
mod network;
mod procs;
mod report;
mod scale;
mod serve;
mod soak;
mod stats;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Benchmarks of Link Run; the binaries they drive are found next to this one.
#[derive(Parser)]
#[command(name = "lnk-bench")]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// `serve` and the `command` tool: per-call overhead, an output flood, concurrency.
    Foreground(foreground::Options),
    /// Background runs: `start`, to the program running, a flood into the output cap, sweep
    /// and `list` over 10,000 records, telling the way in.
    Background(background::Options),
    /// The sandbox check: what it adds to serve's start under the README's recommended line.
    Check(check::Options),
    /// The line `config` builds for this machine against the README's line: `config` itself,
    /// warm and cold calls, bubblewrap alone.
    Machine(machine::Options),
    /// The agent's cache layers: a call warm and cold with two `--cache` folders against none.
    Caches(caches::Options),
    /// `--net-allow`: a call without a connection, a large download and 32 at once, through
    /// the proxy and without.
    Network(network::Options),
    /// Random-moment SIGKILLs of serve and of supervisors under each sandbox: how many left a
    /// process of the call or the run behind (target: none).
    Soak(soak::Options),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.bench {
        Bench::Foreground(options) => foreground::run(options),
        Bench::Background(options) => background::run(options),
        Bench::Check(options) => check::run(options),
        Bench::Machine(options) => machine::run(options),
        Bench::Caches(options) => caches::run(options),
        Bench::Network(options) => network::run(options),
        Bench::Soak(options) => soak::run(options),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("lnk-bench: {err:#}");
            ExitCode::FAILURE
        }
    }
}
