//! Cache layers: the agent's own writable layer over each of the user's cache folders (cargo's
//! registry, npm's cache, …), so that a build in the sandbox reads what the user fetched, and
//! what it writes there is the sandbox's alone and never reaches the user's cache (a poisoned
//! cache would run at the user's next build, outside any sandbox).
//!
//! bubblewrap 0.8 makes no overlay, so the layer is made outside the sandbox, by Link Run, in
//! the sandbox's process between its fork and its `exec` of the sandbox program ([`Layers::
//! enter`]): it enters a user namespace of its own (its uid and gid mapped to themselves, so
//! nothing changes for the program) and a mount namespace of its own, and over each cache
//! folder mounts a tmpfs, then an overlay at the folder's own path: the user's folder as the
//! lower layer (read through a descriptor opened before the tmpfs covered it), an upper and a
//! work folder on that tmpfs (`userxattr`, as an overlay in a user namespace needs). The
//! sandbox started from there binds the folder read-write (`{caches}` in the line) and sees the
//! overlay; what a program writes lands on the tmpfs and is gone with the sandbox's last
//! process. bubblewrap's own user namespace, made inside this one, locks those mounts: a program
//! cannot unmount the layer to reach the folder below.
//!
//! The layer lasts for one sandbox: a cold call's, a warm spare's (which is one call's), a
//! background run's, the check's probe's. Its tmpfs is nobody else's upper layer, and the
//! user's folder is an overlay's lower layer only while that sandbox runs.
//!
//! Why in the sandbox's process and not in the reaper itself: a spare reaper gets its call's
//! working folder as a descriptor from `serve` after it started (and its warm sandbox with it);
//! a descriptor opened in `serve`'s mount namespace is, in another one, a folder that cannot be
//! named (`getcwd` fails, and bubblewrap would start the program in `/`). The sandbox's process
//! enters the namespaces with its folder already set, which the kernel carries over; and the
//! reaper's own credentials, parent-death signal and dumpable flag stay as they were.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use rustix::fd::{AsRawFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use rustix::mount::MountFlags;
use rustix::thread::UnshareFlags;

/// The cache folders a sandbox gets a layer over, made ready (as C strings) before a fork, so
/// that [`Layers::enter`] allocates nothing in the child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layers {
    folders: Vec<PathBuf>,
    c_folders: Vec<CString>,
    uid_map: CString,
    gid_map: CString,
}

/// The step at which making the layers failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Entering a user and a mount namespace of its own (`unshare`).
    Namespaces = 1,
    /// Being dumpable again, so that its own uid and gid maps can be written.
    Dumpable,
    /// Denying `setgroups`, as an unprivileged gid map requires.
    Setgroups,
    /// Mapping its uid to itself.
    UidMap,
    /// Mapping its gid to itself.
    GidMap,
    /// Opening the cache folder.
    Open,
    /// Mounting the tmpfs that holds the upper layer.
    Tmpfs,
    /// Making the upper and work folders on it.
    Upper,
    /// Mounting the overlay at the cache folder's path.
    Overlay,
}

impl Step {
    fn from_byte(byte: u8) -> Option<Step> {
        Some(match byte {
            1 => Step::Namespaces,
            2 => Step::Dumpable,
            3 => Step::Setgroups,
            4 => Step::UidMap,
            5 => Step::GidMap,
            6 => Step::Open,
            7 => Step::Tmpfs,
            8 => Step::Upper,
            9 => Step::Overlay,
            _ => return None,
        })
    }

    /// What the step does, for a person.
    pub fn what(self) -> &'static str {
        match self {
            Step::Namespaces => "entering a user and a mount namespace of its own",
            Step::Dumpable => "making itself dumpable to write its uid and gid maps",
            Step::Setgroups => "denying setgroups in its user namespace",
            Step::UidMap => "mapping its uid to itself",
            Step::GidMap => "mapping its gid to itself",
            Step::Open => "opening the cache folder",
            Step::Tmpfs => "mounting a tmpfs over the cache folder",
            Step::Upper => "making the layer's folders on that tmpfs",
            Step::Overlay => "mounting the overlay at the cache folder",
        }
    }
}

/// Why the layers could not be made: the step, the cache folder (its index), the errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// The step that failed.
    pub step: Step,
    /// The index of the cache folder it failed at (0 for the steps before any folder).
    pub folder: usize,
    /// What the kernel said.
    pub errno: Errno,
}

/// The size of a [`Failure`] as it crosses a pipe.
pub const FAILURE_BYTES: usize = 8;

impl Failure {
    /// The failure as bytes, for a pipe from the child.
    pub fn encode(self) -> [u8; FAILURE_BYTES] {
        let errno = self.errno.raw_os_error().to_le_bytes();
        let folder = u16::try_from(self.folder).unwrap_or(u16::MAX).to_le_bytes();
        [
            self.step as u8,
            folder[0],
            folder[1],
            0,
            errno[0],
            errno[1],
            errno[2],
            errno[3],
        ]
    }

