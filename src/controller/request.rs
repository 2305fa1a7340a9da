//! Typed controller requests, parsed once from a `RemotingCommand` and written by the
//! senders (`rmq-admin`, `rmq-bench controller`) with [`ControllerRequest::encode`].
//! Headers are read leniently, as Java's controller reads them (docs/controller.md,
//! "Requests"): a missing or unparsable field stays at its default and `replicas` decides.
//! What Java does not bound is bounded here, before anything is parsed: each code's body
//! length, and every name and address by the name server's rules ([`check_names`]).

use super::codes::request as code;
use super::response::Response;
use crate::remoting::command::RemotingCommand;
use crate::remoting::json::{self, Field, ValueRef};
use crate::request::field::{BROKER_ADDR, BROKER_ID, BROKER_NAME, CLUSTER_NAME};
use crate::request::{Encoded, NameLimits, ParseError, MAX_CONFIG_UPDATE_BYTES};
use field::*;
use std::collections::BTreeSet;

/// The controller's own header field names (shared ones are `crate::request::field`'s).
pub mod field {
    // Requests (the ones only one header reads are written there).
    pub const MASTER_BROKER_ID: &str = "masterBrokerId";
    pub const MASTER_EPOCH: &str = "masterEpoch";
    pub const DESIGNATE_ELECT: &str = "designateElect";
    pub const BROKER_ADDRESS: &str = "brokerAddress";
    pub const INVOKE_TIME: &str = "invokeTime";
    pub const REGISTER_CHECK_CODE: &str = "registerCheckCode";
    // 1001's body (`SyncStateSet`).
    pub const SYNC_STATE_SET: &str = "syncStateSet";
    pub const SYNC_STATE_SET_EPOCH: &str = "syncStateSetEpoch";
    // Answers (1005's raft* fields are rmq-namesrv's additions).
    pub const NEW_SYNC_STATE_SET_EPOCH: &str = "newSyncStateSetEpoch";
    pub const MASTER_ADDRESS: &str = "masterAddress";
    pub const NEXT_BROKER_ID: &str = "nextBrokerId";
    pub const GROUP: &str = "group";
    pub const PEERS: &str = "peers";
    pub const CONTROLLER_LEADER_ID: &str = "controllerLeaderId";
    pub const CONTROLLER_LEADER_ADDRESS: &str = "controllerLeaderAddress";
    pub const IS_LEADER: &str = "isLeader";
    pub const RAFT_ROLE: &str = "raftRole";
    pub const RAFT_TERM: &str = "raftTerm";
}

/// A header field as Java's lenient decoder reads it, and its text as senders write it.
trait HeaderField: Sized {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Self;
    fn text(&self) -> Option<String>;

    fn write(&self, e: &mut Encoded<'_>, key: &'static str) {
        if let Some(text) = self.text() {
            e.put_value(key, text);
        }
    }
}

impl HeaderField for Option<String> {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Self {
        cmd.ext(key).map(str::to_owned)
    }

    fn text(&self) -> Option<String> {
        self.clone()
    }
}

impl HeaderField for Option<i64> {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Self {
        let value = cmd.ext(key)?;
        let parsed = java_parse_long(value);
        if parsed.is_none() {
            log::debug!("controller: header field {key}={value:?} is not a long; left null");
        }
        parsed
    }

    fn text(&self) -> Option<String> {
        self.map(|v| v.to_string())
    }
}

impl HeaderField for Option<i32> {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Self {
        Option::<i64>::read(cmd, key).and_then(|v| i32::try_from(v).ok())
    }

    fn text(&self) -> Option<String> {
        self.map(|v| v.to_string())
    }
}

impl HeaderField for Option<bool> {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Self {
        cmd.ext(key).map(java_bool)
    }

    fn text(&self) -> Option<String> {
        self.map(|v| v.to_string())
    }
}

/// A Java `boolean` field: false when absent, always written.
impl HeaderField for bool {
    fn read(cmd: &RemotingCommand, key: &'static str) -> Self {
        cmd.ext(key).is_some_and(java_bool)
    }

    fn text(&self) -> Option<String> {
        Some(self.to_string())
    }
}

