//! The controller as a Raft group (issue 16).
//!
//! * [`logger`]: raft-rs's slog output forwarded to `log`.

pub mod logger;
