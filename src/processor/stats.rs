//! What the processor counts (the stats extension's body) and how it logs under load.

use super::{Processor, Refusal, Reply};
use crate::event_loop::LoopStats;
use crate::remoting::json::{write_i64, Seq};
use log::{info, warn};
use std::collections::HashMap;

/// Request counts by code: an array for RocketMQ's range, a map for anything else.
#[derive(Debug)]
pub(super) struct RequestCounts {
    low: Vec<u64>,
    other: HashMap<i32, u64>,
}

impl Default for RequestCounts {
    fn default() -> Self {
        RequestCounts {
            low: vec![0; 1024],
            other: HashMap::new(),
        }
    }
}

impl RequestCounts {
    pub(super) fn count(&mut self, code: i32) {
        match usize::try_from(code).ok().and_then(|c| self.low.get_mut(c)) {
            Some(n) => *n += 1,
            // Unknown codes from hostile peers must not grow this map without bound.
            None if self.other.len() < 1024 || self.other.contains_key(&code) => {
                *self.other.entry(code).or_insert(0) += 1
            }
            None => {}
        }
    }

    fn sorted(&self) -> Vec<(i32, u64)> {
        let low = self.low.iter().enumerate().map(|(c, n)| (c as i32, *n));
        let mut v: Vec<(i32, u64)> = low
            .filter(|(_, n)| *n > 0)
            .chain(self.other.iter().map(|(c, n)| (*c, *n)))
            .collect();
        v.sort_unstable();
        v
    }
}

#[derive(Debug, Default)]
pub(super) struct Stats {
    pub(super) requests_by_code: RequestCounts,
    pub(super) registrations: u64,
    pub(super) registrations_unchanged: u64,
    pub(super) expiries: u64,
    pub(super) unregistrations: u64,
    pub(super) unregister_batches: u64,
    pub(super) largest_batch: usize,
    pub(super) max_removal_steps: usize,
    pub(super) unregister_queue_full: u64,
    pub(super) rejected_busy: u64,
    pub(super) changes: ChangeSummary,
    pub(super) refusals: WarnLimiter,
    pub(super) bounds_reached: WarnLimiter,
    pub(super) takeovers: WarnLimiter,
    /// A full KV store is warned about once per interval.
    pub(super) kv_full: WarnLimiter<1>,
}

/// How often route changes are summarised, and warnings of one kind counted, at most.
pub(super) const CHANGE_SUMMARY_INTERVAL_MS: u64 = 10_000;

/// Lines per interval a [`WarnLimiter`] lets through; the rest are counted.
const WARN_LINES: u32 = 5;

/// "new broker registered" lines per interval (a cluster start registers thousands at once).
pub(super) const NEW_BROKER_LINES: u32 = 10;

#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Interval(u64);

impl Interval {
    fn start(&mut self, now_ms: u64) {
        if self.0 == 0 {
            self.0 = now_ms.saturating_add(CHANGE_SUMMARY_INTERVAL_MS).max(1);
        }
    }

    fn over(&self, now_ms: u64) -> bool {
        self.0 != 0 && now_ms >= self.0
    }
}

/// Warnings of one kind, at most `LINES` per interval, then a count.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct WarnLimiter<const LINES: u32 = WARN_LINES> {
    interval: Interval,
    lines: u32,
    suppressed: u64,
}

impl<const LINES: u32> WarnLimiter<LINES> {
    pub(super) fn admit(&mut self, now_ms: u64) -> bool {
        self.interval.start(now_ms);
        self.lines = self.lines.saturating_add(1);
        self.suppressed += u64::from(self.lines > LINES);
        self.lines <= LINES
    }

    /// Once the interval is over: how many were held back, and a fresh interval.
    fn log_due(&mut self, now_ms: u64, what: &str) {
        if !self.interval.over(now_ms) {
            return;
        }
        let n = std::mem::take(self).suppressed;
        if n > 0 {
            warn!("{n} more {what} in the last interval, not logged one by one");
        }
    }
}

/// Route changes by registrations and REGISTER_TOPIC_IN_NAMESRV, counted between info lines.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct ChangeSummary {
    interval: Interval,
    new_brokers_logged: u32,
    new_brokers_unlogged: u64,
    brokers_changed: u64,
    queue_entries_changed: u64,
    topics_registered: u64,
    queue_entries_registered: u64,
}

impl ChangeSummary {
    /// Counts a first registration; true while it should still get a line of its own.
    pub(super) fn new_broker(&mut self, now_ms: u64) -> bool {
        self.interval.start(now_ms);
        let own_line = self.new_brokers_logged < NEW_BROKER_LINES;
        self.new_brokers_logged += u32::from(own_line);
        self.new_brokers_unlogged += u64::from(!own_line);
        own_line
    }

    pub(super) fn broker_changed(&mut self, queue_entries: usize, now_ms: u64) {
        self.interval.start(now_ms);
        self.brokers_changed += 1;
        self.queue_entries_changed += queue_entries as u64;
    }

    pub(super) fn topic_registered(&mut self, queue_entries: usize, now_ms: u64) {
        self.interval.start(now_ms);
        self.topics_registered += 1;
        self.queue_entries_registered += queue_entries as u64;
    }

