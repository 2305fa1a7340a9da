//! Shared by the controller tests over TCP: a name server hosting the embedded Controller on
//! ephemeral ports, and a stand-in controller-mode broker that speaks the broker's side of
//! the conversation (as RocketMQ 5's `ReplicasManager` does) over real sockets:
//!
//! 1005 leader discovery -> 1012/1013 broker id -> 1003 register -> 904 heartbeat ->
//! 1002 self-election when there is no master -> REGISTER_BROKER to the name server (id 0 as
//! master, its controller id as slave, `stateVersion = masterEpoch`) -> heartbeats every
//! interval on the same connection; the master can widen its SyncStateSet with 1001; a
//! listener on the broker's own address takes 1008 NOTIFY_BROKER_ROLE_CHANGED and, for a
//! higher master epoch, changes role and registers with the name server again.
//!
//! With [`BrokerOptions::write_leases`] it behaves as a rocketmq-rust 1.0 broker toward the
//! controller: heartbeats are requests carrying `storeReady=true`, sent to the leader (found
//! again among the controllers when it stops answering as one), and a master takes writes
//! only while it holds a write lease from an answer. Its lease store keeps the highest
//! generation it accepted and refuses any grant not above it, or for another authority
//! (broker id, master epoch), and a heartbeat answer that installs no lease fences its writes
//! until one does, as rocketmq-rust's does.
//!
//! Needs `mod common;` beside it in the test crate.
#![allow(dead_code)]

use crate::common::{
    init_test_log, start_with_controller, test_config, wait_until, RawCalls, ServerHandle, TempDir,
};
use bytes::BytesMut;
use rmq_namesrv::client::api::{BrokerIdentity, RegisterOptions};
use rmq_namesrv::client::Client;
use rmq_namesrv::config::NamesrvConfig;
use rmq_namesrv::remoting::command::{DecodeLimits, RemotingCommand};
use rmq_namesrv::remoting::frame;
use rmq_namesrv::remoting::json;
use rmq_namesrv::route::model::{DataVersion, RegisterBody, TopicConfig};
use rmq_namesrv::server::ControllerSetup;
use std::io::{ErrorKind, Read};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub const CLUSTER: &str = "ControllerCluster";
/// The topic every stand-in broker registers with the name server.
pub const TOPIC: &str = "FailoverTopic";

/// A name server with the embedded Controller, both on ephemeral loopback ports.
pub struct ControllerServer {
    pub handle: ServerHandle,
    pub dir: TempDir,
    /// The name server's port.
    pub namesrv: String,
    /// The controller's port (what brokers' `controllerAddr` names).
    pub controller: String,
}

impl ControllerServer {
    /// `extra`: controller keys as a config file would set them.
    pub fn start(extra: &[(&str, &str)]) -> ControllerServer {
        let dir = TempDir::new("ctrl-srv");
        ControllerServer::start_in(dir, extra)
    }

    /// Starts over the store of an earlier server (same directory).
    pub fn start_in(dir: TempDir, extra: &[(&str, &str)]) -> ControllerServer {
        ControllerServer::start_configured(dir, extra, |_| {})
    }

