//! The embedded Controller (RocketMQ 5.x, `enableControllerInNamesrv=true`, cargo feature
//! `controller`): allocates broker ids, knows each broker set's master, master epoch and
//! SyncStateSet, and elects a new master when one dies. The request flow and the module
//! table are in docs/controller.md ("What runs", "Modules").
//!
//! [`codes`], [`request`] and [`response`] are built without the feature too: `rmq-admin`
//! and `rmq-bench` speak to any controller (ours or Java's) with the types it parses; so is
//! [`config`], whose keys the name server's config accepts in every build.

pub mod codes;

#[cfg(feature = "controller")]
pub mod body;
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
pub use manager::{Controller, Reply, Scan, StartError, ELECTION_RESULTS, SCAN_STEPS_PER_TURN};
#[cfg(feature = "controller")]
pub use raft::Wake;
#[cfg(feature = "controller")]
pub use response::Response;
