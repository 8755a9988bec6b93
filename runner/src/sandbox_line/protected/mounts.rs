//! Which paths are a mount point in some process's mount namespace: a placeholder that one is
//! still a sandbox's, and removing it would take its mount away there (the kernel detaches a
//! mount whose mount point is removed in another namespace), leaving the name free to make.
//! Every process's `/proc/<pid>/mountinfo` is read, each mount namespace once.

use std::collections::HashSet;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::OsStringExt;
#[cfg(test)]
use std::path::Path;
use std::path::PathBuf;

/// The most of one `mountinfo` read.
const MAX_MOUNTINFO: u64 = 16 << 20;

/// Those of `paths` that some process has a mount on. Processes whose mounts cannot be read
/// (another user's, hidden) cannot hold this user's sandboxes.
pub fn in_use(paths: &HashSet<PathBuf>) -> HashSet<PathBuf> {
    let mut found = HashSet::new();
    if paths.is_empty() {
        return found;
    }
    let mut namespaces = HashSet::new();
    let Ok(pids) = lnk_proc::proc_info::pids() else {
        // Nothing can be proven unused.
        return paths.clone();
    };
    for pid in pids {
        let pid = PathBuf::from(format!("/proc/{pid}"));
        // The namespace's identity; a process whose namespace cannot be named is read anyway.
        if let Ok(ns) = std::fs::read_link(pid.join("ns/mnt"))
            && !namespaces.insert(ns)
        {
            continue;
        }
        let Ok(file) = std::fs::File::open(pid.join("mountinfo")) else {
            continue;
        };
        let mut text = Vec::new();
        if file.take(MAX_MOUNTINFO).read_to_end(&mut text).is_err() {
            continue;
        }
        for point in mount_points(&text) {
            if paths.contains(&point) {
                found.insert(point);
            }
        }
        if found.len() == paths.len() {
            break;
        }
    }
    found
}

/// The mount points of a `mountinfo` (its fifth field, with `\ooo` escapes undone).
pub fn mount_points(text: &[u8]) -> Vec<PathBuf> {
    text.split(|b| *b == b'\n')
        .filter_map(|line| line.split(|b| *b == b' ').nth(4))
        .map(|field| PathBuf::from(OsString::from_vec(unescape(field))))
        .collect()
}

/// `mountinfo`'s octal escapes (`\040` for a space, `\012` for a newline, …) undone.
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        if field[i] == b'\\'
            && i + 3 < field.len()
            && let Some(value) = octal(&field[i + 1..i + 4])
        {
            out.push(value);
            i += 4;
            continue;
        }
        out.push(field[i]);
        i += 1;
    }
    out
}

fn octal(digits: &[u8]) -> Option<u8> {
    if digits.len() != 3 || !digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
        return None;
    }
    let value = digits
        .iter()
        .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
    u8::try_from(value).ok()
}

/// Whether `path` is a mount point in this process's own namespace.
#[cfg(test)]
pub fn mounted_here(path: &Path) -> bool {
    std::fs::read("/proc/self/mountinfo")
        .map(|text| mount_points(&text).iter().any(|p| p == path))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_read_with_their_escapes_undone() {
        let text = b"36 35 98:0 /mnt1 /mnt/a\\040b rw,noatime master:1 - ext3 /dev/root rw\n\
                     37 35 98:0 / /w/.mcp.json ro - ext4 /dev/vda rw\n";
        assert_eq!(
            mount_points(text),
            vec![PathBuf::from("/mnt/a b"), PathBuf::from("/w/.mcp.json")]
        );
        assert_eq!(unescape(b"a\\012b\\134\\9"), b"a\nb\\\\9");
    }

    #[test]
    fn the_root_is_in_use_and_a_fresh_path_is_not() {
        let fresh = PathBuf::from("/nowhere/lnk-link-run-never-mounted");
        let paths: HashSet<PathBuf> = [PathBuf::from("/"), fresh.clone()].into();
        let used = in_use(&paths);
        assert!(used.contains(Path::new("/")));
        assert!(!used.contains(&fresh));
        assert!(mounted_here(Path::new("/")));
    }
}
