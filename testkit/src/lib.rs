//! Support code for redlease's integration tests and benchmark: real `redis-server`
//! processes ([`server::RedisServer`]), a fault-injecting TCP proxy ([`proxy::Proxy`]),
//! child worker processes ([`child::Child`]) and histories of critical sections
//! ([`history`]), certificates for TLS servers ([`pki::Pki`]), a master with a replica (or
//! more) under three sentinels ([`sentinel::SentinelGroup`]), one whose links a test can
//! cut ([`partition::PartitionGroup`]; a cluster's: [`cluster_partition::PartitionedCluster`]) and a cluster of three masters
//! with a replica each ([`cluster::ClusterGroup`]), turns that test processes beside each
//! other take one at a time ([`turns`]), and foreign clients of Redisson's layout
//! for the interop tests ([`foreign`]: a peer written from the layout, and Redisson's own
//! scripts read from a Redisson checkout when one is named). Depends only on std, `redis`,
//! `nix` and `rcgen`.

pub mod child;
pub mod cluster;
pub mod cluster_partition;
pub mod foreign;
pub mod history;
pub mod partition;
pub mod pki;
pub mod ports;
pub mod proxy;
pub mod sentinel;
pub mod server;
pub mod slow_disk;
pub mod turns;
