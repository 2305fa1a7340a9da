//! The controller as a Raft group (issue 16).
//!
//! * [`logger`]: raft-rs's slog output forwarded to `log`.
//! * [`storage`]: raft-rs's `Storage` in memory, its files, the writer thread.

pub mod logger;
pub mod storage;
