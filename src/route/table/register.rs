//! A registration in Java's numbered steps (docs/protocol.md §5.2), and the unchanged check.

use super::super::model::{BrokerData, DataVersion, RegisterBody, TopicConfig};
use super::{
    BatchOutcome, BrokerEntry, BrokerId, ConnId, Expiry, LiveBroker, QueueSlot, RouteTable,
    UnregisterRequest, DEFAULT_HEARTBEAT_TIMEOUT_MS, PERM_WRITE,
};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyFingerprint {
    pub len: usize,
    pub header_crc: i64,
    pub hash: u64,
}

/// The REGISTER_BROKER header fields the registry keeps (docs/protocol.md §4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegisteringBroker<'a> {
    pub cluster: &'a str,
    pub broker_addr: &'a str,
    pub broker_name: &'a str,
    pub broker_id: i64,
    pub ha_server_addr: &'a str,
    pub zone_name: Option<&'a str>,
    pub heartbeat_timeout_ms: Option<u64>,
    /// `None` marks a 4.x broker.
    pub enable_acting_master: Option<bool>,
}

#[derive(Debug, Clone)]
pub struct RegisterRequest<'a> {
    pub broker: RegisteringBroker<'a>,
    pub conn: Option<ConnId>,
    pub now_ms: u64,
    pub fingerprint: BodyFingerprint,
}

#[derive(Debug, Clone, Copy)]
pub enum TopicsInput<'a> {
    /// The body is byte-identical to the last one applied for this broker.
    Unchanged,
    Body(&'a RegisterBody),
}

/// A NOTIFY_MIN_BROKER_ID_CHANGE to send (docs/protocol.md §3.5), off the loop thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinIdNotification {
    pub targets: Vec<String>,
    pub min_broker_id: i64,
    pub min_broker_addr: String,
    pub offline_broker_addr: Option<String>,
    pub ha_broker_addr: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegisterResult {
    pub ha_server_addr: Option<String>,
    pub master_addr: Option<String>,
    pub notification: Option<MinIdNotification>,
    pub first: bool,
    pub topics_changed: usize,
    /// Refused by the state-version fence (§5.2 step 6): SUCCESS with an empty header.
    pub fenced: bool,
    pub taken_over: Option<Takeover>,
}

#[derive(Debug, Clone)]
pub struct TopicSteps {
    name: Arc<str>,
    broker: BrokerId,
    put: PutRule,
    /// Topics the body no longer reports: their queue entries of this broker go first.
    stale: Vec<Arc<str>>,
    next_stale: usize,
    next: usize,
    pub changed: usize,
    /// The group's stamp after the last step (another: someone else wrote in between).
    stamp: u64,
    /// The live entry (slab id, generation) marked wholly applied after the last step.
    live: Option<(usize, u64)>,
}

