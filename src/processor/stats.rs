//! What the processor counts (the stats extension's body) and how it logs under load.

use super::{Processor, Refusal, Reply};
use crate::event_loop::LoopStats;
use crate::metrics::Histogram;
use crate::remoting::codes::{self, request, response_name, REQUEST_CODES, RESPONSE_CODES};
use crate::remoting::json::{write_i64, Seq};
use log::{info, warn};
use std::collections::HashMap;
use std::time::Instant;

/// Columns of [`RequestCounts`]: the response codes, then one for any other.
const RESULTS: usize = RESPONSE_CODES.len() + 1;

/// Latency classes, the `class` label of the request latency histogram.
pub(super) const LATENCY_CLASSES: [&str; 4] = ["route", "heartbeat", "registration", "admin"];

fn latency_class(code: i32) -> usize {
    match code {
        request::GET_ROUTEINFO_BY_TOPIC => 0,
        request::BROKER_HEARTBEAT | request::QUERY_DATA_VERSION => 1,
        request::REGISTER_BROKER
        | request::UNREGISTER_BROKER
        | request::REGISTER_TOPIC_IN_NAMESRV => 2,
        _ => 3,
    }
}

/// Route lookups and heartbeats are timed one in this many (the other classes, all): two
/// clock reads cost 50-110 ns on a 2 vCPU KVM guest, a tenth to a fifth of a route lookup's
/// 0.5 us of CPU; one in 16 keeps it under 1.5 % and still gives a p99 at their rates.
/// Re-measure: a loop of `Instant::now().elapsed()` in a `rustc -O` program.
const SAMPLE_EVERY: u64 = 16;

/// The classes before this one are sampled ([`SAMPLE_EVERY`]).
const SAMPLED_CLASSES: usize = 2;

/// Codes below this have their row in an array (RocketMQ's request codes are all below it).
const DIRECT_CODES: usize = 1024;

/// Requests by code row and result, and their time on the loop by class: arrays indexed by
/// the row, so counting neither allocates nor hashes nor searches.
#[derive(Debug)]
pub(super) struct RequestCounts {
    /// By row of [`REQUEST_CODES`] (then one row for other codes), by result.
    by_row: Vec<[u64; RESULTS]>,
    /// The row of each code below [`DIRECT_CODES`] (`u8::MAX`: not in the table).
    row_of_code: Vec<u8>,
    class_of_row: Vec<usize>,
    /// Requests seen by class, for [`SAMPLE_EVERY`].
    seen: [u64; LATENCY_CLASSES.len()],
    pub(super) latency: [Histogram; LATENCY_CLASSES.len()],
    /// Codes outside the table, by code, for the stats extension.
    other: HashMap<i32, u64>,
}

impl Default for RequestCounts {
    fn default() -> Self {
        let mut row_of_code = vec![u8::MAX; DIRECT_CODES];
        for (row, r) in REQUEST_CODES.iter().enumerate() {
            if let Some(slot) = usize::try_from(r.code)
                .ok()
                .and_then(|c| row_of_code.get_mut(c))
            {
                *slot = row as u8;
            }
        }
        let classes = REQUEST_CODES.iter().map(|r| latency_class(r.code));
        RequestCounts {
            by_row: vec![[0; RESULTS]; REQUEST_CODES.len() + 1],
            row_of_code,
            class_of_row: classes.chain([latency_class(-1)]).collect(),
            seen: [0; LATENCY_CLASSES.len()],
            latency: Default::default(),
            other: HashMap::new(),
        }
    }
}

impl RequestCounts {
    fn row(&self, code: i32) -> usize {
        let unknown = REQUEST_CODES.len();
        match usize::try_from(code)
            .ok()
            .and_then(|c| self.row_of_code.get(c))
        {
            Some(&row) if row != u8::MAX => usize::from(row),
            Some(_) => unknown,
            None => codes::request_index(code).unwrap_or(unknown),
        }
    }

    /// When a request of `code` began, if it is one of those timed.
    pub(super) fn timer(&mut self, code: i32) -> Option<Instant> {
        let class = self.class_of_row[self.row(code)];
        self.seen[class] += 1;
        let timed = class >= SAMPLED_CLASSES || self.seen[class] % SAMPLE_EVERY == 1;
        timed.then(Instant::now)
    }

