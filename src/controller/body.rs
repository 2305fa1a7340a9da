//! Response bodies in fastjson's dialect: `ElectMasterResponseBody` (with its
//! `BrokerMemberGroup`) and `BrokerReplicasInfo` (`SyncStateSet` is `request`'s).
//!
//! fastjson writes getters alphabetically and leaves nulls out; a `Map<Long, String>` gets
//! bare numeric keys (`{1:"127.0.0.1:30911"}`). Ids go in ascending order (what Java's
//! HashSet/HashMap give for small ids), broker sets by name.

use super::event::ObjectWriter;
use super::state::{BrokerReplicaInfo, SyncStateInfo};
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

/// `{"replicasInfoTable":{name: ReplicasInfo, ...}}` of `sets` (sorted by name, unique).
pub fn broker_replicas_info(
    sets: &[(&BrokerReplicaInfo, &SyncStateInfo)],
    alive: impl Fn(&BrokerReplicaInfo, i64) -> bool,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + sets.len() * 320);
    let mut w = ObjectWriter::new(&mut out);
    let mut table = json::Seq::object(w.key("replicasInfoTable"));
    for (replica, sync) in sets {
        let mut w = ObjectWriter::new(table.key(&replica.broker_name));
        let in_sync = |id: i64| sync.sync_state_set.contains(&id);
        replica_list(w.key("inSyncReplicas"), replica, &in_sync, &alive);
        let master = sync.master_broker_id;
        w.opt_str("masterAddress", master.and_then(|m| replica.address(m)));
        if let Some(id) = master {
            w.int("masterBrokerId", id);
        }
        w.int("masterEpoch", i64::from(sync.master_epoch));
        replica_list(
            w.key("notInSyncReplicas"),
            replica,
            &|id| !in_sync(id),
            &alive,
        );
        w.int("syncStateSetEpoch", i64::from(sync.sync_state_set_epoch));
        w.finish();
    }
    table.end();
    w.finish();
    out
}

/// The `ReplicaIdentity` list of the ids of `replica` that `take` selects.
fn replica_list(
    out: &mut Vec<u8>,
    replica: &BrokerReplicaInfo,
    take: &dyn Fn(i64) -> bool,
    alive: &impl Fn(&BrokerReplicaInfo, i64) -> bool,
) {
    let mut list = json::Seq::array(out);
    for (&id, broker) in replica.brokers.iter().filter(|(id, _)| take(**id)) {
        let mut w = ObjectWriter::new(list.item());
        w.bool("alive", alive(replica, id));
        w.str("brokerAddress", &broker.address);
        w.int("brokerId", id);
        w.str("brokerName", &replica.broker_name);
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
        state.apply(&Event::ElectMaster {
            broker_name: "broker-a".into(),
            new_master_elected: true,
            new_master_broker_id: Some(1),
        });
        let set = state.broker_set("broker-a").unwrap();
        let body = broker_replicas_info(&[set], |_, id| id == 1);
        assert_eq!(
            String::from_utf8(body).unwrap(),
            "{\"replicasInfoTable\":{\"broker-a\":{\"inSyncReplicas\":[{\"alive\":true,\"brokerAddress\":\"127.0.0.1:30911\",\"brokerId\":1,\"brokerName\":\"broker-a\"}],\"masterAddress\":\"127.0.0.1:30911\",\"masterBrokerId\":1,\"masterEpoch\":1,\"notInSyncReplicas\":[{\"alive\":false,\"brokerAddress\":\"127.0.0.1:30921\",\"brokerId\":2,\"brokerName\":\"broker-a\"}],\"syncStateSetEpoch\":1}}}"
        );
    }
}