impl TopicSteps {
    pub fn remaining(&self, body: &RegisterBody) -> usize {
        (self.stale.len() - self.next_stale) + body.topics.len().saturating_sub(self.next)
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct PutRule {
    /// All of them (a new group or DataVersion), or only topics the broker lacks.
    pub(super) all: bool,
    /// A prime slave standing in for its master: its topics are not writable.
    pub(super) clear_write: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Takeover {
    pub previous: UnregisterRequest,
    pub outcome: BatchOutcome,
}

impl RouteTable {
    /// The fingerprint of the body last applied for this broker, while the same bytes count as
    /// unchanged (no other writer of the group's entries since: Java puts back a delete).
    pub fn unchanged_fingerprint(&self, r: &RegisteringBroker<'_>) -> Option<BodyFingerprint> {
        let live = &self.live[self.live_id(r.cluster, r.broker_addr)?];
        let b = self.brokers.get(r.broker_name)?;
        let addr = b.data.broker_addrs.get(&r.broker_id).map(String::as_str);
        (addr == Some(r.broker_addr) && self.slots_stamp(b.id) == live.seen_stamp)
            .then_some(live.fingerprint)
            .flatten()
    }

    pub fn is_unchanged_body(&self, req: &RegisterRequest<'_>) -> bool {
        self.unchanged_fingerprint(&req.broker) == Some(req.fingerprint)
    }

    /// Removes stale queue entries, then puts topic configs, `max` in all; whether it is done.
    pub fn apply_topic_steps(
        &mut self,
        steps: &mut TopicSteps,
        body: &RegisterBody,
        max: usize,
    ) -> bool {
        let same_group = self
            .brokers
            .get(&*steps.name)
            .is_some_and(|b| b.id == steps.broker);
        if !same_group {
            return true;
        }
        if self.slots_stamp(steps.broker) != steps.stamp {
            // Someone else wrote the group's entries: the next registration is parsed.
            steps.live = None;
        }
        let stale_end = steps.next_stale.saturating_add(max).min(steps.stale.len());
        for i in steps.next_stale..stale_end {
            let topic = steps.stale[i].clone();
            if self.drop_queue_entry(steps.broker, &topic).0 {
                steps.changed += 1;
            }
        }
        let max = max - (stale_end - steps.next_stale);
        steps.next_stale = stale_end;
        let end = steps.next.saturating_add(max).min(body.topics.len());
        for (_, tc) in body.topics.get(steps.next..end).unwrap_or_default() {
            if self.put_topic_config(steps, tc) {
                steps.changed += 1;
            }
        }
        steps.next = end;
        steps.stamp = self.slots_stamp(steps.broker);
        let done = end >= body.topics.len();
        if done {
            self.mark_applied(steps);
        }
        done
    }

    fn mark_applied(&mut self, steps: &TopicSteps) {
        let Some((live_id, generation)) = steps.live else {
            return;
        };
        if self.slots_stamp(steps.broker) != steps.stamp {
            return;
        }
        if let Some(live) = self.live.get_mut(live_id) {
            if live.generation == generation {
                live.seen_stamp = steps.stamp;
            }
        }
    }

    /// Java's registerBroker (§5.2) without the bugs docs/compatibility.md lists; the topic
    /// configs are left to [`RouteTable::apply_topic_steps`] (`None`: none to put).
    pub fn register_broker(
        &mut self,
        req: &RegisterRequest<'_>,
        topics_in: TopicsInput<'_>,
    ) -> (RegisterResult, Option<TopicSteps>) {
        let mut steps = None;
        let mut result = RegisterResult::default();
        let r = &req.broker;
        let (name, addr, id) = (r.broker_name, r.broker_addr, r.broker_id);
        // 0. (not Java's) an address belongs to one broker name per cluster
        result.taken_over = self.take_over_address(r);
        // 1. cluster -> broker names
        self.add_to_cluster(r.cluster, name);
        // 2. broker data, created on the group's first registration
        let mut register_first = self.create_broker_if_absent(r);
        let Some(b) = self.brokers.get_mut(name) else {
            return (result, None);
        };
        // 3. acting-master flag and zone
        let mut broker_changed = set_acting_master_and_zone(&mut b.data, r);
        // 4. minimum id before this registration
        let is_min_broker_id_changed = id < min_broker_id(&b.data).unwrap_or(0);
        // 5. slave <-> master switch: an address lives under one id only
        broker_changed |= drop_addr_under_other_ids(&mut b.data, addr, id);
        // 6. state-version fence: an older incarnation may not replace a newer one
        let addr_of_id = b.data.broker_addrs.get(&id).cloned();
        let incoming_version = self.incoming_version(r, topics_in);
        if self.fence_older_incarnation(r, addr_of_id.as_deref(), incoming_version) {
            if broker_changed {
                self.invalidate_broker_topics(name);
            }
            result.fenced = true;
            return (result, None);
        }
        // 7. (Java refuses a first registration carrying exactly one topic; we do not.)
        // 8. id -> addr
        let old_addr = self.put_broker_addr(r);
        broker_changed |= old_addr.as_deref() != Some(addr);
        register_first |= old_addr.is_none();
        if broker_changed {
            self.invalidate_broker_topics(name);
        }
        // 9./10. topic configs and static-topic mappings, from the master or the prime slave
        if let TopicsInput::Body(body) = topics_in {
            steps = self.plan_topics(r, body, register_first, incoming_version);
        }
        // 11. live entry, bound to the connection the registration came on
        result.first = self.refresh_live(req, topics_in, incoming_version);
        if let Some(steps) = steps.as_mut() {
            // The steps still to come tell it when the body is wholly applied.
            let live = self.live_id(r.cluster, r.broker_addr);
            steps.live = live.map(|l| (l, self.live[l].generation));
        }
        // 12. filter servers
        if let TopicsInput::Body(RegisterBody {
            filter_servers: Some(list),
            ..
        }) = topics_in
        {
            self.store_filter_servers(r, list);
        }
        // 13. a slave learns its master's addresses
        if let Some((master_addr, ha_server_addr)) = self.master_of_slave(r) {
            result.master_addr = Some(master_addr);
            result.ha_server_addr = Some(ha_server_addr);
        }
        // 14. min broker id notification (sent off the loop by the caller)
        if is_min_broker_id_changed && self.settings.notify_min_broker_id_changed {
            result.notification = self.min_id_notification(r);
        }
        (result, steps)
    }

    /// Step 0: another broker name's entry for (cluster, addr) is unregistered first.
    fn take_over_address(&mut self, r: &RegisteringBroker<'_>) -> Option<Takeover> {
        let live = self.live_id(r.cluster, r.broker_addr)?;
        if &*self.live[live].broker_name == r.broker_name {
            return None;
        }
        // None: no group lists the address any more; the live entry is refreshed in step 11.
        let previous = self.unregister_request_for(live)?;
        let outcome = self.unregister_batch(std::slice::from_ref(&previous));
        Some(Takeover { previous, outcome })
    }

    fn add_to_cluster(&mut self, cluster: &str, broker_name: &str) {
        if !self
            .clusters
            .get(cluster)
            .is_some_and(|s| s.contains(broker_name))
        {
            self.clusters
                .entry(cluster.to_string())
                .or_default()
                .insert(broker_name.to_string());
            self.cluster_groups_changed(cluster);
        }
    }

    fn create_broker_if_absent(&mut self, r: &RegisteringBroker<'_>) -> bool {
        if self.brokers.contains_key(r.broker_name) {
            return false;
        }
        let key: Arc<str> = Arc::from(r.broker_name);
        let id = self.broker_names.insert(key.clone()) as BrokerId;
        // A fresh stamp: no record made for an earlier group under this id matches it.
        self.touch_slots(id);
        let data = BrokerData {
            cluster: r.cluster.to_string(),
            broker_name: r.broker_name.to_string(),
            broker_addrs: BTreeMap::new(),
            zone_name: None,
            enable_acting_master: false,
        };
        let entry = BrokerEntry {
            name: key.clone(),
            id,
            data,
            topics: Vec::new(),
        };
        self.brokers.insert(key, entry);
        true
    }

    fn incoming_version(
        &self,
        r: &RegisteringBroker<'_>,
        topics_in: TopicsInput<'_>,
    ) -> DataVersion {
        match topics_in {
            TopicsInput::Body(body) => body.data_version,
            TopicsInput::Unchanged => self
                .live_id(r.cluster, r.broker_addr)
                .map(|l| self.live[l].data_version)
                .unwrap_or_default(),
        }
    }

    /// §5.2 step 6: refused when another address under this id is live with a newer
    /// stateVersion (not one whose connection closed: Java removes it at once).
    fn fence_older_incarnation(
        &mut self,
        r: &RegisteringBroker<'_>,
        addr_of_id: Option<&str>,
        incoming: DataVersion,
    ) -> bool {
        let Some(other) = addr_of_id.filter(|a| *a != r.broker_addr) else {
            return false;
        };
        let newer = self.live_id(r.cluster, other).is_some_and(|l| {
            !self.live[l].connection_closed
                && self.live[l].data_version.state_version > incoming.state_version
        });
        if newer {
            if let Some(l) = self.live_id(r.cluster, r.broker_addr) {
                self.remove_live(l);
            }
        }
        newer
    }

    fn put_broker_addr(&mut self, r: &RegisteringBroker<'_>) -> Option<String> {
        self.brokers.get_mut(r.broker_name).and_then(|b| {
            b.data
                .broker_addrs
                .insert(r.broker_id, r.broker_addr.to_string())
        })
    }

    /// §5.2 steps 9 and 10: unreported topics and mappings now; `None`: topics not taken.
    fn plan_topics(
        &mut self,
        r: &RegisteringBroker<'_>,
        body: &RegisterBody,
        register_first: bool,
        incoming: DataVersion,
    ) -> Option<TopicSteps> {
        let b = self.brokers.get(r.broker_name)?;
        let is_old = r.enable_acting_master.is_none();
        let is_master = r.broker_id == 0;
        let is_prime_slave = !is_old && !is_master && Some(r.broker_id) == min_broker_id(&b.data);
        if !(is_master || is_prime_slave) {
            return None;
        }
        let (name, broker) = (b.name.clone(), b.id);
        let clear_write = is_prime_slave && b.data.enable_acting_master;
        let live = self.live_id(r.cluster, r.broker_addr);
        let stored = live.map(|l| self.live[l].data_version);
        let version_changed = stored != Some(incoming);
        let all = register_first || version_changed;
        let stale =
            if self.settings.delete_topic_with_broker_registration && body.mappings.is_empty() {
                self.take_unreported_topics(&name, body)
            } else {
                Vec::new()
            };
        if version_changed || register_first {
            self.put_queue_mappings(body);
        }
        Some(TopicSteps {
            name,
            broker,
            put: PutRule { all, clear_write },
            stale,
            next_stale: 0,
            next: 0,
            changed: 0,
            stamp: self.slots_stamp(broker),
            live: None,
        })
    }

    /// §5.2 step 10 a: the broker's topics its body no longer reports, taken off its list.
    fn take_unreported_topics(&mut self, name: &Arc<str>, body: &RegisterBody) -> Vec<Arc<str>> {
        let Some(b) = self.brokers.get_mut(name) else {
            return Vec::new();
        };
        let reported: HashSet<&str> = body.topics.iter().map(|(k, _)| k.as_str()).collect();
        let (kept, stale): (Vec<Arc<str>>, Vec<Arc<str>>) = std::mem::take(&mut b.topics)
            .into_iter()
            .partition(|t| reported.contains(t.as_ref()));
        b.topics = kept;
        stale
    }

    /// §5.2 step 10 b for one topic config; returns whether anything changed.
    fn put_topic_config(&mut self, steps: &TopicSteps, tc: &TopicConfig) -> bool {
        let rule = steps.put;
        let mut perm = tc.perm;
        if rule.clear_write {
            perm &= !PERM_WRITE;
        }
        let slot = QueueSlot {
            broker: steps.broker,
            read_queue_nums: tc.read_queue_nums,
            write_queue_nums: tc.write_queue_nums,
            perm,
            topic_sys_flag: tc.topic_sys_flag,
        };
        self.put_queue(&tc.topic_name, slot, !rule.all)
    }

    fn put_queue_mappings(&mut self, body: &RegisterBody) {
        for (_, m) in &body.mappings {
            self.queue_mappings
                .entry(m.topic.clone())
                .or_default()
                .insert(m.bname.clone(), m.clone());
            self.cache.invalidate(&m.topic);
        }
    }

    /// §5.2 step 11: creates or refreshes the live entry and arms its expiry; true when new.
    fn refresh_live(
        &mut self,
        req: &RegisterRequest<'_>,
        topics_in: TopicsInput<'_>,
        incoming: DataVersion,
    ) -> bool {
        let r = &req.broker;
        let Some(b) = self.brokers.get(r.broker_name) else {
            return false;
        };
        let (seen_stamp, name_key) = (self.slots_stamp(b.id), b.name.clone());
        let (live_id, first) = match self.live_id(r.cluster, r.broker_addr) {
            Some(l) => (l, false),
            None => {
                let l = self.insert_live(req, name_key.clone(), incoming, seen_stamp);
                (l, true)
            }
        };
        let live = &mut self.live[live_id];
        live.last_update_ms = req.now_ms;
        live.timeout_ms = r
            .heartbeat_timeout_ms
            .unwrap_or(DEFAULT_HEARTBEAT_TIMEOUT_MS);
        live.data_version = incoming;
        live.broker_name = name_key;
        if live.ha_server_addr != r.ha_server_addr {
            live.ha_server_addr = r.ha_server_addr.to_string();
        }
        if let TopicsInput::Body(_) = topics_in {
            live.fingerprint = Some(req.fingerprint);
            live.seen_stamp = seen_stamp;
        }
        self.bind_connection(live_id, req.conn);
        self.live[live_id].connection_closed = false;
        self.arm_expiry(live_id);
        first
    }

    fn insert_live(
        &mut self,
        req: &RegisterRequest<'_>,
        broker_name: Arc<str>,
        incoming: DataVersion,
        seen_stamp: u64,
    ) -> usize {
        self.next_generation += 1;
        let live_id = self.live.insert(LiveBroker {
            cluster: Arc::from(req.broker.cluster),
            addr: Arc::from(req.broker.broker_addr),
            broker_name,
            last_update_ms: req.now_ms,
            timeout_ms: DEFAULT_HEARTBEAT_TIMEOUT_MS,
            data_version: incoming,
            conn: None,
            connection_closed: false,
            ha_server_addr: String::new(),
            fingerprint: None,
            version_text: None,
            seen_stamp,
            expiry: Expiry::Unscheduled,
            generation: self.next_generation,
        });
        self.live_by_addr
            .entry(req.broker.broker_addr.to_string())
            .or_default()
            .push(live_id);
        live_id
    }

    fn store_filter_servers(&mut self, r: &RegisteringBroker<'_>, list: &[String]) {
        let (cluster, addr) = (r.cluster, r.broker_addr);
        let key = (cluster.to_string(), addr.to_string());
        let changed = if list.is_empty() {
            self.filter_servers.remove(&key).is_some()
        } else if self.filter_servers.get(&key).map(Vec::as_slice) != Some(list) {
            self.filter_servers.insert(key, list.to_vec());
            true
        } else {
            false
        };
        if changed {
            self.invalidate_broker_topics(r.broker_name);
        }
    }

    fn master_of_slave(&self, r: &RegisteringBroker<'_>) -> Option<(String, String)> {
        if r.broker_id == 0 {
            return None;
        }
        let master_addr = self.brokers.get(r.broker_name)?.data.broker_addrs.get(&0)?;
        let master = self.live_id(r.cluster, master_addr)?;
        Some((
            master_addr.clone(),
            self.live[master].ha_server_addr.clone(),
        ))
    }

    fn min_id_notification(&self, r: &RegisteringBroker<'_>) -> Option<MinIdNotification> {
        let addrs = &self.brokers.get(r.broker_name)?.data.broker_addrs;
        // The others in the group (itself when alone).
        let targets = addrs
            .iter()
            .filter(|(k, _)| addrs.len() == 1 || **k != r.broker_id)
            .map(|(_, v)| v.clone())
            .collect();
        Some(MinIdNotification {
            targets,
            min_broker_id: r.broker_id,
            min_broker_addr: r.broker_addr.to_string(),
            offline_broker_addr: None,
            ha_broker_addr: Some(r.ha_server_addr.to_string()),
        })
    }
}

pub(super) fn set_acting_master_and_zone(data: &mut BrokerData, r: &RegisteringBroker<'_>) -> bool {
    // A 4.x broker (no flag at all) never acts as master.
    let acting = r.enable_acting_master == Some(true);
    let zone = r.zone_name;
    let changed = data.enable_acting_master != acting || data.zone_name.as_deref() != zone;
    data.enable_acting_master = acting;
    if data.zone_name.as_deref() != zone {
        data.zone_name = zone.map(str::to_string);
    }
    changed
}

pub(super) fn min_broker_id(data: &BrokerData) -> Option<i64> {
    data.broker_addrs.keys().next().copied()
}

/// §5.2 step 5: removes `addr` from every id but `id`; returns whether it was anywhere.
pub(super) fn drop_addr_under_other_ids(data: &mut BrokerData, addr: &str, id: i64) -> bool {
    let before = data.broker_addrs.len();
    data.broker_addrs.retain(|k, v| !(v == addr && *k != id));
    data.broker_addrs.len() != before
}
