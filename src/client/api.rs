//! Typed calls over a [`Client`], and [`ClientError`] (I/O: try another name server).

use super::Client;
use crate::remoting::codes::{response, response_name};
use crate::remoting::command::RemotingCommand;
use crate::remoting::json::{self, Value};
use crate::request::reply::{KvValueReply, PermReply, RegisterBrokerReply};
use crate::request::{
    BrokerHeartbeat, BrokerRef, DeleteTopic, Encoded, GetKvList, GetRouteInfo, GetTopicsByCluster,
    KvKey, PutKvConfig, RegisterBroker, Request, UpdateNamesrvConfig, WritePerm,
};
use crate::route::model::{self, ClusterInfo, RegisterBody, TopicRouteData};
use crate::route::table::RegisteringBroker;
use std::fmt;
use std::io;

#[derive(Debug)]
pub enum ClientError {
    Io(io::Error),
    Response { code: i32, remark: Option<String> },
    Decode(String),
}

impl ClientError {
    /// Transport errors and GO_AWAY: another name server should be tried.
    pub fn is_failover(&self) -> bool {
        match self {
            ClientError::Response { code, .. } => *code == response::GO_AWAY,
            other => matches!(other, ClientError::Io(_)),
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "{e}"),
            ClientError::Response { code, remark } => {
                write!(f, "{} ({code})", response_name(*code))?;
                match remark {
                    Some(r) if !r.trim().is_empty() => write!(f, ": {}", r.trim()),
                    _ => Ok(()),
                }
            }
            ClientError::Decode(e) => write!(f, "undecodable response: {e}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<io::Error> for ClientError {
    /// A frame the client could not decode arrives as `InvalidData`; everything else is I/O.
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::InvalidData {
            ClientError::Decode(e.to_string())
        } else {
            ClientError::Io(e)
        }
    }
}

impl From<model::ModelError> for ClientError {
    fn from(e: model::ModelError) -> Self {
        ClientError::Decode(e.0)
    }
}

impl From<json::JsonError> for ClientError {
    fn from(e: json::JsonError) -> Self {
        ClientError::Decode(format!("bad JSON body: {e}"))
    }
}

/// Who a broker is, as REGISTER/UNREGISTER/QUERY_DATA_VERSION headers name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerIdentity {
    pub cluster: String,
    pub broker_name: String,
    pub broker_addr: String,
    pub broker_id: i64,
    pub ha_server_addr: String,
}

impl BrokerIdentity {
    /// The broker as 104 and 322 name it.
    pub fn broker_ref(&self) -> BrokerRef<'_> {
        BrokerRef {
            broker_name: &self.broker_name,
            broker_addr: &self.broker_addr,
            cluster: &self.cluster,
            broker_id: self.broker_id,
        }
    }

    /// Its 904 heartbeat, with its `brokerId` as brokers send it.
    pub fn heartbeat(&self) -> Encoded<'_> {
        let beat = BrokerHeartbeat {
            cluster: &self.cluster,
            broker_addr: &self.broker_addr,
            broker_name: &self.broker_name,
        };
        let mut e = Encoded::new(Request::BrokerHeartbeat(beat).code());
        beat.encode_as_broker(&mut e, self.broker_id);
        e
    }

    /// Its registration with `body` (encoded, compressed if `options` says so).
    pub fn registration<'a>(
        &'a self,
        body: &'a [u8],
        options: &'a RegisterOptions,
        version: i32,
    ) -> RegisterBroker<'a> {
        let crc = options.body_crc32.map_or_else(
            || i64::from(crate::checksum::crc32(body) & 0x7FFF_FFFF),
            i64::from,
        );
        let broker = RegisteringBroker {
            cluster: &self.cluster,
            broker_addr: &self.broker_addr,
            broker_name: &self.broker_name,
            broker_id: self.broker_id,
            ha_server_addr: &self.ha_server_addr,
            zone_name: options.zone_name.as_deref(),
            // Java leaves a non-positive timeout out of account; so does the server.
            heartbeat_timeout_ms: options
                .heartbeat_timeout_millis
                .and_then(|t| u64::try_from(t).ok()),
            enable_acting_master: Some(options.enable_acting_master),
        };
        RegisterBroker {
            broker,
            body_crc32: crc,
            compressed: options.compressed,
            version,
            body,
        }
    }
}

/// Optional REGISTER_BROKER header fields and body form.
#[derive(Debug, Clone, Default)]
pub struct RegisterOptions {
    /// The body is zlib-compressed (§4.2): `compressed=true`, and the typed call compresses.
    pub compressed: bool,
    pub enable_acting_master: bool,
    pub heartbeat_timeout_millis: Option<i64>,
    pub zone_name: Option<String>,
    /// `bodyCrc32` to send instead of the body's own (0: not checked).
    pub body_crc32: Option<i32>,
}