    /// Reads back what [`Failure::encode`] wrote.
    pub fn decode(bytes: [u8; FAILURE_BYTES]) -> Option<Failure> {
        let step = Step::from_byte(bytes[0])?;
        let folder = usize::from(u16::from_le_bytes([bytes[1], bytes[2]]));
        let errno = i32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        Some(Failure {
            step,
            folder,
            errno: Errno::from_raw_os_error(errno),
        })
    }
}

impl Layers {
    /// The layers over `folders` (absolute paths of existing folders), for a process running as
    /// this one's effective uid and gid.
    pub fn new(folders: &[PathBuf]) -> io::Result<Layers> {
        let c_folders = folders
            .iter()
            .map(|folder| {
                if !folder.is_absolute() {
                    return Err(io::Error::other(format!(
                        "the cache folder {} is not an absolute path",
                        folder.display()
                    )));
                }
                CString::new(folder.as_os_str().as_bytes()).map_err(|_| {
                    io::Error::other(format!(
                        "the cache folder {} holds a NUL byte",
                        folder.display()
                    ))
                })
            })
            .collect::<io::Result<Vec<_>>>()?;
        let map = |id: u32| CString::new(format!("{id} {id} 1")).map_err(io::Error::other);
        Ok(Layers {
            folders: folders.to_vec(),
            c_folders,
            uid_map: map(rustix::process::geteuid().as_raw())?,
            gid_map: map(rustix::process::getegid().as_raw())?,
        })
    }

    /// The cache folders.
    pub fn folders(&self) -> &[PathBuf] {
        &self.folders
    }

    /// What `failure` means, for a person: which folder, what was tried, what the kernel said.
    pub fn describe(&self, failure: &Failure) -> String {
        let at = match failure.step {
            Step::Open | Step::Tmpfs | Step::Upper | Step::Overlay => self
                .folders
                .get(failure.folder)
                .map(|folder| format!(" ({})", folder.display()))
                .unwrap_or_default(),
            _ => String::new(),
        };
        let why = io::Error::from(failure.errno);
        format!(
            "the cache layer could not be made: {}{at}: {why}",
            failure.step.what()
        )
    }

    /// Enters a user and a mount namespace of this process's own and mounts each cache
    /// folder's layer (see the module's docs).
    ///
    /// For the child of a fork, before its `exec`: it makes system calls only, on memory made
    /// before the fork (a number is written into a buffer on the stack), allocates nothing and
    /// takes no lock, so it is async-signal-safe. The process must have one thread (a user
    /// namespace is refused to a process with more). It leaves the process dumpable (its maps
    /// need it), and its credentials changed, which clears its parent-death signal: set it
    /// again after, if it needs one. Its folder is kept, in the new mount namespace.
    #[allow(unsafe_code)]
    pub fn enter(&self) -> Result<(), Failure> {
        let at = |step: Step, folder: usize| {
            move |errno: Errno| Failure {
                step,
                folder,
                errno,
            }
        };
        // SAFETY: a new user and mount namespace change no memory and no descriptor of this
        // process (unlike CLONE_FILES or CLONE_VM); the kernel refuses a user namespace to a
        // process with more than one thread.
        unsafe {
            rustix::thread::unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWNS)
                .map_err(at(Step::Namespaces, 0))?;
        }
        // A process that is not dumpable has its /proc/self files owned by root, and an
        // ordinary user then cannot write its own maps. (The exec that follows sets it anew.)
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::Dumpable)
            .map_err(at(Step::Dumpable, 0))?;
        write_file(c"/proc/self/setgroups", b"deny").map_err(at(Step::Setgroups, 0))?;
        write_file(c"/proc/self/uid_map", self.uid_map.as_bytes()).map_err(at(Step::UidMap, 0))?;
        write_file(c"/proc/self/gid_map", self.gid_map.as_bytes()).map_err(at(Step::GidMap, 0))?;
        for (index, folder) in self.c_folders.iter().enumerate() {
            layer(folder, index)?;
        }
        Ok(())
    }
}

/// Mounts one folder's layer: the tmpfs, its upper and work folders, the overlay.
fn layer(folder: &std::ffi::CStr, index: usize) -> Result<(), Failure> {
    let at = |step: Step| {
        move |errno: Errno| Failure {
            step,
            folder: index,
            errno,
        }
    };
    let dir = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    // Opened in this mount namespace (an overlay refuses a layer of another), before the tmpfs
    // covers it.
    let lower = rustix::fs::open(folder, dir, Mode::empty()).map_err(at(Step::Open))?;
    let mode = rustix::fs::fstat(&lower).map_err(at(Step::Open))?.st_mode & 0o7777;
    let hidden = MountFlags::NOSUID | MountFlags::NODEV;
    rustix::mount::mount(c"tmpfs", folder, c"tmpfs", hidden, Some(c"mode=0700"))
        .map_err(at(Step::Tmpfs))?;
    let top = rustix::fs::open(folder, dir, Mode::empty()).map_err(at(Step::Upper))?;
    let private = Mode::from_raw_mode(0o700);
    rustix::fs::mkdirat(&top, c"u", private).map_err(at(Step::Upper))?;
    // The overlay's root takes the upper folder's mode: the cache folder's own, not the umask's.
    rustix::fs::chmodat(&top, c"u", Mode::from_raw_mode(mode), AtFlags::empty())
        .map_err(at(Step::Upper))?;
    rustix::fs::mkdirat(&top, c"w", private).map_err(at(Step::Upper))?;
    let options = OverlayOptions::new(&lower, &top);
    rustix::mount::mount(
        c"overlay",
        folder,
        c"overlay",
        hidden,
        Some(options.as_c_str()),
    )
    .map_err(at(Step::Overlay))?;
    Ok(())
}

