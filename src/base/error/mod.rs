//! The crate's error: an opaque struct with a kind, the lock, semaphore or latch it
//! concerns and, where there is one, the underlying [`redis::RedisError`]; and how a user's
//! name is shown in a message (cut to its first [`SHOWN_NAME_CHARS`] characters).

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
    /// Redis answered with an error, or with something the client cannot use.
    Redis,
    /// Redis could not be reached, or the connection broke: refused, reset, closed by the
    /// server, or a TLS handshake that failed. Always a connection error
    /// ([`Error::is_connection_error`]) and transient ([`Error::is_transient`]): the client
    /// has already tried again where that was safe. (A connect that took longer than the
    /// connect timeout is [`Timeout`](ErrorKind::Timeout), and a refused login
    /// [`Authentication`](ErrorKind::Authentication).)
    Connection,
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
    /// The client was shut down ([`Client::shutdown`](crate::Client::shutdown)): it takes
    /// no more calls.
    Shutdown,
    /// The operating system refused what the client needs to run, such as a new thread;
    /// the message says what.
    System,
    /// The wait was interrupted by another thread
    /// ([`Interrupter::interrupt`](crate::Interrupter::interrupt)); nothing of it was left
    /// behind (a grant made in the same instant was given back).
    Interrupted,
    /// The lock was granted, but the grant could not be trusted to survive a failover, and
    /// was undone: none of the master's replicas confirmed it within the replica sync
    /// timeout, or the master lost a replica lately (a failover may be under way), or it
    /// was made on a master the client has left since. The message says which (see
    /// `ClientBuilder::sync_replicas`).
    NotReplicated,
    /// The lock was granted, but its master's append-only file did not have it on disk in
    /// time, or the master cannot persist it (no `appendonly`, or no `WAITAOF`, under
    /// `SyncMode::WaitAof`), and the grant was undone. The message says which (see
    /// `ClientBuilder::sync_mode`). Transient when the disk was only slow.
    NotPersisted,
    /// Redis refused the URL's login: a wrong password, a user that does not exist or is
    /// disabled (`WRONGPASS`), or no password where the server wants one (`NOAUTH`). The
    /// message names the user. Never transient: no retry mends it; the URL must change.
    Authentication,
}

impl ErrorKind {
    fn describe(self) -> &'static str {
        match self {
            ErrorKind::Redis => "redis error",
            ErrorKind::Connection => "connection failed",
            ErrorKind::Timeout => "timed out",
            ErrorKind::NotHeld => "not held",
            ErrorKind::WouldDeadlock => "would deadlock",
            ErrorKind::InvalidInput => "invalid input",
            ErrorKind::PermissionDenied => "permission denied",
            ErrorKind::Shutdown => "client shut down",
            ErrorKind::System => "system error",
            ErrorKind::NotReplicated => "not replicated",
            ErrorKind::NotPersisted => "not persisted",
            ErrorKind::Interrupted => "interrupted",
            ErrorKind::Authentication => "authentication failed",
        }
    }
}

/// What the name an error concerns names: its `Display` says which (`(lock "a")`,
/// `(semaphore "a")`, `(latch "a")`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Subject {
    Lock,
    Semaphore,
    Latch,
    Election,
}

impl Subject {
    fn describe(self) -> &'static str {
        match self {
            Subject::Lock => "lock",
            Subject::Semaphore => "semaphore",
            Subject::Latch => "latch",
            Subject::Election => "election",
        }
    }
}

/// Most characters of a user's name a message shows: a longer name is cut there, with an
/// ellipsis and its length (a name may be 8 KiB long, and a refused one any length).
pub(crate) const SHOWN_NAME_CHARS: usize = 64;

/// A user's name as a message shows it: quoted and escaped, and, when it is longer than
/// [`SHOWN_NAME_CHARS`] characters, cut after them (on a character boundary) with an
/// ellipsis and its whole length: `"orders:42"`, or `"nnn…nnn"…, 100000 bytes long`.
pub(crate) fn shown_name(name: &str) -> String {
    match name.char_indices().nth(SHOWN_NAME_CHARS) {
        None => format!("{name:?}"),
        Some((end, _)) => format!("{:?}…, {} bytes long", &name[..end], name.len()),
    }
}

