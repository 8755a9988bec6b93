//! What a process that sleeps for long keeps mapped: only what it needs while it sleeps.
//!
//! A background run's supervisor and its gate each spend a few milliseconds starting the run
//! (reading the record, opening folders, spawning, writing), and then may sleep for hours in
//! one `poll`. The start touches a few hundred pages of code of the executable and of libc,
//! which the kernel maps in blocks around each page touched; they stay mapped, counted in the
//! process's RSS, long after they are needed. [`Shed`] unmaps them before the loop sleeps:
//! each page is the file's own (shared with every other process that maps it, and kept by the
//! page cache), so the next use maps it back from memory, with no read and no copy. What the
//! process holds of its own (its heap, its stack, relocated data) stays as it is; only a
//! scratch buffer the loop names is given back too.
//!
//! What it saves is RSS, the pages a process maps, which `ps`, `top` and the OOM killer's
//! score count; not the machine's memory: the pages unmapped are shared, and stay in the page
//! cache, so the PSS (each shared page divided among the processes that map it) is what it
//! was. A shed is done only in a process of one thread and of its own code (see
//! [`Shed::poll`]).

use std::io;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, Timespec};

/// How long a loop must have been quiet after some work before its first shed after it.
const FIRST_QUIET: Duration = Duration::from_secs(1);
/// The longest quiet a shed waits for: each shed doubles the next one's, up to this.
const LONGEST_QUIET: Duration = Duration::from_secs(64);

/// When a loop that may sleep for hours sheds the code pages it touched, and its `poll`: once
/// at its first sleep after its start-up ([`Shed::settled`]), and again after each spell of work
/// (each `poll` that something ended) once the loop has been quiet for a while: a second the
/// first time, twice as long after each shed, up to a minute. So a run
/// that prints a banner and then waits holds no more than one that never printed, a loop that
/// wakes often sheds nothing while it does, and one that wakes every few seconds stops paying
/// for sheds after a few (each costs about a millisecond: a read of `/proc/self/smaps`, one
/// wake-up, and the faults that map the pages back at the next).
#[derive(Debug)]
pub struct Shed {
    state: ShedState,
    /// How long a quiet the next shed after work waits for.
    quiet: Duration,
}

