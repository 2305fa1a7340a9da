//! The embedded Controller (RocketMQ 5.x, `enableControllerInNamesrv=true`): allocates
//! broker ids, knows each broker set's master, master epoch and SyncStateSet, and elects a
//! new master when one dies. Built with the cargo feature `controller`.
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
//! * [`codes`]: request codes 904/1001-1013 and response codes 2000-2016.
//! * [`request`]: typed requests parsed leniently, as Java's controller does.
//! * [`response`] / [`body`]: answers as data, their frames and fastjson bodies.
//! * [`state`]: the two replicated tables and `apply(event)`; [`event`]: the six events and
//!   their log encoding.
//! * [`replicas`]: the leader-only requests as pure functions; [`elect`]: the elect policy.
//! * [`liveness`]: the heartbeat table; [`notify`]: role-change notifications (1008);
//!   [`lease`]: the write lease rocketmq-rust brokers read in 904 answers.
//! * [`pipeline`]: one write in flight, answered once committed (the `Durability` trait);
//!   [`raft`]: the Raft group (raft-rs) of one node or several, its log, recovery and
//!   writer thread; [`snapshot`]: the whole-state snapshot it stores and sends.
//! * [`config`]: the Java controller keys; [`manager`]: the object the loop drives.
//!
//! Only [`codes`], [`request`] and [`response`] are built without the feature: `rmq-admin` and
//! `rmq-bench` speak to any controller (ours or Java's), write its requests with the types
//! the controller parses, and name its answers in every build.

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
