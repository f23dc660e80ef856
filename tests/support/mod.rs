//! Support code for the integration tests: real `redis-server` processes
//! ([`server::RedisServer`]), a fault-injecting TCP proxy ([`proxy::Proxy`]) and child
//! worker processes ([`child::Child`]). Depends only on std, `redis` and `nix`; it lives
//! in the workspace crate `redlease-testkit` (`testkit/`), which the benchmark uses too.

pub use redlease_testkit::{
    child, cluster, cluster_partition, foreign, history, partition, pki, proxy, sentinel, server, slow_disk, turns,
};