    /// As [`ControllerServer::start_in`], with name server settings changed by `tweak`.
    pub fn start_configured(
        dir: TempDir,
        extra: &[(&str, &str)],
        tweak: impl FnOnce(&mut NamesrvConfig),
    ) -> ControllerServer {
        init_test_log();
        let store = dir.path().join("controller").to_string_lossy().into_owned();
        let mut pairs: Vec<(String, String)> = vec![
            ("controllerDLegerGroup".into(), "group1".into()),
            ("controllerDLegerPeers".into(), "n0-127.0.0.1:0".into()),
            ("controllerDLegerSelfId".into(), "n0".into()),
            ("controllerStorePath".into(), store),
        ];
        pairs.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let lookup = |key: &str| {
            pairs
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        let mut config = test_config(dir.path());
        config.enable_controller_in_namesrv = true;
        tweak(&mut config);
        let setup = ControllerSetup::from_config(&config, &lookup).expect("controller settings");
        let handle = start_with_controller(config, setup).expect("server starts");
        let namesrv = handle.local_addr().to_string();
        let controller = handle
            .controller_addr()
            .expect("controller listening")
            .to_string();
        ControllerServer {
            handle,
            dir,
            namesrv,
            controller,
        }
    }

    /// Where brokers find this server: its name server and its controller.
    pub fn endpoints(&self) -> Endpoints {
        Endpoints {
            namesrv: self.namesrv.clone(),
            controllers: vec![self.controller.clone()],
        }
    }

    pub fn controller_client(&self) -> Client {
        Client::connect(&self.controller, Duration::from_secs(10)).expect("connect to controller")
    }

    pub fn namesrv_client(&self) -> Client {
        Client::connect(&self.namesrv, Duration::from_secs(10)).expect("connect to name server")
    }

    /// Stops the server, keeping its directory for a restart.
    pub fn stop(self) -> TempDir {
        self.handle.stop().expect("clean stop");
        self.dir
    }
}

/// The broker ids the name server routes for `broker_name` on [`TOPIC`]: (id, address).
pub fn routed(namesrv: &mut Client, broker_name: &str) -> Vec<(i64, String)> {
    match namesrv.get_route(TOPIC) {
        Ok(Some(route)) => route
            .broker_datas
            .iter()
            .filter(|b| b.broker_name == broker_name)
            .flat_map(|b| b.broker_addrs.iter().map(|(id, a)| (*id, a.clone())))
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether the answer is SUCCESS; panics with the remark otherwise.
fn ok(resp: &RemotingCommand, what: &str) {
    assert_eq!(resp.code, 0, "{what}: {:?}", resp.remark);
}

fn ext_i64(resp: &RemotingCommand, key: &str) -> Option<i64> {
    resp.ext(key).and_then(|v| v.parse().ok())
}

fn millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What a stand-in broker knows about its set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Role {
    /// The id the controller gave it.
    pub controller_id: i64,
    pub master_id: Option<i64>,
    pub master_addr: Option<String>,
    pub master_epoch: i64,
    pub sync_state_set_epoch: i64,
    /// The id it last registered with the name server (0 as master).
    pub namesrv_id: i64,
    /// The `stateVersion` of its last name-server registration.
    pub state_version: i64,
}

impl Role {
    pub fn is_master(&self) -> bool {
        self.master_id == Some(self.controller_id)
    }
}

/// A 1008 as received: (masterBrokerId, masterEpoch, masterAddress).
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub master_id: i64,
    pub master_epoch: i64,
    pub master_addr: Option<String>,
}

/// Where a broker finds its name server and its controllers (`controllerAddr`, several for
/// a group).
#[derive(Debug, Clone)]
pub struct Endpoints {
    pub namesrv: String,
    pub controllers: Vec<String>,
}

/// Broker settings a test may change.
#[derive(Debug, Clone)]
pub struct BrokerOptions {
    /// `controllerHeartBeatTimeoutMills`, sent as `heartbeatTimeoutMills`.
    pub heartbeat_timeout_ms: i64,
    /// `brokerHeartbeatInterval`.
    pub heartbeat_interval: Duration,
    /// As rocketmq-rust 1.0: heartbeats are requests and a master writes only under a lease.
    pub write_leases: bool,
}

impl Default for BrokerOptions {
    fn default() -> Self {
        BrokerOptions {
            heartbeat_timeout_ms: 10_000,
            heartbeat_interval: Duration::from_millis(200),
            write_leases: false,
        }
    }
}

impl BrokerOptions {
    /// A rocketmq-rust 1.0 broker (see [`BrokerOptions::write_leases`]).
    pub fn rocketmq_rust() -> Self {
        BrokerOptions {
            write_leases: true,
            ..BrokerOptions::default()
        }
    }
}

/// A write lease as the broker holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    pub broker_id: i64,
    pub master_epoch: i64,
    pub generation: i64,
    /// Until when writes are taken: the grant's duration less its margin, counted from when
    /// the heartbeat was sent (rocketmq-rust 1.0's rule).
    pub valid_until: Instant,
}

/// The broker's lease store: what it holds, and every grant it saw.
#[derive(Debug, Default)]
pub struct LeaseStore {
    pub held: Option<Lease>,
    /// (when, generation) of each grant accepted.
    pub accepted: Vec<(Instant, i64)>,
    /// Grants refused: (generation, why).
    pub refused: Vec<(i64, String)>,
    /// When an answered heartbeat installed no lease while one was held (writes fenced).
    pub fenced: Vec<Instant>,
}

impl LeaseStore {
    /// An answered heartbeat: its grant, if any, is offered; none taken fences writes.
    fn answered(&mut self, body: &[u8], role: &Role, sent: Instant) {
        let taken = self.accepted.len();
        if !body.is_empty() {
            self.offer(body, role, sent);
        }
        if self.accepted.len() == taken && self.held.take().is_some() {
            self.fenced.push(Instant::now());
        }
    }