/// What REGISTER_BROKER answers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RegisterResult {
    pub master_addr: Option<String>,
    pub ha_server_addr: Option<String>,
    /// The ORDER_TOPIC_CONFIG KV table, when the server returns it.
    pub order_topic_conf: Vec<(String, String)>,
}

/// The stats extension's answer: its counters by wire name (a newer server's are kept too).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NamesrvStats {
    /// Client connections (0 if absent): what the least-loaded strategy ranks by.
    pub connections: i64,
    /// Every integer member of the body with its wire name, in the server's order.
    pub values: Vec<(String, i64)>,
    /// (request code, requests served), ascending by code.
    pub requests: Vec<(i32, i64)>,
}

impl NamesrvStats {
    pub fn decode(body: &[u8]) -> Result<NamesrvStats, ClientError> {
        let v = json::parse(body)?;
        let Some(members) = v.as_object() else {
            return Err(ClientError::Decode("stats body is not an object".into()));
        };
        let values: Vec<(String, i64)> = members
            .iter()
            .filter_map(|(k, n)| match n {
                Value::Int(n) => Some((k.clone(), *n)),
                _ => None,
            })
            .collect();
        let mut requests: Vec<(i32, i64)> = v
            .get("requests")
            .and_then(Value::as_object)
            .unwrap_or(&[])
            .iter()
            .filter_map(|(code, n)| Some((code.parse().ok()?, n.as_i64()?)))
            .collect();
        requests.sort_unstable();
        let mut stats = NamesrvStats {
            connections: 0,
            values,
            requests,
        };
        stats.connections = stats.value("connections");
        Ok(stats)
    }

    /// The counter `name` (as the wire names it, e.g. `brokers`), 0 when the server has none.
    pub fn value(&self, name: &str) -> i64 {
        let found = self.values.iter().find(|(k, _)| k == name);
        found.map_or(0, |(_, n)| *n)
    }
}

fn success(resp: RemotingCommand) -> Result<RemotingCommand, ClientError> {
    if resp.code == response::SUCCESS {
        Ok(resp)
    } else {
        Err(ClientError::Response {
            code: resp.code,
            remark: resp.remark,
        })
    }
}

impl Client {
    /// A typed request whose answer must be SUCCESS.
    pub fn send_ok(&mut self, request: &Request<'_>) -> Result<RemotingCommand, ClientError> {
        success(self.send(request)?)
    }

    /// As [`send_ok`](Self::send_ok), with `None` when the server answers `absent`.
    fn send_found(
        &mut self,
        request: &Request<'_>,
        absent: i32,
    ) -> Result<Option<RemotingCommand>, ClientError> {
        let resp = self.send(request)?;
        if resp.code == absent {
            return Ok(None);
        }
        success(resp).map(Some)
    }

    /// 205 WIPE_WRITE_PERM_OF_BROKER (`enable` false) or 327 ADD_WRITE_PERM_OF_BROKER: the
    /// number of topics whose write permission was wiped or restored.
    pub fn write_perm(&mut self, broker_name: &str, enable: bool) -> Result<i32, ClientError> {
        let perm = WritePerm { broker_name };
        let request = match enable {
            true => Request::AddWritePerm(perm),
            false => Request::WipeWritePerm(perm),
        };
        let resp = self.send_ok(&request)?;
        PermReply::parse(&resp, enable)
            .ok_or_else(|| ClientError::Decode("response lacks a numeric topic count".into()))
    }

    /// An encoded request (a controller's, say) whose answer must be SUCCESS.
    pub fn request_ok(&mut self, request: &Encoded<'_>) -> Result<RemotingCommand, ClientError> {
        success(self.request_encoded(request)?)
    }

    /// The topics of a request answered with a TopicList: 206, 224, 304, 311, 312, 313.
    pub fn topic_list(&mut self, request: &Request<'_>) -> Result<Vec<String>, ClientError> {
        let resp = self.send_ok(request)?;
        Ok(model::decode_topic_list(&resp.body)?.0)
    }

    pub fn put_kv_config(
        &mut self,
        namespace: &str,
        key: &str,
        value: &str,
    ) -> Result<(), ClientError> {
        let put = PutKvConfig {
            namespace,
            key,
            value,
        };
        self.send_ok(&Request::PutKvConfig(put)).map(drop)
    }

    /// 101 GET_KV_CONFIG; `None` when the server has no such item (QUERY_NOT_FOUND).
    pub fn get_kv_config(
        &mut self,
        namespace: &str,
        key: &str,
    ) -> Result<Option<String>, ClientError> {
        let get = Request::GetKvConfig(KvKey { namespace, key });
        let resp = self.send_found(&get, response::QUERY_NOT_FOUND)?;
        Ok(resp.map(|r| KvValueReply::parse(&r).to_string()))
    }

