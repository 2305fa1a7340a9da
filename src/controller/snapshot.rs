//! The whole-state snapshot, the data of a Raft snapshot: `"RMQCSNP1" index:u64 crc:u32`
//! (big endian; CRC-32 of index and JSON), then both tables as JSON sorted by brokerName
//! (docs/controller.md, "Storage").

use crate::controller::event::{Fields, ObjectWriter};
use crate::controller::state::{
    BrokerIdInfo, BrokerReplicaInfo, ControllerState, Stamp, SyncStateInfo,
};
use crate::remoting::json::{self, Seq, ValueRef};

pub const MAGIC: &[u8; 8] = b"RMQCSNP1";
const HEADER_LEN: usize = 20;

pub fn encode(index: u64, state: &ControllerState) -> Vec<u8> {
    let json = encode_state(state);
    let mut out = Vec::with_capacity(HEADER_LEN + json.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&index.to_be_bytes());
    out.extend_from_slice(&crc(&index.to_be_bytes(), &json).to_be_bytes());
    out.extend_from_slice(&json);
    out
}

/// CRC-32 of the index and the JSON.
fn crc(index: &[u8], json: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(index);
    hasher.update(json);
    hasher.finalize()
}

/// Both tables as JSON, sorted by brokerName (equal states give equal bytes).
fn encode_state(state: &ControllerState) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + state.replica_count() * 256);
    let mut w = ObjectWriter::new(&mut out);
    let mut infos: Vec<&BrokerReplicaInfo> = state.replica_infos().collect();
    infos.sort_unstable_by(|a, b| a.broker_name.cmp(&b.broker_name));
    write_list(w.key("replicaInfoTable"), infos, write_replica_info);
    let mut infos: Vec<&SyncStateInfo> = state.sync_states().collect();
    infos.sort_unstable_by(|a, b| a.broker_name.cmp(&b.broker_name));
    write_list(w.key("syncStateSetInfoTable"), infos, write_sync_state);
    w.finish();
    out
}

fn write_list<T>(out: &mut Vec<u8>, items: Vec<&T>, write: fn(&mut Vec<u8>, &T)) {
    let mut list = Seq::array(out);
    for item in items {
        write(list.item(), item);
    }
    list.end();
}

fn write_replica_info(out: &mut Vec<u8>, info: &BrokerReplicaInfo) {
    let mut w = ObjectWriter::new(out);
    w.str("brokerName", &info.broker_name);
    let mut brokers = Seq::array(w.key("brokers"));
    for (id, b) in &info.brokers {
        let mut b_w = ObjectWriter::new(brokers.item());
        b_w.str("brokerAddress", &b.address);
        b_w.int("brokerId", *id);
        b_w.str("registerCheckCode", &b.register_check_code);
        b_w.finish();
    }
    brokers.end();
    w.opt_str("clusterName", info.cluster_name.as_deref());
    w.int("nextAssignBrokerId", info.next_assign_broker_id);
    w.finish();
}

fn write_sync_state(out: &mut Vec<u8>, info: &SyncStateInfo) {
    let mut w = ObjectWriter::new(out);
    w.str("brokerName", &info.broker_name);
    w.opt_str("clusterName", info.cluster_name.as_deref());
    if let Some(master) = info.master_broker_id {
        w.int("masterBrokerId", master);
    }
    if let Some(stamp) = info.master_stamp {
        w.int("masterElectedBy", stamp.node as i64);
        w.int("masterElectedMs", stamp.wall_ms as i64);
    }
    w.int("masterEpoch", i64::from(info.master_epoch));
    w.ids("syncStateSet", &info.sync_state_set);
    w.int("syncStateSetEpoch", i64::from(info.sync_state_set_epoch));
    w.finish();
}

/// Reads snapshot data: the index it is as of, and the state.
pub fn decode(bytes: &[u8]) -> Result<(u64, ControllerState), String> {
    if bytes.len() < HEADER_LEN || !bytes.starts_with(MAGIC) {
        return Err("not a controller snapshot (bad magic or too short)".into());
    }
    let (index, json) = (&bytes[8..16], &bytes[HEADER_LEN..]);
    if crc(index, json).to_be_bytes() != bytes[16..HEADER_LEN] {
        return Err("checksum mismatch".into());
    }
    let index = u64::from_be_bytes(index.try_into().unwrap_or_default());
    Ok((index, decode_state(json)?))
}

