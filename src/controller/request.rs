//! Typed controller requests, parsed once from a `RemotingCommand`.
//!
//! Header fields are read the way Java's `decodeCommandCustomHeaderDirectly` reads them for
//! the controller: leniently. A missing field, even one marked `@CFNotNull`, or a value that
//! does not parse as the field's type, leaves the field at its default (null, or the header
//! class's initial value such as `brokerId = -1` for 1002) and processing goes on; what a
//! handler then does with the null is the handler's (often Java's NullPointerException,
//! i.e. SYSTEM_ERROR, reproduced in `replicas`). Numbers parse as Java's `Long.parseLong` /
//! `Integer.parseInt` (no spaces), booleans as `Boolean.parseBoolean`.
//!
//! Bodies are read before anything else, as Java's processor does: a 1001 or 1006 body that
//! is not the JSON it should be is answered with SYSTEM_ERROR at once.

use super::codes::request as code;
use super::response::Response;
use crate::remoting::command::RemotingCommand;
use crate::remoting::json::{self, ValueRef};
use std::collections::BTreeSet;

/// 904 BROKER_HEARTBEAT (`BrokerHeartbeatRequestHeader`, plus rocketmq-rust's `storeReady`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Heartbeat {
    pub cluster_name: Option<String>,
    pub broker_addr: Option<String>,
    pub broker_name: Option<String>,
    pub broker_id: Option<i64>,
    pub epoch: Option<i32>,
    pub max_offset: Option<i64>,
    pub confirm_offset: Option<i64>,
    /// Sent as `heartbeatTimeoutMills` (sic).
    pub heartbeat_timeout_millis: Option<i64>,
    pub election_priority: Option<i32>,
    pub store_ready: Option<bool>,
}

/// 1001's body (`SyncStateSet`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncStateSetBody {
    /// None when the body has no `syncStateSet` member (Java's null set).
    pub sync_state_set: Option<BTreeSet<i64>>,
    /// A primitive int in Java: 0 when absent.
    pub sync_state_set_epoch: i32,
}

/// 1001 CONTROLLER_ALTER_SYNC_STATE_SET.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterSyncStateSet {
    pub broker_name: Option<String>,
    pub master_broker_id: Option<i64>,
    pub master_epoch: Option<i32>,
    /// None = no body (or a JSON null).
    pub body: Option<SyncStateSetBody>,
}

/// Who asked for an election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectTrigger {
    /// A broker electing itself, or mqadmin electMaster (designateElect=true).
    Request,
    /// The controller itself, after a master went inactive (never on the wire).
    Controller,
}

/// 1002 CONTROLLER_ELECT_MASTER (`ElectMasterRequestHeader`, with its initial values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectMaster {
    pub cluster_name: String,
    pub broker_name: String,
    pub broker_id: i64,
    pub designate_elect: bool,
    pub trigger: ElectTrigger,
}

impl ElectMaster {
    /// Java's `ElectMasterRequestHeader.ofControllerTrigger(brokerName)`.
    pub fn controller_trigger(broker_name: &str) -> ElectMaster {
        ElectMaster {
            cluster_name: String::new(),
            broker_name: broker_name.to_owned(),
            broker_id: -1,
            designate_elect: false,
            trigger: ElectTrigger::Controller,
        }
    }
}

/// 1003 CONTROLLER_REGISTER_BROKER.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterBroker {
    pub cluster_name: Option<String>,
    pub broker_name: Option<String>,
    pub broker_id: Option<i64>,
    pub broker_address: Option<String>,
}

/// 1011 CLEAN_BROKER_DATA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanBrokerData {
    pub cluster_name: Option<String>,
    pub broker_name: Option<String>,
    /// `"1;2;3"` as sent.
    pub broker_controller_ids_to_clean: Option<String>,
    pub is_clean_living_broker: bool,
}

/// 1013 CONTROLLER_APPLY_BROKER_ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyBrokerId {
    pub cluster_name: Option<String>,
    pub broker_name: Option<String>,
    pub applied_broker_id: Option<i64>,
    pub register_check_code: Option<String>,
}

/// The requests only the leader serves, in one FIFO (see `pipeline`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderRequest {
    AlterSyncStateSet(AlterSyncStateSet),
    ElectMaster(ElectMaster),
    RegisterBroker(RegisterBroker),
    GetReplicaInfo {
        broker_name: Option<String>,
    },
    GetSyncStateData {
        broker_names: Vec<String>,
    },
    CleanBrokerData(CleanBrokerData),
    GetNextBrokerId {
        cluster_name: Option<String>,
        broker_name: Option<String>,
    },
    ApplyBrokerId(ApplyBrokerId),
}

