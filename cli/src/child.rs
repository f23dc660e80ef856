//! The command run under the lock: spawned in redlease's process group with the lock's
//! variables in its environment, watched by a thread that learns of its exit without
//! reaping it, signalled only while it is not reaped (so a signal can never reach another
//! process that got its pid), and reaped once by the supervisor.
//!
//! The command is started through an exec shim, with no `unsafe` (no `pre_exec`): redlease
//! starts its own binary again (`/proc/self/exe`, the very file this process runs even if
//! it was replaced on disk since) with the hidden first argument [`SHIM`]; that process
//! ([`shim`]) empties the signal mask, sets the parent-death signal on itself, checks that
//! its parent is still the redlease that started it, and replaces itself with the command
//! (`exec`, same pid). So the pid redlease watches, signals and reaps is the command's.
//!
//! Why a shim: the standard library leaves the spawned process's signal mask as it is (the
//! toolchain's `std/src/sys/process/unix/unix.rs` says "Inherit the signal mask from the
//! parent rather than resetting it", in both its fork and its `posix_spawn` paths), and
//! redlease blocks the signals it forwards; and `PR_SET_PDEATHSIG` can only be set by the
//! process itself. Both used to be done between fork and exec, which needs `unsafe`.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus};
use std::thread;

use nix::sys::signal::{self, SigSet, SigmaskHow, Signal, pthread_sigmask};
use nix::sys::wait::{Id, WaitPidFlag, waitid};
use nix::unistd::Pid;

use crate::exit::{self, Failure, say};

/// Variables set for the child; any other value of theirs is removed from its
/// environment, so that a `redlease run` inside another does not pass on the outer one's.
pub const VARIABLES: [&str; 5] =
    ["REDLEASE_LOCK", "REDLEASE_OWNER", "REDLEASE_CLIENT_ID", "REDLEASE_TOKEN", "REDLEASE_TERM"];

/// The hidden first argument that makes `redlease` the exec shim:
/// `redlease SHIM <parent pid> <signal number or 0> -- COMMAND [ARGS...]`.
pub const SHIM: &str = "__redlease-exec-shim";

/// The binary this process runs, whatever became of its path since it started.
const OWN_BINARY: &str = "/proc/self/exe";

/// A running (or exited but not yet reaped) child.
pub struct Child {
    process: std::process::Child,
    pid: Pid,
    reaped: bool,
}

impl Child {
    /// Starts `command` with `env` (pairs among [`VARIABLES`]; the others are removed),
    /// through the exec shim. When `parent_death` is set the child gets that signal if
    /// redlease itself dies (its lease then runs out with no one renewing it).
    ///
    /// A command that cannot be found or executed is reported by the shim, which says so
    /// on stderr and exits with 127 or 126, as a shell does.
    pub fn spawn(command: &[OsString], env: &[(&str, String)], parent_death: Option<Signal>) -> Result<Child, Failure> {
        if command.is_empty() {
            return Err(Failure::usage("no command to run after --"));
        }
        let mut cmd = Command::new(OWN_BINARY);
        cmd.arg0("redlease")
            .arg(SHIM)
            .arg(nix::unistd::getpid().to_string())
            .arg(parent_death.map_or(0, |s| s as i32).to_string())
            .arg("--")
            .args(command);
        for variable in VARIABLES {
            cmd.env_remove(variable);
        }
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        let process = cmd.spawn().map_err(|e| {
            Failure::software(format!("cannot start the command: cannot run redlease's own binary ({OWN_BINARY}): {e}"))
        })?;
        let pid = Pid::from_raw(i32::try_from(process.id()).unwrap_or(i32::MAX));
        Ok(Child { process, pid, reaped: false })
    }

    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    /// Starts the thread that calls `on_exit` once the child has exited. It does not reap
    /// the child: until [`reap`](Child::reap) its pid stays its own.
    pub fn watch(&self, on_exit: impl FnOnce() + Send + 'static) -> io::Result<()> {
        let pid = self.pid;
        thread::Builder::new().name("redlease-child".into()).spawn(move || {
            // Exited, or cannot be waited for (then `reap` says why).
            while let Err(nix::errno::Errno::EINTR) = waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT)
            {
            }
            on_exit();
        })?;
        Ok(())
    }

    /// Sends `signal` to the child unless it was reaped already.
    pub fn signal(&self, signal: Signal) {
        if !self.reaped {
            // A child that exited but is not reaped ignores it: no harm done.
            let _ = signal::kill(self.pid, signal);
        }
    }

    /// Reaps the child (it has exited: [`watch`](Child::watch) said so).
    pub fn reap(&mut self) -> io::Result<ExitStatus> {
        let status = self.process.wait();
        self.reaped = true;
        status
    }
}

/// The exit code a shell would give for `status`: the code, or 128 + the signal.
pub fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(u8::MAX),
        (None, Some(signal)) => exit::signal_code(signal),
        (None, None) => exit::SOFTWARE,
    }
}

/// How the child ended, in words.
pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(number)) => match Signal::try_from(number) {
            Ok(signal) => format!("was killed by {}", signal.as_str()),
            Err(_) => format!("was killed by signal {number}"),
        },
        (None, None) => format!("ended ({status})"),
    }
}

/// The exec shim (see the module's documentation), given the arguments after [`SHIM`]:
/// prepares this process and replaces it with the command; returns only when that failed,
/// with the exit code to leave with.
pub fn shim(args: &[OsString]) -> u8 {
    let parsed = match args {
        [parent, signal, dashes, program, rest @ ..] if dashes == "--" => {
            let parent = parent.to_str().and_then(|p| p.parse::<i32>().ok());
            let signal = signal.to_str().and_then(|s| s.parse::<i32>().ok());
            parent.zip(signal).map(|(parent, signal)| (Pid::from_raw(parent), signal, program, rest))
        }
        _ => None,
    };
    let Some((parent, signal, program, rest)) = parsed else {
        say(&format!("{SHIM} is for redlease's own use"));
        return exit::USAGE;
    };
    // The signals redlease blocked for its own signal thread: a command that cannot get
    // SIGTERM could not be told of a lost lease.
    if let Err(e) = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None) {
        say(&format!("cannot unblock signals for the command: {e}"));
        return exit::SOFTWARE;
    }
    if signal != 0 {
        let Ok(signal) = Signal::try_from(signal) else {
            say(&format!("{SHIM}: no signal {signal}"));
            return exit::USAGE;
        };
        if let Err(e) = nix::sys::prctl::set_pdeathsig(signal) {
            say(&format!("cannot set the parent-death signal of the command: {e}"));
            return exit::SOFTWARE;
        }
        // Redlease may have died before the line above: then no signal would come.
        if nix::unistd::getppid() != parent {
            let _ = signal::raise(signal);
            return exit::signal_code(signal as i32);
        }
    }
    // The standard library's exec without a fork: it also gives SIGPIPE back its default
    // action (Rust programs ignore it, and an ignored signal stays ignored across exec).
    let err = Command::new(program).args(rest).exec();
    say(&format!("cannot run {}: {err}", program.to_string_lossy()));
    if err.kind() == io::ErrorKind::NotFound { exit::NOT_FOUND } else { exit::CANNOT_EXECUTE }
}
