//! Broker liveness as plain data: Java's `DefaultBrokerHeartbeatManager` table, local to this
//! node (never replicated or logged). Time and closed connections are inputs; the owner turns
//! the brokers found inactive into elections. Entries are grouped by brokerName: a known
//! broker's heartbeat costs one hash lookup and no allocation. An index by connection finds a
//! closed connection's brokers without a scan; the table's bytes are budgeted, as its count.
//! The names sit in [`SHARDS`] shards, so that the expiry scan goes a few shards per loop turn
//! (`Controller::scan_step`).

use super::request::Heartbeat;
use super::state::SHARDS;
use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::Arc;

/// Java's `DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`, for a broker that sends no timeout of its own.
pub const DEFAULT_HEARTBEAT_TIMEOUT_MS: i64 = 10_000;

/// Brokers the table holds at most (heartbeats are unauthenticated).
pub const MAX_LIVE_BROKERS: usize = 100_000;

/// Bytes the table holds at most (names plus [`ENTRY_OVERHEAD`] per broker): 100,000 brokers
/// with names of a hundred bytes fit; as many with names of the longest allowed do not.
pub const MAX_LIVE_BYTES: usize = 48 << 20;

/// What one entry costs besides its names: the entry, its map slots and its index slot.
const ENTRY_OVERHEAD: usize = 160;

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

fn entry_bytes(name: &str, cluster: Option<&str>) -> usize {
    ENTRY_OVERHEAD + name.len() + cluster.map_or(0, str::len)
}

/// A broker the table no longer counts as alive, and the connection to close (expiry only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InactiveBroker {
    pub cluster_name: Option<String>,
    pub broker_name: String,
    pub broker_id: i64,
    pub conn: Option<ConnRef>,
}

/// A new broker's heartbeat the table has no room for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableFull(pub String);

/// New brokers and refusals since the last summary line.
#[derive(Debug, Default)]
struct NewsSinceSummary {
    new_brokers: u64,
    /// The first new broker of the interval: name, id, address.
    first_new: Option<(String, i64, String)>,
    refused: u64,
}

type Shard = HashMap<Arc<str>, Vec<BrokerLive>>;

/// The heartbeat table: brokerName -> live entries keyed by (clusterName, brokerId).
#[derive(Debug)]
pub struct Liveness {
    /// In shards picked by a keyed hash of the name.
    by_name: Vec<Shard>,
    hasher: RandomState,
    /// Connection -> the names of its entries, with how many entries of each name are on it.
    by_conn: HashMap<ConnRef, HashMap<Arc<str>, u32>>,
    len: usize,
    bytes: usize,
    news: NewsSinceSummary,
}

impl Default for Liveness {
    fn default() -> Self {
        Liveness {
            by_name: (0..SHARDS).map(|_| Shard::default()).collect(),
            hasher: RandomState::new(),
            by_conn: HashMap::new(),
            len: 0,
            bytes: 0,
            news: NewsSinceSummary::default(),
        }
    }
}

impl Liveness {
    fn shard(&self, name: &str) -> usize {
        self.hasher.hash_one(name) as usize % SHARDS
    }

    fn names(&self, name: &str) -> &Shard {
        &self.by_name[self.shard(name)]
    }

    fn names_mut(&mut self, name: &str) -> &mut Shard {
        let i = self.shard(name);
        &mut self.by_name[i]
    }

