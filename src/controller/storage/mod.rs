//! Durability for the single-node controller: an append-only event log, a whole-state
//! snapshot every N events, the log cut after each snapshot, and recovery on open.
//!
//! Layout in the store directory (`<controllerStorePath>/rmq-controller-<selfId>/`):
//! `events.log` (see [`log`]), `snapshot` (see [`snapshot`], plus the `.bak` the atomic
//! replace keeps), `controller.properties` (runtime config updates, see `config`).
//!
//! [`Storage::open`] rebuilds the state: the snapshot, then every log record after it, each
//! entry applied through the same `ControllerState::apply` the live path uses. A torn tail
//! (a crash during an append) is cut off with a warning; any other damage refuses the start
//! with the file named. Appends and snapshots then go to the writer thread (module `writer`):
//! nothing is reported durable before its fsync, and the loop never waits on the disk.
//! [`SingleNodeLog`] is this module seen through the pipeline's `Durability` trait.

pub mod log;
pub mod snapshot;
mod writer;

use super::event::decode_entry;
use super::pipeline::{Durability, NotServing};
use super::state::ControllerState;
use crossbeam_channel::{Receiver, Sender};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use writer::{Job, Writer};

pub const LOG_FILE: &str = "events.log";
pub const SNAPSHOT_FILE: &str = "snapshot";

/// How the writer thread tells the loop it has completions to pick up: a `mio::Waker` of the
/// caller's poll (tests), or the event loop's own waker (the server, which also notes that the
/// news is the controller's).
pub trait Wake: Send + Sync {
    fn wake(&self);
}

impl Wake for mio::Waker {
    fn wake(&self) {
        if let Err(e) = mio::Waker::wake(self) {
            ::log::error!("controller log writer: cannot wake the event loop: {e}");
        }
    }
}

pub fn log_path(dir: &Path) -> PathBuf {
    dir.join(LOG_FILE)
}

pub fn snapshot_path(dir: &Path) -> PathBuf {
    dir.join(SNAPSHOT_FILE)
}

/// Why the store cannot be used; every variant names the file.
#[derive(Debug)]
pub enum StorageError {
    Io {
        path: PathBuf,
        op: &'static str,
        error: std::io::Error,
    },
    Corrupt {
        path: PathBuf,
        offset: Option<u64>,
        reason: String,
    },
    /// The writer thread is gone (after shutdown).
    Stopped,
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StorageError::Io { path, op, error } => {
                write!(
                    f,
                    "controller store {}: {op} failed: {error}",
                    path.display()
                )
            }
            StorageError::Corrupt {
                path,
                offset: Some(offset),
                reason,
            } => write!(
                f,
                "controller store {} is damaged at byte {offset}: {reason}",
                path.display()
            ),
            StorageError::Corrupt { path, reason, .. } => {
                write!(
                    f,
                    "controller store {} is damaged: {reason}",
                    path.display()
                )
            }
            StorageError::Stopped => f.write_str("the controller log writer has stopped"),
        }
    }
}

impl std::error::Error for StorageError {}

/// fsync of the directory holding `path` (makes a create or rename durable).
pub(crate) fn sync_dir(path: &Path) -> Result<(), StorageError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match std::fs::File::open(dir) {
        // Not every platform can fsync a directory; where it cannot, there is nothing to do.
        Ok(d) => {
            let _ = d.sync_all();
            Ok(())
        }
        Err(error) => Err(StorageError::Io {
            path: dir.to_path_buf(),
            op: "open directory",
            error,
        }),
    }
}

/// What the writer reports back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// The entry is on disk (fsynced) under `index`.
    Durable { index: u64, entry: Vec<u8> },
    /// The entry could not be made durable; the log accepts nothing more.
    Failed { index: u64, error: String },
    /// A snapshot as of `index` was written (`Ok(records kept in the cut log)`) or not.
    Snapshot {
        index: u64,
        result: Result<usize, String>,
    },
    /// The file job `id` is done (fsynced and renamed into place) or failed.
    FileWritten { id: u64, result: Result<(), String> },
}

/// What recovery found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    pub state: ControllerState,
    /// The last index in the store (0 for a new one).
    pub last_index: u64,
    pub snapshot_index: u64,
    /// Log records replayed over the snapshot.
    pub replayed: u64,
    /// Events in those records (the snapshot cadence carries on from here).
    pub events_since_snapshot: u64,
    /// Why a torn tail was cut off, if one was.
    pub torn_tail: Option<String>,
}

pub struct Storage {
    dir: PathBuf,
    jobs: Option<Sender<Job>>,
    completions: Receiver<Completion>,
    thread: Option<JoinHandle<()>>,
    next_index: u64,
}

