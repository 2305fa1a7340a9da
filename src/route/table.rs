//! The route registry tables (Java's RouteInfoManager, docs/protocol.md §5), owned by the loop
//! thread as plain `HashMap`s: no locks, no snapshots.
//!
//! Besides Java's six tables this module keeps what makes the hot paths cheap:
//! * the route cache (`cache.rs`): per topic, the encoded route bodies for both key-quoting
//!   dialects; this module drops them precisely when something that topic's route is built
//!   from changes (see [`RouteTable::invalidate_topic`]);
//! * per broker name, the set of topics it serves, so that a broker's change or removal
//!   touches only its own topics, never the whole topic table;
//! * per live broker, the fingerprint of the last accepted registration body, so that the
//!   30-second steady-state registration is recognised without parsing;
//! * the topic map in shards (`topic_map.rs`), so that growing it never rehashes more than a
//!   shard's topics in one call;
//! * per broker group, the stamp of the last change of its queue entries, and per live broker
//!   the digests of the topic configs its last changed registration put (`applied.rs`), so
//!   that the next one skips those still in place without looking them up;
//! * deadline buckets of live brokers, so that an expiry scan costs O(brokers due);
//! * connection -> live brokers, so that a closed connection unregisters all of its brokers.
//!
//! Two rules Java lacks: an address belongs to one broker name per cluster (a registration at
//! an address another name holds takes it over, step 0 of [`RouteTable::register_broker`]),
//! and the registry's size is bounded (`bounds`, checked before a registration is applied).

use super::cache::RouteCache;
use super::keyed_hash::KeyedState;
use super::model::{
    BrokerData, DataVersion, Dialect, MappingInfo, QueueData, RegisterBody, TopicConfig,
    TopicRouteData,
};
use crate::timer::DeadlineBuckets;
use bytes::Bytes;
use slab::Slab;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

mod applied;
mod bounds;
mod topic_map;

use applied::AppliedTopics;

pub use bounds::{BoundExceeded, RouteBounds};
use topic_map::TopicMap;

/// Identifies the connection a request arrived on (the server's slab token).
pub type ConnId = usize;

/// `PermName` bits.
pub const PERM_WRITE: i32 = 2;
pub const PERM_READ: i32 = 4;
/// TopicSysFlag bits.
pub const FLAG_UNIT: i32 = 1;
pub const FLAG_UNIT_SUB: i32 = 2;

/// Java's default broker expiry when a registration carries no `heartbeatTimeoutMillis`.
pub const DEFAULT_HEARTBEAT_TIMEOUT_MS: u64 = 120_000;

/// Topic prefix excluded from the acting-master rewrite (docs/protocol.md §5.7 step 6).
const SYNC_BROKER_MEMBER_PREFIX: &str = "rmq_sys_SYNC_BROKER_MEMBER_";

/// Settings that change route semantics; updated at run time from the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteSettings {
    pub support_acting_master: bool,
    pub delete_topic_with_broker_registration: bool,
    pub notify_min_broker_id_changed: bool,
    /// Upper bound on the bytes held by the route cache; past it the oldest entries go.
    pub cache_max_bytes: usize,
}

impl Default for RouteSettings {
    fn default() -> Self {
        RouteSettings {
            support_acting_master: false,
            delete_topic_with_broker_registration: false,
            notify_min_broker_id_changed: false,
            cache_max_bytes: 4 << 20,
        }
    }
}

/// Small id of a broker group (its slot in `RouteTable::broker_names`).
type BrokerId = u32;

/// One broker group's queues in one topic: 20 bytes. The broker group is a small id rather
/// than its name, since a registry holds a hundred thousand of these.
#[derive(Debug, Clone, PartialEq, Eq)]
struct QueueSlot {
    broker: BrokerId,
    read_queue_nums: i32,
    write_queue_nums: i32,
    perm: i32,
    topic_sys_flag: i32,
}

impl QueueSlot {
    fn to_queue_data(&self, names: &Slab<Arc<str>>) -> QueueData {
        QueueData {
            broker_name: names
                .get(self.broker as usize)
                .map(|n| n.to_string())
                .unwrap_or_default(),
            read_queue_nums: self.read_queue_nums,
            write_queue_nums: self.write_queue_nums,
            perm: self.perm,
            topic_sys_flag: self.topic_sys_flag,
        }
    }
}

/// Topics served by more broker groups than this get a name -> position index, so that
/// inserting or removing one group stays O(1) even for the system topics every broker
/// registers (TBW102, SELF_TEST_TOPIC, ...), which hold one entry per broker group.
const QUEUE_INDEX_THRESHOLD: usize = 16;

#[derive(Debug, Default)]
struct TopicEntry {
    /// One entry per broker group, in no particular order (Java's is hash order). Sized
    /// exactly: most topics have one or two broker groups.
    queues: Vec<QueueSlot>,
    /// broker group -> position in `queues`, kept only for broad topics; boxed so that the
    /// others (nearly all) pay 8 bytes for it rather than 48.
    #[allow(clippy::box_collection)]
    index: Option<Box<HashMap<BrokerId, usize, KeyedState>>>,
}

/// What [`TopicEntry::put`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Put {
    Unchanged,
    Replaced,
    Added,
}

impl TopicEntry {
    fn position(&self, broker: BrokerId) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(&broker).copied(),
            None => self.queues.iter().position(|q| q.broker == broker),
        }
    }

    /// Inserts or replaces the entry of `slot`'s broker (only inserts it when `only_if_absent`);
    /// says what happened.
    fn put(&mut self, slot: QueueSlot, only_if_absent: bool) -> Put {
        match self.position(slot.broker) {
            Some(_) if only_if_absent => Put::Unchanged,
            Some(i) if self.queues[i] == slot => Put::Unchanged,
            Some(i) => {
                self.queues[i] = slot;
                Put::Replaced
            }
            None => {
                let at = self.queues.len();
                if let Some(index) = self.index.as_mut() {
                    index.insert(slot.broker, at);
                }
                self.queues.reserve_exact(1);
                self.queues.push(slot);
                if self.index.is_none() && self.queues.len() > QUEUE_INDEX_THRESHOLD {
                    let index = self
                        .queues
                        .iter()
                        .enumerate()
                        .map(|(i, q)| (q.broker, i))
                        .collect();
                    self.index = Some(Box::new(index));
                }
                Put::Added
            }
        }
    }

    /// Removes a broker's entry in O(1) (swap with the last); returns whether it existed.
    fn remove(&mut self, broker: BrokerId) -> bool {
        let Some(i) = self.position(broker) else {
            return false;
        };
        self.queues.swap_remove(i);
        let moved = self.queues.get(i).map(|q| q.broker);
        if self.queues.len() <= QUEUE_INDEX_THRESHOLD / 2 {
            self.index = None;
        } else if let Some(index) = self.index.as_mut() {
            index.remove(&broker);
            if let Some(m) = moved {
                index.insert(m, i);
            }
        }
        true
    }
}

#[derive(Debug)]
struct BrokerEntry {
    name: Arc<str>,
    /// This group's id in queue entries.
    id: BrokerId,
    data: BrokerData,
    /// Topics that hold a queue entry for this broker name.
    /// A plain vector (no duplicates by construction): a hash set of a hundred names costs
    /// twice the memory, and lookups by topic here are rare (admin deletes).
    topics: Vec<Arc<str>>,
}

#[derive(Debug)]
struct LiveBroker {
    cluster: Arc<str>,
    addr: Arc<str>,
    /// Broker name of the latest registration from this address.
    broker_name: Arc<str>,
    last_update_ms: u64,
    timeout_ms: u64,
    data_version: DataVersion,
    conn: Option<ConnId>,
    /// The connection of its latest registration has closed: its unregistration is queued.
    connection_closed: bool,
    ha_server_addr: String,
    /// (body length, header bodyCrc32, body fingerprint) of the last fully applied body.
    fingerprint: Option<BodyFingerprint>,
    /// What its last complete apply with rule "all" put (`applied`), for the next one to skip.
    applied: AppliedTopics,
    /// QUERY_DATA_VERSION's reply body: the stored DataVersion it was encoded from and its
    /// text ([`RouteTable::query_data_version`]).
    version_text: Option<(DataVersion, Bytes)>,
    /// The group's write stamp (`RouteTable::slot_stamps`) when the body was last applied: a
    /// byte-identical body is taken as unchanged only while no one has written the group's
    /// queue entries since (Java's per-topic "changed" rule re-adds a topic an admin delete
    /// removed, even with an unchanged dataVersion).
    seen_stamp: u64,
    /// Where this entry stands in the deadline buckets.
    expiry: Expiry,
    generation: u64,
}

/// A live broker's place in the expiry schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    /// In no bucket: just registered, or its bucket fired while it was still alive.
    Unscheduled,
    /// In this bucket; its entries in other buckets are stale.
    Scheduled(u64),
    /// Found silent and reported: its unregistration is on its way, so it is not rescheduled
    /// (unless it registers again, or the unregistration could not be queued).
    Reported,
}

/// Identity of a registration body, compared to recognise an unchanged one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyFingerprint {
    pub len: usize,
    pub header_crc: i64,
    pub hash: u64,
}

/// Header fields of a REGISTER_BROKER request.
#[derive(Debug, Clone)]
pub struct RegisterRequest<'a> {
    pub cluster: &'a str,
    pub broker_addr: &'a str,
    pub broker_name: &'a str,
    pub broker_id: i64,
    pub ha_server_addr: &'a str,
    pub zone_name: Option<&'a str>,
    pub heartbeat_timeout_ms: Option<u64>,
    /// `None` marks a 4.x broker.
    pub enable_acting_master: Option<bool>,
    pub conn: Option<ConnId>,
    pub now_ms: u64,
    pub fingerprint: BodyFingerprint,
}

/// The topic part of a registration.
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

/// What a registration produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegisterResult {
    pub ha_server_addr: Option<String>,
    pub master_addr: Option<String>,
    pub notification: Option<MinIdNotification>,
    /// First registration of this (cluster, addr): log at info.
    pub first: bool,
    /// Topic queue entries added, changed or removed: log at info.
    pub topics_changed: usize,
    /// Refused by the state-version fence (§5.2 step 6): SUCCESS with an empty header.
    pub fenced: bool,
    /// The address was another broker's, and was taken from it (step 0).
    pub taken_over: Option<Takeover>,
}

/// The topic configs of a registration still to be put (see
/// [`RouteTable::register_broker_in_steps`]).
#[derive(Debug, Clone)]
pub struct TopicSteps {
    name: Arc<str>,
    broker: BrokerId,
    put: PutRule,
    /// Topics the body no longer reports (`deleteTopicWithBrokerRegistration`): their queue
    /// entry of this broker goes, before any topic config is put, as in a one-go apply.
    stale: Vec<Arc<str>>,
    /// Index of the next stale topic.
    next_stale: usize,
    /// Index of the next topic config of the body.
    next: usize,
    /// Topic queue entries added, changed or removed so far.
    pub changed: usize,
    /// Digests of the configs the registering broker put at its last apply with rule "all",
    /// valid while the group's stamp is `stamp` (empty: nothing to skip).
    skip: Box<[u64]>,
    /// Where in `skip` the next config is expected.
    cursor: usize,
    /// The digests of this apply, for the live entry's next record (`None`: not recorded,
    /// as rule "all" does not apply or the body names a topic twice).
    record: Option<Vec<u64>>,
    /// The group's stamp after the last step (someone else's write in between voids `skip`
    /// and `record`).
    stamp: u64,
    /// The live entry (slab id, generation) told when the last step is done: its stamp of the
    /// applied body, and the record if there is one (`None`: nothing to tell).
    live: Option<(usize, u64)>,
    /// Topic configs skipped so far as already put (`skip`).
    skipped: usize,
}

impl TopicSteps {
    /// Queue entries still to remove and topic configs still to put.
    pub fn remaining(&self, body: &RegisterBody) -> usize {
        (self.stale.len() - self.next_stale) + body.topics.len().saturating_sub(self.next)
    }
}

/// Which of a registration's topic configs are put (§5.2 step 10 b).
#[derive(Debug, Clone, Copy)]
struct PutRule {
    /// All of them (first registration of the group, or a new DataVersion); otherwise only
    /// topics the broker does not serve yet.
    all: bool,
    /// A prime slave standing in for its master: its topics are not writable.
    clear_write: bool,
}

