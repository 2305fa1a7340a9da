//! Deadline buckets: deadlines rounded up to fixed-width buckets in a `BTreeMap`, so a tick
//! pops only the buckets that are due. Used for idle connections and broker expiry.
//!
//! Owners re-arm lazily: a heartbeat only moves the deadline in the owner's own entry; when
//! the bucket fires, the owner re-checks it and schedules the entry again if it is not due.
//! A broker is touched about once per timeout, never once per heartbeat.

use std::collections::BTreeMap;

/// Buckets of `granularity_ms` holding keys of type `K`.
#[derive(Debug)]
pub struct DeadlineBuckets<K> {
    granularity_ms: u64,
    buckets: BTreeMap<u64, Vec<K>>,
}

impl<K> DeadlineBuckets<K> {
    pub fn new(granularity_ms: u64) -> Self {
        DeadlineBuckets {
            granularity_ms: granularity_ms.max(1),
            buckets: BTreeMap::new(),
        }
    }

    /// The bucket a deadline falls in (rounded up, so nothing fires early).
    pub fn bucket_of(&self, deadline_ms: u64) -> u64 {
        deadline_ms.div_ceil(self.granularity_ms)
    }

    /// Schedules `key` to fire at the first tick at or after `deadline_ms`; returns its bucket.
    pub fn schedule(&mut self, deadline_ms: u64, key: K) -> u64 {
        let bucket = self.bucket_of(deadline_ms);
        self.buckets.entry(bucket).or_default().push(key);
        bucket
    }

    /// Removes up to `limit` keys whose bucket is due at `now_ms` and visits each with its
    /// bucket; returns true when due keys remain (the caller comes back for them on its next
    /// turn).
    pub fn pop_due(&mut self, now_ms: u64, limit: usize, mut visit: impl FnMut(u64, K)) -> bool {
        let now_bucket = now_ms / self.granularity_ms;
        let mut taken = 0;
        while let Some(mut entry) = self.buckets.first_entry() {
            if *entry.key() > now_bucket {
                return false;
            }
            let bucket = *entry.key();
            let keys = entry.get_mut();
            while taken < limit {
                let Some(key) = keys.pop() else {
                    break;
                };
                taken += 1;
                visit(bucket, key);
            }
            if keys.is_empty() {
                entry.remove();
            } else {
                return true;
            }
        }
        false
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl<K> DeadlineBuckets<K> {
        /// Scheduled entries (including stale ones).
        pub(crate) fn len(&self) -> usize {
            self.buckets.values().map(Vec::len).sum()
        }
    }

    #[test]
    fn keys_fire_no_earlier_than_their_deadline_and_only_once() {
        let mut buckets = DeadlineBuckets::new(1000);
        buckets.schedule(1500, "a");
        buckets.schedule(2000, "b");
        buckets.schedule(9000, "c");
        let mut fired = Vec::new();
        assert!(!buckets.pop_due(1999, usize::MAX, |_, k| fired.push(k)));
        assert!(fired.is_empty());
        buckets.pop_due(2000, usize::MAX, |_, k| fired.push(k));
        fired.sort_unstable();
        assert_eq!(fired, vec!["a", "b"]);
        buckets.pop_due(5000, usize::MAX, |_, k| fired.push(k));
        assert_eq!(fired.len(), 2);
        assert_eq!(buckets.len(), 1);
        buckets.pop_due(u64::MAX, usize::MAX, |_, k| fired.push(k));
        assert_eq!(fired, vec!["a", "b", "c"]);
        assert!(buckets.is_empty());
    }

    #[test]
    fn limited_pops_resume_where_they_stopped() {
        let mut buckets = DeadlineBuckets::new(10);
        for i in 0..25 {
            buckets.schedule(i, i);
        }
        buckets.schedule(1000, 99);
        let mut fired = Vec::new();
        assert!(buckets.pop_due(100, 10, |_, k| fired.push(k)));
        assert_eq!(fired.len(), 10);
        assert!(buckets.pop_due(100, 10, |_, k| fired.push(k)));
        assert!(!buckets.pop_due(100, 10, |_, k| fired.push(k)));
        fired.sort_unstable();
        assert_eq!(fired, (0..25).collect::<Vec<_>>());
        assert_eq!(buckets.len(), 1);
    }
}
