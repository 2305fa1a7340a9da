//! Brokers leaving: the expiry scan, closed connections, unregistration batches (§5.5).

use super::register::min_broker_id;
use super::{BrokerId, ConnId, Expiry, MinIdNotification, RouteTable};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UnregisterRequest {
    pub cluster: Arc<str>,
    pub broker_addr: Arc<str>,
    pub broker_name: Arc<str>,
    pub broker_id: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemovalReason {
    Unregister,
    Expired { silent_ms: u64 },
    ConnectionClosed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredBroker {
    pub request: UnregisterRequest,
    pub silent_ms: u64,
    pub conn: Option<ConnId>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchOutcome {
    pub brokers_removed: usize,
    pub broker_groups_removed: usize,
    pub topics_removed: usize,
    /// The work done, as [`RouteTable::unregister_step`] weighs it.
    pub steps: usize,
    pub notifications: Vec<MinIdNotification>,
    /// Groups that lost an address but not the last one.
    reduced: Vec<Arc<str>>,
}

/// Steps an unregistration counts beside its topic queue entries: removing a broker costs the
/// loop about as much as dropping 16 entries (release build, 32 brokers × 10 and × 100 topics:
/// 13.5 µs a broker with its log text, 0.1-0.7 µs an entry).
pub const BROKER_STEPS: usize = 16;

impl RouteTable {
    /// The unregistration Java's onChannelDestroy would submit for a live entry (§5.4).
    pub(super) fn unregister_request_for(&self, live_id: usize) -> Option<UnregisterRequest> {
        let live = self.live.get(live_id)?;
        let b = self.brokers.get(live.broker_name.as_ref())?;
        if *b.data.cluster != *live.cluster {
            return None;
        }
        b.data
            .broker_addrs
            .iter()
            .find(|(_, a)| a.as_str() == &*live.addr)
            .map(|(id, _)| UnregisterRequest {
                cluster: live.cluster.clone(),
                broker_addr: live.addr.clone(),
                broker_name: b.name.clone(),
                broker_id: *id,
            })
    }

    /// Live brokers past their deadline, each reported once, from at most `limit` bucket
    /// entries; with the entries examined, and whether due ones remain.
    pub fn expire_silent_brokers(
        &mut self,
        now_ms: u64,
        limit: usize,
    ) -> (Vec<ExpiredBroker>, usize, bool) {
        let mut fired = Vec::new();
        let more = self
            .expiry
            .pop_due(now_ms, limit, |bucket, key| fired.push((bucket, key)));
        let (mut expired, examined) = (Vec::new(), fired.len());
        for (bucket, (live_id, generation)) in fired {
            let Some(live) = self.live.get(live_id) else {
                continue;
            };
            if live.generation != generation || live.expiry != Expiry::Scheduled(bucket) {
                continue; // stale bucket entry
            }
            let deadline = live.last_update_ms.saturating_add(live.timeout_ms);
            if deadline < now_ms {
                let silent_ms = now_ms - live.last_update_ms;
                let conn = live.conn;
                self.live[live_id].expiry = Expiry::Reported;
                match self.unregister_request_for(live_id) {
                    Some(request) => expired.push(ExpiredBroker {
                        request,
                        silent_ms,
                        conn,
                    }),
                    None => {
                        // No broker data names this address: nothing routes to it.
                        self.remove_live(live_id);
                    }
                }
            } else {
                self.live[live_id].expiry = Expiry::Unscheduled;
                self.arm_expiry(live_id);
            }
        }
        (expired, examined, more)
    }

    pub fn rearm(&mut self, cluster: &str, addr: &str, now_ms: u64) {
        if let Some(id) = self.live_id(cluster, addr) {
            let generation = self.live[id].generation;
            let b = self.expiry.schedule(now_ms, (id, generation));
            self.live[id].expiry = Expiry::Scheduled(b);
        }
    }

    /// Java's onChannelDestroy, for every broker registered over `conn` (not only the first).
    pub fn connection_closed(&mut self, conn: ConnId) -> Vec<UnregisterRequest> {
        let Some(ids) = self.live_by_conn.remove(&conn) else {
            return Vec::new();
        };
        let mut requests = Vec::new();
        for id in ids {
            let Some(live) = self.live.get_mut(id) else {
                continue;
            };
            live.conn = None;
            live.connection_closed = true;
            // An expired broker's unregistration is already on its way.
            if live.expiry == Expiry::Reported {
                continue;
            }
            if let Some(r) = self.unregister_request_for(id) {
                requests.push(r);
            }
        }
        requests
    }

    /// Applies a de-duplicated batch of unregistrations (§5.5) in one go.
    pub fn unregister_batch(&mut self, batch: &[UnregisterRequest]) -> BatchOutcome {
        let mut outcome = BatchOutcome::default();
        for req in batch {
            self.unregister_step(req, usize::MAX, &mut outcome);
        }
        self.finish_unregistrations(&mut outcome);
        outcome
    }

    /// Applies `req` within `max_steps` ([`BROKER_STEPS`] for the request, one per topic queue
    /// entry dropped); true when applied. A request that would empty a group with more topics
    /// than that drops only what fits, each topic losing the group at once, and returns false:
    /// the caller comes back with it, holding route writers meanwhile.
    pub fn unregister_step(
        &mut self,
        req: &UnregisterRequest,
        max_steps: usize,
        outcome: &mut BatchOutcome,
    ) -> bool {
        let Some(fit) = max_steps.checked_sub(BROKER_STEPS) else {
            return false;
        };
        if let Some(b) = self.brokers.get_mut(&*req.broker_name) {
            let empties = b
                .data
                .broker_addrs
                .values()
                .all(|a| **a == *req.broker_addr);
            if empties && b.topics.len() > fit {
                let (id, keep) = (b.id, b.topics.len().saturating_sub(max_steps));
                for topic in b.topics.split_off(keep) {
                    self.drop_group_entry(id, &topic, outcome);
                }
                return false;
            }
        }
        outcome.steps += BROKER_STEPS;
        // 1. live entry and filter servers
        if self.remove_live_and_filter_servers(req) {
            outcome.brokers_removed += 1;
        }
        // 2. the address leaves its broker group (by address, whatever its id)
        if self.remove_broker_addr(req, &mut outcome.notifications) {
            // 3. a group left empty leaves its cluster
            self.remove_from_cluster(&req.cluster, &req.broker_name);
            self.remove_broker_group(&req.broker_name, outcome);
        } else {
            outcome.reduced.push(req.broker_name.clone());
        }
        true
    }

    /// After the last request of a batch (or of a part of one).
    pub fn finish_unregistrations(&mut self, outcome: &mut BatchOutcome) {
        if self.settings.support_acting_master {
            for name in std::mem::take(&mut outcome.reduced) {
                self.wipe_write_if_master_lost(&name);
            }
        }
        if !self.settings.notify_min_broker_id_changed {
            outcome.notifications.clear();
        }
        self.shrink_if_sparse();
    }

    /// §5.5 step 1; true when removed (not another broker name's: it took the address since).
    fn remove_live_and_filter_servers(&mut self, req: &UnregisterRequest) -> bool {
        let live = self.live_id(&req.cluster, &req.broker_addr);
        if let Some(l) = live {
            if self.live[l].broker_name != req.broker_name {
                return false;
            }
            self.remove_live(l);
        }
        if !self.filter_servers.is_empty() {
            let key = (req.cluster.to_string(), req.broker_addr.to_string());
            if self.filter_servers.remove(&key).is_some() {
                self.invalidate_broker_topics(&req.broker_name);
            }
        }
        live.is_some()
    }

    /// §5.5 step 2; returns whether the group is now empty.
    fn remove_broker_addr(
        &mut self,
        req: &UnregisterRequest,
        notifications: &mut Vec<MinIdNotification>,
    ) -> bool {
        let Some(b) = self.brokers.get_mut(&*req.broker_name) else {
            return false;
        };
        let addrs = &mut b.data.broker_addrs;
        let was_min = addrs.keys().next() == Some(&req.broker_id);
        let before = addrs.len();
        addrs.retain(|_, a| a.as_str() != &*req.broker_addr);
        if addrs.is_empty() {
            return true;
        }
        if was_min && b.data.enable_acting_master {
            if let Some((min_id, min_addr)) = addrs.iter().next() {
                notifications.push(MinIdNotification {
                    targets: addrs.values().cloned().collect(),
                    min_broker_id: *min_id,
                    min_broker_addr: min_addr.clone(),
                    offline_broker_addr: Some(req.broker_addr.to_string()),
                    ha_broker_addr: None,
                });
            }
        }
        if addrs.len() != before {
            self.invalidate_broker_topics(&req.broker_name);
        }
        false
    }

    fn remove_from_cluster(&mut self, cluster: &str, broker_name: &str) {
        let Some(set) = self.clusters.get_mut(cluster) else {
            return;
        };
        if set.remove(broker_name) {
            if set.is_empty() {
                self.clusters.remove(cluster);
            }
            self.cluster_groups_changed(cluster);
        }
    }

    fn remove_broker_group(&mut self, name: &str, outcome: &mut BatchOutcome) {
        let Some(b) = self.brokers.remove(name) else {
            return;
        };
        outcome.broker_groups_removed += 1;
        // Its queue entries all go below, so its id can be handed out again.
        self.broker_names.try_remove(b.id as usize);
        for topic in b.topics {
            self.drop_group_entry(b.id, &topic, outcome);
        }
    }

    fn drop_group_entry(&mut self, id: BrokerId, topic: &str, outcome: &mut BatchOutcome) {
        outcome.steps += 1;
        outcome.topics_removed += usize::from(self.drop_queue_entry(id, topic).1);
    }

    fn wipe_write_if_master_lost(&mut self, name: &str) {
        let Some(b) = self.brokers.get(name) else {
            return;
        };
        let no_master = min_broker_id(&b.data).is_some_and(|min| min > 0);
        if b.data.enable_acting_master && no_master {
            self.set_write_perm(name, false);
        }
    }
}
