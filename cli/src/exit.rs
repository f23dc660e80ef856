//! Exit codes, and the failure that carries one to `main` with its one-line message.
//!
//! `run` exits with its child's code, so every code of our own is one a command could
//! also return; they are taken from `sysexits.h` (as `flock -E` users pick 75) so that a
//! script can tell them apart from the usual 1 and 2. docs/cli.md lists them.

use std::fmt;

use redlease::ErrorKind;

/// Success.
pub const OK: u8 = 0;
/// `unlock --force`: there was no lock to delete.
pub const NOT_LOCKED: u8 = 1;
/// Bad input: no command, an unknown option, an empty or too long name, a malformed
/// duration or URL, an unreadable certificate file (`EX_USAGE`).
pub const USAGE: u8 = 64;
/// Redis refused the URL's login: a wrong password, an unknown or disabled user, or no
/// password where the server wants one (`EX_NOUSER`). No retry mends it.
pub const AUTHENTICATION: u8 = 67;
/// Redis could not be reached, or did not answer in time (`EX_UNAVAILABLE`).
pub const UNAVAILABLE: u8 = 69;
/// Something that should not happen: the OS refused a thread, an internal error
/// (`EX_SOFTWARE`).
pub const SOFTWARE: u8 = 70;
/// The lock was not had: held with `--no-wait`, or not free within `--wait`
/// (`EX_TEMPFAIL`, "try again later").
pub const NOT_ACQUIRED: u8 = 75;
/// Redis answered with an error: the key is not a lock, a script failed, no replica
/// confirmed a grant (`EX_PROTOCOL`).
pub const REDIS_ERROR: u8 = 76;
/// Redis refused the URL's user a command, key or channel (an ACL rule) (`EX_NOPERM`).
pub const PERMISSION: u8 = 77;
/// `run --permits N`: the semaphore is set to more permits than N, so more than N
/// commands could run at once (`EX_CONFIG`).
pub const CONFIG: u8 = 78;
/// The lease was lost while the command ran (or found lost at release, unless the command
/// was stopped before the deadline): the command was not, or not all the time, alone.
pub const LEASE_LOST: u8 = 79;
/// The lease was at risk (renewals failing, or a fixed lease about to end), and the
/// command was stopped before its deadline: it was alone all the time, but did not finish.
pub const STOPPED_AT_RISK: u8 = 80;
/// The command was found but could not be executed (as shells say).
pub const CANNOT_EXECUTE: u8 = 126;
/// The command was not found (as shells say).
pub const NOT_FOUND: u8 = 127;
/// A command killed by signal `n`, or `redlease` interrupted by signal `n` while it
/// waited: 128 + `n` (as shells say).
pub const SIGNAL_BASE: u8 = 128;

/// 128 + the signal's number.
pub fn signal_code(signal: i32) -> u8 {
    u8::try_from(i32::from(SIGNAL_BASE) + signal).unwrap_or(u8::MAX)
}

/// Why a command failed: the exit code and a message of one line (without the
/// `redlease:` prefix, which `main` adds).
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    message: String,
}

impl Failure {
    pub fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure { code, message: one_line(&message.into()) }
    }

    pub fn usage(message: impl Into<String>) -> Failure {
        Failure::new(USAGE, message)
    }

    pub fn software(message: impl Into<String>) -> Failure {
        Failure::new(SOFTWARE, message)
    }

    /// A library error met while doing `what`; the code follows its kind.
    pub fn from_lock_error(what: &str, err: &redlease::Error) -> Failure {
        Failure::new(code_of(err), format!("{what}: {}", describe(err)))
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Writes `redlease: <message>` to stderr (never panics, unlike `eprintln!`).
pub fn say(message: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "redlease: {message}");
}

