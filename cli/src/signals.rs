//! Signals sent to `redlease`: blocked in every thread (before any thread starts, so that
//! the library's threads inherit the mask) and read one at a time, with the kernel's
//! `siginfo`, from a `signalfd` by a thread of their own. No handler is installed, so no
//! system call of any thread is ever interrupted (`EINTR` on a socket with a timeout would
//! fail a Redis command).
//!
//! `signalfd` (nix's safe [`SignalFd`]) is chosen over `sigwait`, which says which signal
//! came but not who sent it: its record carries `si_code`, which tells a signal the
//! terminal sent to the whole foreground process group (`SI_KERNEL`) from one sent with
//! `kill` (`SI_USER`) to `redlease` alone. It reads the same pending signals `sigwaitinfo`
//! would, one record per pending signal, and is opened close-on-exec so that no command
//! inherits it.
//!
//! The child inherits the mask (the standard library leaves it as it is): the exec shim
//! ([`crate::child`]) empties it before the command starts.

use std::io;
use std::thread;

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};

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
    let fd = SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC).map_err(io::Error::from)?;
    thread::Builder::new().name("redlease-signals".into()).spawn(move || {
        loop {
            match fd.read_signal() {
                Ok(Some(info)) => {
                    if let Some(received) = decode(info.ssi_signo, info.ssi_code) {
                        on_signal(received);
                    }
                }
                // Only a non-blocking descriptor answers "nothing"; this one blocks.
                Ok(None) | Err(nix::errno::Errno::EINTR) => {}
                // Cannot happen with a valid descriptor; do not spin on it.
                Err(_) => return,
            }
        }
    })?;
    Ok(())
}

/// The signal of a `signalfd` record (`ssi_signo`, `ssi_code`); `None` for a number
/// that is not a signal.
fn decode(number: u32, code: i32) -> Option<Received> {
    let signal = Signal::try_from(i32::try_from(number).ok()?).ok()?;
    Some(Received { signal, from_terminal: code == nix::libc::SI_KERNEL })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_says_who_sent_the_signal() {
        let sent = decode(2, nix::libc::SI_USER).unwrap();
        assert_eq!((sent.signal, sent.from_terminal), (Signal::SIGINT, false));
        let typed = decode(3, nix::libc::SI_KERNEL).unwrap();
        assert_eq!((typed.signal, typed.from_terminal), (Signal::SIGQUIT, true));
        assert!(decode(0, 0).is_none());
        assert!(decode(u32::MAX, 0).is_none());
    }
}
