//! The state changes of the Controller (Java's `EventMessage` family) and their log encoding,
//! Java's `EventSerializer`'s (docs/controller.md, "Storage"): the only input of
//! [`super::state::ControllerState::apply`]. An empty entry is a read barrier.

use crate::remoting::json::{self, Field, Value, ValueRef};
use std::collections::BTreeSet;

/// Java's `EventType` ids and names; 4 (`READ_EVENT`) is declared by Java, never written.
const TYPES: [(u16, &str); 6] = [
    (1, "ALTER_SYNC_STATE_SET_EVENT"),
    (2, "APPLY_BROKER_ID_EVENT"),
    (3, "ELECT_MASTER_EVENT"),
    (4, "READ_EVENT"),
    (5, "CLEAN_BROKER_DATA_EVENT"),
    (6, "UPDATE_BROKER_ADDRESS"),
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    AlterSyncStateSet {
        broker_name: String,
        new_sync_state_set: BTreeSet<i64>,
    },
    /// An allocated broker id (creating the broker set on its first id).
    ApplyBrokerId {
        cluster_name: Option<String>,
        broker_name: String,
        broker_address: String,
        new_broker_id: i64,
        register_check_code: String,
    },
    /// A new master (elected) or none (the old one died and nobody could take over).
    ElectMaster {
        broker_name: String,
        new_master_elected: bool,
        new_master_broker_id: Option<i64>,
    },
    /// Forget some ids of a broker set, or the whole set (`None`).
    CleanBrokerData {
        broker_name: String,
        broker_id_set_to_clean: Option<BTreeSet<i64>>,
    },
    UpdateBrokerAddress {
        cluster_name: Option<String>,
        broker_name: String,
        broker_address: String,
        broker_id: i64,
    },
}

impl Event {
    /// Its id in `TYPES`.
    pub fn type_id(&self) -> u16 {
        match self {
            Event::AlterSyncStateSet { .. } => 1,
            Event::ApplyBrokerId { .. } => 2,
            Event::ElectMaster { .. } => 3,
            Event::CleanBrokerData { .. } => 5,
            Event::UpdateBrokerAddress { .. } => 6,
        }
    }

