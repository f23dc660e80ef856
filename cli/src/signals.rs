//! Signals sent to `redlease`: blocked in every thread (before any thread starts, so that
//! the library's threads inherit the mask) and taken one at a time by a thread of their
//! own with `sigwaitinfo`. No handler is installed, so no system call of any thread is ever
//! interrupted (`EINTR` on a socket with a timeout would fail a Redis command).
//!
//! The child would inherit the mask (the standard library leaves it as it is):
//! [`Child::spawn`](crate::child::Child::spawn) empties it between fork and exec.

use std::io;
use std::thread;

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};

/// The signals taken and passed on to the child.
pub const FORWARDED: [Signal; 6] =
    [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP, Signal::SIGQUIT, Signal::SIGUSR1, Signal::SIGUSR2];

/// One signal as it arrived.
#[derive(Debug, Clone, Copy)]
pub struct Received {
    pub signal: Signal,
    /// Sent by the kernel to the whole foreground process group (Ctrl-C, Ctrl-\, a
    /// terminal hang-up): the child, in the same group, has it already.
    pub from_terminal: bool,
}

/// Blocks [`FORWARDED`] in the calling thread and every thread it starts from now on.
pub fn block() -> io::Result<SigSet> {
    let mut set = SigSet::empty();
    for signal in FORWARDED {
        set.add(signal);
    }
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None).map_err(io::Error::from)?;
    Ok(set)
}

/// Starts the thread that takes the signals of `set` (blocked by [`block`]) and calls
/// `on_signal` for each, in order, for the life of the process.
pub fn listen(set: SigSet, mut on_signal: impl FnMut(Received) + Send + 'static) -> io::Result<()> {
    thread::Builder::new().name("redlease-signals".into()).spawn(move || {
        loop {
            if let Some(received) = wait(&set) {
                on_signal(received);
            }
        }
    })?;
    Ok(())
}

/// Waits for one signal of `set`; `None` when the wait was interrupted or failed.
fn wait(set: &SigSet) -> Option<Received> {
    // SAFETY: `sigwaitinfo` fills the zeroed `siginfo_t` it is given; `set` is a valid,
    // initialised signal set.
    let (number, code) = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let number = libc::sigwaitinfo(set.as_ref(), &mut info);
        (number, info.si_code)
    };
    let signal = Signal::try_from(number).ok()?;
    Some(Received { signal, from_terminal: code == libc::SI_KERNEL })
}