    /// One request answered `result`; `began`: from [`RequestCounts::timer`].
    pub(super) fn count(&mut self, code: i32, result: i32, began: Option<Instant>) {
        let row = self.row(code);
        let column = RESPONSE_CODES
            .iter()
            .position(|&c| c == result)
            .unwrap_or(RESPONSE_CODES.len());
        self.by_row[row][column] += 1;
        if let Some(began) = began {
            self.latency[self.class_of_row[row]].observe(began.elapsed());
        }
        // Unknown codes from hostile peers must not grow this map without bound.
        if row == REQUEST_CODES.len() && (self.other.len() < 1024 || self.other.contains_key(&code))
        {
            *self.other.entry(code).or_insert(0) += 1;
        }
    }

    /// (code name, result name, count) of every non-zero cell.
    pub(super) fn by_name(&self) -> impl Iterator<Item = (&'static str, &'static str, u64)> + '_ {
        let names = REQUEST_CODES.iter().map(|r| r.name).chain(["UNKNOWN"]);
        names.zip(&self.by_row).flat_map(|(name, row)| {
            let results = RESPONSE_CODES
                .iter()
                .map(|&c| response_name(c))
                .chain(["ERROR"]);
            results
                .zip(row)
                .filter(|(_, n)| **n > 0)
                .map(move |(result, n)| (name, result, *n))
        })
    }

    fn sorted(&self) -> Vec<(i32, u64)> {
        let known = REQUEST_CODES.iter().zip(&self.by_row);
        let mut v: Vec<(i32, u64)> = known
            .map(|(r, row)| (r.code, row.iter().sum()))
            .filter(|(_, n)| *n > 0)
            .chain(self.other.iter().map(|(c, n)| (*c, *n)))
            .collect();
        v.sort_unstable();
        v
    }
}

/// Why requests were refused: the `reason` label of the refusal counter.
pub(super) const REFUSAL_REASONS: [&str; 3] = ["limits", "allow_list", "validation"];

#[derive(Debug, Default)]
pub(super) struct Stats {
    pub(super) requests_by_code: RequestCounts,
    /// By [`REFUSAL_REASONS`].
    pub(super) refused: [u64; REFUSAL_REASONS.len()],
    /// From submission to the writer's answer.
    pub(super) durable_writes: Histogram,
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
    pub(super) expired_brokers: WarnLimiter,
    /// A full KV store is warned about once per interval.
    pub(super) kv_full: WarnLimiter<1>,
}

/// How often route changes are summarised, and warnings of one kind counted, at most.
pub(super) const CHANGE_SUMMARY_INTERVAL_MS: u64 = 10_000;

/// Lines per interval a [`WarnLimiter`] lets through; the rest are counted.
const WARN_LINES: u32 = 5;

/// "new broker registered" lines per interval, and as many "broker removed" lines (a cluster
/// start registers thousands at once, a mass expiry removes them).
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

/// Names of what a [`WarnLimiter`] held back that its count's line shows.
const HELD_NAMES: usize = 5;

/// Warnings of one kind, at most `LINES` per interval, then a count (with the first few
/// names of what was held back, for those admitted by name).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct WarnLimiter<const LINES: u32 = WARN_LINES> {
    interval: Interval,
    lines: u32,
    suppressed: u64,
    held_names: Vec<String>,
}

impl<const LINES: u32> WarnLimiter<LINES> {
    pub(super) fn admit(&mut self, now_ms: u64) -> bool {
        self.interval.start(now_ms);
        self.lines = self.lines.saturating_add(1);
        self.suppressed += u64::from(self.lines > LINES);
        self.lines <= LINES
    }

    /// As [`WarnLimiter::admit`]; the first few held back are named on the count's line.
    pub(super) fn admit_named(&mut self, now_ms: u64, name: impl FnOnce() -> String) -> bool {
        let admitted = self.admit(now_ms);
        if !admitted && self.held_names.len() < HELD_NAMES {
            self.held_names.push(name());
        }
        admitted
    }

    /// Once the interval is over: how many were held back, and a fresh interval.
    fn log_due(&mut self, now_ms: u64, what: &str) {
        if !self.interval.over(now_ms) {
            return;
        }
        let held = std::mem::take(self);
        let n = held.suppressed;
        if n == 0 {
            return;
        }
        let names = held.held_names.join(", ");
        let among = if names.is_empty() {
            ""
        } else {
            ", among them "
        };
        warn!("{n} more {what} in the last interval, not logged one by one{among}{names}");
    }
}

/// Route changes by registrations and removals, counted between info lines
/// (REGISTER_TOPIC_IN_NAMESRV is audited one by one).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct ChangeSummary {
    interval: Interval,
    new_brokers_logged: u32,
    new_brokers_unlogged: u64,
    removals_logged: u32,
    removals_unlogged: u64,
    brokers_changed: u64,
    queue_entries_changed: u64,
}