impl Storage {
    /// Opens (creating) the store in `dir`, recovers the state and starts the writer. The
    /// writer wakes `waker` whenever it has completions to pick up.
    pub fn open(
        dir: &Path,
        waker: Option<Arc<dyn Wake>>,
    ) -> Result<(Storage, Recovered), StorageError> {
        std::fs::create_dir_all(dir).map_err(|error| StorageError::Io {
            path: dir.to_path_buf(),
            op: "create directory",
            error,
        })?;
        for file in [log_path(dir), snapshot_path(dir)] {
            // Left by a crash during a replace; the real file is intact.
            crate::durable_file::remove_stale_temps(&file);
        }
        let (snapshot_index, mut state) = snapshot::read(&snapshot_path(dir))?.unwrap_or_default();
        let log_path = log_path(dir);
        let (file, scan) = log::open(&log_path)?;
        if let Some(why) = &scan.torn {
            ::log::warn!(
                "controller log {}: {why}; an append cut by a crash is dropped",
                log_path.display()
            );
        }
        let mut recovered = Recovered {
            state: ControllerState::new(),
            last_index: snapshot_index,
            snapshot_index,
            replayed: 0,
            events_since_snapshot: 0,
            torn_tail: scan.torn.clone(),
        };
        if let Some(first) = scan.records.iter().find(|r| r.index > snapshot_index) {
            if first.index != snapshot_index + 1 {
                return Err(StorageError::Corrupt {
                    path: log_path,
                    offset: None,
                    reason: format!(
                        "the log continues at record {} but the snapshot ends at {snapshot_index}",
                        first.index
                    ),
                });
            }
        }
        for record in scan.records.iter().filter(|r| r.index > snapshot_index) {
            let events = decode_entry(&record.entry).map_err(|e| StorageError::Corrupt {
                path: log_path.clone(),
                offset: None,
                reason: format!("record {}: {e}", record.index),
            })?;
            for event in &events {
                state.apply(event);
            }
            recovered.replayed += 1;
            recovered.events_since_snapshot += events.len() as u64;
            recovered.last_index = record.index;
        }
        recovered.state = state;
        let (job_tx, job_rx) = crossbeam_channel::unbounded();
        let (done_tx, done_rx) = crossbeam_channel::unbounded();
        let writer = Writer {
            dir: dir.to_path_buf(),
            log_path,
            file,
            jobs: job_rx,
            done: done_tx,
            waker,
            broken: None,
        };
        let thread = std::thread::Builder::new()
            .name("controller-log".into())
            .spawn(move || writer.run())
            .map_err(|error| StorageError::Io {
                path: dir.to_path_buf(),
                op: "start the log writer thread",
                error,
            })?;
        let storage = Storage {
            dir: dir.to_path_buf(),
            jobs: Some(job_tx),
            completions: done_rx,
            thread: Some(thread),
            next_index: recovered.last_index + 1,
        };
        Ok((storage, recovered))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Hands `entry` to the writer under the next index; its `Completion` follows.
    pub fn append(&mut self, entry: Vec<u8>) -> Result<u64, StorageError> {
        let index = self.next_index;
        let jobs = self.jobs.as_ref().ok_or(StorageError::Stopped)?;
        jobs.send(Job::Append { index, entry })
            .map_err(|_| StorageError::Stopped)?;
        self.next_index += 1;
        Ok(index)
    }

    /// Asks for a snapshot of `state`, which must include every entry up to `index` and
    /// nothing after it. The clone shares every broker set with the loop's copy (copy on
    /// write), so this is cheap here; the writer encodes and writes it.
    pub fn snapshot(&mut self, index: u64, state: &ControllerState) -> Result<(), StorageError> {
        let jobs = self.jobs.as_ref().ok_or(StorageError::Stopped)?;
        jobs.send(Job::Snapshot {
            index,
            state: state.clone(),
        })
        .map_err(|_| StorageError::Stopped)
    }

    /// Has the writer replace `path` by `content` (temp file, fsync, rename); a
    /// `Completion::FileWritten` with `id` follows.
    pub fn write_file(
        &mut self,
        id: u64,
        path: PathBuf,
        content: Vec<u8>,
    ) -> Result<(), StorageError> {
        let jobs = self.jobs.as_ref().ok_or(StorageError::Stopped)?;
        jobs.send(Job::WriteFile { id, path, content })
            .map_err(|_| StorageError::Stopped)
    }

    /// The next completion, if one is ready (never blocks).
    pub fn try_completion(&self) -> Option<Completion> {
        self.completions.try_recv().ok()
    }

    /// The next completion, waiting up to `timeout` (tests and shutdown).
    pub fn wait_completion(&self, timeout: Duration) -> Option<Completion> {
        self.completions.recv_timeout(timeout).ok()
    }

    /// Stops the writer after it finished every job it was given; returns their completions.
    pub fn close(mut self) -> Vec<Completion> {
        self.close_writer()
    }

    /// As [`close`](Self::close) without giving up the store (appends fail afterwards).
    pub fn close_writer(&mut self) -> Vec<Completion> {
        self.stop();
        self.completions.try_iter().collect()
    }

    fn stop(&mut self) {
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                ::log::error!("controller log writer thread panicked");
            }
        }
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The single node's durable step for the pipeline: append + fsync on the writer thread.
pub struct SingleNodeLog {
    storage: Storage,
    failed: Option<String>,
}

impl SingleNodeLog {
    pub fn new(storage: Storage) -> Self {
        SingleNodeLog {
            storage,
            failed: None,
        }
    }

    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    pub fn storage_mut(&mut self) -> &mut Storage {
        &mut self.storage
    }

    /// Records that the log failed: leader-only requests are refused from now on.
    pub fn mark_failed(&mut self, why: String) {
        if self.failed.is_none() {
            self.failed = Some(why);
        }
    }

    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }
}

impl Durability for SingleNodeLog {
    fn serving(&self) -> Result<(), NotServing> {
        match &self.failed {
            None => Ok(()),
            Some(why) => Err(NotServing::Failed(format!(
                "the controller log in {} failed ({why}); restart the name server",
                self.storage.dir().display()
            ))),
        }
    }

    fn propose(&mut self, entry: Vec<u8>) -> Result<u64, NotServing> {
        self.serving()?;
        self.storage
            .append(entry)
            .map_err(|e| NotServing::Failed(e.to_string()))
    }
}