    /// Java's `EventType` enum name, written as `eventType`.
    pub fn type_name(&self) -> &'static str {
        type_name(self.type_id()).unwrap_or("UNKNOWN")
    }

    pub fn broker_name(&self) -> &str {
        match self {
            Event::AlterSyncStateSet { broker_name, .. }
            | Event::ApplyBrokerId { broker_name, .. }
            | Event::ElectMaster { broker_name, .. }
            | Event::CleanBrokerData { broker_name, .. }
            | Event::UpdateBrokerAddress { broker_name, .. } => broker_name,
        }
    }

    /// The type id, then fastjson's JSON of the event (members alphabetical, nulls left out).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.type_id().to_be_bytes());
        let text = |s: &str| Some(Value::Str(s.to_owned()));
        let ids =
            |ids: &BTreeSet<i64>| Value::Array(ids.iter().map(|id| Value::Int(*id)).collect());
        let mut members = vec![
            ("brokerName", text(self.broker_name())),
            ("eventType", text(self.type_name())),
        ];
        match self {
            Event::AlterSyncStateSet {
                new_sync_state_set, ..
            } => members.push(("newSyncStateSet", Some(ids(new_sync_state_set)))),
            Event::ApplyBrokerId {
                cluster_name,
                broker_address,
                new_broker_id,
                register_check_code,
                ..
            } => members.extend([
                ("brokerAddress", text(broker_address)),
                ("clusterName", cluster_name.as_deref().and_then(text)),
                ("newBrokerId", Some(Value::Int(*new_broker_id))),
                ("registerCheckCode", text(register_check_code)),
            ]),
            Event::ElectMaster {
                new_master_elected,
                new_master_broker_id,
                ..
            } => members.extend([
                ("newMasterBrokerId", new_master_broker_id.map(Value::Int)),
                ("newMasterElected", Some(Value::Bool(*new_master_elected))),
            ]),
            Event::CleanBrokerData {
                broker_id_set_to_clean,
                ..
            } => members.push((
                "brokerIdSetToClean",
                broker_id_set_to_clean.as_ref().map(ids),
            )),
            Event::UpdateBrokerAddress {
                cluster_name,
                broker_address,
                broker_id,
                ..
            } => members.extend([
                ("brokerAddress", text(broker_address)),
                ("brokerId", Some(Value::Int(*broker_id))),
                ("clusterName", cluster_name.as_deref().and_then(text)),
            ]),
        }
        members.sort_by_key(|(key, _)| *key);
        let members = members
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_owned(), v?)));
        json::write_value(out, &Value::Object(members.collect()));
    }

    pub fn decode(bytes: &[u8]) -> Result<Event, String> {
        if bytes.len() < 2 {
            return Err("event shorter than its 2-byte type id".to_owned());
        }
        let type_id = u16::from_be_bytes([bytes[0], bytes[1]]);
        let doc = json::parse_borrowed(&bytes[2..], &super::request::body_limits(bytes))
            .map_err(|e| format!("event type {type_id}: {e}"))?;
        let root = doc.root();
        if root.members().is_none() {
            return Err(format!("event type {type_id} is not a JSON object"));
        }
        let name = type_name(type_id).ok_or_else(|| format!("unknown event type {type_id}"))?;
        match root.get("eventType").and_then(|v| v.as_str()) {
            Some(written) if written == name => {}
            other => {
                return Err(format!(
                    "event type {type_id} ({name}) carries eventType {other:?}"
                ))
            }
        }
        let f = Fields(root);
        Ok(match type_id {
            // The ids of `TYPES`.
            1 => Event::AlterSyncStateSet {
                broker_name: f.string("brokerName")?,
                new_sync_state_set: f.ids("newSyncStateSet")?.unwrap_or_default(),
            },
            2 => Event::ApplyBrokerId {
                cluster_name: f.opt_string("clusterName")?,
                broker_name: f.string("brokerName")?,
                broker_address: f.string("brokerAddress")?,
                new_broker_id: f.int("newBrokerId")?,
                register_check_code: f.string("registerCheckCode")?,
            },
            3 => Event::ElectMaster {
                broker_name: f.string("brokerName")?,
                new_master_elected: f.bool("newMasterElected")?,
                new_master_broker_id: f.opt_int("newMasterBrokerId")?,
            },
            5 => Event::CleanBrokerData {
                broker_name: f.string("brokerName")?,
                broker_id_set_to_clean: f.ids("brokerIdSetToClean")?,
            },
            6 => Event::UpdateBrokerAddress {
                cluster_name: f.opt_string("clusterName")?,
                broker_name: f.string("brokerName")?,
                broker_address: f.string("brokerAddress")?,
                broker_id: f.int("brokerId")?,
            },
            _ => return Err(format!("event type {type_id} ({name}) is never logged")),
        })
    }
}

fn type_name(type_id: u16) -> Option<&'static str> {
    TYPES
        .iter()
        .find(|(id, _)| *id == type_id)
        .map(|(_, name)| *name)
}

pub fn encode_entry(events: &[Event]) -> Vec<u8> {
    let mut out = Vec::with_capacity(events.len() * 160);
    for event in events {
        let len_at = out.len();
        out.extend_from_slice(&[0; 4]);
        event.encode(&mut out);
        let len = (out.len() - len_at - 4) as u32;
        out[len_at..len_at + 4].copy_from_slice(&len.to_be_bytes());
    }
    out
}

/// Reads the events of one log entry (none for an empty entry).
pub fn decode_entry(entry: &[u8]) -> Result<Vec<Event>, String> {
    let mut events = Vec::new();
    let mut rest = entry;
    while !rest.is_empty() {
        if rest.len() < 4 {
            return Err("entry ends inside an event length".to_owned());
        }
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let body = rest
            .get(4..4 + len)
            .ok_or_else(|| format!("event of {len} bytes runs past the entry"))?;
        events.push(Event::decode(body)?);
        rest = &rest[4 + len..];
    }
    Ok(events)
}