/// Declares a typed header (fields in the order senders write them) and its parse and encode.
macro_rules! header {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident: $ty:ty = $key:expr,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: $ty,)*
        }

        impl $name {
            fn read(cmd: &RemotingCommand) -> Self {
                $name { $($field: HeaderField::read(cmd, $key),)* }
            }

            fn write(&self, e: &mut Encoded<'_>) {
                $(self.$field.write(e, $key);)*
            }
        }
    };
}

header! {
    /// 904 BROKER_HEARTBEAT (`BrokerHeartbeatRequestHeader`, plus rocketmq-rust's `storeReady`).
    Heartbeat {
        cluster_name: Option<String> = CLUSTER_NAME,
        broker_addr: Option<String> = BROKER_ADDR,
        broker_name: Option<String> = BROKER_NAME,
        broker_id: Option<i64> = BROKER_ID,
        epoch: Option<i32> = "epoch",
        max_offset: Option<i64> = "maxOffset",
        confirm_offset: Option<i64> = "confirmOffset",
        heartbeat_timeout_millis: Option<i64> = "heartbeatTimeoutMills", // sic, Java's spelling
        election_priority: Option<i32> = "electionPriority",
        store_ready: Option<bool> = "storeReady",
    }
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

/// 1002 CONTROLLER_ELECT_MASTER (`ElectMasterRequestHeader`, with its initial values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectMaster {
    pub cluster_name: String,
    pub broker_name: String,
    pub broker_id: i64,
    pub designate_elect: bool,
}

impl ElectMaster {
    /// Java's `ElectMasterRequestHeader.ofControllerTrigger(brokerName)`.
    pub fn controller_trigger(broker_name: &str) -> ElectMaster {
        ElectMaster {
            cluster_name: String::new(),
            broker_name: broker_name.to_owned(),
            broker_id: -1,
            designate_elect: false,
        }
    }
}

header! {
    /// 1003 CONTROLLER_REGISTER_BROKER.
    RegisterBroker {
        cluster_name: Option<String> = CLUSTER_NAME,
        broker_name: Option<String> = BROKER_NAME,
        broker_id: Option<i64> = BROKER_ID,
        broker_address: Option<String> = BROKER_ADDRESS,
    }
}

header! {
    /// 1011 CLEAN_BROKER_DATA.
    CleanBrokerData {
        broker_name: Option<String> = BROKER_NAME,
        is_clean_living_broker: bool = "isCleanLivingBroker",
        cluster_name: Option<String> = CLUSTER_NAME,
        broker_controller_ids_to_clean: Option<String> = "brokerControllerIdsToClean",
    }
}

header! {
    /// 1012 CONTROLLER_GET_NEXT_BROKER_ID.
    GetNextBrokerId {
        cluster_name: Option<String> = CLUSTER_NAME,
        broker_name: Option<String> = BROKER_NAME,
    }
}

header! {
    /// 1013 CONTROLLER_APPLY_BROKER_ID.
    ApplyBrokerId {
        cluster_name: Option<String> = CLUSTER_NAME,
        broker_name: Option<String> = BROKER_NAME,
        applied_broker_id: Option<i64> = "appliedBrokerId",
        register_check_code: Option<String> = REGISTER_CHECK_CODE,
    }
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
        /// Distinct and sorted: a name repeated in the request is looked up once.
        broker_names: Vec<String>,
    },
    CleanBrokerData(CleanBrokerData),
    GetNextBrokerId(GetNextBrokerId),
    ApplyBrokerId(ApplyBrokerId),
}

impl LeaderRequest {
    pub fn code(&self) -> i32 {
        match self {
            LeaderRequest::AlterSyncStateSet(_) => code::CONTROLLER_ALTER_SYNC_STATE_SET,
            LeaderRequest::ElectMaster(_) => code::CONTROLLER_ELECT_MASTER,
            LeaderRequest::RegisterBroker(_) => code::CONTROLLER_REGISTER_BROKER,
            LeaderRequest::GetReplicaInfo { .. } => code::CONTROLLER_GET_REPLICA_INFO,
            LeaderRequest::GetSyncStateData { .. } => code::CONTROLLER_GET_SYNC_STATE_DATA,
            LeaderRequest::CleanBrokerData(_) => code::CLEAN_BROKER_DATA,
            LeaderRequest::GetNextBrokerId(_) => code::CONTROLLER_GET_NEXT_BROKER_ID,
            LeaderRequest::ApplyBrokerId(_) => code::CONTROLLER_APPLY_BROKER_ID,
        }
    }
}

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

