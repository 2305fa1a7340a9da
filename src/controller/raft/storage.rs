//! The Raft group's storage: raft-rs's [`Storage`] over in-memory entries, and the files that
//! make them durable (`raft.log`, `raft.snapshot`: docs/controller.md, "Storage").
//!
//! The loop never touches the disk: every change to [`RaftStore`] is also handed, in order,
//! to the [`Writer`] as a [`Job`]; it batches them into one write and at most one fsync (when
//! raft-rs's `must_sync` asks), then reports each `Ready` persisted.
//!
//! A log append that fails (a full disk: ENOSPC, a file-size limit: EFBIG) is cut back to the
//! last whole record and kept: the writer reports the log [stalled](Completion::Stalled) and
//! tries again every [`RETRY_MS`] until the bytes fit. An fsync failure or a snapshot that
//! cannot be written stops the writer for good.

// protobuf 2 messages (with their unknown-field and size caches) are built field by field.
#![allow(clippy::field_reassign_with_default)]

use super::records::{self, corrupt, StorageError};
use crate::controller::snapshot;
use crate::controller::state::ControllerState;
use bytes::Bytes;
use crossbeam_channel::{Receiver, Sender};
use protobuf::Message as _;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, Storage};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

const SNAPSHOT_MAGIC: &[u8; 8] = b"RMQCRSN1";
const KIND_ENTRY: u8 = 1;
const KIND_HARD_STATE: u8 = 2;
const MAX_BATCH: usize = 1024;
/// How often a stalled writer tries its append again.
pub const RETRY_MS: u64 = 500;

/// How the writer thread tells the loop it has completions to pick up.
pub trait Wake: Send + Sync {
    fn wake(&self);
}

/// What raft-rs reads; only the loop thread touches it.
pub struct RaftStore {
    hard_state: HardState,
    conf_state: ConfState,
    /// Index and term of the last snapshot (0, 0 before the first).
    snapshot_meta: SnapshotMetadata,
    /// Its data, as sent to a follower: read from the file or the leader, or encoded by the
    /// writer (None until it is; a group of one keeps none).
    snapshot_data: Option<Bytes>,
    shares_snapshots: bool,
    /// Index and term of the entry before `entries[0]`.
    offset: (u64, u64),
    entries: Vec<Entry>,
}

impl RaftStore {
    pub fn hard_state(&self) -> &HardState {
        &self.hard_state
    }

    pub fn snapshot_index(&self) -> u64 {
        self.snapshot_meta.index
    }

    fn last(&self) -> u64 {
        self.offset.0 + self.entries.len() as u64
    }

    pub fn set_hard_state(&mut self, hs: HardState) {
        self.hard_state = hs;
    }

    /// Appends `ents`, replacing any entries from the first one's index on.
    pub fn append(&mut self, ents: &[Entry]) -> Result<(), String> {
        let Some(first) = ents.first() else {
            return Ok(());
        };
        if first.index <= self.offset.0 || first.index > self.last() + 1 {
            return Err(format!(
                "entries from {} do not follow the log (snapshot {}, last {})",
                first.index,
                self.snapshot_meta.index,
                self.last()
            ));
        }
        let keep = (first.index - self.offset.0 - 1) as usize;
        self.entries.truncate(keep);
        self.entries.extend_from_slice(ents);
        Ok(())
    }

    /// Replaces everything by a snapshot received from the leader (or read at start); returns
    /// the previous snapshot's data (tens of MB, to be freed off the loop).
    pub fn apply_snapshot(&mut self, meta: SnapshotMetadata, data: Bytes) -> Option<Bytes> {
        self.hard_state.commit = self.hard_state.commit.max(meta.index);
        self.hard_state.term = self.hard_state.term.max(meta.term);
        self.conf_state = meta.get_conf_state().clone();
        self.offset = (meta.index, meta.term);
        self.snapshot_meta = meta;
        self.entries.clear();
        let data = self.shares_snapshots.then_some(data);
        std::mem::replace(&mut self.snapshot_data, data)
    }

    /// The data of the snapshot at `index`, once the writer encoded it.
    pub fn set_snapshot_data(&mut self, index: u64, data: Bytes) {
        if self.shares_snapshots && index == self.snapshot_meta.index {
            self.snapshot_data = Some(data);
        }
    }