/// An address taken from the broker name that held it: that broker's entry for the address
/// was unregistered (as UNREGISTER_BROKER would), with what that removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Takeover {
    pub previous: UnregisterRequest,
    pub outcome: BatchOutcome,
}

/// One broker to unregister (explicitly, by expiry, or because its connection closed).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UnregisterRequest {
    pub cluster: Arc<str>,
    pub broker_addr: Arc<str>,
    pub broker_name: Arc<str>,
    pub broker_id: i64,
}

/// Why a broker is being removed; carried with the request for the log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemovalReason {
    Unregister,
    Expired { silent_ms: u64 },
    ConnectionClosed,
}

/// A broker found silent by [`RouteTable::expire_silent_brokers`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredBroker {
    pub request: UnregisterRequest,
    pub silent_ms: u64,
    pub conn: Option<ConnId>,
}

/// What one unregistration batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchOutcome {
    pub brokers_removed: usize,
    pub broker_groups_removed: usize,
    pub topics_removed: usize,
    pub notifications: Vec<MinIdNotification>,
}

/// The route registry.
#[derive(Debug)]
pub struct RouteTable {
    /// Topic and broker names (and addresses, below) are peer-chosen: keyed hash
    /// (`keyed_hash`), fast and seeded per process. The topic map is sharded, so that growing
    /// it never stalls the loop (`topic_map`).
    topics: TopicMap<TopicEntry, KeyedState>,
    brokers: HashMap<Arc<str>, BrokerEntry, KeyedState>,
    /// Broker group id -> name (ids are reused once a group and its queue entries are gone).
    broker_names: Slab<Arc<str>>,
    clusters: HashMap<String, BTreeSet<String>>,
    live: Slab<LiveBroker>,
    /// brokerAddr -> live slab ids (one per cluster the address registered in).
    live_by_addr: HashMap<String, Vec<usize>, KeyedState>,
    live_by_conn: HashMap<ConnId, Vec<usize>>,
    filter_servers: HashMap<(String, String), Vec<String>>,
    queue_mappings: HashMap<String, BTreeMap<String, MappingInfo>>,
    expiry: DeadlineBuckets<(usize, u64)>,
    next_generation: u64,
    /// Per broker group id: the table-wide write clock's value at the last change of any of
    /// the group's queue entries, by any path (see `applied`). Never reused: a new group gets
    /// a fresh value.
    slot_stamps: Vec<u64>,
    write_clock: u64,
    /// Keys of the digests of `applied`.
    digest_keys: KeyedState,
    cache: RouteCache,
    pub settings: RouteSettings,
}

impl RouteTable {
    pub fn new(settings: RouteSettings, expiry_granularity_ms: u64) -> Self {
        RouteTable {
            topics: TopicMap::default(),
            brokers: HashMap::default(),
            broker_names: Slab::new(),
            clusters: HashMap::new(),
            live: Slab::new(),
            live_by_addr: HashMap::default(),
            live_by_conn: HashMap::new(),
            filter_servers: HashMap::new(),
            queue_mappings: HashMap::new(),
            expiry: DeadlineBuckets::new(expiry_granularity_ms),
            next_generation: 0,
            slot_stamps: Vec::new(),
            write_clock: 0,
            digest_keys: KeyedState::default(),
            cache: RouteCache::default(),
            settings,
        }
    }

    // ---------------------------------------------------------------- lookups

    fn live_id(&self, cluster: &str, addr: &str) -> Option<usize> {
        self.live_by_addr
            .get(addr)?
            .iter()
            .copied()
            .find(|id| self.live.get(*id).is_some_and(|l| &*l.cluster == cluster))
    }

    pub fn topic_count(&self) -> usize {
        self.topics.len()
    }

    pub fn live_broker_count(&self) -> usize {
        self.live.len()
    }

    pub fn cluster_count(&self) -> usize {
        self.clusters.len()
    }

    pub fn broker_group_count(&self) -> usize {
        self.brokers.len()
    }

    /// True if the registration's body is exactly the one last applied for this broker, and
    /// nothing since then requires a full re-apply: the registration can skip parsing.
    pub fn is_unchanged_body(&self, req: &RegisterRequest<'_>) -> bool {
        let Some(id) = self.live_id(req.cluster, req.broker_addr) else {
            return false;
        };
        let live = &self.live[id];
        if live.fingerprint.as_ref() != Some(&req.fingerprint) {
            return false;
        }
        match self.brokers.get(req.broker_name) {
            Some(b) => {
                b.data.broker_addrs.get(&req.broker_id).map(String::as_str) == Some(req.broker_addr)
                    && self.slots_stamp(b.id) == live.seen_stamp
            }
            None => false,
        }
    }

    /// Whether the live broker (cluster, addr) is `broker_name`'s and registered over `conn`
    /// (the connection a broker's UNREGISTER_BROKER must come over when an allow-list is set).
    pub fn registered_over(
        &self,
        cluster: &str,
        addr: &str,
        broker_name: &str,
        conn: Option<ConnId>,
    ) -> bool {
        self.live_id(cluster, addr).is_some_and(|id| {
            let live = &self.live[id];
            conn.is_some() && live.conn == conn && &*live.broker_name == broker_name
        })
    }

    /// Stored DataVersion of a live broker (the tables' tests read it; QUERY_DATA_VERSION
    /// goes through [`RouteTable::query_data_version`]).
    #[cfg(test)]
    pub fn data_version(&self, cluster: &str, addr: &str) -> Option<DataVersion> {
        self.live_id(cluster, addr)
            .map(|id| self.live[id].data_version)
    }

    /// QUERY_DATA_VERSION in one lookup of (cluster, addr): `answer` gets the live broker's
    /// stored DataVersion and its text as [`DataVersion::encode`] writes it (`None` for a
    /// broker not live), and when it returns `Ok` the broker's timestamp is refreshed as
    /// [`RouteTable::heartbeat`] does; a refused query (`Err`: a body that does not decode)
    /// refreshes nothing. O(1).
    ///
    /// The text is kept in the live entry with the version it was encoded from, and encoded
    /// again only when the stored version is another one (a registration changed it): a
    /// broker asks about the same version every 30 s, and encoding it was the larger part of
    /// what the reply added to a heartbeat's work.
    pub fn query_data_version<R, E>(
        &mut self,
        cluster: &str,
        addr: &str,
        now_ms: u64,
        answer: impl FnOnce(Option<(&DataVersion, &Bytes)>) -> Result<R, E>,
    ) -> Result<R, E> {
        let id = self.live_id(cluster, addr);
        let Some(live) = id.and_then(|id| self.live.get_mut(id)) else {
            return answer(None);
        };
        let text = match &mut live.version_text {
            Some((version, text)) if *version == live.data_version => text,
            _ => {
                let mut text = Vec::with_capacity(64);
                live.data_version.encode(&mut text);
                &live
                    .version_text
                    .insert((live.data_version, Bytes::from(text)))
                    .1
            }
        };
        let answered = answer(Some((&live.data_version, text)))?;
        live.last_update_ms = now_ms;
        Ok(answered)
    }

    /// Refreshes a live broker's timestamp (BROKER_HEARTBEAT). O(1).
    pub fn heartbeat(&mut self, cluster: &str, addr: &str, now_ms: u64) -> bool {
        match self.live_id(cluster, addr) {
            Some(id) => {
                self.live[id].last_update_ms = now_ms;
                true
            }
            None => false,
        }
    }

    // ---------------------------------------------------------------- cache

    /// Drops the cached route bodies of one topic.
    pub fn invalidate_topic(&mut self, topic: &str) {
        self.cache.invalidate(topic);
    }

    /// Drops every cached route (settings that affect all routes changed).
    pub fn invalidate_all(&mut self) {
        self.cache.clear();
    }

    fn invalidate_broker_topics(&mut self, broker_name: &str) {
        if let Some(b) = self.brokers.get(broker_name) {
            for topic in &b.topics {
                self.cache.invalidate(topic);
            }
        }
    }

    /// Topic route body in `dialect`, from cache or built and cached. `order_topic_conf`
    /// supplies the ORDER_TOPIC_CONFIG value when orderMessageEnable is on (asked only on a
    /// cache miss). `None` = TOPIC_NOT_EXIST.
    pub fn route_body(
        &mut self,
        topic: &str,
        dialect: Dialect,
        order_topic_conf: impl FnOnce() -> Option<String>,
    ) -> Option<Bytes> {
        // Only existing topics are cached: every removal of a topic invalidates it.
        if let Some(body) = self.cache.get(topic, dialect) {
            return Some(body.clone());
        }
        let mut route = self.pickup_route(topic)?;
        route.order_topic_conf = order_topic_conf();
        let mut out = Vec::with_capacity(256);
        route.encode(dialect, &mut out);
        let body = Bytes::from(out);
        let key = self.topics.get_key_value(topic)?.0.clone();
        let budget = self.settings.cache_max_bytes;
        self.cache.insert(key, dialect, body.clone(), budget);
        Some(body)
    }

    /// Java's pickupTopicRouteData (§5.7), without orderTopicConf. `None` when the topic is
    /// unknown or none of its brokers is known (never an empty `brokerDatas`).
    pub fn pickup_route(&self, topic: &str) -> Option<TopicRouteData> {
        let entry = self.topics.get(topic)?;
        let mut route = TopicRouteData {
            queue_datas: entry
                .queues
                .iter()
                .map(|q| q.to_queue_data(&self.broker_names))
                .collect(),
            ..TopicRouteData::default()
        };
        for q in &entry.queues {
            let Some(b) = self
                .broker_names
                .get(q.broker as usize)
                .and_then(|name| self.brokers.get(name.as_ref()))
            else {
                continue;
            };
            if !self.filter_servers.is_empty() {
                for addr in b.data.broker_addrs.values() {
                    if let Some(list) = self
                        .filter_servers
                        .get(&(b.data.cluster.clone(), addr.clone()))
                    {
                        route.filter_server_table.insert(addr.clone(), list.clone());
                    }
                }
            }
            route.broker_datas.push(b.data.clone());
        }
        if route.broker_datas.is_empty() {
            return None;
        }
        if let Some(m) = self.queue_mappings.get(topic) {
            route.topic_queue_mapping_by_broker =
                Some(m.iter().map(|(k, v)| (k.clone(), v.clone())).collect());
        }
        if self.settings.support_acting_master && !topic.starts_with(SYNC_BROKER_MEMBER_PREFIX) {
            apply_acting_master_rewrite(&mut route);
        }
        Some(route)
    }

    // ---------------------------------------------------------------- registration

    /// Java's registerBroker (§5.2): its numbered steps, in its order, minus the bugs listed in
    /// the README. Side effects of earlier steps stay when a later one returns, as in Java.
    pub fn register_broker(
        &mut self,
        req: &RegisterRequest<'_>,
        topics_in: TopicsInput<'_>,
    ) -> RegisterResult {
        self.register(req, topics_in, false).0
    }

    /// [`RouteTable::register_broker`] for a body too large to apply at once: everything but
    /// putting its topic configs is done now (removing unreported topics and static-topic
    /// mappings included); the topic configs are then put by [`RouteTable::apply_topic_steps`],
    /// a slice at a time. `None`: no topics to put (a slave's, a fenced registration).
    pub fn register_broker_in_steps(
        &mut self,
        req: &RegisterRequest<'_>,
        body: &RegisterBody,
    ) -> (RegisterResult, Option<TopicSteps>) {
        self.register(req, TopicsInput::Body(body), true)
    }