    /// Records one 904 (not one without brokerName or brokerId: no broker set can match it).
    /// Err: a new broker the table has no room for (its count or bytes), with the reason.
    pub fn on_heartbeat(
        &mut self,
        hb: &Heartbeat,
        conn: Option<ConnRef>,
        now_ms: u64,
    ) -> Result<(), TableFull> {
        let (Some(broker_name), Some(broker_id)) = (hb.broker_name.as_deref(), hb.broker_id) else {
            return Ok(());
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
            let old_conn = std::mem::replace(live, fresh).conn;
            if old_conn != conn {
                self.move_index(broker_name, old_conn, conn);
            }
            return Ok(());
        }
        let bytes = entry_bytes(broker_name, cluster);
        if self.len >= MAX_LIVE_BROKERS || self.bytes + bytes > MAX_LIVE_BYTES {
            self.news.refused += 1;
            return Err(TableFull(format!(
                "the controller's heartbeat table is full ({} brokers, {} bytes; at most {MAX_LIVE_BROKERS} brokers, {MAX_LIVE_BYTES} bytes): broker {broker_name} id {broker_id} not recorded",
                self.len, self.bytes
            )));
        }
        if self.news.first_new.is_none() {
            let addr = hb.broker_addr.clone().unwrap_or_else(|| "?".into());
            self.news.first_new = Some((broker_name.to_owned(), broker_id, addr));
        }
        self.news.new_brokers += 1;
        let key = match self.names(broker_name).get_key_value(broker_name) {
            Some((key, _)) => key.clone(),
            None => Arc::from(broker_name),
        };
        self.index(conn, key.clone());
        self.names_mut(broker_name)
            .entry(key)
            .or_default()
            .push(fresh);
        self.len += 1;
        self.bytes += bytes;
        Ok(())
    }

    fn index(&mut self, conn: Option<ConnRef>, name: Arc<str>) {
        if let Some(conn) = conn {
            *self
                .by_conn
                .entry(conn)
                .or_default()
                .entry(name)
                .or_default() += 1;
        }
    }

    fn unindex(&mut self, conn: Option<ConnRef>, name: &str) {
        let Some(conn) = conn else {
            return;
        };
        let Some(names) = self.by_conn.get_mut(&conn) else {
            return;
        };
        if let Some(count) = names.get_mut(name) {
            *count -= 1;
            if *count == 0 {
                names.remove(name);
            }
        }
        if names.is_empty() {
            self.by_conn.remove(&conn);
        }
    }

    /// A known broker's heartbeat came over another connection than its last one.
    fn move_index(&mut self, name: &str, from: Option<ConnRef>, to: Option<ConnRef>) {
        self.unindex(from, name);
        if let Some((key, _)) = self.names(name).get_key_value(name) {
            let key = key.clone();
            self.index(to, key);
        }
    }

    fn find_mut(&mut self, cluster: Option<&str>, name: &str, id: i64) -> Option<&mut BrokerLive> {
        self.names_mut(name)
            .get_mut(name)?
            .iter_mut()
            .find(|l| l.broker_id == id && l.cluster_name.as_deref() == cluster)
    }

    /// Active brokers per (cluster, broker set), as Java's `getActiveBrokersNum`.
    pub fn active_by_set(&self, now_ms: u64) -> BTreeMap<(&str, &str), usize> {
        let mut counts = BTreeMap::new();
        for (name, entries) in self.by_name.iter().flatten() {
            for live in entries.iter().filter(|l| l.is_active(now_ms)) {
                let cluster = live.cluster_name.as_deref().unwrap_or("");
                *counts.entry((cluster, &**name)).or_insert(0) += 1;
            }
        }
        counts
    }

    /// The entry of one broker (Java's `getBrokerLiveInfo`), active or not.
    pub fn get(&self, cluster: Option<&str>, name: &str, id: i64) -> Option<&BrokerLive> {
        self.names(name)
            .get(name)?
            .iter()
            .find(|l| l.broker_id == id && l.cluster_name.as_deref() == cluster)
    }

    /// Java's `isBrokerActive(cluster, name, id)`.
    pub fn is_active(&self, cluster: Option<&str>, name: &str, id: i64, now_ms: u64) -> bool {
        self.get(cluster, name, id)
            .is_some_and(|l| l.is_active(now_ms))
    }

    /// Java's `scanNotActiveBroker`, one shard of it: removes and returns the entries of
    /// shard `shard` past their timeout at `now_ms`, and how many names it examined.
    pub fn scan_not_active(&mut self, shard: usize, now_ms: u64) -> (Vec<InactiveBroker>, usize) {
        let mut gone = Vec::new();
        let Some(names) = self.by_name.get_mut(shard) else {
            return (gone, 0);
        };
        let examined = names.len();
        names.retain(|name, lives| {
            lives.retain(|l| {
                let goes = i128::from(now_ms) > deadline(l.last_update_ms, l.heartbeat_timeout_ms);
                if goes {
                    gone.push(inactive(name, l));
                }
                !goes
            });
            !lives.is_empty()
        });
        for broker in &gone {
            self.forget(broker);
        }
        (gone, examined)
    }