    /// A local snapshot at the applied `index`: the entries it covers are dropped. Returns its
    /// metadata and the previous snapshot's data (to be freed off the loop).
    pub fn compact(&mut self, index: u64) -> Result<(SnapshotMetadata, Option<Bytes>), String> {
        if index <= self.snapshot_meta.index || index > self.last() {
            return Err(format!(
                "snapshot at {index} outside the log (snapshot {}, last {})",
                self.snapshot_meta.index,
                self.last()
            ));
        }
        let term = self.term(index).map_err(|e| e.to_string())?;
        let mut meta = SnapshotMetadata::default();
        meta.index = index;
        meta.term = term;
        meta.set_conf_state(self.conf_state.clone());
        self.forget_to(index, term);
        self.snapshot_meta = meta.clone();
        Ok((meta, self.snapshot_data.take()))
    }

    /// A group of one drops the entries it applied from memory (the file keeps them).
    pub fn forget_applied(&mut self, index: u64) {
        if let Ok(term) = self.term(index) {
            self.forget_to(index, term);
        }
    }

    fn forget_to(&mut self, index: u64, term: u64) {
        if index > self.offset.0 && index <= self.last() {
            self.entries.drain(..(index - self.offset.0) as usize);
            self.offset = (index, term);
        }
    }

    pub fn entries_after_snapshot(&self) -> &[Entry] {
        &self.entries
    }
}

fn unavailable() -> raft::Error {
    raft::Error::Store(raft::StorageError::Unavailable)
}

