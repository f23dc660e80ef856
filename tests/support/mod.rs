//! Support code for the integration tests: real `redis-server` processes
//! ([`server::RedisServer`]), a fault-injecting TCP proxy ([`proxy::Proxy`]) and child
//! worker processes ([`child::Child`]). Depends only on std, `redis` and `nix`.
#![allow(dead_code)]

pub mod child;
pub mod history;
pub mod proxy;
pub mod server;