    /// A connection closed: every broker whose last heartbeat came over it is inactive now
    /// (Java: only the first), found through the index by connection.
    pub fn connection_closed(&mut self, conn: ConnRef) -> Vec<InactiveBroker> {
        let mut gone = Vec::new();
        for name in self
            .by_conn
            .remove(&conn)
            .into_iter()
            .flat_map(|n| n.into_keys())
        {
            self.remove_from(&name, &mut gone, |l| l.conn == Some(conn));
        }
        gone
    }

    /// Removes the entries of `name` that go, and their index slots.
    fn remove_from(
        &mut self,
        name: &str,
        gone: &mut Vec<InactiveBroker>,
        goes: impl Fn(&BrokerLive) -> bool,
    ) {
        let names = self.names_mut(name);
        let Some(lives) = names.get_mut(name) else {
            return;
        };
        let before = gone.len();
        lives.retain(|l| {
            if !goes(l) {
                return true;
            }
            gone.push(inactive(name, l));
            false
        });
        if lives.is_empty() {
            names.remove(name);
        }
        for broker in &gone[before..] {
            self.forget(broker);
        }
    }

    /// A removed entry's count, bytes and index slot.
    fn forget(&mut self, broker: &InactiveBroker) {
        let name = &broker.broker_name;
        self.len -= 1;
        self.bytes -= entry_bytes(name, broker.cluster_name.as_deref());
        self.unindex(broker.conn, name);
    }

    /// Once per expiry scan: the new brokers and refusals since the last one, a line each.
    pub fn log_news(&mut self) {
        let news = std::mem::take(&mut self.news);
        if let Some((name, id, addr)) = news.first_new {
            let others = news.new_brokers - 1;
            log::info!(
                "controller: {} new broker(s) heartbeat: {name} id {id} ({addr}){}",
                news.new_brokers,
                match others {
                    0 => String::new(),
                    n => format!(" and {n} more"),
                }
            );
        }
        if news.refused > 0 {
            log::warn!(
                "controller: {} heartbeat(s) of new brokers refused: the heartbeat table is full ({} brokers, {} bytes; at most {MAX_LIVE_BROKERS}, {MAX_LIVE_BYTES} bytes)",
                news.refused,
                self.len,
                self.bytes
            );
        }
    }
}