impl ControllerRequest {
    pub fn code(&self) -> i32 {
        match self {
            ControllerRequest::Heartbeat(_) => code::BROKER_HEARTBEAT,
            ControllerRequest::GetMetadata => code::CONTROLLER_GET_METADATA_INFO,
            ControllerRequest::UpdateConfig { .. } => code::UPDATE_CONTROLLER_CONFIG,
            ControllerRequest::GetConfig => code::GET_CONTROLLER_CONFIG,
            ControllerRequest::Leader(l) => l.code(),
            ControllerRequest::Unsupported(c) => *c,
        }
    }

    /// The request as a broker or `mqadmin` writes it; [`parse`] gives it back.
    pub fn encode(&self) -> Encoded<'_> {
        let mut e = Encoded::new(self.code());
        match self {
            ControllerRequest::Heartbeat(h) => h.write(&mut e),
            ControllerRequest::UpdateConfig { body } => {
                e.body = body.as_deref().unwrap_or_default().into();
            }
            ControllerRequest::Leader(l) => l.encode(&mut e),
            ControllerRequest::GetMetadata
            | ControllerRequest::GetConfig
            | ControllerRequest::Unsupported(_) => {}
        }
        e
    }
}

/// A `SyncStateSet` (1001's body, and the body of 1001, 1003, 1004 and 1008 answers):
/// `{"syncStateSet":[ids],"syncStateSetEpoch":n}`, as Java's fastjson writes it.
pub fn sync_state_set_json(set: Option<&BTreeSet<i64>>, epoch: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(48 + set.map_or(0, |s| s.len() * 4));
    let mut object = json::Seq::object(&mut out);
    if let Some(ids) = set {
        let mut array = json::Seq::array(object.key(SYNC_STATE_SET));
        for id in ids {
            json::write_i64(array.item(), *id);
        }
        array.end();
    }
    json::write_i64(object.key(SYNC_STATE_SET_EPOCH), i64::from(epoch));
    object.end();
    out
}

impl LeaderRequest {
    fn encode<'a>(&'a self, e: &mut Encoded<'a>) {
        match self {
            LeaderRequest::AlterSyncStateSet(a) => {
                a.broker_name.write(e, BROKER_NAME);
                a.master_broker_id.write(e, MASTER_BROKER_ID);
                a.master_epoch.write(e, MASTER_EPOCH);
                if let Some(b) = &a.body {
                    e.body = sync_state_set_json(b.sync_state_set.as_ref(), b.sync_state_set_epoch)
                        .into();
                }
            }
            LeaderRequest::ElectMaster(m) => {
                e.put(CLUSTER_NAME, &m.cluster_name);
                e.put(BROKER_NAME, &m.broker_name);
                e.put_value(BROKER_ID, m.broker_id);
                e.put_value(DESIGNATE_ELECT, m.designate_elect);
            }
            LeaderRequest::RegisterBroker(r) => r.write(e),
            LeaderRequest::GetReplicaInfo { broker_name } => broker_name.write(e, BROKER_NAME),
            LeaderRequest::GetSyncStateData { broker_names } => {
                let names = broker_names.iter().map(|n| json::Value::Str(n.clone()));
                let mut out = Vec::new();
                json::write_value(&mut out, &json::Value::Array(names.collect()));
                e.body = out.into();
            }
            LeaderRequest::CleanBrokerData(c) => c.write(e),
            LeaderRequest::GetNextBrokerId(n) => n.write(e),
            LeaderRequest::ApplyBrokerId(a) => a.write(e),
        }
    }
}

/// The longest 1001 body: a set of `MAX_IDS_PER_BROKER_SET` ids of 20 digits fits 3 times.
pub const MAX_SYNC_STATE_SET_BODY: usize = 64 * 1024;
/// The longest 1006 body: thousands of broker-set names (`mqadmin getSyncStateSet -c` names a
/// cluster's); reading the worst case, 32,768 distinct one-letter names, takes ~2 ms.
pub const MAX_BROKER_NAME_LIST_BODY: usize = 128 * 1024;
/// The longest body of the codes that read none (Java's send none).
pub const MAX_UNREAD_BODY: usize = 64 * 1024;

