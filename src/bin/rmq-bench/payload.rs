//! Realistic registration payloads: a simulated cluster of broker groups, the topic layout
//! they serve, and the REGISTER_BROKER bodies a 5.x broker sends for it (docs/protocol.md §4.1,
//! with the system topics a default 5.x broker creates for itself).
//!
//! Broker `b` is the master of group `bench-broker-[<tag>-]<b>`. Its address is fake (nothing
//! connects to it) but a name server keys liveness on it, so each fleet needs its own. User
//! topics are dealt out in blocks of `topics` per group, and `SHARED_BY` consecutive groups
//! serve the same block. The benches include this file: it depends only on the library.

use rmq_namesrv::client::api::BrokerIdentity;
use rmq_namesrv::route::model::{
    encode_register_body_json, DataVersion, RegisterBody, TopicConfig,
};

/// `version` brokers put in their request headers (a 5.3.3 broker).
pub const BROKER_VERSION: i32 = 479;

pub const CLUSTER: &str = "BenchCluster";
const TOPIC_PREFIX: &str = "BenchTopic_";
/// Broker groups serving each user topic.
const SHARED_BY: usize = 2;
/// Consumer groups (`%RETRY%` topics) per broker.
const GROUPS: usize = 4;
const QUEUES: i32 = 8;

/// `PermName` bits.
const PERM_INHERIT: i32 = 1;
pub const PERM_RW: i32 = 6;
const PERM_RWX: i32 = 7;

#[derive(Debug, Clone)]
pub struct Layout {
    pub brokers: usize,
    /// User topics per broker.
    pub topics: usize,
    /// Names a fleet: part of broker names, and it picks the fleet's block of addresses.
    pub run_tag: String,
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            brokers: 100,
            topics: 100,
            run_tag: String::new(),
        }
    }
}

impl Layout {
    /// Where this fleet's addresses start: (offset into 10.0.0.0/8, listen port). Untagged:
    /// 10.0.0.0:10911 as always; tagged: a block and an even port in 20000..=59998 from the
    /// tag's FNV-1a hash (the same on every run, apart from other tags', never 10911).
    fn fleet_base(&self) -> (u32, u16) {
        if self.run_tag.is_empty() {
            return (0, 10911);
        }
        let h = fnv1a(self.run_tag.as_bytes());
        let port = 20_000 + 2 * (h % 20_000) as u16;
        ((h >> 32) as u32 & 0x00FF_FFFF, port)
    }

    /// Broker `b`, a master (brokerId 0).
    pub fn broker(&self, b: usize) -> BrokerIdentity {
        let (base, port) = self.fleet_base();
        let n = base.wrapping_add(b as u32) & 0x00FF_FFFF;
        let (x, y, z) = ((n >> 16) & 0xFF, (n >> 8) & 0xFF, n & 0xFF);
        let tag = if self.run_tag.is_empty() {
            String::new()
        } else {
            format!("{}-", self.run_tag)
        };
        BrokerIdentity {
            cluster: CLUSTER.into(),
            broker_name: format!("bench-broker-{tag}{b}"),
            broker_addr: format!("10.{x}.{y}.{z}:{port}"),
            broker_id: 0,
            ha_server_addr: format!("10.{x}.{y}.{z}:{}", port + 1),
        }
    }

    /// Index of the first user topic of broker `b`'s block.
    fn block_start(&self, b: usize) -> usize {
        (b / SHARED_BY) * self.topics
    }

    pub fn topic_name(&self, t: usize) -> String {
        format!("{TOPIC_PREFIX}{t:06}")
    }

    pub fn user_topics(&self, b: usize) -> impl Iterator<Item = String> + '_ {
        let start = self.block_start(b);
        (start..start + self.topics).map(|t| self.topic_name(t))
    }

    /// Every distinct user topic of the cluster (for route lookups).
    pub fn all_user_topics(&self) -> Vec<String> {
        let blocks = self.brokers.div_ceil(SHARED_BY);
        (0..blocks * self.topics)
            .map(|t| self.topic_name(t))
            .collect()
    }

    /// The topicConfigTable of broker `b`; `variant` > 0 produces a churned table in which
    /// a few user topics are replaced and queue counts differ.
    pub fn topic_table(&self, b: usize, variant: usize) -> Vec<TopicConfig> {
        let id = self.broker(b);
        let mut out = system_topics(CLUSTER, &id.broker_name);
        let start = self.block_start(b);
        for g in 0..GROUPS {
            let group = (start / self.topics.max(1)) * GROUPS + g;
            out.push(topic(&format!("%RETRY%bench_group_{group}"), 1, PERM_RW));
        }
        for (i, name) in self.user_topics(b).enumerate() {
            // Churn: every variant swaps out a different few topics for private ones and
            // changes the queue count of some others.
            if variant > 0 && i % 10 == variant % 10 {
                let private = format!("{TOPIC_PREFIX}churn_{}_{i}_{variant}", id.broker_name);
                out.push(topic(&private, QUEUES, PERM_RW));
                continue;
            }
            let queues = if variant > 0 && i % 7 == variant % 7 {
                QUEUES + variant as i32
            } else {
                QUEUES
            };
            out.push(topic(&name, queues, PERM_RW));
        }
        out
    }

    /// The dataVersion of broker `b`'s registration number `variant`.
    pub fn data_version(&self, b: usize, variant: usize) -> DataVersion {
        DataVersion {
            counter: 1 + variant as i64,
            state_version: 0,
            timestamp: 1_700_000_000_000 + (b as i64) * 1000 + variant as i64,
        }
    }

    /// The encoded body of broker `b`'s registration number `variant`.
    pub fn register_body(&self, b: usize, variant: usize) -> Vec<u8> {
        let topics = self.topic_table(b, variant).into_iter();
        let body = RegisterBody {
            data_version: self.data_version(b, variant),
            topics: topics.map(|t| (t.topic_name.clone(), t)).collect(),
            filter_servers: Some(Vec::new()),
            mappings: Vec::new(),
        };
        let mut out = Vec::with_capacity(256 * body.topics.len() + 256);
        encode_register_body_json(&body, &mut out);
        out
    }
}

