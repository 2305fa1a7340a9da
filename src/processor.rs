//! Request code -> behaviour: the only place that maps a RocketMQ request to what the
//! name server does with it, and the one place where errors become response codes and
//! Java's remarks (PROTOCOL.md §3).
//!
//! The processor owns the state (route table, KV store, config, counters) and runs on the
//! loop thread. It never blocks on the network: unregistrations go to the batching thread and
//! come back de-duplicated through [`Processor::apply_unregister_batch`]; 905 notifications
//! leave as encoded frames for the sender thread (both through the [`Outbox`]).

use crate::config::{Cidr, NamesrvConfig, SerializeTypeSetting};
use crate::event_loop::oneway::Oneway;
use crate::kv::KvStore;
use crate::remoting::codes::{request, response, version, FLAG_ONEWAY, FLAG_RESPONSE};
use crate::remoting::command::{encode_frame, Header, RemotingCommand, SerializeType};
use crate::route::model::{
    self, decode_register_body, BodyLimits, DataVersion, Dialect, TopicRouteData,
};
use crate::route::table::{
    BodyFingerprint, ConnId, ExpiredBroker, MinIdNotification, RegisterRequest, RemovalReason,
    RouteSettings, RouteTable, TopicsInput, UnregisterRequest, FLAG_UNIT, FLAG_UNIT_SUB,
};
use crossbeam_channel::{Sender, TrySendError};
use log::{debug, info, warn};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// The KV namespace the name server itself reads (order topic configuration).
pub const ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

/// A broker to unregister, and why it goes.
pub type Unregistration = (UnregisterRequest, RemovalReason);

/// Unregistrations as the batching thread takes them and hands them back (de-duplicated by
/// request).
pub type UnregisterBatch = Vec<Unregistration>;

/// Where the processor sends work that must not run on the loop: plain messages over bounded
/// channels (a full queue is logged and counted, never waited for).
pub struct Outbox {
    /// To the batching thread (capacity `unRegisterBrokerQueueCapacity` messages).
    pub unregistrations: Sender<UnregisterBatch>,
    /// To the sender thread: NOTIFY_MIN_BROKER_ID_CHANGE frames.
    pub notifications: Sender<Oneway>,
}

/// Where a request came from and what the server around it looks like.
#[derive(Debug, Clone, Copy)]
pub struct RequestContext {
    pub conn: Option<ConnId>,
    pub peer: Option<SocketAddr>,
    pub now_ms: u64,
}

/// Counters kept by the server loop, reported by the stats extension.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerCounters {
    pub connections: usize,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// What the server must do after a request besides writing the reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Effects {
    /// UPDATE_NAMESRV_CONFIG applied: re-read timer and limit settings.
    pub config_changed: bool,
}

/// Request counts by code: a flat array for RocketMQ's range (no hashing per request), a map
/// for anything else a peer may send.
#[derive(Debug)]
struct RequestCounts {
    low: Vec<u64>,
    other: HashMap<i32, u64>,
}

impl Default for RequestCounts {
    fn default() -> Self {
        RequestCounts {
            low: vec![0; 1024],
            other: HashMap::new(),
        }
    }
}

impl RequestCounts {
    fn count(&mut self, code: i32) {
        match usize::try_from(code).ok().and_then(|c| self.low.get_mut(c)) {
            Some(n) => *n += 1,
            // Unknown codes from hostile peers must not grow this map without bound.
            None if self.other.len() < 1024 || self.other.contains_key(&code) => {
                *self.other.entry(code).or_insert(0) += 1
            }
            None => {}
        }
    }

    fn sorted(&self) -> Vec<(i32, u64)> {
        let mut v: Vec<(i32, u64)> = self
            .low
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(c, n)| (c as i32, *n))
            .chain(self.other.iter().map(|(c, n)| (*c, *n)))
            .collect();
        v.sort_unstable();
        v
    }
}

#[derive(Debug, Default)]
struct Stats {
    requests_by_code: RequestCounts,
    registrations: u64,
    registrations_unchanged: u64,
    expiries: u64,
    unregistrations: u64,
    unregister_batches: u64,
    largest_batch: usize,
    unregister_queue_full: u64,
    rejected_busy: u64,
}

/// An error that becomes a response code and remark.
struct Reject {
    code: i32,
    remark: String,
}

fn reject(code: i32, remark: impl Into<String>) -> Reject {
    Reject {
        code,
        remark: remark.into(),
    }
}

fn required<'a>(cmd: &'a RemotingCommand, field: &str) -> Result<&'a str, Reject> {
    cmd.ext(field).ok_or_else(|| {
        reject(
            response::SYSTEM_ERROR,
            format!("the custom field <{field}> is null"),
        )
    })
}

fn required_i64(cmd: &RemotingCommand, field: &str) -> Result<i64, Reject> {
    let text = required(cmd, field)?;
    text.trim().parse::<i64>().map_err(|_| {
        reject(
            response::SYSTEM_ERROR,
            format!("the custom field <{field}> is not a number: {text}"),
        )
    })
}

