//! Shared helpers for the integration tests: start a real server on an ephemeral port,
//! talk to it over TCP, build registration bodies, poll for conditions.
#![allow(dead_code)]

use rmq_namesrv::client::api::BrokerIdentity;
use rmq_namesrv::client::nameserver_set::parse_addr_list;
use rmq_namesrv::client::{Client, ClientError, NameServerSet, Strategy};
use rmq_namesrv::config::NamesrvConfig;
use rmq_namesrv::remoting::codes::{request, response, FLAG_ONEWAY};
use rmq_namesrv::remoting::command::RemotingCommand;
use rmq_namesrv::remoting::json;
use rmq_namesrv::request::reply::DataVersionReply;
use rmq_namesrv::request::{GetBrokerMemberGroup, QueryDataVersion, RegisterTopic, Request};
use rmq_namesrv::route::model::{self, DataVersion, QueueData, RegisterBody, TopicConfig};
use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

pub use rmq_namesrv::client::api::RegisterOptions;
pub mod prom;
mod server_thread;
#[path = "../support/mod.rs"]
mod support;
#[allow(unused_imports)]
pub use server_thread::{start, start_with_controller, ServerHandle};
#[allow(unused_imports)]
pub use support::{connect_from, fixture, fixture_path, TempDir};

/// Calls by code and raw ext pairs that only tests make.
pub trait RawCalls {
    /// Sends a request without waiting; the opaque is for `read_response`.
    fn send_request(&mut self, code: i32, ext: &[(&str, &str)], body: &[u8]) -> io::Result<i32>;
    fn oneway(&mut self, code: i32, ext: &[(&str, &str)], body: &[u8]) -> io::Result<()>;
    /// True once the server has closed this connection (EOF or a reset within `wait`; frames
    /// that arrive meanwhile are dropped). The client's timeout becomes `wait`.
    fn is_closed_by_peer(&mut self, wait: Duration) -> bool;
}

impl RawCalls for Client {
    fn send_request(&mut self, code: i32, ext: &[(&str, &str)], body: &[u8]) -> io::Result<i32> {
        let (opaque, frame) = self.encode(code, 0, ext.iter().copied(), body);
        self.send_raw(&frame)?;
        Ok(opaque)
    }

    fn oneway(&mut self, code: i32, ext: &[(&str, &str)], body: &[u8]) -> io::Result<()> {
        let (_, frame) = self.encode(code, FLAG_ONEWAY, ext.iter().copied(), body);
        self.send_raw(&frame)
    }

    fn is_closed_by_peer(&mut self, wait: Duration) -> bool {
        self.set_timeout(wait);
        // No request carries this opaque: only EOF, a reset or the timeout ends the wait.
        match self.read_response(i32::MIN) {
            Ok(_) => false,
            Err(e) => e.kind() != io::ErrorKind::TimedOut,
        }
    }
}

/// A config for a test server: loopback, ephemeral port, files in `dir`, no file log.
pub fn test_config(dir: &Path) -> NamesrvConfig {
    NamesrvConfig {
        bind_address: "127.0.0.1".into(),
        listen_port: 0,
        kv_config_path: dir.join("kvConfig.json").to_string_lossy().into_owned(),
        config_store_path: dir
            .join("namesrv.properties")
            .to_string_lossy()
            .into_owned(),
        log_path: String::new(),
        ..NamesrvConfig::default()
    }
}

/// RMQ_TEST_LOG=debug shows the server's log on stderr while debugging a test.
pub fn init_test_log() {
    if let Some(level) = std::env::var("RMQ_TEST_LOG")
        .ok()
        .and_then(|l| l.parse::<log::LevelFilter>().ok())
    {
        let _ = rmq_namesrv::logging::init(&rmq_namesrv::logging::LogSettings {
            level,
            file: None,
            max_size: 0,
            max_files: 0,
        });
    }
}