fn decode_state(json_bytes: &[u8]) -> Result<ControllerState, String> {
    let limits = crate::controller::request::body_limits(json_bytes);
    let doc = json::parse_borrowed(json_bytes, &limits).map_err(|e| e.to_string())?;
    let root = doc.root();
    let mut state = ControllerState::default();
    for item in array(root, "replicaInfoTable")? {
        state.insert_replica_info(read_replica_info(item)?);
    }
    for item in array(root, "syncStateSetInfoTable")? {
        state.insert_sync_state(read_sync_state(item)?);
    }
    Ok(state)
}

fn array<'d>(v: ValueRef<'d>, key: &str) -> Result<Vec<ValueRef<'d>>, String> {
    v.get(key)
        .and_then(|a| a.items())
        .map(|items| items.collect())
        .ok_or_else(|| format!("{key} is missing or not an array"))
}

fn read_replica_info(v: ValueRef<'_>) -> Result<BrokerReplicaInfo, String> {
    let f = Fields(v);
    let mut info = BrokerReplicaInfo::new(f.opt_string("clusterName")?, f.string("brokerName")?);
    info.next_assign_broker_id = f.int("nextAssignBrokerId")?;
    for b in array(v, "brokers")? {
        let bf = Fields(b);
        info.brokers.insert(
            bf.int("brokerId")?,
            BrokerIdInfo {
                address: bf.string("brokerAddress")?,
                register_check_code: bf.string("registerCheckCode")?,
            },
        );
    }
    Ok(info)
}

fn read_sync_state(v: ValueRef<'_>) -> Result<SyncStateInfo, String> {
    let f = Fields(v);
    let mut info = SyncStateInfo::new(f.opt_string("clusterName")?, f.string("brokerName")?);
    info.master_broker_id = f.opt_int("masterBrokerId")?;
    let by = f.opt_int("masterElectedBy")?;
    let at = f.opt_int("masterElectedMs")?;
    if let (Some(node), Some(wall_ms)) = (by, at) {
        info.master_stamp = Some(Stamp {
            node: node as u64,
            wall_ms: wall_ms as u64,
        });
    }
    info.master_epoch = f.int32("masterEpoch")?;
    info.sync_state_set_epoch = f.int32("syncStateSetEpoch")?;
    info.sync_state_set = f.ids("syncStateSet")?.ok_or("syncStateSet is missing")?;
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::event::Event;

    fn sample() -> ControllerState {
        let mut state = ControllerState::default();
        for (name, id) in [("b", 1), ("a", 1), ("a", 2)] {
            state.apply(&Event::ApplyBrokerId {
                cluster_name: (name == "a").then(|| "c\"1".to_owned()),
                broker_name: name.into(),
                broker_address: format!("h:{id}"),
                new_broker_id: id,
                register_check_code: format!("h:{id};77"),
            });
        }
        state.apply(&Event::ElectMaster {
            broker_name: "a".into(),
            new_master_elected: true,
            new_master_broker_id: Some(2),
        });
        state.set_master_stamp(
            "a",
            Stamp {
                node: 3,
                wall_ms: 1_700_000_000_123,
            },
        );
        state
    }

    #[test]
    fn a_snapshot_reads_back_to_the_same_state() {
        let state = sample();
        let bytes = encode(42, &state);
        let (index, back) = decode(&bytes).unwrap();
        assert_eq!(index, 42);
        assert_eq!(back, state);
        assert_eq!(encode(42, &back), bytes, "stable bytes");
        assert_eq!(
            decode(&encode(0, &ControllerState::default())).unwrap().1,
            ControllerState::default()
        );
    }

    #[test]
    fn any_damage_is_detected() {
        let bytes = encode(7, &sample());
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x20;
            assert!(decode(&bad).is_err(), "flip at {i}");
        }
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }
}
