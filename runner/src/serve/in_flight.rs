//! The tool calls in flight: their ids, their cancellation, how many run, and the wait for
//! them at shutdown.
//!
//! Every tool call goes through [`Calls::begin`], which hands back an [`InFlight`]; the call
//! ends through [`InFlight::finish`] (or by being dropped, should its thread unwind), which
//! frees the id and the call's place. Whether a call is answered is decided under the same
//! lock that a cancellation takes, so a cancellation read before the answer was queued always
//! wins: a cancelled call is never answered.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;

use crate::call::CallControl;
use crate::sync::lock;

/// The most tool calls one server runs at once; more are refused until some end, so a client
/// cannot make the server start threads without bound.
pub const MAX_CALLS: usize = 128;

/// Why a call could not start.
#[derive(Debug, thiserror::Error)]
pub enum CallRefused {
    /// Shutdown has begun.
    #[error("the server is shutting down")]
    ShuttingDown,
    /// Another request with this id is in flight.
    #[error("a request with this id is already in flight")]
    DuplicateId,
    /// [`MAX_CALLS`] calls are running.
    #[error(
        "{MAX_CALLS} calls are running, the most this server runs at once; wait for some to end"
    )]
    TooMany,
    /// No eventfd for the call's wake-ups.
    #[error("the call could not be set up: {0}")]
    NoEventfd(std::io::Error),
}

/// The registry of calls in flight.
#[derive(Default)]
pub struct Calls {
    in_flight: Mutex<HashMap<String, Arc<CallControl>>>,
    running: Mutex<usize>,
    ended: Condvar,
    shutting_down: AtomicBool,
}

/// A request id as a map key: its JSON text, so `1` and `"1"` stay apart.
fn key(id: &Value) -> String {
    id.to_string()
}

impl Calls {
    /// An empty registry.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Whether a request with this id is in flight.
    pub fn is_in_flight(&self, id: &Value) -> bool {
        lock(&self.in_flight).contains_key(&key(id))
    }

    /// Registers a call, or says why it may not start.
    pub fn begin(self: &Arc<Self>, id: &Value) -> Result<InFlight, CallRefused> {
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(CallRefused::ShuttingDown);
        }
        let control = Arc::new(CallControl::new().map_err(CallRefused::NoEventfd)?);
        let key = key(id);
        let mut in_flight = lock(&self.in_flight);
        if in_flight.contains_key(&key) {
            return Err(CallRefused::DuplicateId);
        }
        {
            let mut running = lock(&self.running);
            if *running >= MAX_CALLS {
                return Err(CallRefused::TooMany);
            }
            *running += 1;
        }
        in_flight.insert(key.clone(), Arc::clone(&control));
        Ok(InFlight {
            calls: Arc::clone(self),
            key,
            control,
            forgotten: false,
        })
    }

    /// Cancels the call with this id, if it is in flight: its processes are killed at once and
    /// it is not answered.
    pub fn cancel(&self, id: &Value) {
        if let Some(control) = lock(&self.in_flight).get(&key(id)) {
            control.cancel();
        }
    }

    /// Refuses new calls, cancels those in flight, and waits up to `limit` for their threads
    /// to end. How many were still running then.
    pub fn shut_down(&self, limit: Duration) -> usize {
        self.shutting_down.store(true, Ordering::SeqCst);
        for control in lock(&self.in_flight).values() {
            control.cancel();
        }
        let running = lock(&self.running);
        let (running, _) = self
            .ended
            .wait_timeout_while(running, limit, |n| *n > 0)
            .unwrap_or_else(PoisonError::into_inner);
        *running
    }
}

/// One call in flight. Dropping it frees the id (if [`InFlight::finish`] did not) and the
/// call's place.
pub struct InFlight {
    calls: Arc<Calls>,
    key: String,
    control: Arc<CallControl>,
    forgotten: bool,
}

impl InFlight {
    /// What cancels the call.
    pub fn control(&self) -> &CallControl {
        &self.control
    }

    /// Ends the call: its id is free again, then `answer` runs unless the call was cancelled.
    /// Both happen under the registry's lock, which a cancellation also takes, so a
    /// cancellation either comes first (no answer) or finds the call gone (its answer was
    /// queued before the cancellation was read). `answer` must only queue the answer.
    pub fn finish(mut self, answer: impl FnOnce()) {
        let mut in_flight = lock(&self.calls.in_flight);
        in_flight.remove(&self.key);
        self.forgotten = true;
        if !self.control.is_cancelled() {
            answer();
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.forgotten {
            lock(&self.calls.in_flight).remove(&self.key);
        }
        let mut running = lock(&self.calls.running);
        *running = running.saturating_sub(1);
        self.calls.ended.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_id_is_in_flight_until_its_call_finishes() {
        let calls = Calls::new();
        let call = calls.begin(&json!(1)).unwrap_or_else(|e| panic!("{e}"));
        assert!(calls.is_in_flight(&json!(1)));
        assert!(!calls.is_in_flight(&json!("1")), "1 and \"1\" are two ids");
        assert!(matches!(
            calls.begin(&json!(1)),
            Err(CallRefused::DuplicateId)
        ));
        let mut answered = false;
        call.finish(|| answered = true);
        assert!(answered);
        assert!(!calls.is_in_flight(&json!(1)));
        assert_eq!(
            calls.shut_down(Duration::ZERO),
            0,
            "the call's place is free"
        );
    }

    #[test]
    fn a_cancelled_call_is_not_answered_and_frees_its_place() {
        let calls = Calls::new();
        let call = calls.begin(&json!("a")).unwrap_or_else(|e| panic!("{e}"));
        calls.cancel(&json!("a"));
        assert!(call.control().is_cancelled());
        let mut answered = false;
        call.finish(|| answered = true);
        assert!(!answered);
        assert_eq!(calls.shut_down(Duration::ZERO), 0);
    }

    #[test]
    fn a_dropped_call_frees_its_id_and_place() {
        let calls = Calls::new();
        drop(calls.begin(&json!(7)).unwrap_or_else(|e| panic!("{e}")));
        assert!(!calls.is_in_flight(&json!(7)));
        assert_eq!(calls.shut_down(Duration::ZERO), 0);
    }

    #[test]
    fn at_most_max_calls_run_and_none_start_after_shutdown() {
        let calls = Calls::new();
        let held: Vec<InFlight> = (0..MAX_CALLS)
            .map(|i| calls.begin(&json!(i)).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        assert!(matches!(
            calls.begin(&json!("one more")),
            Err(CallRefused::TooMany)
        ));
        assert_eq!(calls.shut_down(Duration::ZERO), MAX_CALLS);
        assert!(held.iter().all(|call| call.control().is_cancelled()));
        drop(held);
        assert!(matches!(
            calls.begin(&json!("late")),
            Err(CallRefused::ShuttingDown)
        ));
    }
}
