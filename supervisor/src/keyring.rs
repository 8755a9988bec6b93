//! The agent's keys in the keyring: `<agent>.key` (the ed25519 secret seed, 64 hex
//! characters, a regular file of mode 0600 or stricter, never a link) and `<agent>.pub` (the
//! public key, 64 hex characters).
//!
//! The secret is read at the moment it signs and never reaches a log or an error message.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signer, SigningKey};
use rustix::fs::OFlags;

/// A problem with the keyring, naming the file and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum KeyringError {
    /// The key file could not be opened (missing, a link, unreadable).
    #[error("key file {path}: {what}")]
    Open {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// It is not a regular file.
    #[error("key file {path} is not a regular file")]
    NotRegular {
        /// The file.
        path: PathBuf,
    },
    /// Group or others may read or write it.
    #[error("key file {path} has mode {mode:04o}; it must be 0600 or stricter (chmod 600 it)")]
    Mode {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// It does not hold 64 hex characters.
    #[error("key file {path} does not hold a key: it must be 64 hex characters")]
    Malformed {
        /// The file.
        path: PathBuf,
    },
    /// Writing a new key pair failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A key pair exists already.
    #[error("{path} exists already; keygen never overwrites a key")]
    Exists {
        /// The file.
        path: PathBuf,
    },
}

/// The longest key file read: 64 hex characters and a line end, with room for spaces.
const MAX_KEY_FILE: u64 = 80;

pub use lnk_common::keys::key_paths;

/// Reads and checks the agent's secret key.
pub fn read_signing_key(keyring: &Path, agent: &str) -> Result<SigningKey, KeyringError> {
    let (path, _) = key_paths(keyring, agent);
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC).bits() as i32)
        .open(&path)
        .map_err(|err| KeyringError::Open {
            what: if err.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
                "it is a symbolic link; the key must be a regular file".into()
            } else {
                err.to_string()
            },
            path: path.clone(),
        })?;
    let meta = file.metadata().map_err(|err| KeyringError::Open {
        path: path.clone(),
        what: err.to_string(),
    })?;
    if !meta.file_type().is_file() {
        return Err(KeyringError::NotRegular { path });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(KeyringError::Mode { path, mode });
    }
    // 64 hex characters and a line end; anything longer is not a key file.
    if meta.len() > MAX_KEY_FILE {
        return Err(KeyringError::Malformed { path });
    }
    let mut text = String::new();
    (&mut file)
        .take(MAX_KEY_FILE)
        .read_to_string(&mut text)
        .map_err(|_| KeyringError::Malformed { path: path.clone() })?;
    let seed = decode_hex32(text.trim()).ok_or(KeyringError::Malformed { path })?;
    Ok(SigningKey::from_bytes(&seed))
}

/// Signs `message` with the agent's key, read now; the signature is standard padded base64.
pub fn sign(keyring: &Path, agent: &str, message: &[u8]) -> Result<String, KeyringError> {
    use base64::Engine;
    let key = read_signing_key(keyring, agent)?;
    let signature = key.sign(message);
    Ok(base64::engine::general_purpose::STANDARD.encode(signature.to_bytes()))
}

/// Writes a new key pair for `agent`, refusing to overwrite either file.
pub fn generate(keyring: &Path, agent: &str) -> Result<(PathBuf, PathBuf), KeyringError> {
    let (key_path, pub_path) = key_paths(keyring, agent);
    for path in [&key_path, &pub_path] {
        if path.symlink_metadata().is_ok() {
            return Err(KeyringError::Exists { path: path.clone() });
        }
    }
    std::fs::create_dir_all(keyring).map_err(|source| KeyringError::Write {
        path: keyring.to_owned(),
        source,
    })?;
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|err| KeyringError::Write {
        path: key_path.clone(),
        source: std::io::Error::other(err.to_string()),
    })?;
    let key = SigningKey::from_bytes(&seed);
    write_new(&key_path, 0o600, &hex::encode(seed))?;
    write_new(
        &pub_path,
        0o644,
        &hex::encode(key.verifying_key().as_bytes()),
    )?;
    Ok((key_path, pub_path))
}

fn write_new(path: &Path, mode: u32, text: &str) -> Result<(), KeyringError> {
    let wrap = |source| KeyringError::Write {
        path: path.to_owned(),
        source,
    };
    let mut file: File = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|err| {
            if err.kind() == std::io::ErrorKind::AlreadyExists {
                KeyringError::Exists {
                    path: path.to_owned(),
                }
            } else {
                wrap(err)
            }
        })?;
    // The umask may have taken bits away from a public key; the secret's mode is what matters.
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(wrap)?;
    file.write_all(format!("{text}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(wrap)
}

/// 64 hex characters into 32 bytes.
fn decode_hex32(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(text, &mut out).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use ed25519_dalek::{Signature, VerifyingKey};

    #[test]
    fn generates_signs_and_verifies() {
        use base64::Engine;
        let dir = tempfile::tempdir().unwrap();
        let (key, public) = generate(dir.path(), "agent-1").unwrap();
        assert_eq!(key.metadata().unwrap().mode() & 0o777, 0o600);
        let signature = sign(dir.path(), "agent-1", b"body").unwrap();
        let public = decode_hex32(std::fs::read_to_string(public).unwrap().trim()).unwrap();
        let verifying = VerifyingKey::from_bytes(&public).unwrap();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(signature)
            .unwrap();
        let signature = Signature::from_slice(&raw).unwrap();
        assert!(verifying.verify_strict(b"body", &signature).is_ok());
        assert!(matches!(
            generate(dir.path(), "agent-1"),
            Err(KeyringError::Exists { .. })
        ));
    }

    #[test]
    fn refuses_bad_key_files_with_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        generate(dir.path(), "a").unwrap();
        let (key, _) = key_paths(dir.path(), "a");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = read_signing_key(dir.path(), "a").unwrap_err().to_string();
        assert!(err.contains("0644") && err.contains("a.key"), "{err}");

        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&key, "zz").unwrap();
        let err = read_signing_key(dir.path(), "a").unwrap_err();
        assert!(matches!(err, KeyringError::Malformed { .. }));

        let (link, _) = key_paths(dir.path(), "b");
        std::os::unix::fs::symlink(&key, &link).unwrap();
        let err = read_signing_key(dir.path(), "b").unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");

        let err = read_signing_key(dir.path(), "missing")
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing.key"), "{err}");
    }
}
