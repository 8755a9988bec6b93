//! Reapers of calls that are over but not yet reaped: a reaper reports `done` once everything of
//! its call is dead and reaped ([`lnk_proc::reaper::Event::Done`]), and the call is answered
//! then, without waiting for the reaper's own exit (its teardown, and serve's wait for it, are
//! no part of the call). The call's thread reaps it right after the answer is out
//! ([`reap_answered`]), or, should it never get there (a panic past the call's own
//! `catch_unwind`), as the thread unwinds and ends.

use std::cell::RefCell;

use lnk_proc::reaper::Reaper;

thread_local! {
    static ANSWERED: RefCell<Answered> = const { RefCell::new(Answered(Vec::new())) };
}

/// The reapers this thread is to reap once its answer is out.
struct Answered(Vec<Reaper>);

impl Drop for Answered {
    fn drop(&mut self) {
        for reaper in self.0.drain(..) {
            // Asked to stop all the same: a `done` it did not say (a program that could open
            // its report pipe, which only root under a sandbox without a user namespace can)
            // must not leave the call running past its answer.
            if let Err(err) = reaper.stop_and_finish() {
                tracing::warn!(
                    "a call's reaper could not be reaped: {}",
                    lnk_common::Causes(&err)
                );
            }
        }
    }
}

/// Keeps `reaper`, which said `done`, to be reaped after the call's answer.
pub fn reap_after_answer(reaper: Reaper) {
    ANSWERED.with(|answered| answered.borrow_mut().0.push(reaper));
}

/// Reaps the reapers of this thread's calls that were answered.
pub fn reap_answered() {
    let reapers = ANSWERED.with(|answered| std::mem::take(&mut answered.borrow_mut().0));
    // Reaped as it is dropped.
    drop(Answered(reapers));
}
