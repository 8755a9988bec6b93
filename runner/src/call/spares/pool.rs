//! The pool of ready spares and the `spares` threads that refill it: how many are kept, and
//! when the next one is started (`docs/choices.md`, with the measurements that chose it).
//!
//! - **Ready ones only.** A thread starts a spare and waits for its `ready` before it puts it
//!   in the pool; a call takes a ready spare or none. So no call ever waits for a spare being
//!   started, its own or another's: one that finds none starts cold at once.
//! - **How many.** [`LEAST`] at first; the pool grows to the most `command` calls seen in
//!   flight at once (a host's parallel tool calls come again), up to [`MOST`], and stays so
//!   for serve's life. `LNK_SPARES=<n>` keeps exactly `n`.
//! - **When.** A spare taken is replaced in the first gap between calls: as soon as an answer
//!   leaves no call in flight, however soon the next call comes (it is started while that
//!   call runs: back-to-back calls would otherwise leave no gap to start one in, and every
//!   later call would start cold). While calls overlap (a burst) it holds back, at most
//!   [`DEFER_AT_MOST`] for each spare: a warm sandbox started then would take a CPU from the
//!   burst's own calls, most of which start cold.
//! - **How many at once.** One; two ([`REFILLERS`]) while the pool is empty.
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use super::spare_reaper::Spare;
use super::{READY_WITHIN, Settings};
use crate::sync::lock;

/// How many spares are kept at first.
pub const LEAST: usize = 4;
/// The most the pool grows to.
pub const MOST: usize = 8;
/// The most `LNK_SPARES` may ask for.
pub const MAX_SPARES: usize = 64;
/// The `spares` threads: as many spares may be started at once, but only while none is ready
/// (calls then start cold, each making a sandbox on its own path: a second one started ahead
/// costs no more); with one ready, one at a time.
pub const REFILLERS: usize = 2;
/// After a spare could not be started, how long until the next try.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// The longest the thread holds back while calls overlap before it starts a spare anyway.
const DEFER_AT_MOST: Duration = Duration::from_millis(100);

/// `command` calls in flight ([`RefillHold`]).
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// The ready spares, oldest first, and what the threads are to do.
#[derive(Debug)]
pub struct Pool {
    pub settings: Settings,
    /// The fewest kept, and the most the pool grows to.
    least: usize,
    most: usize,
    state: Mutex<State>,
    wake: Condvar,
    /// Set at serve's end: no spare is kept from then on.
    closing: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    ready: VecDeque<Spare>,
    /// Spares a call found it could not use, for the thread to dispose of (off the call's path).
    discard: Vec<Spare>,
    /// The most calls seen in flight at once.
    peak: usize,
    /// An answer left no call in flight since a spare was last started.
    paused: bool,
    /// Spares being started now.
    starting: usize,
    /// [`Pool::close`] has disposed of every spare.
    closed: bool,
}

/// What the thread does next.
enum Next {
    Dispose(Vec<Spare>),
    Start,
    Stop,
}

impl Pool {
    /// A pool for `settings`: `LNK_SPARES` spares when it is a number from 1 to
    /// [`MAX_SPARES`], else [`LEAST`] growing to [`MOST`].
    pub fn new(settings: Settings) -> Pool {
        let fixed = std::env::var("LNK_SPARES")
            .ok()
            .and_then(|n| n.parse().ok())
            .filter(|n| (1..=MAX_SPARES).contains(n));
        let (least, most) = fixed.map_or((LEAST, MOST), |n| (n, n));
        Pool {
            settings,
            least,
            most,
            state: Mutex::default(),
            wake: Condvar::new(),
            closing: AtomicBool::new(false),
        }
    }

    /// Takes the oldest ready spare that `fits` the call; the ready ones that do not (made
    /// before a protected path or the files folder changed) go to the thread to be disposed
    /// of. The thread is told, to start the next one.
    pub fn take(&self, fits: impl Fn(&Spare) -> bool) -> Option<Spare> {
        let mut state = lock(&self.state);
        let mut taken = None;
        while let Some(spare) = state.ready.pop_front() {
            if fits(&spare) {
                taken = Some(spare);
                break;
            }
            tracing::debug!("a spare made for another state of the files folder is thrown away");
            state.discard.push(spare);
        }
        drop(state);
        self.wake.notify_all();
        taken
    }

    /// Tells the thread to look again.
    pub fn nudge(&self) {
        // Under the lock, so that the thread cannot miss it between its look and its wait.
        drop(lock(&self.state));
        self.wake.notify_all();
    }

