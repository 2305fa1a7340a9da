//! Encoded GET_ROUTEINFO_BY_TOPIC bodies, per topic and dialect, within `routeCacheMaxBytes`
//! (oldest out first); the route table invalidates a topic whenever its route changes.

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
