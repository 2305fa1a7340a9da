//! Inactive masters become elections, as in Java's `ControllerManager`: a master's closed
//! connection or expired heartbeat, or the inactive-master scan finding one, starts a
//! controller-triggered election on the serving leader. What is done beyond Java's (no
//! election waits for a scan, a new leader does not take silence for death) is in
//! docs/controller.md, "Liveness and failover".
//!
//! Both scans are paced: a timer starts one, and each loop turn runs whole shards of it
//! ([`SHARDS`]) until about [`SCAN_STEPS_PER_TURN`] sets were examined, resuming at the next
//! shard. Each set is judged at its step with the table and the time of that turn, so a set
//! added or removed meanwhile is simply met or not, and a heartbeat that arrived meanwhile
//! counts.

use super::{Controller, Reply};
use crate::controller::liveness::{ConnRef, InactiveBroker, DEFAULT_HEARTBEAT_TIMEOUT_MS};
use crate::controller::pipeline::{Durability, Origin};
use crate::controller::replicas;
use crate::controller::request::{ElectMaster, LeaderRequest};
use crate::controller::state::SHARDS;

/// Sets (or broker names) a turn's scan steps examine, about: whole shards, so at 100,000 sets
/// (~400 a shard) one shard a turn. Thread CPU time of a release build in
/// tests/controller_attack_scan.rs (99,000 sets, busy two-core host): two shards a step took
/// 0.7-2.0 ms, so one shard is ~0.4-1 ms; a whole unpaced scan was one turn of 0.3-0.5 s.
pub const SCAN_STEPS_PER_TURN: usize = 256;

/// The timed scans over the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// Java's `scanNotActiveBroker`: silent brokers are dropped.
    NotActive,
    /// Java's `scanInactiveMasterAndTriggerReelect`.
    InactiveMaster,
}

/// The next shard of each scan under way.
#[derive(Debug, Default)]
pub(in crate::controller) struct Scans {
    not_active: Option<usize>,
    inactive_master: Option<usize>,
}

/// How long a master seen dying is remembered, and a new leader's grace for brokers that
/// heartbeat only the leader: Java's default broker heartbeat timeout.
const SETTLE_MS: u64 = DEFAULT_HEARTBEAT_TIMEOUT_MS as u64;

/// A master this node saw die while it did not serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::controller) struct DeadMaster {
    master: i64,
    master_epoch: i32,
    seen_ms: u64,
}

impl<T> Controller<T> {
    /// Starts a scan (a timer fired); one under way goes on where it is.
    pub fn start_scan(&mut self, scan: Scan) {
        let cursor = match scan {
            Scan::NotActive => &mut self.scans.not_active,
            Scan::InactiveMaster => &mut self.scans.inactive_master,
        };
        if cursor.is_none() {
            *cursor = Some(0);
            if scan == Scan::NotActive {
                self.liveness.log_news();
            }
        }
    }

    /// Tests and simulations: the whole scan at once (and the rest of one under way).
    pub fn run_scan(&mut self, scan: Scan, now_ms: u64, out: &mut Vec<Reply<T>>) -> Vec<ConnRef> {
        self.start_scan(scan);
        self.scan_step(now_ms, usize::MAX, out)
    }

    /// Whether a scan is under way (the loop runs [`scan_step`](Self::scan_step) next turn).
    pub fn scanning(&self) -> bool {
        self.scans.not_active.is_some() || self.scans.inactive_master.is_some()
    }

    /// One turn of the scans under way: whole shards while fewer than `budget` sets were
    /// examined (one at least). Returns the connections of expired brokers, to close.
    pub fn scan_step(
        &mut self,
        now_ms: u64,
        budget: usize,
        out: &mut Vec<Reply<T>>,
    ) -> Vec<ConnRef> {
        let mut examined = 0;
        let mut conns = Vec::new();
        while let Some(shard) = self.scans.not_active.filter(|_| examined < budget) {
            let (gone, n) = self.liveness.scan_not_active(shard, now_ms);
            examined += n + 1;
            self.scans.not_active = Some(shard + 1).filter(|&next| next < SHARDS);
            conns.extend(gone.iter().filter_map(|b| b.conn));
            let why = (log::Level::Warn, "stopped heartbeating");
            self.brokers_inactive(&gone, why, now_ms, out);
        }
        while let Some(shard) = self.scans.inactive_master.filter(|_| examined < budget) {
            examined += self.scan_inactive_masters(shard, now_ms, out) + 1;
            self.scans.inactive_master = Some(shard + 1).filter(|&next| next < SHARDS);
        }
        conns
    }

    /// A connection on the controller port closed: its brokers are inactive now.
    pub fn connection_closed(&mut self, conn: ConnRef, now_ms: u64, out: &mut Vec<Reply<T>>) {
        let gone = self.liveness.connection_closed(conn);
        let why = (log::Level::Info, "disconnected");
        self.brokers_inactive(&gone, why, now_ms, out);
    }

