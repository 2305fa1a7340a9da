//! Inactive masters become elections, as in Java's `ControllerManager`: a master's closed
//! connection or expired heartbeat, or the inactive-master scan finding one, starts a
//! controller-triggered election on the serving leader. What is done beyond Java's (no
//! election waits for a scan, a new leader does not take silence for death) is in
//! docs/controller.md, "Liveness and failover".

use super::{Controller, Reply};
use crate::controller::liveness::{ConnRef, InactiveBroker, DEFAULT_HEARTBEAT_TIMEOUT_MS};
use crate::controller::pipeline::{Durability, Origin};
use crate::controller::replicas;
use crate::controller::request::{ElectMaster, LeaderRequest};

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
    /// The heartbeat-expiry scan (every `scanNotActiveBrokerInterval`): silent brokers are
    /// dropped, an inactive master is replaced. Returns the connections to close.
    pub fn scan_not_active_brokers(
        &mut self,
        now_ms: u64,
        out: &mut Vec<Reply<T>>,
    ) -> Vec<ConnRef> {
        let gone = self.liveness.scan_not_active(now_ms);
        let conns = gone.iter().filter_map(|b| b.conn).collect();
        let why = (log::Level::Warn, "stopped heartbeating");
        self.brokers_inactive(&gone, why, now_ms, out);
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

    /// The inactive-master scan (every `scanInactiveMasterInterval`): a set whose master is
    /// inactive while another member is alive gets an election.
    pub fn scan_inactive_masters(&mut self, now_ms: u64, out: &mut Vec<Reply<T>>) {
        let settled = self
            .serving_since
            .is_some_and(|since| now_ms >= since.saturating_add(SETTLE_MS));
        let names = replicas::scan_need_reelect(&self.state, &self.liveness, now_ms, settled);
        let serving = self.group.serving().is_ok();
        for name in names {
            if serving {
                log::info!("controller: master of broker set {name} is inactive; electing another");
                self.trigger_election(&name, now_ms, out);
            } else {
                self.remember_dead_master(&name, now_ms);
            }
        }
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
        self.scan_inactive_masters(now_ms, out);
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