    /// At serve's end: disposes of every spare and keeps no other.
    pub fn close(&self, within: Duration) {
        self.closing.store(true, Ordering::SeqCst);
        self.wake.notify_all();
        let deadline = Instant::now() + within;
        loop {
            // Under one lock: a spare is either taken here, or still being started.
            let (spares, idle) = {
                let mut state = lock(&self.state);
                let mut all: Vec<Spare> = state.ready.drain(..).collect();
                all.append(&mut state.discard);
                (all, state.starting == 0)
            };
            for spare in spares {
                spare.dispose();
            }
            if idle || Instant::now() > deadline {
                break;
            }
            thread::sleep(Duration::from_millis(10));
        }
        lock(&self.state).closed = true;
        self.wake.notify_all();
    }

    /// A `spares` thread: keeps the pool filled, for good. `first` hears when a first spare
    /// is ready (or could not be started). A spare's parent-death signal is tied to the thread
    /// that started it, which lives as long as serve.
    pub fn refill(&self, first: mpsc::Sender<()>) {
        let mut first = Some(first);
        let mut failures = 0u32;
        loop {
            match self.next() {
                Next::Stop => {
                    // The spares this thread started die with it (their parent-death signal
                    // is tied to it): it ends only once `close` has disposed of them, so that
                    // each ends as asked, not killed.
                    let state = lock(&self.state);
                    let _closed = self
                        .wake
                        .wait_while(state, |state| !state.closed)
                        .unwrap_or_else(PoisonError::into_inner);
                    return;
                }
                Next::Dispose(spares) => {
                    for spare in spares {
                        spare.dispose();
                    }
                    continue;
                }
                Next::Start => {}
            }
            let started = Spare::start(&self.settings).and_then(|mut spare| {
                match spare.await_ready(READY_WITHIN) {
                    Ok(()) => Ok(spare),
                    Err(err) => {
                        spare.dispose();
                        Err(err)
                    }
                }
            });
            let done = |spare: Option<Spare>| {
                let mut state = lock(&self.state);
                state.starting -= 1;
                state.ready.extend(spare);
                drop(state);
                self.wake.notify_all();
            };
            match started {
                Ok(spare) if self.closing.load(Ordering::SeqCst) => {
                    spare.dispose();
                    done(None);
                }
                Ok(spare) => {
                    done(Some(spare));
                    failures = 0;
                }
                Err(err) => {
                    done(None);
                    failures = failures.saturating_add(1);
                    if failures == 1 {
                        tracing::warn!(
                            "a spare reaper could not be started ({err}); calls start their \
                             own until one can"
                        );
                    }
                    thread::sleep(RETRY_AFTER);
                }
            }
            if let Some(first) = first.take() {
                let _ = first.send(());
            }
        }
    }

    /// Waits until there is something to do: spares to dispose of, or a spare to start now.
    fn next(&self) -> Next {
        let mut state = lock(&self.state);
        let mut deferred_since: Option<Instant> = None;
        loop {
            if self.closing.load(Ordering::SeqCst) {
                return Next::Stop;
            }
            if !state.discard.is_empty() {
                return Next::Dispose(std::mem::take(&mut state.discard));
            }
            let wanted = state.peak.clamp(self.least, self.most);
            let busy = state.starting > 0 && !state.ready.is_empty();
            if state.ready.len() + state.starting >= wanted || busy {
                deferred_since = None;
                state = self
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            // In the gap after an answer, or with no call in flight: now.
            if state.paused || IN_FLIGHT.load(Ordering::SeqCst) == 0 {
                state.paused = false;
                state.starting += 1;
                return Next::Start;
            }
            // Calls overlap: held back, for a while.
            let since = *deferred_since.get_or_insert_with(Instant::now);
            let left = DEFER_AT_MOST.saturating_sub(since.elapsed());
            if left.is_zero() {
                state.starting += 1;
                return Next::Start;
            }
            state = self
                .wake
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// A call arrived, with `in_flight` calls in flight now: the pool grows to it.
    fn arrived(&self, in_flight: usize) {
        let mut state = lock(&self.state);
        if in_flight > state.peak {
            state.peak = in_flight;
            drop(state);
            self.wake.notify_all();
        }
    }

    /// A call was answered, leaving no call in flight.
    fn all_answered(&self) {
        lock(&self.state).paused = true;
        self.wake.notify_all();
    }
}

/// A `command` call in flight, from its arrival until its answer is out: what the pool's size
/// and the thread's timing follow.
#[derive(Debug)]
pub struct RefillHold(());

impl RefillHold {
    /// A call arrives.
    pub fn begin() -> Self {
        let in_flight = IN_FLIGHT.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(pool) = super::pool() {
            pool.arrived(in_flight);
        }
        RefillHold(())
    }
}

impl Drop for RefillHold {
    fn drop(&mut self) {
        let left = IN_FLIGHT.fetch_sub(1, Ordering::SeqCst) - 1;
        if let Some(pool) = super::pool() {
            if left == 0 {
                pool.all_answered();
            } else {
                pool.nudge();
            }
        }
    }
}
