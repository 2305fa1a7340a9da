//! Encoded GET_ROUTEINFO_BY_TOPIC bodies, per topic and dialect, within `routeCacheMaxBytes`
//! (oldest out first); the route table invalidates a topic whenever its route changes. And
//! encoded topic lists, kept per shard of the topic map ([`TopicListCache`]).

use super::model::Dialect;
use bytes::Bytes;
use foldhash::fast::RandomState;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct RouteCache {
    /// Per topic with a body cached (boxed: a denser table, faster hits). Peer-chosen names:
    /// keyed foldhash, as the route table's maps (cheaper than std's SipHash per lookup).
    bodies: HashMap<Arc<str>, Box<TopicBodies>, RandomState>,
    bytes: usize,
    /// The cached bodies by sequence number, oldest first.
    order: BTreeMap<u64, (Arc<str>, Dialect)>,
    next_seq: u64,
}

/// A topic's [standard, legacy] bodies and their sequence numbers.
#[derive(Debug, Default)]
struct TopicBodies {
    body: [Option<Bytes>; 2],
    seq: [u64; 2],
}

fn slot(dialect: Dialect) -> usize {
    match dialect {
        Dialect::Standard => 0,
        Dialect::Legacy => 1,
    }
}

impl RouteCache {
    pub fn get(&self, topic: &str, dialect: Dialect) -> Option<&Bytes> {
        self.bodies.get(topic)?.body[slot(dialect)].as_ref()
    }

    /// Caches `body`, then evicts the oldest bodies until the cache holds at most `max_bytes`.
    pub fn insert(&mut self, topic: Arc<str>, dialect: Dialect, body: Bytes, max_bytes: usize) {
        self.remove(&topic, dialect);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.bytes += body.len();
        let bodies = self.bodies.entry(topic.clone()).or_default();
        bodies.body[slot(dialect)] = Some(body);
        bodies.seq[slot(dialect)] = seq;
        self.order.insert(seq, (topic, dialect));
        while self.bytes > max_bytes {
            let Some((_, (topic, dialect))) = self.order.pop_first() else {
                break;
            };
            self.remove(&topic, dialect);
        }
    }

    /// Drops both bodies of `topic` (something its route is built from changed).
    pub fn invalidate(&mut self, topic: &str) {
        if self.order.is_empty() {
            return;
        }
        let Some(bodies) = self.bodies.remove(topic) else {
            return;
        };
        for (body, seq) in bodies.body.iter().zip(bodies.seq) {
            if let Some(body) = body {
                self.bytes -= body.len();
                self.order.remove(&seq);
            }
        }
    }

    /// Drops every body (a setting that shapes all routes changed).
    pub fn clear(&mut self) {
        *self = RouteCache::default();
    }

    fn remove(&mut self, topic: &str, dialect: Dialect) {
        let Some(bodies) = self.bodies.get_mut(topic) else {
            return;
        };
        let i = slot(dialect);
        if let Some(body) = bodies.body[i].take() {
            self.bytes -= body.len();
            self.order.remove(&bodies.seq[i]);
        }
        if bodies.body.iter().all(Option::is_none) {
            self.bodies.remove(topic);
        }
    }
}

/// A TopicList body (206, 311-313) and the parts it joins, one per topic map shard (the
/// shard's names, quoted, comma-separated), each with the shard's stamp when encoded.
#[derive(Debug)]
pub struct TopicListCache {
    parts: Vec<(u64, Bytes)>,
    body: Option<(u64, Bytes)>,
}

impl TopicListCache {
    /// Stamp 0: a shard never changed, empty.
    pub fn new(shards: usize) -> Self {
        TopicListCache {
            parts: vec![(0, Bytes::new()); shards],
            body: None,
        }
    }

    /// The body, if assembled at the topic map's `version`.
    pub fn body(&self, version: u64) -> Option<Bytes> {
        let (at, body) = self.body.as_ref()?;
        (*at == version).then(|| body.clone())
    }