/// A served code's longest body and what the sender should do instead (None: not served).
fn body_bound(request_code: i32) -> Option<(usize, &'static str)> {
    Some(match request_code {
        code::UPDATE_CONTROLLER_CONFIG => (MAX_CONFIG_UPDATE_BYTES, "send fewer keys at a time"),
        code::CONTROLLER_ALTER_SYNC_STATE_SET => (MAX_SYNC_STATE_SET_BODY, "too many ids"),
        code::CONTROLLER_GET_SYNC_STATE_DATA => (
            MAX_BROKER_NAME_LIST_BODY,
            "ask for fewer broker sets at a time",
        ),
        code::GET_BROKER_EPOCH_CACHE | code::NOTIFY_BROKER_ROLE_CHANGED => return None,
        code::BROKER_HEARTBEAT
        | code::CONTROLLER_ALTER_SYNC_STATE_SET..=code::CONTROLLER_APPLY_BROKER_ID => {
            (MAX_UNREAD_BODY, "this request takes no body")
        }
        _ => return None,
    })
}

/// Parses one request. `Err` is an answer to send at once: a body over its code's bound, a
/// name or address the name server would refuse, or a body Java could not read.
pub fn parse(cmd: &RemotingCommand, limits: &NameLimits) -> Result<ControllerRequest, Response> {
    let Some((max_body, instead)) = body_bound(cmd.code) else {
        return Ok(ControllerRequest::Unsupported(cmd.code));
    };
    if cmd.body.len() > max_body {
        let (what, len) = (super::codes::request_name(cmd.code), cmd.body.len());
        return Err(Response::system_error(format!(
            "bad {what} body: {len} bytes, more than {max_body}; {instead}"
        )));
    }
    check_names(cmd, limits)?;
    parse_fields(cmd, limits)
}

/// An admin's change, which the name server's `adminAllowList` gates (read before anything
/// else of the request): 1009, 1011 and mqadmin's 1002 (`electMaster`, `designateElect=true`).
/// A broker's own 1002 and every other code are brokers' requests or reads.
pub fn is_admin_write(cmd: &RemotingCommand) -> bool {
    match cmd.code {
        code::UPDATE_CONTROLLER_CONFIG | code::CLEAN_BROKER_DATA => true,
        code::CONTROLLER_ELECT_MASTER => bool::read(cmd, DESIGNATE_ELECT),
        _ => false,
    }
}

/// Every cluster, broker-set and broker name and every address in a request's header, by the
/// name server's rules and its `maxNameLength` (docs/operations.md, "Values checked at the
/// wire"), so that none a broker could not have sent reaches the tables, the log or a reply.
pub fn check_names(cmd: &RemotingCommand, limits: &NameLimits) -> Result<(), Response> {
    let refuse = |e: ParseError| Response::system_error(e.to_string());
    for field in [CLUSTER_NAME, BROKER_NAME] {
        if let Some(name) = cmd.ext(field) {
            limits.check_broker_name(field, name).map_err(refuse)?;
        }
    }
    for field in [BROKER_ADDR, BROKER_ADDRESS] {
        if let Some(address) = cmd.ext(field) {
            limits.check_address(field, address).map_err(refuse)?;
        }
    }
    // A broker writes `address;registerTimeMillis` (only separators: Java's own answer).
    let check_code = cmd.ext(REGISTER_CHECK_CODE);
    if let Some(check_code) = check_code.filter(|c| !c.bytes().all(|b| b == b';')) {
        let (address, time) = check_code.split_once(';').unwrap_or((check_code, ""));
        limits
            .check_address(REGISTER_CHECK_CODE, address)
            .map_err(refuse)?;
        if time.len() > 32 {
            return Err(Response::system_error(format!(
                "{REGISTER_CHECK_CODE} is longer than its address and 32 more bytes"
            )));
        }
    }
    Ok(())
}

