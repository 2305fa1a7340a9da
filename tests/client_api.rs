//! The typed client calls against a real server, one per request code the server answers,
//! with both header serializations.

mod common;

use common::*;
use rmq_namesrv::client::api::{BrokerIdentity, RegisterOptions};
use rmq_namesrv::client::{Client, ClientError};
use rmq_namesrv::remoting::command::SerializeType;
use rmq_namesrv::route::model::{DataVersion, QueueData};
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

fn every_typed_call(serialize_type: SerializeType) {
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

    // 103, JSON and compressed bodies.
    let r = c
        .register_broker(&master, &body, &RegisterOptions::default())
        .expect("register master");
    assert_eq!(r.master_addr, None);
    let mut slave_conn = server.client();
    slave_conn.serialize_type = serialize_type;
    let r = slave_conn
        .register_broker(
            &slave,
            &body,
            &RegisterOptions {
                compressed: true,
                ..RegisterOptions::default()
            },
        )
        .expect("register slave");
    assert_eq!(r.master_addr.as_deref(), Some("127.0.0.1:10911"));

    // 105, 106, 901.
    let route = c.get_route("TopicA").expect("route").expect("exists");
    assert_eq!(route.queue_datas[0].read_queue_nums, 8);
    assert_eq!(route.broker_datas[0].broker_addrs.len(), 2);
    assert_eq!(c.get_route("Missing").expect("route call"), None);
    let info = c.get_cluster_info().expect("cluster info");
    assert_eq!(
        info.cluster_addr_table.get("DefaultCluster"),
        Some(&vec!["broker-a".to_string()])
    );
    let group = c
        .get_broker_member_group("DefaultCluster", "broker-a")
        .expect("member group");
    let expected: BTreeMap<i64, String> = [
        (0, "127.0.0.1:10911".to_string()),
        (1, "127.0.0.1:10921".to_string()),
    ]
    .into();
    assert_eq!(group.broker_addrs, expected);
    assert_eq!(group.broker_name, "broker-a");

    // 322, 904.
    let (changed, stored) = c
        .query_data_version(&master, Some(&body.data_version))
        .expect("data version");
    assert!(!changed);
    assert_eq!(stored, Some(body.data_version));
    let other = DataVersion {
        counter: 99,
        ..body.data_version
    };
    assert!(c.query_data_version(&master, Some(&other)).expect("dv").0);
    c.broker_heartbeat(&master).expect("heartbeat");

    // Topic lists: 206, 224, 304, 311, 312, 313.
    let mut all = c.get_all_topic_list().expect("all topics");
    all.sort();
    assert!(all.contains(&"TopicA".to_string()) && all.contains(&"Unit".to_string()));
    assert!(c
        .get_topics_by_cluster("DefaultCluster")
        .expect("by cluster")
        .contains(&"TopicA".to_string()));
    let sys = c.get_system_topic_list().expect("system topics");
    assert!(sys.topics.contains(&"DefaultCluster".to_string()));
    assert_eq!(sys.broker_addr.as_deref(), Some("127.0.0.1:10911"));
    assert_eq!(c.get_unit_topic_list().expect("311"), vec!["Unit"]);
    assert_eq!(
        c.get_has_unit_sub_topic_list().expect("312"),
        vec!["UnitSub"]
    );
    assert_eq!(
        c.get_has_unit_sub_ununit_topic_list().expect("313"),
        vec!["UnitSub"]
    );

    // 217, 205, 327, 216.
    let queue = QueueData {
        broker_name: "broker-a".into(),
        read_queue_nums: 2,
        write_queue_nums: 2,
        perm: 6,
        topic_sys_flag: 0,
    };
    c.register_topic("Registered", std::slice::from_ref(&queue))
        .expect("register topic");
    let route = c.get_route("Registered").expect("route").expect("exists");
    assert_eq!(route.queue_datas, vec![queue]);
    assert_eq!(c.wipe_write_perm("broker-a").expect("wipe"), 4);
    assert_eq!(c.add_write_perm("broker-a").expect("add"), 4);
    c.delete_topic("Registered", None).expect("delete");
    assert_eq!(c.get_route("Registered").expect("route"), None);
    c.delete_topic("TopicA", Some("OtherCluster"))
        .expect("delete elsewhere");
    assert!(c.get_route("TopicA").expect("route").is_some());

    // KV: 100, 101, 102, 219.
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

    // Config: 318, 319 (black-listed key refused).
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

    // Stats extension.
    let st = c.stats().expect("stats");
    assert_eq!(st.brokers, 2);
    assert_eq!(st.registrations, 2);
    assert!(st.values.contains(&("registrations".to_string(), 2)));
    assert!(st.values.iter().any(|(k, _)| k == "rejectedBusy"));
    assert!(st.connections >= 2);
    assert!(st.requests.iter().any(|(code, n)| *code == 103 && *n == 2));

    // 104: removal is asynchronous.
    c.unregister_broker(&slave).expect("unregister");
    assert!(wait_until(Duration::from_secs(5), || {
        c.get_broker_member_group("DefaultCluster", "broker-a")
            .map(|g| g.broker_addrs.len() == 1)
            .unwrap_or(false)
    }));
}

#[test]
fn every_typed_call_with_json_headers() {
    every_typed_call(SerializeType::Json);
}

#[test]
fn every_typed_call_with_rocketmq_headers() {
    every_typed_call(SerializeType::RocketMq);
}

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
    assert_eq!(err.response_code(), Some(16));
    assert!(!err.is_failover());
    assert_eq!(
        err.to_string(),
        "NO_PERMISSION (16): Can not update config in black list."
    );
}