/// The error of every fallible redlease operation.
///
/// Inspect it with [`kind`](Error::kind) and the `is_*` predicates;
/// [`redis_error`](Error::redis_error) gives the [`redis::RedisError`] behind it, and
/// [`source`] the failure that kept Redis from answering. A message shows at most the first 64
/// characters of a name (and its length); [`lock_name`](Error::lock_name) gives it whole.
///
/// `Display` says what failed, without its source's text, so that reporters that walk
/// the chain (`anyhow`'s `{:#}`) say each cause once; the alternate form (`{:#}`) adds the
/// source's text, for a one-line message that says it all:
///
/// ```no_run
/// let err = redlease::Client::open("redis://127.0.0.1:1/").unwrap_err();
/// // "connection failed: connecting to 127.0.0.1:1 failed"
/// let short = err.to_string();
/// // "connection failed: connecting to 127.0.0.1:1 failed: Connection refused (os error 111)"
/// let whole = format!("{err:#}");
/// assert!(whole.starts_with(&short));
/// ```
///
/// [`source`]: std::error::Error::source
pub struct Error {
    kind: ErrorKind,
    message: String,
    /// The name of the lock, semaphore or latch the error concerns.
    lock: Option<String>,
    /// What `lock` names.
    subject: Subject,
    /// What may be wrong, where the error alone does not say (shown last).
    hint: Option<String>,
    connection: bool,
    /// The command had no effect: it never left (the connection could not be made), Redis
    /// refused it before running it, or what it did was undone. Sending it again is safe.
    unsent: bool,
    /// A passing state of the deployment caused it (a failover, a cluster healing, a server
    /// loading its data, a busy script): the same call may succeed a moment later.
    transient: bool,
    /// The command may have been carried out and must not be sent again (it is not
    /// idempotent).
    once: bool,
    source: Option<redis::RedisError>,
    /// The message quotes the source: what Redis answered (an error reply, a refusal) is
    /// the error itself, so `source()` gives nothing more and `{:#}` repeats nothing.
    quoted: bool,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            lock: None,
            subject: Subject::Lock,
            hint: None,
            connection: kind == ErrorKind::Connection,
            unsent: false,
            transient: false,
            once: false,
            source: None,
            quoted: false,
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidInput, message)
    }

    /// A call on a client that was shut down ("client shut down" is its kind's part of the
    /// message).
    pub(crate) fn shutdown() -> Error {
        Error::new(ErrorKind::Shutdown, "no more calls are taken")
    }

    pub(crate) fn interrupted() -> Error {
        Error::new(ErrorKind::Interrupted, "another thread interrupted the wait; nothing of it was kept")
    }

    /// Wraps a Redis error met while doing `what` ("acquiring", "connecting", ...).
    /// A Redis-side I/O timeout becomes [`ErrorKind::Timeout`], naming the command timeout;
    /// a server state that passes by itself, in which Redis refuses a command before
    /// running it (see [`is_transient_refusal`]), is marked transient and unsent.
    pub(crate) fn from_redis(err: redis::RedisError, what: &str, command_timeout: Duration) -> Error {
        let connection = err.is_io_error() || err.is_connection_dropped() || err.is_connection_refusal();
        let transient = is_transient_refusal(&err);
        // Redis's own reply (`ERR …`, `NOPERM …`, `READONLY …`) is quoted in the message:
        // it says what went wrong in Redis's words. A failure to get a reply (I/O, a
        // timeout) is the source, told by `source()` and `{:#}`.
        let refusal = is_refusal(&err);
        let reply = refusal || (err.code().is_some() && !connection && !err.is_timeout());
        let authentication = is_authentication_failure(&err);
        let (kind, message) = if authentication {
            // Said once, here: the handshake's refusal carries no words of the server's.
            let said = match (err.code(), err.detail()) {
                (Some(code), Some(detail)) => format!("{code} {detail}"),
                (Some(code), None) => code.to_owned(),
                (None, _) => "a wrong password, or a user that does not exist or is disabled".to_owned(),
            };
            (
                ErrorKind::Authentication,
                format!("Redis refused the login while {what} ({said}): check the user and password in the URL"),
            )
        } else if is_reentry_refusal(&err) {
            (ErrorKind::WouldDeadlock, format!("this owner holds the non-reentrant lock already (while {what})"))
        } else if err.is_timeout() {
            (ErrorKind::Timeout, format!("no reply within the command timeout ({command_timeout:?}) while {what}"))
        } else if refusal {
            (ErrorKind::PermissionDenied, format!("Redis refused the client's user while {what}: {err}"))
        } else if connection {
            (ErrorKind::Connection, format!("{what} failed"))
        } else if reply {
            (ErrorKind::Redis, format!("{what} failed: {err}"))
        } else {
            (ErrorKind::Redis, format!("{what} failed"))
        };
        Error {
            kind,
            message,
            lock: None,
            subject: Subject::Lock,
            hint: None,
            connection,
            unsent: transient,
            transient,
            once: false,
            source: Some(err),
            quoted: reply || authentication,
        }
    }

    /// Marks the error as a failure to reach or keep a connection: of kind
    /// [`ErrorKind::Connection`] unless it says more (a timeout, a refused login).
    pub(crate) fn connection(mut self) -> Error {
        // A refused login is the server's answer, not a failure to reach it: no retry,
        // however patient, mends it.
        self.connection = self.kind != ErrorKind::Authentication;
        if self.kind == ErrorKind::Redis {
            self.kind = ErrorKind::Connection;
        }
        self
    }

    /// An error of the same kind and nature as this one (connection, transient, unsent,
    /// once) that says `message`: what a call that shared this one's failure reports (the
    /// other calls of a renewal batch whose round trip failed).
    pub(crate) fn alike(&self, message: impl Into<String>) -> Error {
        Error {
            connection: self.connection,
            unsent: self.unsent,
            transient: self.transient,
            once: self.once,
            ..Error::new(self.kind, message)
        }
    }

    /// Marks the error as one met before the command had any effect (opening a connection,
    /// or a grant that was undone).
    pub(crate) fn unsent(mut self) -> Error {
        self.unsent = true;
        self
    }

    /// Whether the command had no effect (see [`unsent`](Error::unsent)).
    pub(crate) fn was_unsent(&self) -> bool {
        self.unsent
    }

    /// Marks the error as caused by a passing state of the deployment.
    pub(crate) fn transient(mut self) -> Error {
        self.transient = true;
        self
    }

    /// Marks the error as met after the command had its effect (a grant, then a failure to
    /// confirm it): whatever the failure, the command was not refused before it ran.
    pub(crate) fn after_effect(mut self) -> Error {
        self.unsent = false;
        self
    }

    /// Marks the error of a command that must not be sent twice: only one that never left
    /// is tried again.
    pub(crate) fn once(mut self) -> Error {
        self.once = true;
        self
    }

    /// Whether trying again may mend it: a passing state refused the command before it had
    /// any effect, or the connection broke or could not be made. A command that got no
    /// reply within its timeout is not one (its outcome is unknown, and waiting on would
    /// stretch the caller's bound), nor one that may have been carried out and must not be
    /// sent twice.
    pub(crate) fn is_retryable(&self) -> bool {
        (self.transient && self.unsent)
            || (self.connection && (self.unsent || (self.kind != ErrorKind::Timeout && !self.once)))
    }

    /// Names the lock the error concerns (shown by `Display` as `(lock "name")`). The
    /// first name given stays.
    pub(crate) fn on_lock(self, name: &str) -> Error {
        self.on(Subject::Lock, name)
    }

    /// Names the semaphore (either kind) the error concerns: `(semaphore "name")`, also
    /// over what an earlier call said of the same name (the checks every kind shares,
    /// `engine::ready`, say "lock"). Another name given first stays.
    pub(crate) fn on_semaphore(self, name: &str) -> Error {
        self.on(Subject::Semaphore, name)
    }

    /// Names the count-down latch the error concerns: `(latch "name")`, also over what an
    /// earlier call said of the same name, as [`on_semaphore`](Error::on_semaphore).
    pub(crate) fn on_latch(self, name: &str) -> Error {
        self.on(Subject::Latch, name)
    }

    /// Names the election the error concerns, `(election "name")`, over the name of its
    /// key (`key`), which the lock paths under it give: a user knows the election by its
    /// name.
    pub(crate) fn on_election(mut self, key: &str, name: &str) -> Error {
        if self.lock.as_deref().is_none_or(|named| named == key) {
            self.lock = Some(name.to_owned());
            self.subject = Subject::Election;
        }
        self
    }

    /// Names what the error concerns: the first name given stays; for that same name, a
    /// semaphore or a latch says what it is over what was said before ("lock", the word of
    /// the checks every kind shares), and "lock" never overrides them.
    fn on(mut self, subject: Subject, name: &str) -> Error {
        match &self.lock {
            None => {
                self.lock = Some(name.to_owned());
                self.subject = subject;
            }
            Some(named) if named == name && subject != Subject::Lock => self.subject = subject,
            Some(_) => {}
        }
        self
    }

    /// Adds what may be wrong, where the error alone does not say (shown at the end of the
    /// message). The first hint given stays.
    pub(crate) fn hint(mut self, hint: impl Into<String>) -> Error {
        if self.hint.is_none() {
            self.hint = Some(hint.into());
        }
        self
    }

    /// Whether the server closed or reset the connection (not a refused connection, not a
    /// timeout): at the first exchange, what a TLS port does to a plaintext client.
    pub(crate) fn is_closed_by_peer(&self) -> bool {
        self.source.as_ref().is_some_and(|e| e.is_connection_dropped() && !e.is_connection_refusal() && !e.is_timeout())
    }

    /// The category of the error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The `redis` crate's error behind this one, if any: what Redis answered (its
    /// [`code`](redis::RedisError::code), `WRONGTYPE`, `NOPERM`, …), or the I/O failure
    /// that kept it from answering. The latter is also the [`source`]; Redis's answer is
    /// quoted in the message instead, so that no reporter says it twice.
    ///
    /// [`source`]: std::error::Error::source
    pub fn redis_error(&self) -> Option<&redis::RedisError> {
        self.source.as_ref()
    }

    /// The name of the lock, semaphore or latch the error concerns, if any: the whole name
    /// (the message shows at most its first 64 characters).
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

    /// True for [`ErrorKind::Authentication`]: Redis refused the URL's login.
    pub fn is_authentication(&self) -> bool {
        self.kind == ErrorKind::Authentication
    }

    /// True when the error came from a state of the deployment that passes by itself, so
    /// that the same call may succeed a moment later: Redis unreachable or a connection
    /// broken, a timeout, a failover or a cluster reconfiguration under way (Redis's
    /// `CLUSTERDOWN`, `TRYAGAIN`, `MASTERDOWN`, `READONLY`), a server loading its data
    /// (`LOADING`) or busy with a long script (`BUSY`), or a grant that could not be
    /// trusted to a replica ([`ErrorKind::NotReplicated`]). The client has already tried
    /// again within its retry budget where that was safe. False for what waiting does not
    /// mend: bad input, a missing permission, `NotHeld`, `WouldDeadlock`, shutdown.
    pub fn is_transient(&self) -> bool {
        self.transient || self.connection || matches!(self.kind, ErrorKind::Timeout | ErrorKind::NotReplicated)
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

    /// True for [`ErrorKind::Interrupted`]: another thread ended the wait.
    pub fn is_interrupted(&self) -> bool {
        self.kind == ErrorKind::Interrupted
    }

    /// True for [`ErrorKind::Shutdown`].
    pub fn is_shutdown(&self) -> bool {
        self.kind == ErrorKind::Shutdown
    }
}

