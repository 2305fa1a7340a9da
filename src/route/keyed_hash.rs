//! The hasher of the registry's string-keyed tables that a changed registration works
//! through (topics, broker groups, the duplicate check of a registration body). Not the route
//! cache: a cache hit hashes one short name, and SipHash's parallel rounds finish it sooner
//! than this hash's chain of dependent multiplies (`cargo bench --bench route_lookup`: 39 ns
//! against 44 ns a lookup), although it takes more instructions.
//!
//! Their keys are chosen by peers (topic and broker names), so a fixed hash would let a peer
//! pick names that all collide (HashDoS); std's SipHash-1-3 resists that but costs about a
//! hundred instructions per topic name, and a changed registration looks up each of its
//! topics several times. This is a keyed folded-multiply hash in the manner of aHash's and
//! foldhash's portable fallbacks: every 8 bytes are mixed by one 64x64->128-bit multiply with
//! a secret odd multiplier, the halves of the product folded together. The two 64-bit keys
//! are drawn once per process from std's random source, so colliding names cannot be
//! prepared without knowing them. It is weaker than SipHash as a PRF, but no key-independent
//! collision of this construction is known, which is what HashDoS resistance asks for.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// `BuildHasher` of [`KeyedHasher`]; every map built with it shares the process keys.
#[derive(Debug, Clone, Copy)]
pub struct KeyedState {
    seed: u64,
    multiplier: u64,
}

impl Default for KeyedState {
    fn default() -> Self {
        static KEYS: OnceLock<KeyedState> = OnceLock::new();
        *KEYS.get_or_init(|| {
            // std seeds RandomState from the OS; hashing two constants reads out its keys'
            // effect as 128 random bits without a crate.
            let random = RandomState::new();
            KeyedState {
                seed: random.hash_one(0x5EED_u64),
                multiplier: random.hash_one(0x0DD_u64) | 1,
            }
        })
    }
}

impl BuildHasher for KeyedState {
    type Hasher = KeyedHasher;

    fn build_hasher(&self) -> KeyedHasher {
        KeyedHasher {
            acc: self.seed,
            multiplier: self.multiplier,
        }
    }
}

/// One hash in progress; see the module documentation.
#[derive(Debug, Clone)]
pub struct KeyedHasher {
    acc: u64,
    multiplier: u64,
}

/// The two halves of the full product, folded: every input bit reaches every output bit.
#[inline(always)]
fn folded_multiply(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

impl KeyedHasher {
    #[inline(always)]
    fn mix(&mut self, word: u64) {
        self.acc = folded_multiply(self.acc ^ word, self.multiplier);
    }
}

impl Hasher for KeyedHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // The length first: inputs that differ only in trailing zero bytes differ here.
        self.mix(bytes.len() as u64);
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            self.mix(u64::from_le_bytes(w));
        }
        let tail = words.remainder();
        if !tail.is_empty() {
            let mut w = [0u8; 8];
            w[..tail.len()].copy_from_slice(tail);
            self.mix(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.mix(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.mix(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.mix(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.mix(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // One more round, so the last word's bytes also reach the top bits hashbrown's
        // control bytes are taken from.
        folded_multiply(self.acc, self.multiplier.rotate_left(32) | 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn equal_keys_hash_equal_and_near_keys_apart() {
        let s = KeyedState::default();
        assert_eq!(s.hash_one("TopicTest"), s.hash_one("TopicTest"));
        assert_eq!(
            s.hash_one("TopicTest"),
            KeyedState::default().hash_one("TopicTest")
        );
        // Names differing in one byte, in the length only, or in trailing zero bytes.
        let names = [
            "a",
            "b",
            "a\0",
            "a\0\0\0\0\0\0\0",
            "a\0\0\0\0\0\0\0\0",
            "",
            "topic_1",
        ];
        let hashes: HashSet<u64> = names.iter().map(|n| s.hash_one(n)).collect();
        assert_eq!(hashes.len(), names.len());
    }

    #[test]
    fn sequential_names_spread_over_buckets() {
        // 4096 names like a benchmark's into 256 buckets, by low bits and by top 7 bits
        // (hashbrown uses both): no bucket may hold much more than its share of 16.
        let s = KeyedState::default();
        let mut low = [0u32; 256];
        let mut top = [0u32; 128];
        for i in 0..4096 {
            let h = s.hash_one(format!("bench_topic_{i:06}"));
            low[(h & 0xFF) as usize] += 1;
            top[(h >> 57) as usize] += 1;
        }
        assert!(low.iter().all(|&n| n < 48), "{low:?}");
        assert!(top.iter().all(|&n| n < 80), "{top:?}");
    }
}
