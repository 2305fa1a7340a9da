//! What the decoder of changed registration bodies keeps from one body to the next: the
//! emptied topic-name strings of bodies already applied, and the set its duplicate-key check
//! fills.
//!
//! A changed body of a hundred topics owns about 270 strings (each TopicConfig's map key and
//! its topicName); allocating them and freeing them after the apply was a fifth of a changed
//! registration's instructions (callgrind, `rmq-bench register --churn`). The loop's
//! processor hands the bodies it applied back here, and the next decode writes its names into
//! those strings: no allocation while the names fit the capacities already there. Bounded: at
//! most [`MAX_POOLED`] strings of at most [`MAX_POOLED_CAPACITY`] bytes each are kept, whatever
//! the bodies were; and the server empties the pool ([`DecodeScratch::release`]) before it
//! hands freed heap back to the OS, since kept strings scattered over the heap would keep
//! their pages (measured: +0.15-0.3 MiB RSS after a churn run without it).

use super::{dedup_last_wins, RegisterBody, TopicConfig};
use crate::route::keyed_hash::KeyedState;
use std::collections::HashSet;
use std::hash::BuildHasher;

/// Strings kept for reuse: twice the names of a few hundred topics.
pub const MAX_POOLED: usize = 4_096;

/// Larger strings are freed rather than kept (topic names are at most 127 bytes by default).
pub const MAX_POOLED_CAPACITY: usize = 256;

/// Reusable buffers of the body decoder (see the module comment). `Default` holds nothing.
#[derive(Debug, Default)]
pub struct DecodeScratch {
    names: Vec<String>,
    /// Keyed hashes of the keys of the body being decoded.
    keys: HashSet<u64, KeyedState>,
    hasher: KeyedState,
}

impl DecodeScratch {
    /// An owned copy of `s`, in a kept string when there is one.
    #[inline]
    pub(super) fn string(&mut self, s: &str) -> String {
        match self.names.pop() {
            Some(mut kept) => {
                kept.clear();
                kept.push_str(s);
                kept
            }
            None => s.to_owned(),
        }
    }

    /// Takes the topic names of an applied body for the next decodes (the rest of the body is
    /// dropped here).
    pub fn recycle(&mut self, body: RegisterBody) {
        for (key, config) in body.topics {
            for s in [key, config.topic_name] {
                if self.names.len() < MAX_POOLED && s.capacity() <= MAX_POOLED_CAPACITY {
                    self.names.push(s);
                }
            }
        }
    }

    /// Frees the kept strings (the duplicate-key set is kept: one allocation).
    pub fn release(&mut self) {
        self.names = Vec::new();
    }

    /// Strings kept now.
    pub fn pooled(&self) -> usize {
        self.names.len()
    }

    /// The topics with repeated keys resolved as a Java map does (the last config at the first
    /// key's place). The check hashes each key into a set kept between bodies; only when two
    /// hashes are equal (a repeated key, or a 64-bit collision of the process-keyed hash) does
    /// the exact, allocating resolution run, so a collision costs time, never correctness.
    pub(super) fn dedup_topics(
        &mut self,
        topics: Vec<(String, TopicConfig)>,
    ) -> Vec<(String, TopicConfig)> {
        self.keys.clear();
        // A set sized for a huge body is not kept for the small ones after it.
        if self.keys.capacity() > 4 * MAX_POOLED {
            self.keys.shrink_to(MAX_POOLED);
        }
        self.keys.reserve(topics.len());
        let hasher = self.hasher;
        let repeated = topics
            .iter()
            .any(|(key, _)| !self.keys.insert(hasher.hash_one(key.as_str())));
        if repeated {
            dedup_last_wins(topics)
        } else {
            topics
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(name: &str, perm: i32) -> (String, TopicConfig) {
        let tc = TopicConfig {
            topic_name: name.to_owned(),
            read_queue_nums: 1,
            write_queue_nums: 1,
            perm,
            topic_sys_flag: 0,
        };
        (name.to_owned(), tc)
    }

    #[test]
    fn recycled_strings_are_reused_and_the_pool_stays_bounded() {
        let mut scratch = DecodeScratch::default();
        let body = RegisterBody {
            topics: vec![
                config("a", 6),
                config(&"x".repeat(MAX_POOLED_CAPACITY + 1), 6),
            ],
            ..RegisterBody::default()
        };
        scratch.recycle(body);
        // Two strings of the short topic; the long one's are freed.
        assert_eq!(scratch.pooled(), 2);
        let s = scratch.string("topic-b");
        assert_eq!((s.as_str(), scratch.pooled()), ("topic-b", 1));
        let many = RegisterBody {
            topics: (0..MAX_POOLED).map(|i| config(&i.to_string(), 6)).collect(),
            ..RegisterBody::default()
        };
        scratch.recycle(many);
        assert_eq!(scratch.pooled(), MAX_POOLED);
        scratch.release();
        assert_eq!(scratch.pooled(), 0);
        let mut empty = DecodeScratch::default();
        assert_eq!(empty.string("fresh"), "fresh");
    }

    #[test]
    fn repeated_keys_resolve_as_a_java_map_and_distinct_ones_stay_as_they_are() {
        let mut scratch = DecodeScratch::default();
        let distinct = vec![config("A", 6), config("B", 6), config("C", 6)];
        assert_eq!(scratch.dedup_topics(distinct.clone()), distinct);
        let repeated = vec![config("A", 6), config("B", 6), config("A", 2)];
        let resolved = scratch.dedup_topics(repeated);
        assert_eq!(resolved, vec![config("A", 2), config("B", 6)]);
        // The set is emptied between bodies: the same keys in the next body are no repeat.
        assert_eq!(scratch.dedup_topics(distinct.clone()), distinct);
    }
}