/// Names what a failed call concerns, on a `Result` as [`Error::on_lock`] and its kin do
/// on an error: `call().on_lock(name)?` rather than `.map_err(|e| e.on_lock(name))`.
pub(crate) trait Context<T> {
    fn on_lock(self, name: &str) -> Result<T>;
    fn on_semaphore(self, name: &str) -> Result<T>;
    fn on_latch(self, name: &str) -> Result<T>;
}

impl<T> Context<T> for Result<T> {
    fn on_lock(self, name: &str) -> Result<T> {
        self.map_err(|e| e.on_lock(name))
    }

    fn on_semaphore(self, name: &str) -> Result<T> {
        self.map_err(|e| e.on_semaphore(name))
    }

    fn on_latch(self, name: &str) -> Result<T> {
        self.map_err(|e| e.on_latch(name))
    }
}

/// Whether Redis refused a command, before running it, for a state that passes by itself:
/// a cluster without a master for some slot (`CLUSTERDOWN`) or in the middle of moving one
/// (`TRYAGAIN`), a server loading its data (`LOADING`), a replica cut off from its master
/// (`MASTERDOWN`), a script running too long (`BUSY`), a server that is a replica now
/// (`READONLY`: a failover; a script is refused at its first write, before any effect).
pub(crate) fn is_transient_refusal(err: &redis::RedisError) -> bool {
    matches!(err.code(), Some("CLUSTERDOWN" | "TRYAGAIN" | "LOADING" | "MASTERDOWN" | "BUSY" | "READONLY"))
        || err.to_string().contains("READONLY")
}

