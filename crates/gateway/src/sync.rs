//! Small helpers shared by every room.

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex. A poisoned lock only means a panic elsewhere while it was held; the maps and
/// counters moniker keeps under its locks are consistent after every statement, so the data is
/// still usable.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
