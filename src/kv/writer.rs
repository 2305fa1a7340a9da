//! The durable writer: the thread that makes KV changes durable, all those queued when it wakes
//! in one write of the file (group commit), and runs the config file's writes in order.

use super::{file, Change, Table, Text};
use crate::durable_file::{remove_stale_temps, replace_file};
use bytes::Bytes;
use crossbeam_channel::{unbounded, Receiver, Sender, TryRecvError};
use std::io;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

/// Jobs taken per wake-up at most (bounds one group and one answer batch).
const MAX_BATCH: usize = 1024;

/// A small file write other than the KV file's; the error text names what failed.
pub type FileWrite = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// What the loop asks of the writer; `id`s are the caller's, echoed in [`Done`].
pub enum Job {
    Change {
        id: u64,
        change: Change,
    },
    File {
        id: u64,
        write: FileWrite,
    },
    /// Bodies the loop no longer needs, freed here (freeing megabytes can take milliseconds).
    Discard(Vec<Bytes>),
}

pub struct Commit {
    pub changes: Vec<(u64, Change)>,
    /// The new bodies of the namespaces the group changed, or why it failed.
    pub result: Result<Vec<(Text, Bytes)>, String>,
}

/// What the writer reports, in the order of the jobs.
pub enum Done {
    Changes(Commit),
    File { id: u64, result: Result<(), String> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterGone;

/// The loop's end of the writer thread.
pub struct DurableWriter {
    jobs: Sender<Job>,
    done: Receiver<Done>,
}

impl DurableWriter {
    /// Never blocks; gives the job back if the thread has ended.
    pub fn submit(&self, job: Job) -> Result<(), Job> {
        self.jobs.send(job).map_err(|e| e.0)
    }

    /// `Err` once the thread has ended with nothing left to report (only a bug ends it early).
    pub fn try_done(&self) -> Result<Option<Done>, WriterGone> {
        match self.done.try_recv() {
            Ok(done) => Ok(Some(done)),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => Err(WriterGone),
        }
    }
}

/// Starts the writer for the KV file at `path` holding `table`; `wake` follows each result.
pub(super) fn spawn_writer(
    name: &str,
    path: &Path,
    table: Table,
    wake: Box<dyn Fn() + Send>,
) -> io::Result<(DurableWriter, JoinHandle<()>)> {
    let (jobs_tx, jobs) = unbounded();
    let (done, done_rx) = unbounded();
    remove_stale_temps(path);
    let writer = Writer {
        path: path.to_path_buf(),
        mirror: table,
        jobs,
        done,
        wake,
    };
    let thread = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || writer.run())?;
    let writer = DurableWriter {
        jobs: jobs_tx,
        done: done_rx,
    };
    Ok((writer, thread))
}

struct Writer {
    path: PathBuf,
    /// The table as the file holds it once the queued changes are written.
    mirror: Table,
    jobs: Receiver<Job>,
    done: Sender<Done>,
    wake: Box<dyn Fn() + Send>,
}

impl Writer {
    fn run(mut self) {
        while let Ok(first) = self.jobs.recv() {
            let mut group = Vec::new();
            let more: Vec<Job> = self.jobs.try_iter().take(MAX_BATCH - 1).collect();
            for job in std::iter::once(first).chain(more) {
                match job {
                    Job::Change { id, change } => group.push((id, change)),
                    Job::File { id, write } => {
                        // Jobs keep their order: the changes before this one go first.
                        self.commit(std::mem::take(&mut group));
                        let result = write();
                        self.send(Done::File { id, result });
                    }
                    Job::Discard(bodies) => drop(bodies),
                }
            }
            self.commit(group);
        }
    }

    fn send(&self, done: Done) {
        // The receiver is gone only when the server shut down; nobody is waiting then.
        if self.done.send(done).is_ok() {
            (self.wake)();
        }
    }

    fn commit(&mut self, changes: Vec<(u64, Change)>) {
        if changes.is_empty() {
            return;
        }
        let result = self.write_group(&changes).map_err(|e| {
            let error = format!("cannot write {}: {e}", self.path.display());
            log::error!(
                "KV config not written ({} change(s)): {error}",
                changes.len()
            );
            error
        });
        self.send(Done::Changes(Commit { changes, result }));
    }

    fn write_group(&mut self, group: &[(u64, Change)]) -> io::Result<Vec<(Text, Bytes)>> {
        let mut touched: Vec<Text> = group.iter().map(|(_, c)| c.namespace.clone()).collect();
        touched.sort_unstable();
        touched.dedup();
        // Re-encoding a namespace costs as much as copying it, so a copy is the undo.
        let before: Vec<_> = touched
            .iter()
            .map(|n| self.mirror.get(n).cloned())
            .collect();
        for (_, change) in group {
            change.apply_to(&mut self.mirror);
        }
        let mut new_bodies = Vec::with_capacity(touched.len());
        for namespace in &touched {
            if let Some(ns) = self.mirror.get_mut(namespace) {
                ns.body = file::encode_body(&ns.entries);
                new_bodies.push((namespace.clone(), ns.body.clone()));
            }
        }
        if let Err(e) = replace_file(&self.path, &file::encode_file(&self.mirror)) {
            for (namespace, previous) in touched.into_iter().zip(before) {
                match previous {
                    Some(ns) => self.mirror.insert(namespace, ns),
                    None => self.mirror.remove(&namespace),
                };
            }
            return Err(e);
        }
        Ok(new_bodies)
    }
}