/// Writes `bytes` to the file at `path` in one `write`.
fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> Result<(), Errno> {
    let file = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    match rustix::io::write(&file, bytes)? {
        n if n == bytes.len() => Ok(()),
        _ => Err(Errno::IO),
    }
}

/// The overlay's mount options, written on the stack: `userxattr,lowerdir=/proc/self/fd/<L>,
/// upperdir=/proc/self/fd/<T>/u,workdir=/proc/self/fd/<T>/w`. Through descriptors, so that no
/// path of the user's (which may hold a `,` or a `:`, the options' separators) is in them.
struct OverlayOptions {
    bytes: [u8; 160],
    len: usize,
}

impl OverlayOptions {
    fn new(lower: &OwnedFd, top: &OwnedFd) -> OverlayOptions {
        let mut options = OverlayOptions {
            bytes: [0; 160],
            len: 0,
        };
        let lower = lower.as_raw_fd().unsigned_abs();
        let top = top.as_raw_fd().unsigned_abs();
        options.push(b"userxattr,lowerdir=/proc/self/fd/");
        options.number(lower);
        options.push(b",upperdir=/proc/self/fd/");
        options.number(top);
        options.push(b"/u,workdir=/proc/self/fd/");
        options.number(top);
        options.push(b"/w");
        options
    }

    fn push(&mut self, text: &[u8]) {
        // 160 bytes hold the words (81) and three numbers of ten digits at most, with the NUL.
        let end = (self.len + text.len()).min(self.bytes.len() - 1);
        let take = end - self.len;
        self.bytes[self.len..end].copy_from_slice(&text[..take]);
        self.len = end;
    }

    fn number(&mut self, mut n: u32) {
        let mut digits = [0u8; 10];
        let mut at = digits.len();
        loop {
            at -= 1;
            // A digit: the remainder is below 10.
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 || at == 0 {
                break;
            }
        }
        self.push(&digits[at..]);
    }

    fn as_c_str(&self) -> &std::ffi::CStr {
        // The buffer ends in a NUL that `push` never overwrites, and holds no other before
        // `len`; should that ever not hold, the empty options are the safe answer (the mount
        // fails).
        std::ffi::CStr::from_bytes_until_nul(&self.bytes[..=self.len]).unwrap_or(c"")
    }
}

/// Whether this process can make the layers over `folders` here: a child is forked that makes
/// them (in namespaces of its own, which end with it: nothing of the user's is touched) and
/// says how it went. `Err` holds what to tell a person. (A kernel without unprivileged user
/// namespaces, or a policy that forbids them, AppArmor's among them, fails here.)
#[allow(unsafe_code)]
pub fn can_make(folders: &[PathBuf]) -> Result<(), String> {
    let layers = Layers::new(folders).map_err(|err| err.to_string())?;
    let cannot = |what: &str, err: io::Error| format!("cannot try the cache layer: {what}: {err}");
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|err| cannot("a pipe", err.into()))?;
    // SAFETY: the child makes system calls only (`Layers::enter`, a write, `_exit`), on
    // memory made before the fork, and allocates nothing and takes no lock: what is allowed in
    // the child of a process that may have other threads.
    match unsafe { nix::unistd::fork() } {
        Err(err) => Err(cannot("a fork", err.into())),
        Ok(nix::unistd::ForkResult::Child) => {
            drop(read);
            let bytes = match layers.enter() {
                Ok(()) => [0u8; FAILURE_BYTES],
                Err(failure) => failure.encode(),
            };
            let _ = rustix::io::write(&write, &bytes);
            // SAFETY: `_exit` ends the child at once, without running the parent's exit hooks
            // or flushing its buffers.
            unsafe { libc::_exit(0) }
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            drop(write);
            let mut bytes = [0u8; FAILURE_BYTES];
            let got = crate::fill::fill(&read, &mut bytes);
            let _ = nix::sys::wait::waitpid(child, None);
            match got {
                Ok(true) if bytes == [0u8; FAILURE_BYTES] => Ok(()),
                Ok(true) => match Failure::decode(bytes) {
                    Some(failure) => Err(layers.describe(&failure)),
                    None => Err("the cache layer's trial said something else".to_owned()),
                },
                Ok(false) => Err("the cache layer's trial ended without a word".to_owned()),
                Err(err) => Err(cannot("reading its answer", err)),
            }
        }
    }
}

#[cfg(test)]
mod tests;