pub struct TestServer {
    pub handle: ServerHandle,
    pub dir: TempDir,
    pub addr: String,
}

impl TestServer {
    pub fn start() -> TestServer {
        Self::start_with(|_| {})
    }

    pub fn start_with(tweak: impl FnOnce(&mut NamesrvConfig)) -> TestServer {
        init_test_log();
        let dir = TempDir::new("srv");
        let mut config = test_config(dir.path());
        tweak(&mut config);
        let handle = start(config).expect("server starts");
        let addr = handle.local_addr().to_string();
        TestServer { handle, dir, addr }
    }

    pub fn client(&self) -> Client {
        Client::connect(&self.addr, Duration::from_secs(5)).expect("connect")
    }
}

/// A whole JSON-header request frame, as a Java peer sends it (for tests that pipeline raw
/// frames instead of waiting for each answer).
pub fn request_frame(code: i32, opaque: i32, ext: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let header = rmq_namesrv::remoting::command::Header {
        code,
        language: "JAVA",
        version: 479,
        opaque,
        flag: 0,
        remark: None,
    };
    rmq_namesrv::remoting::command::encode_frame(
        &mut out,
        rmq_namesrv::remoting::command::SerializeType::Json,
        &header,
        Some(ext.iter().copied()),
        body,
    );
    out
}

/// One whole answer frame read from `s`, decoded.
pub fn read_command(s: &mut std::net::TcpStream) -> RemotingCommand {
    use std::io::Read;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("frame length");
    let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut frame).expect("frame");
    let limits = rmq_namesrv::remoting::command::DecodeLimits::default();
    RemotingCommand::decode(frame.into(), &limits).expect("answer decodes")
}

/// 1013 APPLY_BROKER_ID for a new broker set `name` of cluster `c`, as a whole frame.
pub fn apply_frame(opaque: i32, name: &str) -> Vec<u8> {
    request_frame(
        1013,
        opaque,
        &[
            ("clusterName", "c"),
            ("brokerName", name),
            ("appliedBrokerId", "1"),
            ("registerCheckCode", "127.0.0.1:30911;1"),
        ],
        b"",
    )
}

/// Polls `cond` every 10 ms until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// True once the server has read every byte `client` sent: the kernel's table of TCP sockets
/// (`/proc/net/tcp`, IPv4) shows the server's end of the connection with an empty receive
/// queue. For a test that must know a request reached the server (not only its socket)
/// before it acts, e.g. stops the server.
pub fn server_read_all(client: &Client) -> bool {
    let Ok(local) = client.local_addr() else {
        return false;
    };
    let server = client.peer();
    let hex = |a: std::net::SocketAddr| match a.ip() {
        std::net::IpAddr::V4(ip) => {
            format!("{:08X}:{:04X}", u32::from_le_bytes(ip.octets()), a.port())
        }
        std::net::IpAddr::V6(_) => String::new(),
    };
    let (ours, theirs) = (hex(server), hex(local));
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table.lines().any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        f.len() > 4 && f[1] == ours && f[2] == theirs && f[4].ends_with(":00000000")
    })
}

/// A topic config with the given queue numbers and perm.
pub fn topic(name: &str, queues: i32, perm: i32) -> TopicConfig {
    TopicConfig {
        topic_name: name.to_string(),
        read_queue_nums: queues,
        write_queue_nums: queues,
        perm,
        topic_sys_flag: 0,
    }
}

pub fn body_with(counter: i64, topics: &[TopicConfig]) -> RegisterBody {
    RegisterBody {
        data_version: DataVersion {
            counter,
            state_version: 0,
            timestamp: 1_700_000_000_000 + counter,
        },
        topics: topics
            .iter()
            .map(|t| (t.topic_name.clone(), t.clone()))
            .collect(),
        filter_servers: Some(Vec::new()),
        mappings: Vec::new(),
    }
}