    /// rocketmq-rust 1.0's checks: the margin at least 1 s and below the duration, the
    /// authority its own, and a generation above any it accepted before.
    fn offer(&mut self, body: &[u8], role: &Role, sent: Instant) {
        let Ok(doc) = json::parse(body) else {
            self.refused.push((-1, "not JSON".into()));
            return;
        };
        let int = |key: &str| doc.get(key).and_then(json::Value::as_i64);
        let (Some(broker_id), Some(epoch), Some(generation), Some(duration), Some(margin)) = (
            int("brokerId"),
            int("masterEpoch"),
            int("generation"),
            int("leaseDurationMillis"),
            int("safetyMarginMillis"),
        ) else {
            self.refused
                .push((-1, "a grant without all its fields".into()));
            return;
        };
        let last = self.accepted.last().map_or(i64::MIN, |(_, g)| *g);
        let why = if margin < 1_000 || duration <= margin {
            Some("unsafe margin")
        } else if broker_id != role.controller_id || epoch != role.master_epoch {
            Some("another authority")
        } else if generation <= last {
            Some("generation not above the last")
        } else {
            None
        };
        if let Some(why) = why {
            self.refused.push((generation, why.into()));
            return;
        }
        let valid_until = sent + Duration::from_millis((duration - margin) as u64);
        self.accepted.push((Instant::now(), generation));
        self.held = Some(Lease {
            broker_id,
            master_epoch: epoch,
            generation,
            valid_until,
        });
    }
}

struct Shared {
    name: String,
    addr: String,
    options: BrokerOptions,
    stop: AtomicBool,
    heartbeating: AtomicBool,
    /// The connection to the controller leader (requests and heartbeats share it, as a Java
    /// broker's remoting client shares one channel per address).
    controller: Mutex<Option<Client>>,
    controllers: Vec<String>,
    leases: Mutex<LeaseStore>,
    namesrv_addr: String,
    namesrv: Mutex<Option<Client>>,
    role: Mutex<Role>,
    notices: Mutex<Vec<Notice>>,
    registrations: Mutex<i64>,
}

/// A controller-mode broker reduced to its conversation with the controller and the name
/// server (no message store, no HA: the "replication" is whatever the test says).
pub struct StandInBroker {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl StandInBroker {
    /// Runs the start sequence; returns once the broker has a role and is registered with
    /// the name server.
    pub fn start(server: &ControllerServer, name: &str, options: BrokerOptions) -> StandInBroker {
        StandInBroker::start_with(&server.endpoints(), name, options)
    }

    /// As [`StandInBroker::start`], for any name server and controllers.
    pub fn start_with(at: &Endpoints, name: &str, options: BrokerOptions) -> StandInBroker {
        let listener = TcpListener::bind("127.0.0.1:0").expect("broker listener");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("address").to_string();
        let shared = Arc::new(Shared {
            name: name.to_string(),
            addr,
            options,
            stop: AtomicBool::new(false),
            heartbeating: AtomicBool::new(true),
            controller: Mutex::new(None),
            controllers: at.controllers.clone(),
            leases: Mutex::new(LeaseStore::default()),
            namesrv_addr: at.namesrv.clone(),
            namesrv: Mutex::new(Some(
                Client::connect(&at.namesrv, Duration::from_secs(10))
                    .expect("connect to name server"),
            )),
            role: Mutex::new(Role::default()),
            notices: Mutex::new(Vec::new()),
            registrations: Mutex::new(0),
        });
        let leader = discover_leader(&at.controllers).expect("a controller leader");
        *shared.controller.lock().unwrap() =
            Some(Client::connect(&leader, Duration::from_secs(10)).expect("connect to leader"));
        shared.register_with_controller();
        shared.heartbeat();
        shared.elect_if_no_master();
        shared.register_with_namesrv();
        let mut threads = Vec::new();
        let s = shared.clone();
        threads.push(std::thread::spawn(move || s.heartbeat_loop()));
        let s = shared.clone();
        threads.push(std::thread::spawn(move || s.serve(listener)));
        StandInBroker { shared, threads }
    }

    pub fn addr(&self) -> &str {
        &self.shared.addr
    }

    pub fn role(&self) -> Role {
        self.shared.role.lock().unwrap().clone()
    }

    pub fn notices(&self) -> Vec<Notice> {
        self.shared.notices.lock().unwrap().clone()
    }

