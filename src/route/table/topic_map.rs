//! The topic map, split into [`SHARDS`] maps so it never rehashes more than a shard at once
//! (an unsharded `HashMap` past 114,688 topics rehashed all in one insert: 26 ms).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

/// Number of shards: at `maxTopics` (1,000,000) a shard holds about 4,000 topics.
pub const SHARDS: usize = 256;

const SHARD_SHIFT: u32 = 40;

#[derive(Clone)]
pub struct TopicKey {
    name: Arc<str>,
}

/// What a shard compares and hashes: a stored [`TopicKey`] or a [`Probe`] (hash computed).
trait Lookup {
    fn name(&self) -> &str;
    fn known_hash(&self) -> Option<u64>;
}

impl Lookup for TopicKey {
    fn name(&self) -> &str {
        &self.name
    }
    fn known_hash(&self) -> Option<u64> {
        None
    }
}

struct Probe<'a> {
    hash: u64,
    name: &'a str,
}

impl Lookup for Probe<'_> {
    fn name(&self) -> &str {
        self.name
    }
    fn known_hash(&self) -> Option<u64> {
        Some(self.hash)
    }
}

impl<'a> Borrow<dyn Lookup + 'a> for TopicKey {
    fn borrow(&self) -> &(dyn Lookup + 'a) {
        self
    }
}

impl PartialEq for dyn Lookup + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for dyn Lookup + '_ {}

/// A probe hands its hash on as one `u64`; a stored key writes its name as [`hash_name`] does.
impl Hash for dyn Lookup + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self.known_hash() {
            Some(hash) => state.write_u64(hash),
            None => write_name(self.name(), state),
        }
    }
}

/// The same equality and hash as the view it borrows as (`HashMap`'s rule for `Borrow`).
impl PartialEq for TopicKey {
    fn eq(&self, other: &Self) -> bool {
        (self as &dyn Lookup) == (other as &dyn Lookup)
    }
}

impl Eq for TopicKey {}

impl Hash for TopicKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Hash::hash(self as &dyn Lookup, state);
    }
}

#[inline]
fn write_name<H: Hasher>(name: &str, state: &mut H) {
    state.write(name.as_bytes());
    state.write_u8(0xFF);
}

#[inline]
fn hash_name<S: BuildHasher>(hasher: &S, name: &str) -> u64 {
    let mut state = hasher.build_hasher();
    write_name(name, &mut state);
    state.finish()
}

/// The shards' hasher: a copy of the map's (same keys); a probe's `u64` is taken as the hash.
#[derive(Debug, Clone, Default)]
pub struct NameHash<S>(S);

pub struct NameHasher<H> {
    name: H,
    known: Option<u64>,
}

impl<S: BuildHasher> BuildHasher for NameHash<S> {
    type Hasher = NameHasher<S::Hasher>;

    #[inline]
    fn build_hasher(&self) -> Self::Hasher {
        NameHasher {
            name: self.0.build_hasher(),
            known: None,
        }
    }
}

impl<H: Hasher> Hasher for NameHasher<H> {
    #[inline]
    fn write_u64(&mut self, hash: u64) {
        self.known = Some(hash);
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.name.write(bytes);
    }

    #[inline]
    fn write_u8(&mut self, byte: u8) {
        self.name.write_u8(byte);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.known.unwrap_or_else(|| self.name.finish())
    }
}

pub type Shard<V, S> = HashMap<TopicKey, V, NameHash<S>>;

pub struct TopicMap<V, S = std::collections::hash_map::RandomState> {
    hasher: S,
    shards: Box<[Shard<V, S>]>,
    len: usize,
    /// Per shard, the [`TopicMap::version`] of its last change (a name in or out, a reorder,
    /// a [`TopicMap::touch`]): what encoded topic lists are checked against.
    stamps: Box<[u64]>,
    version: u64,
}

impl<V, S: BuildHasher + Default + Clone> Default for TopicMap<V, S> {
    fn default() -> Self {
        let hasher = S::default();
        let shards = (0..SHARDS)
            .map(|_| HashMap::with_hasher(NameHash(hasher.clone())))
            .collect();
        TopicMap {
            hasher,
            shards,
            len: 0,
            stamps: vec![0; SHARDS].into(),
            version: 0,
        }
    }
}

impl<V, S> fmt::Debug for TopicMap<V, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TopicMap").field("len", &self.len).finish()
    }
}

