//! One inotify instance for the whole `serve`, shared by every waiting `read`.
//!
//! A user has few inotify instances (`fs.inotify.max_user_instances`, 128 by default, shared
//! with every program they run), so `serve` takes one, the first time a read waits, and keeps
//! it. A thread of its own reads the events and routes each by folder and file name to the
//! reads that wait on that file: a read is woken (through an eventfd of its own, which it polls
//! with its call's cancellation) only when its run's output file or record changes, never for
//! another run's writes. An overflowed queue, or a watched folder removed or moved, wakes every
//! read of that folder, which looks again.
//!
//! A folder is watched while a read waits on it (counted), never through a link.

use std::collections::HashMap;
use std::ffi::CString;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use rustix::event::{EventfdFlags, eventfd};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use crate::sync::lock;

/// What wakes a waiting read: a file changed, or was replaced or removed.
const WATCHED: WatchFlags = WatchFlags::MODIFY
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::CREATE)
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::DONT_FOLLOW)
    .union(WatchFlags::ONLYDIR);

/// The server's watcher.
pub struct Watcher {
    inotify: OwnedFd,
    routes: Mutex<Routes>,
}

#[derive(Default)]
struct Routes {
    /// Watched folders: their watch and how many reads wait on them.
    folders: HashMap<PathBuf, (i32, usize)>,
    /// The reads' eventfds, by watch and file name.
    waiting: HashMap<(i32, CString), Vec<Arc<OwnedFd>>>,
}

/// The server's watcher, made (with its thread) the first time it is asked for; `None` when no
/// inotify instance or thread can be had (a waiting read then looks again on a tick).
pub fn shared() -> Option<&'static Arc<Watcher>> {
    static WATCHER: OnceLock<Option<Arc<Watcher>>> = OnceLock::new();
    WATCHER
        .get_or_init(|| match Watcher::start() {
            Ok(watcher) => Some(watcher),
            Err(err) => {
                tracing::warn!(
                    "waiting reads have no inotify instance ({err}); they look again on a tick"
                );
                None
            }
        })
        .as_ref()
}

impl Watcher {
    fn start() -> std::io::Result<Arc<Watcher>> {
        let inotify = inotify::init(CreateFlags::CLOEXEC)?;
        let watcher = Arc::new(Watcher {
            inotify,
            routes: Mutex::new(Routes::default()),
        });
        let reader = Arc::clone(&watcher);
        std::thread::Builder::new()
            .name("watcher".into())
            .spawn(move || reader.route_forever())?;
        Ok(watcher)
    }

    /// Wakes the reads the events are about, for as long as the server lives.
    fn route_forever(&self) {
        let mut buf = [MaybeUninit::<u8>::uninit(); 16 * 1024];
        let mut reader = inotify::Reader::new(self.inotify.as_fd(), &mut buf);
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(rustix::io::Errno::INTR) => continue,
                Err(err) => {
                    tracing::error!(
                        "reading inotify events failed ({err}); waiting reads look again on their own"
                    );
                    self.wake_all();
                    return;
                }
            };
            let flags = event.events();
            let routes = lock(&self.routes);
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                wake(routes.waiting.values().flatten());
            } else if flags
                .intersects(ReadFlags::IGNORED | ReadFlags::MOVE_SELF | ReadFlags::DELETE_SELF)
            {
                // The folder is gone from its path: the next registration watches what is
                // there now, and every read of it looks again.
                let wd = event.wd();
                let mut routes = routes;
                routes.folders.retain(|_, (watch, _)| *watch != wd);
                if flags.contains(ReadFlags::MOVE_SELF) {
                    let _ = inotify::remove_watch(&self.inotify, wd);
                }
                wake(
                    routes
                        .waiting
                        .iter()
                        .filter(|((watch, _), _)| *watch == wd)
                        .flat_map(|(_, fds)| fds),
                );
            } else if let Some(name) = event.file_name()
                && let Some(fds) = routes.waiting.get(&(event.wd(), name.to_owned()))
            {
                wake(fds);
            }
        }
    }

    fn wake_all(&self) {
        wake(lock(&self.routes).waiting.values().flatten());
    }

    /// Waits on `names` in `folder`: the returned registration's eventfd becomes readable when
    /// one of them changes; dropping it stops the waiting.
    pub fn register(
        self: &Arc<Self>,
        folders: &[(&Path, &[String])],
    ) -> std::io::Result<Registration> {
        let event = Arc::new(eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?);
        let mut registration = Registration {
            watcher: Arc::clone(self),
            event,
            keys: Vec::new(),
            folders: Vec::new(),
        };
        let mut routes = lock(&self.routes);
        for (folder, names) in folders {
            let wd = match routes.folders.get_mut(*folder) {
                Some((wd, count)) => {
                    *count += 1;
                    *wd
                }
                None => {
                    let wd = inotify::add_watch(&self.inotify, *folder, WATCHED)?;
                    routes.folders.insert(folder.to_path_buf(), (wd, 1));
                    wd
                }
            };
            registration.folders.push((folder.to_path_buf(), wd));
            for name in *names {
                let key = (wd, CString::new(name.as_str()).unwrap_or_default());
                routes
                    .waiting
                    .entry(key.clone())
                    .or_default()
                    .push(Arc::clone(&registration.event));
                registration.keys.push(key);
            }
        }
        Ok(registration)
    }
}

fn wake<'a>(fds: impl IntoIterator<Item = &'a Arc<OwnedFd>>) {
    for fd in fds {
        // A full counter only means a wake-up is pending already.
        let _ = rustix::io::write(fd.as_ref(), &1u64.to_ne_bytes());
    }
}

/// A read's place among the waiting; dropping it takes it out (and unwatches folders no read
/// waits on any more).
pub struct Registration {
    watcher: Arc<Watcher>,
    event: Arc<OwnedFd>,
    keys: Vec<(i32, CString)>,
    folders: Vec<(PathBuf, i32)>,
}

impl Registration {
    /// The descriptor that becomes readable when a watched file changes.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.event.as_fd()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut routes = lock(&self.watcher.routes);
        for key in &self.keys {
            if let Some(fds) = routes.waiting.get_mut(key) {
                fds.retain(|fd| !Arc::ptr_eq(fd, &self.event));
                if fds.is_empty() {
                    routes.waiting.remove(key);
                }
            }
        }
        for (folder, wd) in &self.folders {
            let gone = match routes.folders.get_mut(folder) {
                Some((watch, count)) if watch == wd => {
                    *count = count.saturating_sub(1);
                    *count == 0
                }
                _ => false,
            };
            if gone && let Some((wd, _)) = routes.folders.remove(folder) {
                // Already gone when its folder was: nothing to undo.
                let _ = inotify::remove_watch(&self.watcher.inotify, wd);
            }
        }
    }
}
