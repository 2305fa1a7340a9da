//! Reads of the registry: topic routes (docs/protocol.md §5.7), lists, cluster info, groups.

use super::super::cache::TopicListCache;
use super::super::model::{Dialect, TopicRouteData};
use super::topic_map::SHARDS;
use super::{RouteTable, TopicEntry, FLAG_UNIT, FLAG_UNIT_SUB, PERM_WRITE};
use crate::remoting::json;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

/// Topic prefix excluded from the acting-master rewrite (docs/protocol.md §5.7 step 6).
pub(super) const SYNC_BROKER_MEMBER_PREFIX: &str = "rmq_sys_SYNC_BROKER_MEMBER_";

impl RouteTable {
    /// Topic route body in `dialect`, cached; `None` = TOPIC_NOT_EXIST.
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

    /// Java's pickupTopicRouteData (§5.7) without orderTopicConf; `None`, not empty `brokerDatas`.
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

    pub fn topic_names(&self) -> impl Iterator<Item = &str> {
        self.topics.keys().map(|k| k.as_ref())
    }

    /// The TopicList body of `kind`, cached: shards changed since are encoded first, until
    /// `deadline` (one at least); `None` while some remain (ask again).
    pub fn topic_list(&mut self, kind: &ListKind, deadline: Instant) -> Option<Bytes> {
        let version = self.topics.version();
        let admits = match kind {
            ListKind::All => Admits::Flags(0, 0),
            ListKind::Unit => Admits::Flags(FLAG_UNIT, 0),
            ListKind::UnitSub => Admits::Flags(FLAG_UNIT_SUB, 0),
            ListKind::UnitSubNotUnit => Admits::Flags(FLAG_UNIT_SUB, FLAG_UNIT),
            ListKind::Cluster(cluster) => match self.cluster_groups(cluster) {
                Some(groups) => Admits::Groups(groups),
                None => return Some(Bytes::from_static(EMPTY_LIST)),
            },
        };
        let list = (self.lists.entry(kind.clone())).or_insert_with(|| TopicListCache::new(SHARDS));
        if let Some(body) = list.body(version) {
            return Some(body);
        }
        let mut encoded = false;
        for at in 0..SHARDS {
            let (stamp, entries) = self.topics.shard(at);
            let Some(slot) = list.stale_part(at, stamp) else {
                continue;
            };
            if encoded && Instant::now() >= deadline {
                return None;
            }
            let mut part = Vec::new();
            for (name, _) in entries.filter(|(_, e)| admits.admits(e)) {
                if !part.is_empty() {
                    part.push(b',');
                }
                json::write_str(&mut part, name);
            }
            *slot = (stamp, part.into());
            self.list_parts_encoded += 1;
            encoded = true;
        }
        // The join is a copy of the whole body: a step of its own.
        if encoded && Instant::now() >= deadline {
            return None;
        }
        Some(list.assemble(version))
    }

    /// Per broker group id, whether `cluster` lists the group; `None` for an unknown cluster.
    fn cluster_groups(&self, cluster: &str) -> Option<Vec<bool>> {
        let mut groups = vec![false; self.broker_names.capacity()];
        for name in self.clusters.get(cluster)? {
            if let Some(b) = self.brokers.get(name.as_str()) {
                groups[b.id as usize] = true;
            }
        }
        Some(groups)
    }

    /// Shards encoded for topic lists so far, and the bytes the lists hold.
    pub fn topic_list_stats(&self) -> (u64, usize) {
        let bytes = self.lists.values().map(TopicListCache::bytes).sum();
        (self.list_parts_encoded, bytes)
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

    pub fn cluster_info(&self) -> super::super::model::ClusterInfo {
        super::super::model::ClusterInfo {
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

    pub fn broker_member_group(&self, broker_name: &str) -> BTreeMap<i64, String> {
        self.brokers
            .get(broker_name)
            .map(|b| b.data.broker_addrs.clone())
            .unwrap_or_default()
    }
}

/// Which topics a TopicList holds: all (206); by the first queue entry's sysFlag (§5.13):
/// 311 UNIT, 312 UNIT_SUB, 313 UNIT_SUB without UNIT; or those with a queue entry of a group
/// the cluster lists (224).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ListKind {
    All,
    Unit,
    UnitSub,
    UnitSubNotUnit,
    Cluster(Arc<str>),
}

/// An unknown cluster's list (224).
const EMPTY_LIST: &[u8] = b"{\"topicList\":[]}";

/// What a list's encoding admits of a topic: by the sysFlag bits its first queue entry has
/// and has not, or by the groups of its queue entries (indexed by group id).
enum Admits {
    Flags(i32, i32),
    Groups(Vec<bool>),
}

impl Admits {
    fn admits(&self, entry: &TopicEntry) -> bool {
        match self {
            Admits::Flags(with, without) => {
                let flag = entry.first_flag().unwrap_or(0);
                flag & with == *with && flag & without == 0
            }
            Admits::Groups(groups) => (entry.queues.iter())
                .any(|q| groups.get(q.broker as usize).copied().unwrap_or(false)),
        }
    }
}

/// §5.7 step 6: a group acting without master presents its lowest id as the master.
pub(super) fn apply_acting_master_rewrite(route: &mut TopicRouteData) {
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
            if let Some((_, addr)) = b.broker_addrs.pop_first() {
                b.broker_addrs.insert(0, addr);
            }
        }
    }
}
