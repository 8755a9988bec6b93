//! The one thread of a process that waits for every sandbox's proxy at once (one `epoll`):
//! for each registered sandbox, its channel until the stub hands its listener over, then that
//! listener. Each connection accepted gets a thread of its own ([`super::conn`]), or a refusal
//! when the sandbox or the process has too many open. Started the first time a sandbox is
//! registered: a `serve` without `--net-allow` never starts it.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rustix::buffer::spare_capacity;
use rustix::event::epoll::{self, CreateFlags, EventData, EventFlags};
use rustix::event::{EventfdFlags, eventfd};
use rustix::io::Errno;
use rustix::net::{SendFlags, SocketFlags};

use super::channel::{Taken, take_listener};
use super::conn;
use super::sandbox::SandboxNet;
use super::why::Why;

/// A connection thread's stack: the proxy's own work needs little; the resolver some.
const CONNECTION_STACK: usize = 256 * 1024;
/// The wake-up's token (no sandbox's: theirs are `2 * key` and `2 * key + 1`).
const WAKE: u64 = u64::MAX;

/// The process's hub.
pub(super) struct Hub {
    epoll: OwnedFd,
    wake: OwnedFd,
    sandboxes: Mutex<HashMap<u64, Entry>>,
    next: AtomicU64,
}

/// A registered sandbox: its channel until it ends, and the listener it gave.
struct Entry {
    channel: Option<OwnedFd>,
    listener: Option<OwnedFd>,
    net: Arc<SandboxNet>,
}

static HUB: OnceLock<Result<Arc<Hub>, String>> = OnceLock::new();

/// The process's hub, started now if it was not.
pub(super) fn hub() -> io::Result<Arc<Hub>> {
    HUB.get_or_init(|| Hub::start().map_err(|err| err.to_string()))
        .clone()
        .map_err(io::Error::other)
}

impl Hub {
    fn start() -> io::Result<Arc<Hub>> {
        raise_open_files_limit();
        // The process holds every sandbox's way out from here on (its proxies' listeners and
        // connections). Not dumpable: a program of the same user, under a sandbox without a
        // PID namespace of its own, can then neither trace it nor take its descriptors
        // (`pidfd_getfd`, /proc/<pid>/fd).
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
        let hub = Arc::new(Hub {
            epoll: epoll::create(CreateFlags::CLOEXEC)?,
            wake: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
            sandboxes: Mutex::default(),
            next: AtomicU64::new(0),
        });
        epoll::add(
            &hub.epoll,
            &hub.wake,
            EventData::new_u64(WAKE),
            EventFlags::IN,
        )?;
        let running = Arc::clone(&hub);
        std::thread::Builder::new()
            .name("proxy".into())
            .spawn(move || running.run())?;
        Ok(hub)
    }

    /// Registers a sandbox's channel; its key, for [`Hub::unregister`].
    pub(super) fn register(&self, channel: OwnedFd, net: Arc<SandboxNet>) -> io::Result<u64> {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let mut sandboxes = self.lock();
        epoll::add(
            &self.epoll,
            &channel,
            EventData::new_u64(2 * key),
            EventFlags::IN,
        )?;
        sandboxes.insert(
            key,
            Entry {
                channel: Some(channel),
                listener: None,
                net,
            },
        );
        Ok(key)
    }