impl Default for Shed {
    fn default() -> Self {
        Shed {
            state: ShedState::Starting,
            quiet: FIRST_QUIET,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ShedState {
    /// Still starting: nothing is shed.
    Starting,
    /// Shed at the next sleep.
    Due,
    /// Shed; nothing touched since.
    Done,
    /// Touched since the last shed: shed once the loop has been quiet until then.
    After(Instant),
}

impl Shed {
    /// The start-up is over: shed at the next sleep.
    pub fn settled(&mut self) {
        self.state = ShedState::Due;
    }

    /// The loop did some work at `now`: shed once it has been quiet for the quiet due.
    fn worked(&mut self, now: Instant) {
        if matches!(self.state, ShedState::Done | ShedState::After(_)) {
            self.state = ShedState::After(now + self.quiet);
        }
    }

    /// A shed is done now: the next one after work waits for twice the quiet.
    fn shed_done(&mut self) {
        if self.state != ShedState::Due {
            self.quiet = (self.quiet * 2).min(LONGEST_QUIET);
        }
        self.state = ShedState::Done;
    }

    /// `poll(fds)` until the loop's own `wake_at` at the latest (`None`: no limit), or until
    /// a shed falls due; a `poll` that something ended counts as work. When a shed is due
    /// now, the pages are unmapped just before the `poll`, so that nothing runs in between
    /// that would map them back. A shed that fails does no harm: the pages stay mapped. None
    /// is done while this process has more than one thread, nor in one into which a library
    /// was preloaded (`LD_PRELOAD`, `LD_AUDIT`, `/etc/ld.so.preload`): another thread, or a
    /// preloaded library's task or signal handler, could replace a mapping read from
    /// `/proc/self/smaps` with memory of its own before the unmapping. `scratch`, a buffer
    /// whose bytes the loop no longer needs, is given back with them (it reads as zeros
    /// after). Returns what `poll` returns.
    pub fn poll(
        &mut self,
        fds: &mut [PollFd<'_>],
        wake_at: Option<Instant>,
        scratch: Option<&mut Scratch>,
    ) -> rustix::io::Result<usize> {
        let polled = self.shed_then_poll(fds, wake_at, scratch);
        if matches!(polled, Ok(n) if n > 0) {
            self.worked(Instant::now());
        }
        polled
    }

    fn shed_then_poll(
        &mut self,
        fds: &mut [PollFd<'_>],
        wake_at: Option<Instant>,
        scratch: Option<&mut Scratch>,
    ) -> rustix::io::Result<usize> {
        let now = Instant::now();
        match self.state {
            ShedState::Due => {}
            ShedState::After(at) if now >= at => {}
            // Not yet: the loop wakes when it is time, if it sleeps that long.
            ShedState::After(at) => {
                return poll_until(fds, Some(wake_at.map_or(at, |own| own.min(at))));
            }
            ShedState::Starting | ShedState::Done => return poll_until(fds, wake_at),
        }
        self.shed_done();
        let ranges = match sheddable() {
            Ok(ranges) => ranges,
            Err(err) => {
                tracing::debug!(%err, "the code pages the last work touched stay mapped");
                return poll_until(fds, wake_at);
            }
        };
        let timeout = timeout_until(wake_at);
        let (polled, unmapped) = unmap_then_poll(&ranges, scratch, fds, timeout.as_ref());
        match unmapped {
            Ok(()) => tracing::debug!(
                kib = ranges.iter().map(|range| range.rss_kib).sum::<u64>(),
                "unmapped the code pages the last work touched"
            ),
            Err(err) => tracing::debug!(%err, "some code pages the last work touched stay mapped"),
        }
        polled
    }
}

/// `poll(fds)` until `wake_at` at the latest (`None`: no limit).
pub fn poll_until(fds: &mut [PollFd<'_>], wake_at: Option<Instant>) -> rustix::io::Result<usize> {
    rustix::event::poll(fds, timeout_until(wake_at).as_ref())
}

/// The time from now until `wake_at`, as `poll` takes it (none past what it can hold).
fn timeout_until(wake_at: Option<Instant>) -> Option<Timespec> {
    wake_at.and_then(|at| Timespec::try_from(at.saturating_duration_since(Instant::now())).ok())
}

/// Unmaps `ranges` and gives back `scratch`'s pages, then polls: one function with no call in
/// between but the system calls, so that only its own page is mapped back before the process
/// sleeps.
#[inline(never)]
fn unmap_then_poll(
    ranges: &[Mapping],
    scratch: Option<&mut Scratch>,
    fds: &mut [PollFd<'_>],
    timeout: Option<&Timespec>,
) -> (rustix::io::Result<usize>, io::Result<()>) {
    let mut unmapped = Ok(());
    for range in ranges {
        if let Err(err) = range.unmap_pages() {
            unmapped = Err(err);
        }
    }
    if let Some(scratch) = scratch {
        scratch.give_back();
    }
    (rustix::event::poll(fds, timeout), unmapped)
}

/// A buffer of pages of its own, an anonymous private mapping, which a shed gives back to the
/// kernel: it reads as zeros then, and costs nothing until written again. (Memory from the
/// allocator could not be given back so: a page of it may hold other allocations, and its
/// pages may be of any kind.)
#[derive(Debug)]
pub struct Scratch {
    start: std::ptr::NonNull<u8>,
    len: usize,
}

impl Scratch {
    /// A buffer of `len` bytes (at least one), all zeros, that costs nothing until written.
    #[allow(unsafe_code)]
    pub fn new(len: usize) -> io::Result<Scratch> {
        let len = len.max(1);
        // SAFETY: a new mapping where the kernel chooses: it replaces nothing of this process.
        let start = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            )
        }?;
        let start = std::ptr::NonNull::new(start.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap gave a null address"))?;
        Ok(Scratch { start, len })
    }

    /// Its bytes.
    #[allow(unsafe_code)]
    pub fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `start..start + len` is this buffer's own mapping, readable and writable,
        // mapped until `drop`; the slice borrows `self` mutably, so nothing else reads or
        // writes the mapping while it lives.
        unsafe { std::slice::from_raw_parts_mut(self.start.as_ptr(), self.len) }
    }

    /// Gives its pages back: they read as zeros from then on.
    #[allow(unsafe_code)]
    #[inline]
    fn give_back(&mut self) {
        // SAFETY: the range is this buffer's own anonymous private mapping, whole (the kernel
        // mapped it from a page's start), and no slice of it is borrowed (this takes `self`
        // mutably). MADV_DONTNEED leaves it mapped and valid, reading as zeros: the same as
        // writing zeros to it.
        let _ = unsafe {
            rustix::mm::madvise(
                self.start.as_ptr().cast(),
                self.len,
                rustix::mm::Advice::LinuxDontNeed,
            )
        };
    }
}

impl Drop for Scratch {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: the buffer's own mapping, unmapped once, here; no slice of it outlives the
        // buffer (each borrows it).
        let _ = unsafe { rustix::mm::munmap(self.start.as_ptr().cast(), self.len) };
    }
}

/// What is shed: every read-only private file mapping that holds no page of its own (code and
/// read-only data of the executable and its libraries), read from `/proc/self/smaps` a line at
/// a time (read whole, the file would grow the heap by more than what is shed of it). What is
/// writable, anonymous, a relocated read-only segment (it holds pages of its own, in memory or
/// swapped out) or special (`[vdso]`) is left alone.
///
/// Only in a process of one thread into which no library was preloaded: looked at first, so
/// that from the read to the unmapping nothing else could change a mapping. This thread starts
/// nothing in between and has no signal handler; a preloaded library's code could (a task
/// sharing this memory without being a thread, a handler), so none is trusted.
fn sheddable() -> io::Result<Vec<Mapping>> {
    if let Some(how) = preloaded() {
        return Err(io::Error::other(format!(
            "a library is preloaded ({how}): only a process of its own code sheds"
        )));
    }
    let threads = threads()?;
    if threads != 1 {
        return Err(io::Error::other(format!(
            "{threads} threads: only a process of one thread sheds"
        )));
    }
    let smaps = std::fs::File::open("/proc/self/smaps")?;
    let mut all = Mapping::parse_all(io::BufReader::with_capacity(4096, smaps))?;
    all.retain(Mapping::sheddable);
    Ok(all)
}

/// How a library was preloaded into this process, if one was: `LD_PRELOAD` or `LD_AUDIT` in
/// its environment, or a `/etc/ld.so.preload` that names any.
fn preloaded() -> Option<&'static str> {
    for name in ["LD_PRELOAD", "LD_AUDIT"] {
        if std::env::var_os(name).is_some_and(|value| !value.is_empty()) {
            return Some(name);
        }
    }
    let listed = std::fs::read_to_string("/etc/ld.so.preload")
        .is_ok_and(|text| text.split_whitespace().next().is_some());
    listed.then_some("/etc/ld.so.preload")
}

/// This process's threads, from `/proc/self/status`.
fn threads() -> io::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|count| count.trim().parse().ok())
        .ok_or_else(|| io::Error::other("no thread count in /proc/self/status"))
}

/// One mapping of `/proc/self/smaps`, with what [`sheddable`] looks at.
#[derive(Debug, Default)]
struct Mapping {
    start: usize,
    end: usize,
    perms: [u8; 4],
    file: bool,
    rss_kib: u64,
    anonymous_kib: Option<u64>,
    swap_kib: Option<u64>,
}

impl Mapping {
    fn parse_all(mut smaps: impl io::BufRead) -> io::Result<Vec<Mapping>> {
        let mut all: Vec<Mapping> = Vec::new();
        let mut line = String::with_capacity(256);
        loop {
            line.clear();
            if smaps.read_line(&mut line)? == 0 {
                return Ok(all);
            }
            let mut fields = line.split_whitespace();
            let Some(key) = fields.next() else {
                continue;
            };
            if !key.ends_with(':') {
                // A mapping's first line. One that cannot be read still starts a mapping, one
                // never shed, so that the lines after it are not taken for the one before's.
                all.push(Mapping::parse_head(&line).unwrap_or_default());
            } else if let Some(current) = all.last_mut() {
                let Some(value) = fields.next() else {
                    continue;
                };
                let Ok(kib) = value.parse::<u64>() else {
                    continue;
                };
                match key {
                    "Rss:" => current.rss_kib = kib,
                    "Anonymous:" => current.anonymous_kib = Some(kib),
                    "Swap:" => current.swap_kib = Some(kib),
                    _ => {}
                }
            }
        }
    }

