//! The route registry tables (Java's RouteInfoManager, docs/protocol.md §5), owned by the loop
//! thread, plus what makes hot paths cheap (route cache, write stamps, body fingerprints).

use super::cache::{RouteCache, TopicListCache};
use super::model::{MappingInfo, QueueData, RegisterBody};
use crate::timer::DeadlineBuckets;
use foldhash::fast::RandomState;
use slab::Slab;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

mod admin;
mod bounds;
mod live;
mod queries;
mod register;
mod removal;
mod topic_map;
mod topics;

pub use bounds::{BoundExceeded, RouteBounds};
use live::{Expiry, LiveBroker};
pub use queries::ListKind;
pub use register::{
    BodyFingerprint, MinIdNotification, RegisterRequest, RegisterResult, RegisteringBroker,
    Takeover, TopicSteps, TopicsInput,
};
pub use removal::{BatchOutcome, ExpiredBroker, RemovalReason, UnregisterRequest, BROKER_STEPS};
use topic_map::TopicMap;
use topics::{BrokerEntry, BrokerId, QueueSlot, TopicEntry};

pub type ConnId = usize;

/// `PermName` bits.
pub const PERM_WRITE: i32 = 2;
pub const PERM_READ: i32 = 4;

/// TopicSysFlag bits.
pub const FLAG_UNIT: i32 = 1;
pub const FLAG_UNIT_SUB: i32 = 2;

/// Java's default broker expiry when a registration carries no `heartbeatTimeoutMillis`.
pub const DEFAULT_HEARTBEAT_TIMEOUT_MS: u64 = 120_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteSettings {
    pub support_acting_master: bool,
    pub delete_topic_with_broker_registration: bool,
    pub notify_min_broker_id_changed: bool,
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

#[derive(Debug)]
pub struct RouteTable {
    /// Peer-chosen names: foldhash keyed per map (cheaper than std's SipHash on registrations).
    topics: TopicMap<TopicEntry, RandomState>,
    brokers: HashMap<Arc<str>, BrokerEntry, RandomState>,
    /// Broker group id -> name (ids are reused once a group and its queue entries are gone).
    broker_names: Slab<Arc<str>>,
    clusters: HashMap<String, BTreeSet<String>>,
    live: Slab<LiveBroker>,
    /// brokerAddr -> live slab ids (one per cluster the address registered in).
    live_by_addr: HashMap<String, Vec<usize>, RandomState>,
    live_by_conn: HashMap<ConnId, Vec<usize>>,
    filter_servers: HashMap<(String, String), Vec<String>>,
    queue_mappings: HashMap<String, BTreeMap<String, MappingInfo>>,
    expiry: DeadlineBuckets<(usize, u64)>,
    next_generation: u64,
    /// Per broker group id: the write clock at the last change of its queue entries.
    slot_stamps: Vec<u64>,
    write_clock: u64,
    cache: RouteCache,
    /// Per [`ListKind`] asked for; checked against the topic map's shard stamps, and a
    /// cluster's dropped when its groups change.
    lists: HashMap<ListKind, TopicListCache>,
    list_parts_encoded: u64,
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
            cache: RouteCache::default(),
            lists: HashMap::new(),
            list_parts_encoded: 0,
            settings,
        }
    }

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

    /// (topic, broker group) pairs: one per group per topic it serves.
    pub fn queue_entry_count(&self) -> usize {
        self.brokers.values().map(|b| b.topics.len()).sum()
    }

    pub fn invalidate_topic(&mut self, topic: &str) {
        self.cache.invalidate(topic);
    }

    pub fn invalidate_all(&mut self) {
        self.cache.clear();
    }

    /// `cluster` lists a group more or less: its topic list (224) is encoded anew when asked.
    fn cluster_groups_changed(&mut self, cluster: &str) {
        self.lists.remove(&ListKind::Cluster(cluster.into()));
    }

    fn invalidate_broker_topics(&mut self, broker_name: &str) {
        if let Some(b) = self.brokers.get(broker_name) {
            for topic in &b.topics {
                self.cache.invalidate(topic);
            }
        }
    }
}

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

#[cfg(test)]
mod tests;
