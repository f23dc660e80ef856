//! The crate's error: an opaque struct with a kind, the lock it concerns and, where there is
//! one, the underlying [`redis::RedisError`].

use std::fmt;
use std::time::Duration;

/// `Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, in categories a caller can act on.
///
/// Contention is not an error: a `try_*` call that finds the lock held by someone else
/// returns `Ok(None)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Redis could not be reached, closed the connection, or answered with an error.
    Redis,
    /// A connect, a command or a wait for a pooled connection took longer than its timeout.
    /// For a command the outcome is unknown: it may have been carried out. The message
    /// says which timeout fired.
    Timeout,
    /// Unlock or another owner-only operation by someone who does not hold the lock, or
    /// after the lease was lost.
    NotHeld,
    /// The call would wait on a lock that the calling thread itself holds in a way that
    /// can never be granted (a read holder asking for the write lock).
    WouldDeadlock,
    /// A bad argument, rejected before anything was sent to Redis.
    InvalidInput,
    /// Redis refused a command because the client's ACL user lacks a permission (a command,
    /// a key or a channel); the message names what was refused. A refused script changed
    /// nothing.
    PermissionDenied,
    /// The client was shut down.
    Shutdown,
    /// The operating system refused what the client needs to run, such as a new thread;
    /// the message says what.
    System,
    /// The lock was granted, but while the master has replicas none of them confirmed the
    /// grant within the replica sync timeout; the grant was undone. A failover could have
    /// lost it, so it is not given (see `ClientBuilder::sync_replicas`).
    NotReplicated,
}

impl ErrorKind {
    fn describe(self) -> &'static str {
        match self {
            ErrorKind::Redis => "redis error",
            ErrorKind::Timeout => "timed out",
            ErrorKind::NotHeld => "not held",
            ErrorKind::WouldDeadlock => "would deadlock",
            ErrorKind::InvalidInput => "invalid input",
            ErrorKind::PermissionDenied => "permission denied",
            ErrorKind::Shutdown => "client shut down",
            ErrorKind::System => "system error",
            ErrorKind::NotReplicated => "not replicated",
        }
    }
}

