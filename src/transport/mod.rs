//! Talking to Redis: the command pool, the pub/sub connection and its subscriber thread,
//! behind one seam ([`Topology`]) that answers which connection serves a key or a channel.

mod cluster;
mod conn;
mod connector;
mod net;
mod pool;
mod sentinel;
mod subscriber;
mod subscriptions;
#[cfg(not(feature = "tls"))]
#[path = "no_tls.rs"]
mod tls;
#[cfg(feature = "tls")]
mod tls;
mod topology;
mod url;

pub(crate) use conn::{Arg, Conn, Joined, Prewritten, RunId, Written};
pub(crate) use pool::{Lent, Pool};
pub(crate) use subscriber::SubscriberStats;
pub(crate) use subscriptions::{Delivery, Meaning};
pub(crate) use topology::Topology;
pub(crate) use url::redact as redact_url;
