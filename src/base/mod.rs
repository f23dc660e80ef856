//! The small pure helpers under everything: the error type, deadlines, the lease's
//! arithmetic (`span`, the watchdog's schedule, not tracing), Redisson's key names and owner
//! ids, the Lua sources, the timing wheel, the spin lock's back-off, the group lock's field
//! names and the hot path's hasher. No I/O and no threads; the pure floor, beside
//! [`durability`](crate::durability) ([`guide::design`](crate::guide::design#layers),
//! "Layers").

pub(crate) mod backoff;
pub(crate) mod clock;
pub(crate) mod error;
pub(crate) mod fast_hash;
pub(crate) mod highway;
pub(crate) mod keys;
pub(crate) mod owner;
pub(crate) mod scripts;
pub(crate) mod span;
pub(crate) mod wheel;