/// The exit code for a library error.
pub fn code_of(err: &redlease::Error) -> u8 {
    match err.kind() {
        ErrorKind::InvalidInput => USAGE,
        ErrorKind::PermissionDenied => PERMISSION,
        ErrorKind::Authentication => AUTHENTICATION,
        ErrorKind::NotHeld => LEASE_LOST,
        // Whatever answered is not a Redis server: as good as none (not "Redis answered
        // with an error").
        ErrorKind::Connection => UNAVAILABLE,
        _ if err.is_connection_error() || err.is_timeout() || is_not_redis(err) => UNAVAILABLE,
        ErrorKind::Redis | ErrorKind::NotReplicated | ErrorKind::NotPersisted => REDIS_ERROR,
        _ => SOFTWARE,
    }
}

/// The redis-rs error under a library error, if one caused it.
pub fn redis_cause(err: &redlease::Error) -> Option<&redis::RedisError> {
    err.redis_error()
}

/// Whether the server's answer was not in Redis's protocol (RESP) at all: redis-rs's
/// parser failed on the bytes (`ErrorKind::Parse` with combine's "Parse error at …"),
/// which is not a reply of an unexpected type (also `ErrorKind::Parse`, "Response was of
/// incompatible type"). Whatever listens there is not a Redis server.
pub fn is_not_redis(err: &redlease::Error) -> bool {
    redis_cause(err).is_some_and(is_protocol_error)
}

fn is_protocol_error(err: &redis::RedisError) -> bool {
    err.kind() == redis::ErrorKind::Parse && err.detail().is_some_and(|d| d.starts_with("Parse error"))
}

/// The server's refusal of the URL's database (its answer to the `SELECT` of the
/// connection's handshake, such as `DB index is out of range`), if that is the error.
pub fn refused_database(err: &redlease::Error) -> Option<String> {
    let cause = redis_cause(err)?;
    if !cause.to_string().contains("refused to switch database") {
        return None;
    }
    Some(cause.detail().unwrap_or("no reason given").to_owned())
}

/// The library's message with the lock's name shortened (a name may be 8 KiB long).
pub fn describe(err: &redlease::Error) -> String {
    // The whole chain on one line: what failed and why.
    let text = format!("{err:#}");
    match err.lock_name() {
        Some(name) if name.len() > SHOWN_NAME => text.replace(&format!("{name:?}"), &shown(name)),
        _ => text,
    }
}

/// Longest name shown in full in a message.
const SHOWN_NAME: usize = 60;

/// `name` quoted, cut to its first 60 bytes (with its length) when longer.
pub fn shown(name: &str) -> String {
    if name.len() <= SHOWN_NAME {
        return format!("{name:?}");
    }
    let mut end = SHOWN_NAME;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}... ({} bytes)", &name[..end], name.len())
}

/// Newlines and other control characters become spaces: a message is one line.
fn one_line(text: &str) -> String {
    let mut line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    line.truncate(line.trim_end().len());
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line_and_names_are_cut() {
        assert_eq!(Failure::usage("a\nb\r\n").message(), "a b");
        assert_eq!(shown("orders:42"), "\"orders:42\"");
        let long = "é".repeat(100);
        let text = shown(&long);
        assert!(text.ends_with("... (200 bytes)"), "{text}");
        assert!(text.len() < 80);
        assert_eq!(signal_code(15), 143);
    }

    #[test]
    fn bytes_that_are_not_resp_are_told_from_a_reply_of_another_type() {
        // What redis-rs's parser says of an HTTP answer (the form `is_not_redis` relies on).
        let http = redis::parse_redis_value(b"HTTP/1.1 400 Bad Request\r\n\r\n").unwrap_err();
        assert!(is_protocol_error(&http), "{http:?}");
        // A well-formed reply of a type the caller did not expect is not that.
        let value = redis::parse_redis_value(b"*1\r\n:1\r\n").unwrap();
        let wrong_type = redis::from_redis_value::<String>(value).map_err(redis::RedisError::from).unwrap_err();
        assert_eq!(wrong_type.kind(), redis::ErrorKind::Parse);
        assert!(!is_protocol_error(&wrong_type), "{wrong_type:?}");
        // A server's error reply is not it either.
        let refused =
            redis::parse_redis_value(b"-ERR DB index is out of range\r\n").unwrap().extract_error().unwrap_err();
        assert!(!is_protocol_error(&refused), "{refused:?}");
    }
}
