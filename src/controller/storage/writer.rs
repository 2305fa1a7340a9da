//! The log's writer thread: appends records, fsyncs, and only then reports them durable.
//!
//! Jobs arrive over a channel in the order the loop issued them. Every append waiting when
//! the thread wakes goes into one write and one fsync (group commit); a snapshot job first
//! flushes the appends before it, then writes the snapshot file and cuts the log; a file job
//! (a runtime config update) replaces its file. Results go
//! back over a second channel, and the loop's waker (when given) is woken so the loop
//! picks them up. After a failed write or fsync nothing more is appended (the file's state
//! is unknown): every later append is reported failed.

use super::{log, snapshot_path, Completion, StorageError, Wake};
use crate::controller::state::ControllerState;
use crossbeam_channel::{Receiver, Sender};
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// Appends taken per wake-up at most (bounds one write's size and one answer batch).
const MAX_BATCH: usize = 1024;

pub(crate) enum Job {
    Append {
        index: u64,
        entry: Vec<u8>,
    },
    /// The state as of log index `index` (a copy-on-write clone), to encode and write.
    Snapshot {
        index: u64,
        state: ControllerState,
    },
    /// Replace a small file crash-safely (runtime config updates).
    WriteFile {
        id: u64,
        path: PathBuf,
        content: Vec<u8>,
    },
}

pub(crate) struct Writer {
    pub(crate) dir: PathBuf,
    pub(crate) log_path: PathBuf,
    pub(crate) file: File,
    pub(crate) jobs: Receiver<Job>,
    pub(crate) done: Sender<Completion>,
    pub(crate) waker: Option<Arc<dyn Wake>>,
    /// Why appends stopped, once they have.
    pub(crate) broken: Option<String>,
}

impl Writer {
    pub(crate) fn run(mut self) {
        while let Ok(first) = self.jobs.recv() {
            let mut batch = vec![first];
            batch.extend(self.jobs.try_iter().take(MAX_BATCH - 1));
            let mut appends: Vec<(u64, Vec<u8>)> = Vec::new();
            for job in batch {
                match job {
                    Job::Append { index, entry } => appends.push((index, entry)),
                    Job::Snapshot { index, state } => {
                        self.flush(&mut appends);
                        self.snapshot(index, &super::snapshot::encode(index, &state));
                    }
                    Job::WriteFile { id, path, content } => {
                        let result = crate::durable_file::replace_file(&path, &content)
                            .map_err(|e| format!("cannot write {}: {e}", path.display()));
                        self.send(Completion::FileWritten { id, result });
                    }
                }
            }
            self.flush(&mut appends);
            if let Some(waker) = &self.waker {
                waker.wake();
            }
        }
    }

    fn send(&self, c: Completion) {
        // The receiver is gone only when the owner shut down; nothing is waiting then.
        let _ = self.done.send(c);
    }

    /// Writes and fsyncs `appends`, then reports each durable (or each failed).
    fn flush(&mut self, appends: &mut Vec<(u64, Vec<u8>)>) {
        if appends.is_empty() {
            return;
        }
        let result = match &self.broken {
            Some(why) => Err(why.clone()),
            None => self.write_records(appends),
        };
        if let Err(why) = &result {
            if self.broken.is_none() {
                ::log::error!(
                    "controller log {}: {why}; no further changes are accepted",
                    self.log_path.display()
                );
                self.broken = Some(why.clone());
            }
        }
        for (index, entry) in appends.drain(..) {
            match &result {
                Ok(()) => self.send(Completion::Durable { index, entry }),
                Err(why) => self.send(Completion::Failed {
                    index,
                    error: why.clone(),
                }),
            }
        }
    }

    fn write_records(&mut self, appends: &[(u64, Vec<u8>)]) -> Result<(), String> {
        let mut buf = Vec::with_capacity(appends.iter().map(|(_, e)| e.len() + 16).sum());
        for (index, entry) in appends {
            log::encode_record(*index, entry, &mut buf);
        }
        self.file
            .write_all(&buf)
            .map_err(|e| format!("write failed: {e}"))?;
        self.file
            .sync_data()
            .map_err(|e| format!("fsync failed: {e}"))
    }

    fn snapshot(&mut self, index: u64, bytes: &[u8]) {
        let path = snapshot_path(&self.dir);
        let result = crate::durable_file::replace_file(&path, bytes)
            .map_err(|error| StorageError::Io {
                path: path.clone(),
                op: "write",
                error,
            })
            .and_then(|()| {
                if self.broken.is_some() {
                    return Ok(0);
                }
                // The snapshot is durable: the records it covers can go.
                let (file, kept) = log::keep_after(&self.log_path, index).inspect_err(|_| {
                    // If the rename happened the old handle writes to an unlinked file.
                    self.broken = Some(format!("cutting the log after snapshot {index} failed"));
                })?;
                self.file = file;
                Ok(kept)
            });
        self.send(Completion::Snapshot {
            index,
            result: result.map_err(|e| e.to_string()),
        });
    }
}
