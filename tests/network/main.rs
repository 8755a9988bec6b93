//! End-to-end tests of the network by allow-list (`serve --net-allow`): programs under the
//! recommended line reach the hosts of the list through Link Run's proxy and nothing else,
//! every refusal is named in the answer, background runs keep their proxy, and the sandbox
//! check proves the line keeps the network cut. The registry and the forge are stand-ins on
//! this machine's loopback (`lnk_tests::net`), named through a hosts file serve reads in a
//! mount namespace of its own.
//!
//! These need bubblewrap, root (for the mount namespace and to run as `nobody`), and the
//! programs the calls use (`curl`, `python3` with `pip`, `git`): a test that cannot run here
//! fails, unless `LNK_ALLOW_SKIP=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// What every test here stands the network in with.
mod world;

/// The sandbox check with `--net-allow`, `check`, and the flag's refusals.
mod check;
/// Allowed fetches with curl, urllib, git and pip, a tunnel carrying anything, and what is
/// refused, warm and cold, as root and as `nobody`.
mod fetches;
/// A hostile program against the proxy and the cut network.
mod hostile;
/// A hostile program looking for another sandbox's proxy, and many connections at once.
mod hostile_more;
/// Background runs: the supervisor's proxy, the record's figures, list and read.
mod runs;