/// Identity of a simulated broker.
#[derive(Clone, Debug)]
pub struct Broker {
    pub cluster: String,
    pub name: String,
    pub addr: String,
    pub id: i64,
    pub ha: String,
}

impl Broker {
    pub fn new(cluster: &str, name: &str, addr: &str, id: i64) -> Broker {
        Broker {
            cluster: cluster.into(),
            name: name.into(),
            addr: addr.into(),
            id,
            ha: addr.replace(":10911", ":10912"),
        }
    }

    /// The identity the client library's broker calls take.
    pub fn identity(&self) -> BrokerIdentity {
        BrokerIdentity {
            cluster: self.cluster.clone(),
            broker_name: self.name.clone(),
            broker_addr: self.addr.clone(),
            broker_id: self.id,
            ha_server_addr: self.ha.clone(),
        }
    }
}

/// REGISTER_BROKER with a JSON body and a correct bodyCrc32, as a 5.x broker sends it; the
/// answer as it came.
pub fn register(client: &mut Client, broker: &Broker, body: &RegisterBody) -> RemotingCommand {
    register_with(client, broker, body, &RegisterOptions::default())
}

/// [`register`] with optional header fields (compressed body when `options.compressed`).
pub fn register_with(
    client: &mut Client,
    broker: &Broker,
    body: &RegisterBody,
    options: &RegisterOptions,
) -> RemotingCommand {
    let bytes = if options.compressed {
        model::encode_register_body_compressed(body, client.version)
    } else {
        let mut bytes = Vec::new();
        model::encode_register_body_json(body, &mut bytes);
        bytes
    };
    register_raw(client, broker, &bytes, options)
}

/// REGISTER_BROKER with a body encoded by the caller, sent as it is.
pub fn register_raw(
    client: &mut Client,
    broker: &Broker,
    bytes: &[u8],
    options: &RegisterOptions,
) -> RemotingCommand {
    client
        .register_broker_bytes(&broker.identity(), bytes, options)
        .expect("register response")
}

/// GET_ROUTEINFO_BY_TOPIC.
pub fn route(client: &mut Client, topic: &str) -> RemotingCommand {
    client
        .request(request::GET_ROUTEINFO_BY_TOPIC, &[("topic", topic)], b"")
        .expect("route response")
}

/// The decoded route, or None when the server answers TOPIC_NOT_EXIST.
pub fn route_data(client: &mut Client, topic: &str) -> Option<model::TopicRouteData> {
    let resp = route(client, topic);
    if resp.code == 17 {
        return None;
    }
    assert_eq!(resp.code, 0, "route remark: {:?}", resp.remark);
    Some(model::TopicRouteData::decode(&resp.body).expect("route body decodes"))
}

pub fn cluster_info(client: &mut Client) -> model::ClusterInfo {
    let resp = client
        .request(request::GET_BROKER_CLUSTER_INFO, &[], b"")
        .expect("cluster info");
    assert_eq!(resp.code, 0);
    model::ClusterInfo::decode(&resp.body).expect("cluster info decodes")
}

/// The server's stats extension as a JSON value.
pub fn stats(client: &mut Client) -> rmq_namesrv::remoting::json::Value {
    let resp = client
        .request(request::RMQ_NAMESRV_STATS, &[], b"")
        .expect("stats");
    assert_eq!(resp.code, 0);
    rmq_namesrv::remoting::json::parse(&resp.body).expect("stats json")
}

/// PUT_KV_CONFIG; the answer as it came (tests look at codes and remarks).
pub fn put_kv(client: &mut Client, ns: &str, key: &str, value: &str) -> RemotingCommand {
    client
        .request(
            request::PUT_KV_CONFIG,
            &[("namespace", ns), ("key", key), ("value", value)],
            b"",
        )
        .expect("PUT_KV_CONFIG response")
}

