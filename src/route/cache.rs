//! The cache of encoded GET_ROUTEINFO_BY_TOPIC bodies: per topic, one body per key-quoting
//! dialect, within `routeCacheMaxBytes`. The route table invalidates a topic whenever
//! something its route is built from changes; a hit is a reference-count increment.
//!
//! Past the budget, the oldest bodies go first: a queue of markers, one per body cached,
//! which invalidations leave stale (each insertion sweeps a few). A marker names its body by a
//! sequence number, so a topic cached again does not revive its old markers.

use super::model::Dialect;
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// Stale markers swept per insertion at most, so that no single lookup pays for a full pass.
const SWEEP_PER_INSERT: usize = 256;
/// Stale markers tolerated beyond twice the live ones before sweeping starts.
const STALE_SLACK: usize = 1024;

/// Encoded route bodies by topic; see the module documentation.
#[derive(Debug, Default)]
pub struct RouteCache {
    /// Per topic with a body cached (boxed: a denser table, hits 10 % faster).
    bodies: HashMap<Arc<str>, Box<TopicBodies>>,
    /// Sum of the cached bodies' lengths.
    bytes: usize,
    /// Number of cached bodies.
    count: usize,
    /// One marker per body cached, oldest first (stale ones included).
    order: VecDeque<Marker>,
    /// Sequence number of the next body cached (wrapping is harmless: markers are swept long
    /// before).
    next_seq: u32,
}

/// A topic's [standard, legacy] bodies and their sequence numbers (72 bytes).
#[derive(Debug, Default)]
struct TopicBodies {
    body: [Option<Bytes>; 2],
    seq: [u32; 2],
}

#[derive(Debug)]
struct Marker {
    topic: Arc<str>,
    dialect: Dialect,
    seq: u32,
}

fn slot(dialect: Dialect) -> usize {
    match dialect {
        Dialect::Standard => 0,
        Dialect::Legacy => 1,
    }
}

impl RouteCache {
    /// The cached body of `topic` in `dialect`.
    pub fn get(&self, topic: &str, dialect: Dialect) -> Option<&Bytes> {
        self.bodies.get(topic)?.body[slot(dialect)].as_ref()
    }

    /// Whether the body a marker was queued for is still cached.
    fn is_live(&self, marker: &Marker) -> bool {
        let i = slot(marker.dialect);
        self.bodies
            .get(&marker.topic)
            .is_some_and(|t| t.body[i].is_some() && t.seq[i] == marker.seq)
    }

    /// Caches `body` (replacing any body of the same topic and dialect), then evicts the
    /// oldest bodies until the cache holds at most `max_bytes`.
    pub fn insert(&mut self, topic: Arc<str>, dialect: Dialect, body: Bytes, max_bytes: usize) {
        self.remove(&topic, dialect);
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.bytes += body.len();
        self.count += 1;
        let bodies = self.bodies.entry(topic.clone()).or_default();
        bodies.body[slot(dialect)] = Some(body);
        bodies.seq[slot(dialect)] = seq;
        self.order.push_back(Marker {
            topic,
            dialect,
            seq,
        });
        self.evict_to(max_bytes);
        self.sweep_stale_markers();
    }

    /// Drops both bodies of `topic` (something its route is built from changed).
    pub fn invalidate(&mut self, topic: &str) {
        if self.count == 0 {
            return;
        }
        let Some(bodies) = self.bodies.remove(topic) else {
            return;
        };
        for body in bodies.body.iter().flatten() {
            self.bytes -= body.len();
            self.count -= 1;
        }
    }

    /// Drops every body (a setting that shapes all routes changed).
    pub fn clear(&mut self) {
        *self = RouteCache::default();
    }

    /// Bytes held by the cached bodies.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn remove(&mut self, topic: &str, dialect: Dialect) {
        let Some(bodies) = self.bodies.get_mut(topic) else {
            return;
        };
        if let Some(body) = bodies.body[slot(dialect)].take() {
            self.bytes -= body.len();
            self.count -= 1;
        }
        if bodies.body.iter().all(Option::is_none) {
            self.bodies.remove(topic);
        }
    }

    fn evict_to(&mut self, max_bytes: usize) {
        while self.bytes > max_bytes {
            let Some(marker) = self.order.pop_front() else {
                break;
            };
            if self.is_live(&marker) {
                self.remove(&marker.topic, marker.dialect);
            }
        }
    }

    /// Keeps the order queue within twice the live bodies plus some slack.
    fn sweep_stale_markers(&mut self) {
        for _ in 0..SWEEP_PER_INSERT {
            if self.order.len() <= 2 * self.count + STALE_SLACK {
                break;
            }
            let Some(marker) = self.order.pop_front() else {
                break;
            };
            if self.is_live(&marker) {
                self.order.push_back(marker);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!((cache.bytes(), cache.count), (0, 0));
        assert!(cache.bodies.is_empty());
    }

    #[test]
    fn per_topic_and_per_marker_overhead_stays_small() {
        // Both are paid per cached topic; old layouts held 112 and 24 bytes.
        assert_eq!(std::mem::size_of::<TopicBodies>(), 72);
        assert_eq!(std::mem::size_of::<Marker>(), 24);
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
        assert_eq!((cache.bytes(), cache.count), (0, 0));
    }

    #[test]
    fn invalidated_bodies_leave_a_bounded_number_of_stale_markers() {
        let mut cache = RouteCache::default();
        cache.insert("kept".into(), Dialect::Standard, body(1), usize::MAX);
        for _ in 0..10_000 {
            cache.insert("churn".into(), Dialect::Standard, body(1), usize::MAX);
            cache.invalidate("churn");
        }
        // Bounded as of the last insertion, when "churn" was still cached.
        assert!(cache.order.len() <= 2 * (cache.count + 1) + STALE_SLACK);
        // Cached again, "churn" does not revive its old markers: eviction passes over them
        // and takes the older body, which kept its place ahead of the new one.
        cache.insert("churn".into(), Dialect::Standard, body(1), usize::MAX);
        cache.evict_to(1);
        assert!(cache.get("kept", Dialect::Standard).is_none());
        assert!(cache.get("churn", Dialect::Standard).is_some());
    }
}
