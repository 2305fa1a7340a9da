//! The route registry over real TCP: registration, heartbeats, discovery, expiry and
//! batched unregistration, as RocketMQ 5.x peers expect them.

mod common;

use common::fixture;
use common::*;
use rmq_namesrv::remoting::codes::{request, response};
use rmq_namesrv::remoting::json;
use rmq_namesrv::route::model::{self, DataVersion, MappingInfo, TopicConfig};
use std::collections::BTreeMap;
use std::time::Duration;

fn addrs(pairs: &[(i64, &str)]) -> BTreeMap<i64, String> {
    pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
}

#[test]
fn masters_and_slaves_in_two_clusters_show_in_routes_and_cluster_info() {
    let server = TestServer::start();
    let mut c = server.client();
    let a0 = Broker::new("c1", "broker-a", "10.0.0.1:10911", 0);
    let a1 = Broker::new("c1", "broker-a", "10.0.0.2:10911", 1);
    let b0 = Broker::new("c2", "broker-b", "10.0.1.1:10911", 0);
    let shared = topic("Shared", 8, 6);
    let only_a = topic("OnlyA", 4, 6);
    assert_eq!(
        register(
            &mut c,
            &a0,
            &body_with(1, &[shared.clone(), only_a.clone()])
        )
        .code,
        0
    );
    let slave = register(
        &mut c,
        &a1,
        &body_with(1, &[shared.clone(), only_a.clone()]),
    );
    assert_eq!(slave.code, 0);
    // A slave learns its master's addresses.
    assert_eq!(slave.ext("masterAddr"), Some("10.0.0.1:10911"));
    assert_eq!(slave.ext("haServerAddr"), Some("10.0.0.1:10912"));
    assert_eq!(
        register(&mut c, &b0, &body_with(1, &[topic("Shared", 4, 6)])).code,
        0
    );

    let r = route_data(&mut c, "Shared").expect("route");
    assert_eq!(r.broker_datas.len(), 2);
    let a = r
        .broker_datas
        .iter()
        .find(|b| b.broker_name == "broker-a")
        .unwrap();
    assert_eq!(a.cluster, "c1");
    assert_eq!(
        a.broker_addrs,
        addrs(&[(0, "10.0.0.1:10911"), (1, "10.0.0.2:10911")])
    );
    assert!(!a.enable_acting_master);
    let b = r
        .broker_datas
        .iter()
        .find(|b| b.broker_name == "broker-b")
        .unwrap();
    assert_eq!(b.cluster, "c2");
    let qa = r
        .queue_datas
        .iter()
        .find(|q| q.broker_name == "broker-a")
        .unwrap();
    assert_eq!(
        (
            qa.read_queue_nums,
            qa.write_queue_nums,
            qa.perm,
            qa.topic_sys_flag
        ),
        (8, 8, 6, 0)
    );
    let qb = r
        .queue_datas
        .iter()
        .find(|q| q.broker_name == "broker-b")
        .unwrap();
    assert_eq!((qb.read_queue_nums, qb.write_queue_nums), (4, 4));
    let only = route_data(&mut c, "OnlyA").unwrap();
    assert_eq!(only.queue_datas.len(), 1);
    assert_eq!(only.broker_datas.len(), 1);
    assert!(route_data(&mut c, "Nope").is_none());

    let info = cluster_info(&mut c);
    assert_eq!(info.cluster_addr_table["c1"], vec!["broker-a".to_string()]);
    assert_eq!(info.cluster_addr_table["c2"], vec!["broker-b".to_string()]);
    assert_eq!(info.broker_addr_table["broker-a"].broker_addrs.len(), 2);

    // GET_BROKER_MEMBER_GROUP lists the group; an unknown group is empty but SUCCESS.
    let resp = c
        .request(
            request::GET_BROKER_MEMBER_GROUP,
            &[("clusterName", "c1"), ("brokerName", "broker-a")],
            b"",
        )
        .unwrap();
    assert_eq!(resp.code, 0);
    let body = String::from_utf8(resp.body.to_vec()).unwrap();
    assert_eq!(
        body,
        r#"{"brokerMemberGroup":{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"c1"}}"#
    );
    let resp = c
        .request(
            request::GET_BROKER_MEMBER_GROUP,
            &[("clusterName", "c1"), ("brokerName", "zzz")],
            b"",
        )
        .unwrap();
    assert_eq!(resp.code, 0);
    assert!(String::from_utf8(resp.body.to_vec())
        .unwrap()
        .contains(r#""brokerAddrs":{}"#));
}

#[test]
fn missing_topic_is_topic_not_exist_with_javas_remark() {
    let server = TestServer::start();
    let mut c = server.client();
    let resp = route(&mut c, "Missing");
    assert_eq!(resp.code, response::TOPIC_NOT_EXIST);
    assert_eq!(
        resp.remark.as_deref(),
        Some("No topic route info in name server for the topic: Missing\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.")
    );
}

#[test]
fn slave_promoted_to_master_moves_its_address_to_id_zero() {
    let server = TestServer::start();
    let mut c = server.client();
    let t = [topic("T", 4, 6)];
    register(
        &mut c,
        &Broker::new("c", "g", "10.0.0.1:10911", 0),
        &body_with(1, &t),
    );
    register(
        &mut c,
        &Broker::new("c", "g", "10.0.0.2:10911", 1),
        &body_with(1, &t),
    );
    // The old master leaves; the slave re-registers under id 0 from the same address.
    register(
        &mut c,
        &Broker::new("c", "g", "10.0.0.2:10911", 0),
        &body_with(2, &t),
    );
    let r = route_data(&mut c, "T").unwrap();
    assert_eq!(
        r.broker_datas[0].broker_addrs,
        addrs(&[(0, "10.0.0.2:10911")])
    );
}

#[test]
fn topics_follow_the_data_version() {
    let server = TestServer::start_with(|c| c.delete_topic_with_broker_registration = true);
    let mut c = server.client();
    let b = Broker::new("c", "g", "10.0.0.1:10911", 0);
    register(
        &mut c,
        &b,
        &body_with(1, &[topic("A", 4, 6), topic("B", 4, 6)]),
    );
    assert!(route_data(&mut c, "A").is_some());
    // Same dataVersion, different content: Java ignores topic changes until the version moves.
    register(
        &mut c,
        &b,
        &body_with(1, &[topic("A", 8, 6), topic("B", 4, 6), topic("C", 4, 6)]),
    );
    assert_eq!(
        route_data(&mut c, "A").unwrap().queue_datas[0].read_queue_nums,
        4
    );
    // A topic with no queue entry for this broker is (re)added even with the same version.
    assert!(route_data(&mut c, "C").is_some());
    // A new version applies changes and drops what the broker no longer reports.
    register(
        &mut c,
        &b,
        &body_with(2, &[topic("A", 8, 6), topic("D", 2, 6)]),
    );
    assert_eq!(
        route_data(&mut c, "A").unwrap().queue_datas[0].read_queue_nums,
        8
    );
    assert!(route_data(&mut c, "B").is_none());
    assert!(route_data(&mut c, "C").is_none());
    assert!(route_data(&mut c, "D").is_some());
}

#[test]
fn without_delete_topic_with_broker_registration_unreported_topics_stay() {
    let server = TestServer::start();
    let mut c = server.client();
    let b = Broker::new("c", "g", "10.0.0.1:10911", 0);
    register(
        &mut c,
        &b,
        &body_with(1, &[topic("A", 4, 6), topic("B", 4, 6)]),
    );
    // An incremental registration (only the new topic) must not remove the others.
    register(&mut c, &b, &body_with(2, &[topic("New", 4, 6)]));
    assert!(route_data(&mut c, "A").is_some());
    assert!(route_data(&mut c, "B").is_some());
    assert!(route_data(&mut c, "New").is_some());
}

#[test]
fn first_registration_with_one_topic_is_accepted() {
    let server = TestServer::start();
    let mut c = server.client();
    let b = Broker::new("c", "g", "10.0.0.1:10911", 0);
    let resp = register(&mut c, &b, &body_with(1, &[topic("Only", 4, 6)]));
    assert_eq!(resp.code, 0, "Java 5.3.3 refuses this; we accept it");
    assert!(route_data(&mut c, "Only").is_some());
}

#[test]
fn crc_mismatch_is_rejected_and_nothing_registered() {
    let server = TestServer::start();
    let mut c = server.client();
    let b = Broker::new("c", "g", "10.0.0.1:10911", 0);
    let resp = register_with(
        &mut c,
        &b,
        &body_with(1, &[topic("A", 4, 6)]),
        &RegisterOptions {
            body_crc32: Some(12345),
            ..RegisterOptions::default()
        },
    );
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert_eq!(resp.remark.as_deref(), Some("crc32 not match"));
    assert!(route_data(&mut c, "A").is_none());
    assert!(cluster_info(&mut c).broker_addr_table.is_empty());
    // bodyCrc32 0 means "not checked".
    let resp = register_with(
        &mut c,
        &b,
        &body_with(1, &[topic("A", 4, 6)]),
        &RegisterOptions {
            body_crc32: Some(0),
            ..RegisterOptions::default()
        },
    );
    assert_eq!(resp.code, 0);
}

#[test]
fn the_real_4x_registration_capture_registers_all_its_topics() {
    let server = TestServer::start();
    let mut c = server.client();
    let body = fixture("third_party/register_broker_103_body_v4.json");
    let ext_json = fixture("third_party/register_broker_103_extfields_v4.json");
    let ext = json::parse(&ext_json).unwrap();
    let pairs: Vec<(String, String)> = ext
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.to_text()))
        .collect();
    let refs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    // A 4.x broker announces a 4.x version (V4_9_3 = 399).
    c.version = 399;
    let resp = c.request(request::REGISTER_BROKER, &refs, &body).unwrap();
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    let r = route_data(&mut c, "BenchmarkTest").unwrap();
    assert_eq!(r.queue_datas[0].read_queue_nums, 1024);
    assert_eq!(
        r.broker_datas[0].broker_addrs,
        addrs(&[(0, "172.21.156.94:10911")])
    );
    let resp = c
        .request(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, &[], b"")
        .unwrap();
    let (topics, _) = model::decode_topic_list(&resp.body).unwrap();
    assert_eq!(topics.len(), 16);
}

