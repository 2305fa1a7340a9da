//! The embedded Controller (RocketMQ 5.x, `enableControllerInNamesrv=true`, cargo feature
//! `controller`): allocates broker ids, knows each broker set's master, master epoch and
//! SyncStateSet, and elects a new master when one dies.
//!
//! ```text
//! frame --(request)--> typed request --(manager)--> 904/1005/1009/1010: answered at once
//!                                             \--> leader-only: pipeline (one FIFO)
//!     head computed on the applied state --(replicas, elect)--> response + events
//!     events --(event: Java's encoding)--> log entry --(raft: propose, persisted by the
//!     writer thread, committed)--> --(state::apply)--> state --> the answer is released
//! liveness (heartbeats, closed connections, scans) --(manager)--> elections --> notify
//! ```
//!
//! [`codes`], [`request`] and [`response`] are built without the feature too: `rmq-admin`
//! and `rmq-bench` speak to any controller (ours or Java's) with the types it parses.

pub mod codes;

#[cfg(feature = "controller")]
pub mod body;
#[cfg(feature = "controller")]
pub mod config;
#[cfg(feature = "controller")]
pub mod elect;
#[cfg(feature = "controller")]
pub mod event;
#[cfg(feature = "controller")]
pub mod lease;
#[cfg(feature = "controller")]
pub mod liveness;
#[cfg(feature = "controller")]
pub mod manager;
#[cfg(feature = "controller")]
pub mod notify;
#[cfg(feature = "controller")]
pub mod pipeline;
#[cfg(feature = "controller")]
pub mod raft;
#[cfg(feature = "controller")]
pub mod replicas;
pub mod request;
pub mod response;
#[cfg(feature = "controller")]
pub mod snapshot;
#[cfg(feature = "controller")]
pub mod state;

#[cfg(feature = "controller")]
pub use config::ControllerConfig;
#[cfg(feature = "controller")]
pub use liveness::ConnRef;
#[cfg(feature = "controller")]
pub use manager::{Controller, Reply, StartError};
#[cfg(feature = "controller")]
pub use raft::Wake;
#[cfg(feature = "controller")]
pub use response::Response;
