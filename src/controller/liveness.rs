//! Broker liveness as plain data: Java's `DefaultBrokerHeartbeatManager` table, local to this
//! node (never replicated or logged). Time and closed connections are inputs; the owner turns
//! the brokers found inactive into elections. Entries are grouped by brokerName: a known
//! broker's heartbeat costs one hash lookup and no allocation.

use super::request::Heartbeat;
use std::collections::HashMap;

/// Java's `DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`, for a broker that sends no timeout of its own.
pub const DEFAULT_HEARTBEAT_TIMEOUT_MS: i64 = 10_000;

/// Brokers the table holds at most (heartbeats are unauthenticated).
pub const MAX_LIVE_BROKERS: usize = 100_000;

/// The connection a heartbeat arrived on (opaque here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnRef(pub u64);

/// Java's `BrokerLiveInfo`, the fields something reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerLive {
    pub cluster_name: Option<String>,
    pub broker_id: i64,
    pub last_update_ms: u64,
    /// Zero or negative when a broker says so: inactive at once, as in Java.
    pub heartbeat_timeout_ms: i64,
    pub conn: Option<ConnRef>,
    pub epoch: i32,
    pub max_offset: i64,
    pub election_priority: i32,
}

impl BrokerLive {
    /// Java's `last + timeout >= now`.
    pub fn is_active(&self, now_ms: u64) -> bool {
        deadline(self.last_update_ms, self.heartbeat_timeout_ms) >= i128::from(now_ms)
    }
}

fn deadline(last_update_ms: u64, timeout_ms: i64) -> i128 {
    i128::from(last_update_ms) + i128::from(timeout_ms)
}

/// A broker the table no longer counts as alive, and the connection to close (expiry only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InactiveBroker {
    pub cluster_name: Option<String>,
    pub broker_name: String,
    pub broker_id: i64,
    pub conn: Option<ConnRef>,
}

/// The heartbeat table: brokerName -> live entries keyed by (clusterName, brokerId).
#[derive(Debug, Default)]
pub struct Liveness {
    by_name: HashMap<String, Vec<BrokerLive>>,
    len: usize,
    /// Heartbeats of new brokers refused because the table was full.
    refused: u64,
}

impl Liveness {
    /// Records one 904 (not one without brokerName: no broker set can match it).
    pub fn on_heartbeat(&mut self, hb: &Heartbeat, conn: Option<ConnRef>, now_ms: u64) {
        let (Some(broker_name), Some(broker_id)) = (hb.broker_name.as_deref(), hb.broker_id) else {
            return;
        };
        let mut fresh = BrokerLive {
            cluster_name: hb.cluster_name.clone(),
            broker_id,
            last_update_ms: now_ms,
            heartbeat_timeout_ms: hb
                .heartbeat_timeout_millis
                .unwrap_or(DEFAULT_HEARTBEAT_TIMEOUT_MS),
            conn,
            epoch: hb.epoch.unwrap_or(-1),
            max_offset: hb.max_offset.unwrap_or(-1),
            election_priority: hb.election_priority.unwrap_or(i32::MAX),
        };
        let cluster = hb.cluster_name.as_deref();
        if let Some(live) = self.find_mut(cluster, broker_name, broker_id) {
            // Replication progress only moves forward (Java's rule).
            let (epoch, offset) = (fresh.epoch, fresh.max_offset);
            if epoch < live.epoch || (epoch == live.epoch && offset <= live.max_offset) {
                fresh.epoch = live.epoch;
                fresh.max_offset = live.max_offset;
            }
            // Java keeps the first connection; following the broker notices its close.
            *live = fresh;
            return;
        }
        if self.len >= MAX_LIVE_BROKERS {
            self.refused += 1;
            if self.refused.is_power_of_two() {
                log::warn!(
                    "controller: heartbeat table full ({MAX_LIVE_BROKERS} brokers): {} heartbeats of new brokers refused so far, latest {broker_name} id {broker_id}",
                    self.refused
                );
            }
            return;
        }
        log::info!(
            "controller: broker {broker_name} id {broker_id} ({}) heartbeats (cluster {})",
            hb.broker_addr.as_deref().unwrap_or("?"),
            cluster.unwrap_or("?")
        );
        let lives = self.by_name.entry(broker_name.to_owned()).or_default();
        lives.push(fresh);
        self.len += 1;
    }

