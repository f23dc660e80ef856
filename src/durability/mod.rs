//! What a client knows of the servers behind a grant, and what that makes of it: a
//! master's replicas (`replica_view`, for `ReplicaAcks`) and its append-only file
//! (`disk_view`, for `SyncMode`). Pure rules, no I/O (`engine::replicas` asks the servers);
//! the pure floor, beside [`base`](crate::base)
//! ([`guide::design`](crate::guide::design#layers), "Layers").

pub(crate) mod disk_view;
pub(crate) mod replica_view;