/// Counts one more line of a kind: true for the interval's first [`NEW_BROKER_LINES`].
fn own_line(logged: &mut u32, unlogged: &mut u64) -> bool {
    let own = *logged < NEW_BROKER_LINES;
    *logged += u32::from(own);
    *unlogged += u64::from(!own);
    own
}

impl ChangeSummary {
    /// Counts a first registration; true while it should still get a line of its own.
    pub(super) fn new_broker(&mut self, now_ms: u64) -> bool {
        self.interval.start(now_ms);
        own_line(&mut self.new_brokers_logged, &mut self.new_brokers_unlogged)
    }

    /// Counts a broker removed (expired, unregistered, its connection closed); true while it
    /// should still get a line of its own.
    pub(super) fn removed_broker(&mut self, now_ms: u64) -> bool {
        self.interval.start(now_ms);
        own_line(&mut self.removals_logged, &mut self.removals_unlogged)
    }

    pub(super) fn broker_changed(&mut self, queue_entries: usize, now_ms: u64) {
        self.interval.start(now_ms);
        self.brokers_changed += 1;
        self.queue_entries_changed += queue_entries as u64;
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
            (d.new_brokers_unlogged > 0).then(|| {
                format!(
                    "{} more new broker(s) registered (listed at debug)",
                    d.new_brokers_unlogged
                )
            }),
            (d.removals_unlogged > 0).then(|| {
                format!(
                    "{} more broker(s) removed (listed at debug)",
                    d.removals_unlogged
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
        s.expired_brokers.log_due(now_ms, "broker(s) expired");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_row_and_result_and_hot_classes_timed_one_in_sixteen() {
        let mut c = RequestCounts::default();
        let timed = (0..32)
            .filter(|_| {
                let began = c.timer(request::GET_ROUTEINFO_BY_TOPIC);
                c.count(request::GET_ROUTEINFO_BY_TOPIC, 0, began);
                began.is_some()
            })
            .count();
        assert_eq!(timed, 2);
        assert!(c.timer(request::REGISTER_BROKER).is_some());
        assert!(c.timer(request::REGISTER_BROKER).is_some());
        c.count(request::RMQ_NAMESRV_STATS, 1, None);
        c.count(12_345, 3, None);
        let cells: Vec<_> = c.by_name().collect();
        assert_eq!(
            cells,
            [
                ("GET_ROUTEINFO_BY_TOPIC", "SUCCESS", 32),
                ("RMQ_NAMESRV_STATS", "SYSTEM_ERROR", 1),
                ("UNKNOWN", "REQUEST_CODE_NOT_SUPPORTED", 1)
            ]
        );
        assert_eq!(c.latency[0].count(), 2);
        assert_eq!(c.sorted(), [(105, 32), (12_345, 1), (29_001, 1)]);
    }

    #[test]
    fn warnings_past_the_first_few_are_counted_and_a_few_of_them_named() {
        let mut w: WarnLimiter = WarnLimiter::default();
        let admitted = (0..1_000)
            .filter(|i| w.admit_named(1_000, || format!("b{i}")))
            .count();
        assert_eq!(admitted, WARN_LINES as usize);
        assert_eq!(w.suppressed, 1_000 - u64::from(WARN_LINES));
        assert_eq!(w.held_names, ["b5", "b6", "b7", "b8", "b9"]);
        w.log_due(1_000 + CHANGE_SUMMARY_INTERVAL_MS, "broker(s) expired");
        assert_eq!(w, WarnLimiter::default(), "a fresh interval");
        assert!(w.admit_named(20_000, || unreachable!("admitted lines name themselves")));
    }

    #[test]
    fn route_changes_are_summarised_once_per_interval() {
        let mut s = ChangeSummary::default();
        assert_eq!(s.take_due(1_000_000), None, "nothing happened");
        s.broker_changed(3, 1_000);
        s.broker_changed(2, 5_000);
        assert_eq!(s.take_due(10_999), None, "the interval is not over");
        assert_eq!(
            s.take_due(11_000).as_deref(),
            Some("route changes: 2 registration(s) changed 5 topic queue entries")
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
        let named = (0..12).filter(|_| s.removed_broker(20_000)).count();
        assert_eq!(
            named, NEW_BROKER_LINES as usize,
            "removals are counted apart"
        );
        assert_eq!(
            s.take_due(30_000).as_deref(),
            Some("route changes: 2 more broker(s) removed (listed at debug)")
        );
        assert_eq!(s.take_due(40_000), None, "nothing left to summarise");
    }
}