fn parse_fields(cmd: &RemotingCommand, limits: &NameLimits) -> Result<ControllerRequest, Response> {
    let text = |key| Option::<String>::read(cmd, key);
    let leader = match cmd.code {
        code::BROKER_HEARTBEAT => return Ok(ControllerRequest::Heartbeat(Heartbeat::read(cmd))),
        code::CONTROLLER_GET_METADATA_INFO => return Ok(ControllerRequest::GetMetadata),
        code::UPDATE_CONTROLLER_CONFIG => {
            let body = (!cmd.body.is_empty()).then(|| cmd.body.to_vec());
            return Ok(ControllerRequest::UpdateConfig { body });
        }
        code::GET_CONTROLLER_CONFIG => return Ok(ControllerRequest::GetConfig),
        code::CONTROLLER_ALTER_SYNC_STATE_SET => {
            let body = parse_sync_state_set(&cmd.body).map_err(Response::system_error)?;
            LeaderRequest::AlterSyncStateSet(AlterSyncStateSet {
                broker_name: text(BROKER_NAME),
                master_broker_id: HeaderField::read(cmd, MASTER_BROKER_ID),
                master_epoch: HeaderField::read(cmd, MASTER_EPOCH),
                body,
            })
        }
        code::CONTROLLER_ELECT_MASTER => LeaderRequest::ElectMaster(ElectMaster {
            cluster_name: text(CLUSTER_NAME).unwrap_or_default(),
            broker_name: text(BROKER_NAME).unwrap_or_default(),
            broker_id: Option::<i64>::read(cmd, BROKER_ID).unwrap_or(-1),
            designate_elect: HeaderField::read(cmd, DESIGNATE_ELECT),
        }),
        code::CONTROLLER_REGISTER_BROKER => {
            LeaderRequest::RegisterBroker(RegisterBroker::read(cmd))
        }
        code::CONTROLLER_GET_REPLICA_INFO => LeaderRequest::GetReplicaInfo {
            broker_name: text(BROKER_NAME),
        },
        code::CONTROLLER_GET_SYNC_STATE_DATA => LeaderRequest::GetSyncStateData {
            broker_names: parse_broker_names(&cmd.body, limits)?,
        },
        code::CLEAN_BROKER_DATA => LeaderRequest::CleanBrokerData(CleanBrokerData::read(cmd)),
        code::CONTROLLER_GET_NEXT_BROKER_ID => {
            LeaderRequest::GetNextBrokerId(GetNextBrokerId::read(cmd))
        }
        code::CONTROLLER_APPLY_BROKER_ID => LeaderRequest::ApplyBrokerId(ApplyBrokerId::read(cmd)),
        other => return Ok(ControllerRequest::Unsupported(other)),
    };
    Ok(ControllerRequest::Leader(leader))
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

/// Limits for the controller's small JSON documents (bodies, events, snapshots).
pub(crate) fn body_limits(body: &[u8]) -> json::Limits {
    json::Limits {
        max_depth: 8,
        max_string_len: body.len().max(1),
    }
}

/// 1001's body: absent or `null` -> None.
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
    let sync_state_set = match root.get(SYNC_STATE_SET).filter(|v| !v.is_null()) {
        None => None,
        Some(v) => Some(read_ids(v).ok_or("syncStateSet is not an array of broker ids")?),
    };
    let sync_state_set_epoch = match root.get(SYNC_STATE_SET_EPOCH).filter(|v| !v.is_null()) {
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

/// 1006's body: a JSON array of broker names, each distinct one kept once and checked as
/// [`check_names`] checks a header's. Absent, `null` or empty answers Java's "not set any
/// response code"; anything else that is not a list of strings is an error.
fn parse_broker_names(body: &[u8], limits: &NameLimits) -> Result<Vec<String>, Response> {
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
    let mut names = BTreeSet::new();
    for item in items {
        let Some(name) = item.as_str() else {
            let remark = format!("broker name list holds a non-string: {}", item.to_text());
            return Err(Response::system_error(remark));
        };
        names.insert(name);
    }
    if names.is_empty() {
        return Err(Response::not_set());
    }
    for name in &names {
        limits
            .check_broker_name("a broker name in the list", name)
            .map_err(|e| Response::system_error(e.to_string()))?;
    }
    Ok(names.into_iter().map(str::to_owned).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::command::SerializeType;
    use bytes::Bytes;

    fn parse(cmd: &RemotingCommand) -> Result<ControllerRequest, Response> {
        let limits = NameLimits::from_config(&crate::config::NamesrvConfig::default());
        super::parse(cmd, &limits)
    }

    fn refusal(code: i32, fields: &[(&str, &str)], body: &[u8]) -> String {
        let r = parse(&RemotingCommand::for_test(code, fields, body)).unwrap_err();
        assert_eq!(r.code, 1);
        r.remark.unwrap_or_default()
    }

    #[test]
    fn bodies_longer_than_their_code_takes_are_refused_with_the_bound() {
        let config = format!("a={}\n", "x".repeat(MAX_CONFIG_UPDATE_BYTES));
        assert_eq!(
            refusal(1009, &[], config.as_bytes()),
            "bad UPDATE_CONTROLLER_CONFIG body: 16387 bytes, more than 16384; send fewer keys at a time"
        );
        let names = format!("[{}\"a\"]", "\"a\",".repeat(MAX_BROKER_NAME_LIST_BODY / 4));
        assert!(refusal(1006, &[], names.as_bytes()).starts_with(
            "bad CONTROLLER_GET_SYNC_STATE_DATA body: 131077 bytes, more than 131072"
        ));
        let ids = vec![b' '; MAX_SYNC_STATE_SET_BODY + 1];
        assert!(refusal(1001, &[], &ids).contains("more than 65536"));
        let unread = vec![0; MAX_UNREAD_BODY + 1];
        assert!(refusal(1013, &[], &unread).ends_with("this request takes no body"));
        // At the bound: read as before.
        let fits = format!("a={}\n", "x".repeat(MAX_CONFIG_UPDATE_BYTES - 3));
        let request = parse(&RemotingCommand::for_test(1009, &[], fits.as_bytes()));
        assert!(matches!(
            request,
            Ok(ControllerRequest::UpdateConfig { .. })
        ));
        // Codes not served stay "not supported", whatever they carry.
        let big = RemotingCommand::for_test(1008, &[], &unread);
        assert_eq!(parse(&big), Ok(ControllerRequest::Unsupported(1008)));
    }

    #[test]
    fn names_and_addresses_obey_the_name_servers_rules_on_every_code() {
        let long = "b".repeat(256);
        for code in [904, 1001, 1002, 1003, 1004, 1011, 1012, 1013] {
            assert_eq!(
                refusal(code, &[("brokerName", &long)], b""),
                "brokerName is longer than 255 bytes",
                "{code}"
            );
            assert_eq!(
                refusal(code, &[("clusterName", "a b")], b""),
                "clusterName contains ' '; allowed: A-Z a-z 0-9 and . _ - % |"
            );
        }
        assert_eq!(
            refusal(904, &[("brokerAddr", "10.0.0.1")], b""),
            "brokerAddr \"10.0.0.1\" is not host:port: no port"
        );
        assert!(
            refusal(1003, &[("brokerAddress", &long)], b"").starts_with("brokerAddress is longer")
        );
        assert_eq!(
            refusal(1013, &[("registerCheckCode", ";1700000000000")], b""),
            "registerCheckCode \"\" is not host:port: no port"
        );
        let late = format!("10.0.0.1:30911;{}", "1".repeat(33));
        assert!(refusal(1013, &[("registerCheckCode", &late)], b"").contains("32 more bytes"));
        let broker = [
            ("clusterName", "DefaultCluster"),
            ("brokerName", "broker-a"),
            ("brokerAddr", "[::1]:30911"),
            ("registerCheckCode", "broker-a.svc:30911;1700000000000"),
        ];
        assert!(parse(&RemotingCommand::for_test(904, &broker, b"")).is_ok());
        assert!(parse(&RemotingCommand::for_test(1013, &broker, b"")).is_ok());
    }

    #[test]
    fn a_name_listed_many_times_is_read_once() {
        let body = format!("[{}\"b\",\"a\"]", "\"b\",".repeat(20_000));
        let ControllerRequest::Leader(LeaderRequest::GetSyncStateData { broker_names }) =
            parse(&RemotingCommand::for_test(1006, &[], body.as_bytes())).unwrap()
        else {
            panic!()
        };
        assert_eq!(broker_names, ["a", "b"]);
        assert_eq!(
            refusal(1006, &[], b"[\"a\",\"x\\\"y\"]"),
            "a broker name in the list contains '\"'; allowed: A-Z a-z 0-9 and . _ - % |"
        );
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
        let ControllerRequest::Heartbeat(hb) = parse(&RemotingCommand::for_test(
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
    fn admin_writes_are_1009_1011_and_an_election_designating_a_master() {
        let cmd = |code, ext: &[(&str, &str)]| RemotingCommand::for_test(code, ext, b"");
        assert!(is_admin_write(&cmd(1009, &[])));
        assert!(is_admin_write(&cmd(1011, &[])));
        assert!(is_admin_write(&cmd(1002, &[("designateElect", "TRUE")])));
        // A broker's own election, reads and brokers' requests.
        assert!(!is_admin_write(&cmd(1002, &[("brokerId", "1")])));
        assert!(!is_admin_write(&cmd(1002, &[("designateElect", "false")])));
        for code in [904, 1001, 1003, 1004, 1005, 1006, 1010, 1012, 1013] {
            assert!(!is_admin_write(&cmd(code, &[])), "{code}");
        }
    }

    #[test]
    fn elect_master_keeps_the_java_initial_values_for_missing_or_bad_fields() {
        let parsed = parse(&RemotingCommand::for_test(
            1002,
            &[("brokerId", "abc")],
            b"",
        ))
        .unwrap();
        assert_eq!(
            parsed,
            ControllerRequest::Leader(LeaderRequest::ElectMaster(ElectMaster {
                cluster_name: String::new(),
                broker_name: String::new(),
                broker_id: -1,
                designate_elect: false,
            }))
        );
        let parsed = parse(&RemotingCommand::for_test(
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
        let parsed = parse(&RemotingCommand::for_test(
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
            parse(&RemotingCommand::for_test(1001, &[], b"")).unwrap()
        else {
            panic!()
        };
        assert_eq!(a.body, None);
        let ControllerRequest::Leader(LeaderRequest::AlterSyncStateSet(a)) =
            parse(&RemotingCommand::for_test(1001, &[], b"{}")).unwrap()
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
            assert_eq!(
                parse(&RemotingCommand::for_test(1001, &[], bad))
                    .unwrap_err()
                    .code,
                1,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn broker_name_lists() {
        let ControllerRequest::Leader(LeaderRequest::GetSyncStateData { broker_names }) =
            parse(&RemotingCommand::for_test(1006, &[], b"[\"a\",\"b\"]")).unwrap()
        else {
            panic!()
        };
        assert_eq!(broker_names, vec!["a", "b"]);
        for empty in [&b""[..], b"null", b"[]"] {
            let r = parse(&RemotingCommand::for_test(1006, &[], empty)).unwrap_err();
            assert_eq!(
                (r.code, r.remark.as_deref()),
                (1, Some("not set any response code"))
            );
        }
        for bad in [&b"x"[..], b"{}", b"[1]", b"[null]"] {
            let r = parse(&RemotingCommand::for_test(1006, &[], bad)).unwrap_err();
            assert_eq!(r.code, 1);
            assert_ne!(r.remark.as_deref(), Some("not set any response code"));
        }
    }

    /// One request of every code the controller port serves, every field set.
    fn one_of_each() -> Vec<ControllerRequest> {
        let text = |s: &str| Some(s.to_string());
        let leader = |l| ControllerRequest::Leader(l);
        vec![
            ControllerRequest::Heartbeat(Heartbeat {
                cluster_name: text("c"),
                broker_addr: text("10.0.0.1:30911"),
                broker_name: text("b"),
                broker_id: Some(2),
                epoch: Some(3),
                max_offset: Some(4_000_000_000),
                confirm_offset: Some(5),
                heartbeat_timeout_millis: Some(10_000),
                election_priority: Some(-1),
                store_ready: Some(true),
            }),
            ControllerRequest::GetMetadata,
            ControllerRequest::UpdateConfig {
                body: Some(b"k=v\n".to_vec()),
            },
            ControllerRequest::GetConfig,
            leader(LeaderRequest::AlterSyncStateSet(AlterSyncStateSet {
                broker_name: text("b"),
                master_broker_id: Some(1),
                master_epoch: Some(7),
                body: Some(SyncStateSetBody {
                    sync_state_set: Some([1, 2].into_iter().collect()),
                    sync_state_set_epoch: 8,
                }),
            })),
            leader(LeaderRequest::ElectMaster(ElectMaster {
                cluster_name: "c".into(),
                broker_name: "b".into(),
                broker_id: 2,
                designate_elect: true,
            })),
            leader(LeaderRequest::RegisterBroker(RegisterBroker {
                cluster_name: text("c"),
                broker_name: text("b"),
                broker_id: Some(2),
                broker_address: text("10.0.0.1:30921"),
            })),
            leader(LeaderRequest::GetReplicaInfo {
                broker_name: text("b"),
            }),
            leader(LeaderRequest::GetSyncStateData {
                broker_names: vec!["a".into(), "b".into()],
            }),
            leader(LeaderRequest::CleanBrokerData(CleanBrokerData {
                cluster_name: text("c"),
                broker_name: text("b"),
                broker_controller_ids_to_clean: text("1;2"),
                is_clean_living_broker: true,
            })),
            leader(LeaderRequest::GetNextBrokerId(GetNextBrokerId {
                cluster_name: text("c"),
                broker_name: text("b"),
            })),
            leader(LeaderRequest::ApplyBrokerId(ApplyBrokerId {
                cluster_name: text("c"),
                broker_name: text("b"),
                applied_broker_id: Some(3),
                register_check_code: text("10.0.0.1:30931;1700000000000"),
            })),
        ]
    }

    fn over_the_wire(request: &ControllerRequest) -> RemotingCommand {
        let frame = request
            .encode()
            .frame(SerializeType::Json, "JAVA", 479, 9, 0);
        RemotingCommand::decode(
            Bytes::copy_from_slice(&frame[4..]),
            &crate::remoting::command::DecodeLimits::default(),
        )
        .expect("an encoded request decodes")
    }

    #[test]
    fn every_request_encodes_to_a_frame_that_parses_back_to_it() {
        let requests = one_of_each();
        let mut codes: Vec<i32> = requests.iter().map(ControllerRequest::code).collect();
        codes.sort_unstable();
        // Every code but 1007 and 1008 (never sent to a controller).
        let served = [
            904, 1001, 1002, 1003, 1004, 1005, 1006, 1009, 1010, 1011, 1012, 1013,
        ];
        assert_eq!(codes, served);
        for request in &requests {
            assert_eq!(parse(&over_the_wire(request)).as_ref(), Ok(request));
        }
        // Absent fields stay absent; the Java initial values of 1002 come back as sent.
        let sparse = [
            ControllerRequest::Heartbeat(Heartbeat::default()),
            ControllerRequest::UpdateConfig { body: None },
            ControllerRequest::Leader(LeaderRequest::AlterSyncStateSet(AlterSyncStateSet {
                broker_name: None,
                master_broker_id: None,
                master_epoch: None,
                body: Some(SyncStateSetBody {
                    sync_state_set: None,
                    sync_state_set_epoch: 0,
                }),
            })),
            ControllerRequest::Leader(LeaderRequest::ElectMaster(ElectMaster {
                cluster_name: "c".into(),
                broker_id: -1,
                ..ElectMaster::controller_trigger("b")
            })),
        ];
        let back: Vec<_> = sparse.iter().map(|r| parse(&over_the_wire(r))).collect();
        assert_eq!(back[0].as_ref(), Ok(&sparse[0]));
        assert_eq!(back[1].as_ref(), Ok(&sparse[1]));
        assert_eq!(back[2].as_ref(), Ok(&sparse[2]));
        let Ok(ControllerRequest::Leader(LeaderRequest::ElectMaster(m))) = &back[3] else {
            panic!("{:?}", back[3]);
        };
        assert_eq!((m.broker_name.as_str(), m.broker_id), ("b", -1));
    }

    /// 1001's body as brokers and rmq-bench have always written it.
    #[test]
    fn sync_state_set_bodies_are_written_as_fastjson_does() {
        let out = sync_state_set_json(Some(&[2, 1].into_iter().collect()), 4);
        assert_eq!(out, b"{\"syncStateSet\":[1,2],\"syncStateSetEpoch\":4}");
        assert_eq!(sync_state_set_json(None, 0), b"{\"syncStateSetEpoch\":0}");
    }

    #[test]
    fn other_codes_are_unsupported() {
        assert_eq!(
            parse(&RemotingCommand::for_test(105, &[], b"")).unwrap(),
            ControllerRequest::Unsupported(105)
        );
        assert_eq!(
            parse(&RemotingCommand::for_test(1007, &[], b"")).unwrap(),
            ControllerRequest::Unsupported(1007)
        );
        assert_eq!(
            parse(&RemotingCommand::for_test(1008, &[], b"")).unwrap(),
            ControllerRequest::Unsupported(1008)
        );
    }
}