    /// A mapping's first line: `start-end perms offset dev inode [path]`.
    fn parse_head(line: &str) -> Option<Mapping> {
        let mut fields = line.split_whitespace();
        let (start, end) = fields.next()?.split_once('-')?;
        let start = usize::from_str_radix(start, 16).ok()?;
        let end = usize::from_str_radix(end, 16).ok()?;
        let perms: [u8; 4] = fields.next()?.as_bytes().try_into().ok()?;
        let _offset = fields.next()?;
        let _device = fields.next()?;
        let inode: u64 = fields.next()?.parse().ok()?;
        let path = fields.next();
        Some(Mapping {
            start,
            end,
            perms,
            file: inode != 0 && path.is_some_and(|p| p.starts_with('/')),
            ..Mapping::default()
        })
    }

    fn sheddable(&self) -> bool {
        let [read, write, _exec, kind] = self.perms;
        self.file
            && read == b'r'
            && write == b'-'
            && kind == b'p'
            // Pages of its own, in memory or swapped out: a shed would lose them.
            && self.anonymous_kib == Some(0)
            && self.swap_kib == Some(0)
            && self.rss_kib > 0
            && self.end > self.start
    }

    #[allow(unsafe_code)]
    #[inline]
    fn unmap_pages(&self) -> io::Result<()> {
        // SAFETY: the range is one whole mapping of this process, read-only, private and
        // holding no page of its own (`sheddable`), read from `/proc/self/smaps` while this
        // process had one thread, no signal handler and no preloaded library, so nothing of
        // this process has changed it since. Every page
        // in it is the file's own page as the page cache holds it. MADV_DONTNEED only drops
        // this process's page-table entries: the next access faults the same bytes back in
        // from the page cache, so no value seen through the mapping changes, and nothing is
        // freed that anything points to. (Only another process writing into this one in
        // between, a debugger setting a breakpoint, would lose its write: the file's bytes
        // come back.)
        unsafe {
            rustix::mm::madvise(
                self.start as *mut std::ffi::c_void,
                self.end - self.start,
                rustix::mm::Advice::LinuxDontNeed,
            )
        }
        .map_err(io::Error::from)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const SMAPS: &str = "\
5600a0000000-5600a00a9000 r--p 00000000 fd:01 1234 /usr/bin/lnk-link-supervise
Rss:                 320 kB
Anonymous:             0 kB
Swap:                  0 kB
5600a00a9000-5600a029e000 r-xp 000a8000 fd:01 1234 /usr/bin/lnk-link-supervise
Rss:                1100 kB
Anonymous:             0 kB
Swap:                  0 kB
VmFlags: rd ex mr mw me dw
5600a029e000-5600a02b3000 r--p 0029c000 fd:01 1234 /usr/bin/lnk-link-supervise
Rss:                  84 kB
Anonymous:            84 kB
Swap:                  0 kB
5600a02b3000-5600a02b5000 rw-p 002b0000 fd:01 1234 /usr/bin/lnk-link-supervise
Rss:                   8 kB
Anonymous:             8 kB
Swap:                  0 kB
5600b0000000-5600b0021000 rw-p 00000000 00:00 0 [heap]
Rss:                  68 kB
Anonymous:            68 kB
Swap:                  0 kB
7f0000170000-7f0000174000 r--p 00150000 fd:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                   4 kB
Anonymous:             0 kB
Swap:                 12 kB
7f0000000000-7f0000156000 r-xp 00026000 fd:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 664 kB
Anonymous:             0 kB
Swap:                  0 kB
7f0000200000-7f0000201000 r--p 00000000 fd:01 77 /usr/lib/locale/C.utf8/LC_CTYPE (deleted)
Rss:                   0 kB
Anonymous:             0 kB
Swap:                  0 kB
7f0000300000-7f0000302000 r--s 00000000 00:05 55 /dev/shm/shared
Rss:                   8 kB
Anonymous:             0 kB
Swap:                  0 kB
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 [vdso]
Rss:                   4 kB
Anonymous:             0 kB
Swap:                  0 kB
7f0000400000-7f0000404000 r--p 00000000 fd:01 ? /usr/lib/odd.so
Rss:                  16 kB
Anonymous:            16 kB
Swap:                  0 kB
";

    #[test]
    fn sheds_only_read_only_file_pages_that_hold_nothing_of_their_own() {
        let all = Mapping::parse_all(SMAPS.as_bytes()).unwrap();
        assert_eq!(all.len(), 11);
        let shed: Vec<(usize, u64)> = all
            .iter()
            .filter(|m| m.sheddable())
            .map(|m| (m.start, m.rss_kib))
            .collect();
        // The executable's read-only data and code, and libc's code: not a relocated
        // read-only segment (84 kB of its own, or 12 kB swapped out), the writable ones, one
        // with nothing mapped, a shared mapping, the vDSO, or one whose first line cannot be
        // read (nor do its lines change the vDSO's).
        assert_eq!(
            shed,
            vec![
                (0x5600a0000000, 320),
                (0x5600a00a9000, 1100),
                (0x7f0000000000, 664)
            ]
        );
    }

    #[test]
    fn a_process_of_more_than_one_thread_sheds_nothing() {
        // A second thread for certain, whatever threads the test harness runs.
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || wait.recv());
        let err = sheddable().unwrap_err();
        assert!(
            err.to_string()
                .contains("threads: only a process of one thread sheds"),
            "{err}"
        );
        let mut shed = Shed::default();
        shed.settled();
        let mut fds: [PollFd<'_>; 0] = [];
        assert_eq!(shed.poll(&mut fds, Some(Instant::now()), None).unwrap(), 0);
        // Refused, it counts as done: the loop does not try again at each sleep.
        assert_eq!(shed.state, ShedState::Done);
        drop(done);
        let _ = other.join();
    }

    #[test]
    fn a_given_back_scratch_reads_zeros_and_holds_what_is_written_after() {
        let mut scratch = Scratch::new(3 * 4096 + 100).unwrap();
        assert_eq!(scratch.bytes().len(), 3 * 4096 + 100);
        assert!(scratch.bytes().iter().all(|b| *b == 0));
        scratch.bytes().fill(7);
        scratch.give_back();
        assert!(scratch.bytes().iter().all(|b| *b == 0));
        // Still memory of its own: written again, it holds what was written.
        scratch.bytes().fill(9);
        assert!(scratch.bytes().iter().all(|b| *b == 9));
    }

    #[test]
    fn a_shed_waits_for_quiet_after_work_and_each_doubles_the_next_wait() {
        let mut shed = Shed::default();
        let now = Instant::now();
        // Starting: nothing, however much work.
        shed.worked(now);
        assert_eq!(shed.state, ShedState::Starting);
        shed.settled();
        shed.worked(now);
        assert_eq!(shed.state, ShedState::Due);
        let mut fds: [PollFd<'_>; 0] = [];
        assert_eq!(shed.poll(&mut fds, Some(Instant::now()), None).unwrap(), 0);
        assert_eq!(shed.state, ShedState::Done);
        // Work pushes the next shed a quiet second on; the settled shed did not lengthen it.
        shed.worked(now);
        assert_eq!(shed.state, ShedState::After(now + FIRST_QUIET));
        let later = now + Duration::from_millis(300);
        shed.worked(later);
        assert_eq!(shed.state, ShedState::After(later + FIRST_QUIET));
        // With no limit of the loop's own, the poll still ends, at that time; the shed comes
        // at the sleep after it.
        assert_eq!(shed.poll(&mut fds, None, None).unwrap(), 0);
        assert_eq!(shed.state, ShedState::After(later + FIRST_QUIET));
        assert_eq!(shed.poll(&mut fds, Some(Instant::now()), None).unwrap(), 0);
        assert_eq!(shed.state, ShedState::Done);
        // Each shed after work doubles the quiet the next waits for, up to a minute.
        let mut quiet = FIRST_QUIET;
        for _ in 0..10 {
            quiet = (quiet * 2).min(LONGEST_QUIET);
            let now = Instant::now();
            shed.worked(now);
            assert_eq!(shed.state, ShedState::After(now + quiet));
            shed.state = ShedState::After(Instant::now());
            assert_eq!(shed.poll(&mut fds, Some(Instant::now()), None).unwrap(), 0);
            assert_eq!(shed.state, ShedState::Done);
        }
        assert_eq!(quiet, LONGEST_QUIET);
    }
}