/// Whether Redis refused the login: the handshake's `AUTH` failed (a wrong password, an
/// unknown or disabled user: `WRONGPASS`, or Redis 5's `invalid password`), or a command
/// came without the login the server wants (`NOAUTH`).
pub(crate) fn is_authentication_failure(err: &redis::RedisError) -> bool {
    err.kind() == redis::ErrorKind::AuthenticationFailed || matches!(err.code(), Some("NOAUTH" | "WRONGPASS"))
}

/// Whether a non-reentrant lock's script refused a second hold of its owner (Redisson's
/// `NON_REENTRANT_REACQUIRE`; Redis 7 puts `ERR` before it).
fn is_reentry_refusal(err: &redis::RedisError) -> bool {
    err.to_string().contains("NON_REENTRANT_REACQUIRE")
}

/// Whether Redis refused for lack of an ACL permission: a `NOPERM` reply, or the error a
/// script's command gets when the user may not run it.
fn is_refusal(err: &redis::RedisError) -> bool {
    err.code() == Some("NOPERM") || err.to_string().contains("The user executing the script can't")
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.describe(), self.message)?;
        if let Some(name) = &self.lock {
            write!(f, " ({} {})", self.subject.describe(), shown_name(name))?;
        }
        // The causes' texts only in the alternate form, each once: `source()` gives them to
        // reporters. A cause whose text the line ends with already (one that repeats its
        // own source's) is not said again.
        if f.alternate() {
            let mut said = String::new();
            let mut next = std::error::Error::source(self);
            while let Some(cause) = next {
                let text = cause.to_string();
                if !said.ends_with(&text) {
                    write!(f, ": {text}")?;
                    said.push_str(": ");
                    said.push_str(&text);
                }
                next = cause.source();
            }
        }
        if let Some(hint) = &self.hint {
            write!(f, " ({hint})")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .field("lock", &self.lock.as_deref().map(shown_name).map(Shown))
            .field("subject", &self.subject)
            .field("hint", &self.hint)
            .field("connection", &self.connection)
            .field("source", &self.source)
            .finish()
    }
}

/// Text that `Debug` shows as it is (a name already quoted by [`shown_name`]).
struct Shown(String);

impl fmt::Debug for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {
    /// The failure that kept Redis from answering. redis-rs's error shows its cause's text
    /// as its own and gives that same cause as its `source()`: a walk of the chain would
    /// say it twice, so the cause is given in its place (it says all the `redis` error
    /// says; [`Error::redis_error`] still gives the `redis` error itself).
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let redis = self.source.as_ref().filter(|_| !self.quoted)?;
        let cause = std::error::Error::source(redis).filter(|cause| cause.to_string() == redis.to_string());
        Some(cause.unwrap_or(redis))
    }
}

#[cfg(test)]
mod tests;