impl LeaderRequest {
    /// The request code it came as (for logs).
    pub fn code(&self) -> i32 {
        match self {
            LeaderRequest::AlterSyncStateSet(_) => code::CONTROLLER_ALTER_SYNC_STATE_SET,
            LeaderRequest::ElectMaster(_) => code::CONTROLLER_ELECT_MASTER,
            LeaderRequest::RegisterBroker(_) => code::CONTROLLER_REGISTER_BROKER,
            LeaderRequest::GetReplicaInfo { .. } => code::CONTROLLER_GET_REPLICA_INFO,
            LeaderRequest::GetSyncStateData { .. } => code::CONTROLLER_GET_SYNC_STATE_DATA,
            LeaderRequest::CleanBrokerData(_) => code::CLEAN_BROKER_DATA,
            LeaderRequest::GetNextBrokerId { .. } => code::CONTROLLER_GET_NEXT_BROKER_ID,
            LeaderRequest::ApplyBrokerId(_) => code::CONTROLLER_APPLY_BROKER_ID,
        }
    }
}

/// Everything the controller port serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControllerRequest {
    Heartbeat(Heartbeat),
    GetMetadata,
    UpdateConfig {
        body: Option<Vec<u8>>,
    },
    GetConfig,
    Leader(LeaderRequest),
    /// Any other code: REQUEST_CODE_NOT_SUPPORTED.
    Unsupported(i32),
}

/// Parses one request. `Err` is an answer to send at once (a body Java could not read).
pub fn parse(cmd: &RemotingCommand) -> Result<ControllerRequest, Response> {
    let h = Ext(cmd);
    Ok(match cmd.code {
        code::BROKER_HEARTBEAT => ControllerRequest::Heartbeat(Heartbeat {
            cluster_name: h.text("clusterName"),
            broker_addr: h.text("brokerAddr"),
            broker_name: h.text("brokerName"),
            broker_id: h.long("brokerId"),
            epoch: h.int("epoch"),
            max_offset: h.long("maxOffset"),
            confirm_offset: h.long("confirmOffset"),
            heartbeat_timeout_millis: h.long("heartbeatTimeoutMills"),
            election_priority: h.int("electionPriority"),
            store_ready: h.text("storeReady").map(|v| java_bool(&v)),
        }),
        code::CONTROLLER_GET_METADATA_INFO => ControllerRequest::GetMetadata,
        code::UPDATE_CONTROLLER_CONFIG => ControllerRequest::UpdateConfig {
            body: (!cmd.body.is_empty()).then(|| cmd.body.to_vec()),
        },
        code::GET_CONTROLLER_CONFIG => ControllerRequest::GetConfig,
        code::CONTROLLER_ALTER_SYNC_STATE_SET => {
            let body = parse_sync_state_set(&cmd.body).map_err(Response::system_error)?;
            ControllerRequest::Leader(LeaderRequest::AlterSyncStateSet(AlterSyncStateSet {
                broker_name: h.text("brokerName"),
                master_broker_id: h.long("masterBrokerId"),
                master_epoch: h.int("masterEpoch"),
                body,
            }))
        }
        code::CONTROLLER_ELECT_MASTER => {
            ControllerRequest::Leader(LeaderRequest::ElectMaster(ElectMaster {
                cluster_name: h.text("clusterName").unwrap_or_default(),
                broker_name: h.text("brokerName").unwrap_or_default(),
                broker_id: h.long("brokerId").unwrap_or(-1),
                designate_elect: h.text("designateElect").is_some_and(|v| java_bool(&v)),
                trigger: ElectTrigger::Request,
            }))
        }
        code::CONTROLLER_REGISTER_BROKER => {
            ControllerRequest::Leader(LeaderRequest::RegisterBroker(RegisterBroker {
                cluster_name: h.text("clusterName"),
                broker_name: h.text("brokerName"),
                broker_id: h.long("brokerId"),
                broker_address: h.text("brokerAddress"),
            }))
        }
        code::CONTROLLER_GET_REPLICA_INFO => {
            ControllerRequest::Leader(LeaderRequest::GetReplicaInfo {
                broker_name: h.text("brokerName"),
            })
        }
        code::CONTROLLER_GET_SYNC_STATE_DATA => {
            let broker_names = parse_broker_names(&cmd.body)?;
            ControllerRequest::Leader(LeaderRequest::GetSyncStateData { broker_names })
        }
        code::CLEAN_BROKER_DATA => {
            ControllerRequest::Leader(LeaderRequest::CleanBrokerData(CleanBrokerData {
                cluster_name: h.text("clusterName"),
                broker_name: h.text("brokerName"),
                broker_controller_ids_to_clean: h.text("brokerControllerIdsToClean"),
                is_clean_living_broker: h
                    .text("isCleanLivingBroker")
                    .is_some_and(|v| java_bool(&v)),
            }))
        }
        code::CONTROLLER_GET_NEXT_BROKER_ID => {
            ControllerRequest::Leader(LeaderRequest::GetNextBrokerId {
                cluster_name: h.text("clusterName"),
                broker_name: h.text("brokerName"),
            })
        }
        code::CONTROLLER_APPLY_BROKER_ID => {
            ControllerRequest::Leader(LeaderRequest::ApplyBrokerId(ApplyBrokerId {
                cluster_name: h.text("clusterName"),
                broker_name: h.text("brokerName"),
                applied_broker_id: h.long("appliedBrokerId"),
                register_check_code: h.text("registerCheckCode"),
            }))
        }
        other => ControllerRequest::Unsupported(other),
    })
}