/// The error of every fallible redlease operation.
///
/// Inspect it with [`kind`](Error::kind) and the `is_*` predicates; [`source`] gives the
/// [`redis::RedisError`] where one caused it.
///
/// [`source`]: std::error::Error::source
pub struct Error {
    kind: ErrorKind,
    message: String,
    lock: Option<String>,
    connection: bool,
    /// The command never left: the connection could not be made.
    unsent: bool,
    /// The command may have been carried out and must not be sent again (it is not
    /// idempotent).
    once: bool,
    source: Option<redis::RedisError>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, message: message.into(), lock: None, connection: false, unsent: false, once: false, source: None }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidInput, message)
    }

    pub(crate) fn shutdown() -> Error {
        Error::new(ErrorKind::Shutdown, "the client was shut down")
    }

    /// Wraps a Redis error met while doing `what` ("acquiring", "connecting", ...).
    /// A Redis-side I/O timeout becomes [`ErrorKind::Timeout`], naming the command timeout.
    pub(crate) fn from_redis(err: redis::RedisError, what: &str, command_timeout: Duration) -> Error {
        let connection = err.is_io_error() || err.is_connection_dropped() || err.is_connection_refusal();
        let (kind, message) = if err.is_timeout() {
            (ErrorKind::Timeout, format!("no reply within the command timeout ({command_timeout:?}) while {what}"))
        } else if is_refusal(&err) {
            (ErrorKind::PermissionDenied, format!("Redis refused the client's user while {what}"))
        } else {
            (ErrorKind::Redis, format!("redis error while {what}"))
        };
        Error { kind, message, lock: None, connection, unsent: false, once: false, source: Some(err) }
    }

    /// Marks the error as a failure to reach or keep a connection.
    pub(crate) fn connection(mut self) -> Error {
        self.connection = true;
        self
    }

    /// Marks the error as one met before the command was sent (opening a connection).
    pub(crate) fn unsent(mut self) -> Error {
        self.unsent = true;
        self
    }

    /// Marks the error of a command that must not be sent twice: only one that never left
    /// is tried again.
    pub(crate) fn once(mut self) -> Error {
        self.once = true;
        self
    }

    /// Whether the command never left (the connection could not be made).
    pub(crate) fn was_unsent(&self) -> bool {
        self.unsent
    }

    /// Whether trying again may reach Redis: the connection broke or could not be made.
    /// A command that got no reply within its timeout is not one (its outcome is unknown,
    /// and waiting on would stretch the caller's bound), nor one that may have been carried
    /// out and must not be sent twice.
    pub(crate) fn is_retryable(&self) -> bool {
        self.connection && (self.unsent || (self.kind != ErrorKind::Timeout && !self.once))
    }

    /// Names the lock the error concerns (shown by `Display`).
    pub(crate) fn on_lock(mut self, name: &str) -> Error {
        if self.lock.is_none() {
            self.lock = Some(name.to_owned());
        }
        self
    }

    /// The category of the error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The name of the lock the error concerns, if any.
    pub fn lock_name(&self) -> Option<&str> {
        self.lock.as_deref()
    }

    /// True when a timeout fired (connect, command, or waiting for a pooled connection).
    /// After a command timeout the outcome of that command is unknown.
    pub fn is_timeout(&self) -> bool {
        self.kind == ErrorKind::Timeout
    }

    /// True when Redis could not be reached or the connection broke (refused, reset,
    /// closed, or no answer within the connect timeout).
    pub fn is_connection_error(&self) -> bool {
        self.connection
    }

    /// True for [`ErrorKind::NotHeld`].
    pub fn is_not_held(&self) -> bool {
        self.kind == ErrorKind::NotHeld
    }

    /// True for [`ErrorKind::PermissionDenied`]: the ACL user lacks a permission.
    pub fn is_permission_denied(&self) -> bool {
        self.kind == ErrorKind::PermissionDenied
    }

    /// True for [`ErrorKind::InvalidInput`].
    pub fn is_invalid_input(&self) -> bool {
        self.kind == ErrorKind::InvalidInput
    }

    /// True for [`ErrorKind::Shutdown`].
    pub fn is_shutdown(&self) -> bool {
        self.kind == ErrorKind::Shutdown
    }
}

/// Whether Redis refused for lack of an ACL permission: a `NOPERM` reply, or the error a
/// script's command gets when the user may not run it.
fn is_refusal(err: &redis::RedisError) -> bool {
    err.code() == Some("NOPERM") || err.to_string().contains("The user executing the script can't")
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.describe(), self.message)?;
        if let Some(lock) = &self.lock {
            write!(f, " (lock {lock:?})")?;
        }
        if let Some(source) = &self.source {
            write!(f, ": {source}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .field("lock", &self.lock)
            .field("connection", &self.connection)
            .field("source", &self.source)
            .finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_lowercase_names_the_lock_and_has_no_period() {
        let e = Error::new(ErrorKind::NotHeld, "this thread holds nothing to release").on_lock("orders:42");
        let text = e.to_string();
        assert_eq!(text, "not held: this thread holds nothing to release (lock \"orders:42\")");
        assert!(!text.ends_with('.'));
        assert!(e.is_not_held() && !e.is_timeout() && !e.is_connection_error());
    }

    #[test]
    fn redis_io_timeout_becomes_timeout_kind() {
        let io = std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out");
        let e = Error::from_redis(redis::RedisError::from(io), "acquiring", Duration::from_secs(3));
        assert_eq!(e.kind(), ErrorKind::Timeout);
        assert!(e.is_timeout() && e.is_connection_error());
        assert!(e.to_string().contains("command timeout (3s)"), "{e}");
        assert!(std::error::Error::source(&e).is_some());
    }
}
