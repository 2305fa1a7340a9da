//! Live brokers (Java's brokerLiveTable): one entry per registered (cluster, address).

use super::super::model::DataVersion;
use super::{detach, BodyFingerprint, ConnId, RouteTable};
use bytes::Bytes;
use std::sync::Arc;

#[derive(Debug)]
pub(super) struct LiveBroker {
    pub(super) cluster: Arc<str>,
    pub(super) addr: Arc<str>,
    pub(super) broker_name: Arc<str>,
    pub(super) last_update_ms: u64,
    pub(super) timeout_ms: u64,
    pub(super) data_version: DataVersion,
    pub(super) conn: Option<ConnId>,
    /// The connection of its latest registration has closed: its unregistration is queued.
    pub(super) connection_closed: bool,
    pub(super) ha_server_addr: String,
    pub(super) fingerprint: Option<BodyFingerprint>,
    /// QUERY_DATA_VERSION's reply body and the DataVersion it was encoded from.
    pub(super) version_text: Option<(DataVersion, Bytes)>,
    /// The group's write stamp when the body was last applied.
    pub(super) seen_stamp: u64,
    pub(super) expiry: Expiry,
    pub(super) generation: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expiry {
    /// In no bucket: just registered, or its bucket fired while it was still alive.
    Unscheduled,
    /// In this bucket; its entries in other buckets are stale.
    Scheduled(u64),
    /// Found silent: its unregistration is on its way (not rescheduled).
    Reported,
}

impl RouteTable {
    pub fn registered_over(
        &self,
        cluster: &str,
        addr: &str,
        broker_name: &str,
        conn: Option<ConnId>,
    ) -> bool {
        self.live_id(cluster, addr).is_some_and(|id| {
            let live = &self.live[id];
            conn.is_some() && live.conn == conn && &*live.broker_name == broker_name
        })
    }

    /// QUERY_DATA_VERSION in one lookup: `answer` gets the stored DataVersion and its encoded
    /// text (`None`: not live); on `Ok`, a heartbeat.
    pub fn query_data_version<R, E>(
        &mut self,
        cluster: &str,
        addr: &str,
        now_ms: u64,
        answer: impl FnOnce(Option<(&DataVersion, &Bytes)>) -> Result<R, E>,
    ) -> Result<R, E> {
        let id = self.live_id(cluster, addr);
        let Some(live) = id.and_then(|id| self.live.get_mut(id)) else {
            return answer(None);
        };
        let text = match &mut live.version_text {
            Some((version, text)) if *version == live.data_version => text,
            _ => {
                let mut text = Vec::with_capacity(64);
                live.data_version.encode(&mut text);
                &live
                    .version_text
                    .insert((live.data_version, Bytes::from(text)))
                    .1
            }
        };
        let answered = answer(Some((&live.data_version, text)))?;
        live.last_update_ms = now_ms;
        Ok(answered)
    }

    pub fn heartbeat(&mut self, cluster: &str, addr: &str, now_ms: u64) -> bool {
        let Some(id) = self.live_id(cluster, addr) else {
            return false;
        };
        self.live[id].last_update_ms = now_ms;
        true
    }

    pub(super) fn bind_connection(&mut self, live_id: usize, conn: Option<ConnId>) {
        let previous = self.live[live_id].conn;
        if previous == conn {
            return;
        }
        if let Some(p) = previous {
            detach(&mut self.live_by_conn, &p, live_id);
        }
        if let Some(c) = conn {
            self.live_by_conn.entry(c).or_default().push(live_id);
        }
        self.live[live_id].conn = conn;
    }

    pub(super) fn arm_expiry(&mut self, live_id: usize) {
        let live = &self.live[live_id];
        let deadline = live.last_update_ms.saturating_add(live.timeout_ms);
        let bucket = self.expiry.bucket_of(deadline);
        // An entry scheduled earlier re-checks itself when it fires.
        let due_earlier = match live.expiry {
            Expiry::Scheduled(scheduled) => bucket < scheduled,
            Expiry::Unscheduled | Expiry::Reported => true,
        };
        if due_earlier {
            let generation = live.generation;
            let b = self.expiry.schedule(deadline, (live_id, generation));
            self.live[live_id].expiry = Expiry::Scheduled(b);
        }
    }

    pub(super) fn remove_live(&mut self, live_id: usize) -> Option<LiveBroker> {
        let live = self.live.try_remove(live_id)?;
        detach(&mut self.live_by_addr, &*live.addr, live_id);
        if let Some(c) = live.conn {
            detach(&mut self.live_by_conn, &c, live_id);
        }
        Some(live)
    }
}
