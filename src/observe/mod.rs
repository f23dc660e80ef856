//! Seeing into a client: the event hook and the wrapper that calls it, what the client
//! counts (and the histograms it counts durations in), the `tracing` macros, the metrics it
//! exports, who the client is as it announces itself, and what an inspection reports. The
//! foundation floor, beside [`support`](crate::support)
//! ([`guide::design`](crate::guide::design#layers), "Layers").

pub(crate) mod activity;
pub(crate) mod events;
pub(crate) mod histogram;
pub(crate) mod identity;
pub(crate) mod inspection;
pub(crate) mod telemetry;
pub(crate) mod trace;