    /// 102 DELETE_KV_CONFIG (succeeds whether or not the key existed).
    pub fn delete_kv_config(&mut self, namespace: &str, key: &str) -> Result<(), ClientError> {
        self.send_ok(&Request::DeleteKvConfig(KvKey { namespace, key }))
            .map(drop)
    }

    /// 103 REGISTER_BROKER, JSON body or compressed, with a correct `bodyCrc32`.
    pub fn register_broker(
        &mut self,
        broker: &BrokerIdentity,
        body: &RegisterBody,
        options: &RegisterOptions,
    ) -> Result<RegisterResult, ClientError> {
        let bytes = if options.compressed {
            model::encode_register_body_compressed(body, self.version)
        } else {
            let mut out = Vec::new();
            model::encode_register_body_json(body, &mut out);
            out
        };
        let register = broker.registration(&bytes, options, self.version);
        let resp = self.send_ok(&Request::RegisterBroker(register))?;
        let order_topic_conf = if resp.body.is_empty() {
            Vec::new()
        } else {
            model::decode_kv_table(&resp.body)?
        };
        let reply = RegisterBrokerReply::parse(&resp);
        Ok(RegisterResult {
            master_addr: reply.master_addr,
            ha_server_addr: reply.ha_server_addr,
            order_topic_conf,
        })
    }

    /// 105 GET_ROUTEINFO_BY_TOPIC; `None` when the topic does not exist.
    pub fn get_route(&mut self, topic: &str) -> Result<Option<TopicRouteData>, ClientError> {
        let lookup = GetRouteInfo::new(topic, self.version);
        let resp = self.send_found(&Request::GetRouteInfo(lookup), response::TOPIC_NOT_EXIST)?;
        Ok(resp.map(|r| TopicRouteData::decode(&r.body)).transpose()?)
    }

    pub fn get_cluster_info(&mut self) -> Result<ClusterInfo, ClientError> {
        let resp = self.send_ok(&Request::GetBrokerClusterInfo)?;
        Ok(ClusterInfo::decode(&resp.body)?)
    }

    pub fn get_all_topic_list(&mut self) -> Result<Vec<String>, ClientError> {
        self.topic_list(&Request::GetAllTopicList)
    }

    /// 216 DELETE_TOPIC_IN_NAMESRV; with a cluster only that cluster's queues are removed.
    pub fn delete_topic(&mut self, topic: &str, cluster: Option<&str>) -> Result<(), ClientError> {
        self.send_ok(&Request::DeleteTopic(DeleteTopic { topic, cluster }))
            .map(drop)
    }

    /// 219 GET_KVLIST_BY_NAMESPACE; `None` for an unknown namespace.
    pub fn get_kv_list(
        &mut self,
        namespace: &str,
    ) -> Result<Option<Vec<(String, String)>>, ClientError> {
        let list = Request::GetKvList(GetKvList { namespace });
        let resp = self.send_found(&list, response::QUERY_NOT_FOUND)?;
        Ok(resp.map(|r| model::decode_kv_table(&r.body)).transpose()?)
    }

    pub fn get_topics_by_cluster(&mut self, cluster: &str) -> Result<Vec<String>, ClientError> {
        let request = Request::GetTopicsByCluster(GetTopicsByCluster::new(cluster));
        self.topic_list(&request)
    }

    /// 318 UPDATE_NAMESRV_CONFIG with `key=value` lines.
    pub fn update_namesrv_config(&mut self, entries: &[(&str, &str)]) -> Result<(), ClientError> {
        let body: String = entries.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        let update = UpdateNamesrvConfig {
            properties: (!body.is_empty()).then_some(body.as_str()),
        };
        self.send_ok(&Request::UpdateNamesrvConfig(update))
            .map(drop)
    }

    /// 319 GET_NAMESRV_CONFIG as (key, value) pairs, read as Java's `Properties.load`.
    pub fn get_namesrv_config(&mut self) -> Result<Vec<(String, String)>, ClientError> {
        let resp = self.send_ok(&Request::GetNamesrvConfig)?;
        let text = std::str::from_utf8(&resp.body)
            .map_err(|_| ClientError::Decode("config body is not UTF-8".into()))?;
        crate::config::parse_properties(text).map_err(ClientError::Decode)
    }

    /// The rmq-namesrv stats extension; other name servers answer REQUEST_CODE_NOT_SUPPORTED.
    pub fn stats(&mut self) -> Result<NamesrvStats, ClientError> {
        let resp = self.send_ok(&Request::Stats)?;
        NamesrvStats::decode(&resp.body)
    }
}
