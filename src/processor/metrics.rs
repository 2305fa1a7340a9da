//! The processor's families of the Prometheus exposition: requests by code and result, their
//! latency by class, refusals, durable writes; the registry's size, registrations, removals
//! and the KV store.

use super::stats::{LATENCY_CLASSES, REFUSAL_REASONS};
use super::Processor;
use crate::metrics::{Exposition, Kind};

impl Processor {
    pub fn write_metrics(&self, e: &mut Exposition<'_>) {
        self.write_request_metrics(e);
        self.write_registry_metrics(e);
    }

    fn write_request_metrics(&self, e: &mut Exposition<'_>) {
        let s = &self.stats;
        let requests = "rmq_namesrv_requests_total";
        let help = "Requests answered, by request code and response code.";
        e.family(requests, Kind::Counter, help);
        for (code, result, n) in s.requests_by_code.by_name() {
            e.sample(requests, &[("code", code), ("result", result)], n);
        }
        let latency = "rmq_namesrv_request_duration_seconds";
        let help =
            "Time a request held the event loop, by class (route, heartbeat: 1 in 16 timed).";
        e.family(latency, Kind::Histogram, help);
        for (class, h) in LATENCY_CLASSES.iter().zip(&s.requests_by_code.latency) {
            e.histogram(latency, &[("class", class)], h, false);
        }
        let refused = "rmq_namesrv_refused_requests_total";
        let help = "Requests refused, by reason: limits (busy, bounds), allow_list, validation.";
        e.family(refused, Kind::Counter, help);
        for (reason, n) in REFUSAL_REASONS.iter().zip(s.refused) {
            e.sample(refused, &[("reason", reason)], n);
        }
        let durable = "rmq_namesrv_durable_write_duration_seconds";
        let help = "From a KV or config change handed to the writer to its answer (on disk).";
        e.family(durable, Kind::Histogram, help);
        e.histogram(durable, &[], &s.durable_writes, false);
    }

    fn write_registry_metrics(&self, e: &mut Exposition<'_>) {
        let (t, s) = (&self.table, &self.stats);
        let registrations = "rmq_namesrv_registrations_total";
        let help = "Broker registrations applied, by whether they changed the routes.";
        e.family(registrations, Kind::Counter, help);
        let changed = s.registrations.saturating_sub(s.registrations_unchanged);
        e.sample(registrations, &[("result", "changed")], changed);
        e.sample(
            registrations,
            &[("result", "unchanged")],
            s.registrations_unchanged,
        );
        let gauges = [
            (
                "rmq_namesrv_brokers",
                "Live broker addresses.",
                t.live_broker_count(),
            ),
            (
                "rmq_namesrv_broker_groups",
                "Broker groups (brokerName).",
                t.broker_group_count(),
            ),
            ("rmq_namesrv_clusters", "Clusters.", t.cluster_count()),
            (
                "rmq_namesrv_topics",
                "Topics with a route.",
                t.topic_count(),
            ),
            (
                "rmq_namesrv_queue_entries",
                "Queue entries: (topic, broker group) pairs.",
                t.queue_entry_count(),
            ),
            (
                "rmq_namesrv_kv_entries",
                "KV config entries.",
                self.kv.usage().entries,
            ),
            (
                "rmq_namesrv_kv_bytes",
                "Bytes of KV config keys and values.",
                self.kv.usage().bytes,
            ),
        ];
        for (name, help, value) in gauges {
            e.single(name, Kind::Gauge, help, value);
        }
        let removals = [
            (
                "rmq_namesrv_expiries_total",
                "Brokers removed for not heartbeating.",
                s.expiries,
            ),
            (
                "rmq_namesrv_unregistrations_total",
                "Brokers removed: by UNREGISTER_BROKER, their connection's close or an expiry.",
                s.unregistrations,
            ),
        ];
        for (name, help, value) in removals {
            e.single(name, Kind::Counter, help, value);
        }
    }
}
