//! What Link Run's end-to-end test binaries share: where the built binaries are ([`bins`]), the
//! two sandbox prefixes ([`sandbox`]) and the recommended line read from the docs ([`readme`]),
//! a test's folder and the `serve` it starts ([`setup`]), that `serve` spoken to ([`serve`]) and
//! what it answered ([`results`]), a client that gives its roots ([`roots`]), background runs and their records ([`runs`]) and tools
//! ([`tools`]), processes found in `/proc` ([`procs`]), the programs that try to escape a call
//! ([`containment`]), the network's stand-ins for `--net-allow` ([`net`]), what a test that
//! cannot run here does ([`skip`]), the machine's own toolchains put into a test's home
//! ([`toolchains`]), and an agent's world of files, state, keyring and way in, for root or
//! `nobody` ([`world`]).
pub mod bins;
pub mod containment;
pub mod net;
pub mod procs;
pub mod readme;
pub mod results;
pub mod roots;
pub mod runs;
pub mod sandbox;
pub mod serve;
pub mod setup;
pub mod skip;
pub mod stubs;
pub mod toolchains;
pub mod tools;
pub mod world;