    /// Java's `onBrokerInactive`: only the master's loss starts an election.
    fn brokers_inactive(
        &mut self,
        gone: &[InactiveBroker],
        (level, why): (log::Level, &str),
        now_ms: u64,
        out: &mut Vec<Reply<T>>,
    ) {
        for broker in gone {
            log::log!(
                level,
                "controller: broker {} id {} (cluster {}) {why}",
                broker.broker_name,
                broker.broker_id,
                broker.cluster_name.as_deref().unwrap_or("?")
            );
            let is_master = self
                .state
                .sync_state(&broker.broker_name)
                .is_some_and(|s| s.master_broker_id == Some(broker.broker_id));
            if !is_master {
                continue;
            }
            if self.group.serving().is_ok() {
                self.trigger_election(&broker.broker_name, now_ms, out);
            } else {
                self.remember_dead_master(&broker.broker_name, now_ms);
            }
        }
    }

    /// One shard of the inactive-master scan (every `scanInactiveMasterInterval`): a set whose
    /// master is inactive while another member is alive gets an election. Returns the sets
    /// examined.
    fn scan_inactive_masters(
        &mut self,
        shard: usize,
        now_ms: u64,
        out: &mut Vec<Reply<T>>,
    ) -> usize {
        let settled = self
            .serving_since
            .is_some_and(|since| now_ms >= since.saturating_add(SETTLE_MS));
        let (names, examined) =
            replicas::scan_need_reelect(&self.state, &self.liveness, shard, now_ms, settled);
        let serving = self.group.serving().is_ok();
        for name in names {
            if serving {
                log::info!("controller: master of broker set {name} is inactive; electing another");
                self.trigger_election(&name, now_ms, out);
            } else {
                self.remember_dead_master(&name, now_ms);
            }
        }
        examined
    }

    /// A follower's (or candidate's) part in a master's death: remember it, say who elects.
    fn remember_dead_master(&mut self, name: &str, now_ms: u64) {
        let Some(sync) = self.state.sync_state(name) else {
            return;
        };
        let Some(master) = sync.master_broker_id else {
            return;
        };
        let dead = DeadMaster {
            master,
            master_epoch: sync.master_epoch,
            seen_ms: now_ms,
        };
        let known = self.inactive_masters.get(name).is_some_and(|d| {
            (d.master, d.master_epoch) == (master, dead.master_epoch)
                && now_ms.saturating_sub(d.seen_ms) <= SETTLE_MS
        });
        if known {
            return;
        }
        match self.leader_peer().map(|p| &p.id) {
            Some(leader) => log::info!(
                "controller: master of broker set {name} (id {master}) is inactive; not the leader: leaving the election to {leader}"
            ),
            None => log::info!(
                "controller: master of broker set {name} (id {master}) is inactive; no leader yet: this node elects another if it comes to lead"
            ),
        }
        self.inactive_masters.insert(name.to_owned(), dead);
    }

    /// This node has just begun to serve (see the module doc).
    pub(super) fn on_serving(&mut self, now_ms: u64, out: &mut Vec<Reply<T>>) {
        for (name, dead) in std::mem::take(&mut self.inactive_masters) {
            if now_ms.saturating_sub(dead.seen_ms) > SETTLE_MS {
                continue;
            }
            let Some(sync) = self.state.sync_state(&name) else {
                continue;
            };
            let unchanged = sync.master_broker_id == Some(dead.master)
                && sync.master_epoch == dead.master_epoch;
            let silent =
                !self
                    .liveness
                    .is_active(sync.cluster_name.as_deref(), &name, dead.master, now_ms);
            if unchanged && silent {
                log::info!(
                    "controller: master of broker set {name} (id {}) died while no leader served; electing another",
                    dead.master
                );
                self.trigger_election(&name, now_ms, out);
            }
        }
        // A new scan from the first shard (the loop paces it).
        self.scans.inactive_master = Some(0);
    }

    pub(super) fn trigger_election(
        &mut self,
        broker_name: &str,
        now_ms: u64,
        out: &mut Vec<Reply<T>>,
    ) {
        let attempts = self.config.settings().elect_master_max_retry_count;
        // Java: only the leader elects (followers keep their liveness table only).
        if attempts == 0
            || self.pipeline.has_election_for(broker_name)
            || self.group.serving().is_err()
        {
            return;
        }
        self.submit(
            Origin::Election {
                broker_name: broker_name.to_owned(),
                attempts_left: attempts,
            },
            LeaderRequest::ElectMaster(ElectMaster::controller_trigger(broker_name)),
            now_ms,
            out,
        );
    }
}
