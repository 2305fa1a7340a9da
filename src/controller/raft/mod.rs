//! The controller's durable step: a Raft group (raft-rs) of the controllers that
//! `controllerDLegerPeers` names; a single controller is a group of one on the same storage.
//! [`RaftGroup`] owns the `RawNode`, its store and the writer, and turns every input into
//! [`GroupEvent`]s. The data flow, leader gating and timing: docs/controller.md, "Raft group".

mod decoder;
pub mod logger;
pub mod records;
pub mod storage;
pub mod wire;

use super::config::Peer;
use super::pipeline::{Durability, NotServing};
use super::state::{ControllerState, Stamp};
use bytes::Bytes;
use decoder::{Decoded, SnapshotDecoder};
use protobuf::Message as _;
use raft::eraftpb::{EntryType, Message, MessageType};
use raft::{Config, RawNode, SnapshotStatus, StateRole};
use records::StorageError;
use std::collections::{BTreeSet, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use storage::{Completion, Job, RaftDisk, RaftStore};
use wire::Payload;

pub use storage::{Persistence, Wake};

pub const TICK_MS: u64 = 100;
/// Ticks without a leader before a follower campaigns (randomised up to twice this).
pub const ELECTION_TICKS: usize = 10;
pub const HEARTBEAT_TICKS: usize = 2;
/// A peer payload larger than this is refused before decoding; the peer link's cap too (a
/// snapshot of 100,000 broker sets is well under it).
pub const MAX_MESSAGE_BYTES: usize = 128 << 20;

/// The wall clock each proposal is stamped with (ms since the epoch); simulations pass theirs.
pub type WallClock = Arc<dyn Fn() -> u64 + Send + Sync>;

pub fn system_wall_clock() -> WallClock {
    Arc::new(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupEvent {
    /// A committed entry; `proposal` is set when it is this node's.
    Committed {
        index: u64,
        data: Vec<u8>,
        proposal: Option<u64>,
        /// Who proposed it and when (None for raft-rs's own empty entries).
        stamp: Option<Stamp>,
    },
    /// The leader's snapshot replaces the state.
    Snapshot {
        index: u64,
        state: ControllerState,
    },
    /// This node leads and has applied an entry of its term: it serves from now on.
    Serving {
        term: u64,
    },
    LeadershipLost {
        term: u64,
    },
    Failed(String),
    /// The log cannot be appended to now (a full disk): changes are refused until it can.
    Stalled(String),
    /// A file job (1009's properties file) finished.
    FileWritten {
        id: u64,
        result: Result<(), String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStatus {
    pub role: &'static str,
    pub term: u64,
    /// 0 when no leader is known.
    pub leader_id: u64,
    pub serving: bool,
    pub applied: u64,
    pub committed: u64,
}

struct Proposal {
    id: u64,
    index: u64,
    term: u64,
}

pub struct RaftGroup {
    node: RawNode<RaftStore>,
    disk: RaftDisk,
    self_id: u64,
    /// Follower messages that may leave only after their `Ready` is on disk.
    held: VecDeque<(u64, Vec<Message>)>,
    outbox: Vec<(u64, Payload)>,
    decoder: SnapshotDecoder,
    /// The state of the snapshot message being stepped, read by the decoder.
    decoded: Option<ControllerState>,
    /// The last `Ready` handed to the writer, and the last it reported on disk.
    sent_number: u64,
    persisted_number: u64,
    proposal: Option<Proposal>,
    next_proposal: u64,
    /// The term this node serves in (0: not serving).
    serving_term: u64,
    led_term: u64,
    applied: u64,
    failed: Option<String>,
    /// Why the log writer cannot append now (it retries); cleared by its next success.
    stalled: Option<String>,
    alone: bool,
    wall: WallClock,
}

impl RaftGroup {
    /// The group, and the state as of its snapshot (`status().applied`).
    pub fn open(
        dir: &Path,
        self_id: u64,
        voters: &[u64],
        persistence: Persistence,
        wall: WallClock,
    ) -> Result<(RaftGroup, ControllerState), StorageError> {
        let (store, state, file, next_seq) = storage::recover(dir, voters)?;
        let snapshot_index = store.snapshot_index();
        let decoder = SnapshotDecoder::start(&persistence)
            .map_err(records::io(dir, "start the snapshot decoder thread"))?;
        let disk = RaftDisk::start(dir, file, next_seq, persistence)?;
        let config = Config {
            id: self_id,
            election_tick: ELECTION_TICKS,
            heartbeat_tick: HEARTBEAT_TICKS,
            applied: snapshot_index,
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            check_quorum: true,
            pre_vote: true,
            ..Config::default()
        };
        let logger = logger::logger().new(slog::o!("raft_id" => self_id));
        let node = RawNode::new(&config, store, &logger).map_err(|e| {
            records::corrupt(dir, None, format!("the Raft state does not start: {e}"))
        })?;
        let group = RaftGroup {
            node,
            disk,
            self_id,
            held: VecDeque::new(),
            outbox: Vec::new(),
            decoder,
            decoded: None,
            sent_number: 0,
            persisted_number: 0,
            proposal: None,
            next_proposal: 0,
            serving_term: 0,
            led_term: 0,
            applied: snapshot_index,
            failed: None,
            stalled: None,
            alone: voters == [self_id],
            wall,
        };
        Ok((group, state))
    }

    /// A group of one campaigns now (no election timeout) and wins at once.
    pub fn lead_alone(&mut self, out: &mut Vec<GroupEvent>) {
        if !self.alone || self.failed.is_some() || self.node.raft.state == StateRole::Leader {
            return;
        }
        if let Err(e) = self.node.campaign() {
            log::warn!(
                "controller Raft: node {} cannot campaign: {e}",
                self.self_id
            );
        }
        self.process(out);
    }

    /// How many proposals this node made (a change: a `Ready` may be waiting).
    pub fn proposals(&self) -> u64 {
        self.next_proposal
    }

    pub fn is_alone(&self) -> bool {
        self.alone
    }

    pub fn self_id(&self) -> u64 {
        self.self_id
    }

    pub fn status(&self) -> GroupStatus {
        let raft = &self.node.raft;
        GroupStatus {
            role: match raft.state {
                StateRole::Leader => "LEADER",
                StateRole::Candidate | StateRole::PreCandidate => "CANDIDATE",
                StateRole::Follower => "FOLLOWER",
            },
            term: raft.term,
            leader_id: raft.leader_id,
            serving: self.is_serving(),
            applied: self.applied,
            committed: raft.raft_log.committed,
        }
    }

    pub fn is_serving(&self) -> bool {
        self.failed.is_none()
            && self.node.raft.state == StateRole::Leader
            && self.serving_term == self.node.raft.term
    }

    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    pub fn tick(&mut self, out: &mut Vec<GroupEvent>) {
        if self.failed.is_some() {
            return; // a node whose disk failed takes no further part (as if stopped)
        }
        self.node.tick();
        self.process(out);
    }

    /// A payload from peer `from`; undecodable or misaddressed ones are dropped. A snapshot to
    /// install goes to the decoder first ([`on_decoded`](Self::on_decoded) steps it).
    pub fn step(&mut self, from: u64, payload: Bytes, out: &mut Vec<GroupEvent>) {
        if self.failed.is_some() {
            return;
        }
        if payload.len() > MAX_MESSAGE_BYTES {
            log::warn!(
                "controller Raft: a {} byte message from node {from} dropped",
                payload.len()
            );
            return;
        }
        // A snapshot's data stays a slice of the payload.
        let mut msg = match Message::parse_from_carllerche_bytes(&payload) {
            Ok(msg) => msg,
            Err(e) => {
                log::warn!("controller Raft: undecodable message from node {from} dropped: {e}");
                return;
            }
        };
        if msg.from != from
            || msg.to != self.self_id
            || raft::raw_node::is_local_msg(msg.get_msg_type())
        {
            log::warn!(
                "controller Raft: message {:?} from {} to {} arrived from node {from} at node {}; dropped",
                msg.get_msg_type(),
                msg.from,
                msg.to,
                self.self_id
            );
            return;
        }
        let index = msg.get_snapshot().get_metadata().index;
        if msg.get_msg_type() == MessageType::MsgSnapshot
            && index > self.node.raft.raft_log.committed
        {
            if self.decoder.is_busy() {
                log::debug!("controller Raft: snapshot at {index} from node {from} dropped: one is being read");
            } else {
                self.decoder.decode(from, msg);
            }
            return;
        }
        self.on_lost_log(&mut msg);
        self.step_message(from, msg, out);
    }

    fn step_message(&mut self, from: u64, msg: Message, out: &mut Vec<GroupEvent>) {
        if let Err(e) = self.node.step(msg) {
            log::debug!("controller Raft: message from node {from} not taken: {e}");
        }
        self.process(out);
    }

    /// A snapshot message whose state the decoder read: stepped now, and installed if Raft
    /// still wants it. A state it does not take (a later one came first) is freed off the loop.
    fn on_decoded(&mut self, decoded: Decoded, out: &mut Vec<GroupEvent>) {
        if self.failed.is_some() {
            return;
        }
        match decoded.state {
            Ok(state) => {
                self.decoded = Some(state);
                self.step_message(decoded.from, decoded.msg, out);
                if let Some(unused) = self.decoded.take() {
                    self.discard(unused);
                }
            }
            Err(why) => self.fail(format!("the leader's snapshot {why}"), out),
        }
    }

    /// Frees what the loop no longer needs (tables of 100,000 sets) off the loop.
    pub fn discard(&self, garbage: impl Send + 'static) {
        self.decoder.discard(Box::new(garbage));
    }

    /// A member restored from an empty store: a heartbeat's commit index is cut to its log
    /// (raft-rs would panic), and its leader, told commit 0 by a member it believed to hold
    /// entries, probes it from the start (then sends it the snapshot).
    fn on_lost_log(&mut self, msg: &mut Message) {
        let raft = &mut self.node.raft;
        match msg.get_msg_type() {
            MessageType::MsgHeartbeat => msg.commit = msg.commit.min(raft.raft_log.last_index()),
            MessageType::MsgHeartbeatResponse
                if msg.commit == 0 && raft.state == StateRole::Leader =>
            {
                let Some(pr) = raft.mut_prs().get_mut(msg.from) else {
                    return;
                };
                if pr.matched > 0 {
                    log::warn!(
                        "controller Raft: node {} has lost its log (it had {}): probing it from the start",
                        msg.from,
                        pr.matched
                    );
                    pr.matched = 0;
                    pr.become_probe();
                }
            }
            _ => {}
        }
    }

    pub fn take_messages(&mut self, out: &mut Vec<(u64, Payload)>) {
        out.append(&mut self.outbox);
    }

    /// A local snapshot at the applied `index`: the writer encodes it (the store gets the
    /// data to send to followers), writes it and cuts the log.
    pub fn snapshot(&mut self, index: u64, state: &ControllerState) {
        let meta = match self.node.mut_store().compact(index) {
            Ok((meta, replaced)) => {
                self.discard(replaced);
                meta
            }
            Err(e) => {
                log::warn!("controller Raft: snapshot not taken: {e}");
                return;
            }
        };
        let store = self.node.store();
        let job = Job::Compact {
            meta,
            state: state.clone(),
            keep: store.entries_after_snapshot().to_vec(),
            hard_state: store.hard_state().clone(),
        };
        if let Err(e) = self.disk.send(job) {
            self.failed.get_or_insert(e.to_string());
        }
    }

    /// Picks up what the writer finished (after the waker fired, or [`run_disk`](Self::run_disk)).
    pub fn on_disk(&mut self, out: &mut Vec<GroupEvent>) {
        while let Some(c) = self.disk.try_completion() {
            self.on_completion(c, out);
        }
        while let Some(decoded) = self.decoder.try_result() {
            self.on_decoded(decoded, out);
        }
        self.process(out);
    }

    /// As [`on_disk`](Self::on_disk), first waiting up to `timeout` for the writer.
    pub fn wait_disk(&mut self, timeout: std::time::Duration, out: &mut Vec<GroupEvent>) {
        if self.disk.is_manual() {
            return self.run_disk(out);
        }
        if let Some(c) = self.disk.wait_completion(timeout) {
            self.on_completion(c, out);
        }
        self.on_disk(out);
    }

    fn on_completion(&mut self, c: Completion, out: &mut Vec<GroupEvent>) {
        match c {
            Completion::Persisted { number } => {
                if self.stalled.take().is_some() {
                    log::warn!("controller Raft: the log is written again; changes are accepted");
                }
                self.node.on_persist_ready(number);
                self.persisted_number = number;
                self.advance_applied();
                while self.held.front().is_some_and(|(n, _)| *n <= number) {
                    if let Some((_, msgs)) = self.held.pop_front() {
                        self.encode(msgs);
                    }
                }
            }
            Completion::Failed { error, .. } => self.fail(error, out),
            Completion::Stalled { error } => {
                self.stalled = Some(error.clone());
                out.push(GroupEvent::Stalled(error));
            }
            Completion::FileWritten { id, result } => {
                out.push(GroupEvent::FileWritten { id, result })
            }
            Completion::SnapshotData { index, data } => {
                self.node.mut_store().set_snapshot_data(index, data)
            }
        }
    }

    pub fn run_disk(&mut self, out: &mut Vec<GroupEvent>) {
        self.disk.run_manual();
        self.on_disk(out);
    }

    /// Has the writer replace `path`; a `GroupEvent::FileWritten` follows.
    pub fn write_file(
        &mut self,
        id: u64,
        path: std::path::PathBuf,
        content: Vec<u8>,
    ) -> Result<(), StorageError> {
        self.disk.send(Job::WriteFile { id, path, content })
    }

    /// Stops the writer after what it was given; returns the file jobs it finished.
    pub fn close(&mut self) -> Vec<GroupEvent> {
        let mut files = Vec::new();
        for c in self.disk.close() {
            match c {
                Completion::Failed { error, .. } => {
                    log::error!("controller Raft: a last write failed at shutdown: {error}")
                }
                Completion::FileWritten { id, result } => {
                    files.push(GroupEvent::FileWritten { id, result })
                }
                _ => {}
            }
        }
        files
    }

    /// Drains raft-rs's `Ready`s: sends, persists, applies. Call after a proposal.
    pub fn process(&mut self, out: &mut Vec<GroupEvent>) {
        if self.failed.is_some() {
            return;
        }
        while self.node.has_ready() {
            let mut rd = self.node.ready();
            if rd.ss().is_some() {
                self.role_changed(out);
            }
            let leader_msgs = rd.take_messages();
            let snapshots: Vec<u64> = leader_msgs
                .iter()
                .filter(|m| m.get_msg_type() == MessageType::MsgSnapshot)
                .map(|m| m.to)
                .collect();
            self.encode(leader_msgs);
            let snapshot = (!rd.snapshot().is_empty()).then(|| rd.snapshot().clone());
            if let Some(snap) = &snapshot {
                if let Err(why) = self.install(snap, out) {
                    self.fail(why, out);
                    return;
                }
            }
            let entries = rd.take_entries();
            if let Err(why) = self.node.mut_store().append(&entries) {
                self.fail(why, out);
                return;
            }
            if let Some(hs) = rd.hs() {
                self.node.mut_store().set_hard_state(hs.clone());
            }
            self.apply(rd.take_committed_entries(), out);
            let persisted_msgs = rd.take_persisted_messages();
            let number = rd.number();
            let writes = snapshot.is_some() || !entries.is_empty() || rd.must_sync();
            if writes || self.persisted_number < self.sent_number {
                let job = Job::Persist {
                    number,
                    entries,
                    hard_state: self.node.store().hard_state().clone().into(),
                    snapshot,
                    sync: rd.must_sync(),
                };
                if let Err(e) = self.disk.send(job) {
                    self.fail(e.to_string(), out);
                    return;
                }
                self.sent_number = number;
                if !persisted_msgs.is_empty() {
                    self.held.push_back((number, persisted_msgs));
                }
                self.node.advance_append_async(rd);
            } else {
                // Nothing to write and nothing in flight: persisted as of now.
                self.encode(persisted_msgs);
                self.node.advance_append_async(rd);
                self.node.on_persist_ready(number);
                self.sent_number = number;
                self.persisted_number = number;
            }
            self.advance_applied();
            for to in snapshots {
                // Sent (or lost): the leader probes again either way.
                self.node.report_snapshot(to, SnapshotStatus::Finish);
            }
        }
    }

    /// Tells raft-rs how far the state machine got (raft-rs's rule: applied <= persisted).
    fn advance_applied(&mut self) {
        let log = &self.node.raft.raft_log;
        let to = self.applied.min(log.committed).min(log.persisted);
        if to > log.applied {
            self.node.advance_apply_to(to);
            if self.alone {
                self.node.mut_store().forget_applied(to);
            }
        }
    }

    fn role_changed(&mut self, out: &mut Vec<GroupEvent>) {
        let raft = &self.node.raft;
        log::info!(
            "controller Raft: node {} is {:?} in term {} (leader {})",
            self.self_id,
            raft.state,
            raft.term,
            raft.leader_id
        );
        if raft.state == StateRole::Leader {
            self.led_term = raft.term;
        } else if self.led_term != 0 {
            out.push(GroupEvent::LeadershipLost {
                term: self.led_term,
            });
            self.led_term = 0;
            self.serving_term = 0;
            self.proposal = None;
        }
    }

    fn install(
        &mut self,
        snap: &raft::eraftpb::Snapshot,
        out: &mut Vec<GroupEvent>,
    ) -> Result<(), String> {
        let meta = snap.get_metadata().clone();
        let index = meta.index;
        let state = (self.decoded.take())
            .ok_or_else(|| format!("the leader's snapshot at {index} was not read first"))?;
        log::info!("controller Raft: installing the leader's snapshot at index {index}");
        let replaced = (self.node.mut_store()).apply_snapshot(meta, snap.data.clone());
        self.discard(replaced);
        self.applied = index;
        self.proposal = None;
        out.push(GroupEvent::Snapshot { index, state });
        Ok(())
    }

    fn apply(&mut self, entries: Vec<raft::eraftpb::Entry>, out: &mut Vec<GroupEvent>) {
        let raft = &self.node.raft;
        for e in entries {
            self.applied = e.index;
            if e.get_entry_type() != EntryType::EntryNormal {
                log::warn!(
                    "controller Raft: membership change at {} ignored (static membership)",
                    e.index
                );
                continue;
            }
            if raft.state == StateRole::Leader
                && e.term == raft.term
                && self.serving_term != raft.term
            {
                self.serving_term = raft.term;
                log::info!(
                    "controller Raft: node {} leads term {} and serves (applied {})",
                    self.self_id,
                    raft.term,
                    e.index
                );
                out.push(GroupEvent::Serving { term: raft.term });
            }
            // Empty entries too: a new leader's, and read barriers (processReadEvent).
            let ours = self
                .proposal
                .as_ref()
                .is_some_and(|p| p.index == e.index && p.term == e.term);
            let proposal = if ours {
                self.proposal.take().map(|p| p.id)
            } else {
                None
            };
            out.push(GroupEvent::Committed {
                index: e.index,
                data: e.data.to_vec(),
                proposal,
                stamp: Stamp::decode(&e.context),
            });
        }
    }

    fn encode(&mut self, msgs: Vec<Message>) {
        for m in msgs {
            let to = m.to;
            match wire::encode(m) {
                Ok(payload) => self.outbox.push((to, payload)),
                Err(e) => log::error!("controller Raft: message to node {to} not encoded: {e}"),
            }
        }
    }

    /// Stops serving for good (a failed disk, an entry that cannot be applied).
    pub fn fail(&mut self, why: String, out: &mut Vec<GroupEvent>) {
        if self.failed.is_none() {
            log::error!("controller Raft: {why}; this node stops serving (restart it)");
            self.failed = Some(why.clone());
            out.push(GroupEvent::Failed(why));
        }
    }
}

impl Durability for RaftGroup {
    fn serving(&self) -> Result<(), NotServing> {
        if let Some(why) = &self.failed {
            return Err(NotServing::Failed(format!(
                "the controller's Raft log failed ({why}); restart the name server"
            )));
        }
        if !self.is_serving() {
            Err(NotServing::NotLeader)
        } else if let Some(why) = &self.stalled {
            Err(NotServing::WritesFailing(format!(
                "the controller's log cannot be written ({why}); changes are refused until it can, reads are served"
            )))
        } else {
            Ok(())
        }
    }

    fn propose(&mut self, entry: Vec<u8>) -> Result<u64, NotServing> {
        self.serving()?;
        let stamp = Stamp {
            node: self.self_id,
            wall_ms: (self.wall)(),
        };
        if let Err(e) = self.node.propose(stamp.encode(), entry) {
            log::warn!("controller Raft: proposal dropped: {e}");
            return Err(NotServing::NotLeader);
        }
        self.next_proposal += 1;
        self.proposal = Some(Proposal {
            id: self.next_proposal,
            index: self.node.raft.raft_log.last_index(),
            term: self.node.raft.term,
        });
        Ok(self.next_proposal)
    }
}

/// The Raft ids of `peers`, in order: `nK` is K+1 when every peer is named `n<number>` (all
/// distinct); otherwise a peer's position + 1. Every node and its peer link agree on them.
pub fn raft_ids(peers: &[Peer]) -> Vec<u64> {
    let numbered: Option<Vec<u64>> = peers
        .iter()
        .map(|p| {
            p.id.strip_prefix('n')
                .and_then(|k| k.parse::<u64>().ok())
                .and_then(|k| k.checked_add(1))
        })
        .collect();
    match numbered {
        Some(ids) if ids.iter().collect::<BTreeSet<_>>().len() == ids.len() => ids,
        _ => (1..=peers.len() as u64).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peers(ids: &[&str]) -> Vec<Peer> {
        ids.iter()
            .map(|id| Peer {
                id: (*id).into(),
                address: "127.0.0.1:9878".into(),
                port: 9878,
            })
            .collect()
    }

    #[test]
    fn node_k_is_raft_id_k_plus_one_and_other_names_go_by_position() {
        assert_eq!(raft_ids(&peers(&["n0", "n1", "n2"])), vec![1, 2, 3]);
        assert_eq!(raft_ids(&peers(&["n2", "n0", "n1"])), vec![3, 1, 2]);
        assert_eq!(raft_ids(&peers(&["a", "b", "c"])), vec![1, 2, 3]);
        assert_eq!(raft_ids(&peers(&["n0", "n0x", "n2"])), vec![1, 2, 3]);
        assert_eq!(raft_ids(&peers(&["n2", "n0", "n7"])), vec![3, 1, 8]);
        assert_eq!(raft_ids(&peers(&["a", "n1", "n2"])), vec![1, 2, 3]);
        assert_eq!(raft_ids(&peers(&["x", "y"])), vec![1, 2]);
        assert_eq!(
            raft_ids(&peers(&["n1", "n01"])),
            vec![1, 2],
            "the same number twice"
        );
        assert_eq!(raft_ids(&peers(&["n0"])), vec![1], "a single node");
    }
}
