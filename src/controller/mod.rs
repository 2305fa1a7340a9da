//! The embedded Controller (RocketMQ 5.x, `enableControllerInNamesrv=true`): allocates
//! broker ids, knows each broker set's master, master epoch and SyncStateSet, and elects a
//! new master when one dies. Built only with the cargo feature `controller`.
//!
//! ```text
//! frame --(request)--> typed request --(manager)--> 904/1005/1009/1010: answered at once
//!                                             \--> leader-only: pipeline (one FIFO)
//!     head computed on the applied state --(replicas, elect)--> response + events
//!     events --(event: Java's encoding)--> log entry --(storage: append + fsync, writer
//!     thread)--> durable --(state::apply)--> state --> the answer is released
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
//! * [`pipeline`]: one write in flight, answered once durable (the `Durability` trait is
//!   what a Raft group will implement); [`storage`]: event log, snapshots, recovery.
//! * [`config`]: the Java controller keys; [`manager`]: the object the loop drives.

pub mod body;
pub mod codes;
pub mod config;
pub mod elect;
pub mod event;
pub mod lease;
pub mod liveness;
pub mod manager;
pub mod notify;
pub mod pipeline;
pub mod replicas;
pub mod request;
pub mod response;
pub mod state;
pub mod storage;

pub use config::ControllerConfig;
pub use liveness::ConnRef;
pub use manager::{Controller, Reply, StartError};
pub use response::Response;
