//! A small blocking pool of command connections (`Mutex` + `Condvar`, as r2d2 does it).
//!
//! Every connection carries the command timeout as its read and write timeout, so no call
//! waits on Redis longer than that. A connection that saw an I/O error or a timeout is
//! dropped instead of going back: after a timeout its reply may still arrive and would be
//! read by the next command.

use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, ErrorKind, Result};

pub(crate) struct Pool {
    client: redis::Client,
    size: usize,
    connect_timeout: Duration,
    command_timeout: Duration,
    state: Mutex<State>,
    returned: Condvar,
}

struct State {
    idle: Vec<redis::Connection>,
    /// Connections in existence: idle, lent out, or being opened.
    open: usize,
}

impl Pool {
    pub(crate) fn new(
        client: redis::Client,
        size: usize,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> Pool {
        Pool {
            client,
            size,
            connect_timeout,
            command_timeout,
            state: Mutex::new(State { idle: Vec::with_capacity(size), open: 0 }),
            returned: Condvar::new(),
        }
    }

    /// Runs `op` on a pooled connection. When a connection that had been idle turns out to
    /// be dead (the server restarted or killed it while it sat in the pool), every idle
    /// connection is discarded and `op` runs once more on a new one: such a connection
    /// failed before Redis read the command. `what` names the operation in errors.
    pub(crate) fn run<T>(
        &self,
        what: &str,
        mut op: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let (mut conn, reused) = self.checkout()?;
        match op(&mut conn) {
            Ok(value) => {
                self.checkin(conn);
                Ok(value)
            }
            Err(err) if reused && err.is_connection_dropped() && !err.is_timeout() => {
                self.discard(conn);
                self.discard_idle();
                let mut fresh = self.open_new()?;
                let result = op(&mut fresh);
                self.finish(fresh, result, what)
            }
            Err(err) => self.finish(conn, Err(err), what),
        }
    }

    fn finish<T>(&self, conn: redis::Connection, result: redis::RedisResult<T>, what: &str) -> Result<T> {
        match result {
            Ok(value) => {
                self.checkin(conn);
                Ok(value)
            }
            Err(err) => {
                if is_connection_fault(&err) {
                    self.discard(conn);
                } else {
                    self.checkin(conn);
                }
                Err(Error::from_redis(err, what, self.command_timeout))
            }
        }
    }

    /// An idle connection (reused = true), or a new one while fewer than `size` are open,
    /// or the first one returned within the connect timeout.
    fn checkout(&self) -> Result<(redis::Connection, bool)> {
        let deadline = Instant::now() + self.connect_timeout;
        let mut state = self.state.lock();
        loop {
            if let Some(conn) = state.idle.pop() {
                return Ok((conn, true));
            }
            if state.open < self.size {
                state.open += 1;
                drop(state);
                return self.connect().map(|conn| (conn, false)).inspect_err(|_| self.forget_one());
            }
            if self.returned.wait_until(&mut state, deadline).timed_out() && state.idle.is_empty() {
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "no pooled connection became free within the connect timeout ({:?}); all {} are busy",
                        self.connect_timeout, self.size
                    ),
                ));
            }
        }
    }

    /// A new connection counted against the pool size (the caller just gave one up).
    fn open_new(&self) -> Result<redis::Connection> {
        self.state.lock().open += 1;
        self.connect().inspect_err(|_| self.forget_one())
    }

    /// Opens a connection outside the pool's accounting (also used for the build-time ping).
    pub(crate) fn connect(&self) -> Result<redis::Connection> {
        let conn = self.client.get_connection_with_timeout(self.connect_timeout).map_err(|err| {
            if err.is_timeout() {
                Error::new(
                    ErrorKind::Timeout,
                    format!("no connection within the connect timeout ({:?})", self.connect_timeout),
                )
                .connection()
            } else {
                Error::from_redis(err, "connecting", self.command_timeout).connection()
            }
        })?;
        let timeout = Some(self.command_timeout);
        conn.set_read_timeout(timeout)
            .and_then(|()| conn.set_write_timeout(timeout))
            .map_err(|err| Error::from_redis(err, "configuring a connection", self.command_timeout).connection())?;
        Ok(conn)
    }

    fn checkin(&self, conn: redis::Connection) {
        self.state.lock().idle.push(conn);
        self.returned.notify_one();
    }

    fn discard(&self, conn: redis::Connection) {
        drop(conn);
        self.forget_one();
    }

    fn forget_one(&self) {
        let mut state = self.state.lock();
        state.open = state.open.saturating_sub(1);
        drop(state);
        self.returned.notify_one();
    }

    fn discard_idle(&self) {
        let mut state = self.state.lock();
        let stale = std::mem::take(&mut state.idle);
        state.open = state.open.saturating_sub(stale.len());
        drop(state);
        drop(stale);
        self.returned.notify_all();
    }

    /// Closes every idle connection (at shutdown).
    pub(crate) fn close_idle(&self) {
        self.discard_idle();
    }
}

/// Whether the connection can no longer be trusted to be in step with the server.
fn is_connection_fault(err: &redis::RedisError) -> bool {
    err.is_io_error() || err.is_connection_dropped() || err.is_timeout() || err.is_unrecoverable_error()
}
