//! The names of an agent's key pair in a keyring: `<agent>.key` (the secret) and `<agent>.pub`.
//!
//! `lnk-link-supervise keygen` writes them and supervisors sign with the secret one; `serve`'s
//! sandbox check makes sure no sandboxed program can read it. Both binaries name them here.

use std::path::{Path, PathBuf};

/// The secret key's file name after the agent id.
pub const SECRET_SUFFIX: &str = ".key";
/// The public key's file name after the agent id.
pub const PUBLIC_SUFFIX: &str = ".pub";

/// The paths of `agent`'s secret and public keys in `keyring`.
pub fn key_paths(keyring: &Path, agent: &str) -> (PathBuf, PathBuf) {
    (
        keyring.join(format!("{agent}{SECRET_SUFFIX}")),
        keyring.join(format!("{agent}{PUBLIC_SUFFIX}")),
    )
}
