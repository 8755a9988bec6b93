//! The descriptor numbers a reaper is started with, which its parent places
//! ([`super::launch`]) and the reaper takes over ([`super::report`], [`super::spare`],
//! [`super::run_stdin`], the proxy channel in [`super::run`](mod@super::run)): one place for the launch
//! contract, which both sides read.

/// The reaper's report pipe (every reaper).
pub const REPORT_FD: i32 = 3;
/// A spare's control socket.
pub const CONTROL_FD: i32 = 4;
/// The descriptor on which a gate gets its run's stdin (`--run-stdin`): a spare's control
/// socket's place, since a gate is never a spare.
pub const RUN_STDIN_FD: i32 = CONTROL_FD;
/// The descriptor on which a reaper started for its call, or a gate, gets the sandbox's end of
/// the proxy's channel (`--net`; a spare gets it with its call instead).
pub const NET_FD: i32 = 5;
/// The lowest descriptor a sandbox's words may name for the reaper to keep open across the
/// sandbox's exec ([`super::passed_fds`]): above every one a reaper places or opens for itself.
pub const PASSED_FDS_FROM: i32 = 100;

const _: () = assert!(REPORT_FD < CONTROL_FD && CONTROL_FD < NET_FD && NET_FD < PASSED_FDS_FROM);