    /// Removes up to `max` more stale queue entries of a registration applied in steps, then
    /// puts topic configs with what is left of `max`; returns whether it is done. Each topic's
    /// entry changes in one step, so a route shows a topic as before the registration or as
    /// after it. A broker group removed meanwhile gets no more topics: done (the server lets no
    /// other change in until the last step; this is the table's own guard).
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
            // Someone else wrote the group's entries since the last step: nothing recorded
            // about them holds any more, and this apply is not the body's whole effect (the
            // next registration is parsed, whatever its bytes).
            steps.skip = Box::default();
            steps.record = None;
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
            self.store_applied(steps);
        }
        done
    }

    /// The stamp of group `id`'s queue entries (see `slot_stamps`).
    fn slots_stamp(&self, id: BrokerId) -> u64 {
        self.slot_stamps.get(id as usize).copied().unwrap_or(0)
    }

    /// Gives group `id`'s queue entries a fresh stamp: every change of them calls this, so
    /// that no record of what they held (`applied`) outlives the change.
    fn touch_slots(&mut self, id: BrokerId) {
        self.write_clock += 1;
        let i = id as usize;
        if self.slot_stamps.len() <= i {
            self.slot_stamps.resize(i + 1, 0);
        }
        self.slot_stamps[i] = self.write_clock;
    }

    /// Hands a complete apply's digests to the live entry that registered them, once it is
    /// known (`steps.live`), as long as the group's entries are still as the apply left them.
    fn store_applied(&mut self, steps: &mut TopicSteps) {
        let Some((live_id, generation)) = steps.live else {
            return;
        };
        if self.slots_stamp(steps.broker) != steps.stamp {
            return;
        }
        let Some(live) = self.live.get_mut(live_id) else {
            return;
        };
        if live.generation != generation {
            return;
        }
        // The body is applied: the same bytes again are unchanged while no one else writes
        // the group's entries (an apply in steps wrote them after step 11 took the stamp).
        live.seen_stamp = steps.stamp;
        if let Some(record) = steps.record.take() {
            live.applied = AppliedTopics {
                stamp: steps.stamp,
                digests: record.into_boxed_slice(),
            };
        }
    }

    fn register(
        &mut self,
        req: &RegisterRequest<'_>,
        topics_in: TopicsInput<'_>,
        in_steps: bool,
    ) -> (RegisterResult, Option<TopicSteps>) {
        let mut steps = None;
        let mut result = RegisterResult::default();
        let (name, addr, id) = (req.broker_name, req.broker_addr, req.broker_id);
        // 0. (not Java's) an address belongs to one broker name per cluster
        result.taken_over = self.take_over_address(req);
        // 1. cluster -> broker names
        self.add_to_cluster(req.cluster, name);
        // 2. broker data, created on the group's first registration
        let mut register_first = self.create_broker_if_absent(req);
        let Some(b) = self.brokers.get_mut(name) else {
            return (result, None);
        };
        // 3. acting-master flag and zone
        let mut broker_changed = set_acting_master_and_zone(&mut b.data, req);
        // 4. minimum id before this registration
        let is_min_broker_id_changed = id < min_broker_id(&b.data).unwrap_or(0);
        // 5. slave <-> master switch: an address lives under one id only
        broker_changed |= drop_addr_under_other_ids(&mut b.data, addr, id);
        // 6. state-version fence: an older incarnation may not replace a newer one
        let addr_of_id = b.data.broker_addrs.get(&id).cloned();
        let incoming_version = self.incoming_version(req, topics_in);
        if self.fence_older_incarnation(req, addr_of_id.as_deref(), incoming_version) {
            if broker_changed {
                self.invalidate_broker_topics(name);
            }
            result.fenced = true;
            return (result, None);
        }
        // 7. (Java refuses a first registration carrying exactly one topic; we do not.)
        // 8. id -> addr
        let old_addr = self.put_broker_addr(req);
        broker_changed |= old_addr.as_deref() != Some(addr);
        register_first |= old_addr.is_none();
        if broker_changed {
            self.invalidate_broker_topics(name);
        }
        // 9./10. topic configs and static-topic mappings, from the master or the prime slave
        let mut applied = None;
        if let TopicsInput::Body(body) = topics_in {
            let plan = self.plan_topics(req, body, register_first, incoming_version);
            if let Some(mut plan) = plan {
                if in_steps {
                    steps = Some(plan);
                } else {
                    self.apply_topic_steps(&mut plan, body, usize::MAX);
                    result.topics_changed = plan.changed;
                    applied = Some(plan);
                }
            }
        }
        // 11. live entry, bound to the connection the registration came on
        result.first = self.refresh_live(req, topics_in, incoming_version);
        self.bind_topic_record(req, steps.as_mut(), applied, result.first, topics_in);
        // 12. filter servers
        if let TopicsInput::Body(RegisterBody {
            filter_servers: Some(list),
            ..
        }) = topics_in
        {
            self.store_filter_servers(req, list);
        }
        // 13. a slave learns its master's addresses
        if let Some((master_addr, ha_server_addr)) = self.master_of_slave(req) {
            result.master_addr = Some(master_addr);
            result.ha_server_addr = Some(ha_server_addr);
        }
        // 14. min broker id notification (sent off the loop by the caller)
        if is_min_broker_id_changed && self.settings.notify_min_broker_id_changed {
            result.notification = self.min_id_notification(req);
        }
        (result, steps)
    }

    /// Tells the topic configs' plan which live entry its record goes to (step 11 may just have
    /// created it): when the last step is done, or now for a plan applied at once.
    ///
    /// Records are kept only between changed registrations, where they pay: none for a live
    /// entry's first registration (most are followed by unchanged ones), and an unchanged
    /// registration drops the one there is. So a fleet registering unchanged bodies, the
    /// common case, holds no digests at all.
    fn bind_topic_record(
        &mut self,
        req: &RegisterRequest<'_>,
        steps: Option<&mut TopicSteps>,
        applied: Option<TopicSteps>,
        first: bool,
        topics_in: TopicsInput<'_>,
    ) {
        let live_id = self.live_id(req.cluster, req.broker_addr);
        if let (TopicsInput::Unchanged, Some(l)) = (topics_in, live_id) {
            self.live[l].applied = AppliedTopics::default();
        }
        let live = live_id.map(|l| (l, self.live[l].generation));
        if let Some(s) = steps {
            s.live = live;
            s.record = s.record.take().filter(|_| !first);
        }
        if let Some(mut plan) = applied {
            plan.live = live;
            plan.record = plan.record.take().filter(|_| !first);
            self.store_applied(&mut plan);
        }
    }

    /// Step 0: when the live entry of (cluster, addr) belongs to another broker name, that
    /// broker's entry for the address is unregistered first, as UNREGISTER_BROKER would do it
    /// (its live entry, its address in its group, the group and its queue entries if that was
    /// the last address). Java only re-points the live entry, so the old group keeps routing
    /// to an address that serves another broker, and stays forever once that one leaves.
    fn take_over_address(&mut self, req: &RegisterRequest<'_>) -> Option<Takeover> {
        let live = self.live_id(req.cluster, req.broker_addr)?;
        if &*self.live[live].broker_name == req.broker_name {
            return None;
        }
        // None: no group lists the address any more; the live entry is refreshed in step 11.
        let previous = self.unregister_request_for(live)?;
        let outcome = self.unregister_batch(std::slice::from_ref(&previous));
        Some(Takeover { previous, outcome })
    }

    /// §5.2 step 1.
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
        }
    }

    /// §5.2 step 2; returns whether the broker group is new (`registerFirst`).
    fn create_broker_if_absent(&mut self, req: &RegisterRequest<'_>) -> bool {
        if self.brokers.contains_key(req.broker_name) {
            return false;
        }
        let key: Arc<str> = Arc::from(req.broker_name);
        let id = self.broker_names.insert(key.clone()) as BrokerId;
        // A fresh stamp: no record made for an earlier group under this id matches it.
        self.touch_slots(id);
        let data = BrokerData {
            cluster: req.cluster.to_string(),
            broker_name: req.broker_name.to_string(),
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

    /// The DataVersion this registration carries: the body's, or for an unchanged body the
    /// one stored when it was applied.
    fn incoming_version(
        &self,
        req: &RegisterRequest<'_>,
        topics_in: TopicsInput<'_>,
    ) -> DataVersion {
        match topics_in {
            TopicsInput::Body(body) => body.data_version,
            TopicsInput::Unchanged => self
                .live_id(req.cluster, req.broker_addr)
                .map(|l| self.live[l].data_version)
                .unwrap_or_default(),
        }
    }

    /// §5.2 step 6: when another address, registered under this id, is live with a newer
    /// stateVersion, this registration is refused and its live entry dropped. A live entry
    /// whose connection has closed does not count: its removal is queued and applies before
    /// anything that arrives after the close (Java queues the same removal; its batch thread
    /// takes it at once, so a registration that follows a close finds it gone).
    fn fence_older_incarnation(
        &mut self,
        req: &RegisterRequest<'_>,
        addr_of_id: Option<&str>,
        incoming: DataVersion,
    ) -> bool {
        let Some(other) = addr_of_id.filter(|a| *a != req.broker_addr) else {
            return false;
        };
        let newer = self.live_id(req.cluster, other).is_some_and(|l| {
            !self.live[l].connection_closed
                && self.live[l].data_version.state_version > incoming.state_version
        });
        if newer {
            if let Some(l) = self.live_id(req.cluster, req.broker_addr) {
                self.remove_live(l);
            }
        }
        newer
    }

    /// §5.2 step 8; returns the address previously registered under the id.
    fn put_broker_addr(&mut self, req: &RegisterRequest<'_>) -> Option<String> {
        self.brokers.get_mut(req.broker_name).and_then(|b| {
            b.data
                .broker_addrs
                .insert(req.broker_id, req.broker_addr.to_string())
        })
    }

    /// §5.2 steps 9 and 10: topic configs (10 a/b) and static-topic mappings (10 c), taken
    /// only from the master or the prime slave. Removes the topics the body no longer reports
    /// (`deleteTopicWithBrokerRegistration`) and puts the mappings now; returns what is left:
    /// putting the topic configs (`None`: this broker's topics are not taken).
    fn plan_topics(
        &mut self,
        req: &RegisterRequest<'_>,
        body: &RegisterBody,
        register_first: bool,
        incoming: DataVersion,
    ) -> Option<TopicSteps> {
        let b = self.brokers.get(req.broker_name)?;
        let is_old = req.enable_acting_master.is_none();
        let is_master = req.broker_id == 0;
        let is_prime_slave = !is_old && !is_master && Some(req.broker_id) == min_broker_id(&b.data);
        if !(is_master || is_prime_slave) {
            return None;
        }
        let (name, broker) = (b.name.clone(), b.id);
        let clear_write = is_prime_slave && b.data.enable_acting_master;
        let live = self.live_id(req.cluster, req.broker_addr);
        let stored = live.map(|l| self.live[l].data_version);
        let version_changed = stored != Some(incoming);
        let all = register_first || version_changed;
        // The last record goes in any case: a put-if-absent apply leaves entries the record
        // knows nothing of (and this apply makes the next one).
        let previous = live
            .map(|l| std::mem::take(&mut self.live[l].applied))
            .unwrap_or_default();
        let stamp = self.slots_stamp(broker);
        // Skipping is sound only when each topic is put once: a body whose map keys and
        // topic names differ may name a topic twice (Java puts both; the last one stays).
        let once = all && body.topics.iter().all(|(k, tc)| *k == tc.topic_name);
        let skip = if once && previous.stamp == stamp {
            previous.digests
        } else {
            Box::default()
        };
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
            skip,
            cursor: 0,
            record: once.then(|| Vec::with_capacity(body.topics.len())),
            stamp,
            live: None,
            skipped: 0,
        })
    }

    /// §5.2 step 10 a: the broker's topics its body no longer reports, taken off its topic
    /// list now (one pass) and returned for their queue entries to go (see
    /// [`RouteTable::drop_queue_entry`]).
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

    /// §5.2 step 10 b for one topic config: put when the rule says all, or when the broker
    /// does not serve the topic yet; skipped without a lookup when the broker's last apply
    /// put exactly this and nothing changed the group's entries since (`applied`). Returns
    /// whether anything changed.
    fn put_topic_config(&mut self, steps: &mut TopicSteps, tc: &TopicConfig) -> bool {
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
        if let Some(record) = steps.record.as_mut() {
            let fields = [
                slot.read_queue_nums,
                slot.write_queue_nums,
                slot.perm,
                slot.topic_sys_flag,
            ];
            let d = applied::digest(&self.digest_keys, &tc.topic_name, fields);
            record.push(d);
            if applied::take_match(&steps.skip, &mut steps.cursor, d) {
                steps.skipped += 1;
                return false;
            }
        }
        self.put_queue(&tc.topic_name, slot, !rule.all)
    }

    /// §5.2 step 10 c.
    fn put_queue_mappings(&mut self, body: &RegisterBody) {
        for (_, m) in &body.mappings {
            self.queue_mappings
                .entry(m.topic.clone())
                .or_default()
                .insert(m.bname.clone(), m.clone());
            self.cache.invalidate(&m.topic);
        }
    }

    /// §5.2 step 11: creates or refreshes the live entry of (cluster, addr), binds it to the
    /// registration's connection and (re)arms its expiry. Returns whether it is new.
    fn refresh_live(
        &mut self,
        req: &RegisterRequest<'_>,
        topics_in: TopicsInput<'_>,
        incoming: DataVersion,
    ) -> bool {
        let Some(b) = self.brokers.get(req.broker_name) else {
            return false;
        };
        let (seen_stamp, name_key) = (self.slots_stamp(b.id), b.name.clone());
        let (live_id, first) = match self.live_id(req.cluster, req.broker_addr) {
            Some(l) => (l, false),
            None => {
                let l = self.insert_live(req, name_key.clone(), incoming, seen_stamp);
                (l, true)
            }
        };
        let live = &mut self.live[live_id];
        live.last_update_ms = req.now_ms;
        live.timeout_ms = req
            .heartbeat_timeout_ms
            .unwrap_or(DEFAULT_HEARTBEAT_TIMEOUT_MS);
        live.data_version = incoming;
        if live.broker_name != name_key {
            live.broker_name = name_key;
        }
        if live.ha_server_addr != req.ha_server_addr {
            live.ha_server_addr = req.ha_server_addr.to_string();
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
            cluster: Arc::from(req.cluster),
            addr: Arc::from(req.broker_addr),
            broker_name,
            last_update_ms: req.now_ms,
            timeout_ms: DEFAULT_HEARTBEAT_TIMEOUT_MS,
            data_version: incoming,
            conn: None,
            connection_closed: false,
            ha_server_addr: String::new(),
            fingerprint: None,
            applied: AppliedTopics::default(),
            version_text: None,
            seen_stamp,
            expiry: Expiry::Unscheduled,
            generation: self.next_generation,
        });
        self.live_by_addr
            .entry(req.broker_addr.to_string())
            .or_default()
            .push(live_id);
        live_id
    }

    /// §5.2 step 12: an empty list removes the broker's filter servers.
    fn store_filter_servers(&mut self, req: &RegisterRequest<'_>, list: &[String]) {
        let key = (req.cluster.to_string(), req.broker_addr.to_string());
        let changed = if list.is_empty() {
            self.filter_servers.remove(&key).is_some()
        } else if self.filter_servers.get(&key).map(Vec::as_slice) != Some(list) {
            self.filter_servers.insert(key, list.to_vec());
            true
        } else {
            false
        };
        if changed {
            self.invalidate_broker_topics(req.broker_name);
        }
    }

    /// §5.2 step 13: for a slave, its live master's (address, HA address).
    fn master_of_slave(&self, req: &RegisterRequest<'_>) -> Option<(String, String)> {
        if req.broker_id == 0 {
            return None;
        }
        let master_addr = self
            .brokers
            .get(req.broker_name)?
            .data
            .broker_addrs
            .get(&0)?;
        let master = self.live_id(req.cluster, master_addr)?;
        Some((
            master_addr.clone(),
            self.live[master].ha_server_addr.clone(),
        ))
    }

    /// §5.2 step 14: the NOTIFY_MIN_BROKER_ID_CHANGE for the group's other members (or, when
    /// the registering broker is alone, for itself).
    fn min_id_notification(&self, req: &RegisterRequest<'_>) -> Option<MinIdNotification> {
        let addrs = &self.brokers.get(req.broker_name)?.data.broker_addrs;
        let targets = if addrs.len() == 1 {
            addrs.values().cloned().collect()
        } else {
            addrs
                .iter()
                .filter(|(k, _)| **k != req.broker_id)
                .map(|(_, v)| v.clone())
                .collect()
        };
        Some(MinIdNotification {
            targets,
            min_broker_id: req.broker_id,
            min_broker_addr: req.broker_addr.to_string(),
            offline_broker_addr: None,
            ha_broker_addr: Some(req.ha_server_addr.to_string()),
        })
    }

    /// Puts a queue entry (only when the topic has none of its broker, if `only_if_absent`);
    /// returns whether anything changed. One lookup of the topic when it exists.
    fn put_queue(&mut self, topic: &str, slot: QueueSlot, only_if_absent: bool) -> bool {
        let broker = slot.broker;
        let key = match self.topics.get_mut(topic) {
            Some(entry) => match entry.put(slot, only_if_absent) {
                Put::Unchanged => return false,
                Put::Replaced => {
                    self.cache.invalidate(topic);
                    self.touch_slots(broker);
                    return true;
                }
                Put::Added => {
                    self.cache.invalidate(topic);
                    self.topics.get_key_value(topic).map(|(k, _)| k.clone())
                }
            },
            None => {
                let mut entry = TopicEntry::default();
                entry.put(slot, false);
                let key: Arc<str> = Arc::from(topic);
                self.topics.insert(key.clone(), entry);
                Some(key)
            }
        };
        self.touch_slots(broker);
        // Index the topic under its new broker (shares the table's key allocation).
        let name = self.broker_names.get(broker as usize).cloned();
        if let (Some(key), Some(b)) = (key, name.and_then(|n| self.brokers.get_mut(n.as_ref()))) {
            b.topics.push(key);
        }
        true
    }

    /// Removes group `id`'s queue entry from `topic`, dropping the topic once it has none;
    /// the group's own topic list is the caller's. Returns (entry removed, topic dropped).
    fn drop_queue_entry(&mut self, id: BrokerId, topic: &str) -> (bool, bool) {
        let Some(entry) = self.topics.get_mut(topic) else {
            return (false, false);
        };
        if !entry.remove(id) {
            return (false, false);
        }
        let now_empty = entry.queues.is_empty();
        self.touch_slots(id);
        self.cache.invalidate(topic);
        if now_empty {
            self.topics.remove(topic);
        }
        (true, now_empty)
    }

    /// Removes a broker's queue entry from a topic (dropping the topic when empty).
    fn remove_queue(&mut self, topic: &str, broker_name: &str) -> bool {
        let Some(id) = self.brokers.get(broker_name).map(|b| b.id) else {
            return false;
        };
        if !self.drop_queue_entry(id, topic).0 {
            return false;
        }
        if let Some(b) = self.brokers.get_mut(broker_name) {
            if let Some(i) = b.topics.iter().position(|t| &**t == topic) {
                b.topics.swap_remove(i);
            }
        }
        true
    }

    fn bind_connection(&mut self, live_id: usize, conn: Option<ConnId>) {
        let previous = self.live[live_id].conn;
        if previous == conn {
            return;
        }
        if let Some(p) = previous {
            detach(&mut self.live_by_conn, &p, live_id);
        }
        if let Some(c) = conn {
            self.live_by_conn.entry(c).or_default().push(live_id);
        }
        self.live[live_id].conn = conn;
    }

    fn arm_expiry(&mut self, live_id: usize) {
        let live = &self.live[live_id];
        let deadline = live.last_update_ms.saturating_add(live.timeout_ms);
        let bucket = self.expiry.bucket_of(deadline);
        // Heartbeats only push the deadline later: an entry already scheduled earlier
        // re-checks itself when it fires. Only an earlier deadline needs a new entry.
        let due_earlier = match live.expiry {
            Expiry::Scheduled(scheduled) => bucket < scheduled,
            Expiry::Unscheduled | Expiry::Reported => true,
        };
        if due_earlier {
            let generation = live.generation;
            let b = self.expiry.schedule(deadline, (live_id, generation));
            self.live[live_id].expiry = Expiry::Scheduled(b);
        }
    }

    fn remove_live(&mut self, live_id: usize) -> Option<LiveBroker> {
        let live = self.live.try_remove(live_id)?;
        detach(&mut self.live_by_addr, &*live.addr, live_id);
        if let Some(c) = live.conn {
            detach(&mut self.live_by_conn, &c, live_id);
        }
        Some(live)
    }

    // ---------------------------------------------------------------- expiry & removal

    /// The unregistration request Java's onChannelDestroy would submit for a live entry:
    /// brokerName and id are resolved through the broker table (§5.4).
    fn unregister_request_for(&self, live_id: usize) -> Option<UnregisterRequest> {
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

    /// Finds live brokers whose deadline has passed. Costs O(entries whose bucket fired).
    /// The live entries stay until the unregistration batch is applied (as in Java); they
    /// are not rescheduled, so each is reported once unless `rearm_after_failed_submit`.
    pub fn expire_silent_brokers(&mut self, now_ms: u64) -> Vec<ExpiredBroker> {
        self.expire_silent_brokers_limited(now_ms, usize::MAX).0
    }

    /// Like [`RouteTable::expire_silent_brokers`], looking at no more than `limit` bucket
    /// entries; the flag says whether due entries remain for another call.
    pub fn expire_silent_brokers_limited(
        &mut self,
        now_ms: u64,
        limit: usize,
    ) -> (Vec<ExpiredBroker>, bool) {
        let mut fired = Vec::new();
        let more = self
            .expiry
            .pop_due(now_ms, limit, |bucket, key| fired.push((bucket, key)));
        let mut expired = Vec::new();
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
                        // No broker data names this address any more: nothing routes to
                        // it, so the stale live entry can simply go.
                        self.remove_live(live_id);
                    }
                }
            } else {
                self.live[live_id].expiry = Expiry::Unscheduled;
                self.arm_expiry(live_id);
            }
        }
        (expired, more)
    }

    /// Puts an expired broker back in the deadline buckets when its unregistration could not be queued,
    /// so that the next scan tries again.
    pub fn rearm(&mut self, cluster: &str, addr: &str, now_ms: u64) {
        if let Some(id) = self.live_id(cluster, addr) {
            let generation = self.live[id].generation;
            let b = self.expiry.schedule(now_ms, (id, generation));
            self.live[id].expiry = Expiry::Scheduled(b);
        }
    }

    /// Unregistration requests for every broker whose registering connection is `conn`
    /// (Java's onChannelDestroy, for all of them rather than only the first).
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
            // An expired broker's unregistration is already on its way (the expiry closed
            // this connection): asking again would only fill the worker's queue.
            if live.expiry == Expiry::Reported {
                continue;
            }
            if let Some(r) = self.unregister_request_for(id) {
                requests.push(r);
            }
        }
        requests
    }

    /// Applies a de-duplicated batch of unregistrations in one pass (§5.5): steps 1-3 per
    /// request, then the queue entries of the groups that are gone (only their topics are
    /// visited), the write permission of groups that lost their master, and the
    /// notifications.
    pub fn unregister_batch(&mut self, batch: &[UnregisterRequest]) -> BatchOutcome {
        let mut outcome = BatchOutcome::default();
        let mut removed_names: Vec<Arc<str>> = Vec::new();
        let mut reduced_names: Vec<Arc<str>> = Vec::new();
        for req in batch {
            // 1. live entry and filter servers
            if self.remove_live_and_filter_servers(req) {
                outcome.brokers_removed += 1;
            }
            // 2. the address leaves its broker group (by address, whatever its id)
            let removed = self.remove_broker_addr(req, &mut outcome.notifications);
            // 3. a group left empty leaves its cluster
            if removed {
                self.remove_from_cluster(&req.cluster, &req.broker_name);
                removed_names.push(req.broker_name.clone());
            } else {
                reduced_names.push(req.broker_name.clone());
            }
        }
        for name in &removed_names {
            self.remove_broker_group(name, &mut outcome);
        }
        if self.settings.support_acting_master {
            for name in &reduced_names {
                self.wipe_write_if_master_lost(name);
            }
        }
        if !self.settings.notify_min_broker_id_changed {
            outcome.notifications.clear();
        }
        self.shrink_if_sparse();
        outcome
    }

    /// §5.5 step 1; returns whether a live entry was removed. A live entry (and the filter
    /// servers) of another broker name is left alone: the address was taken over since this
    /// request was made (an expiry or a close queued before the takeover), and the new owner
    /// must not lose its liveness to its predecessor's unregistration.
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

    /// §5.5 step 2; returns whether the group is now empty. When the group's lowest id
    /// leaves a group with acting master on, a notification for the rest is queued.
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

    /// §5.5 step 3.
    fn remove_from_cluster(&mut self, cluster: &str, broker_name: &str) {
        if let Some(set) = self.clusters.get_mut(cluster) {
            set.remove(broker_name);
            if set.is_empty() {
                self.clusters.remove(cluster);
            }
        }
    }

    /// Drops an emptied group and its queue entries, topic by topic (only the topics it
    /// served, never a scan of the whole table); topics left without entries go too.
    fn remove_broker_group(&mut self, name: &str, outcome: &mut BatchOutcome) {
        let Some(b) = self.brokers.remove(name) else {
            return;
        };
        outcome.broker_groups_removed += 1;
        // Its queue entries all go below, so its id can be handed out again.
        self.broker_names.try_remove(b.id as usize);
        for topic in b.topics {
            if self.drop_queue_entry(b.id, &topic).1 {
                outcome.topics_removed += 1;
            }
        }
    }

    /// With acting master on, a group whose master (id 0) is gone loses write permission.
    fn wipe_write_if_master_lost(&mut self, name: &str) {
        let Some(b) = self.brokers.get(name) else {
            return;
        };
        let no_master = min_broker_id(&b.data).is_some_and(|min| min > 0);
        if b.data.enable_acting_master && no_master {
            self.set_write_perm(name, false);
        }
    }

    // ---------------------------------------------------------------- admin operations

    /// WIPE (`enable` false: clear the write bit) or ADD (`enable` true: perm = READ|WRITE)
    /// write permission on every topic of a broker group (§5.9). Returns entries touched.
    pub fn set_write_perm(&mut self, broker_name: &str, enable: bool) -> usize {
        let Some(b) = self.brokers.get(broker_name) else {
            return 0;
        };
        let id = b.id;
        let topics: Vec<Arc<str>> = b.topics.to_vec();
        let mut count = 0;
        for topic in topics {
            let Some(entry) = self.topics.get_mut(topic.as_ref()) else {
                continue;
            };
            if let Some(i) = entry.position(id) {
                let q = &mut entry.queues[i];
                q.perm = if enable {
                    PERM_READ | PERM_WRITE
                } else {
                    q.perm & !PERM_WRITE
                };
                count += 1;
                self.invalidate_topic(&topic);
            }
        }
        if count > 0 {
            self.touch_slots(id);
        }
        count
    }

    /// DELETE_TOPIC_IN_NAMESRV (§5.10). `cluster` None/empty: the whole topic.
    pub fn delete_topic(&mut self, topic: &str, cluster: Option<&str>) -> bool {
        let names: Vec<String> = match cluster.filter(|c| !c.is_empty()) {
            None => match self.topics.get(topic) {
                Some(e) => e
                    .queues
                    .iter()
                    .filter_map(|q| self.broker_names.get(q.broker as usize))
                    .map(|n| n.to_string())
                    .collect(),
                None => return false,
            },
            Some(c) => match self.clusters.get(c) {
                Some(set) => set.iter().cloned().collect(),
                None => return false,
            },
        };
        let mut any = false;
        for name in names {
            any |= self.remove_queue(topic, &name);
        }
        self.shrink_if_sparse();
        any
    }

    /// REGISTER_TOPIC_IN_NAMESRV (§5.11). Returns whether anything was stored.
    pub fn register_topic(&mut self, topic: &str, queue_datas: &[QueueData]) -> bool {
        if queue_datas.is_empty() {
            return false;
        }
        let exists = self.topics.contains_key(topic);
        if !exists
            && queue_datas
                .iter()
                .any(|q| !self.brokers.contains_key(q.broker_name.as_str()))
        {
            return false;
        }
        let mut stored = false;
        for q in queue_datas {
            let Some(id) = self.brokers.get(q.broker_name.as_str()).map(|b| b.id) else {
                break; // Java aborts at the first unknown broker; earlier entries stay.
            };
            let slot = QueueSlot {
                broker: id,
                read_queue_nums: q.read_queue_nums,
                write_queue_nums: q.write_queue_nums,
                perm: q.perm,
                topic_sys_flag: q.topic_sys_flag,
            };
            self.put_queue(topic, slot, false);
            stored = true;
        }
        stored
    }

    /// Every topic name (206).
    pub fn topic_names(&self) -> impl Iterator<Item = &str> {
        self.topics.keys().map(|k| k.as_ref())
    }

    /// Topics having a queue entry for any broker of `cluster` (224).
    pub fn topics_of_cluster(&self, cluster: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        if let Some(names) = self.clusters.get(cluster) {
            for name in names {
                if let Some(b) = self.brokers.get(name.as_str()) {
                    out.extend(b.topics.iter().map(|t| t.to_string()));
                }
            }
        }
        out
    }

    /// Topics whose first queue entry's sysFlag passes `pred` (311/312/313, §5.13).
    pub fn topics_with_flag(&self, pred: impl Fn(i32) -> bool) -> Vec<&str> {
        self.topics
            .iter()
            .filter(|(_, e)| e.queues.first().is_some_and(|q| pred(q.topic_sys_flag)))
            .map(|(k, _)| k.as_ref())
            .collect()
    }

    /// System topic list (304): every cluster and broker name, and some broker address.
    pub fn system_topics(&self) -> (Vec<String>, Option<String>) {
        let mut names = BTreeSet::new();
        for (cluster, brokers) in &self.clusters {
            names.insert(cluster.clone());
            names.extend(brokers.iter().cloned());
        }
        let addr = self
            .brokers
            .values()
            .find_map(|b| b.data.broker_addrs.values().next().cloned());
        (names.into_iter().collect(), addr)
    }

    /// brokerAddrTable and clusterAddrTable (106).
    pub fn cluster_info(&self) -> super::model::ClusterInfo {
        super::model::ClusterInfo {
            broker_addr_table: self
                .brokers
                .values()
                .map(|b| (b.data.broker_name.clone(), b.data.clone()))
                .collect(),
            cluster_addr_table: self
                .clusters
                .iter()
                .map(|(c, names)| (c.clone(), names.iter().cloned().collect()))
                .collect(),
        }
    }

    /// Broker group member addresses (901); empty when unknown.
    pub fn broker_member_group(&self, broker_name: &str) -> BTreeMap<i64, String> {
        self.brokers
            .get(broker_name)
            .map(|b| b.data.broker_addrs.clone())
            .unwrap_or_default()
    }
}