/// 64-bit FNV-1a: fixed forever (unlike std's hashers), so a tag's addresses never move.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

pub fn topic(name: &str, queues: i32, perm: i32) -> TopicConfig {
    TopicConfig {
        topic_name: name.to_string(),
        read_queue_nums: queues,
        write_queue_nums: queues,
        perm,
        topic_sys_flag: 0,
    }
}

/// The topics a default 5.x broker creates for itself and registers with every heartbeat.
pub fn system_topics(cluster: &str, broker_name: &str) -> Vec<TopicConfig> {
    let member = format!("rmq_sys_SYNC_BROKER_MEMBER_{broker_name}");
    vec![
        topic("SELF_TEST_TOPIC", 1, PERM_RW),
        topic("TBW102", 8, PERM_RWX),
        topic(cluster, 16, PERM_INHERIT),
        topic(broker_name, 1, PERM_RWX),
        topic("OFFSET_MOVED_EVENT", 1, PERM_RW),
        topic("SCHEDULE_TOPIC_XXXX", 18, PERM_RW),
        topic("RMQ_SYS_TRANS_HALF_TOPIC", 1, PERM_RW),
        topic("RMQ_SYS_TRANS_OP_HALF_TOPIC", 1, PERM_RW),
        topic("TRANS_CHECK_MAX_TIME_TOPIC", 1, PERM_RW),
        topic("rmq_sys_wheel_timer", 1, PERM_RW),
        topic(&format!("rmq_sys_REVIVE_LOG_{cluster}"), 8, PERM_RW),
        topic(&member, 1, PERM_RW),
    ]
}

#[allow(unused_imports)] // the benches include this file with cfg(test) but without #[test]s
#[cfg(test)]
mod tests {
    use super::*;
    use rmq_namesrv::route::model::{decode_register_body, BodyLimits};

    #[test]
    fn each_topic_is_served_by_shared_by_brokers() {
        let layout = Layout {
            brokers: 6,
            topics: 5,
            ..Layout::default()
        };
        let mut servers = std::collections::HashMap::<String, usize>::new();
        for b in 0..layout.brokers {
            for t in layout.user_topics(b) {
                *servers.entry(t).or_default() += 1;
            }
        }
        assert_eq!(servers.len(), 15);
        assert!(servers.values().all(|n| *n == 2));
        assert_eq!(layout.all_user_topics().len(), 15);
    }

    fn fleet(tag: &str, brokers: usize) -> Layout {
        Layout {
            brokers,
            run_tag: tag.into(),
            ..Layout::default()
        }
    }

    #[test]
    fn untagged_fleets_keep_their_addresses() {
        let l = fleet("", 300);
        assert_eq!(l.broker(0).broker_addr, "10.0.0.0:10911");
        assert_eq!(l.broker(0).ha_server_addr, "10.0.0.0:10912");
        assert_eq!(l.broker(257).broker_addr, "10.0.1.1:10911");
        assert_eq!(l.broker(257).broker_name, "bench-broker-257");
    }

    #[test]
    fn tagged_fleets_get_their_own_addresses_stable_across_runs() {
        let addrs = |tag: &str| -> std::collections::HashSet<String> {
            let l = fleet(tag, 10_000);
            (0..l.brokers).map(|b| l.broker(b).broker_addr).collect()
        };
        let steady = addrs("steady");
        assert_eq!(steady.len(), 10_000, "a fleet's addresses are distinct");
        assert_eq!(steady, addrs("steady"), "the same tag, the same addresses");
        for other in ["ex1", "ex2", "soak", "steady2", ""] {
            assert!(
                steady.is_disjoint(&addrs(other)),
                "steady and {other:?} collide"
            );
        }
        // Pinned: changing the scheme would silently move every tagged fleet.
        assert_eq!(fnv1a(b"steady"), 0xd12d_c290_37eb_c7f3);
        let b = fleet("steady", 1).broker(0);
        assert_eq!(b.broker_name, "bench-broker-steady-0");
        assert_eq!(
            b.broker_addr.rsplit_once(':').map(|(_, p)| p),
            Some("52678")
        );
    }

    #[test]
    fn bodies_decode_with_system_topics_and_churn_changes_them() {
        let layout = Layout {
            brokers: 2,
            topics: 20,
            ..Layout::default()
        };
        let steady = layout.register_body(1, 0);
        let churned = layout.register_body(1, 1);
        assert_ne!(steady, churned);
        let limits = BodyLimits::default();
        let a =
            decode_register_body(&steady, false, 479, &limits, &mut Default::default()).unwrap();
        let b =
            decode_register_body(&churned, false, 479, &limits, &mut Default::default()).unwrap();
        assert_eq!(a.topics.len(), 12 + 4 + 20);
        assert!(a.topics.iter().any(|(k, _)| k == "TBW102"));
        assert!(a.topics.iter().any(|(k, _)| k == "bench-broker-1"));
        assert_ne!(a.data_version, b.data_version);
        assert_ne!(a.topics, b.topics);
    }
}
