//! The topic table's map (topic name -> entry), split into shards so that it never grows or
//! shrinks by more than a shard at once.
//!
//! A `HashMap` grows by moving every entry into a table twice the size, all in one call: past
//! 114,688 topics the next insert rehashes them all, 26 ms of loop time measured (each rehash
//! reads the topic name behind its `Arc`: a cache miss per topic), and at a million topics
//! about a quarter of a second. Registrations are applied in steps to keep every turn of the
//! loop short, so the map must not undo that: here it is [`SHARDS`] maps, a topic's shard
//! chosen by bits of its hash, and each grows (and, after mass removals, shrinks) on its own,
//! so the most one insert rehashes is one shard: about 4,000 topics at `maxTopics` (one
//! million), under a millisecond.
//!
//! The shard is picked by bits 40..48 of the same hash the shard's own table uses, which a
//! table's bucket index (its low bits, for tables of fewer than 2^40 buckets) and its control
//! bytes (the top 7 bits) never read, so the topics of one shard spread over its table as
//! well as over an unsharded one. The cost is one more hash of the name per lookup.

use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::Arc;

/// Number of shards: at `maxTopics` (1,000,000) a shard holds about 4,000 topics.
pub const SHARDS: usize = 256;

/// Where the shard bits start in the hash (see the module comment).
const SHARD_SHIFT: u32 = 40;

/// A shard is shrunk once its entries fill less than 1/this of its capacity (as `HashMap`
/// reports it: what it takes without growing, so an emptied shard, whatever its tombstones,
/// is always freed).
const SHRINK_BELOW_FRACTION: usize = 16;

/// Topic name -> `V`, in [`SHARDS`] maps.
pub struct TopicMap<V, S = std::collections::hash_map::RandomState> {
    hasher: S,
    shards: Box<[HashMap<Arc<str>, V, S>]>,
    len: usize,
}

impl<V, S: BuildHasher + Clone + Default> Default for TopicMap<V, S> {
    fn default() -> Self {
        let hasher = S::default();
        let shards = (0..SHARDS)
            .map(|_| HashMap::with_hasher(hasher.clone()))
            .collect();
        TopicMap {
            hasher,
            shards,
            len: 0,
        }
    }
}

impl<V, S> fmt::Debug for TopicMap<V, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TopicMap").field("len", &self.len).finish()
    }
}

impl<V, S: BuildHasher> TopicMap<V, S> {
    fn shard_of(&self, topic: &str) -> usize {
        (self.hasher.hash_one(topic) >> SHARD_SHIFT) as usize % SHARDS
    }

    fn shard(&self, topic: &str) -> &HashMap<Arc<str>, V, S> {
        &self.shards[self.shard_of(topic)]
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn get(&self, topic: &str) -> Option<&V> {
        self.shard(topic).get(topic)
    }

    pub fn get_mut(&mut self, topic: &str) -> Option<&mut V> {
        let at = self.shard_of(topic);
        self.shards[at].get_mut(topic)
    }

    pub fn get_key_value(&self, topic: &str) -> Option<(&Arc<str>, &V)> {
        self.shard(topic).get_key_value(topic)
    }

    pub fn contains_key(&self, topic: &str) -> bool {
        self.shard(topic).contains_key(topic)
    }

    pub fn insert(&mut self, topic: Arc<str>, value: V) -> Option<V> {
        let at = self.shard_of(&topic);
        let old = self.shards[at].insert(topic, value);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    pub fn remove(&mut self, topic: &str) -> Option<V> {
        let at = self.shard_of(topic);
        let old = self.shards[at].remove(topic);
        if old.is_some() {
            self.len -= 1;
        }
        old
    }

    /// Every topic, shard by shard (no particular order, as a `HashMap`'s).
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &V)> {
        self.shards.iter().flat_map(|s| s.iter())
    }

    pub fn keys(&self) -> impl Iterator<Item = &Arc<str>> {
        self.iter().map(|(k, _)| k)
    }

    /// Entries the shards hold room for, together.
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.shards.iter().map(HashMap::capacity).sum()
    }

    /// Shrinks the shards a mass removal left mostly empty (each keeps room for twice what it
    /// holds; each moves at most a sixteenth of its capacity). Returns their old tables, now
    /// empty, for the caller to free (freeing many megabytes costs the kernel milliseconds);
    /// with the sum of their capacities.
    pub fn shrink_if_sparse(&mut self) -> (Vec<HashMap<Arc<str>, V, S>>, usize)
    where
        S: Clone,
    {
        let mut old_tables = Vec::new();
        let mut old_capacity = 0;
        for shard in self.shards.iter_mut() {
            if shard.len() * SHRINK_BELOW_FRACTION >= shard.capacity() {
                continue;
            }
            let mut old = std::mem::replace(shard, HashMap::with_hasher(self.hasher.clone()));
            shard.reserve(old.len() * 2);
            shard.extend(old.drain());
            old_capacity += old.capacity();
            old_tables.push(old);
        }
        (old_tables, old_capacity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_as_one_map() {
        let mut m: TopicMap<u32> = TopicMap::default();
        for i in 0..5_000u32 {
            assert_eq!(m.insert(Arc::from(format!("T{i}").as_str()), i), None);
        }
        assert_eq!(m.insert(Arc::from("T7"), 70), Some(7));
        assert_eq!(m.len(), 5_000);
        assert_eq!(m.get("T7"), Some(&70));
        *m.get_mut("T8").unwrap() = 80;
        assert_eq!(
            m.get_key_value("T8").map(|(k, v)| (&**k, *v)),
            Some(("T8", 80))
        );
        assert!(m.contains_key("T4999") && !m.contains_key("T5000"));
        assert_eq!(m.remove("T1"), Some(1));
        assert_eq!(m.remove("T1"), None);
        assert_eq!(m.len(), 4_999);
        assert_eq!(m.iter().count(), 4_999);
        let mut keys: Vec<&str> = m.keys().map(|k| &**k).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), 4_999);
    }

    #[test]
    fn topics_spread_over_the_shards_and_growth_stays_within_one() {
        // With the hasher the topic table uses.
        let mut m: TopicMap<(), crate::route::keyed_hash::KeyedState> = TopicMap::default();
        let mut largest_growth = 0;
        for i in 0..100_000u32 {
            let name = format!("Topic-{i:06}");
            let at = m.shard_of(&name);
            let before = m.shards[at].capacity();
            m.insert(Arc::from(name.as_str()), ());
            if m.shards[at].capacity() != before {
                largest_growth = largest_growth.max(before);
            }
        }
        let sizes: Vec<usize> = m.shards.iter().map(HashMap::len).collect();
        let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
        // 390 per shard on average; a fair hash keeps every shard near it.
        assert!(*min > 250 && *max < 550, "shard sizes {min}..{max}");
        // A growth moves one shard's entries: never more than the largest shard held.
        assert!(largest_growth <= *max, "{largest_growth}");
    }

    #[test]
    fn emptied_shards_give_their_memory_back() {
        let mut m: TopicMap<u64> = TopicMap::default();
        for i in 0..20_000u64 {
            m.insert(Arc::from(format!("T{i}").as_str()), i);
        }
        for i in 1..20_000u64 {
            m.remove(&format!("T{i}"));
        }
        let (old, _) = m.shrink_if_sparse();
        assert!(!old.is_empty());
        assert!(
            m.capacity() < 64,
            "{} slots kept for one topic",
            m.capacity()
        );
        assert_eq!(m.get("T0"), Some(&0));
    }
}