    /// Shard `at`'s part unless it was encoded at `stamp`: then the caller encodes it again.
    pub fn stale_part(&mut self, at: usize, stamp: u64) -> Option<&mut (u64, Bytes)> {
        Some(&mut self.parts[at]).filter(|(s, _)| *s != stamp)
    }

    /// Joins the parts into `{"topicList":[...]}`; they become slices of it (held once).
    pub fn assemble(&mut self, version: u64) -> Bytes {
        let len = self.parts.iter().map(|(_, p)| p.len() + 1).sum::<usize>();
        let mut out = Vec::with_capacity(len + 16);
        out.extend_from_slice(b"{\"topicList\":[");
        let mut ranges = Vec::with_capacity(self.parts.len());
        for (_, part) in &self.parts {
            if !part.is_empty() && out.last() != Some(&b'[') {
                out.push(b',');
            }
            ranges.push(out.len()..out.len() + part.len());
            out.extend_from_slice(part);
        }
        out.extend_from_slice(b"]}");
        let body = Bytes::from(out);
        for ((_, part), range) in self.parts.iter_mut().zip(ranges) {
            *part = body.slice(range);
        }
        self.body = Some((version, body.clone()));
        body
    }

    /// About the bytes held: the parts are slices of the body, or encoded since.
    pub fn bytes(&self) -> usize {
        self.parts.iter().map(|(_, p)| p.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl RouteCache {
        pub(crate) fn bytes(&self) -> usize {
            self.bytes
        }
    }

    fn body(len: usize) -> Bytes {
        Bytes::from(vec![b'x'; len])
    }

    #[test]
    fn bodies_are_kept_per_topic_and_dialect_and_counted() {
        let mut cache = RouteCache::default();
        cache.insert("T".into(), Dialect::Standard, body(10), 1000);
        cache.insert("T".into(), Dialect::Legacy, body(7), 1000);
        assert_eq!(cache.get("T", Dialect::Standard).map(Bytes::len), Some(10));
        assert_eq!(cache.get("T", Dialect::Legacy).map(Bytes::len), Some(7));
        assert_eq!(cache.bytes(), 17);
        // Replacing a body counts only the new one.
        cache.insert("T".into(), Dialect::Standard, body(4), 1000);
        assert_eq!(cache.bytes(), 11);
        cache.invalidate("T");
        assert!(cache.get("T", Dialect::Legacy).is_none());
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn the_oldest_bodies_go_first_past_the_budget() {
        let mut cache = RouteCache::default();
        for topic in ["A", "B", "C"] {
            cache.insert(topic.into(), Dialect::Standard, body(10), 25);
        }
        assert!(cache.get("A", Dialect::Standard).is_none());
        assert!(cache.get("B", Dialect::Standard).is_some());
        assert!(cache.get("C", Dialect::Standard).is_some());
        assert_eq!(cache.bytes(), 20);
        // A budget of 0 caches nothing.
        cache.insert("D".into(), Dialect::Legacy, body(1), 0);
        assert_eq!(cache.bytes(), 0);
        assert!(cache.get("B", Dialect::Standard).is_none());
    }

    #[test]
    fn a_topic_cached_again_is_the_newest_and_churn_holds_no_memory() {
        let mut cache = RouteCache::default();
        cache.insert("kept".into(), Dialect::Standard, body(1), usize::MAX);
        for _ in 0..10_000 {
            cache.insert("churn".into(), Dialect::Standard, body(1), usize::MAX);
            cache.invalidate("churn");
        }
        assert_eq!(cache.bodies.len() + cache.order.len(), 2);
        // Cached again, "churn" is newer than "kept", which goes first.
        cache.insert("churn".into(), Dialect::Standard, body(1), 1);
        assert!(cache.get("kept", Dialect::Standard).is_none());
        assert!(cache.get("churn", Dialect::Standard).is_some());
    }
}