    pub(super) fn take_due(&mut self, now_ms: u64) -> Option<String> {
        if !self.interval.over(now_ms) {
            return None;
        }
        let d = std::mem::take(self);
        let parts: Vec<String> = [
            (d.brokers_changed > 0).then(|| {
                format!(
                    "{} registration(s) changed {} topic queue entries",
                    d.brokers_changed, d.queue_entries_changed
                )
            }),
            (d.topics_registered > 0).then(|| {
                format!(
                    "{} topic(s) registered by REGISTER_TOPIC_IN_NAMESRV with {} queue entries",
                    d.topics_registered, d.queue_entries_registered
                )
            }),
            (d.new_brokers_unlogged > 0).then(|| {
                format!(
                    "{} more new broker(s) registered (listed at debug)",
                    d.new_brokers_unlogged
                )
            }),
        ]
        .into_iter()
        .flatten()
        .collect();
        (!parts.is_empty()).then(|| format!("route changes: {}", parts.join("; ")))
    }
}

impl Processor {
    /// Logs the route-change summary and the warnings held back once their interval is over.
    pub fn log_change_summary(&mut self, now_ms: u64) {
        if let Some(line) = self.stats.changes.take_due(now_ms) {
            info!("{line}");
        }
        let s = &mut self.stats;
        s.refusals.log_due(now_ms, "refused request(s)");
        s.bounds_reached
            .log_due(now_ms, "registration(s) refused by a bound");
        s.takeovers.log_due(now_ms, "address takeover(s)");
        s.kv_full
            .log_due(now_ms, "KV change(s) refused: the store is full");
    }

    /// The stats extension's answer.
    pub(super) fn stats(&self, l: &LoopStats) -> Result<Reply, Refusal> {
        let (t, s) = (&self.table, &self.stats);
        let (list_shards, list_bytes) = t.topic_list_stats();
        let fields: [(&str, u64); 28] = [
            ("connections", l.connections as u64),
            ("brokers", t.live_broker_count() as u64),
            ("brokerGroups", t.broker_group_count() as u64),
            ("topics", t.topic_count() as u64),
            ("clusters", t.cluster_count() as u64),
            ("uptimeMillis", self.started.elapsed().as_millis() as u64),
            ("registrations", s.registrations),
            ("registrationsUnchanged", s.registrations_unchanged),
            ("expiries", s.expiries),
            ("unregistrations", s.unregistrations),
            ("unregisterBatches", s.unregister_batches),
            ("largestUnregisterBatch", s.largest_batch as u64),
            ("maxRemovalStepsPerTurn", s.max_removal_steps as u64),
            ("bytesIn", l.bytes_in),
            ("bytesOut", l.bytes_out),
            ("sharedReplyBytes", l.shared_bytes),
            ("rejectedBusy", s.rejected_busy),
            ("unregisterQueueFull", s.unregister_queue_full),
            ("bufferedBytes", l.buffered_bytes as u64),
            ("refusedConnections", l.refused),
            ("frameTimeouts", l.frame_timeouts),
            ("closedOverBudget", l.closed_over_budget),
            ("acceptFailures", l.accept_failures),
            ("maxTurnMicros", l.max_turn_micros),
            ("longTurns", l.long_turns),
            ("maxTurnBytesOut", l.max_turn_bytes_out),
            ("topicListShardsEncoded", list_shards),
            ("topicListBytes", list_bytes as u64),
        ];
        let mut out = Vec::with_capacity(512);
        let mut o = Seq::object(&mut out);
        for (k, v) in fields {
            write_i64(o.field(k), v as i64);
        }
        let mut requests = Seq::object(o.field("requests"));
        for (code, n) in s.requests_by_code.sorted() {
            write_i64(requests.key(&code.to_string()), n as i64);
        }
        requests.end();
        o.end();
        Ok(Reply::with_body(out))
    }
}

/// Logs one line per item, or of up to 100 items when there are many (a mass expiry must
/// not cost thousands of log writes on the loop).
pub(super) fn log_grouped(
    level: log::Level,
    what: &str,
    items: impl ExactSizeIterator<Item = String>,
) {
    if !log::log_enabled!(level) {
        return;
    }
    let total = items.len();
    if total <= 10 {
        for item in items {
            log::log!(level, "{what}: {item}");
        }
        return;
    }
    let items: Vec<String> = items.collect();
    for (n, chunk) in items.chunks(100).enumerate() {
        let shown = n * 100 + chunk.len();
        log::log!(level, "{what} ({shown} of {total}): {}", chunk.join("; "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_changes_are_summarised_once_per_interval() {
        let mut s = ChangeSummary::default();
        assert_eq!(s.take_due(1_000_000), None, "nothing happened");
        s.broker_changed(3, 1_000);
        s.broker_changed(2, 5_000);
        s.topic_registered(4, 6_000);
        assert_eq!(s.take_due(10_999), None, "the interval is not over");
        assert_eq!(
            s.take_due(11_000).as_deref(),
            Some("route changes: 2 registration(s) changed 5 topic queue entries; 1 topic(s) registered by REGISTER_TOPIC_IN_NAMESRV with 4 queue entries")
        );
        assert_eq!(s, ChangeSummary::default());
        assert_eq!(s.take_due(100_000), None);
    }

    #[test]
    fn the_first_new_brokers_of_an_interval_get_their_own_line_and_the_rest_a_count() {
        let mut s = ChangeSummary::default();
        let own_line = (0..25).filter(|_| s.new_broker(0)).count();
        assert_eq!(own_line, NEW_BROKER_LINES as usize);
        assert_eq!(
            s.take_due(CHANGE_SUMMARY_INTERVAL_MS).as_deref(),
            Some("route changes: 15 more new broker(s) registered (listed at debug)")
        );
        assert!(s.new_broker(20_000), "a new interval logs again");
        assert_eq!(s.take_due(30_000), None, "nothing left to summarise");
    }
}
