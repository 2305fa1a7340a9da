//! The typed client calls against a real server, one test per request code the server
//! answers, each with both header serializations.

mod common;

use common::*;
use rmq_namesrv::client::api::{BrokerIdentity, RegisterOptions, RegisterResult};
use rmq_namesrv::client::{Client, ClientError};
use rmq_namesrv::remoting::command::SerializeType;
use rmq_namesrv::request::Request;
use rmq_namesrv::route::model::{self, DataVersion, QueueData, RegisterBody};
use std::collections::BTreeMap;
use std::time::Duration;

fn identity(name: &str, addr: &str, id: i64) -> BrokerIdentity {
    BrokerIdentity {
        cluster: "DefaultCluster".into(),
        broker_name: name.into(),
        broker_addr: addr.into(),
        broker_id: id,
        ha_server_addr: addr.replace(":10911", ":10912"),
    }
}

fn flagged(name: &str, flag: i32) -> rmq_namesrv::route::model::TopicConfig {
    let mut t = topic(name, 4, 6);
    t.topic_sys_flag = flag;
    t
}

/// A server with broker group `broker-a` registered: a master (JSON body) and a slave
/// (compressed body) on two connections, and a client speaking `serialize_type`.
struct Registered {
    /// Keeps the server running.
    _server: TestServer,
    c: Client,
    master: BrokerIdentity,
    slave: BrokerIdentity,
    body: RegisterBody,
    master_result: RegisterResult,
    slave_result: RegisterResult,
    /// Keeps the slave's connection (and so its registration) open.
    _slave_conn: Client,
}

fn registered(serialize_type: SerializeType) -> Registered {
    let server = TestServer::start();
    let mut c = server.client();
    c.serialize_type = serialize_type;
    let master = identity("broker-a", "127.0.0.1:10911", 0);
    let slave = identity("broker-a", "127.0.0.1:10921", 1);
    let body = body_with(
        1,
        &[
            topic("TopicA", 8, 6),
            flagged("Unit", 1),
            flagged("UnitSub", 2),
        ],
    );
    let master_result = c
        .register_broker(&master, &body, &RegisterOptions::default())
        .expect("register master");
    let mut slave_conn = server.client();
    slave_conn.serialize_type = serialize_type;
    let compressed = RegisterOptions {
        compressed: true,
        ..RegisterOptions::default()
    };
    let slave_result = slave_conn
        .register_broker(&slave, &body, &compressed)
        .expect("register slave");
    Registered {
        _server: server,
        c,
        master,
        slave,
        body,
        master_result,
        slave_result,
        _slave_conn: slave_conn,
    }
}

/// 103, JSON and compressed bodies.
fn register_broker(st: SerializeType) {
    let r = registered(st);
    assert_eq!(r.master_result.master_addr, None);
    assert_eq!(
        r.slave_result.master_addr.as_deref(),
        Some("127.0.0.1:10911")
    );
}

/// 105.
fn get_route(st: SerializeType) {
    let mut r = registered(st);
    let route = r.c.get_route("TopicA").expect("route").expect("exists");
    assert_eq!(route.queue_datas[0].read_queue_nums, 8);
    assert_eq!(route.broker_datas[0].broker_addrs.len(), 2);
    assert_eq!(r.c.get_route("Missing").expect("route call"), None);
}

/// 106.
fn get_cluster_info(st: SerializeType) {
    let mut r = registered(st);
    let info = r.c.get_cluster_info().expect("cluster info");
    assert_eq!(
        info.cluster_addr_table.get("DefaultCluster"),
        Some(&vec!["broker-a".to_string()])
    );
}

/// 901.
fn get_broker_member_group(st: SerializeType) {
    let mut r = registered(st);
    let group =
        r.c.get_broker_member_group("DefaultCluster", "broker-a")
            .expect("member group");
    let expected: BTreeMap<i64, String> = [
        (0, "127.0.0.1:10911".to_string()),
        (1, "127.0.0.1:10921".to_string()),
    ]
    .into();
    assert_eq!(group.broker_addrs, expected);
    assert_eq!(group.broker_name, "broker-a");
}

