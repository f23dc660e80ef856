//! [`Conn`]: a command connection, with what the scripts sent on it need to know of the
//! deployment (which command carries a message to a channel's subscribers), and which
//! master it was opened to (its pool's generation then, and whether that is still the
//! current one).

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) use crate::scripts::PubSub;

/// A connection of the command pool.
pub(crate) struct Conn {
    inner: redis::Connection,
    pubsub: PubSub,
    origin: Origin,
}

/// The master a connection was opened to: its pool, and the pool's generation then (it
/// moves when the master does), with the pool's counter to tell whether it still is.
#[derive(Clone)]
pub(crate) struct Origin {
    pub(crate) pool: u64,
    pub(crate) generation: u64,
    pub(crate) current: Arc<AtomicU64>,
}

impl Conn {
    pub(crate) fn new(inner: redis::Connection, pubsub: PubSub, origin: Origin) -> Conn {
        Conn { inner, pubsub, origin }
    }

    /// The id of the pool it belongs to.
    pub(crate) fn pool_id(&self) -> u64 {
        self.origin.pool
    }

    /// Its pool's generation when it was opened: a name for the master it goes to.
    pub(crate) fn generation(&self) -> u64 {
        self.origin.generation
    }

    /// Whether its master is still the pool's: false once the master moved (a failover
    /// was heard of, or a new connection found the master elsewhere).
    pub(crate) fn is_current(&self) -> bool {
        self.origin.current.load(Ordering::Acquire) == self.origin.generation
    }

    /// How scripts sent on this connection publish.
    pub(crate) fn pubsub(&self) -> PubSub {
        self.pubsub
    }

    /// Whether this is a connection to a cluster node (the only deployment with sharded
    /// pub/sub): a command's declared keys must share one slot there.
    pub(crate) fn in_cluster(&self) -> bool {
        self.pubsub == PubSub::Sharded
    }
}

impl Deref for Conn {
    type Target = redis::Connection;

    fn deref(&self) -> &redis::Connection {
        &self.inner
    }
}

// Through `Deref`, the redis crate's blanket impl makes a `Conn` a `ConnectionLike`.
impl DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut redis::Connection {
        &mut self.inner
    }
}
