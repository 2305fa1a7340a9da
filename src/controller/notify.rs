//! Role-change notifications (1008) as data: after an election is durable, Java tells every
//! *active* member of the set who the new master is, oneway. [`NotifyOutbox`] keeps the
//! highest master epoch per broker address (a broker ignores older epochs).

use super::codes::request::NOTIFY_BROKER_ROLE_CHANGED;
use super::liveness::Liveness;
use super::replicas::{master_fields, Elected};
use super::request::sync_state_set_json;
use super::response::encode_oneway_request;
use std::collections::{BTreeSet, HashMap};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleChangeNotification {
    /// Where to send it (the member's registered address).
    pub broker_addr: String,
    pub master_address: Option<String>,
    pub master_broker_id: i64,
    pub master_epoch: i32,
    pub sync_state_set_epoch: i32,
}

impl RoleChangeNotification {
    /// Appends the oneway 1008 frame; its `SyncStateSet` holds the new master only (as Java's).
    pub fn encode(&self, opaque: i32, out: &mut Vec<u8>) {
        let mut fields = Vec::with_capacity(4);
        master_fields(
            &mut fields,
            self.master_address.as_deref(),
            self.master_broker_id,
            self.master_epoch,
            self.sync_state_set_epoch,
        );
        let set: BTreeSet<i64> = [self.master_broker_id].into_iter().collect();
        let body = sync_state_set_json(Some(&set), self.sync_state_set_epoch);
        encode_oneway_request(NOTIFY_BROKER_ROLE_CHANGED, opaque, &fields, &body, out);
    }
}

/// Notifications for one durable election: every member active at `now_ms`.
pub fn for_election(
    elected: &Elected,
    liveness: &Liveness,
    now_ms: u64,
) -> Vec<RoleChangeNotification> {
    elected
        .members
        .iter()
        .filter(|(id, addr)| {
            !addr.is_empty()
                && liveness.is_active(
                    elected.cluster_name.as_deref(),
                    &elected.broker_name,
                    *id,
                    now_ms,
                )
        })
        .map(|(_, addr)| RoleChangeNotification {
            broker_addr: addr.clone(),
            master_address: elected.master_address.clone(),
            master_broker_id: elected.master_broker_id,
            master_epoch: elected.master_epoch,
            sync_state_set_epoch: elected.sync_state_set_epoch,
        })
        .collect()
}

#[derive(Debug, Default)]
pub struct NotifyOutbox {
    pending: HashMap<String, RoleChangeNotification>,
}

impl NotifyOutbox {
    pub fn push(&mut self, n: RoleChangeNotification) {
        match self.pending.get(&n.broker_addr) {
            Some(old) if old.master_epoch > n.master_epoch => {}
            _ => {
                self.pending.insert(n.broker_addr.clone(), n);
            }
        }
    }

    pub fn drain(&mut self) -> Vec<RoleChangeNotification> {
        self.pending.drain().map(|(_, n)| n).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::request::Heartbeat;

    fn elected(epoch: i32) -> Elected {
        Elected {
            cluster_name: Some("c".into()),
            broker_name: "b".into(),
            master_broker_id: 2,
            master_address: Some("10.0.0.2:30911".into()),
            master_epoch: epoch,
            sync_state_set_epoch: epoch + 1,
            members: vec![
                (1, "10.0.0.1:30911".into()),
                (2, "10.0.0.2:30911".into()),
                (3, "10.0.0.3:30911".into()),
            ],
        }
    }

    #[test]
    fn only_active_members_are_notified() {
        let mut liveness = Liveness::default();
        for id in [2, 3] {
            liveness
                .on_heartbeat(
                    &Heartbeat {
                        cluster_name: Some("c".into()),
                        broker_name: Some("b".into()),
                        broker_id: Some(id),
                        ..Heartbeat::default()
                    },
                    None,
                    0,
                )
                .unwrap();
        }
        let sent: Vec<String> = for_election(&elected(4), &liveness, 5_000)
            .into_iter()
            .map(|n| n.broker_addr)
            .collect();
        assert_eq!(sent, vec!["10.0.0.2:30911", "10.0.0.3:30911"]);
        assert!(for_election(&elected(4), &liveness, 10_001).is_empty());
    }

    #[test]
    fn the_outbox_keeps_the_newest_epoch_per_broker() {
        let mut outbox = NotifyOutbox::default();
        let n = |epoch: i32| RoleChangeNotification {
            broker_addr: "a:1".into(),
            master_address: None,
            master_broker_id: 1,
            master_epoch: epoch,
            sync_state_set_epoch: 1,
        };
        outbox.push(n(3));
        outbox.push(n(2));
        outbox.push(n(5));
        assert_eq!(outbox.drain(), vec![n(5)]);
        assert!(outbox.drain().is_empty());
    }

    #[test]
    fn the_frame_is_a_oneway_1008_with_the_header_and_the_new_set() {
        let mut out = Vec::new();
        RoleChangeNotification {
            broker_addr: "10.0.0.1:30911".into(),
            master_address: Some("10.0.0.2:30911".into()),
            master_broker_id: 2,
            master_epoch: 4,
            sync_state_set_epoch: 5,
        }
        .encode(77, &mut out);
        let header = "{\"code\":1008,\"extFields\":{\"masterAddress\":\"10.0.0.2:30911\",\"masterBrokerId\":\"2\",\"masterEpoch\":\"4\",\"syncStateSetEpoch\":\"5\"},\"flag\":2,\"language\":\"JAVA\",\"opaque\":77,\"serializeTypeCurrentRPC\":\"JSON\",\"version\":479}";
        let body = "{\"syncStateSet\":[2],\"syncStateSetEpoch\":5}";
        let mut expected = Vec::new();
        expected.extend_from_slice(&((4 + header.len() + body.len()) as u32).to_be_bytes());
        expected.extend_from_slice(&(header.len() as u32).to_be_bytes());
        expected.extend_from_slice(header.as_bytes());
        expected.extend_from_slice(body.as_bytes());
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&expected)
        );
    }
}
