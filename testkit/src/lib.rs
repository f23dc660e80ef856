//! Support code for redlease's integration tests and benchmark: real `redis-server`
//! processes ([`server::RedisServer`]), a fault-injecting TCP proxy ([`proxy::Proxy`]),
//! child worker processes ([`child::Child`]) and histories of critical sections
//! ([`history`]). Depends only on std, `redis` and `nix`.

pub mod child;
pub mod history;
pub mod proxy;
pub mod server;
