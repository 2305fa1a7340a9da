//! Response bodies in fastjson's dialect: `ElectMasterResponseBody` (with its
//! `BrokerMemberGroup`) and `BrokerReplicasInfo` (`SyncStateSet` is `request`'s).
//!
//! fastjson writes getters alphabetically and leaves nulls out; a `Map<Long, String>` gets
//! bare numeric keys (`{1:"127.0.0.1:30911"}`). Ids go in ascending order (what Java's
//! HashSet/HashMap give for small ids), broker sets by name.

use super::event::ObjectWriter;
use super::state::BrokerReplicaInfo;
use crate::remoting::json;
use std::collections::BTreeSet;

/// `ElectMasterResponseBody`: the member group (only on a successful election) and a set.
pub fn elect_master(group: Option<&BrokerReplicaInfo>, set: &BTreeSet<i64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    let mut w = ObjectWriter::new(&mut out);
    if let Some(info) = group {
        member_group(w.key("brokerMemberGroup"), info);
    }
    w.ids("syncStateSet", set);
    w.finish();
    out
}

/// `BrokerMemberGroup {brokerAddrs, brokerName, cluster}` of a broker set.
fn member_group(out: &mut Vec<u8>, info: &BrokerReplicaInfo) {
    let mut w = ObjectWriter::new(out);
    let mut addrs = json::Seq::object(w.key("brokerAddrs"));
    for (id, broker) in &info.brokers {
        let out = addrs.item();
        json::write_i64(out, *id);
        out.push(b':');
        json::write_str(out, &broker.address);
    }
    addrs.end();
    w.str("brokerName", &info.broker_name);
    w.opt_str("cluster", info.cluster_name.as_deref());
    w.finish();
}

/// One broker id in `BrokerReplicasInfo.ReplicaIdentity`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaIdentity<'a> {
    pub broker_name: &'a str,
    pub broker_id: i64,
    pub broker_address: &'a str,
    pub alive: bool,
}

/// One broker set in `BrokerReplicasInfo.ReplicasInfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicasInfo<'a> {
    pub broker_name: &'a str,
    pub master_broker_id: Option<i64>,
    pub master_address: Option<&'a str>,
    pub master_epoch: i32,
    pub sync_state_set_epoch: i32,
    pub in_sync: Vec<ReplicaIdentity<'a>>,
    pub not_in_sync: Vec<ReplicaIdentity<'a>>,
}

/// `{"replicasInfoTable":{name: ReplicasInfo, ...}}`; `sets` must be sorted by name, unique.
pub fn broker_replicas_info(sets: &[ReplicasInfo<'_>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + sets.len() * 320);
    let mut w = ObjectWriter::new(&mut out);
    let mut table = json::Seq::object(w.key("replicasInfoTable"));
    for set in sets {
        replicas_info(table.key(set.broker_name), set);
    }
    table.end();
    w.finish();
    out
}

fn replicas_info(out: &mut Vec<u8>, set: &ReplicasInfo<'_>) {
    let mut w = ObjectWriter::new(out);
    replica_list(w.key("inSyncReplicas"), &set.in_sync);
    w.opt_str("masterAddress", set.master_address);
    if let Some(id) = set.master_broker_id {
        w.int("masterBrokerId", id);
    }
    w.int("masterEpoch", i64::from(set.master_epoch));
    replica_list(w.key("notInSyncReplicas"), &set.not_in_sync);
    w.int("syncStateSetEpoch", i64::from(set.sync_state_set_epoch));
    w.finish();
}

fn replica_list(out: &mut Vec<u8>, replicas: &[ReplicaIdentity<'_>]) {
    let mut list = json::Seq::array(out);
    for r in replicas {
        let mut w = ObjectWriter::new(list.item());
        w.bool("alive", r.alive);
        w.str("brokerAddress", r.broker_address);
        w.int("brokerId", r.broker_id);
        w.str("brokerName", r.broker_name);
        w.finish();
    }
    list.end();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::event::Event;
    use crate::controller::state::ControllerState;

    #[test]
    fn bodies_match_the_java_shapes() {
        let set: BTreeSet<i64> = [2, 1].into_iter().collect();
        let mut state = ControllerState::default();
        for (id, addr) in [(1, "127.0.0.1:30911"), (2, "127.0.0.1:30921")] {
            state.apply(&Event::ApplyBrokerId {
                cluster_name: Some("DefaultCluster".into()),
                broker_name: "broker-a".into(),
                broker_address: addr.into(),
                new_broker_id: id,
                register_check_code: format!("{addr};1"),
            });
        }
        let info = state.replica_info("broker-a").unwrap();
        let one: BTreeSet<i64> = [1].into_iter().collect();
        assert_eq!(
            String::from_utf8(elect_master(Some(info), &one)).unwrap(),
            "{\"brokerMemberGroup\":{\"brokerAddrs\":{1:\"127.0.0.1:30911\",2:\"127.0.0.1:30921\"},\"brokerName\":\"broker-a\",\"cluster\":\"DefaultCluster\"},\"syncStateSet\":[1]}"
        );
        assert_eq!(elect_master(None, &set), b"{\"syncStateSet\":[1,2]}");
        let body = broker_replicas_info(&[ReplicasInfo {
            broker_name: "broker-a",
            master_broker_id: Some(1),
            master_address: Some("127.0.0.1:30911"),
            master_epoch: 1,
            sync_state_set_epoch: 1,
            in_sync: vec![ReplicaIdentity {
                broker_name: "broker-a",
                broker_id: 1,
                broker_address: "127.0.0.1:30911",
                alive: true,
            }],
            not_in_sync: vec![ReplicaIdentity {
                broker_name: "broker-a",
                broker_id: 2,
                broker_address: "127.0.0.1:30921",
                alive: false,
            }],
        }]);
        assert_eq!(
            String::from_utf8(body).unwrap(),
            "{\"replicasInfoTable\":{\"broker-a\":{\"inSyncReplicas\":[{\"alive\":true,\"brokerAddress\":\"127.0.0.1:30911\",\"brokerId\":1,\"brokerName\":\"broker-a\"}],\"masterAddress\":\"127.0.0.1:30911\",\"masterBrokerId\":1,\"masterEpoch\":1,\"notInSyncReplicas\":[{\"alive\":false,\"brokerAddress\":\"127.0.0.1:30921\",\"brokerId\":2,\"brokerName\":\"broker-a\"}],\"syncStateSetEpoch\":1}}}"
        );
    }
}