    /// Whether it takes writes now: a master holding an unexpired lease for its authority.
    pub fn can_write(&self) -> bool {
        let role = self.role();
        let leases = self.shared.leases.lock().unwrap();
        role.is_master()
            && leases.held.as_ref().is_some_and(|l| {
                l.valid_until > Instant::now()
                    && l.broker_id == role.controller_id
                    && l.master_epoch == role.master_epoch
            })
    }

    /// The generation of the lease held (0: none yet).
    pub fn lease_generation(&self) -> i64 {
        let leases = self.shared.leases.lock().unwrap();
        leases.held.as_ref().map_or(0, |l| l.generation)
    }

    /// Grants refused by the lease store: (generation, why).
    pub fn refused_grants(&self) -> Vec<(i64, String)> {
        self.shared.leases.lock().unwrap().refused.clone()
    }

    /// How many times its writes were fenced (a heartbeat answer without a lease) after `since`.
    pub fn fenced_after(&self, since: Instant) -> usize {
        let leases = self.shared.leases.lock().unwrap();
        leases.fenced.iter().filter(|at| **at > since).count()
    }

    /// When the first grant above `generation` was accepted, if one was.
    pub fn accepted_after(&self, generation: i64) -> Option<Instant> {
        let leases = self.shared.leases.lock().unwrap();
        leases
            .accepted
            .iter()
            .find(|(_, g)| *g > generation)
            .map(|(at, _)| *at)
    }

    /// As a master whose HA connections show `ids` caught up: 1001 with the new set.
    pub fn alter_sync_state_set(&self, ids: &[i64]) {
        let role = self.role();
        assert!(role.is_master(), "only a master alters its SyncStateSet");
        let set: Vec<String> = ids.iter().map(i64::to_string).collect();
        let body = format!(
            "{{\"syncStateSet\":[{}],\"syncStateSetEpoch\":{}}}",
            set.join(","),
            role.sync_state_set_epoch
        );
        let resp = self.shared.controller_request(
            1001,
            &[
                ("brokerName", &self.shared.name),
                ("masterBrokerId", &role.controller_id.to_string()),
                ("masterEpoch", &role.master_epoch.to_string()),
                ("invokeTime", &millis().to_string()),
            ],
            body.as_bytes(),
        );
        ok(&resp, "1001");
        let epoch = ext_i64(&resp, "newSyncStateSetEpoch").expect("newSyncStateSetEpoch");
        self.shared.role.lock().unwrap().sync_state_set_epoch = epoch;
    }

    /// A crash (kill -9): every connection closes, nothing more is sent.
    pub fn kill(mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.controller.lock().unwrap().take();
        self.shared.namesrv.lock().unwrap().take();
        for t in self.threads.drain(..) {
            t.join().expect("stand-in broker thread");
        }
    }

    /// A hung process: heartbeats stop, the connections stay open.
    pub fn hang(&self) {
        self.shared.heartbeating.store(false, Ordering::SeqCst);
    }

    /// Whether the controller closed this broker's connection (it does for expired brokers).
    pub fn controller_closed_connection(&self, wait: Duration) -> bool {
        let mut guard = self.shared.controller.lock().unwrap();
        guard.as_mut().map_or(true, |c| c.is_closed_by_peer(wait))
    }
}

impl Drop for StandInBroker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// 1005 to each configured controller address: the first leader address one names (a
/// broker's `controllerAddr` may list several).
fn discover_leader(controllers: &[String]) -> Option<String> {
    controllers.iter().find_map(|addr| {
        let mut c = Client::connect(addr, Duration::from_secs(1)).ok()?;
        let resp = c.request(1005, &[], b"").ok()?;
        (resp.code == 0)
            .then(|| resp.ext("controllerLeaderAddress").map(str::to_string))
            .flatten()
    })
}

impl Shared {
    fn controller_request(&self, code: i32, ext: &[(&str, &str)], body: &[u8]) -> RemotingCommand {
        let mut guard = self.controller.lock().unwrap();
        let client = guard.as_mut().expect("connected to the controller");
        client
            .request(code, ext, body)
            .unwrap_or_else(|e| panic!("request {code}: {e}"))
    }