    fn find_mut(&mut self, cluster: Option<&str>, name: &str, id: i64) -> Option<&mut BrokerLive> {
        self.by_name
            .get_mut(name)?
            .iter_mut()
            .find(|l| l.broker_id == id && l.cluster_name.as_deref() == cluster)
    }

    /// The entry of one broker (Java's `getBrokerLiveInfo`), active or not.
    pub fn get(&self, cluster: Option<&str>, name: &str, id: i64) -> Option<&BrokerLive> {
        self.by_name
            .get(name)?
            .iter()
            .find(|l| l.broker_id == id && l.cluster_name.as_deref() == cluster)
    }

    /// Java's `isBrokerActive(cluster, name, id)`.
    pub fn is_active(&self, cluster: Option<&str>, name: &str, id: i64, now_ms: u64) -> bool {
        self.get(cluster, name, id)
            .is_some_and(|l| l.is_active(now_ms))
    }

    /// Java's `scanNotActiveBroker`: removes and returns the entries past their timeout.
    pub fn scan_not_active(&mut self, now_ms: u64) -> Vec<InactiveBroker> {
        self.remove_where(|l| {
            i128::from(now_ms) > deadline(l.last_update_ms, l.heartbeat_timeout_ms)
        })
    }

    /// A connection closed: every broker on it is inactive now (Java: only the first).
    pub fn connection_closed(&mut self, conn: ConnRef) -> Vec<InactiveBroker> {
        self.remove_where(|l| l.conn == Some(conn))
    }

