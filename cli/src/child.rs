//! The command run under the lock: spawned in redlease's process group with the lock's
//! variables in its environment, watched by a thread that learns of its exit without
//! reaping it, signalled only while it is not reaped (so a signal can never reach another
//! process that got its pid), and reaped once by the supervisor.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus};
use std::thread;

use nix::sys::signal::{self, SigSet, SigmaskHow, Signal, pthread_sigmask};
use nix::sys::wait::{Id, WaitPidFlag, waitid};
use nix::unistd::Pid;

use crate::exit::{self, Failure};

/// Variables set for the child; any other value of theirs is removed from its
/// environment, so that a `redlease run` inside another does not pass on the outer one's.
pub const VARIABLES: [&str; 4] = ["REDLEASE_LOCK", "REDLEASE_OWNER", "REDLEASE_CLIENT_ID", "REDLEASE_TOKEN"];

/// A running (or exited but not yet reaped) child.
pub struct Child {
    process: std::process::Child,
    pid: Pid,
    reaped: bool,
}

impl Child {
    /// Starts `command` with `env` (pairs among [`VARIABLES`]; the others are removed).
    /// When `parent_death` is set the child gets that signal if redlease itself dies (its
    /// lease then runs out with no one renewing it).
    pub fn spawn(command: &[OsString], env: &[(&str, String)], parent_death: Option<Signal>) -> Result<Child, Failure> {
        let Some((program, args)) = command.split_first() else {
            return Err(Failure::usage("no command to run after --"));
        };
        let mut cmd = Command::new(program);
        cmd.args(args);
        for variable in VARIABLES {
            cmd.env_remove(variable);
        }
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        let parent = nix::unistd::getpid();
        // SAFETY: between fork and exec only async-signal-safe calls are made
        // (pthread_sigmask, prctl, getppid, raise), none of which allocates.
        unsafe {
            cmd.pre_exec(move || {
                // The signals redlease blocked for its own signal thread: the standard
                // library leaves the mask as it is, and a command that cannot get SIGTERM
                // could not be told of a lost lease.
                pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None).map_err(io::Error::from)?;
                if let Some(signal) = parent_death {
                    nix::sys::prctl::set_pdeathsig(signal).map_err(io::Error::from)?;
                    // The parent may have died before prctl: then no signal would come.
                    if nix::unistd::getppid() != parent {
                        let _ = signal::raise(signal);
                    }
                }
                Ok(())
            });
        }
        let process = cmd.spawn().map_err(|e| {
            let code = if e.kind() == io::ErrorKind::NotFound { exit::NOT_FOUND } else { exit::CANNOT_EXECUTE };
            Failure::new(code, format!("cannot run {}: {e}", program.to_string_lossy()))
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
