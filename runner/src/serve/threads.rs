//! The threads tool calls run on. Each call has a thread to itself while it runs; once it is
//! answered, its thread waits, parked, for the next call (at most [`MAX_IDLE`] of them wait;
//! any more end).
//!
//! Why not a new thread per call: the kernel places a new thread by its balancing of new
//! tasks, often on another CPU (asleep between an agent's calls, or busy with another
//! process's work), while a parked thread is woken mostly where its waker runs. Measured on a
//! 2-CPU VM against a new thread per call, interleaved call by call: 0.05 ms faster with calls
//! 100 ms apart, and 0.5–0.6 ms with one core kept busy (`docs/choices.md`). A parked thread
//! uses no CPU and holds only its stack's pages.
//!
//! A thread's name (`comm`, what `ps` and `/proc/<pid>/task/<tid>/comm` show) is its call's
//! while the call runs, and [`IDLE_NAME`] while it waits.

use std::ffi::CString;
use std::io;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Mutex, MutexGuard};

use crate::sync::lock;

/// How many threads wait for a call at most: enough for the calls an agent makes at once,
/// few enough that a burst leaves next to nothing behind.
pub const MAX_IDLE: usize = 4;
/// The name of a thread that waits for a call.
pub const IDLE_NAME: &str = "call (idle)";

/// A call to run, and the name its thread takes meanwhile.
struct Job {
    name: String,
    work: Box<dyn FnOnce() + Send>,
}

/// serve's call threads.
static CALL_THREADS: CallThreads = CallThreads::new(MAX_IDLE);

/// Runs `work` on one of serve's call threads that waits, or on a new one, named `name`
/// meanwhile. An error means no thread could be started, and `work` was dropped.
pub fn run(name: String, work: impl FnOnce() + Send + 'static) -> io::Result<()> {
    CALL_THREADS.run(name, work)
}

/// Threads that wait for a call, the one that waited least last, and how many may wait.
struct CallThreads {
    idle: Mutex<Vec<Sender<Job>>>,
    max_idle: usize,
}

impl CallThreads {
    const fn new(max_idle: usize) -> Self {
        Self {
            idle: Mutex::new(Vec::new()),
            max_idle,
        }
    }

    fn run(&'static self, name: String, work: impl FnOnce() + Send + 'static) -> io::Result<()> {
        let mut job = Job {
            name,
            work: Box::new(work),
        };
        // A thread in the list waits on its own channel, or is about to, and holds that
        // channel's sender itself: a send reaches it. Should one fail all the same, the job
        // comes back, for the next thread in the list or a new one.
        while let Some(waiting) = self.idle().pop() {
            match waiting.send(job) {
                Ok(()) => return Ok(()),
                Err(mpsc::SendError(back)) => job = back,
            }
        }
        let (sender, receiver) = mpsc::channel();
        std::thread::Builder::new()
            .name("call".into())
            .spawn(move || self.serve_calls(job, &sender, &receiver))
            .map(drop)
    }

    /// A thread's life: its first call, then each call it is handed, until more than
    /// `max_idle` threads would wait.
    fn serve_calls(&self, first: Job, sender: &Sender<Job>, receiver: &Receiver<Job>) {
        let mut job = first;
        loop {
            name_this_thread(&job.name);
            (job.work)();
            name_this_thread(IDLE_NAME);
            {
                let mut idle = self.idle();
                if idle.len() >= self.max_idle {
                    return;
                }
                idle.push(sender.clone());
            }
            match receiver.recv() {
                Ok(next) => job = next,
                // Never while this thread's own sender lives; ends the thread all the same.
                Err(_) => return,
            }
        }
    }

    fn idle(&self) -> MutexGuard<'_, Vec<Sender<Job>>> {
        lock(&self.idle)
    }
}

/// Names this thread: the first 15 characters of `name` (the kernel keeps 15 bytes), each
/// not printable in ASCII (a call's id is the client's to choose: a control character, a
/// right-to-left override, half of a character cut short) shown as `?`. It is for people
/// reading `ps`; should the kernel refuse it, the last name stays.
fn name_this_thread(name: &str) {
    let shown: String = name
        .chars()
        .take(15)
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect();
    if let Ok(shown) = CString::new(shown) {
        let _ = rustix::thread::set_name(&shown);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::mpsc::channel;
    use std::time::Duration;

    fn comm() -> String {
        std::fs::read_to_string("/proc/thread-self/comm")
            .unwrap_or_default()
            .trim_end()
            .to_owned()
    }

    fn pool(max_idle: usize) -> &'static CallThreads {
        Box::leak(Box::new(CallThreads::new(max_idle)))
    }

    #[test]
    fn a_call_after_another_runs_on_the_thread_that_waited_under_its_own_name() {
        let threads = pool(MAX_IDLE);
        let (tx, rx) = channel();
        let first = tx.clone();
        threads
            .run("first call".into(), move || {
                let _ = first.send((std::thread::current().id(), comm()));
            })
            .unwrap();
        let (first_thread, first_name) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(first_name, "first call");
        // Its thread parks once the call is over: then a second call finds it.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while threads.idle().is_empty() {
            assert!(std::time::Instant::now() < deadline, "no thread parked");
            std::thread::sleep(Duration::from_millis(5));
        }
        threads
            .run("second call with a long name".into(), move || {
                let _ = tx.send((std::thread::current().id(), comm()));
            })
            .unwrap();
        let (second_thread, second_name) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(second_thread, first_thread);
        assert_eq!(second_name, "second call wit");
    }

    #[test]
    fn a_name_the_client_chose_is_shown_in_printable_ascii() {
        let threads = pool(1);
        let (tx, rx) = channel();
        threads
            .run("command \"a\u{e9}\u{202e}\n\0xyzw".into(), move || {
                let _ = tx.send(comm());
            })
            .unwrap();
        let name = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(name, "command \"a????x");
    }

    #[test]
    fn calls_at_once_each_get_a_thread_and_few_wait_after() {
        let threads = pool(2);
        let (tx, rx) = channel();
        let gate = std::sync::Arc::new(std::sync::Barrier::new(9));
        for n in 0..8 {
            let (tx, gate) = (tx.clone(), std::sync::Arc::clone(&gate));
            threads
                .run(format!("call {n}"), move || {
                    gate.wait();
                    let _ = tx.send(std::thread::current().id());
                })
                .unwrap();
        }
        // All eight wait on the barrier at once: each has a thread of its own.
        gate.wait();
        let mut ran_on: Vec<_> = (0..8)
            .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        ran_on.sort_by_key(|id| format!("{id:?}"));
        ran_on.dedup();
        assert_eq!(ran_on.len(), 8);
        // Two of them wait for a call once all are over; the other six end.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while threads.idle().len() < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "no two threads parked"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(threads.idle().len(), 2);
    }
}
