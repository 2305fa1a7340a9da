//! A lazy timer wheel: deadlines rounded up to fixed-width buckets in a `BTreeMap`, so that a
//! tick pops only the buckets that are due and touches nothing else.
//!
//! Owners re-arm lazily: a heartbeat only moves a deadline stored in the owner's own entry;
//! when the entry's bucket fires, the owner re-checks the real deadline and schedules the
//! entry again if it is not due yet. A broker is therefore touched about once per timeout,
//! never once per heartbeat, and a tick costs O(entries that fire).

use std::collections::BTreeMap;

/// Buckets of `granularity_ms` holding keys of type `K`.
#[derive(Debug)]
pub struct TimerWheel<K> {
    granularity_ms: u64,
    buckets: BTreeMap<u64, Vec<K>>,
    len: usize,
}

impl<K> TimerWheel<K> {
    pub fn new(granularity_ms: u64) -> Self {
        TimerWheel {
            granularity_ms: granularity_ms.max(1),
            buckets: BTreeMap::new(),
            len: 0,
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
        self.len += 1;
        bucket
    }

    /// Removes and returns every key whose bucket is due at `now_ms`, with its bucket.
    pub fn pop_due(&mut self, now_ms: u64, mut visit: impl FnMut(u64, K)) {
        let now_bucket = now_ms / self.granularity_ms;
        while let Some(entry) = self.buckets.first_entry() {
            if *entry.key() > now_bucket {
                break;
            }
            let (bucket, keys) = entry.remove_entry();
            self.len -= keys.len();
            for key in keys {
                visit(bucket, key);
            }
        }
    }

    /// Like [`TimerWheel::pop_due`] but stops after `limit` keys; returns true when due keys
    /// remain (the caller comes back for them on its next turn).
    pub fn pop_due_limited(
        &mut self,
        now_ms: u64,
        limit: usize,
        mut visit: impl FnMut(u64, K),
    ) -> bool {
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
                self.len -= 1;
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

    /// Scheduled entries (including stale ones that owners will ignore when they fire).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_fire_no_earlier_than_their_deadline_and_only_once() {
        let mut wheel = TimerWheel::new(1000);
        wheel.schedule(1500, "a");
        wheel.schedule(2000, "b");
        wheel.schedule(9000, "c");
        let mut fired = Vec::new();
        wheel.pop_due(1999, |_, k| fired.push(k));
        assert!(fired.is_empty());
        wheel.pop_due(2000, |_, k| fired.push(k));
        assert_eq!(fired, vec!["a", "b"]);
        wheel.pop_due(5000, |_, k| fired.push(k));
        assert_eq!(fired.len(), 2);
        assert_eq!(wheel.len(), 1);
        wheel.pop_due(u64::MAX, |_, k| fired.push(k));
        assert_eq!(fired, vec!["a", "b", "c"]);
        assert!(wheel.is_empty());
    }

    #[test]
    fn limited_pops_resume_where_they_stopped() {
        let mut wheel = TimerWheel::new(10);
        for i in 0..25 {
            wheel.schedule(i, i);
        }
        wheel.schedule(1000, 99);
        let mut fired = Vec::new();
        assert!(wheel.pop_due_limited(100, 10, |_, k| fired.push(k)));
        assert_eq!(fired.len(), 10);
        assert!(wheel.pop_due_limited(100, 10, |_, k| fired.push(k)));
        assert!(!wheel.pop_due_limited(100, 10, |_, k| fired.push(k)));
        fired.sort_unstable();
        assert_eq!(fired, (0..25).collect::<Vec<_>>());
        assert_eq!(wheel.len(), 1);
    }
}