/// DELETE_KV_CONFIG; the answer as it came.
pub fn delete_kv(client: &mut Client, ns: &str, key: &str) -> RemotingCommand {
    client
        .request(
            request::DELETE_KV_CONFIG,
            &[("namespace", ns), ("key", key)],
            b"",
        )
        .expect("DELETE_KV_CONFIG response")
}

/// GET_KV_CONFIG through the client library; `None` when the server has no such item.
pub fn get_kv(client: &mut Client, ns: &str, key: &str) -> Option<String> {
    client.get_kv_config(ns, key).expect("GET_KV_CONFIG")
}

/// A response's remark, or "" when it has none.
pub fn remark(resp: &RemotingCommand) -> &str {
    resp.remark.as_deref().unwrap_or("")
}

pub fn stat(client: &mut Client, key: &str) -> i64 {
    stats(client)
        .get(key)
        .and_then(|v| v.as_i64())
        .unwrap_or(-1)
}

/// Typed calls only the tests make (the tools never send them), on the library's public
/// `Client::send_ok` and typed requests.
pub trait ClientExt {
    fn client(&mut self) -> &mut Client;

    /// A raw request whose answer must be SUCCESS.
    fn call_ok(
        &mut self,
        code: i32,
        ext: &[(&str, &str)],
        body: &[u8],
    ) -> Result<RemotingCommand, ClientError> {
        let resp = self.client().request(code, ext, body)?;
        if resp.code == response::SUCCESS {
            return Ok(resp);
        }
        Err(ClientError::Response {
            code: resp.code,
            remark: resp.remark,
        })
    }

    /// 103 REGISTER_BROKER with a body already encoded, without waiting for the answer:
    /// returns the opaque to pass to `Client::read_response`.
    fn send_register_broker(
        &mut self,
        broker: &BrokerIdentity,
        body: &[u8],
        options: &RegisterOptions,
    ) -> std::io::Result<i32> {
        let c = self.client();
        let register = broker.registration(body, options, c.version);
        let request = Request::RegisterBroker(register).encode(c.version);
        let (opaque, frame) = c.encode(request.code, 0, request.pairs(), &request.body);
        c.send_raw(&frame).map(|()| opaque)
    }

    /// 103 REGISTER_BROKER with a body already encoded; the answer whatever its code.
    fn register_broker_bytes(
        &mut self,
        broker: &BrokerIdentity,
        body: &[u8],
        options: &RegisterOptions,
    ) -> Result<RemotingCommand, ClientError> {
        let opaque = self.send_register_broker(broker, body, options)?;
        Ok(self.client().read_response(opaque)?)
    }

    /// 104 UNREGISTER_BROKER (queued by the server; success does not mean "already gone").
    fn unregister_broker(&mut self, broker: &BrokerIdentity) -> Result<(), ClientError> {
        let unregister = Request::UnregisterBroker(broker.broker_ref());
        self.client().send_ok(&unregister).map(drop)
    }

    /// 217 REGISTER_TOPIC_IN_NAMESRV (the server answers success even when it stored nothing).
    fn register_topic(
        &mut self,
        topic: &str,
        queue_datas: &[QueueData],
    ) -> Result<(), ClientError> {
        let register = RegisterTopic {
            topic,
            queue_datas: queue_datas.to_vec(),
        };
        self.client()
            .send_ok(&Request::RegisterTopic(register))
            .map(drop)
    }

    /// 322 QUERY_DATA_VERSION: (changed, the server's stored DataVersion if it knows the broker).
    fn query_data_version(
        &mut self,
        broker: &BrokerIdentity,
        version: Option<&DataVersion>,
    ) -> Result<(bool, Option<DataVersion>), ClientError> {
        let mut body = Vec::new();
        if let Some(v) = version {
            v.encode(&mut body);
        }
        let query = QueryDataVersion::new(broker.broker_ref(), &body);
        let resp = self.client().send_ok(&Request::QueryDataVersion(query))?;
        let Some(changed) = DataVersionReply::parse(&resp) else {
            return Err(ClientError::Decode("response lacks changed".into()));
        };
        let stored = (!resp.body.is_empty())
            .then(|| DataVersion::decode(&resp.body))
            .transpose()
            .map_err(|e| ClientError::Decode(e.0))?;
        Ok((changed, stored))
    }