impl<V, S: BuildHasher + Clone> TopicMap<V, S> {
    /// The name's shard and its lookup view: the one hash of a lookup.
    #[inline]
    fn probe<'a>(&self, topic: &'a str) -> (usize, Probe<'a>) {
        let hash = hash_name(&self.hasher, topic);
        let shard = (hash >> SHARD_SHIFT) as usize % SHARDS;
        (shard, Probe { hash, name: topic })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn get(&self, topic: &str) -> Option<&V> {
        let (at, probe) = self.probe(topic);
        self.shards[at].get(&probe as &dyn Lookup)
    }

    pub fn get_mut(&mut self, topic: &str) -> Option<&mut V> {
        let (at, probe) = self.probe(topic);
        self.shards[at].get_mut(&probe as &dyn Lookup)
    }

    pub fn get_key_value(&self, topic: &str) -> Option<(&Arc<str>, &V)> {
        let (at, probe) = self.probe(topic);
        let (key, value) = self.shards[at].get_key_value(&probe as &dyn Lookup)?;
        Some((&key.name, value))
    }

    pub fn contains_key(&self, topic: &str) -> bool {
        let (at, probe) = self.probe(topic);
        self.shards[at].contains_key(&probe as &dyn Lookup)
    }

    pub fn insert(&mut self, topic: Arc<str>, value: V) -> Option<V> {
        let (at, _) = self.probe(&topic);
        let old = self.shards[at].insert(TopicKey { name: topic }, value);
        if old.is_none() {
            self.len += 1;
            self.stamp(at);
        }
        old
    }

    pub fn remove(&mut self, topic: &str) -> Option<V> {
        let (at, probe) = self.probe(topic);
        let old = self.shards[at].remove(&probe as &dyn Lookup);
        if old.is_some() {
            self.len -= 1;
            self.stamp(at);
        }
        old
    }

    /// Marks `topic`'s shard changed (something a list filters on changed).
    pub fn touch(&mut self, topic: &str) {
        let (at, _) = self.probe(topic);
        self.stamp(at);
    }

    fn stamp(&mut self, at: usize) {
        self.version += 1;
        self.stamps[at] = self.version;
    }

    /// Bumped by every change of any shard.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Shard `at`'s stamp and entries, in the order [`TopicMap::iter`] visits them.
    pub fn shard(&self, at: usize) -> (u64, impl Iterator<Item = (&Arc<str>, &V)>) {
        let entries = self.shards[at].iter().map(|(k, v)| (&k.name, v));
        (self.stamps[at], entries)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &V)> {
        self.shards
            .iter()
            .flat_map(|s| s.iter().map(|(k, v)| (&k.name, v)))
    }

    pub fn keys(&self) -> impl Iterator<Item = &Arc<str>> {
        self.iter().map(|(k, _)| k)
    }

    /// Shrinks sparse shards; returns their old (empty) tables and the sum of their capacities.
    pub fn shrink_if_sparse(&mut self) -> (Vec<Shard<V, S>>, usize) {
        let mut old_tables = Vec::new();
        let mut old_capacity = 0;
        for at in 0..SHARDS {
            if let Some(old) = shrink_sparse(&mut self.shards[at]) {
                // Moved into a new table: iterated in another order.
                self.stamp(at);
                old_capacity += old.capacity();
                old_tables.push(old);
            }
        }
        (old_tables, old_capacity)
    }
}

const SHRINK_BELOW_FRACTION: usize = 16;

/// Moves a map filled less than 1/[`SHRINK_BELOW_FRACTION`] into a smaller one; returns the old.
pub(super) fn shrink_sparse<K: Hash + Eq, V, S: BuildHasher + Clone>(
    map: &mut HashMap<K, V, S>,
) -> Option<HashMap<K, V, S>> {
    if map.len() * SHRINK_BELOW_FRACTION >= map.capacity() {
        return None;
    }
    let fresh = HashMap::with_capacity_and_hasher(map.len() * 2, map.hasher().clone());
    let mut old = std::mem::replace(map, fresh);
    map.extend(old.drain());
    Some(old)
}

#[cfg(test)]
mod tests {
    use super::*;

    impl<V, S: BuildHasher + Clone> TopicMap<V, S> {
        fn shard_of(&self, topic: &str) -> usize {
            self.probe(topic).0
        }

        pub(crate) fn capacity(&self) -> usize {
            self.shards.iter().map(HashMap::capacity).sum()
        }
    }

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

