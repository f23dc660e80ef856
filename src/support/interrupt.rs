//! Interruptible waits (Java's `lockInterruptibly`): any thread can interrupt another
//! thread's blocking wait for a lock, permits or a latch through that thread's
//! [`Interrupter`].
//!
//! Each thread has one interrupt state, made on first use: a flag, and while the thread is
//! parked, how to wake it (the parking spot registers a waker). `interrupt()` sets the flag
//! and calls the waker; the waiting thread sees the flag where it parks, and the wait
//! returns [`ErrorKind::Interrupted`](crate::ErrorKind::Interrupted), taking the flag. An
//! interrupt that comes while the thread is not waiting stays pending until its next wait
//! (which then fails at once), as Java's does.
//!
//! | thread | `interrupt()` | next |
//! |---|---|---|
//! | not waiting | flag set | its next wait fails at once, taking the flag |
//! | parked (a lock's wait, a subscription's confirmation, a retry's pause) | flag set, parking spot woken | the wait fails within milliseconds, taking the flag |
//! | in a round trip | flag set | the wait fails when the round trip returns (a grant made then is given back) |
//! | not waiting, `clear()` | — | flag cleared |

use std::cell::OnceCell;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::base::clock;

thread_local! {
    static CURRENT: OnceCell<Arc<State>> = const { OnceCell::new() };
}

/// How to wake a parked thread: notifies whatever it blocks on.
type Waker = Arc<dyn Fn() + Send + Sync>;

struct State {
    interrupted: AtomicBool,
    /// How to wake the thread while it is parked.
    waker: Mutex<Option<Waker>>,
    /// Where the thread sleeps between retries.
    nap: Mutex<()>,
    napping: Condvar,
}

/// A handle that interrupts one thread's waits: `Send`, `Sync` and `Clone`, so another
/// thread (a signal handler's thread, a supervisor) can end a wait that would otherwise go
/// on.
///
/// Get it on the thread that will wait, with [`Interrupter::current`], and give it to the
/// thread that may interrupt. [`interrupt`](Interrupter::interrupt) makes that thread's
/// current wait, or its next one, return an error of kind
/// [`Interrupted`](crate::ErrorKind::Interrupted) within milliseconds: `lock()` and the
/// `try_lock_for`/`try_lock_until` ladder of every lock kind, [`MultiLock`](crate::MultiLock)
/// and [`RedLock`](crate::RedLock), the semaphores' acquires and the latch's awaits. A wait
/// that ends so leaves nothing behind: no place in a fair lock's queue, no wake-up
/// registration, and a hold or permits granted in the same instant are given back. A
/// single attempt (`try_lock()`, `try_acquire()`) is not a wait, and is not interrupted;
/// nor are releases.
///
/// ```no_run
/// use std::time::Duration;
///
/// let client = redlease::Client::open("redis://127.0.0.1:6379/")?;
/// let lock = client.lock("reports");
/// let (tx, rx) = std::sync::mpsc::channel();
/// let waiter = std::thread::spawn(move || {
///     tx.send(redlease::Interrupter::current()).expect("the interrupter");
///     lock.lock().map(|guard| guard.is_held())
/// });
/// let interrupter = rx.recv().expect("sent");
/// std::thread::sleep(Duration::from_millis(100));
/// interrupter.interrupt();
/// let outcome = waiter.join().expect("the waiter");
/// assert!(outcome.is_err_and(|err| err.is_interrupted()), "it stopped waiting");
/// # Ok::<(), redlease::Error>(())
/// ```
#[derive(Clone)]
pub struct Interrupter {
    state: Arc<State>,
}

impl Interrupter {
    /// The calling thread's interrupter.
    pub fn current() -> Interrupter {
        Interrupter { state: current() }
    }

    /// Interrupts the thread's wait, or its next one when it is not waiting.
    pub fn interrupt(&self) {
        self.state.interrupted.store(true, Ordering::SeqCst);
        let waker = self.state.waker.lock().clone();
        if let Some(wake) = waker {
            wake();
        }
        let _nap = self.state.nap.lock();
        self.state.napping.notify_all();
    }