#[test]
fn compressed_bodies_are_accepted_flagged_or_sniffed() {
    let server = TestServer::start();
    let mut c = server.client();
    let body = body_with(1, &[topic("Z1", 4, 6), topic("Z2", 2, 6)]);
    for (i, flagged) in [true, false].into_iter().enumerate() {
        let b = Broker::new("c", &format!("z{i}"), &format!("10.0.0.{i}:10911"), 0);
        let bytes = model::encode_register_body_compressed(&body, c.version);
        let resp = register_raw(
            &mut c,
            &b,
            &bytes,
            &RegisterOptions {
                compressed: flagged,
                ..RegisterOptions::default()
            },
        );
        assert_eq!(resp.code, 0, "{:?}", resp.remark);
    }
    let r = route_data(&mut c, "Z2").unwrap();
    assert_eq!(r.broker_datas.len(), 2);
    assert_eq!(r.queue_datas[0].read_queue_nums, 2);
}

#[test]
fn route_dialect_follows_the_request_version() {
    let server = TestServer::start();
    let mut c = server.client();
    let b = Broker::new("c", "g", "10.0.0.1:10911", 0);
    register(&mut c, &b, &body_with(1, &[topic("T/x", 4, 6)]));
    c.version = 479;
    let standard = String::from_utf8(route(&mut c, "T/x").body.to_vec()).unwrap();
    assert_eq!(
        standard,
        r#"{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"g","cluster":"c","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"g","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#
    );
    c.version = 317; // Go client
    let legacy = String::from_utf8(route(&mut c, "T/x").body.to_vec()).unwrap();
    assert!(
        legacy.contains(r#""brokerAddrs":{0:"10.0.0.1:10911"}"#),
        "{legacy}"
    );
    c.version = 333; // C++ client, but asking for standard JSON explicitly
    let resp = c
        .request(
            request::GET_ROUTEINFO_BY_TOPIC,
            &[("topic", "T/x"), ("acceptStandardJsonOnly", "true")],
            b"",
        )
        .unwrap();
    assert_eq!(String::from_utf8(resp.body.to_vec()).unwrap(), standard);
}

#[test]
fn steady_heartbeats_keep_a_broker_alive_and_silence_expires_it() {
    let server = TestServer::start_with(|c| c.scan_not_active_broker_interval = 100);
    let mut c = server.client();
    let alive = Broker::new("c", "alive", "10.0.0.1:10911", 0);
    let silent = Broker::new("c", "silent", "10.0.0.2:10911", 0);
    let timeout = RegisterOptions {
        heartbeat_timeout_millis: Some(600),
        ..RegisterOptions::default()
    };
    register_with(&mut c, &alive, &body_with(1, &[topic("A", 4, 6)]), &timeout);
    let mut silent_conn = server.client();
    register_with(
        &mut silent_conn,
        &silent,
        &body_with(1, &[topic("S", 4, 6)]),
        &timeout,
    );
    // Keep `alive` alive with BROKER_HEARTBEAT (and one QUERY_DATA_VERSION) while `silent` expires.
    let mut beats = 0;
    let gone = wait_until(Duration::from_secs(10), || {
        beats += 1;
        let ext = [
            ("clusterName", "c"),
            ("brokerAddr", "10.0.0.1:10911"),
            ("brokerName", "alive"),
            ("brokerId", "0"),
        ];
        if beats % 2 == 0 {
            c.request(request::BROKER_HEARTBEAT, &ext, b"").unwrap();
        } else {
            c.request(request::QUERY_DATA_VERSION, &ext, b"").unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        route_data(&mut c, "S").is_none()
    });
    assert!(gone, "the silent broker expires");
    assert!(
        silent_conn.is_closed_by_peer(Duration::from_secs(5)),
        "its connection is closed"
    );
    assert!(!cluster_info(&mut c)
        .broker_addr_table
        .contains_key("silent"));
    // `alive` has outlived several timeouts by now.
    std::thread::sleep(Duration::from_millis(700));
    c.request(
        request::BROKER_HEARTBEAT,
        &[
            ("clusterName", "c"),
            ("brokerAddr", "10.0.0.1:10911"),
            ("brokerName", "alive"),
        ],
        b"",
    )
    .unwrap();
    assert!(route_data(&mut c, "A").is_some());
    assert!(stat(&mut c, "expiries") >= 1);
}

#[test]
fn closing_the_registering_connection_unregisters_all_its_brokers() {
    let server = TestServer::start();
    let mut watcher = server.client();
    {
        let mut c = server.client();
        register(
            &mut c,
            &Broker::new("c", "g1", "10.0.0.1:10911", 0),
            &body_with(1, &[topic("T1", 4, 6)]),
        );
        register(
            &mut c,
            &Broker::new("c", "g2", "10.0.0.2:10911", 0),
            &body_with(1, &[topic("T2", 4, 6)]),
        );
        assert!(route_data(&mut watcher, "T1").is_some());
    }
    assert!(wait_until(Duration::from_secs(5), || {
        route_data(&mut watcher, "T1").is_none() && route_data(&mut watcher, "T2").is_none()
    }));
    assert!(cluster_info(&mut watcher).cluster_addr_table.is_empty());
}

#[test]
fn explicit_unregister_removes_the_broker_asynchronously() {
    let server = TestServer::start();
    let mut c = server.client();
    let b = Broker::new("c", "g", "10.0.0.1:10911", 0);
    register(&mut c, &b, &body_with(1, &[topic("T", 4, 6)]));
    let resp = c
        .request(
            request::UNREGISTER_BROKER,
            &[
                ("brokerName", "g"),
                ("brokerAddr", "10.0.0.1:10911"),
                ("clusterName", "c"),
                ("brokerId", "0"),
            ],
            b"",
        )
        .unwrap();
    assert_eq!(resp.code, 0);
    assert!(wait_until(Duration::from_secs(5), || route_data(
        &mut c, "T"
    )
    .is_none()));
}

#[test]
fn a_thousand_brokers_expiring_together_are_removed_in_one_batch() {
    let server = TestServer::start_with(|c| c.scan_not_active_broker_interval = 3000);
    let mut c = server.client();
    let body = body_with(1, &[topic("Mass", 1, 6)]);
    let mut bytes = Vec::new();
    model::encode_register_body_json(&body, &mut bytes);
    for i in 0..1000 {
        let b = Broker::new(
            "mass",
            &format!("m{i}"),
            &format!("10.1.{}.{}:10911", i / 250, i % 250),
            0,
        );
        let resp = register_raw(
            &mut c,
            &b,
            &bytes,
            &RegisterOptions {
                heartbeat_timeout_millis: Some(500),
                ..RegisterOptions::default()
            },
        );
        assert_eq!(resp.code, 0);
    }
    assert_eq!(route_data(&mut c, "Mass").unwrap().broker_datas.len(), 1000);
    let mut watcher = server.client();
    assert!(wait_until(Duration::from_secs(20), || route_data(
        &mut watcher,
        "Mass"
    )
    .is_none()));
    assert_eq!(stat(&mut watcher, "brokers"), 0);
    assert_eq!(stat(&mut watcher, "largestUnregisterBatch"), 1000);
}

#[test]
fn master_down_with_acting_master_wipes_write_permission_and_promotes_the_slave() {
    let server = TestServer::start_with(|c| c.support_acting_master = true);
    let mut c = server.client();
    let acting = RegisterOptions {
        enable_acting_master: true,
        ..RegisterOptions::default()
    };
    let t = [topic("T", 4, 6)];
    let master = Broker::new("c", "g", "10.0.0.1:10911", 0);
    let slave = Broker::new("c", "g", "10.0.0.2:10911", 1);
    register_with(&mut c, &master, &body_with(1, &t), &acting);
    register_with(&mut c, &slave, &body_with(1, &t), &acting);
    assert_eq!(route_data(&mut c, "T").unwrap().queue_datas[0].perm, 6);
    c.request(
        request::UNREGISTER_BROKER,
        &[
            ("brokerName", "g"),
            ("brokerAddr", "10.0.0.1:10911"),
            ("clusterName", "c"),
            ("brokerId", "0"),
        ],
        b"",
    )
    .unwrap();
    assert!(wait_until(Duration::from_secs(5), || {
        route_data(&mut c, "T").is_some_and(|r| r.queue_datas[0].perm == 4)
    }));
    let r = route_data(&mut c, "T").unwrap();
    // The acting-master rewrite presents the slave under id 0.
    assert_eq!(
        r.broker_datas[0].broker_addrs,
        addrs(&[(0, "10.0.0.2:10911")])
    );
    assert!(r.broker_datas[0].enable_acting_master);
    // The real tables still hold it under id 1.
    assert_eq!(
        cluster_info(&mut c).broker_addr_table["g"].broker_addrs,
        addrs(&[(1, "10.0.0.2:10911")])
    );
}

#[test]
fn query_data_version_reports_changes_and_refreshes() {
    let server = TestServer::start();
    let mut c = server.client();
    let b = Broker::new("c", "g", "10.0.0.1:10911", 0);
    register(&mut c, &b, &body_with(7, &[topic("T", 4, 6)]));
    let ext = [
        ("brokerName", "g"),
        ("brokerAddr", "10.0.0.1:10911"),
        ("clusterName", "c"),
        ("brokerId", "0"),
    ];
    let same = DataVersion {
        counter: 7,
        state_version: 0,
        timestamp: 1_700_000_000_007,
    };
    let mut body = Vec::new();
    same.encode(&mut body);
    let resp = c.request(request::QUERY_DATA_VERSION, &ext, &body).unwrap();
    assert_eq!(resp.ext("changed"), Some("false"));
    assert_eq!(DataVersion::decode(&resp.body).unwrap(), same);
    let mut other = Vec::new();
    DataVersion { counter: 8, ..same }.encode(&mut other);
    let resp = c
        .request(request::QUERY_DATA_VERSION, &ext, &other)
        .unwrap();
    assert_eq!(resp.ext("changed"), Some("true"));
    let unknown = [
        ("brokerName", "x"),
        ("brokerAddr", "1.1.1.1:1"),
        ("clusterName", "c"),
        ("brokerId", "0"),
    ];
    let resp = c
        .request(request::QUERY_DATA_VERSION, &unknown, &body)
        .unwrap();
    assert_eq!(resp.ext("changed"), Some("true"));
    assert!(resp.body.is_empty());
    // The same version in another layout is the same version; a body that is not a
    // DataVersion is refused, for a known broker as for an unknown one.
    let reordered = br#"{"timestamp":1700000000007,"stateVersion":0,"counter":7}"#;
    let resp = c
        .request(request::QUERY_DATA_VERSION, &ext, reordered)
        .unwrap();
    assert_eq!(resp.ext("changed"), Some("false"));
    assert_eq!(DataVersion::decode(&resp.body).unwrap(), same);
    for who in [&ext, &unknown] {
        let resp = c.request(request::QUERY_DATA_VERSION, who, b"[").unwrap();
        assert_eq!(resp.code, 1, "{:?}", resp.remark);
        assert!(resp
            .remark
            .as_deref()
            .unwrap_or("")
            .starts_with("bad DataVersion body"));
    }
}

#[test]
fn unchanged_registrations_skip_parsing_but_keep_semantics() {
    let server = TestServer::start();
    let mut c = server.client();
    let b = Broker::new("c", "g", "10.0.0.1:10911", 0);
    let body = body_with(3, &[topic("T", 4, 6), topic("U", 4, 6)]);
    for _ in 0..5 {
        assert_eq!(register(&mut c, &b, &body).code, 0);
    }
    assert_eq!(stat(&mut c, "registrationsUnchanged"), 4);
    // An admin delete is undone by the next registration, as Java's per-topic rule does.
    c.request(request::DELETE_TOPIC_IN_NAMESRV, &[("topic", "U")], b"")
        .unwrap();
    assert!(route_data(&mut c, "U").is_none());
    register(&mut c, &b, &body);
    assert!(route_data(&mut c, "U").is_some());
    // A wipe sticks while the broker's body is unchanged.
    c.request(
        request::WIPE_WRITE_PERM_OF_BROKER,
        &[("brokerName", "g")],
        b"",
    )
    .unwrap();
    register(&mut c, &b, &body);
    assert_eq!(route_data(&mut c, "T").unwrap().queue_datas[0].perm, 4);
}

/// Changed bodies of other sizes from two brokers, one after another: each is decoded into
/// the topic list of the body applied before it (the other broker's, longer or shorter, with
/// names longer or shorter than the strings they land in), and every route shows the queues
/// the last body of each broker named.
#[test]
fn changed_bodies_of_every_size_after_one_another_route_as_sent() {
    let server = TestServer::start();
    let mut c = server.client();
    let brokers = [
        Broker::new("c", "g1", "10.0.0.1:10911", 0),
        Broker::new("c", "g2", "10.0.0.2:10911", 0),
    ];
    let mut last: [Vec<TopicConfig>; 2] = Default::default();
    for round in 0..6usize {
        for (i, b) in brokers.iter().enumerate() {
            let n = [3, 12, 1, 7, 20, 2][(round + i) % 6];
            let topics: Vec<TopicConfig> = (0..n)
                .map(|t| {
                    let name = if t % 2 == 0 {
                        format!("T{t}")
                    } else {
                        format!("topic-with-a-longer-name-{t}-{}", "x".repeat(round))
                    };
                    topic(&name, (1 + round + i) as i32, 6)
                })
                .collect();
            let resp = register(&mut c, b, &body_with(round as i64 + 1, &topics));
            assert_eq!(resp.code, 0, "{}", remark(&resp));
            last[i] = topics;
        }
    }
    for (b, topics) in brokers.iter().zip(&last) {
        for tc in topics {
            let route = route_data(&mut c, &tc.topic_name).expect("routed");
            let q = route
                .queue_datas
                .iter()
                .find(|q| q.broker_name == b.name)
                .expect("a queue entry of the broker");
            assert_eq!(
                (q.read_queue_nums, q.write_queue_nums),
                (tc.read_queue_nums, tc.write_queue_nums),
                "{} {}",
                b.name,
                tc.topic_name
            );
        }
    }
}

#[test]
fn static_topic_mapping_and_filter_servers_appear_in_routes() {
    let server = TestServer::start();
    let mut c = server.client();
    let b = Broker::new("c", "g", "10.0.0.1:10911", 0);
    let mut body = body_with(1, &[topic("Static", 4, 6)]);
    body.filter_servers = Some(vec!["10.0.0.1:12000".into()]);
    body.mappings = vec![(
        "Static".into(),
        MappingInfo {
            topic: "Static".into(),
            scope: "__global__".into(),
            total_queues: 8,
            bname: "g".into(),
            epoch: 5,
            dirty: false,
            curr_id_map: vec![(0, 0), (1, 1)],
        },
    )];
    register(&mut c, &b, &body);
    let r = route_data(&mut c, "Static").unwrap();
    assert_eq!(
        r.filter_server_table["10.0.0.1:10911"],
        vec!["10.0.0.1:12000".to_string()]
    );
    let m = r.topic_queue_mapping_by_broker.unwrap();
    assert_eq!(m[0].0, "g");
    assert_eq!(m[0].1.curr_id_map, vec![(0, 0), (1, 1)]);
    c.version = 317;
    let legacy = String::from_utf8(route(&mut c, "Static").body.to_vec()).unwrap();
    assert!(legacy.contains(r#""currIdMap":{0:0,1:1}"#), "{legacy}");
}

#[test]
fn zone_filtering_matches_the_java_vectors() {
    let server = TestServer::start();
    let mut c = server.client();
    let fixture = json::parse(&fixture("zone_route_cases.json")).unwrap();
    let r = fixture.get("route").unwrap();
    // Register each broker group of the fixture route with its zone.
    for (i, bd) in r
        .get("brokerDatas")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let name = bd.get("brokerName").unwrap().as_str().unwrap();
        let zone = bd.get("zoneName").and_then(|z| z.as_str());
        let acting = bd
            .get("enableActingMaster")
            .and_then(|v| v.as_bool())
            .unwrap();
        let (id, addr) = bd.get("brokerAddrs").unwrap().as_object().unwrap()[0].clone();
        let q = r.get("queueDatas").unwrap().as_array().unwrap()[i].clone();
        let b = Broker::new(
            "cluster-a",
            name,
            addr.as_str().unwrap(),
            id.parse().unwrap(),
        );
        let mut t = topic(
            "ZoneT",
            q.get("readQueueNums").unwrap().as_i64().unwrap() as i32,
            q.get("perm").unwrap().as_i64().unwrap() as i32,
        );
        t.write_queue_nums = q.get("writeQueueNums").unwrap().as_i64().unwrap() as i32;
        let options = RegisterOptions {
            enable_acting_master: acting,
            zone_name: zone.map(str::to_string),
            ..RegisterOptions::default()
        };
        assert_eq!(
            register_with(&mut c, &b, &body_with(1, &[t]), &options).code,
            0
        );
    }
    for case in fixture.get("cases").unwrap().as_array().unwrap() {
        let name = case.get("name").unwrap().as_str().unwrap();
        c.version = if case.get("modernRequest").unwrap().as_bool().unwrap() {
            479
        } else {
            333
        };
        let mut ext = vec![("topic", "ZoneT")];
        let mode = case.get("zoneMode").and_then(|v| v.as_str());
        let zone = case.get("zoneName").and_then(|v| v.as_str());
        if let Some(m) = mode {
            ext.push(("__ZONE_MODE", m));
        }
        if let Some(z) = zone {
            ext.push(("__ZONE_NAME", z));
        }
        if case
            .get("acceptStandardJsonOnly")
            .unwrap()
            .as_bool()
            .unwrap()
        {
            ext.push(("acceptStandardJsonOnly", "true"));
        }
        let resp = c
            .request(request::GET_ROUTEINFO_BY_TOPIC, &ext, b"")
            .unwrap();
        assert_eq!(resp.code, 0, "{name}");
        let text = String::from_utf8(resp.body.to_vec()).unwrap();
        let legacy = text.contains("brokerAddrs\":{0:") || text.contains("brokerAddrs\":{1:");
        let expected_mode = case.get("expectedByteMode").unwrap().as_str().unwrap();
        assert_eq!(legacy, expected_mode == "legacy", "{name}: {text}");
        let route = model::TopicRouteData::decode(&resp.body).unwrap();
        let mut got: Vec<String> = route
            .broker_datas
            .iter()
            .map(|b| b.broker_name.clone())
            .collect();
        got.sort();
        let want: Vec<String> = case
            .get("expectedBrokers")
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        assert_eq!(got, want, "{name}");
        let mut qnames: Vec<String> = route
            .queue_datas
            .iter()
            .map(|q| q.broker_name.clone())
            .collect();
        qnames.sort();
        assert_eq!(qnames, want, "{name}: queue datas follow the brokers");
    }
}

#[test]
fn a_new_lower_broker_id_is_notified_to_the_group_off_the_loop() {
    use std::net::TcpListener;
    let server = TestServer::start_with(|c| c.notify_min_broker_id_changed = true);
    // The slave's "broker port" is a listener of ours: the server connects to it to notify.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let slave_addr = listener.local_addr().unwrap().to_string();
    let mut c = server.client();
    let t = [topic("T", 4, 6)];
    register(
        &mut c,
        &Broker::new("c", "g", &slave_addr, 1),
        &body_with(1, &t),
    );
    register(
        &mut c,
        &Broker::new("c", "g", "10.0.0.1:10911", 0),
        &body_with(1, &t),
    );
    let (mut stream, _) = listener.accept().unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = bytes::BytesMut::new();
    let frame = loop {
        let mut chunk = [0u8; 4096];
        let n = std::io::Read::read(&mut stream, &mut chunk).unwrap();
        assert!(n > 0, "connection closed before a whole frame");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(f) = rmq_namesrv::remoting::frame::next_frame(&mut buf, 1 << 20).unwrap() {
            break f;
        }
    };
    let cmd = rmq_namesrv::remoting::command::RemotingCommand::decode(frame, &Default::default())
        .unwrap();
    assert_eq!(cmd.code, request::NOTIFY_MIN_BROKER_ID_CHANGE);
    assert!(cmd.is_oneway());
    assert_eq!(cmd.ext("minBrokerId"), Some("0"));
    assert_eq!(cmd.ext("minBrokerAddr"), Some("10.0.0.1:10911"));
    assert_eq!(cmd.ext("haBrokerAddr"), Some("10.0.0.1:10912"));
}

/// A changed registration skips the topic configs its previous body put, unless something
/// else wrote the group's queue entries since: after a write-permission wipe, a
/// REGISTER_TOPIC with other queue counts, a topic delete (each on its own), the next body
/// with a new dataVersion and the same configs puts them all back (as Java's re-put of every
/// config does); for a body applied at once and for one large enough to be applied in steps.
/// (A live entry's first registration keeps no record, hence two before the first write.)
#[test]
fn a_changed_registration_after_admin_writes_puts_every_topic_config_again() {
    let server = TestServer::start();
    let mut c = server.client();
    for (n, addr) in [(5usize, "10.0.0.1:10911"), (1_500, "10.0.0.2:10911")] {
        let b = Broker::new("c", &format!("g{n}"), addr, 0);
        let name = |i: usize| format!("g{n}-T{i}");
        let topics: Vec<TopicConfig> = (0..n).map(|i| topic(&name(i), 4, 6)).collect();
        // Two registrations: a live entry's first keeps no record of what it put.
        for counter in [0, 1] {
            assert_eq!(register(&mut c, &b, &body_with(counter, &topics)).code, 0);
        }
        let q = model::QueueData {
            broker_name: b.name.clone(),
            read_queue_nums: 8,
            write_queue_nums: 8,
            perm: 6,
            topic_sys_flag: 0,
        };
        let writes: [&dyn Fn(&mut rmq_namesrv::client::Client); 4] = [
            &|c| assert_eq!(c.write_perm(&b.name, false).unwrap(), n as i32),
            &|c| {
                c.register_topic(&name(1), std::slice::from_ref(&q))
                    .unwrap()
            },
            &|c| c.delete_topic(&name(2), None).unwrap(),
            &|_| {}, // none: the configs are skipped, and still as sent
        ];
        for (counter, write) in (2..).zip(writes) {
            write(&mut c);
            let resp = register(&mut c, &b, &body_with(counter, &topics));
            assert_eq!(resp.code, 0, "{}", remark(&resp));
            for i in [0, 1, 2, n - 1] {
                let route = route_data(&mut c, &name(i)).expect("routed");
                let q = &route.queue_datas[0];
                assert_eq!(
                    (q.read_queue_nums, q.write_queue_nums, q.perm),
                    (4, 4, 6),
                    "{} after registration {counter}",
                    name(i)
                );
            }
        }
    }
}
