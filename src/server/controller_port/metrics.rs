//! The Controller's part of the metrics endpoint: Java's Controller metrics under Java's names
//! (`role`, `active_broker_num`, `request_total`, `request_latency`, `election_total`, with
//! its labels), then the Raft group's term and indexes and the peer links.

use super::ControllerPort;
use crate::controller::codes::request as code;
use crate::controller::{Response, ELECTION_RESULTS};
use crate::metrics::{Exposition, Histogram, Kind};
use crate::remoting::codes::response::SUCCESS;
use std::time::Duration;

/// Java's `RequestType` names by request code, the `request_type` label.
const REQUEST_TYPES: [(i32, &str); 14] = [
    (
        code::CONTROLLER_ALTER_SYNC_STATE_SET,
        "CONTROLLER_ALTER_SYNC_STATE_SET",
    ),
    (code::CONTROLLER_ELECT_MASTER, "CONTROLLER_ELECT_MASTER"),
    (
        code::CONTROLLER_REGISTER_BROKER,
        "CONTROLLER_REGISTER_BROKER",
    ),
    (
        code::CONTROLLER_GET_REPLICA_INFO,
        "CONTROLLER_GET_REPLICA_INFO",
    ),
    (
        code::CONTROLLER_GET_METADATA_INFO,
        "CONTROLLER_GET_METADATA_INFO",
    ),
    (
        code::CONTROLLER_GET_SYNC_STATE_DATA,
        "CONTROLLER_GET_SYNC_STATE_DATA",
    ),
    (
        code::GET_BROKER_EPOCH_CACHE,
        "CONTROLLER_GET_BROKER_EPOCH_CACHE",
    ),
    (
        code::NOTIFY_BROKER_ROLE_CHANGED,
        "CONTROLLER_NOTIFY_BROKER_ROLE_CHANGED",
    ),
    (code::BROKER_HEARTBEAT, "CONTROLLER_BROKER_HEARTBEAT"),
    (
        code::UPDATE_CONTROLLER_CONFIG,
        "CONTROLLER_UPDATE_CONTROLLER_CONFIG",
    ),
    (
        code::GET_CONTROLLER_CONFIG,
        "CONTROLLER_GET_CONTROLLER_CONFIG",
    ),
    (code::CLEAN_BROKER_DATA, "CONTROLLER_CLEAN_BROKER_DATA"),
    (
        code::CONTROLLER_GET_NEXT_BROKER_ID,
        "CONTROLLER_GET_NEXT_BROKER_ID",
    ),
    (
        code::CONTROLLER_APPLY_BROKER_ID,
        "CONTROLLER_APPLY_BROKER_ID",
    ),
];

/// Java's `RequestHandleStatus` names, the `request_handle_status` label.
const STATUSES: [&str; 3] = ["success", "failed", "timeout"];

/// The pipeline's answer to a request that waited too long (`pipeline::expire`).
const TIMEOUT_REMARK: &str = "java.util.concurrent.TimeoutException";

/// Requests answered by Java type (then one row for other codes) and status, and their time
/// from arrival to answer.
#[derive(Debug)]
pub(super) struct RequestCounts {
    by_type: [[u64; STATUSES.len()]; REQUEST_TYPES.len() + 1],
    latency: Vec<Histogram>,
}

impl Default for RequestCounts {
    fn default() -> Self {
        RequestCounts {
            by_type: [[0; STATUSES.len()]; REQUEST_TYPES.len() + 1],
            latency: vec![Histogram::default(); REQUEST_TYPES.len() + 1],
        }
    }
}

impl RequestCounts {
    pub(super) fn count(&mut self, request_code: i32, answer: &Response, took: Duration) {
        let row = REQUEST_TYPES
            .iter()
            .position(|(c, _)| *c == request_code)
            .unwrap_or(REQUEST_TYPES.len());
        let remark = answer.remark.as_deref().unwrap_or("");
        let status = if answer.code == SUCCESS {
            0
        } else if remark.starts_with(TIMEOUT_REMARK) {
            2
        } else {
            1
        };
        self.by_type[row][status] += 1;
        self.latency[row].observe(took);
    }
}

fn type_names() -> impl Iterator<Item = &'static str> {
    REQUEST_TYPES
        .iter()
        .map(|(_, name)| *name)
        .chain(["UNKNOWN"])
}

/// Java's values of its `role` metric.
fn role_value(role: &str) -> u8 {
    match role {
        "LEADER" => 3,
        "FOLLOWER" => 2,
        "CANDIDATE" => 1,
        _ => 0,
    }
}

impl ControllerPort {
    pub(in crate::server) fn write_metrics(&self, e: &mut Exposition<'_>, now_ms: u64) {
        let config = self.controller.config();
        let status = self.controller.group_status();
        let me = config.self_peer();
        let address = format!("{}:{}", me.address, me.port);
        let node = [
            ("address", address.as_str()),
            ("group", config.group().unwrap_or("")),
            ("peer_id", me.id.as_str()),
        ];
        let help = "The controller's Raft role: 3 leader, 2 follower, 1 candidate, 0 unknown.";
        e.family("role", Kind::Gauge, help);
        e.sample("role", &node, role_value(status.role));
        let help = "Brokers heartbeating the controller, by cluster and broker set.";
        e.family("active_broker_num", Kind::Gauge, help);
        for ((cluster, set), n) in self.controller.liveness().active_by_set(now_ms) {
            e.sample(
                "active_broker_num",
                &[("cluster", cluster), ("broker_set", set)],
                n,
            );
        }
        self.write_request_metrics(e);
        let help = "Master elections, by result.";
        e.family("election_total", Kind::Counter, help);
        for (result, n) in ELECTION_RESULTS.iter().zip(self.controller.elections()) {
            e.sample("election_total", &[("election_result", result)], n);
        }
        let raft = [
            (
                "rmq_namesrv_controller_raft_term",
                "The Raft term.",
                status.term,
            ),
            (
                "rmq_namesrv_controller_raft_commit_index",
                "The last committed Raft log index.",
                status.committed,
            ),
            (
                "rmq_namesrv_controller_raft_applied_index",
                "The last applied Raft log index.",
                status.applied,
            ),
        ];
        for (name, help, value) in raft {
            e.single(name, Kind::Gauge, help, value);
        }
        let peer_up = "rmq_namesrv_controller_peer_up";
        e.family(
            peer_up,
            Kind::Gauge,
            "1 while the link to a peer of the group is up.",
        );
        for (peer, up) in self.links.links() {
            e.sample(peer_up, &[("peer", peer)], u8::from(up));
        }
    }

    fn write_request_metrics(&self, e: &mut Exposition<'_>) {
        let counts = &self.request_counts;
        let help = "Controller requests answered, by Java's request type and status.";
        e.family("request_total", Kind::Counter, help);
        for (name, row) in type_names().zip(&counts.by_type) {
            for (status, n) in STATUSES.iter().zip(row).filter(|(_, n)| **n > 0) {
                let labels = [("request_type", name), ("request_handle_status", *status)];
                e.sample("request_total", &labels, n);
            }
        }
        let help = "Controller request time from arrival to answer, in microseconds (as Java's).";
        e.family("request_latency", Kind::Histogram, help);
        for (name, h) in type_names()
            .zip(&counts.latency)
            .filter(|(_, h)| h.count() > 0)
        {
            e.histogram("request_latency", &[("request_type", name)], h, true);
        }
    }
}