    fn remove_where(&mut self, gone_if: impl Fn(&BrokerLive) -> bool) -> Vec<InactiveBroker> {
        let mut gone = Vec::new();
        self.by_name.retain(|name, lives| {
            lives.retain(|l| {
                let goes = gone_if(l);
                if goes {
                    gone.push(InactiveBroker {
                        cluster_name: l.cluster_name.clone(),
                        broker_name: name.clone(),
                        broker_id: l.broker_id,
                        conn: l.conn,
                    });
                }
                !goes
            });
            !lives.is_empty()
        });
        self.len -= gone.len();
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Liveness {
        fn len(&self) -> usize {
            self.len
        }

        fn is_empty(&self) -> bool {
            self.len == 0
        }
    }

    pub(crate) fn hb(
        name: &str,
        id: i64,
        timeout: Option<i64>,
        epoch: i32,
        offset: i64,
    ) -> Heartbeat {
        Heartbeat {
            cluster_name: Some("cluster1".into()),
            broker_addr: Some(format!("127.0.0.1:{}", 7000 + id)),
            broker_name: Some(name.into()),
            broker_id: Some(id),
            epoch: Some(epoch),
            max_offset: Some(offset),
            confirm_offset: Some(-1),
            heartbeat_timeout_millis: timeout,
            election_priority: Some(0),
            store_ready: None,
        }
    }

    /// DefaultBrokerHeartbeatManagerTest.testDetectBrokerAlive: a broker with a 3 s timeout
    /// that stops heartbeating is reported inactive by the next scan after that.
    #[test]
    fn a_silent_broker_is_reported_by_the_scan_after_its_timeout() {
        let mut table = Liveness::default();
        table.on_heartbeat(&hb("broker1", 1, Some(3000), 1, 1), Some(ConnRef(9)), 1_000);
        assert!(table.is_active(Some("cluster1"), "broker1", 1, 4_000));
        assert!(
            table.scan_not_active(4_000).is_empty(),
            "last + timeout == now is alive"
        );
        let gone = table.scan_not_active(4_001);
        assert_eq!(
            gone,
            vec![InactiveBroker {
                cluster_name: Some("cluster1".into()),
                broker_name: "broker1".into(),
                broker_id: 1,
                conn: Some(ConnRef(9)),
            }]
        );
        assert!(table.is_empty());
        assert!(!table.is_active(Some("cluster1"), "broker1", 1, 4_001));
    }

    #[test]
    fn absent_timeout_defaults_to_ten_seconds_and_a_negative_one_is_inactive_at_once() {
        let mut table = Liveness::default();
        table.on_heartbeat(&hb("b", 1, None, 0, 0), None, 0);
        table.on_heartbeat(&hb("b", 2, Some(-10_000), 0, 0), None, 0);
        assert!(table.is_active(Some("cluster1"), "b", 1, 10_000));
        assert!(!table.is_active(Some("cluster1"), "b", 1, 10_001));
        assert!(!table.is_active(Some("cluster1"), "b", 2, 0));
        assert!(
            !table.is_active(Some("other"), "b", 1, 0),
            "keyed by cluster too"
        );
    }

    #[test]
    fn progress_moves_forward_only_but_priority_and_timeout_follow_each_heartbeat() {
        let mut table = Liveness::default();
        table.on_heartbeat(&hb("b", 1, Some(5000), 2, 100), None, 0);
        let mut older = hb("b", 1, Some(7000), 1, 500);
        older.election_priority = Some(4);
        table.on_heartbeat(&older, None, 10);
        let live = table.get(Some("cluster1"), "b", 1).unwrap();
        assert_eq!((live.epoch, live.max_offset), (2, 100));
        assert_eq!(
            (live.heartbeat_timeout_ms, live.election_priority),
            (7000, 4)
        );
        assert_eq!(live.last_update_ms, 10);
        table.on_heartbeat(&hb("b", 1, Some(7000), 2, 150), None, 20);
        assert_eq!(table.get(Some("cluster1"), "b", 1).unwrap().max_offset, 150);
    }

    #[test]
    fn closing_a_connection_marks_every_broker_on_it_inactive() {
        let mut table = Liveness::default();
        table.on_heartbeat(&hb("a", 1, None, 0, 0), Some(ConnRef(1)), 0);
        table.on_heartbeat(&hb("b", 1, None, 0, 0), Some(ConnRef(1)), 0);
        table.on_heartbeat(&hb("c", 1, None, 0, 0), Some(ConnRef(2)), 0);
        let mut gone: Vec<String> = table
            .connection_closed(ConnRef(1))
            .into_iter()
            .map(|b| b.broker_name)
            .collect();
        gone.sort();
        assert_eq!(gone, vec!["a", "b"]);
        assert_eq!(table.len(), 1);
        assert!(table.is_active(Some("cluster1"), "c", 1, 0));
    }

    #[test]
    fn a_broker_that_reconnected_is_tied_to_its_new_connection() {
        let mut table = Liveness::default();
        table.on_heartbeat(&hb("a", 1, None, 0, 0), Some(ConnRef(1)), 0);
        table.on_heartbeat(&hb("a", 1, None, 0, 0), Some(ConnRef(2)), 1);
        assert!(table.connection_closed(ConnRef(1)).is_empty());
        assert_eq!(table.connection_closed(ConnRef(2)).len(), 1);
    }

    #[test]
    fn the_table_is_bounded_but_known_brokers_keep_heartbeating() {
        let mut table = Liveness::default();
        for i in 0..MAX_LIVE_BROKERS as i64 {
            table.on_heartbeat(&hb(&format!("b{}", i / 4), i % 4, None, 0, 0), None, 0);
        }
        assert_eq!(table.len(), MAX_LIVE_BROKERS);
        table.on_heartbeat(&hb("new", 1, None, 0, 0), None, 5);
        assert!(table.get(Some("cluster1"), "new", 1).is_none());
        table.on_heartbeat(&hb("b0", 1, None, 0, 0), None, 5);
        assert_eq!(
            table.get(Some("cluster1"), "b0", 1).unwrap().last_update_ms,
            5
        );
    }

    #[test]
    fn heartbeats_without_a_broker_name_are_not_recorded() {
        let mut table = Liveness::default();
        let mut nameless = hb("a", 1, None, 0, 0);
        nameless.broker_name = None;
        table.on_heartbeat(&nameless, None, 0);
        assert!(table.is_empty());
    }
}