/// Removes `live_id` from the list under `key`, and the list once empty.
fn detach<K, Q, S>(index: &mut HashMap<K, Vec<usize>, S>, key: &Q, live_id: usize)
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: std::hash::Hash + Eq + ?Sized,
    S: std::hash::BuildHasher,
{
    if let Some(ids) = index.get_mut(key) {
        ids.retain(|l| *l != live_id);
        if ids.is_empty() {
            index.remove(key);
        }
    }
}

/// §5.2 step 3; returns whether the broker data changed.
fn set_acting_master_and_zone(data: &mut BrokerData, req: &RegisterRequest<'_>) -> bool {
    // A 4.x broker (no flag at all) never acts as master.
    let acting = req.enable_acting_master == Some(true);
    let zone = req.zone_name;
    let changed = data.enable_acting_master != acting || data.zone_name.as_deref() != zone;
    data.enable_acting_master = acting;
    if data.zone_name.as_deref() != zone {
        data.zone_name = zone.map(str::to_string);
    }
    changed
}

/// The lowest broker id of a group (the master's, 0, when it is registered).
fn min_broker_id(data: &BrokerData) -> Option<i64> {
    data.broker_addrs.keys().next().copied()
}

/// §5.2 step 5: removes `addr` from every id but `id`; returns whether it was anywhere.
fn drop_addr_under_other_ids(data: &mut BrokerData, addr: &str, id: i64) -> bool {
    let before = data.broker_addrs.len();
    data.broker_addrs.retain(|k, v| !(v == addr && *k != id));
    data.broker_addrs.len() != before
}