fn optional_bool(cmd: &RemotingCommand, field: &str) -> Option<bool> {
    cmd.ext(field)
        .map(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Reply under construction.
struct Reply {
    code: i32,
    remark: Option<String>,
    ext: Option<Vec<(&'static str, String)>>,
    body: ReplyBody,
}

enum ReplyBody {
    None,
    Owned(Vec<u8>),
    Shared(bytes::Bytes),
}

impl Reply {
    fn ok() -> Self {
        Reply {
            code: response::SUCCESS,
            remark: None,
            ext: None,
            body: ReplyBody::None,
        }
    }
    fn with_body(body: Vec<u8>) -> Self {
        Reply {
            body: ReplyBody::Owned(body),
            ..Reply::ok()
        }
    }
    fn error(code: i32, remark: impl Into<String>) -> Self {
        Reply {
            code,
            remark: Some(remark.into()),
            ..Reply::ok()
        }
    }
}

impl From<Reject> for Reply {
    fn from(r: Reject) -> Self {
        Reply::error(r.code, r.remark)
    }
}

/// The name server's state and request handling.
pub struct Processor {
    pub table: RouteTable,
    kv: KvStore,
    config: NamesrvConfig,
    started: Instant,
    outbox: Outbox,
    stats: Stats,
    body_limits: BodyLimits,
    admin_allow_list: Vec<Cidr>,
    /// ORDER_TOPIC_CONFIG as a KVTable body, by KV generation (sent with every registration).
    order_conf_body: Option<(u64, Option<bytes::Bytes>)>,
    /// Brokers found expired by the scan in progress, submitted together when it ends, and
    /// their connections, closed then.
    expired_this_scan: UnregisterBatch,
    expired_conns_this_scan: Vec<ConnId>,
}

fn route_settings(config: &NamesrvConfig) -> RouteSettings {
    RouteSettings {
        support_acting_master: config.support_acting_master,
        delete_topic_with_broker_registration: config.delete_topic_with_broker_registration,
        notify_min_broker_id_changed: config.notify_min_broker_id_changed,
        cache_max_bytes: config.route_cache_max_bytes as usize,
    }
}

fn body_limits(config: &NamesrvConfig) -> BodyLimits {
    let mut limits = BodyLimits::default();
    limits.json.max_depth = config.max_json_depth as usize;
    limits.json.max_string_len = config.max_json_string_length as usize;
    limits.max_topics = config.max_topics_per_registration as usize;
    limits.max_inflated_len = config.max_inflated_body_length as usize;
    limits
}

impl Processor {
    pub fn new(config: NamesrvConfig, kv: KvStore, outbox: Outbox) -> Self {
        let table = RouteTable::new(route_settings(&config), 1000);
        Processor {
            table,
            kv,
            body_limits: body_limits(&config),
            admin_allow_list: config.admin_allow_list_parsed(),
            config,
            started: Instant::now(),
            outbox,
            stats: Stats::default(),
            order_conf_body: None,
            expired_this_scan: Vec::new(),
            expired_conns_this_scan: Vec::new(),
        }
    }

    pub fn config(&self) -> &NamesrvConfig {
        &self.config
    }

    fn serialize_type(&self) -> SerializeType {
        match self.config.serialize_type {
            SerializeTypeSetting::Json => SerializeType::Json,
            SerializeTypeSetting::RocketMq => SerializeType::RocketMq,
        }
    }

    /// Handles one request and appends its response frame (if any) to `out`.
    pub fn handle(
        &mut self,
        ctx: &RequestContext,
        counters: &ServerCounters,
        cmd: &RemotingCommand,
        out: &mut Vec<u8>,
    ) -> Effects {
        if cmd.is_response() {
            // We only send oneway requests (905), so no response is ever expected.
            debug!(
                "dropping unexpected response frame (opaque {}) from {:?}",
                cmd.opaque, ctx.peer
            );
            return Effects::default();
        }
        self.stats.requests_by_code.count(cmd.code);
        let mut effects = Effects::default();
        let reply = match self.dispatch(ctx, counters, cmd, &mut effects) {
            Ok(r) => r,
            Err(r) => {
                debug!(
                    "request {} from {:?} answered {}: {}",
                    cmd.code, ctx.peer, r.code, r.remark
                );
                r.into()
            }
        };
        if !cmd.is_oneway() {
            self.write_reply(cmd.opaque, &reply, out);
        }
        effects
    }

    /// Answers `cmd` with an error without handling it (the loop's overload path).
    pub fn reply_error(
        &mut self,
        cmd: &RemotingCommand,
        code: i32,
        remark: &str,
        out: &mut Vec<u8>,
    ) {
        self.stats.requests_by_code.count(cmd.code);
        self.stats.rejected_busy += 1;
        if !cmd.is_oneway() {
            self.write_reply(cmd.opaque, &Reply::error(code, remark), out);
        }
    }

    fn write_reply(&self, opaque: i32, reply: &Reply, out: &mut Vec<u8>) {
        let header = Header {
            code: reply.code,
            language: "JAVA",
            version: version::CURRENT,
            opaque,
            flag: FLAG_RESPONSE,
            remark: reply.remark.as_deref(),
        };
        let body: &[u8] = match &reply.body {
            ReplyBody::None => &[],
            ReplyBody::Owned(v) => v,
            ReplyBody::Shared(b) => b,
        };
        let ext = reply
            .ext
            .as_ref()
            .map(|e| e.iter().map(|(k, v)| (*k, v.as_str())));
        encode_frame(out, self.serialize_type(), &header, ext, body);
    }

    fn is_admin_allowed(&self, peer: Option<SocketAddr>) -> bool {
        if self.admin_allow_list.is_empty() {
            return true;
        }
        match peer {
            Some(p) => self.admin_allow_list.iter().any(|c| c.contains(p.ip())),
            None => true,
        }
    }

    fn dispatch(
        &mut self,
        ctx: &RequestContext,
        counters: &ServerCounters,
        cmd: &RemotingCommand,
        effects: &mut Effects,
    ) -> Result<Reply, Reject> {
        if is_mutating_admin(cmd.code) && !self.is_admin_allowed(ctx.peer) {
            warn!(
                "refused {} from {:?}: not in adminAllowList",
                crate::remoting::codes::request_name(cmd.code),
                ctx.peer
            );
            return Err(reject(
                response::NO_PERMISSION,
                format!(
                    "request {} is not allowed from this address (adminAllowList)",
                    cmd.code
                ),
            ));
        }
        match cmd.code {
            request::PUT_KV_CONFIG => self.change_kv_config(cmd, true),
            request::GET_KV_CONFIG => self.get_kv_config(cmd),
            request::DELETE_KV_CONFIG => self.change_kv_config(cmd, false),
            request::GET_KVLIST_BY_NAMESPACE => self.get_kv_list(cmd),
            request::REGISTER_BROKER => self.register_broker(ctx, cmd),
            request::UNREGISTER_BROKER => self.unregister_broker(cmd),
            request::BROKER_HEARTBEAT => self.broker_heartbeat(ctx, cmd),
            request::QUERY_DATA_VERSION => self.query_data_version(ctx, cmd),
            request::GET_BROKER_MEMBER_GROUP => self.broker_member_group(cmd),
            request::GET_ROUTEINFO_BY_TOPIC => self.route_info(cmd),
            request::GET_BROKER_CLUSTER_INFO => {
                let mut body = Vec::with_capacity(256);
                self.table.cluster_info().encode(&mut body);
                Ok(Reply::with_body(body))
            }
            request::WIPE_WRITE_PERM_OF_BROKER => self.write_perm(cmd, false),
            request::ADD_WRITE_PERM_OF_BROKER => self.write_perm(cmd, true),
            request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => {
                if !self.config.enable_all_topic_list {
                    return Err(reject(response::SYSTEM_ERROR, "disable"));
                }
                let mut body = Vec::new();
                model::encode_topic_list(self.table.topic_names(), None, &mut body);
                Ok(Reply::with_body(body))
            }
            request::DELETE_TOPIC_IN_NAMESRV => self.delete_topic(cmd),
            request::REGISTER_TOPIC_IN_NAMESRV => self.register_topic(cmd),
            request::GET_TOPICS_BY_CLUSTER => {
                if !self.config.enable_topic_list {
                    return Err(reject(response::SYSTEM_ERROR, "disable"));
                }
                let cluster = required(cmd, "cluster")?;
                let topics = self.table.topics_of_cluster(cluster);
                let mut body = Vec::new();
                model::encode_topic_list(topics.iter().map(String::as_str), None, &mut body);
                Ok(Reply::with_body(body))
            }
            request::GET_SYSTEM_TOPIC_LIST_FROM_NS => {
                let (topics, addr) = self.table.system_topics();
                let mut body = Vec::new();
                model::encode_topic_list(
                    topics.iter().map(String::as_str),
                    addr.as_deref(),
                    &mut body,
                );
                Ok(Reply::with_body(body))
            }
            request::GET_UNIT_TOPIC_LIST => self.unit_topics(|f| f & FLAG_UNIT != 0),
            request::GET_HAS_UNIT_SUB_TOPIC_LIST => self.unit_topics(|f| f & FLAG_UNIT_SUB != 0),
            request::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST => {
                self.unit_topics(|f| f & FLAG_UNIT_SUB != 0 && f & FLAG_UNIT == 0)
            }
            request::GET_NAMESRV_CONFIG => Ok(Reply::with_body(
                self.config.to_properties_text().into_bytes(),
            )),
            request::UPDATE_NAMESRV_CONFIG => self.update_config(cmd, effects),
            request::RMQ_NAMESRV_STATS => Ok(Reply::with_body(self.stats_body(counters))),
            code => {
                debug!("request code {code} not supported (from {:?})", ctx.peer);
                Err(reject(
                    response::REQUEST_CODE_NOT_SUPPORTED,
                    format!(" request type {code} not supported"),
                ))
            }
        }
    }

    // ------------------------------------------------------------------ KV

    /// PUT_KV_CONFIG (`value` given) and DELETE_KV_CONFIG: persisted before the answer.
    fn change_kv_config(&mut self, cmd: &RemotingCommand, put: bool) -> Result<Reply, Reject> {
        let namespace = required(cmd, "namespace")?;
        let key = required(cmd, "key")?;
        let result = if put {
            let value = required(cmd, "value")?;
            self.kv.put(namespace, key, value)
        } else {
            self.kv.delete(namespace, key)
        };
        result.map_err(|e| {
            reject(
                response::SYSTEM_ERROR,
                format!("persisting the KV config failed: {e}"),
            )
        })?;
        info!(
            "KV config {} {namespace}/{key}",
            if put { "put" } else { "delete" }
        );
        if namespace == ORDER_TOPIC_CONFIG {
            self.table.invalidate_topic(key);
        }
        Ok(Reply::ok())
    }

    fn get_kv_config(&mut self, cmd: &RemotingCommand) -> Result<Reply, Reject> {
        let namespace = required(cmd, "namespace")?;
        let key = required(cmd, "key")?;
        match self.kv.get(namespace, key) {
            Some(v) => Ok(Reply {
                ext: Some(vec![("value", v.to_string())]),
                ..Reply::ok()
            }),
            None => Ok(Reply {
                ext: Some(Vec::new()),
                ..Reply::error(
                    response::QUERY_NOT_FOUND,
                    format!("No config item, Namespace: {namespace} Key: {key}"),
                )
            }),
        }
    }

    fn get_kv_list(&mut self, cmd: &RemotingCommand) -> Result<Reply, Reject> {
        let namespace = required(cmd, "namespace")?;
        match self.kv.encode_kv_table(namespace) {
            Some(body) => Ok(Reply::with_body(body)),
            None => Err(reject(
                response::QUERY_NOT_FOUND,
                format!("No config item, Namespace: {namespace}"),
            )),
        }
    }

    /// The ORDER_TOPIC_CONFIG KV table returned to registering brokers, re-encoded only
    /// when that namespace changed.
    fn order_conf_body(&mut self) -> Option<bytes::Bytes> {
        let generation = self.kv.generation(ORDER_TOPIC_CONFIG);
        let fresh = matches!(&self.order_conf_body, Some((g, _)) if *g == generation);
        if !fresh {
            let body = self
                .kv
                .encode_kv_table(ORDER_TOPIC_CONFIG)
                .map(bytes::Bytes::from);
            self.order_conf_body = Some((generation, body));
        }
        self.order_conf_body.as_ref().and_then(|(_, b)| b.clone())
    }

    // ------------------------------------------------------------------ brokers

    fn register_broker(
        &mut self,
        ctx: &RequestContext,
        cmd: &RemotingCommand,
    ) -> Result<Reply, Reject> {
        let broker_name = required(cmd, "brokerName")?;
        let broker_addr = required(cmd, "brokerAddr")?;
        let cluster = required(cmd, "clusterName")?;
        let ha_server_addr = required(cmd, "haServerAddr")?;
        let broker_id = required_i64(cmd, "brokerId")?;
        self.check_name("clusterName", cluster)?;
        self.check_name("brokerName", broker_name)?;
        self.check_name("brokerAddr", broker_addr)?;
        // Java parses these leniently: an unparsable value is logged and left at its default.
        let header_crc: i64 = cmd
            .ext("bodyCrc32")
            .and_then(|v| v.trim().parse::<i32>().ok())
            .map_or(0, i64::from);
        let compressed = optional_bool(cmd, "compressed").unwrap_or(false);
        let heartbeat_timeout_ms = cmd
            .ext("heartbeatTimeoutMillis")
            .and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|v| *v > 0)
            .map(|v| v as u64);
        let enable_acting_master = optional_bool(cmd, "enableActingMaster");
        let fingerprint = BodyFingerprint {
            len: cmd.body.len(),
            header_crc,
            hash: model::fingerprint(&cmd.body),
        };
        let req = RegisterRequest {
            cluster,
            broker_addr,
            broker_name,
            broker_id,
            ha_server_addr,
            zone_name: cmd.ext("__ZONE_NAME"),
            heartbeat_timeout_ms,
            enable_acting_master,
            conn: ctx.conn,
            now_ms: ctx.now_ms,
            fingerprint,
        };
        self.stats.registrations += 1;
        let unchanged = self.table.is_unchanged_body(
            cluster,
            broker_addr,
            broker_name,
            broker_id,
            &fingerprint,
        );
        let result = if unchanged {
            self.stats.registrations_unchanged += 1;
            self.table.register_broker(&req, TopicsInput::Unchanged)
        } else {
            if header_crc != 0 {
                let actual = i64::from(model::crc32(&cmd.body) & 0x7FFF_FFFF);
                if actual != header_crc {
                    warn!(
                        "rejected registration of {broker_name}@{broker_addr} ({cluster}): body crc32 {actual} != header bodyCrc32 {header_crc}"
                    );
                    // Java built this response with RegisterBrokerResponseHeader: `"extFields":{}`.
                    return Ok(Reply {
                        ext: Some(Vec::new()),
                        ..Reply::error(response::SYSTEM_ERROR, "crc32 not match")
                    });
                }
            }
            let body = decode_register_body(&cmd.body, compressed, cmd.version, &self.body_limits)
                .map_err(|e| {
                    warn!("rejected registration of {broker_name}@{broker_addr} ({cluster}): {e}");
                    reject(
                        response::SYSTEM_ERROR,
                        format!("register broker failed: bad body: {e}"),
                    )
                })?;
            for (_, tc) in &body.topics {
                self.check_topic_name(&tc.topic_name)?;
            }
            self.table.register_broker(&req, TopicsInput::Body(&body))
        };
        if result.fenced {
            warn!(
                "registration of {broker_name}@{broker_addr} id {broker_id} ({cluster}) fenced: a newer stateVersion holds that id"
            );
        } else if result.first {
            info!(
                "new broker registered: {broker_name}@{broker_addr} id {broker_id} cluster {cluster} ha {ha_server_addr}"
            );
        } else if result.topics_changed > 0 {
            info!(
                "broker {broker_name}@{broker_addr} changed {} topic queue entries",
                result.topics_changed
            );
        } else {
            debug!("broker {broker_name}@{broker_addr} refreshed");
        }
        if let Some(n) = result.notification.clone() {
            self.send_notification(n);
        }
        let mut ext = Vec::new();
        if let Some(ha) = result.ha_server_addr {
            ext.push(("haServerAddr", ha));
        }
        if let Some(master) = result.master_addr {
            ext.push(("masterAddr", master));
        }
        let body = if self.config.return_order_topic_config_to_broker && !result.fenced {
            self.order_conf_body()
        } else {
            None
        };
        Ok(Reply {
            ext: Some(ext),
            body: body.map_or(ReplyBody::None, ReplyBody::Shared),
            ..Reply::ok()
        })
    }

    fn check_name(&self, field: &str, value: &str) -> Result<(), Reject> {
        if value.len() > self.config.max_name_length as usize {
            warn!(
                "rejected {field} of {} bytes (maxNameLength {})",
                value.len(),
                self.config.max_name_length
            );
            return Err(reject(
                response::SYSTEM_ERROR,
                format!(
                    "{field} is longer than {} bytes",
                    self.config.max_name_length
                ),
            ));
        }
        Ok(())
    }

    /// Topics reported by brokers: Java takes them as they are; we only bound their length.
    fn check_topic_name(&self, topic: &str) -> Result<(), Reject> {
        if topic.is_empty() || topic.len() > self.config.max_topic_name_length as usize {
            warn!("rejected registered topic name of {} bytes", topic.len());
            return Err(reject(
                response::SYSTEM_ERROR,
                format!(
                    "topic name of {} bytes is outside 1..={} (maxTopicNameLength)",
                    topic.len(),
                    self.config.max_topic_name_length
                ),
            ));
        }
        Ok(())
    }

    /// Admin calls that create or delete a topic validate its name as Java's TopicValidator.
    fn validate_topic(&self, topic: &str) -> Result<(), Reject> {
        let problem = if topic.trim().is_empty() {
            Some("The specified topic is blank.")
        } else if !topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-'))
        {
            Some(
                "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
            )
        } else if topic.len() > self.config.max_topic_name_length as usize {
            Some("The specified topic is longer than topic max length.")
        } else {
            None
        };
        match problem {
            Some(remark) => {
                warn!("rejected topic name {topic:?}: {remark}");
                Err(reject(response::SYSTEM_ERROR, remark))
            }
            None => Ok(()),
        }
    }

    fn unregister_broker(&mut self, cmd: &RemotingCommand) -> Result<Reply, Reject> {
        let request = UnregisterRequest {
            broker_name: required(cmd, "brokerName")?.into(),
            broker_addr: required(cmd, "brokerAddr")?.into(),
            cluster: required(cmd, "clusterName")?.into(),
            broker_id: required_i64(cmd, "brokerId")?,
        };
        if self.submit_unregistrations(vec![(request, RemovalReason::Unregister)]) {
            Ok(Reply::ok())
        } else {
            Ok(Reply {
                code: response::SYSTEM_ERROR,
                ..Reply::ok()
            })
        }
    }

    fn broker_heartbeat(
        &mut self,
        ctx: &RequestContext,
        cmd: &RemotingCommand,
    ) -> Result<Reply, Reject> {
        let cluster = required(cmd, "clusterName")?;
        let addr = required(cmd, "brokerAddr")?;
        required(cmd, "brokerName")?;
        self.table.heartbeat(cluster, addr, ctx.now_ms);
        Ok(Reply::ok())
    }

    fn query_data_version(
        &mut self,
        ctx: &RequestContext,
        cmd: &RemotingCommand,
    ) -> Result<Reply, Reject> {
        required(cmd, "brokerName")?;
        let addr = required(cmd, "brokerAddr")?;
        let cluster = required(cmd, "clusterName")?;
        required_i64(cmd, "brokerId")?;
        let sent = if cmd.body.is_empty() {
            None
        } else {
            Some(DataVersion::decode(&cmd.body).map_err(|e| {
                reject(response::SYSTEM_ERROR, format!("bad DataVersion body: {e}"))
            })?)
        };
        let stored = self.table.data_version(cluster, addr);
        let changed = match (stored, sent) {
            (Some(s), Some(v)) => s != v,
            _ => true,
        };
        self.table.heartbeat(cluster, addr, ctx.now_ms);
        let mut reply = Reply {
            ext: Some(vec![("changed", changed.to_string())]),
            ..Reply::ok()
        };
        if let Some(s) = stored {
            let mut body = Vec::with_capacity(64);
            s.encode(&mut body);
            reply.body = ReplyBody::Owned(body);
        }
        Ok(reply)
    }

    fn broker_member_group(&mut self, cmd: &RemotingCommand) -> Result<Reply, Reject> {
        let cluster = required(cmd, "clusterName")?;
        let broker_name = required(cmd, "brokerName")?;
        let addrs = self.table.broker_member_group(broker_name);
        let mut body = Vec::new();
        model::encode_member_group(cluster, broker_name, &addrs, &mut body);
        Ok(Reply::with_body(body))
    }

    // ------------------------------------------------------------------ routes

    fn route_info(&mut self, cmd: &RemotingCommand) -> Result<Reply, Reject> {
        let topic = required(cmd, "topic")?;
        if self.config.need_wait_for_service
            && self.started.elapsed().as_secs() < self.config.wait_seconds_for_service.max(0) as u64
        {
            return Err(reject(response::SYSTEM_ERROR, "name server not ready"));
        }
        let zone_mode = optional_bool(cmd, "__ZONE_MODE").unwrap_or(false);
        let zone = cmd.ext("__ZONE_NAME").filter(|z| !z.trim().is_empty());
        let standard = cmd.version >= version::V4_9_4
            || optional_bool(cmd, "acceptStandardJsonOnly").unwrap_or(false);
        let dialect = if standard {
            Dialect::Standard
        } else {
            Dialect::Legacy
        };
        let order_enabled = self.config.order_message_enable;
        let kv = &self.kv;
        let order_conf = || {
            if order_enabled {
                kv.get(ORDER_TOPIC_CONFIG, topic).map(str::to_string)
            } else {
                None
            }
        };
        if let (true, Some(zone)) = (zone_mode, zone) {
            // Zone-filtered answers are built per request and always legacy (§5.8).
            let Some(mut route) = self.table.pickup_route(topic) else {
                return Err(topic_not_exist(topic));
            };
            route.order_topic_conf = order_conf();
            filter_by_zone(&mut route, zone);
            let mut body = Vec::new();
            route.encode(Dialect::Legacy, &mut body);
            return Ok(Reply::with_body(body));
        }
        match self.table.route_body(topic, dialect, order_conf) {
            Some(bytes) => Ok(Reply {
                body: ReplyBody::Shared(bytes),
                ..Reply::ok()
            }),
            None => Err(topic_not_exist(topic)),
        }
    }

    fn write_perm(&mut self, cmd: &RemotingCommand, enable: bool) -> Result<Reply, Reject> {
        let broker_name = required(cmd, "brokerName")?;
        let count = self.table.set_write_perm(broker_name, enable);
        let (key, verb) = if enable {
            ("addTopicCount", "added")
        } else {
            ("wipeTopicCount", "wiped")
        };
        info!("write permission {verb} for broker {broker_name}: {count} topic(s)");
        Ok(Reply {
            ext: Some(vec![(key, count.to_string())]),
            ..Reply::ok()
        })
    }

    fn delete_topic(&mut self, cmd: &RemotingCommand) -> Result<Reply, Reject> {
        let topic = required(cmd, "topic")?;
        self.validate_topic(topic)?;
        let cluster = cmd.ext("clusterName");
        if self.table.delete_topic(topic, cluster) {
            info!(
                "topic {topic} deleted (cluster {:?})",
                cluster.unwrap_or("")
            );
        }
        Ok(Reply::ok())
    }

    fn register_topic(&mut self, cmd: &RemotingCommand) -> Result<Reply, Reject> {
        let topic = required(cmd, "topic")?;
        self.validate_topic(topic)?;
        if cmd.body.is_empty() {
            return Ok(Reply::ok());
        }
        let route = TopicRouteData::decode(&cmd.body).map_err(|e| {
            reject(
                response::SYSTEM_ERROR,
                format!("bad TopicRouteData body: {e}"),
            )
        })?;
        if self.table.register_topic(topic, &route.queue_datas) {
            info!(
                "topic {topic} registered with {} queue entries",
                route.queue_datas.len()
            );
        }
        Ok(Reply::ok())
    }

    fn unit_topics(&mut self, pred: impl Fn(i32) -> bool) -> Result<Reply, Reject> {
        if !self.config.enable_topic_list {
            return Err(reject(response::SYSTEM_ERROR, "disable"));
        }
        let topics = self.table.topics_with_flag(pred);
        let mut body = Vec::new();
        model::encode_topic_list(topics.into_iter(), None, &mut body);
        Ok(Reply::with_body(body))
    }

    // ------------------------------------------------------------------ config

    fn update_config(
        &mut self,
        cmd: &RemotingCommand,
        effects: &mut Effects,
    ) -> Result<Reply, Reject> {
        if cmd.body.is_empty() {
            return Ok(Reply::ok());
        }
        let text = std::str::from_utf8(&cmd.body)
            .map_err(|_| reject(response::SYSTEM_ERROR, "string2Properties error"))?;
        let before = self.config.clone();
        match self.config.update(text) {
            Ok(keys) => {
                info!("config updated: {}", keys.join(", "));
                self.apply_config_change(&before);
                effects.config_changed = true;
                Ok(Reply::ok())
            }
            Err(crate::config::UpdateError::BlackListed(key)) => {
                warn!("refused config update of black-listed key {key}");
                Err(reject(
                    response::NO_PERMISSION,
                    "Can not update config in black list.",
                ))
            }
            Err(crate::config::UpdateError::Parse(e)) => {
                warn!("refused config update: {e}");
                Err(reject(response::SYSTEM_ERROR, "string2Properties error"))
            }
            Err(crate::config::UpdateError::Persist(e)) => Err(reject(
                response::SYSTEM_ERROR,
                format!("persisting the config failed: {e}"),
            )),
        }
    }

    fn apply_config_change(&mut self, before: &NamesrvConfig) {
        let settings = route_settings(&self.config);
        let routes_differ = settings != self.table.settings
            || before.order_message_enable != self.config.order_message_enable;
        self.table.settings = settings;
        if routes_differ {
            self.table.invalidate_all();
        }
        self.body_limits = body_limits(&self.config);
        self.admin_allow_list = self.config.admin_allow_list_parsed();
    }

    fn stats_body(&self, counters: &ServerCounters) -> Vec<u8> {
        use crate::remoting::json::{write_i64, write_key};
        let mut out = Vec::with_capacity(512);
        let fields: [(&str, i64); 16] = [
            ("connections", counters.connections as i64),
            ("brokers", self.table.live_broker_count() as i64),
            ("brokerGroups", self.table.broker_group_count() as i64),
            ("topics", self.table.topic_count() as i64),
            ("clusters", self.table.cluster_count() as i64),
            ("uptimeMillis", self.started.elapsed().as_millis() as i64),
            ("registrations", self.stats.registrations as i64),
            (
                "registrationsUnchanged",
                self.stats.registrations_unchanged as i64,
            ),
            ("expiries", self.stats.expiries as i64),
            ("unregistrations", self.stats.unregistrations as i64),
            ("unregisterBatches", self.stats.unregister_batches as i64),
            ("largestUnregisterBatch", self.stats.largest_batch as i64),
            ("bytesIn", counters.bytes_in as i64),
            ("bytesOut", counters.bytes_out as i64),
            ("rejectedBusy", self.stats.rejected_busy as i64),
            (
                "unregisterQueueFull",
                self.stats.unregister_queue_full as i64,
            ),
        ];
        out.push(b'{');
        for (k, v) in fields {
            write_key(&mut out, k);
            write_i64(&mut out, v);
            out.push(b',');
        }
        write_key(&mut out, "requests");
        out.push(b'{');
        for (i, (code, n)) in self.stats.requests_by_code.sorted().into_iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_key(&mut out, &code.to_string());
            write_i64(&mut out, n as i64);
        }
        out.extend_from_slice(b"}}");
        out
    }

    // ------------------------------------------------------------------ loop events

    /// Hands a NOTIFY_MIN_BROKER_ID_CHANGE to the sender thread (connecting to brokers is
    /// slow work that must stay off the loop).
    fn send_notification(&mut self, n: MinIdNotification) {
        let message = Oneway {
            what: "NOTIFY_MIN_BROKER_ID_CHANGE",
            frame: min_broker_id_change_frame(&n),
            targets: n.targets,
        };
        if let Err(e) = self.outbox.notifications.try_send(message) {
            warn!("NOTIFY_MIN_BROKER_ID_CHANGE dropped: sender queue {e}");
        }
    }

    /// Queues unregistrations for the batching thread; returns false (and logs) when its
    /// queue is full.
    pub fn submit_unregistrations(&mut self, batch: UnregisterBatch) -> bool {
        if batch.is_empty() {
            return true;
        }
        match self.outbox.unregistrations.try_send(batch) {
            Ok(()) => true,
            Err(TrySendError::Full(b)) => {
                self.stats.unregister_queue_full += 1;
                warn!(
                    "unregistration queue full (unRegisterBrokerQueueCapacity {}): {} request(s) not queued",
                    self.config.un_register_broker_queue_capacity,
                    b.len()
                );
                false
            }
            Err(TrySendError::Disconnected(_)) => {
                warn!("unregistration worker unavailable: its thread has ended");
                false
            }
        }
    }

    /// The scan tick: silent brokers are expired, their connections reported for closing,
    /// and their unregistrations queued as one batch.
    /// At most `limit` deadline entries are examined; the flag says whether more are due.
    pub fn expire_silent_brokers(&mut self, now_ms: u64, limit: usize) -> (Vec<ConnId>, bool) {
        let (expired, more): (Vec<ExpiredBroker>, bool) =
            self.table.expire_silent_brokers_limited(now_ms, limit);
        log_grouped(
            log::Level::Warn,
            "broker expired",
            expired.iter().map(|e| {
                format!(
                    "{}@{} ({}) silent for {} ms",
                    e.request.broker_name, e.request.broker_addr, e.request.cluster, e.silent_ms
                )
            }),
        );
        for e in &expired {
            if let Some(c) = e.conn {
                self.expired_conns_this_scan.push(c);
            }
            self.expired_this_scan.push((
                e.request.clone(),
                RemovalReason::Expired {
                    silent_ms: e.silent_ms,
                },
            ));
        }
        self.stats.expiries += expired.len() as u64;
        // One scan, however many iterations it is spread over, hands the worker one batch,
        // and only then are the expired brokers' connections closed (closing earlier would
        // unregister the other brokers of a shared connection in a batch of their own).
        if more {
            return (Vec::new(), true);
        }
        let mut conns = std::mem::take(&mut self.expired_conns_this_scan);
        if !self.expired_this_scan.is_empty() {
            let batch = std::mem::take(&mut self.expired_this_scan);
            let keys: Vec<(Arc<str>, Arc<str>)> = batch
                .iter()
                .map(|(r, _)| (r.cluster.clone(), r.broker_addr.clone()))
                .collect();
            if !self.submit_unregistrations(batch) {
                for (cluster, addr) in keys {
                    self.table.rearm(&cluster, &addr, now_ms);
                }
            }
        }
        conns.sort_unstable();
        conns.dedup();
        (conns, more)
    }

    /// A connection closed: unregister every broker that registered over it.
    pub fn connection_closed(&mut self, conn: ConnId) {
        let requests = self.table.connection_closed(conn);
        if requests.is_empty() {
            return;
        }
        let batch = requests
            .into_iter()
            .map(|r| (r, RemovalReason::ConnectionClosed))
            .collect();
        self.submit_unregistrations(batch);
    }

    /// Counts a de-duplicated batch handed back by the worker (applied in chunks).
    pub fn record_unregister_batch(&mut self, len: usize) {
        self.stats.unregister_batches += 1;
        self.stats.largest_batch = self.stats.largest_batch.max(len);
    }

    /// Applies (a chunk of) a batch handed back by the worker.
    pub fn apply_unregister_batch(&mut self, batch: &[Unregistration]) {
        let requests: Vec<UnregisterRequest> = batch.iter().map(|(r, _)| r.clone()).collect();
        let outcome = self.table.unregister_batch(&requests);
        self.stats.unregistrations += requests.len() as u64;
        log_grouped(
            log::Level::Info,
            "broker removed",
            batch.iter().map(|(r, reason)| {
                let why = match reason {
                    RemovalReason::Unregister => "unregistered".to_string(),
                    RemovalReason::Expired { silent_ms } => format!("expired after {silent_ms} ms"),
                    RemovalReason::ConnectionClosed => "connection closed".to_string(),
                };
                format!(
                    "{}@{} id {} cluster {} ({why})",
                    r.broker_name, r.broker_addr, r.broker_id, r.cluster
                )
            }),
        );
        if outcome.topics_removed > 0 || outcome.broker_groups_removed > 0 {
            info!(
                "unregistration batch of {}: {} broker group(s) and {} topic(s) removed",
                requests.len(),
                outcome.broker_groups_removed,
                outcome.topics_removed
            );
        }
        for n in outcome.notifications {
            self.send_notification(n);
        }
    }
}

/// The oneway NOTIFY_MIN_BROKER_ID_CHANGE (905) request Java's name server sends each target
/// broker (PROTOCOL.md §3.5).
fn min_broker_id_change_frame(n: &MinIdNotification) -> Vec<u8> {
    let min_id = n.min_broker_id.to_string();
    let mut ext: Vec<(&str, &str)> = vec![
        ("minBrokerId", min_id.as_str()),
        ("minBrokerAddr", n.min_broker_addr.as_str()),
    ];
    if let Some(a) = &n.offline_broker_addr {
        ext.push(("offlineBrokerAddr", a));
    }
    if let Some(a) = &n.ha_broker_addr {
        ext.push(("haBrokerAddr", a));
    }
    let header = Header {
        code: request::NOTIFY_MIN_BROKER_ID_CHANGE,
        language: "JAVA",
        version: version::CURRENT,
        opaque: 0,
        flag: FLAG_ONEWAY,
        remark: None,
    };
    let mut frame = Vec::new();
    encode_frame(
        &mut frame,
        SerializeType::Json,
        &header,
        Some(ext.iter().copied()),
        &[],
    );
    frame
}

/// Logs one line per item, or lines of up to 100 items when there are many (a mass expiry
/// of ten thousand brokers must not cost ten thousand synchronous log writes on the loop).
fn log_grouped(level: log::Level, what: &str, items: impl ExactSizeIterator<Item = String>) {
    if !log::log_enabled!(level) {
        return;
    }
    let total = items.len();
    if total <= 10 {
        for item in items {
            log::log!(level, "{what}: {item}");
        }
        return;
    }
    let mut line = String::new();
    let mut in_line = 0;
    for (i, item) in items.enumerate() {
        if in_line > 0 {
            line.push_str("; ");
        }
        line.push_str(&item);
        in_line += 1;
        if in_line == 100 || i + 1 == total {
            log::log!(level, "{what} ({} of {total}): {line}", i + 1);
            line.clear();
            in_line = 0;
        }
    }
}

fn topic_not_exist(topic: &str) -> Reject {
    reject(
        response::TOPIC_NOT_EXIST,
        format!(
            "No topic route info in name server for the topic: {topic}\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
        ),
    )
}

/// Codes refused outside `adminAllowList` (reads and broker traffic stay open).
fn is_mutating_admin(code: i32) -> bool {
    matches!(
        code,
        request::PUT_KV_CONFIG
            | request::DELETE_KV_CONFIG
            | request::DELETE_TOPIC_IN_NAMESRV
            | request::REGISTER_TOPIC_IN_NAMESRV
            | request::WIPE_WRITE_PERM_OF_BROKER
            | request::ADD_WRITE_PERM_OF_BROKER
            | request::UPDATE_NAMESRV_CONFIG
    )
}

/// ZoneRouteRPCHook (§5.8): keep brokers without a master or in the requested zone.
pub fn filter_by_zone(route: &mut TopicRouteData, zone: &str) {
    let mut removed_addrs = Vec::new();
    let mut removed_names = Vec::new();
    route.broker_datas.retain(|b| {
        let keep = !b.broker_addrs.contains_key(&0)
            || b.zone_name
                .as_deref()
                .is_some_and(|z| z.eq_ignore_ascii_case(zone));
        if !keep {
            removed_names.push(b.broker_name.clone());
            removed_addrs.extend(b.broker_addrs.values().cloned());
        }
        keep
    });
    route
        .queue_datas
        .retain(|q| !removed_names.contains(&q.broker_name));
    for a in removed_addrs {
        route.filter_server_table.remove(&a);
    }
}
