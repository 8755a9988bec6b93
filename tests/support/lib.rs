//! What Link Run's end-to-end test binaries share: where the built binaries are ([`bins`]), the
//! two sandbox prefixes ([`sandbox`]) and the recommended line read from the docs ([`readme`]),
//! a `serve` started and spoken to ([`serve`]), background runs and their records ([`runs`]),
//! processes found in `/proc` ([`procs`]), the programs that try to escape a call
//! ([`containment`]), and what a test that cannot run here does ([`skip`]).
pub mod bins;
pub mod containment;
pub mod procs;
pub mod readme;
pub mod runs;
pub mod sandbox;
pub mod serve;
pub mod skip;
