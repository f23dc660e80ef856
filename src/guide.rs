//! The documents of record, published with the crate so that they read on docs.rs as in the
//! repository's `docs/`: how redlease is built and why, what it promises under which faults
//! (measured), how to deploy it, how to operate it, what it costs, and its command line. Nothing to call here.

#[doc = include_str!("../docs/design.md")]
pub mod design {}

#[doc = include_str!("../docs/guarantees.md")]
pub mod guarantees {}

#[doc = include_str!("../docs/deployment.md")]
pub mod deployment {}

#[doc = include_str!("../docs/performance.md")]
pub mod performance {}

#[doc = include_str!("../docs/cli.md")]
pub mod cli {}

#[doc = include_str!("../docs/operating.md")]
pub mod operating {}