/// 322.
fn query_data_version(st: SerializeType) {
    let mut r = registered(st);
    let (changed, stored) =
        r.c.query_data_version(&r.master, Some(&r.body.data_version))
            .expect("data version");
    assert!(!changed);
    assert_eq!(stored, Some(r.body.data_version));
    let other = DataVersion {
        counter: 99,
        ..r.body.data_version
    };
    assert!(
        r.c.query_data_version(&r.master, Some(&other))
            .expect("dv")
            .0
    );
}

/// 904.
fn broker_heartbeat(st: SerializeType) {
    let mut r = registered(st);
    r.c.broker_heartbeat(&r.master).expect("heartbeat");
}

/// 206.
fn get_all_topic_list(st: SerializeType) {
    let mut r = registered(st);
    let mut all = r.c.get_all_topic_list().expect("all topics");
    all.sort();
    assert!(all.contains(&"TopicA".to_string()) && all.contains(&"Unit".to_string()));
}

/// 224.
fn get_topics_by_cluster(st: SerializeType) {
    let mut r = registered(st);
    assert!(r
        .c
        .get_topics_by_cluster("DefaultCluster")
        .expect("by cluster")
        .contains(&"TopicA".to_string()));
}

/// 304.
fn get_system_topic_list(st: SerializeType) {
    let mut r = registered(st);
    let resp = r.c.send_ok(&Request::GetSystemTopicList).expect("304");
    let (topics, broker_addr) = model::decode_topic_list(&resp.body).expect("TopicList");
    assert!(topics.contains(&"DefaultCluster".to_string()));
    assert_eq!(broker_addr.as_deref(), Some("127.0.0.1:10911"));
}

/// 311.
fn get_unit_topic_list(st: SerializeType) {
    let mut r = registered(st);
    assert_eq!(
        r.c.topic_list(&Request::GetUnitTopicList).expect("311"),
        vec!["Unit"]
    );
}

/// 312.
fn get_has_unit_sub_topic_list(st: SerializeType) {
    let mut r = registered(st);
    assert_eq!(
        r.c.topic_list(&Request::GetHasUnitSubTopicList)
            .expect("312"),
        vec!["UnitSub"]
    );
}

/// 313.
fn get_has_unit_sub_ununit_topic_list(st: SerializeType) {
    let mut r = registered(st);
    assert_eq!(
        r.c.topic_list(&Request::GetHasUnitSubUnunitTopicList)
            .expect("313"),
        vec!["UnitSub"]
    );
}

fn registered_queue() -> QueueData {
    QueueData {
        broker_name: "broker-a".into(),
        read_queue_nums: 2,
        write_queue_nums: 2,
        perm: 6,
        topic_sys_flag: 0,
    }
}

/// 217.
fn register_topic(st: SerializeType) {
    let mut r = registered(st);
    let queue = registered_queue();
    r.c.register_topic("Registered", std::slice::from_ref(&queue))
        .expect("register topic");
    let route = r.c.get_route("Registered").expect("route").expect("exists");
    assert_eq!(route.queue_datas, vec![queue]);
}

/// 205 and 327, over the three registered topics and one added by 217.
fn wipe_and_add_write_perm(st: SerializeType) {
    let mut r = registered(st);
    r.c.register_topic("Registered", &[registered_queue()])
        .expect("register topic");
    assert_eq!(r.c.write_perm("broker-a", false).expect("wipe"), 4);
    assert_eq!(r.c.write_perm("broker-a", true).expect("add"), 4);
}

/// 216, everywhere and in another cluster only.
fn delete_topic(st: SerializeType) {
    let mut r = registered(st);
    r.c.register_topic("Registered", &[registered_queue()])
        .expect("register topic");
    r.c.delete_topic("Registered", None).expect("delete");
    assert_eq!(r.c.get_route("Registered").expect("route"), None);
    r.c.delete_topic("TopicA", Some("OtherCluster"))
        .expect("delete elsewhere");
    assert!(r.c.get_route("TopicA").expect("route").is_some());
}