/// §5.7 step 6 on a route copy: for groups with acting master on, no id 0 and a
/// non-writeable queue entry, the lowest-id address is presented as the master.
fn apply_acting_master_rewrite(route: &mut TopicRouteData) {
    let needs = route
        .broker_datas
        .iter()
        .any(|b| !b.broker_addrs.is_empty() && !b.broker_addrs.contains_key(&0));
    if !needs {
        return;
    }
    for b in route.broker_datas.iter_mut() {
        if b.broker_addrs.is_empty() || b.broker_addrs.contains_key(&0) || !b.enable_acting_master {
            continue;
        }
        let writeable = route
            .queue_datas
            .iter()
            .find(|q| q.broker_name == b.broker_name)
            .map(|q| q.perm & PERM_WRITE != 0);
        if writeable == Some(false) {
            if let Some((&min_id, _)) = b.broker_addrs.iter().next() {
                if let Some(addr) = b.broker_addrs.remove(&min_id) {
                    b.broker_addrs.insert(0, addr);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::model::TopicConfig;

    mod skip;

    fn fp(hash: u64) -> BodyFingerprint {
        BodyFingerprint {
            len: 1,
            header_crc: 0,
            hash,
        }
    }

    fn req<'a>(
        cluster: &'a str,
        name: &'a str,
        addr: &'a str,
        id: i64,
        now_ms: u64,
    ) -> RegisterRequest<'a> {
        RegisterRequest {
            cluster,
            broker_addr: addr,
            broker_name: name,
            broker_id: id,
            ha_server_addr: "ha:1",
            zone_name: None,
            heartbeat_timeout_ms: None,
            enable_acting_master: Some(false),
            conn: Some(1),
            now_ms,
            fingerprint: fp(now_ms),
        }
    }

    fn body(counter: i64, topics: &[(&str, i32)]) -> RegisterBody {
        RegisterBody {
            data_version: DataVersion {
                counter,
                state_version: 0,
                timestamp: 0,
            },
            topics: topics
                .iter()
                .map(|(t, perm)| {
                    (
                        t.to_string(),
                        TopicConfig {
                            topic_name: t.to_string(),
                            read_queue_nums: 4,
                            write_queue_nums: 4,
                            perm: *perm,
                            topic_sys_flag: 0,
                        },
                    )
                })
                .collect(),
            filter_servers: Some(Vec::new()),
            mappings: Vec::new(),
        }
    }

    fn table() -> RouteTable {
        RouteTable::new(RouteSettings::default(), 1000)
    }

    fn unreg(cluster: &str, name: &str, addr: &str, id: i64) -> UnregisterRequest {
        UnregisterRequest {
            cluster: cluster.into(),
            broker_addr: addr.into(),
            broker_name: name.into(),
            broker_id: id,
        }
    }

    #[test]
    fn first_registration_creates_cluster_broker_live_and_queue_entries() {
        let mut t = table();
        let r = t.register_broker(
            &req("c", "b", "a:1", 0, 10),
            TopicsInput::Body(&body(1, &[("T", 6)])),
        );
        assert!(r.first);
        assert_eq!(r.topics_changed, 1);
        let route = t.pickup_route("T").unwrap();
        assert_eq!(
            route.broker_datas[0]
                .broker_addrs
                .get(&0)
                .map(String::as_str),
            Some("a:1")
        );
        assert_eq!(route.queue_datas[0].perm, 6);
        assert_eq!(
            t.cluster_info().cluster_addr_table["c"],
            vec!["b".to_string()]
        );
        assert_eq!(t.live_broker_count(), 1);
        assert_eq!(t.data_version("c", "a:1").unwrap().counter, 1);
    }

    #[test]
    fn slave_gets_master_addresses_and_its_topics_are_ignored() {
        let mut t = table();
        t.register_broker(
            &req("c", "b", "m:1", 0, 0),
            TopicsInput::Body(&body(1, &[("T", 6)])),
        );
        let mut slave = req("c", "b", "s:1", 1, 0);
        slave.enable_acting_master = None; // a 4.x slave
        let r = t.register_broker(&slave, TopicsInput::Body(&body(1, &[("SlaveOnly", 6)])));
        assert_eq!(r.master_addr.as_deref(), Some("m:1"));
        assert_eq!(r.ha_server_addr.as_deref(), Some("ha:1"));
        assert!(t.pickup_route("SlaveOnly").is_none());
    }

    #[test]
    fn same_address_under_a_new_id_replaces_the_old_id() {
        let mut t = table();
        t.register_broker(
            &req("c", "b", "x:1", 1, 0),
            TopicsInput::Body(&body(1, &[("T", 6)])),
        );
        t.register_broker(
            &req("c", "b", "x:1", 0, 0),
            TopicsInput::Body(&body(1, &[("T", 6)])),
        );
        let addrs = t.broker_member_group("b");
        assert_eq!(addrs.len(), 1);
        assert_eq!(addrs.get(&0).map(String::as_str), Some("x:1"));
    }

    #[test]
    fn newer_state_version_fences_an_older_incarnation() {
        let mut t = table();
        let mut newer = body(1, &[("T", 6)]);
        newer.data_version.state_version = 5;
        t.register_broker(&req("c", "b", "new:1", 0, 0), TopicsInput::Body(&newer));
        let r = t.register_broker(
            &req("c", "b", "old:1", 0, 0),
            TopicsInput::Body(&body(1, &[("T", 6)])),
        );
        assert!(r.fenced);
        assert_eq!(
            t.broker_member_group("b").get(&0).map(String::as_str),
            Some("new:1")
        );
    }

    /// A new master registers right after the old one's connection closed, before the
    /// queued removal applies: the closed entry does not fence it, and the removal that
    /// follows takes only the old address.
    #[test]
    fn a_closed_connection_does_not_fence_the_next_master() {
        let mut t = table();
        let mut old = body(1, &[("T", 6)]);
        old.data_version.state_version = 2;
        t.register_broker(&req("c", "b", "old:1", 0, 0), TopicsInput::Body(&old));
        let removals = t.connection_closed(1);
        assert_eq!(removals.len(), 1);
        let mut new_master = req("c", "b", "new:1", 0, 0);
        new_master.conn = Some(2);
        let r = t.register_broker(&new_master, TopicsInput::Body(&body(1, &[("T", 6)])));
        assert!(!r.fenced, "stateVersion 0 after a closed stateVersion 2");
        t.unregister_batch(&removals);
        assert_eq!(
            t.broker_member_group("b").get(&0).map(String::as_str),
            Some("new:1")
        );
        // An open connection still fences (the rule is Java's).
        let mut stale = req("c", "b", "stale:1", 0, 0);
        stale.conn = Some(3);
        let mut newer = body(2, &[("T", 6)]);
        newer.data_version.state_version = 3;
        let mut again = new_master.clone();
        again.now_ms = 1;
        t.register_broker(&again, TopicsInput::Body(&newer));
        assert!(
            t.register_broker(&stale, TopicsInput::Body(&body(1, &[("T", 6)])))
                .fenced
        );
    }

    #[test]
    fn topic_configs_apply_only_when_the_data_version_changes() {
        let mut t = table();
        t.register_broker(
            &req("c", "b", "a:1", 0, 0),
            TopicsInput::Body(&body(1, &[("T", 6)])),
        );
        let r = t.register_broker(
            &req("c", "b", "a:1", 0, 1),
            TopicsInput::Body(&body(1, &[("T", 4)])),
        );
        assert_eq!(r.topics_changed, 0);
        assert_eq!(t.pickup_route("T").unwrap().queue_datas[0].perm, 6);
        let r = t.register_broker(
            &req("c", "b", "a:1", 0, 2),
            TopicsInput::Body(&body(2, &[("T", 4)])),
        );
        assert_eq!(r.topics_changed, 1);
        assert_eq!(t.pickup_route("T").unwrap().queue_datas[0].perm, 4);
    }

    #[test]
    fn route_cache_survives_steady_registrations_and_drops_on_change() {
        let mut t = table();
        let b = body(1, &[("T", 6)]);
        t.register_broker(&req("c", "b", "a:1", 0, 0), TopicsInput::Body(&b));
        let first = t.route_body("T", Dialect::Standard, || None).unwrap();
        assert!(t.is_unchanged_body(&req("c", "b", "a:1", 0, 0)));
        t.register_broker(&req("c", "b", "a:1", 0, 0), TopicsInput::Unchanged);
        let again = t.route_body("T", Dialect::Standard, || None).unwrap();
        assert_eq!(first.as_ptr(), again.as_ptr(), "served from the cache");
        // A new slave changes the broker data: the cached body is rebuilt.
        t.register_broker(&req("c", "b", "s:1", 1, 0), TopicsInput::Body(&b));
        let rebuilt = t.route_body("T", Dialect::Standard, || None).unwrap();
        assert_ne!(first, rebuilt);
        assert!(std::str::from_utf8(&rebuilt).unwrap().contains("s:1"));
        let legacy = t.route_body("T", Dialect::Legacy, || None).unwrap();
        assert!(std::str::from_utf8(&legacy)
            .unwrap()
            .contains("{0:\"a:1\",1:\"s:1\"}"));
    }

    /// Broker `b`'s body in churn round `round`: shared topics with queue counts and perm
    /// that move every round, plus a private topic of the round.
    fn churned_body(b: usize, round: i64) -> RegisterBody {
        let mut topics: Vec<(String, TopicConfig)> = (0..6)
            .map(|i| {
                let shift = (round + i + b as i64) % 3;
                (
                    format!("shared_{i}"),
                    1 + shift as i32,
                    [6, 2, 4][shift as usize],
                )
            })
            .chain([(format!("private_{b}_{round}"), 2, 6)])
            .map(|(name, queues, perm)| {
                let tc = TopicConfig {
                    topic_name: name.clone(),
                    read_queue_nums: queues,
                    write_queue_nums: queues + 1,
                    perm,
                    topic_sys_flag: 0,
                };
                (name, tc)
            })
            .collect();
        topics.rotate_left(round as usize % 7);
        let mut out = body(round, &[]);
        out.topics = topics;
        out
    }

    #[test]
    fn churned_registrations_serve_the_same_route_bytes_as_a_fresh_table() {
        let addrs = ["a:1", "a:2", "a:3"];
        let names = ["b0", "b1", "b2"];
        let mut churned = table();
        for round in 1..=5 {
            for b in 0..3 {
                let r = req("c", names[b], addrs[b], 0, round as u64);
                churned.register_broker(&r, TopicsInput::Body(&churned_body(b, round)));
            }
            // Fill the cache between rounds, so that stale bodies would be served if the
            // next round failed to drop them.
            for i in 0..6 {
                for dialect in [Dialect::Standard, Dialect::Legacy] {
                    churned.route_body(&format!("shared_{i}"), dialect, || None);
                }
            }
        }
        let mut fresh = table();
        for b in 0..3 {
            let r = req("c", names[b], addrs[b], 0, 5);
            fresh.register_broker(&r, TopicsInput::Body(&churned_body(b, 5)));
        }
        for b in 0..3 {
            for (topic, _) in churned_body(b, 5).topics {
                for dialect in [Dialect::Standard, Dialect::Legacy] {
                    let want = fresh.route_body(&topic, dialect, || None).unwrap();
                    let got = churned.route_body(&topic, dialect, || None).unwrap();
                    assert_eq!(got, want, "{topic} {dialect:?}");
                }
            }
            // As in Java, topics a broker stopped reporting stay until it goes.
            assert!(churned
                .route_body(&format!("private_{b}_1"), Dialect::Standard, || None)
                .is_some());
        }
    }

    #[test]
    fn cache_stays_within_its_byte_budget() {
        let mut t = RouteTable::new(
            RouteSettings {
                cache_max_bytes: 2000,
                ..RouteSettings::default()
            },
            1000,
        );
        let names: Vec<String> = (0..100).map(|i| format!("T{i}")).collect();
        let topics: Vec<(&str, i32)> = names.iter().map(|n| (n.as_str(), 6)).collect();
        t.register_broker(
            &req("c", "b", "a:1", 0, 0),
            TopicsInput::Body(&body(1, &topics)),
        );
        for n in &names {
            assert!(t.route_body(n, Dialect::Standard, || None).is_some());
        }
        assert!(t.cache.bytes() <= 2000);
    }

    #[test]
    fn heartbeats_keep_brokers_and_silence_expires_them_once() {
        let mut t = table();
        let mut r = req("c", "b", "a:1", 0, 0);
        r.heartbeat_timeout_ms = Some(10_000);
        t.register_broker(&r, TopicsInput::Body(&body(1, &[("T", 6)])));
        assert!(t.heartbeat("c", "a:1", 9_000));
        assert!(!t.heartbeat("c", "nope:1", 9_000));
        assert!(
            t.expire_silent_brokers(12_000).is_empty(),
            "heartbeat moved the deadline"
        );
        let expired = t.expire_silent_brokers(20_000);
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].request, unreg("c", "b", "a:1", 0));
        assert_eq!(expired[0].conn, Some(1));
        assert!(t.expire_silent_brokers(40_000).is_empty(), "reported once");
        t.rearm("c", "a:1", 40_000);
        assert_eq!(
            t.expire_silent_brokers(41_000).len(),
            1,
            "re-armed after a failed submit"
        );
    }

    /// What `query_data_version` hands out: the live broker's stored version and its text,
    /// encoded anew after a registration changed the version and for another broker taking
    /// over a freed slab id; nothing (and no refresh) for a broker not live; a refused answer
    /// refreshes nothing.
    #[test]
    fn query_data_version_gives_the_stored_version_and_its_current_text() {
        let mut t = table();
        let mut r = req("c", "b", "a:1", 0, 0);
        r.heartbeat_timeout_ms = Some(10_000);
        let seen = |t: &mut RouteTable, addr: &str, now_ms| {
            let answered = t.query_data_version("c", addr, now_ms, |stored| {
                Ok::<_, ()>(stored.map(|(v, text)| (*v, text.clone())))
            });
            answered.expect("answered")
        };
        let text = |v: DataVersion| {
            let mut out = Vec::new();
            v.encode(&mut out);
            Bytes::from(out)
        };
        for counter in [1, 1, 2, 2] {
            t.register_broker(&r, TopicsInput::Body(&body(counter, &[("T", 6)])));
            let v = body(counter, &[]).data_version;
            assert_eq!(seen(&mut t, "a:1", 0), Some((v, text(v))));
        }
        assert_eq!(seen(&mut t, "nope:1", 0), None);
        // Refused: no refresh, so the broker expires on its old deadline.
        assert_eq!(
            t.query_data_version("c", "a:1", 9_000, |_| Err::<(), _>(())),
            Err(())
        );
        assert_eq!(t.expire_silent_brokers(12_000).len(), 1);
        // The freed id now holds another broker, with its own version.
        t.unregister_batch(&[unreg("c", "b", "a:1", 0)]);
        let other = req("c", "d", "a:2", 0, 0);
        t.register_broker(&other, TopicsInput::Body(&body(7, &[("T", 6)])));
        let v = body(7, &[]).data_version;
        assert_eq!(seen(&mut t, "a:2", 0), Some((v, text(v))));
        // Answered: refreshed, as a heartbeat does.
        let mut t = table();
        t.register_broker(&r, TopicsInput::Body(&body(1, &[("T", 6)])));
        assert!(seen(&mut t, "a:1", 9_000).is_some());
        assert!(t.expire_silent_brokers(12_000).is_empty());
    }

    #[test]
    fn expiry_costs_only_the_brokers_due() {
        let mut t = table();
        for i in 0..100 {
            let addr = format!("a:{i}");
            let name = format!("b{i}");
            let mut r = req("c", &name, &addr, 0, 0);
            r.heartbeat_timeout_ms = Some(if i < 10 { 1_000 } else { 100_000 });
            t.register_broker(&r, TopicsInput::Body(&body(1, &[("T", 6)])));
        }
        assert_eq!(t.expire_silent_brokers(2_000).len(), 10);
        // Only the ten due entries left the buckets.
        assert_eq!(t.expiry.len(), 90);
    }

    #[test]
    fn closing_a_connection_lists_every_broker_registered_on_it() {
        let mut t = table();
        t.register_broker(
            &req("c", "b1", "a:1", 0, 0),
            TopicsInput::Body(&body(1, &[("T", 6)])),
        );
        t.register_broker(
            &req("c", "b2", "a:2", 0, 0),
            TopicsInput::Body(&body(1, &[("T", 6)])),
        );
        let mut other = req("c", "b3", "a:3", 0, 0);
        other.conn = Some(2);
        t.register_broker(&other, TopicsInput::Body(&body(1, &[("T", 6)])));
        let mut requests = t.connection_closed(1);
        requests.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
        assert_eq!(
            requests,
            vec![unreg("c", "b1", "a:1", 0), unreg("c", "b2", "a:2", 0)]
        );
        assert!(t.connection_closed(1).is_empty());
    }

    #[test]
    fn a_batch_removes_groups_topics_and_clusters_and_keeps_reduced_groups() {
        let mut t = table();
        t.register_broker(
            &req("c", "g1", "m1:1", 0, 0),
            TopicsInput::Body(&body(1, &[("A", 6), ("Both", 6)])),
        );
        t.register_broker(
            &req("c", "g1", "s1:1", 1, 0),
            TopicsInput::Body(&body(1, &[("A", 6)])),
        );
        t.register_broker(
            &req("d", "g2", "m2:1", 0, 0),
            TopicsInput::Body(&body(1, &[("Both", 6)])),
        );
        let out = t.unregister_batch(&[unreg("c", "g1", "s1:1", 1), unreg("d", "g2", "m2:1", 0)]);
        assert_eq!(out.brokers_removed, 2);
        assert_eq!(out.broker_groups_removed, 1);
        assert_eq!(t.broker_member_group("g1").len(), 1);
        assert!(t.broker_member_group("g2").is_empty());
        assert_eq!(t.pickup_route("Both").unwrap().queue_datas.len(), 1);
        assert!(!t.cluster_info().cluster_addr_table.contains_key("d"));
        let out = t.unregister_batch(&[unreg("c", "g1", "m1:1", 0)]);
        assert_eq!(out.topics_removed, 2);
        assert!(t.pickup_route("A").is_none());
        assert_eq!(t.topic_count(), 0);
        assert_eq!(t.cluster_count(), 0);
    }

    #[test]
    fn master_loss_with_acting_master_wipes_write_and_rewrites_the_route() {
        let mut t = RouteTable::new(
            RouteSettings {
                support_acting_master: true,
                ..RouteSettings::default()
            },
            1000,
        );
        let mut m = req("c", "g", "m:1", 0, 0);
        m.enable_acting_master = Some(true);
        let mut s = req("c", "g", "s:1", 1, 0);
        s.enable_acting_master = Some(true);
        t.register_broker(&m, TopicsInput::Body(&body(1, &[("T", 6)])));
        t.register_broker(&s, TopicsInput::Body(&body(1, &[("T", 6)])));
        t.unregister_batch(&[unreg("c", "g", "m:1", 0)]);
        let route = t.pickup_route("T").unwrap();
        assert_eq!(route.queue_datas[0].perm, 4);
        assert_eq!(
            route.broker_datas[0]
                .broker_addrs
                .get(&0)
                .map(String::as_str),
            Some("s:1")
        );
        // Only the route copy is rewritten; the table keeps the slave under id 1.
        assert_eq!(
            t.broker_member_group("g").get(&1).map(String::as_str),
            Some("s:1")
        );
    }

    #[test]
    fn write_permission_wipe_and_add_count_topics() {
        let mut t = table();
        t.register_broker(
            &req("c", "g", "a:1", 0, 0),
            TopicsInput::Body(&body(1, &[("A", 7), ("B", 6)])),
        );
        assert_eq!(t.set_write_perm("g", false), 2);
        assert_eq!(t.pickup_route("A").unwrap().queue_datas[0].perm, 5);
        assert_eq!(t.set_write_perm("g", true), 2);
        assert_eq!(t.pickup_route("A").unwrap().queue_datas[0].perm, 6);
        assert_eq!(t.set_write_perm("nobody", true), 0);
    }

    #[test]
    fn delete_topic_whole_or_per_cluster_and_registration_brings_it_back() {
        let mut t = table();
        let b = body(1, &[("T", 6), ("U", 6)]);
        t.register_broker(&req("c", "g", "a:1", 0, 0), TopicsInput::Body(&b));
        t.register_broker(&req("d", "h", "b:1", 0, 0), TopicsInput::Body(&b));
        assert!(t.delete_topic("T", Some("c")));
        assert_eq!(t.pickup_route("T").unwrap().queue_datas.len(), 1);
        assert!(!t.delete_topic("T", Some("zz")));
        assert!(t.delete_topic("U", None));
        assert!(t.pickup_route("U").is_none());
        // The deleting admin call makes the unchanged body need a full apply again.
        assert!(!t.is_unchanged_body(&req("c", "g", "a:1", 0, 0)));
        t.register_broker(&req("c", "g", "a:1", 0, 0), TopicsInput::Body(&b));
        assert!(t.pickup_route("U").is_some());
    }

    #[test]
    fn register_topic_checks_every_broker_of_a_new_topic() {
        let mut t = table();
        t.register_broker(
            &req("c", "g", "a:1", 0, 0),
            TopicsInput::Body(&body(1, &[("T", 6)])),
        );
        let q = |name: &str| QueueData {
            broker_name: name.into(),
            read_queue_nums: 2,
            write_queue_nums: 2,
            perm: 6,
            topic_sys_flag: 0,
        };
        assert!(!t.register_topic("New", &[q("g"), q("ghost")]));
        assert!(t.pickup_route("New").is_none());
        assert!(t.register_topic("New", &[q("g")]));
        assert_eq!(
            t.pickup_route("New").unwrap().queue_datas[0].read_queue_nums,
            2
        );
    }

    #[test]
    fn topic_lists_by_cluster_flag_and_system() {
        let mut t = table();
        let mut b = body(1, &[("Plain", 6), ("Unit", 6)]);
        b.topics[1].1.topic_sys_flag = FLAG_UNIT;
        t.register_broker(&req("c", "g", "a:1", 0, 0), TopicsInput::Body(&b));
        assert_eq!(t.topics_of_cluster("c").len(), 2);
        assert!(t.topics_of_cluster("zz").is_empty());
        assert_eq!(t.topics_with_flag(|f| f & FLAG_UNIT != 0), vec!["Unit"]);
        let (names, addr) = t.system_topics();
        assert_eq!(names, vec!["c".to_string(), "g".to_string()]);
        assert_eq!(addr.as_deref(), Some("a:1"));
        let mut all: Vec<&str> = t.topic_names().collect();
        all.sort();
        assert_eq!(all, vec!["Plain", "Unit"]);
    }

    #[test]
    fn broad_topics_stay_consistent_through_inserts_and_removals() {
        let mut t = table();
        let names: Vec<String> = (0..100).map(|i| format!("g{i}")).collect();
        let addrs: Vec<String> = (0..100).map(|i| format!("a:{i}")).collect();
        for i in 0..100 {
            let b = body(1, &[("TBW102", 6), (names[i].as_str(), 6)]);
            t.register_broker(&req("c", &names[i], &addrs[i], 0, 0), TopicsInput::Body(&b));
        }
        assert_eq!(t.pickup_route("TBW102").unwrap().queue_datas.len(), 100);
        // Remove every third group, one batch each, then check what is left, entry by entry.
        for i in (0..100).step_by(3) {
            t.unregister_batch(&[unreg("c", &names[i], &addrs[i], 0)]);
        }
        let route = t.pickup_route("TBW102").unwrap();
        let mut left: Vec<String> = route
            .queue_datas
            .iter()
            .map(|q| q.broker_name.clone())
            .collect();
        left.sort();
        let mut want: Vec<String> = (0..100)
            .filter(|i| i % 3 != 0)
            .map(|i| names[i].clone())
            .collect();
        want.sort();
        assert_eq!(left, want);
        // Every remaining entry can still be found and changed through the index.
        assert_eq!(t.set_write_perm("g1", false), 2);
        let route = t.pickup_route("TBW102").unwrap();
        let g1 = route
            .queue_datas
            .iter()
            .find(|q| q.broker_name == "g1")
            .unwrap();
        assert_eq!(g1.perm, 4);
        let rest: Vec<UnregisterRequest> = (0..100)
            .filter(|i| i % 3 != 0)
            .map(|i| unreg("c", &names[i], &addrs[i], 0))
            .collect();
        t.unregister_batch(&rest);
        assert!(t.pickup_route("TBW102").is_none());
        assert_eq!(t.topic_count(), 0);
    }

    #[test]
    fn a_reused_broker_id_never_inherits_old_queue_entries() {
        let mut t = table();
        t.register_broker(
            &req("c", "old", "a:1", 0, 0),
            TopicsInput::Body(&body(1, &[("T", 6)])),
        );
        t.unregister_batch(&[unreg("c", "old", "a:1", 0)]);
        assert!(t.pickup_route("T").is_none());
        t.register_broker(
            &req("c", "new", "b:1", 0, 0),
            TopicsInput::Body(&body(1, &[("U", 6)])),
        );
        assert!(t.pickup_route("T").is_none());
        let route = t.pickup_route("U").unwrap();
        assert_eq!(route.queue_datas[0].broker_name, "new");
        assert_eq!(route.broker_datas[0].broker_name, "new");
    }

    #[test]
    fn min_broker_id_change_produces_a_notification_when_enabled() {
        let mut t = RouteTable::new(
            RouteSettings {
                notify_min_broker_id_changed: true,
                ..RouteSettings::default()
            },
            1000,
        );
        t.register_broker(
            &req("c", "g", "s:1", 1, 0),
            TopicsInput::Body(&body(1, &[("T", 6)])),
        );
        let r = t.register_broker(
            &req("c", "g", "m:1", 0, 0),
            TopicsInput::Body(&body(1, &[("T", 6)])),
        );
        let n = r.notification.unwrap();
        assert_eq!(n.targets, vec!["s:1".to_string()]);
        assert_eq!((n.min_broker_id, n.min_broker_addr.as_str()), (0, "m:1"));
        assert_eq!(n.ha_broker_addr.as_deref(), Some("ha:1"));
    }

    // ------------------------------------------------------------ one owner per address

    #[test]
    fn a_registration_at_another_names_address_takes_it_over_and_leaves_no_orphan() {
        let mut t = table();
        t.register_broker(
            &req("c", "old", "a:1", 0, 0),
            TopicsInput::Body(&body(1, &[("OldOnly", 6), ("Shared", 6)])),
        );
        t.register_broker(
            &req("c", "peer", "p:1", 0, 0),
            TopicsInput::Body(&body(1, &[("Shared", 6)])),
        );
        let r = t.register_broker(
            &req("c", "new", "a:1", 0, 5),
            TopicsInput::Body(&body(1, &[("NewOnly", 6)])),
        );
        let takeover = r.taken_over.expect("the address was old's");
        assert_eq!(takeover.previous, unreg("c", "old", "a:1", 0));
        assert_eq!(takeover.outcome.broker_groups_removed, 1);
        assert_eq!(takeover.outcome.topics_removed, 1, "OldOnly");
        assert!(r.first, "a new broker at that address");
        // No group, queue entry, cluster member or route of the old owner survives.
        assert!(t.broker_member_group("old").is_empty());
        assert!(t.pickup_route("OldOnly").is_none());
        let shared = t.pickup_route("Shared").unwrap();
        assert_eq!(shared.queue_datas.len(), 1);
        assert_eq!(shared.queue_datas[0].broker_name, "peer");
        let info = t.cluster_info();
        assert_eq!(info.cluster_addr_table["c"], vec!["new", "peer"]);
        assert!(!info.broker_addr_table.contains_key("old"));
        assert_eq!(t.live_broker_count(), 2);
        // When the new owner leaves, nothing is left at the address.
        let expired = t.expire_silent_brokers(1_000_000);
        let requests: Vec<UnregisterRequest> = expired.into_iter().map(|e| e.request).collect();
        t.unregister_batch(&requests);
        assert_eq!(t.broker_group_count(), 0);
        assert_eq!(t.topic_count(), 0);
        assert_eq!(t.cluster_count(), 0);
    }

    #[test]
    fn a_taken_over_group_with_other_addresses_keeps_them_and_its_topics() {
        let mut t = table();
        let b = body(1, &[("T", 6)]);
        t.register_broker(&req("c", "old", "m:1", 0, 0), TopicsInput::Body(&b));
        t.register_broker(&req("c", "old", "s:1", 1, 0), TopicsInput::Body(&b));
        let r = t.register_broker(&req("c", "new", "s:1", 0, 0), TopicsInput::Body(&b));
        let takeover = r.taken_over.unwrap();
        assert_eq!(takeover.previous, unreg("c", "old", "s:1", 1));
        assert_eq!(takeover.outcome.broker_groups_removed, 0);
        assert_eq!(
            t.broker_member_group("old"),
            BTreeMap::from([(0, "m:1".to_string())])
        );
        let route = t.pickup_route("T").unwrap();
        let mut groups: Vec<&str> = route
            .broker_datas
            .iter()
            .map(|b| b.broker_name.as_str())
            .collect();
        groups.sort_unstable();
        assert_eq!(groups, ["new", "old"]);
    }

    #[test]
    fn an_unregistration_queued_before_a_takeover_leaves_the_new_owner_live() {
        let mut t = table();
        let mut old = req("c", "old", "a:1", 0, 0);
        old.heartbeat_timeout_ms = Some(1_000);
        t.register_broker(&old, TopicsInput::Body(&body(1, &[("T", 6)])));
        let expired = t.expire_silent_brokers(5_000);
        assert_eq!(expired.len(), 1, "queued for the batching thread");
        t.register_broker(
            &req("c", "new", "a:1", 0, 5_000),
            TopicsInput::Body(&body(1, &[("U", 6)])),
        );
        // The old owner's unregistration comes back from the worker after the takeover.
        let out = t.unregister_batch(&[expired[0].request.clone()]);
        assert_eq!(out.brokers_removed, 0);
        assert_eq!(t.live_broker_count(), 1);
        assert!(t.registered_over("c", "a:1", "new", Some(1)));
        assert!(t.pickup_route("U").is_some());
        assert!(t.pickup_route("T").is_none());
    }

    #[test]
    fn the_same_address_in_another_cluster_or_under_the_same_name_is_not_taken_over() {
        let mut t = table();
        let b = body(1, &[("T", 6)]);
        t.register_broker(&req("c", "one", "a:1", 0, 0), TopicsInput::Body(&b));
        let other_cluster = t.register_broker(&req("d", "two", "a:1", 0, 0), TopicsInput::Body(&b));
        assert_eq!(other_cluster.taken_over, None);
        let again = t.register_broker(&req("c", "one", "a:1", 0, 1), TopicsInput::Body(&b));
        assert_eq!(again.taken_over, None);
        assert_eq!(t.broker_group_count(), 2);
        assert_eq!(t.live_broker_count(), 2);
    }

    #[test]
    fn registered_over_names_the_connection_and_broker_of_a_live_entry() {
        let mut t = table();
        t.register_broker(
            &req("c", "b", "a:1", 0, 0),
            TopicsInput::Body(&body(1, &[])),
        );
        assert!(t.registered_over("c", "a:1", "b", Some(1)));
        assert!(!t.registered_over("c", "a:1", "b", Some(2)));
        assert!(!t.registered_over("c", "a:1", "b", None));
        assert!(!t.registered_over("c", "a:1", "other", Some(1)));
        assert!(!t.registered_over("d", "a:1", "b", Some(1)));
        // A reconnected broker registers over its new connection, which then is its own.
        let mut moved = req("c", "b", "a:1", 0, 1);
        moved.conn = Some(2);
        t.register_broker(&moved, TopicsInput::Unchanged);
        assert!(t.registered_over("c", "a:1", "b", Some(2)));
        assert!(!t.registered_over("c", "a:1", "b", Some(1)));
    }

    // ------------------------------------------------------------ bounds

    fn bounds(max_brokers: usize, max_topics: usize, per_broker: usize) -> RouteBounds {
        RouteBounds {
            max_brokers,
            max_topics,
            max_topics_per_broker: per_broker,
        }
    }

    #[test]
    fn a_new_broker_address_past_max_brokers_is_refused_but_known_ones_are_not() {
        let mut t = table();
        let limit = bounds(2, 100, 100);
        let empty = body(1, &[]);
        for (name, addr) in [("b1", "a:1"), ("b2", "a:2")] {
            let r = req("c", name, addr, 0, 0);
            assert_eq!(
                t.check_register_bounds(&r, TopicsInput::Body(&empty), &limit),
                Ok(())
            );
            t.register_broker(&r, TopicsInput::Body(&empty));
        }
        let third = req("c", "b3", "a:3", 0, 0);
        let refused = t.check_register_bounds(&third, TopicsInput::Body(&empty), &limit);
        assert_eq!(refused, Err(BoundExceeded::Brokers { max: 2 }));
        assert_eq!(
            refused.unwrap_err().to_string(),
            "maxBrokers reached: 2 brokers are registered; no new broker address until one leaves"
        );
        let known = req("c", "b1", "a:1", 0, 1);
        assert_eq!(
            t.check_register_bounds(&known, TopicsInput::Unchanged, &limit),
            Ok(())
        );
    }

    #[test]
    fn only_topics_a_registration_adds_count_against_max_topics_and_per_broker() {
        let mut t = table();
        let limit = bounds(10, 3, 2);
        let master = req("c", "g", "m:1", 0, 0);
        let two = body(1, &[("A", 6), ("B", 6)]);
        assert_eq!(
            t.check_register_bounds(&master, TopicsInput::Body(&two), &limit),
            Ok(())
        );
        t.register_broker(&master, TopicsInput::Body(&two));
        // Re-registering the same topics adds nothing, even at the bound.
        assert_eq!(
            t.check_register_bounds(
                &master,
                TopicsInput::Body(&body(2, &[("A", 4), ("B", 4)])),
                &limit
            ),
            Ok(())
        );
        let three = body(2, &[("A", 6), ("B", 6), ("C", 6)]);
        assert_eq!(
            t.check_register_bounds(&master, TopicsInput::Body(&three), &limit),
            Err(BoundExceeded::TopicsPerBroker {
                broker_name: "g".into(),
                max: 2,
                held: 2,
                adding: 1
            })
        );
        // Another group's new topics count against maxTopics (3 held at most).
        let other = req("c", "h", "n:1", 0, 0);
        let new_two = body(1, &[("C", 6), ("D", 6)]);
        let refused = t.check_register_bounds(&other, TopicsInput::Body(&new_two), &limit);
        assert_eq!(
            refused.unwrap_err().to_string(),
            "maxTopics reached: the registry holds 2 topics, this would add 2 (limit 3)"
        );
        // Taking on topics others hold already adds no topic.
        let known = body(1, &[("A", 6), ("B", 6)]);
        assert_eq!(
            t.check_register_bounds(&other, TopicsInput::Body(&known), &limit),
            Ok(())
        );
        // A slave's topics are not applied while the master is there: nothing to count.
        let slave = req("c", "g", "s:1", 1, 0);
        assert_eq!(
            t.check_register_bounds(&slave, TopicsInput::Body(&three), &limit),
            Ok(())
        );
    }

    #[test]
    fn register_topic_counts_a_new_topic_and_each_group_taking_it_on() {
        let mut t = table();
        let limit = bounds(10, 2, 2);
        t.register_broker(
            &req("c", "g", "m:1", 0, 0),
            TopicsInput::Body(&body(1, &[("A", 6)])),
        );
        t.register_broker(
            &req("c", "h", "n:1", 0, 0),
            TopicsInput::Body(&body(1, &[("B", 6), ("C", 6)])),
        );
        let q = |name: &str| QueueData {
            broker_name: name.into(),
            read_queue_nums: 1,
            write_queue_nums: 1,
            perm: 6,
            topic_sys_flag: 0,
        };
        assert!(matches!(
            t.check_topic_bounds("New", &[q("g")], &limit),
            Err(BoundExceeded::Topics { held: 3, .. })
        ));
        assert_eq!(t.check_topic_bounds("B", &[q("g")], &limit), Ok(()));
        assert!(matches!(
            t.check_topic_bounds("A", &[q("h")], &limit),
            Err(BoundExceeded::TopicsPerBroker { held: 2, .. })
        ));
        assert_eq!(t.check_topic_bounds("A", &[q("g")], &limit), Ok(()));
    }

    #[test]
    fn a_mass_removal_hands_the_topic_table_memory_back() {
        let mut t = table();
        let names: Vec<String> = (0..20_000).map(|i| format!("T{i}")).collect();
        let topics: Vec<(&str, i32)> = names.iter().map(|n| (n.as_str(), 6)).collect();
        t.register_broker(
            &req("c", "big", "a:1", 0, 0),
            TopicsInput::Body(&body(1, &topics)),
        );
        t.register_broker(
            &req("c", "small", "b:1", 0, 0),
            TopicsInput::Body(&body(1, &[("Kept", 6)])),
        );
        let full = t.topics.capacity();
        assert!(full >= 20_001);
        t.unregister_batch(&[unreg("c", "big", "a:1", 0)]);
        assert_eq!(t.topic_count(), 1);
        assert!(
            t.topics.capacity() < 64,
            "{} slots kept for one topic",
            t.topics.capacity()
        );
        assert!(t.pickup_route("Kept").is_some());
    }

    /// Every topic's route body in both dialects (`None`: TOPIC_NOT_EXIST).
    fn route_bytes(t: &mut RouteTable, topics: &[String]) -> Vec<(Option<Bytes>, Option<Bytes>)> {
        topics
            .iter()
            .map(|n| {
                (
                    t.route_body(n, Dialect::Standard, || None),
                    t.route_body(n, Dialect::Legacy, || None),
                )
            })
            .collect()
    }

    /// The table a stepped and a one-go registration start from: broker `o` shares some
    /// topics with broker `b`, and `b` serves topics its next body no longer reports.
    fn shared_table() -> RouteTable {
        let mut t = RouteTable::new(
            RouteSettings {
                delete_topic_with_broker_registration: true,
                ..RouteSettings::default()
            },
            1000,
        );
        let shared: Vec<(&str, i32)> = vec![("Sh0", 6), ("Sh1", 6), ("Gone1", 6)];
        t.register_broker(
            &req("c", "o", "o:1", 0, 5),
            TopicsInput::Body(&body(1, &shared)),
        );
        let mut old: Vec<(&str, i32)> = vec![("Gone0", 6), ("Gone1", 6), ("Sh0", 6)];
        old.extend(STEP_NAMES.iter().map(|n| (*n, 6)));
        t.register_broker(
            &req("c", "b", "a:1", 0, 10),
            TopicsInput::Body(&body(1, &old)),
        );
        t
    }

    const STEP_NAMES: [&str; 10] = ["S0", "S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8", "S9"];

    #[test]
    fn a_registration_applied_in_steps_ends_byte_identical_to_one_at_once_and_no_topic_is_half_done(
    ) {
        // b's new body: its topics with perm 4, new ones, a topic shared with o; not Gone*.
        let mut listed: Vec<(&str, i32)> = STEP_NAMES.iter().map(|n| (*n, 4)).collect();
        listed.extend([("New0", 6), ("Sh1", 4), ("Sh0", 4), ("New1", 6)]);
        let second = body(2, &listed);
        let mut names: Vec<String> = listed.iter().map(|(n, _)| n.to_string()).collect();
        names.extend(["Gone0".to_string(), "Gone1".to_string()]);
        let mut at_once = shared_table();
        let once =
            at_once.register_broker(&req("c", "b", "a:1", 0, 20), TopicsInput::Body(&second));
        let after = route_bytes(&mut at_once, &names);
        let mut stepped = shared_table();
        let before = route_bytes(&mut stepped, &names);
        let (result, steps) =
            stepped.register_broker_in_steps(&req("c", "b", "a:1", 0, 20), &second);
        assert!(!result.first);
        let mut steps = steps.expect("the master's topics are put");
        let mut seen_mixed = false;
        loop {
            // Between steps every topic's route is wholly as before or as after.
            let now = route_bytes(&mut stepped, &names);
            for (i, n) in names.iter().enumerate() {
                assert!(now[i] == before[i] || now[i] == after[i], "{n} half done");
            }
            seen_mixed |= now != before && now != after;
            if stepped.apply_topic_steps(&mut steps, &second, 3) {
                break;
            }
        }
        assert!(seen_mixed, "the steps were observable");
        assert_eq!(route_bytes(&mut stepped, &names), after);
        assert_eq!(steps.changed, once.topics_changed);
        let topics = |t: &RouteTable| t.topic_names().map(String::from).collect::<BTreeSet<_>>();
        assert_eq!(topics(&stepped), topics(&at_once));
        assert_eq!(stepped.cluster_info(), at_once.cluster_info());
        assert_eq!(
            stepped.data_version("c", "a:1"),
            at_once.data_version("c", "a:1")
        );
    }

    #[test]
    fn steps_stop_when_the_broker_group_goes_meanwhile() {
        let mut t = table();
        let many = body(1, &[("G1", 6), ("G2", 6), ("G3", 6)]);
        let (_, steps) = t.register_broker_in_steps(&req("c", "g", "a:2", 0, 10), &many);
        let mut steps = steps.expect("topics to put");
        assert!(!t.apply_topic_steps(&mut steps, &many, 1));
        t.unregister_batch(&[unreg("c", "g", "a:2", 0)]);
        assert!(
            t.apply_topic_steps(&mut steps, &many, 1),
            "done: nothing more to put"
        );
        assert_eq!(t.topic_count(), 0);
        assert!(t.pickup_route("G3").is_none());
    }
}