    fn cluster_and_name(&self) -> [(&'static str, String); 2] {
        [
            ("clusterName", CLUSTER.to_string()),
            ("brokerName", self.name.clone()),
        ]
    }

    /// 1012 then 1013 (the temp-file dance of `.broker.meta` left out), then 1003.
    fn register_with_controller(&self) {
        let [cluster, name] = self.cluster_and_name();
        let base = [(cluster.0, cluster.1.as_str()), (name.0, name.1.as_str())];
        let resp = self.controller_request(1012, &base, b"");
        ok(&resp, "1012");
        let id = ext_i64(&resp, "nextBrokerId").expect("nextBrokerId");
        let check = format!("{};{}", self.addr, millis());
        let mut ext = base.to_vec();
        let id_text = id.to_string();
        ext.push(("appliedBrokerId", &id_text));
        ext.push(("registerCheckCode", &check));
        ok(&self.controller_request(1013, &ext, b""), "1013");
        let mut ext = base.to_vec();
        ext.push(("brokerId", &id_text));
        ext.push(("brokerAddress", &self.addr));
        let resp = self.controller_request(1003, &ext, b"");
        ok(&resp, "1003");
        let mut role = self.role.lock().unwrap();
        role.controller_id = id;
        adopt(&mut role, &resp);
    }

    /// 1002 when no master is known: SUCCESS or 2011 both name the master to follow.
    fn elect_if_no_master(&self) {
        let id = {
            let role = self.role.lock().unwrap();
            if role.master_id.is_some() {
                return;
            }
            role.controller_id.to_string()
        };
        let [cluster, name] = self.cluster_and_name();
        let ext = [
            (cluster.0, cluster.1.as_str()),
            (name.0, name.1.as_str()),
            ("brokerId", &id),
            ("designateElect", "false"),
            ("invokeTime", &millis().to_string()),
        ];
        let resp = self.controller_request(1002, &ext, b"");
        assert!(
            resp.code == 0 || resp.code == 2011,
            "1002: {} {:?}",
            resp.code,
            resp.remark
        );
        adopt(&mut self.role.lock().unwrap(), &resp);
    }

    /// One 904: oneway as Java brokers send it, or as a request reading the lease in the
    /// answer (rocketmq-rust), finding the leader again when the connection fails or the
    /// node answers 2007.
    fn heartbeat(&self) {
        let role = self.role.lock().unwrap().clone();
        if self.options.write_leases {
            return self.heartbeat_for_lease(&role);
        }
        let [cluster, name] = self.cluster_and_name();
        let ext = [
            (cluster.0, cluster.1.as_str()),
            ("brokerAddr", &self.addr),
            (name.0, name.1.as_str()),
            ("brokerId", &role.controller_id.to_string()),
            ("epoch", &role.master_epoch.to_string()),
            ("maxOffset", "100"),
            ("confirmOffset", "100"),
            (
                "heartbeatTimeoutMills",
                &self.options.heartbeat_timeout_ms.to_string(),
            ),
        ];
        if let Some(client) = self.controller.lock().unwrap().as_mut() {
            // A failure shows as the controller's view of this broker, which tests check.
            let _ = client.oneway(904, &ext, b"");
        }
    }

    fn heartbeat_for_lease(&self, role: &Role) {
        let [cluster, name] = self.cluster_and_name();
        let id = role.controller_id.to_string();
        let epoch = role.master_epoch.to_string();
        let timeout = self.options.heartbeat_timeout_ms.to_string();
        let ext = [
            (cluster.0, cluster.1.as_str()),
            ("brokerAddr", &self.addr),
            (name.0, name.1.as_str()),
            ("brokerId", &id),
            ("epoch", &epoch),
            ("maxOffset", "100"),
            ("confirmOffset", "100"),
            ("heartbeatTimeoutMills", &timeout),
            ("storeReady", "true"),
        ];
        let sent = Instant::now();
        let answer = {
            let mut guard = self.controller.lock().unwrap();
            let answer = guard.as_mut().map(|c| c.request(904, &ext, b""));
            if !matches!(&answer, Some(Ok(r)) if r.code == 0) {
                // Gone, or no longer the leader: the next heartbeat goes to the one named now.
                *guard = discover_leader(&self.controllers)
                    .and_then(|a| Client::connect(&a, Duration::from_secs(1)).ok());
            }
            answer
        };
        if let Some(Ok(resp)) = answer {
            if resp.code == 0 {
                self.leases.lock().unwrap().answered(&resp.body, role, sent);
            }
        }
    }

    fn heartbeat_loop(&self) {
        while !self.stop.load(Ordering::SeqCst) {
            std::thread::sleep(self.options.heartbeat_interval);
            if self.heartbeating.load(Ordering::SeqCst) {
                self.heartbeat();
            }
        }
    }

    /// REGISTER_BROKER to the name server in the current role.
    fn register_with_namesrv(&self) {
        let mut role = self.role.lock().unwrap();
        role.namesrv_id = if role.is_master() {
            0
        } else {
            role.controller_id
        };
        role.state_version = role.master_epoch;
        let mut counter = self.registrations.lock().unwrap();
        *counter += 1;
        let body = RegisterBody {
            data_version: DataVersion {
                counter: *counter,
                state_version: role.master_epoch,
                timestamp: millis() as i64,
            },
            topics: vec![(
                TOPIC.to_string(),
                TopicConfig {
                    topic_name: TOPIC.to_string(),
                    read_queue_nums: 4,
                    write_queue_nums: 4,
                    perm: 6,
                    topic_sys_flag: 0,
                },
            )],
            filter_servers: Some(Vec::new()),
            mappings: Vec::new(),
        };
        let identity = BrokerIdentity {
            cluster: CLUSTER.to_string(),
            broker_name: self.name.clone(),
            broker_addr: self.addr.clone(),
            broker_id: role.namesrv_id,
            ha_server_addr: self.addr.clone(),
        };
        let mut guard = self.namesrv.lock().unwrap();
        if guard.is_none() {
            *guard = Some(
                Client::connect(&self.namesrv_addr, Duration::from_secs(10)).expect("reconnect"),
            );
        }
        let client = guard.as_mut().expect("name server connection");
        client
            .register_broker(&identity, &body, &RegisterOptions::default())
            .expect("REGISTER_BROKER");
    }

    /// The broker's own port: takes 1008 frames (each on a fresh connection from the
    /// controller's sender) until stopped.
    fn serve(&self, listener: TcpListener) {
        while !self.stop.load(Ordering::SeqCst) {
            match listener.accept() {
                Ok((stream, _)) => self.read_notices(stream),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("broker listener: {e}"),
            }
        }
    }

    /// Frames of one connection as they come (the controller keeps its connection open and
    /// reuses it), until it closes or the broker stops.
    fn read_notices(&self, mut stream: TcpStream) {
        stream.set_nonblocking(false).expect("blocking");
        stream
            .set_read_timeout(Some(Duration::from_millis(50)))
            .expect("timeout");
        let mut buf = BytesMut::new();
        let mut chunk = [0u8; 4096];
        while !self.stop.load(Ordering::SeqCst) {
            while let Ok(Some(f)) = frame::next_frame(&mut buf, 1 << 20) {
                let cmd = RemotingCommand::decode(f, &DecodeLimits::default()).expect("frame");
                assert_eq!(cmd.code, 1008, "the controller sends brokers 1008 only");
                assert!(cmd.is_oneway(), "1008 is oneway");
                self.on_role_change(&cmd);
            }
            match stream.read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => return,
            }
        }
    }