/// Lenient ext-field reader (see the module doc).
struct Ext<'a>(&'a RemotingCommand);

impl Ext<'_> {
    fn text(&self, key: &str) -> Option<String> {
        self.0.ext(key).map(str::to_owned)
    }

    fn long(&self, key: &str) -> Option<i64> {
        let value = self.0.ext(key)?;
        let parsed = java_parse_long(value);
        if parsed.is_none() {
            log::debug!("controller: header field {key}={value:?} is not a long; left null");
        }
        parsed
    }

    fn int(&self, key: &str) -> Option<i32> {
        self.long(key).and_then(|v| i32::try_from(v).ok())
    }
}

/// Java's `Long.parseLong`: optional sign, ASCII digits, no spaces, within range.
pub fn java_parse_long(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Java's `Boolean.parseBoolean`: true iff "true" in any case.
pub fn java_bool(text: &str) -> bool {
    text.eq_ignore_ascii_case("true")
}

fn body_limits(body: &[u8]) -> json::Limits {
    json::Limits {
        max_depth: 8,
        max_string_len: body.len().max(1),
    }
}

/// 1001's body: absent or `null` -> None; otherwise `{"syncStateSet":[ids],"syncStateSetEpoch":n}`.
fn parse_sync_state_set(body: &[u8]) -> Result<Option<SyncStateSetBody>, String> {
    if body.is_empty() {
        return Ok(None);
    }
    let doc = json::parse_borrowed(body, &body_limits(body))
        .map_err(|e| format!("SyncStateSet body: {e}"))?;
    let root = doc.root();
    if root.is_null() {
        return Ok(None);
    }
    if root.members().is_none() {
        return Err("SyncStateSet body is not a JSON object".into());
    }
    let sync_state_set = match root.get("syncStateSet").filter(|v| !v.is_null()) {
        None => None,
        Some(v) => Some(read_ids(v).ok_or("syncStateSet is not an array of broker ids")?),
    };
    let sync_state_set_epoch = match root.get("syncStateSetEpoch").filter(|v| !v.is_null()) {
        None => 0,
        Some(v) => v.as_i32().ok_or("syncStateSetEpoch is not an int")?,
    };
    Ok(Some(SyncStateSetBody {
        sync_state_set,
        sync_state_set_epoch,
    }))
}

fn read_ids(v: ValueRef<'_>) -> Option<BTreeSet<i64>> {
    v.items()?.map(|item| item.as_i64()).collect()
}

/// 1006's body: a JSON array of broker names. Absent, `null` or empty answers Java's
/// "not set any response code"; anything else that is not a list of strings is an error.
fn parse_broker_names(body: &[u8]) -> Result<Vec<String>, Response> {
    if body.is_empty() {
        return Err(Response::not_set());
    }
    let doc = json::parse_borrowed(body, &body_limits(body))
        .map_err(|e| Response::system_error(format!("broker name list: {e}")))?;
    let root = doc.root();
    if root.is_null() {
        return Err(Response::not_set());
    }
    let items = root
        .items()
        .ok_or_else(|| Response::system_error("broker name list is not a JSON array"))?;
    let mut names = Vec::with_capacity(items.len());
    for item in items {
        match item.as_str() {
            Some(name) => names.push(name.to_owned()),
            None => {
                return Err(Response::system_error(format!(
                    "broker name list holds a non-string: {}",
                    item.to_text()
                )))
            }
        }
    }
    if names.is_empty() {
        return Err(Response::not_set());
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::command::SerializeType;
    use bytes::Bytes;

    fn cmd(code: i32, ext: &[(&str, &str)], body: &[u8]) -> RemotingCommand {
        RemotingCommand {
            code,
            language: 0,
            version: 479,
            opaque: 1,
            flag: 0,
            remark: None,
            ext_fields: ext
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: Bytes::copy_from_slice(body),
            serialize_type: SerializeType::Json,
        }
    }

    #[test]
    fn numbers_parse_like_java_and_bad_ones_stay_null() {
        assert_eq!(java_parse_long("+7"), Some(7));
        assert_eq!(java_parse_long("-7"), Some(-7));
        assert_eq!(java_parse_long(" 7"), None);
        assert_eq!(java_parse_long("7.0"), None);
        assert_eq!(java_parse_long(""), None);
        assert_eq!(java_parse_long("-"), None);
        assert_eq!(java_parse_long("9223372036854775808"), None);
        let ControllerRequest::Heartbeat(hb) = parse(&cmd(
            904,
            &[
                ("brokerId", "x"),
                ("epoch", "4294967296"),
                ("maxOffset", "12"),
            ],
            b"",
        ))
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            (hb.broker_id, hb.epoch, hb.max_offset),
            (None, None, Some(12))
        );
    }

    #[test]
    fn elect_master_keeps_the_java_initial_values_for_missing_or_bad_fields() {
        let parsed = parse(&cmd(1002, &[("brokerId", "abc")], b"")).unwrap();
        assert_eq!(
            parsed,
            ControllerRequest::Leader(LeaderRequest::ElectMaster(ElectMaster {
                cluster_name: String::new(),
                broker_name: String::new(),
                broker_id: -1,
                designate_elect: false,
                trigger: ElectTrigger::Request,
            }))
        );
        let parsed = parse(&cmd(
            1002,
            &[("designateElect", "TRUE"), ("brokerId", "3")],
            b"",
        ))
        .unwrap();
        let ControllerRequest::Leader(LeaderRequest::ElectMaster(e)) = parsed else {
            panic!()
        };
        assert!(e.designate_elect);
        assert_eq!(e.broker_id, 3);
    }

    #[test]
    fn sync_state_set_bodies() {
        let parsed = parse(&cmd(
            1001,
            &[],
            b"{\"syncStateSet\":[2,1,\"3\"],\"syncStateSetEpoch\":4}",
        ))
        .unwrap();
        let ControllerRequest::Leader(LeaderRequest::AlterSyncStateSet(a)) = parsed else {
            panic!()
        };
        let body = a.body.unwrap();
        assert_eq!(
            body.sync_state_set.unwrap().into_iter().collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert_eq!(body.sync_state_set_epoch, 4);
        let ControllerRequest::Leader(LeaderRequest::AlterSyncStateSet(a)) =
            parse(&cmd(1001, &[], b"")).unwrap()
        else {
            panic!()
        };
        assert_eq!(a.body, None);
        let ControllerRequest::Leader(LeaderRequest::AlterSyncStateSet(a)) =
            parse(&cmd(1001, &[], b"{}")).unwrap()
        else {
            panic!()
        };
        assert_eq!(a.body.unwrap().sync_state_set, None);
        for bad in [
            &b"{"[..],
            b"[1]",
            b"{\"syncStateSet\":[null]}",
            b"{\"syncStateSet\":[\"x\"]}",
        ] {
            assert_eq!(parse(&cmd(1001, &[], bad)).unwrap_err().code, 1, "{bad:?}");
        }
    }

    #[test]
    fn broker_name_lists() {
        let ControllerRequest::Leader(LeaderRequest::GetSyncStateData { broker_names }) =
            parse(&cmd(1006, &[], b"[\"a\",\"b\"]")).unwrap()
        else {
            panic!()
        };
        assert_eq!(broker_names, vec!["a", "b"]);
        for empty in [&b""[..], b"null", b"[]"] {
            let r = parse(&cmd(1006, &[], empty)).unwrap_err();
            assert_eq!(
                (r.code, r.remark.as_deref()),
                (1, Some("not set any response code"))
            );
        }
        for bad in [&b"x"[..], b"{}", b"[1]", b"[null]"] {
            let r = parse(&cmd(1006, &[], bad)).unwrap_err();
            assert_eq!(r.code, 1);
            assert_ne!(r.remark.as_deref(), Some("not set any response code"));
        }
    }

    #[test]
    fn other_codes_are_unsupported() {
        assert_eq!(
            parse(&cmd(105, &[], b"")).unwrap(),
            ControllerRequest::Unsupported(105)
        );
        assert_eq!(
            parse(&cmd(1007, &[], b"")).unwrap(),
            ControllerRequest::Unsupported(1007)
        );
        assert_eq!(
            parse(&cmd(1008, &[], b"")).unwrap(),
            ControllerRequest::Unsupported(1008)
        );
    }
}
