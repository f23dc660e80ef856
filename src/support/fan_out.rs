//! Running one call per item at once, on scoped threads, without panicking when the OS
//! refuses a thread: an item whose thread cannot start runs on the calling thread instead.

use std::thread;

use parking_lot::Mutex;

/// Calls `f` on every item, each on its own scoped thread where one can be started, and
/// returns the results in the items' order; `None` where a call panicked.
pub(crate) fn concurrently<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<Option<R>> {
    let slots: Vec<Mutex<Option<T>>> = items.into_iter().map(|item| Mutex::new(Some(item))).collect();
    let f = &f;
    thread::scope(|scope| {
        let spawned: Vec<_> = slots
            .iter()
            .map(|slot| {
                thread::Builder::new()
                    .name("redlease-fan-out".into())
                    .spawn_scoped(scope, move || slot.lock().take().map(f))
                    .ok()
            })
            .collect();
        spawned
            .into_iter()
            .zip(&slots)
            .map(|(thread, slot)| match thread {
                Some(thread) => thread.join().ok().flatten(),
                // No thread: the item is still in its slot; run it here.
                None => slot.lock().take().map(f),
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_order_and_a_panic_is_a_none() {
        let out = concurrently(vec![1, 2, 3], |x| {
            assert!(x != 2, "two is refused");
            x * 10
        });
        assert_eq!(out, vec![Some(10), None, Some(30)]);
    }
}
