//! The topic list of the body applied last, whose strings the next body's names overwrite
//! (allocating and freeing them was a fifth of a changed registration's instructions).

use super::{RegisterBody, TopicConfig};

/// Largest topic list kept (a few thousand strings).
pub const MAX_POOLED: usize = 2_048;

/// A list with a longer string is freed, not kept (topic names are at most 127 bytes by default).
pub const MAX_POOLED_CAPACITY: usize = 256;

type Topic = (String, TopicConfig);

#[derive(Debug, Default)]
pub struct DecodeScratch {
    kept: Vec<Topic>,
}

impl DecodeScratch {
    /// The list to decode a body's topics into: the kept one, else a new one of `capacity`.
    pub(super) fn topics(&mut self, capacity: usize) -> Vec<Topic> {
        if self.kept.capacity() == 0 {
            return Vec::with_capacity(capacity);
        }
        std::mem::take(&mut self.kept)
    }

    /// Sets entry `at` of `topics` (its strings overwritten when it exists, else pushed).
    #[inline]
    pub(super) fn put(topics: &mut Vec<Topic>, at: usize, key: &str, name: &str, tc: TopicConfig) {
        match topics.get_mut(at) {
            Some((kept_key, kept)) => {
                kept_key.clear();
                kept_key.push_str(key);
                let mut topic_name = std::mem::take(&mut kept.topic_name);
                topic_name.clear();
                topic_name.push_str(name);
                *kept = TopicConfig { topic_name, ..tc };
            }
            None => topics.push((
                key.to_owned(),
                TopicConfig {
                    topic_name: name.to_owned(),
                    ..tc
                },
            )),
        }
    }

    /// Keeps the topic list of an applied body for the next decode, unless past the bounds.
    pub fn recycle(&mut self, body: RegisterBody) {
        let topics = body.topics;
        let small = |s: &String| s.capacity() <= MAX_POOLED_CAPACITY;
        if topics.len() <= MAX_POOLED
            && topics
                .iter()
                .all(|(k, tc)| small(k) && small(&tc.topic_name))
        {
            self.kept = topics;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl DecodeScratch {
        /// Topics (strings to overwrite) kept now.
        pub(crate) fn pooled(&self) -> usize {
            self.kept.len()
        }
    }

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

    fn body(topics: Vec<(String, TopicConfig)>) -> RegisterBody {
        RegisterBody {
            topics,
            ..RegisterBody::default()
        }
    }

    #[test]
    fn a_kept_list_is_overwritten_in_place_and_the_kept_one_stays_bounded() {
        let mut scratch = DecodeScratch::default();
        scratch.recycle(body(vec![config("a", 6), config("bb", 2)]));
        assert_eq!(scratch.pooled(), 2);
        let mut topics = scratch.topics(0);
        assert_eq!(scratch.pooled(), 0);
        let (_, tc) = config("x", 4);
        DecodeScratch::put(&mut topics, 0, "key", "name", tc.clone());
        DecodeScratch::put(&mut topics, 1, "b", "b", tc.clone());
        DecodeScratch::put(&mut topics, 2, "c", "c", tc.clone());
        let named = |key: &str, name: &str| {
            let tc = TopicConfig {
                topic_name: name.to_owned(),
                ..tc.clone()
            };
            (key.to_owned(), tc)
        };
        assert_eq!(
            topics,
            vec![named("key", "name"), named("b", "b"), named("c", "c")]
        );
        // Too many topics, or a string too long: not kept.
        scratch.recycle(body(
            (0..=MAX_POOLED)
                .map(|i| config(&i.to_string(), 6))
                .collect(),
        ));
        assert_eq!(scratch.pooled(), 0);
        scratch.recycle(body(vec![config(&"x".repeat(MAX_POOLED_CAPACITY + 1), 6)]));
        assert_eq!(scratch.pooled(), 0);
        scratch.recycle(body(topics));
        assert_eq!(scratch.pooled(), 3);
    }
}
