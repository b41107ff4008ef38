//! One rule for poisoned locks: every state squidbot keeps behind a `std::sync::Mutex` is
//! changed in single steps (an insert, a removal, an assignment), so a panic in another
//! holder cannot leave it half-changed, and the lock is used as it is rather than
//! skipping the work or failing the caller.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, recovering the guard of a poisoned one.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits on `condvar` with `guard`, under the same rule as [`lock`].
pub fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar.wait(guard).unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_poisoned_lock_is_used_as_it_is() {
        let shared = Arc::new(Mutex::new(vec![1]));
        let holder = shared.clone();
        let panicked = std::thread::spawn(move || {
            let mut guard = holder.lock().unwrap();
            guard.push(2);
            panic!("a holder panics");
        })
        .join();
        assert!(panicked.is_err() && shared.is_poisoned());
        lock(&shared).push(3);
        assert_eq!(*lock(&shared), [1, 2, 3]);
    }
}
