#![allow(clippy::unwrap_used)]

use std::path::Path;

use super::*;

#[test]
fn a_failure_crosses_the_pipe_whole() {
    for step in [Step::Namespaces, Step::GidMap, Step::Overlay] {
        let failure = Failure {
            step,
            folder: 3,
            errno: Errno::PERM,
        };
        assert_eq!(Failure::decode(failure.encode()), Some(failure));
    }
    assert_eq!(Failure::decode([0; FAILURE_BYTES]), None);
}

#[test]
fn the_overlay_options_name_descriptors_only() {
    let lower = rustix::fs::open("/", OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).unwrap();
    let top = rustix::fs::open("/", OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).unwrap();
    let options = OverlayOptions::new(&lower, &top);
    let (l, t) = (lower.as_raw_fd(), top.as_raw_fd());
    assert_eq!(
        options.as_c_str().to_str().unwrap(),
        format!(
            "userxattr,lowerdir=/proc/self/fd/{l},upperdir=/proc/self/fd/{t}/u,\
             workdir=/proc/self/fd/{t}/w"
        )
    );
}

#[test]
fn a_failure_names_its_folder_and_step() {
    let layers = Layers::new(&[PathBuf::from("/a"), PathBuf::from("/b,c")]).unwrap();
    let text = layers.describe(&Failure {
        step: Step::Overlay,
        folder: 1,
        errno: Errno::INVAL,
    });
    assert!(
        text.starts_with(
            "the cache layer could not be made: mounting the overlay at the cache folder (/b,c): "
        ),
        "{text}"
    );
    assert!(Layers::new(&[PathBuf::from("relative")]).is_err());
}

/// In a child that made the layer: what it writes, removes and renames in the cache folder is
/// there for it, and the folder outside is as it was.
#[test]
#[allow(unsafe_code)]
fn writes_in_the_layer_leave_the_folder_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().canonicalize().unwrap().join("cache");
    std::fs::create_dir(&cache).unwrap();
    std::fs::write(cache.join("kept"), b"user's").unwrap();
    if let Err(why) = can_make(std::slice::from_ref(&cache)) {
        // Where the kernel forbids it, the trial says so, and nothing else can be shown here.
        assert!(
            why.starts_with("the cache layer could not be made"),
            "{why}"
        );
        return;
    }
    let layers = Layers::new(std::slice::from_ref(&cache)).unwrap();
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).unwrap();
    let (kept, new, moved) = (
        c(&cache.join("kept")),
        c(&cache.join("new")),
        c(&cache.join("moved")),
    );
    // SAFETY: the child makes system calls only on memory made before the fork, then `_exit`s.
    match unsafe { nix::unistd::fork() }.unwrap() {
        nix::unistd::ForkResult::Child => {
            let ok = layers.enter().is_ok()
                && rustix::fs::open(
                    new.as_c_str(),
                    OFlags::CREATE | OFlags::WRONLY,
                    Mode::from_raw_mode(0o600),
                )
                .is_ok()
                && rustix::fs::rename(kept.as_c_str(), moved.as_c_str()).is_ok()
                && rustix::fs::access(kept.as_c_str(), rustix::fs::Access::EXISTS).is_err()
                && rustix::fs::unlink(new.as_c_str()).is_ok();
            // SAFETY: ends the child without the parent's exit hooks.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) }
        }
        nix::unistd::ForkResult::Parent { child } => {
            let status = nix::sys::wait::waitpid(child, None).unwrap();
            assert_eq!(status, nix::sys::wait::WaitStatus::Exited(child, 0));
        }
    }
    let names: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["kept"]);
    assert_eq!(std::fs::read(cache.join("kept")).unwrap(), b"user's");
}