/// Writes `{"a":..,"b":..}` one typed member at a time, in the order called (alphabetical).
pub(crate) struct ObjectWriter<'a>(json::Seq<'a>);

impl<'a> ObjectWriter<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Self {
        ObjectWriter(json::Seq::object(out))
    }

    pub(crate) fn key(&mut self, key: &str) -> &mut Vec<u8> {
        self.0.key(key)
    }

    pub(crate) fn str(&mut self, key: &str, value: &str) {
        json::write_str(self.key(key), value);
    }

    pub(crate) fn opt_str(&mut self, key: &str, value: Option<&str>) {
        if let Some(value) = value {
            self.str(key, value);
        }
    }

    pub(crate) fn int(&mut self, key: &str, value: i64) {
        json::write_i64(self.key(key), value);
    }

    pub(crate) fn bool(&mut self, key: &str, value: bool) {
        json::write_bool(self.key(key), value);
    }

    pub(crate) fn ids<'i>(&mut self, key: &str, ids: impl IntoIterator<Item = &'i i64>) {
        let mut array = json::Seq::array(self.key(key));
        for id in ids {
            json::write_i64(array.item(), *id);
        }
        array.end();
    }

    pub(crate) fn finish(self) {
        self.0.end();
    }
}

/// Typed member access with errors that name the member.
pub(crate) struct Fields<'d>(pub(crate) ValueRef<'d>);