    /// Forgets a sandbox: nothing more of it is accepted; its descriptors close. (The thread
    /// looks each event's key up under the lock, so an event already taken for it finds
    /// nothing: no wake-up is needed.)
    pub(super) fn unregister(&self, key: u64) {
        let entry = self.lock().remove(&key);
        if let Some(entry) = entry {
            for fd in entry.channel.iter().chain(entry.listener.iter()) {
                let _ = epoll::delete(&self.epoll, fd);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
        self.sandboxes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The hub's thread, for good.
    fn run(&self) {
        let mut events: Vec<epoll::Event> = Vec::with_capacity(64);
        loop {
            events.clear();
            match epoll::wait(&self.epoll, spare_capacity(&mut events), None) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(err) => {
                    tracing::error!(%err, "the proxy cannot wait for connections");
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            }
            for event in &events {
                let token = event.data.u64();
                if token == WAKE {
                    let mut counter = [0u8; 8];
                    let _ = rustix::io::read(&self.wake, &mut counter);
                    continue;
                }
                let mut sandboxes = self.lock();
                let Some(entry) = sandboxes.get_mut(&(token / 2)) else {
                    continue;
                };
                if token % 2 == 0 {
                    self.hear_channel(token / 2, entry);
                } else {
                    accept_all(entry);
                }
            }
        }
    }

    /// What came on the channel: a listener (the newest is the one used: a stub that failed
    /// after it handed one is followed by a sandbox started anew, whose stub hands another),
    /// or its end.
    fn hear_channel(&self, key: u64, entry: &mut Entry) {
        let Some(channel) = &entry.channel else {
            return;
        };
        match take_listener(channel.as_fd()) {
            Taken::NotYet => return,
            Taken::Listener(listener) => {
                tracing::debug!(key, "a sandbox's proxy listener came");
                if let Some(old) = entry.listener.take() {
                    let _ = epoll::delete(&self.epoll, &old);
                }
                let data = EventData::new_u64(2 * key + 1);
                // Accepted until none waits: the stub made it blocking.
                let added = rustix::io::ioctl_fionbio(&listener, true)
                    .and_then(|()| epoll::add(&self.epoll, &listener, data, EventFlags::IN));
                match added {
                    Ok(()) => entry.listener = Some(listener),
                    Err(err) => {
                        tracing::warn!(%err, "the proxy cannot wait on a sandbox's listener");
                    }
                }
                return;
            }
            Taken::Ended => tracing::debug!(key, "a sandbox's proxy channel ended"),
            Taken::Refused(why) => {
                // Said in the call's (or run's) answer, not in a log a refusal to start would
                // be mixed with.
                tracing::debug!("a sandbox's proxy is not started: {why}");
                entry.net.figures.refused("", 0, &Why::NotStarted(why));
            }
        }
        if let Some(channel) = entry.channel.take() {
            let _ = epoll::delete(&self.epoll, &channel);
        }
    }
}

/// Accepts every connection waiting on the entry's listener.
fn accept_all(entry: &mut Entry) {
    let Some(listener) = &entry.listener else {
        return;
    };
    loop {
        let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
        let client = match rustix::net::accept_with(listener, flags) {
            Ok(client) => client,
            Err(Errno::AGAIN) => return,
            Err(Errno::INTR | Errno::CONNABORTED) => continue,
            Err(err) => {
                // Out of descriptors: what waits is accepted once some close.
                tracing::warn!(%err, "the proxy cannot accept a connection now");
                std::thread::sleep(Duration::from_millis(50));
                return;
            }
        };
        if entry.net.stopped() {
            continue;
        }
        tracing::debug!("a sandbox's program connected to the proxy");
        let open = match entry.net.admit() {
            Ok(open) => open,
            Err(why) => {
                entry.net.figures.refused("", 0, &why);
                let (code, reason) = why.status();
                let answer = format!(
                    "HTTP/1.1 {code} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\
                     X-Link-Run-Refused: {why}\r\n\r\n"
                );
                // Once, without waiting: the hub waits on no program.
                let flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
                let _ = rustix::net::send(&client, answer.as_bytes(), flags);
                continue;
            }
        };
        let spawned = std::thread::Builder::new()
            .name("proxy conn".into())
            .stack_size(CONNECTION_STACK)
            .spawn(move || conn::serve(client, open));
        if let Err(err) = spawned {
            tracing::warn!(%err, "the proxy cannot start a connection's thread");
        }
    }
}

/// The soft limit on open descriptors the hub asks for: each proxied connection holds six
/// (two sockets, two pipes), and [`super::sandbox::MAX_OPEN_IN_PROCESS`] may be open.
pub const OPEN_FILES: u64 = 4096;

/// Raises this process's soft limit on open descriptors to [`OPEN_FILES`] (at most its hard
/// limit), when it is lower.
fn raise_open_files_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let wanted = limit
        .maximum
        .map_or(OPEN_FILES, |maximum| maximum.min(OPEN_FILES));
    if limit.current.is_some_and(|current| current < wanted) {
        let raised = rustix::process::Rlimit {
            current: Some(wanted),
            maximum: limit.maximum,
        };
        if let Err(err) = setrlimit(Resource::Nofile, raised) {
            tracing::debug!(%err, "the limit on open files stays as it was");
        }
    }
}
