//! Small helpers for the server's shared state.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks a mutex. A panic elsewhere while it was held leaves data that is still consistent
/// here (plain maps, counters and pipes, each changed in one step), so the lock is taken anyway.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
