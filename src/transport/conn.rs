//! [`Conn`]: a command connection, with what the scripts sent on it need to know of the
//! deployment: which command carries a message to a channel's subscribers.

use std::ops::{Deref, DerefMut};

pub(crate) use crate::scripts::PubSub;

/// A connection of the command pool.
pub(crate) struct Conn {
    inner: redis::Connection,
    pubsub: PubSub,
}

impl Conn {
    pub(crate) fn new(inner: redis::Connection, pubsub: PubSub) -> Conn {
        Conn { inner, pubsub }
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