/// KV: 100, 101, 102, 219.
fn kv_config(st: SerializeType) {
    let mut r = registered(st);
    let c = &mut r.c;
    c.put_kv_config("NS", "k1", "v1").expect("put");
    c.put_kv_config("NS", "k2", "v2").expect("put");
    assert_eq!(
        c.get_kv_config("NS", "k1").expect("get"),
        Some("v1".to_string())
    );
    let mut list = c
        .get_kv_list("NS")
        .expect("list")
        .expect("namespace exists");
    list.sort();
    assert_eq!(
        list,
        vec![("k1".into(), "v1".into()), ("k2".into(), "v2".into())]
    );
    c.delete_kv_config("NS", "k1").expect("delete");
    assert_eq!(c.get_kv_config("NS", "k1").expect("get"), None);
    assert_eq!(c.get_kv_list("Nope").expect("list"), None);
}

/// Config: 318, 319 (black-listed key refused).
fn namesrv_config(st: SerializeType) {
    let mut r = registered(st);
    let c = &mut r.c;
    c.update_namesrv_config(&[("orderMessageEnable", "true")])
        .expect("update");
    let config = c.get_namesrv_config().expect("config");
    assert!(config.contains(&("orderMessageEnable".into(), "true".into())));
    match c.update_namesrv_config(&[("kvConfigPath", "/tmp/evil")]) {
        Err(ClientError::Response { code: 16, remark }) => {
            assert_eq!(
                remark.as_deref(),
                Some("Can not update config in black list.")
            )
        }
        other => panic!("expected NO_PERMISSION, got {other:?}"),
    }
}

/// The stats extension.
fn stats(st: SerializeType) {
    let mut r = registered(st);
    let st = r.c.stats().expect("stats");
    assert_eq!(st.value("brokers"), 2);
    assert_eq!(st.value("registrations"), 2);
    assert!(st.values.contains(&("registrations".to_string(), 2)));
    assert!(st.values.iter().any(|(k, _)| k == "rejectedBusy"));
    assert!(st.connections >= 2);
    assert!(st.requests.iter().any(|(code, n)| *code == 103 && *n == 2));
}

/// 104: removal is asynchronous.
fn unregister_broker(st: SerializeType) {
    let mut r = registered(st);
    r.c.unregister_broker(&r.slave).expect("unregister");
    let c = &mut r.c;
    assert!(wait_until(Duration::from_secs(5), || {
        c.get_broker_member_group("DefaultCluster", "broker-a")
            .map(|g| g.broker_addrs.len() == 1)
            .unwrap_or(false)
    }));
}

/// Each typed call as a test of its own, once with JSON and once with ROCKETMQ headers:
/// `json::get_route`, `rocketmq::get_route`, ...
macro_rules! with_both_headers {
    ($($call:ident),* $(,)?) => {
        mod json {
            $(#[test]
            fn $call() {
                super::$call(super::SerializeType::Json);
            })*
        }
        mod rocketmq {
            $(#[test]
            fn $call() {
                super::$call(super::SerializeType::RocketMq);
            })*
        }
    };
}

with_both_headers!(
    register_broker,
    get_route,
    get_cluster_info,
    get_broker_member_group,
    query_data_version,
    broker_heartbeat,
    get_all_topic_list,
    get_topics_by_cluster,
    get_system_topic_list,
    get_unit_topic_list,
    get_has_unit_sub_topic_list,
    get_has_unit_sub_ununit_topic_list,
    register_topic,
    wipe_and_add_write_perm,
    delete_topic,
    kv_config,
    namesrv_config,
    stats,
    unregister_broker,
);

#[test]
fn errors_say_what_kind_they_are() {
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").to_string()
    };
    let err = Client::connect(&dead, Duration::from_secs(1))
        .map(|_| ())
        .map_err(ClientError::from)
        .expect_err("nothing listens");
    assert!(matches!(err, ClientError::Io(_)) && err.is_failover());

    let server = TestServer::start();
    let mut c = server.client();
    let code = c
        .request(29_999, &[], b"")
        .map(|r| r.code)
        .expect("answered");
    assert_eq!(code, 3);
    let err = c.update_namesrv_config(&[("configStorePath", "/x")]);
    let err = err.expect_err("black-listed");
    assert!(matches!(err, ClientError::Response { code: 16, .. }));
    assert!(!err.is_failover());
    assert_eq!(
        err.to_string(),
        "NO_PERMISSION (16): Can not update config in black list."
    );
}