fn inactive(name: &str, l: &BrokerLive) -> InactiveBroker {
    InactiveBroker {
        cluster_name: l.cluster_name.clone(),
        broker_name: name.to_owned(),
        broker_id: l.broker_id,
        conn: l.conn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Liveness {
        /// The whole scan at once.
        fn scan_all(&mut self, now_ms: u64) -> Vec<InactiveBroker> {
            (0..SHARDS)
                .flat_map(|i| self.scan_not_active(i, now_ms).0)
                .collect()
        }

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
        table
            .on_heartbeat(&hb("broker1", 1, Some(3000), 1, 1), Some(ConnRef(9)), 1_000)
            .unwrap();
        assert!(table.is_active(Some("cluster1"), "broker1", 1, 4_000));
        assert!(
            table.scan_all(4_000).is_empty(),
            "last + timeout == now is alive"
        );
        let gone = table.scan_all(4_001);
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
        table
            .on_heartbeat(&hb("b", 1, None, 0, 0), None, 0)
            .unwrap();
        table
            .on_heartbeat(&hb("b", 2, Some(-10_000), 0, 0), None, 0)
            .unwrap();
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
        table
            .on_heartbeat(&hb("b", 1, Some(5000), 2, 100), None, 0)
            .unwrap();
        let mut older = hb("b", 1, Some(7000), 1, 500);
        older.election_priority = Some(4);
        table.on_heartbeat(&older, None, 10).unwrap();
        let live = table.get(Some("cluster1"), "b", 1).unwrap();
        assert_eq!((live.epoch, live.max_offset), (2, 100));
        assert_eq!(
            (live.heartbeat_timeout_ms, live.election_priority),
            (7000, 4)
        );
        assert_eq!(live.last_update_ms, 10);
        table
            .on_heartbeat(&hb("b", 1, Some(7000), 2, 150), None, 20)
            .unwrap();
        assert_eq!(table.get(Some("cluster1"), "b", 1).unwrap().max_offset, 150);
    }

    #[test]
    fn closing_a_connection_marks_every_broker_on_it_inactive() {
        let mut table = Liveness::default();
        table
            .on_heartbeat(&hb("a", 1, None, 0, 0), Some(ConnRef(1)), 0)
            .unwrap();
        table
            .on_heartbeat(&hb("b", 1, None, 0, 0), Some(ConnRef(1)), 0)
            .unwrap();
        table
            .on_heartbeat(&hb("c", 1, None, 0, 0), Some(ConnRef(2)), 0)
            .unwrap();
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
        table
            .on_heartbeat(&hb("a", 1, None, 0, 0), Some(ConnRef(1)), 0)
            .unwrap();
        table
            .on_heartbeat(&hb("a", 1, None, 0, 0), Some(ConnRef(2)), 1)
            .unwrap();
        assert!(table.connection_closed(ConnRef(1)).is_empty());
        assert_eq!(table.connection_closed(ConnRef(2)).len(), 1);
    }

    #[test]
    fn the_table_is_bounded_but_known_brokers_keep_heartbeating() {
        let mut table = Liveness::default();
        for i in 0..MAX_LIVE_BROKERS as i64 {
            table
                .on_heartbeat(&hb(&format!("b{}", i / 4), i % 4, None, 0, 0), None, 0)
                .unwrap();
        }
        assert_eq!(table.len(), MAX_LIVE_BROKERS);
        assert!(table
            .on_heartbeat(&hb("new", 1, None, 0, 0), None, 5)
            .is_err());
        assert!(table.get(Some("cluster1"), "new", 1).is_none());
        table
            .on_heartbeat(&hb("b0", 1, None, 0, 0), None, 5)
            .unwrap();
        assert_eq!(
            table.get(Some("cluster1"), "b0", 1).unwrap().last_update_ms,
            5
        );
    }

    fn table_size(added: u64) -> usize {
        usize::try_from(added).unwrap_or(usize::MAX)
    }

    #[test]
    fn the_tables_bytes_are_bounded_and_given_back_when_brokers_go() {
        let mut table = Liveness::default();
        let long = "n".repeat(255);
        let mut added = 0;
        let refusal = loop {
            let mut beat = hb(&format!("{long}{added}"), 1, Some(10), 0, 0);
            beat.cluster_name = Some(long.clone());
            match table.on_heartbeat(&beat, Some(ConnRef(added % 7)), 0) {
                Ok(()) => added += 1,
                Err(TableFull(why)) => break why,
            }
        };
        assert!(table.len() < MAX_LIVE_BROKERS, "the bytes bound first");
        assert!(table.bytes <= MAX_LIVE_BYTES);
        assert!(refusal.contains("bytes"), "{refusal}");
        // Known brokers keep heartbeating; a close and the expiry give the bytes back.
        let known = hb(&format!("{long}0"), 1, Some(10), 0, 0);
        let known = Heartbeat {
            cluster_name: Some(long.clone()),
            ..known
        };
        assert!(table.on_heartbeat(&known, Some(ConnRef(0)), 5).is_ok());
        let closed = table.connection_closed(ConnRef(3)).len();
        assert_eq!(closed, (0..added).filter(|i| i % 7 == 3).count());
        assert_eq!(table.scan_all(100).len() + closed, table_size(added));
        assert_eq!((table.len(), table.bytes), (0, 0));
        assert!(table.by_conn.is_empty());
    }

    #[test]
    fn heartbeats_without_a_broker_name_are_not_recorded() {
        let mut table = Liveness::default();
        let mut nameless = hb("a", 1, None, 0, 0);
        nameless.broker_name = None;
        table.on_heartbeat(&nameless, None, 0).unwrap();
        assert!(table.is_empty());
    }
}