    /// 901 GET_BROKER_MEMBER_GROUP.
    fn get_broker_member_group(
        &mut self,
        cluster: &str,
        broker_name: &str,
    ) -> Result<BrokerMemberGroup, ClientError> {
        let group = GetBrokerMemberGroup {
            cluster,
            broker_name,
        };
        let resp = self
            .client()
            .send_ok(&Request::GetBrokerMemberGroup(group))?;
        let v = json::parse(&resp.body).map_err(|e| ClientError::Decode(e.to_string()))?;
        let group = v.get("brokerMemberGroup").unwrap_or(&json::Value::Null);
        let text = |k: &str| group.get(k).and_then(json::Value::as_str).unwrap_or("");
        let mut broker_addrs = BTreeMap::new();
        let addrs = group.get("brokerAddrs").and_then(json::Value::as_object);
        for (id, addr) in addrs.unwrap_or(&[]) {
            let id: i64 = id
                .parse()
                .map_err(|_| ClientError::Decode(format!("bad broker id {id:?}")))?;
            if let Some(a) = addr.as_str() {
                broker_addrs.insert(id, a.to_string());
            }
        }
        Ok(BrokerMemberGroup {
            cluster: text("cluster").to_string(),
            broker_name: text("brokerName").to_string(),
            broker_addrs,
        })
    }

    /// 904 BROKER_HEARTBEAT, sent as a request so the caller learns it arrived.
    fn broker_heartbeat(&mut self, broker: &BrokerIdentity) -> Result<(), ClientError> {
        self.client().request_ok(&broker.heartbeat()).map(drop)
    }
}

impl ClientExt for Client {
    fn client(&mut self) -> &mut Client {
        self
    }
}

/// GET_BROKER_MEMBER_GROUP's answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BrokerMemberGroup {
    pub cluster: String,
    pub broker_name: String,
    pub broker_addrs: BTreeMap<i64, String>,
}

/// `NameServerSet::call_until` moving on after transport errors and GO_AWAY, as a client of
/// several name servers would: an error answer is returned as is; when every server failed,
/// the error is an `Io` naming each address and its error.
pub trait NameServerSetExt: Sized {
    /// A set over `host:port;host:port`.
    fn from_list(list: &str, strategy: Strategy) -> std::io::Result<Self>;

    fn call<T>(
        &mut self,
        f: impl FnMut(&mut Client) -> Result<T, ClientError>,
    ) -> Result<T, ClientError>;
}

impl NameServerSetExt for NameServerSet {
    fn from_list(list: &str, strategy: Strategy) -> std::io::Result<Self> {
        NameServerSet::new(parse_addr_list(list), strategy)
    }

    fn call<T>(
        &mut self,
        f: impl FnMut(&mut Client) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        let mut failures = match self.call_until(f, ClientError::is_failover) {
            Ok(v) => return Ok(v),
            Err(failures) => failures,
        };
        if failures.last().is_some_and(|(_, e)| !e.is_failover()) {
            if let Some((_, e)) = failures.pop() {
                return Err(e);
            }
        }
        let last_kind = failures
            .iter()
            .rev()
            .find_map(|(_, e)| match e {
                ClientError::Io(io) => Some(io.kind()),
                _ => None,
            })
            .unwrap_or(std::io::ErrorKind::Other);
        let text: Vec<String> = failures
            .iter()
            .map(|(i, e)| format!("{}: {e}", self.addrs()[*i]))
            .collect();
        Err(ClientError::Io(std::io::Error::new(
            last_kind,
            format!("no name server reachable ({})", text.join("; ")),
        )))
    }
}