impl Storage for RaftStore {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(
            self.hard_state.clone(),
            self.conf_state.clone(),
        ))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low <= self.offset.0 {
            return Err(raft::Error::Store(raft::StorageError::Compacted));
        }
        if high > self.last() + 1 || low > high {
            return Err(unavailable());
        }
        let offset = self.offset.0 + 1;
        let mut ents = self.entries[(low - offset) as usize..(high - offset) as usize].to_vec();
        raft::util::limit_size(&mut ents, max_size.into());
        Ok(ents)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        if idx == self.offset.0 {
            return Ok(self.offset.1);
        }
        if idx < self.offset.0 {
            return Err(raft::Error::Store(raft::StorageError::Compacted));
        }
        let offset = self.offset.0 + 1;
        match self.entries.get((idx - offset) as usize) {
            Some(e) => Ok(e.term),
            None => Err(unavailable()),
        }
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.offset.0 + 1)
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last())
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        if self.snapshot_meta.index < request_index || self.snapshot_meta.index == 0 {
            return Err(raft::Error::Store(
                raft::StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        // Raft asks again at the follower's next heartbeat answer.
        let Some(data) = &self.snapshot_data else {
            return Err(raft::Error::Store(
                raft::StorageError::SnapshotTemporarilyUnavailable,
            ));
        };
        let mut snap = Snapshot::default();
        snap.data = data.clone();
        snap.set_metadata(self.snapshot_meta.clone());
        Ok(snap)
    }
}

pub fn log_path(dir: &Path) -> PathBuf {
    dir.join("raft.log")
}

pub fn snapshot_path(dir: &Path) -> PathBuf {
    dir.join("raft.snapshot")
}

pub fn encode_snapshot_file(snap: &Snapshot) -> Vec<u8> {
    let body = snap.write_to_bytes().unwrap_or_default();
    let mut out = Vec::with_capacity(12 + body.len());
    out.extend_from_slice(SNAPSHOT_MAGIC);
    out.extend_from_slice(&crate::checksum::crc32(&body).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

type SnapshotRead = (SnapshotMetadata, Bytes, ControllerState);

fn read_snapshot(path: &Path) -> Result<Option<SnapshotRead>, StorageError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(records::io(path, "read")(error)),
    };
    if bytes.len() < 12 || &bytes[..8] != SNAPSHOT_MAGIC {
        return Err(corrupt(path, None, "not a controller Raft snapshot".into()));
    }
    let crc = u32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if crate::checksum::crc32(&bytes[12..]) != crc {
        return Err(corrupt(
            path,
            None,
            "the snapshot fails its checksum".into(),
        ));
    }
    let mut snap = Snapshot::parse_from_bytes(&bytes[12..])
        .map_err(|e| corrupt(path, None, format!("the snapshot does not decode: {e}")))?;
    let (index, state) = snapshot::decode(&snap.data)
        .map_err(|e| corrupt(path, None, format!("the controller state in it: {e}")))?;
    if index != snap.get_metadata().index {
        return Err(corrupt(
            path,
            None,
            format!(
                "the state is as of {index} but the snapshot says {}",
                snap.get_metadata().index
            ),
        ));
    }
    let data = std::mem::take(&mut snap.data);
    Ok(Some((snap.take_metadata(), data, state)))
}

/// Opens (creating) the store in `dir`: the snapshot, the log replayed over it, the state as
/// of the snapshot, the log's append handle and next sequence number. A group of one keeps no
/// snapshot data (it has no follower to send it to).
pub fn recover(
    dir: &Path,
    voters: &[u64],
) -> Result<(RaftStore, ControllerState, File, u64), StorageError> {
    std::fs::create_dir_all(dir).map_err(records::io(dir, "create directory"))?;
    let _ = std::fs::remove_file(crate::durable_file::sibling(&log_path(dir), ".tmp"));
    // Left by a crash during a replace; the real file is intact.
    crate::durable_file::remove_stale_temps(&snapshot_path(dir));
    let mut conf_state = ConfState::default();
    conf_state.voters = voters.to_vec();
    let mut store = RaftStore {
        hard_state: HardState::default(),
        conf_state,
        snapshot_meta: SnapshotMetadata::default(),
        offset: (0, 0),
        snapshot_data: None,
        shares_snapshots: voters.len() > 1,
        entries: Vec::new(),
    };
    let mut state = ControllerState::default();
    if let Some((meta, data, read)) = read_snapshot(&snapshot_path(dir))? {
        store.apply_snapshot(meta, data);
        state = read;
    }
    let path = log_path(dir);
    let (file, scan) = records::open(&path)?;
    if let Some(why) = &scan.torn {
        log::warn!(
            "controller Raft log {}: {why}; an append cut by a crash is dropped",
            path.display()
        );
    }
    let next_seq = scan.records.last().map_or(1, |r| r.seq + 1);
    for record in &scan.records {
        replay(&mut store, &path, record)?;
    }
    if store.hard_state.commit < store.snapshot_meta.index {
        store.hard_state.commit = store.snapshot_meta.index;
    }
    // A commit index past the log (its entries were cut as a torn tail) would make raft-rs
    // panic; the leader tells this node the commit index again.
    store.hard_state.commit = store.hard_state.commit.min(store.last());
    Ok((store, state, file, next_seq))
}

fn replay(
    store: &mut RaftStore,
    path: &Path,
    record: &records::Record,
) -> Result<(), StorageError> {
    let bad = |why: String| corrupt(path, None, format!("record {}: {why}", record.seq));
    let Some((&kind, body)) = record.item.split_first() else {
        return Err(bad("empty".into()));
    };
    match kind {
        KIND_ENTRY => {
            let entry = Entry::parse_from_bytes(body).map_err(|e| bad(e.to_string()))?;
            if entry.index <= store.snapshot_meta.index {
                return Ok(()); // covered by the snapshot (the log is cut after it)
            }
            store.append(std::slice::from_ref(&entry)).map_err(bad)
        }
        KIND_HARD_STATE => {
            store.hard_state = HardState::parse_from_bytes(body).map_err(|e| bad(e.to_string()))?;
            Ok(())
        }
        other => Err(bad(format!("unknown kind {other}"))),
    }
}

/// A change to make durable, in the order the loop made it.
pub enum Job {
    Persist {
        number: u64,
        entries: Vec<Entry>,
        hard_state: Option<HardState>,
        /// A snapshot from the leader: written first, then the log restarts after it.
        snapshot: Option<Snapshot>,
        sync: bool,
    },
    /// A local snapshot: written, then the log rewritten to `keep` + `hard_state`.
    Compact {
        meta: SnapshotMetadata,
        state: ControllerState,
        keep: Vec<Entry>,
        hard_state: HardState,
    },
    /// Replace a small file crash-safely (runtime config updates, 1009).
    WriteFile {
        id: u64,
        path: PathBuf,
        content: Vec<u8>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// Every `Ready` up to `number` is on disk, or (failed) nothing more is.
    Persisted {
        number: u64,
    },
    Failed {
        number: u64,
        error: String,
    },
    /// An append failed and was cut back: nothing more is persisted until a retry succeeds
    /// (then `Persisted` follows). Reported once per stall.
    Stalled {
        error: String,
    },
    FileWritten {
        id: u64,
        result: Result<(), String>,
    },
    /// The data of the local snapshot at `index`, encoded (written or not).
    SnapshotData {
        index: u64,
        data: Bytes,
    },
}

pub struct Writer {
    dir: PathBuf,
    file: File,
    /// The log's length up to its last whole record (where a failed append is cut back to).
    len: u64,
    next_seq: u64,
    buf: Vec<u8>,
    needs_sync: bool,
    /// `Ready` numbers written but not yet reported.
    written: Option<u64>,
    broken: Option<String>,
    /// Why the buffered append does not fit yet (it is retried).
    stalled: Option<String>,
    done: Sender<Completion>,
    /// Tests: the next appends fail with this OS error after writing half their bytes.
    #[cfg(test)]
    fail_appends: Option<i32>,
}

/// Why an append did not happen: worth a retry (it was cut back), or not.
enum WriteError {
    Retry(String),
    Fatal(String),
}

impl Writer {
    pub fn run_batch(&mut self, jobs: impl IntoIterator<Item = Job>) {
        for job in jobs {
            match job {
                Job::Persist {
                    number,
                    entries,
                    hard_state,
                    snapshot,
                    sync,
                } => {
                    if let Some(snap) = snapshot {
                        self.flush();
                        // The snapshot replaces the log, what did not fit yet included.
                        self.buf.clear();
                        let hs = hard_state.clone().unwrap_or_default();
                        let file = encode_snapshot_file(&snap);
                        if let Err(WriteError::Retry(e) | WriteError::Fatal(e)) =
                            self.install_snapshot(&file, &[], &hs)
                        {
                            // The buffered entries follow the snapshot: no retry without it.
                            self.break_with(e);
                        }
                    }
                    for e in &entries {
                        self.next_seq = push_item(self.next_seq, KIND_ENTRY, e, &mut self.buf);
                    }
                    if let Some(hs) = &hard_state {
                        self.next_seq =
                            push_item(self.next_seq, KIND_HARD_STATE, hs, &mut self.buf);
                    }
                    self.needs_sync |= sync;
                    self.written = Some(number);
                }
                Job::Compact {
                    meta,
                    state,
                    keep,
                    hard_state,
                } => {
                    self.flush();
                    let index = meta.index;
                    let snap = snapshot_of(meta, &state);
                    let data = snap.data.clone();
                    let _ = self.done.send(Completion::SnapshotData { index, data });
                    if self.broken.is_some() || self.stalled.is_some() {
                        // The log on disk keeps every entry: a later snapshot cuts it.
                        continue;
                    }
                    let file = encode_snapshot_file(&snap);
                    match self.install_snapshot(&file, &keep, &hard_state) {
                        Ok(()) => log::info!("controller Raft: snapshot at index {index} written; log cut to {} entries", keep.len()),
                        Err(WriteError::Retry(e)) => log::warn!("controller Raft: snapshot at index {index} not written ({e}); the log keeps its entries until the next one"),
                        Err(WriteError::Fatal(e)) => self.break_with(format!("snapshot at index {index}: {e}")),
                    }
                }
                Job::WriteFile { id, path, content } => {
                    let result = crate::durable_file::replace_file(&path, &content)
                        .map_err(|e| format!("cannot write {}: {e}", path.display()));
                    let _ = self.done.send(Completion::FileWritten { id, result });
                }
            }
        }
        self.flush();
    }

    fn break_with(&mut self, why: String) {
        if self.broken.is_none() {
            log::error!(
                "controller Raft log in {}: {why}; nothing more is persisted",
                self.dir.display()
            );
            self.broken = Some(why);
        }
    }

    fn flush(&mut self) {
        let Some(number) = self.written else {
            return;
        };
        let result = match &self.broken {
            Some(why) => Err(WriteError::Fatal(why.clone())),
            None => self.write_buffered(),
        };
        let completion = match result {
            Ok(()) => {
                if let Some(why) = self.stalled.take() {
                    log::warn!(
                        "controller Raft log in {}: written again after failing ({why})",
                        self.dir.display()
                    );
                }
                Completion::Persisted { number }
            }
            Err(WriteError::Retry(error)) => {
                if self.stalled.replace(error.clone()).is_none() {
                    log::error!("controller Raft log: {error}; retried every {RETRY_MS} ms, changes are refused meanwhile");
                    let _ = self.done.send(Completion::Stalled { error });
                }
                return; // the bytes stay buffered for the retry
            }
            Err(WriteError::Fatal(error)) => {
                self.break_with(error.clone());
                Completion::Failed { number, error }
            }
        };
        self.buf.clear();
        self.written = None;
        let _ = self.done.send(completion);
    }

    /// Appends the buffer; a failed append is cut back to the last whole record.
    fn write_buffered(&mut self) -> Result<(), WriteError> {
        let path = log_path(&self.dir);
        if let Err(e) = self.append_buffer() {
            let cut = self.file.set_len(self.len);
            return Err(match cut {
                Ok(()) => WriteError::Retry(format!("{}: write failed: {e}", path.display())),
                Err(cut) => WriteError::Fatal(format!(
                    "{}: write failed: {e}; cutting the partial record failed: {cut}",
                    path.display()
                )),
            });
        }
        self.len += self.buf.len() as u64;
        if std::mem::take(&mut self.needs_sync) {
            self.file
                .sync_data()
                .map_err(|e| WriteError::Fatal(format!("{}: fsync failed: {e}", path.display())))?;
        }
        Ok(())
    }

    fn append_buffer(&mut self) -> std::io::Result<()> {
        #[cfg(test)]
        if let Some(errno) = self.fail_appends {
            self.file.write_all(&self.buf[..self.buf.len() / 2])?;
            return Err(std::io::Error::from_raw_os_error(errno));
        }
        self.file.write_all(&self.buf)
    }

    /// Writes the snapshot file, then replaces the log by `keep` + `hard_state`. Until the
    /// rename the old log stands (a failure is worth a retry); after it, it does not.
    fn install_snapshot(
        &mut self,
        snapshot_file: &[u8],
        keep: &[Entry],
        hard_state: &HardState,
    ) -> Result<(), WriteError> {
        let snap_path = snapshot_path(&self.dir);
        crate::durable_file::replace_file(&snap_path, snapshot_file)
            .map_err(|e| WriteError::Retry(format!("cannot write {}: {e}", snap_path.display())))?;
        let path = log_path(&self.dir);
        let mut out = records::MAGIC.to_vec();
        let mut seq = 1;
        for e in keep {
            seq = push_item(seq, KIND_ENTRY, e, &mut out);
        }
        seq = push_item(seq, KIND_HARD_STATE, hard_state, &mut out);
        let tmp = crate::durable_file::sibling(&path, ".tmp");
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(&out)?;
            f.sync_all()
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_file(&tmp);
            return Err(WriteError::Retry(format!(
                "cannot write {}: {e}",
                tmp.display()
            )));
        }
        let swap = || -> std::io::Result<File> {
            std::fs::rename(&tmp, &path)?;
            std::fs::OpenOptions::new().append(true).open(&path)
        };
        self.file = swap()
            .map_err(|e| WriteError::Fatal(format!("cannot replace {}: {e}", path.display())))?;
        self.len = out.len() as u64;
        crate::durable_file::sync_dir(&self.dir)
            .map_err(|e| WriteError::Fatal(format!("fsync {}: {e}", self.dir.display())))?;
        self.next_seq = seq;
        Ok(())
    }
}

/// Appends record `seq` holding `kind` and `msg`; returns the next sequence number.
fn push_item(seq: u64, kind: u8, msg: &impl protobuf::Message, out: &mut Vec<u8>) -> u64 {
    let mut item = vec![kind];
    item.extend(msg.write_to_bytes().unwrap_or_default());
    records::encode_record(seq, &item, out);
    seq + 1
}

fn snapshot_of(meta: SnapshotMetadata, state: &ControllerState) -> Snapshot {
    let mut snap = Snapshot::default();
    snap.data = snapshot::encode(meta.index, state).into();
    snap.set_metadata(meta);
    snap
}

pub enum Persistence {
    Thread(Option<Arc<dyn Wake>>),
    /// On the caller's thread in [`RaftDisk::run_manual`] (deterministic tests).
    Manual,
}

pub struct RaftDisk {
    jobs: Option<Sender<Job>>,
    completions: Receiver<Completion>,
    thread: Option<JoinHandle<()>>,
    manual: Option<(Writer, Receiver<Job>)>,
}

impl RaftDisk {
    pub fn start(
        dir: &Path,
        file: File,
        next_seq: u64,
        persistence: Persistence,
    ) -> Result<RaftDisk, StorageError> {
        let (job_tx, job_rx) = crossbeam_channel::unbounded();
        let (done_tx, done_rx) = crossbeam_channel::unbounded();
        let len = file
            .metadata()
            .map_err(records::io(&log_path(dir), "stat"))?
            .len();
        let writer = Writer {
            dir: dir.to_path_buf(),
            file,
            len,
            next_seq,
            buf: Vec::new(),
            needs_sync: false,
            written: None,
            broken: None,
            stalled: None,
            done: done_tx,
            #[cfg(test)]
            fail_appends: None,
        };
        let (thread, manual) = match persistence {
            Persistence::Manual => (None, Some((writer, job_rx))),
            Persistence::Thread(waker) => {
                let thread = std::thread::Builder::new()
                    .name("controller-raft-log".into())
                    .spawn(move || run_thread(writer, job_rx, waker))
                    .map_err(records::io(dir, "start the Raft log writer thread"))?;
                (Some(thread), None)
            }
        };
        Ok(RaftDisk {
            jobs: Some(job_tx),
            completions: done_rx,
            thread,
            manual,
        })
    }

    pub fn send(&self, job: Job) -> Result<(), StorageError> {
        let jobs = self.jobs.as_ref().ok_or(StorageError::Stopped)?;
        jobs.send(job).map_err(|_| StorageError::Stopped)
    }

    pub fn try_completion(&self) -> Option<Completion> {
        self.completions.try_recv().ok()
    }

    pub fn wait_completion(&self, timeout: std::time::Duration) -> Option<Completion> {
        self.completions.recv_timeout(timeout).ok()
    }

    pub fn is_manual(&self) -> bool {
        self.manual.is_some()
    }

    /// Manual mode: runs every job given so far (a disk that finished its work).
    pub fn run_manual(&mut self) {
        if let Some((writer, jobs)) = &mut self.manual {
            writer.run_batch(jobs.try_iter());
        }
    }

    /// Stops the writer after the jobs it was given; returns their completions.
    pub fn close(&mut self) -> Vec<Completion> {
        self.run_manual();
        self.stop();
        self.completions.try_iter().collect()
    }

    fn stop(&mut self) {
        self.jobs = None;
        if self.thread.take().is_some_and(|t| t.join().is_err()) {
            log::error!("controller Raft log writer thread panicked");
        }
    }
}

impl Drop for RaftDisk {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run_thread(mut writer: Writer, jobs: Receiver<Job>, waker: Option<Arc<dyn Wake>>) {
    use crossbeam_channel::RecvTimeoutError::{Disconnected, Timeout};
    loop {
        let first = match jobs.recv_timeout(std::time::Duration::from_millis(RETRY_MS)) {
            Ok(job) => Some(job),
            Err(Timeout) if writer.stalled.is_some() => None, // time to retry the append
            Err(Timeout) => continue,
            Err(Disconnected) => return,
        };
        writer.run_batch(first.into_iter().chain(jobs.try_iter().take(MAX_BATCH - 1)));
        if let Some(waker) = &waker {
            waker.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::event::Event;

    fn entry(index: u64, term: u64, data: &[u8]) -> Entry {
        let mut e = Entry::default();
        e.index = index;
        e.term = term;
        e.data = data.to_vec().into();
        e
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rmq-raft-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn open(d: &Path) -> (RaftStore, RaftDisk) {
        let (store, _, file, seq) = recover(d, &[1, 2, 3]).unwrap();
        (
            store,
            RaftDisk::start(d, file, seq, Persistence::Manual).unwrap(),
        )
    }

    fn snapshot_state(d: &Path) -> ControllerState {
        recover(d, &[1, 2, 3]).unwrap().1
    }

    fn persist(disk: &mut RaftDisk, number: u64, entries: Vec<Entry>, hs: Option<HardState>) {
        disk.send(Job::Persist {
            number,
            entries,
            hard_state: hs,
            snapshot: None,
            sync: true,
        })
        .unwrap();
        disk.run_manual();
        assert_eq!(
            disk.try_completion(),
            Some(Completion::Persisted { number })
        );
    }

    fn state_with(name: &str) -> ControllerState {
        let mut s = ControllerState::default();
        s.apply(&Event::ApplyBrokerId {
            cluster_name: Some("c".into()),
            broker_name: name.into(),
            broker_address: "127.0.0.1:10911".into(),
            register_check_code: "code".into(),
            new_broker_id: 1,
        });
        s
    }

    #[test]
    fn the_store_serves_raft_what_it_was_given() {
        let d = dir("serve");
        let (mut store, _disk) = open(&d);
        store
            .append(&[entry(1, 1, b"a"), entry(2, 1, b"b"), entry(3, 2, b"c")])
            .unwrap();
        assert_eq!(store.first_index().unwrap(), 1);
        assert_eq!(store.last_index().unwrap(), 3);
        assert_eq!(store.term(3).unwrap(), 2);
        assert_eq!(store.term(0).unwrap(), 0);
        let got = store
            .entries(2, 4, None, GetEntriesContext::empty(false))
            .unwrap();
        assert_eq!(got.iter().map(|e| e.index).collect::<Vec<_>>(), vec![2, 3]);
        // A conflicting tail from a new leader replaces ours.
        store.append(&[entry(2, 3, b"x")]).unwrap();
        assert_eq!(store.last_index().unwrap(), 2);
        assert_eq!(store.term(2).unwrap(), 3);
        assert!(store.append(&[entry(9, 3, b"gap")]).is_err());
        assert!(store
            .entries(1, 9, None, GetEntriesContext::empty(false))
            .is_err());
        assert!(store.snapshot(1, 2).is_err(), "no snapshot yet");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_group_of_one_forgets_applied_entries_but_not_their_terms() {
        let d = dir("forget");
        let (mut store, mut disk) = open(&d);
        let ents: Vec<Entry> = (1..=5).map(|i| entry(i, 1 + i / 4, b"e")).collect();
        store.append(&ents).unwrap();
        store.forget_applied(3);
        assert_eq!(store.first_index().unwrap(), 4);
        assert_eq!(store.term(3).unwrap(), 1);
        assert_eq!(store.term(4).unwrap(), 2);
        assert!(store
            .entries(3, 5, None, GetEntriesContext::empty(false))
            .is_err());
        assert_eq!(store.last_index().unwrap(), 5);
        // A snapshot at a later applied index still keeps what follows it.
        let (meta, _) = store.compact(4).unwrap();
        assert_eq!((meta.index, meta.term), (4, 2));
        assert_eq!(store.entries_after_snapshot().len(), 1);
        disk.close();
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_restart_reads_back_entries_truncations_and_the_hard_state() {
        let d = dir("restart");
        {
            let (mut store, mut disk) = open(&d);
            let first = vec![entry(1, 1, b"a"), entry(2, 1, b"b"), entry(3, 1, b"c")];
            store.append(&first).unwrap();
            let mut hs = HardState::default();
            hs.term = 1;
            hs.vote = 2;
            hs.commit = 1;
            persist(&mut disk, 1, first, Some(hs));
            let again = vec![entry(3, 2, b"C"), entry(4, 2, b"d")];
            store.append(&again).unwrap();
            persist(&mut disk, 2, again, None);
            disk.close();
        }
        let (store, _disk) = open(&d);
        assert_eq!(store.last_index().unwrap(), 4);
        assert_eq!(store.term(3).unwrap(), 2);
        let e = store
            .entries(3, 4, None, GetEntriesContext::empty(false))
            .unwrap();
        assert_eq!(&e[0].data[..], b"C");
        assert_eq!(store.hard_state().vote, 2);
        assert_eq!(store.hard_state().commit, 1);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_snapshot_cuts_the_log_and_a_restart_starts_from_it() {
        let d = dir("snap");
        let state = state_with("broker-a");
        {
            let (mut store, mut disk) = open(&d);
            let ents: Vec<Entry> = (1..=5).map(|i| entry(i, 1, b"e")).collect();
            store.append(&ents).unwrap();
            let mut hs = HardState::default();
            hs.term = 1;
            hs.commit = 5;
            store.set_hard_state(hs.clone());
            persist(&mut disk, 1, ents, Some(hs.clone()));
            let (meta, _) = store.compact(4).unwrap();
            disk.send(Job::Compact {
                meta,
                state: state.clone(),
                keep: store.entries_after_snapshot().to_vec(),
                hard_state: hs,
            })
            .unwrap();
            assert!(store.snapshot(4, 2).is_err(), "not encoded yet");
            disk.run_manual();
            let Some(Completion::SnapshotData { index: 4, data }) = disk.try_completion() else {
                panic!("the writer reports the snapshot's data");
            };
            assert_eq!(disk.try_completion(), None);
            store.set_snapshot_data(4, data);
            let snap = store.snapshot(4, 2).unwrap();
            assert_eq!(snap.get_metadata().index, 4);
            assert_eq!(snapshot::decode(&snap.data).unwrap().1, state);
            persist(&mut disk, 2, vec![entry(6, 1, b"f")], None);
            disk.close();
        }
        let (store, _disk) = open(&d);
        assert_eq!(store.snapshot_index(), 4);
        assert_eq!(snapshot_state(&d), state);
        let sent = store.snapshot(4, 2).unwrap();
        assert_eq!(
            snapshot::decode(&sent.data).unwrap(),
            (4, state),
            "the file's data"
        );
        assert_eq!(store.first_index().unwrap(), 5);
        assert_eq!(store.last_index().unwrap(), 6);
        assert_eq!(store.term(4).unwrap(), 1);
        assert_eq!(store.hard_state().commit, 5);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_snapshot_from_the_leader_replaces_the_log() {
        let d = dir("install");
        let state = state_with("broker-b");
        {
            let (mut store, mut disk) = open(&d);
            persist(&mut disk, 1, vec![entry(1, 1, b"old")], None);
            let mut meta = SnapshotMetadata::default();
            meta.index = 10;
            meta.term = 3;
            meta.mut_conf_state().voters = vec![1, 2, 3];
            let mut snap = Snapshot::default();
            snap.data = snapshot::encode(10, &state).into();
            snap.set_metadata(meta.clone());
            assert_eq!(store.apply_snapshot(meta, snap.data.clone()), None);
            disk.send(Job::Persist {
                number: 2,
                entries: vec![entry(11, 3, b"new")],
                hard_state: Some(store.hard_state().clone()),
                snapshot: Some(snap),
                sync: true,
            })
            .unwrap();
            disk.run_manual();
            assert_eq!(
                disk.try_completion(),
                Some(Completion::Persisted { number: 2 })
            );
            disk.close();
        }
        let (store, _disk) = open(&d);
        assert_eq!(store.snapshot_index(), 10);
        assert_eq!(store.last_index().unwrap(), 11);
        assert_eq!(store.hard_state().commit, 10);
        assert_eq!(snapshot_state(&d), state);
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn fail_appends(disk: &mut RaftDisk, errno: Option<i32>) {
        disk.manual.as_mut().unwrap().0.fail_appends = errno;
    }

    #[test]
    fn a_full_disk_stalls_the_log_and_it_is_written_once_space_returns() {
        let d = dir("full");
        let (_, mut disk) = open(&d);
        persist(&mut disk, 1, vec![entry(1, 1, b"a")], None);
        let before = std::fs::metadata(log_path(&d)).unwrap().len();
        fail_appends(&mut disk, Some(28)); // ENOSPC
        for (number, index) in [(2, 2), (3, 3)] {
            let data = vec![b'x'; 1_000];
            disk.send(Job::Persist {
                number,
                entries: vec![entry(index, 1, &data)],
                hard_state: None,
                snapshot: None,
                sync: true,
            })
            .unwrap();
            disk.run_manual();
        }
        let Some(Completion::Stalled { error }) = disk.try_completion() else {
            panic!("a stall is reported");
        };
        assert!(
            error.contains("raft.log") && error.contains("os error 28"),
            "{error}"
        );
        assert_eq!(disk.try_completion(), None, "reported once");
        assert_eq!(
            std::fs::metadata(log_path(&d)).unwrap().len(),
            before,
            "the half-written record was cut"
        );
        fail_appends(&mut disk, None);
        disk.run_manual();
        assert_eq!(
            disk.try_completion(),
            Some(Completion::Persisted { number: 3 })
        );
        disk.close();
        let (store, _disk) = open(&d);
        assert_eq!(store.last_index().unwrap(), 3, "every entry once, in order");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_damaged_snapshot_refuses_the_start_naming_the_file() {
        let d = dir("damaged");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(snapshot_path(&d), b"RMQCRSN1\0\0\0\0garbage").unwrap();
        let err = recover(&d, &[1, 2, 3]).err().unwrap().to_string();
        assert!(err.contains("raft.snapshot"), "{err}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