    /// Java's `changeBrokerRole`: only a higher master epoch is acted on.
    fn on_role_change(&self, cmd: &RemotingCommand) {
        let notice = Notice {
            master_id: ext_i64(cmd, "masterBrokerId").expect("masterBrokerId"),
            master_epoch: ext_i64(cmd, "masterEpoch").expect("masterEpoch"),
            master_addr: cmd.ext("masterAddress").map(str::to_string),
        };
        self.notices.lock().unwrap().push(notice.clone());
        {
            let mut role = self.role.lock().unwrap();
            if notice.master_epoch <= role.master_epoch {
                return;
            }
            role.master_id = Some(notice.master_id);
            role.master_addr = notice.master_addr;
            role.master_epoch = notice.master_epoch;
            if let Some(e) = ext_i64(cmd, "syncStateSetEpoch") {
                role.sync_state_set_epoch = e;
            }
        }
        self.register_with_namesrv();
    }
}

/// Takes the master fields of a 1003/1002 answer, when it has them.
fn adopt(role: &mut Role, resp: &RemotingCommand) {
    if let Some(master) = ext_i64(resp, "masterBrokerId") {
        role.master_id = Some(master);
        role.master_addr = resp.ext("masterAddress").map(str::to_string);
        role.master_epoch = ext_i64(resp, "masterEpoch").unwrap_or(0);
        role.sync_state_set_epoch = ext_i64(resp, "syncStateSetEpoch").unwrap_or(0);
    }
}

/// Waits until the name server routes `broker_name`'s id 0 at `addr` and nothing else at 0.
pub fn wait_for_master_route(namesrv: &mut Client, broker_name: &str, addr: &str) -> bool {
    wait_until(Duration::from_secs(30), || {
        routed(namesrv, broker_name)
            .iter()
            .any(|(id, a)| *id == 0 && a == addr)
    })
}