impl<'d> Fields<'d> {
    fn present(&self, key: &str) -> Option<ValueRef<'d>> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    /// A member that is absent or null is None; one `get` cannot read is an error.
    fn opt<T>(
        &self,
        key: &str,
        what: &str,
        get: fn(ValueRef<'d>) -> Option<T>,
    ) -> Result<Option<T>, String> {
        let value = self
            .present(key)
            .map(|v| get(v).ok_or_else(|| format!("{key} is not {what}")));
        value.transpose()
    }

    pub(crate) fn opt_string(&self, key: &str) -> Result<Option<String>, String> {
        self.opt(key, "a string", |v| v.as_str().map(str::to_owned))
    }

    pub(crate) fn string(&self, key: &str) -> Result<String, String> {
        self.opt_string(key)?
            .ok_or_else(|| format!("{key} is missing"))
    }

    pub(crate) fn opt_int(&self, key: &str) -> Result<Option<i64>, String> {
        self.opt(key, "an integer", |v| v.as_i64())
    }

    pub(crate) fn int(&self, key: &str) -> Result<i64, String> {
        self.opt_int(key)?
            .ok_or_else(|| format!("{key} is missing"))
    }

    pub(crate) fn int32(&self, key: &str) -> Result<i32, String> {
        i32::try_from(self.int(key)?).map_err(|_| format!("{key} is out of range"))
    }

    pub(crate) fn bool(&self, key: &str) -> Result<bool, String> {
        self.present(key)
            .and_then(|v| v.as_bool())
            .ok_or_else(|| format!("{key} is missing or not a boolean"))
    }

    pub(crate) fn ids(&self, key: &str) -> Result<Option<BTreeSet<i64>>, String> {
        let Some(v) = self.present(key) else {
            return Ok(None);
        };
        let items = v.items().ok_or_else(|| format!("{key} is not an array"))?;
        let ids: Option<BTreeSet<i64>> = items.map(|item| item.as_i64()).collect();
        ids.map(Some)
            .ok_or_else(|| format!("{key} holds a non-integer"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[i64]) -> BTreeSet<i64> {
        ids.iter().copied().collect()
    }

    /// The encodings Java's EventSerializer produces for these events (type id + fastjson).
    fn java_examples() -> Vec<(Event, &'static [u8])> {
        vec![
            (
                Event::ApplyBrokerId {
                    cluster_name: Some("DefaultCluster".into()),
                    broker_name: "broker-a".into(),
                    broker_address: "127.0.0.1:30911".into(),
                    new_broker_id: 1,
                    register_check_code: "127.0.0.1:30911;1700000000000".into(),
                },
                b"\x00\x02{\"brokerAddress\":\"127.0.0.1:30911\",\"brokerName\":\"broker-a\",\"clusterName\":\"DefaultCluster\",\"eventType\":\"APPLY_BROKER_ID_EVENT\",\"newBrokerId\":1,\"registerCheckCode\":\"127.0.0.1:30911;1700000000000\"}",
            ),
            (
                Event::ElectMaster {
                    broker_name: "broker-a".into(),
                    new_master_elected: true,
                    new_master_broker_id: Some(1),
                },
                b"\x00\x03{\"brokerName\":\"broker-a\",\"eventType\":\"ELECT_MASTER_EVENT\",\"newMasterBrokerId\":1,\"newMasterElected\":true}",
            ),
            (
                Event::ElectMaster {
                    broker_name: "broker-a".into(),
                    new_master_elected: false,
                    new_master_broker_id: None,
                },
                b"\x00\x03{\"brokerName\":\"broker-a\",\"eventType\":\"ELECT_MASTER_EVENT\",\"newMasterElected\":false}",
            ),
            (
                Event::AlterSyncStateSet {
                    broker_name: "broker-a".into(),
                    new_sync_state_set: set(&[1, 2]),
                },
                b"\x00\x01{\"brokerName\":\"broker-a\",\"eventType\":\"ALTER_SYNC_STATE_SET_EVENT\",\"newSyncStateSet\":[1,2]}",
            ),
            (
                Event::CleanBrokerData {
                    broker_name: "broker-a".into(),
                    broker_id_set_to_clean: Some(set(&[2])),
                },
                b"\x00\x05{\"brokerIdSetToClean\":[2],\"brokerName\":\"broker-a\",\"eventType\":\"CLEAN_BROKER_DATA_EVENT\"}",
            ),
            (
                Event::CleanBrokerData {
                    broker_name: "broker-a".into(),
                    broker_id_set_to_clean: None,
                },
                b"\x00\x05{\"brokerName\":\"broker-a\",\"eventType\":\"CLEAN_BROKER_DATA_EVENT\"}",
            ),
            (
                Event::UpdateBrokerAddress {
                    cluster_name: Some("DefaultCluster".into()),
                    broker_name: "broker-a".into(),
                    broker_address: "10.0.0.7:30911".into(),
                    broker_id: 2,
                },
                b"\x00\x06{\"brokerAddress\":\"10.0.0.7:30911\",\"brokerId\":2,\"brokerName\":\"broker-a\",\"clusterName\":\"DefaultCluster\",\"eventType\":\"UPDATE_BROKER_ADDRESS\"}",
            ),
        ]
    }

    #[test]
    fn events_are_encoded_as_java_encodes_them_and_read_back() {
        for (event, java) in java_examples() {
            let mut out = Vec::new();
            event.encode(&mut out);
            assert_eq!(
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(java),
                "{event:?}"
            );
            assert_eq!(Event::decode(java).unwrap(), event);
        }
    }

    #[test]
    fn an_entry_holds_any_number_of_events_and_empty_is_a_barrier() {
        let events: Vec<Event> = java_examples().into_iter().map(|(e, _)| e).collect();
        let entry = encode_entry(&events);
        assert_eq!(decode_entry(&entry).unwrap(), events);
        assert!(encode_entry(&[]).is_empty());
        assert_eq!(decode_entry(&[]).unwrap(), vec![]);
    }

    #[test]
    fn damaged_events_are_errors_not_panics() {
        let (_, java) = &java_examples()[0];
        for cut in 0..java.len() {
            assert!(Event::decode(&java[..cut]).is_err(), "cut at {cut}");
        }
        assert!(Event::decode(b"\x00\x04{\"eventType\":\"READ_EVENT\"}").is_err());
        assert!(Event::decode(b"\x00\x09{}").is_err());
        // The type id and the JSON must agree.
        assert!(Event::decode(b"\x00\x01{\"brokerName\":\"a\",\"eventType\":\"ELECT_MASTER_EVENT\",\"newMasterElected\":true}").is_err());
        let entry = encode_entry(&[java_examples().remove(1).0]);
        for cut in 1..entry.len() {
            assert!(decode_entry(&entry[..cut]).is_err(), "cut at {cut}");
        }
    }
}