    /// Every name hashes alike: the worst a peer could do without the process key.
    #[derive(Clone, Copy, Default)]
    struct Colliding;

    impl BuildHasher for Colliding {
        type Hasher = Colliding;

        fn build_hasher(&self) -> Colliding {
            Colliding
        }
    }

    impl Hasher for Colliding {
        fn write(&mut self, _: &[u8]) {}
        fn finish(&self) -> u64 {
            0x1234_5678_9ABC_DEF0
        }
    }

    #[test]
    fn one_keyed_hash_picks_the_shard_and_places_the_name_in_it() {
        let mut m: TopicMap<u32> = TopicMap::default();
        for i in 0..1_000u32 {
            m.insert(Arc::from(format!("T{i}").as_str()), i);
        }
        for (at, shard) in m.shards.iter().enumerate() {
            for key in shard.keys() {
                // A stored key hashes as the map's keyed hash of its name, in the shard its
                // bits pick.
                assert_eq!(shard.hasher().hash_one(key), m.hasher.hash_one(&*key.name));
                assert_eq!(m.shard_of(&key.name), at);
            }
        }
        // Names with one hash (all in one shard, one probe chain) stay apart by their text.
        let mut c: TopicMap<u32, Colliding> = TopicMap::default();
        for i in 0..300u32 {
            assert_eq!(c.insert(Arc::from(format!("C{i}").as_str()), i), None);
        }
        assert_eq!(c.shards.iter().filter(|s| !s.is_empty()).count(), 1);
        for i in 0..300u32 {
            assert_eq!(c.get(&format!("C{i}")), Some(&i));
        }
        assert_eq!(c.get("C300"), None);
        assert_eq!(c.remove("C7"), Some(7));
        assert!(!c.contains_key("C7") && c.contains_key("C8"));
        assert_eq!(c.len(), 299);
    }

    #[test]
    fn topics_spread_over_the_shards_and_growth_stays_within_one() {
        // With the hasher the topic table uses.
        let mut m: TopicMap<(), foldhash::fast::RandomState> = TopicMap::default();
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

    /// A stored key must hash in its shard exactly as a lookup of its name does, or once the
    /// shard grows (rehashing stored keys) the name is in a bucket lookups never probe.
    fn stored_keys_hash_as_probes<S: BuildHasher + Default + Clone>() {
        let mut m: TopicMap<u32, S> = TopicMap::default();
        // Growth of every shard, several times over.
        for i in 0..20_000u32 {
            assert_eq!(m.insert(Arc::from(format!("K{i}").as_str()), i), None);
        }
        for i in 0..20_000u32 {
            assert_eq!(m.get(&format!("K{i}")), Some(&i), "K{i} after growth");
        }
        for shard in m.shards.iter() {
            for key in shard.keys() {
                let (_, probe) = m.probe(&key.name);
                let stored = shard.hasher().hash_one(key);
                assert_eq!(stored, shard.hasher().hash_one(&probe as &dyn Lookup));
                assert_eq!(stored, probe.hash);
            }
        }
        // Removal (probe) of what inserts (stored keys) put, then a shrink rehashing the rest.
        for i in 1..20_000u32 {
            assert_eq!(m.remove(&format!("K{i}")), Some(i));
        }
        let (old, _) = m.shrink_if_sparse();
        assert!(!old.is_empty());
        assert_eq!(m.get("K0"), Some(&0));
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn a_stored_key_hashes_as_a_lookup_of_its_name() {
        // The topic table's hasher and std's; the `Default` of each draws new keys each call:
        // the shards hash with the map's copy, never a fresh one.
        stored_keys_hash_as_probes::<foldhash::fast::RandomState>();
        stored_keys_hash_as_probes::<std::collections::hash_map::RandomState>();
    }

    #[test]
    fn a_stored_topic_is_its_name_and_its_entry() {
        use crate::route::table::TopicEntry;
        use std::mem::size_of;
        // No hash kept with the key: 8 bytes per topic less than a (hash, name) key.
        assert_eq!(size_of::<TopicKey>(), size_of::<Arc<str>>());
        assert_eq!(
            size_of::<(TopicKey, TopicEntry)>(),
            size_of::<(Arc<str>, TopicEntry)>()
        );
        assert_eq!(
            size_of::<(TopicKey, TopicEntry)>() + 8,
            size_of::<((u64, Arc<str>), TopicEntry)>()
        );
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
