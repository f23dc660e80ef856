//! Who a client is, as it announces itself to operators: host name, process id, program,
//! when the client started and the library's version, written to a key of its own (see
//! [`keys::identity_key`](crate::base::keys::identity_key)) by the renewal thread while the
//! client holds or waits for anything, and read back by the inspection API to say whose an
//! owner field is.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A client's announcement of itself: what [`Client::inspect`](crate::Client::inspect)
/// shows beside an owner field of that client. A client written by Redisson (or a client
/// that has not announced itself yet, or whose announcement expired) has none.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientIdentity {
    /// The client's id: the first part of its owner fields, `<id>:<number>`.
    pub id: String,
    /// The host's name, as the kernel has it (`unknown` when it cannot be read).
    pub host: String,
    /// The process's id.
    pub pid: u32,
    /// The program's file name (`unknown` when it cannot be read).
    pub program: String,
    /// When the client was built, by its own clock.
    pub started: SystemTime,
    /// The version of redlease the client runs.
    pub version: String,
}

/// The fields of an announcement.
const HOST: &str = "host";
const PID: &str = "pid";
const PROGRAM: &str = "program";
const STARTED_MS: &str = "started_ms";
const VERSION: &str = "version";

/// An empty record: no id, no host, pid 0, started at the epoch (to fill in for tests).
impl Default for ClientIdentity {
    fn default() -> ClientIdentity {
        ClientIdentity {
            id: String::new(),
            host: String::new(),
            pid: 0,
            program: String::new(),
            started: UNIX_EPOCH,
            version: String::new(),
        }
    }
}

impl ClientIdentity {
    /// The identity of a client `id` of this process, built now.
    pub(crate) fn of_this_process(id: &str) -> ClientIdentity {
        ClientIdentity {
            id: id.to_owned(),
            host: host_name().unwrap_or_else(|| "unknown".to_owned()),
            pid: std::process::id(),
            program: program_name().unwrap_or_else(|| "unknown".to_owned()),
            // Whole milliseconds, as it is written: what is read back equals it.
            started: UNIX_EPOCH + Duration::from_millis(now_ms()),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }

    /// The text it is written as: one `field=value` line each, readable with `GET`.
    pub(crate) fn to_text(&self) -> String {
        let started_ms = self.started.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        let line = |value: &str| value.replace(['\n', '\r'], " ");
        format!(
            "{HOST}={}\n{PID}={}\n{PROGRAM}={}\n{STARTED_MS}={started_ms}\n{VERSION}={}\n",
            line(&self.host),
            self.pid,
            line(&self.program),
            line(&self.version)
        )
    }

    /// The identity of client `id` read back from its text; `None` when it is not an
    /// announcement.
    pub(crate) fn from_text(id: &str, text: &str) -> Option<ClientIdentity> {
        let get = |name: &str| {
            text.lines().find_map(|l| l.split_once('=').filter(|(f, _)| *f == name).map(|(_, v)| v.to_owned()))
        };
        Some(ClientIdentity {
            id: id.to_owned(),
            host: get(HOST)?,
            pid: get(PID)?.parse().ok()?,
            program: get(PROGRAM)?,
            started: UNIX_EPOCH + Duration::from_millis(get(STARTED_MS)?.parse().ok()?),
            version: get(VERSION)?,
        })
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn host_name() -> Option<String> {
    let from_kernel = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    let name = from_kernel.or_else(|| std::env::var("HOSTNAME").ok()).or_else(|| std::env::var("COMPUTERNAME").ok())?;
    let name = name.trim();
    (!name.is_empty()).then(|| name.to_owned())
}

fn program_name() -> Option<String> {
    let exe = std::env::current_exe().ok().or_else(|| std::env::args_os().next().map(Into::into))?;
    Some(exe.file_name()?.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_reads_back_as_written() {
        let me = ClientIdentity::of_this_process("c0ffee");
        assert_eq!(me.pid, std::process::id());
        assert_ne!(me.host, "");
        assert_ne!(me.program, "unknown");
        assert_eq!(ClientIdentity::from_text("c0ffee", &me.to_text()), Some(me.clone()));
        let odd = ClientIdentity { program: "two\nlines".into(), ..me };
        assert_eq!(ClientIdentity::from_text("c0ffee", &odd.to_text()).unwrap().program, "two lines");
    }

    #[test]
    fn fields_that_are_not_an_announcement_are_none() {
        assert_eq!(ClientIdentity::from_text("x", ""), None);
        assert_eq!(ClientIdentity::from_text("x", "hello"), None);
        let bad_pid = "host=h\npid=p\nprogram=a\nstarted_ms=1\nversion=0.1.0\n";
        assert_eq!(ClientIdentity::from_text("x", bad_pid), None);
    }
}