    /// Whether an interrupt is pending (sent and not yet taken by a wait).
    pub fn is_interrupted(&self) -> bool {
        self.state.interrupted.load(Ordering::SeqCst)
    }

    /// Withdraws a pending interrupt; whether there was one.
    pub fn clear(&self) -> bool {
        self.state.interrupted.swap(false, Ordering::SeqCst)
    }
}

impl fmt::Debug for Interrupter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interrupter").field("interrupted", &self.is_interrupted()).finish()
    }
}

fn current() -> Arc<State> {
    CURRENT.with(|cell| {
        Arc::clone(cell.get_or_init(|| {
            Arc::new(State {
                interrupted: AtomicBool::new(false),
                waker: Mutex::new(None),
                nap: Mutex::new(()),
                napping: Condvar::new(),
            })
        }))
    })
}

/// Whether the calling thread has an interrupt pending (without taking it).
pub(crate) fn pending() -> bool {
    CURRENT.with(|cell| cell.get().is_some_and(|state| state.interrupted.load(Ordering::SeqCst)))
}

/// Takes the calling thread's pending interrupt: whether there was one.
pub(crate) fn take() -> bool {
    CURRENT.with(|cell| cell.get().is_some_and(|state| state.interrupted.swap(false, Ordering::SeqCst)))
}

/// Runs `wait` with `wake` registered as the way to wake the calling thread: an interrupt
/// calls it. `wake` must notify whatever `wait` blocks on, and `wait` must look at
/// [`pending`] where it blocks (under the same lock `wake` takes, so that no interrupt is
/// missed between its look and its sleep).
pub(crate) fn parked<T>(wake: impl Fn() + Send + Sync + 'static, wait: impl FnOnce() -> T) -> T {
    let state = current();
    *state.waker.lock() = Some(Arc::new(wake));
    let result = wait();
    *state.waker.lock() = None;
    result
}

/// Sleeps `pause`, or until interrupted; whether it was interrupted (the interrupt is left
/// pending for the caller to take).
pub(crate) fn nap(pause: Duration) -> bool {
    let state = current();
    let until = clock::deadline_in(pause);
    let mut nap = state.nap.lock();
    loop {
        if state.interrupted.load(Ordering::SeqCst) {
            return true;
        }
        match until {
            Some(until) if Instant::now() >= until => return false,
            Some(until) => {
                state.napping.wait_until(&mut nap, until);
            }
            None => state.napping.wait(&mut nap),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row of the state table that involves no lock.
    #[test]
    fn an_interrupt_is_pending_until_taken_and_wakes_a_nap() {
        let interrupter = Interrupter::current();
        assert!(!pending() && !take());
        interrupter.interrupt();
        assert!(interrupter.is_interrupted() && pending());
        assert!(take(), "taken once");
        assert!(!take() && !interrupter.is_interrupted());
        interrupter.interrupt();
        assert!(interrupter.clear() && !pending(), "withdrawn");
        // A nap ends at the interrupt, from another thread.
        let other = interrupter.clone();
        let started = Instant::now();
        let waker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            other.interrupt();
        });
        assert!(nap(Duration::from_secs(5)), "interrupted");
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        assert!(take());
        waker.join().expect("waker");
        assert!(!nap(Duration::from_millis(5)), "a nap that ends by itself");
    }

    /// An interrupt calls the parked thread's waker, and only while it is parked.
    #[test]
    fn an_interrupt_calls_the_waker_of_a_parked_thread() {
        let woken = Arc::new(AtomicBool::new(false));
        let interrupter = Interrupter::current();
        let seen = Arc::clone(&woken);
        parked(
            move || seen.store(true, Ordering::SeqCst),
            || {
                interrupter.interrupt();
            },
        );
        assert!(woken.swap(false, Ordering::SeqCst), "woken while parked");
        assert!(take());
        interrupter.interrupt();
        assert!(!woken.load(Ordering::SeqCst), "no waker once unparked");
        assert!(take());
    }
}
