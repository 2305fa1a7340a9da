//! The admin surface over real TCP: KV config (persisted), topic administration, broker
//! write permissions, server config at run time, and the admin allow list.

#[path = "common/child.rs"]
mod child;
mod common;

use child::ServerProcess;
use common::*;
use rmq_namesrv::client::Client;
use rmq_namesrv::remoting::codes::{request, response};
use rmq_namesrv::route::model;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn topic_list(c: &mut Client, code: i32, ext: &[(&str, &str)]) -> (i32, Vec<String>) {
    let resp = c.request(code, ext, b"").unwrap();
    if resp.code != 0 {
        return (resp.code, Vec::new());
    }
    let (mut topics, _) = model::decode_topic_list(&resp.body).unwrap();
    topics.sort();
    (0, topics)
}

#[test]
fn kv_config_put_get_delete_and_list() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(put_kv(&mut c, "NS", "k1", "v1").code, 0);
    assert_eq!(put_kv(&mut c, "NS", "k2", "v2").code, 0);
    assert_eq!(get_kv(&mut c, "NS", "k1").as_deref(), Some("v1"));
    let miss = c
        .request(
            request::GET_KV_CONFIG,
            &[("namespace", "NS"), ("key", "nope")],
            b"",
        )
        .unwrap();
    assert_eq!(miss.code, response::QUERY_NOT_FOUND);
    assert_eq!(
        miss.remark.as_deref(),
        Some("No config item, Namespace: NS Key: nope")
    );
    let list = c
        .request(
            request::GET_KVLIST_BY_NAMESPACE,
            &[("namespace", "NS")],
            b"",
        )
        .unwrap();
    assert_eq!(list.code, 0);
    assert_eq!(
        model::decode_kv_table(&list.body).unwrap(),
        vec![
            ("k1".to_string(), "v1".to_string()),
            ("k2".to_string(), "v2".to_string())
        ]
    );
    let resp = c
        .request(
            request::DELETE_KV_CONFIG,
            &[("namespace", "NS"), ("key", "k1")],
            b"",
        )
        .unwrap();
    assert_eq!(resp.code, 0);
    assert_eq!(get_kv(&mut c, "NS", "k1"), None);
    // Deleting something absent still succeeds (Java).
    let resp = c
        .request(
            request::DELETE_KV_CONFIG,
            &[("namespace", "NS"), ("key", "k1")],
            b"",
        )
        .unwrap();
    assert_eq!(resp.code, 0);
    let missing_ns = c
        .request(
            request::GET_KVLIST_BY_NAMESPACE,
            &[("namespace", "Other")],
            b"",
        )
        .unwrap();
    assert_eq!(missing_ns.code, response::QUERY_NOT_FOUND);
    // Missing header fields are errors naming the field.
    let resp = c
        .request(
            request::PUT_KV_CONFIG,
            &[("namespace", "NS"), ("key", "k")],
            b"",
        )
        .unwrap();
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert!(resp.remark.unwrap().contains("value"));
    let resp = c
        .request(request::GET_KVLIST_BY_NAMESPACE, &[], b"")
        .unwrap();
    assert!(resp.remark.unwrap().contains("namespace"));
    // The file is Java's shape.
    let file = std::fs::read_to_string(server.dir.path().join("kvConfig.json")).unwrap();
    assert_eq!(file, r#"{"configTable":{"NS":{"k2":"v2"}}}"#);
}

fn spawn_binary(dir: &std::path::Path, extra: &[String]) -> (Child, String) {
    let mut args = vec![
        "--listenPort=0".to_string(),
        "--bindAddress=127.0.0.1".to_string(),
        "--logPath=".to_string(),
        format!("--kvConfigPath={}", dir.join("kvConfig.json").display()),
    ];
    args.extend_from_slice(extra);
    let mut child = Command::new(env!("CARGO_BIN_EXE_rmq-namesrv"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn rmq-namesrv");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("rmq-namesrv listening on ")
        .expect("listening line")
        .to_string();
    (child, addr)
}

#[test]
fn kv_entries_survive_a_restart_and_a_kill_9_right_after_the_response() {
    let dir = TempDir::new("kv-kill");
    let (mut child, addr) = spawn_binary(dir.path(), &[]);
    let mut c = Client::connect(&addr, Duration::from_secs(5)).unwrap();
    assert_eq!(
        put_kv(&mut c, "ORDER_TOPIC_CONFIG", "T", "broker-a:4").code,
        0
    );
    assert_eq!(put_kv(&mut c, "NS", "last", "acknowledged").code, 0);
    child.kill().unwrap(); // SIGKILL, right after the acknowledgement
    child.wait().unwrap();
    let (mut child, addr) = spawn_binary(dir.path(), &[]);
    let mut c = Client::connect(&addr, Duration::from_secs(5)).unwrap();
    assert_eq!(
        get_kv(&mut c, "ORDER_TOPIC_CONFIG", "T").as_deref(),
        Some("broker-a:4")
    );
    assert_eq!(
        get_kv(&mut c, "NS", "last").as_deref(),
        Some("acknowledged")
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn truncated_kv_file_recovers_from_the_bak() {
    let dir = TempDir::new("kv-bak");
    let kv = dir.path().join("kvConfig.json");
    std::fs::write(
        dir.path().join("kvConfig.json.bak"),
        r#"{"configTable":{"NS":{"k":"from-bak"}}}"#,
    )
    .unwrap();
    std::fs::write(&kv, r#"{"configTable":{"NS":{"k":"tr"#).unwrap();
    let server = TestServer::start_with(|c| c.kv_config_path = kv.to_string_lossy().into_owned());
    let mut c = server.client();
    assert_eq!(get_kv(&mut c, "NS", "k").as_deref(), Some("from-bak"));
}

#[test]
fn corrupt_kv_file_without_backup_refuses_to_start() {
    let dir = TempDir::new("kv-corrupt");
    let kv = dir.path().join("kvConfig.json");
    std::fs::write(&kv, "{not json").unwrap();
    let mut config = test_config(dir.path());
    config.kv_config_path = kv.to_string_lossy().into_owned();
    assert!(start(config).is_err());
    let out = Command::new(env!("CARGO_BIN_EXE_rmq-namesrv"))
        .args([
            "--listenPort=0",
            "--logPath=",
            &format!("--kvConfigPath={}", kv.display()),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("kvConfig.json"));
}

fn two_clusters(server: &TestServer) -> Client {
    let mut c = server.client();
    let a = Broker::new("c1", "broker-a", "10.0.0.1:10911", 0);
    let b = Broker::new("c2", "broker-b", "10.0.1.1:10911", 0);
    let mut unit = topic("Unit", 4, 6);
    unit.topic_sys_flag = 1;
    let mut unit_sub = topic("UnitSub", 4, 6);
    unit_sub.topic_sys_flag = 2;
    let mut both = topic("UnitBoth", 4, 6);
    both.topic_sys_flag = 3;
    register(
        &mut c,
        &a,
        &body_with(
            1,
            &[
                topic("Shared", 4, 6),
                topic("A1", 4, 6),
                unit,
                unit_sub,
                both,
            ],
        ),
    );
    register(
        &mut c,
        &b,
        &body_with(1, &[topic("Shared", 4, 6), topic("B1", 4, 6)]),
    );
    c
}

#[test]
fn topic_lists_by_cluster_system_and_unit_flags() {
    let server = TestServer::start();
    let mut c = two_clusters(&server);
    let (code, all) = topic_list(&mut c, request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, &[]);
    assert_eq!(code, 0);
    assert_eq!(all, ["A1", "B1", "Shared", "Unit", "UnitBoth", "UnitSub"]);
    let (_, c1) = topic_list(&mut c, request::GET_TOPICS_BY_CLUSTER, &[("cluster", "c1")]);
    assert_eq!(c1, ["A1", "Shared", "Unit", "UnitBoth", "UnitSub"]);
    let (code, none) = topic_list(&mut c, request::GET_TOPICS_BY_CLUSTER, &[("cluster", "zz")]);
    assert_eq!((code, none.len()), (0, 0));
    let resp = c
        .request(request::GET_SYSTEM_TOPIC_LIST_FROM_NS, &[], b"")
        .unwrap();
    let (mut sys, addr) = model::decode_topic_list(&resp.body).unwrap();
    sys.sort();
    assert_eq!(sys, ["broker-a", "broker-b", "c1", "c2"]);
    assert!(addr.is_some_and(|a| a == "10.0.0.1:10911" || a == "10.0.1.1:10911"));
    assert_eq!(
        topic_list(&mut c, request::GET_UNIT_TOPIC_LIST, &[]).1,
        ["Unit", "UnitBoth"]
    );
    assert_eq!(
        topic_list(&mut c, request::GET_HAS_UNIT_SUB_TOPIC_LIST, &[]).1,
        ["UnitBoth", "UnitSub"]
    );
    assert_eq!(
        topic_list(&mut c, request::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST, &[]).1,
        ["UnitSub"]
    );
}

#[test]
fn topic_lists_honour_the_enable_switches() {
    let server = TestServer::start_with(|c| {
        c.enable_all_topic_list = false;
        c.enable_topic_list = false;
    });
    let mut c = two_clusters(&server);
    for (code, ext) in [
        (request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, vec![]),
        (request::GET_TOPICS_BY_CLUSTER, vec![("cluster", "c1")]),
        (request::GET_UNIT_TOPIC_LIST, vec![]),
        (request::GET_HAS_UNIT_SUB_TOPIC_LIST, vec![]),
        (request::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST, vec![]),
    ] {
        let resp = c.request(code, &ext, b"").unwrap();
        assert_eq!(
            (resp.code, resp.remark.as_deref()),
            (1, Some("disable")),
            "code {code}"
        );
    }
    // 304 is not gated.
    assert_eq!(
        c.request(request::GET_SYSTEM_TOPIC_LIST_FROM_NS, &[], b"")
            .unwrap()
            .code,
        0
    );
}

#[test]
fn deleted_topic_disappears_from_routes_and_lists() {
    let server = TestServer::start();
    let mut c = two_clusters(&server);
    // With a cluster: only that cluster's queues go.
    assert_eq!(
        c.request(
            request::DELETE_TOPIC_IN_NAMESRV,
            &[("topic", "Shared"), ("clusterName", "c1")],
            b""
        )
        .unwrap()
        .code,
        0
    );
    let r = route_data(&mut c, "Shared").unwrap();
    assert_eq!(r.queue_datas.len(), 1);
    assert_eq!(r.queue_datas[0].broker_name, "broker-b");
    assert!(
        !topic_list(&mut c, request::GET_TOPICS_BY_CLUSTER, &[("cluster", "c1")])
            .1
            .contains(&"Shared".to_string())
    );
    // Without: the whole topic.
    assert_eq!(
        c.request(request::DELETE_TOPIC_IN_NAMESRV, &[("topic", "A1")], b"")
            .unwrap()
            .code,
        0
    );
    assert!(route_data(&mut c, "A1").is_none());
    assert!(
        !topic_list(&mut c, request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, &[])
            .1
            .contains(&"A1".to_string())
    );
    // Names are validated as Java's TopicValidator does.
    let bad = c
        .request(
            request::DELETE_TOPIC_IN_NAMESRV,
            &[("topic", "bad/name")],
            b"",
        )
        .unwrap();
    assert_eq!(bad.code, response::SYSTEM_ERROR);
    assert!(bad.remark.unwrap().contains("illegal characters"));
    let long = "x".repeat(128);
    let bad = c
        .request(request::DELETE_TOPIC_IN_NAMESRV, &[("topic", &long)], b"")
        .unwrap();
    assert_eq!(
        bad.remark.as_deref(),
        Some("The specified topic is longer than topic max length.")
    );
    // Unknown cluster: a no-op that succeeds.
    assert_eq!(
        c.request(
            request::DELETE_TOPIC_IN_NAMESRV,
            &[("topic", "B1"), ("clusterName", "zz")],
            b""
        )
        .unwrap()
        .code,
        0
    );
    assert!(route_data(&mut c, "B1").is_some());
}

#[test]
fn register_topic_adds_queues_for_known_brokers_only() {
    let server = TestServer::start();
    let mut c = two_clusters(&server);
    let body = br#"{"brokerDatas":[],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}]}"#;
    let resp = c
        .request(
            request::REGISTER_TOPIC_IN_NAMESRV,
            &[("topic", "Created")],
            body,
        )
        .unwrap();
    assert_eq!(resp.code, 0);
    let r = route_data(&mut c, "Created").unwrap();
    assert_eq!(
        (
            r.queue_datas[0].broker_name.as_str(),
            r.queue_datas[0].read_queue_nums
        ),
        ("broker-a", 2)
    );
    let unknown = br#"{"queueDatas":[{"brokerName":"ghost","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}]}"#;
    let resp = c
        .request(
            request::REGISTER_TOPIC_IN_NAMESRV,
            &[("topic", "Ghost")],
            unknown,
        )
        .unwrap();
    assert_eq!(resp.code, 0, "always SUCCESS, as Java");
    assert!(route_data(&mut c, "Ghost").is_none());
    let resp = c
        .request(
            request::REGISTER_TOPIC_IN_NAMESRV,
            &[("topic", "Broken")],
            b"{oops",
        )
        .unwrap();
    assert_eq!(resp.code, response::SYSTEM_ERROR);
}

#[test]
fn wipe_then_add_write_permission_round_trips_in_routes() {
    let server = TestServer::start();
    let mut c = two_clusters(&server);
    let resp = c
        .request(
            request::WIPE_WRITE_PERM_OF_BROKER,
            &[("brokerName", "broker-a")],
            b"",
        )
        .unwrap();
    assert_eq!(resp.ext("wipeTopicCount"), Some("5"));
    let r = route_data(&mut c, "Shared").unwrap();
    let qa = r
        .queue_datas
        .iter()
        .find(|q| q.broker_name == "broker-a")
        .unwrap();
    assert_eq!(qa.perm, 4);
    let qb = r
        .queue_datas
        .iter()
        .find(|q| q.broker_name == "broker-b")
        .unwrap();
    assert_eq!(qb.perm, 6);
    let resp = c
        .request(
            request::ADD_WRITE_PERM_OF_BROKER,
            &[("brokerName", "broker-a")],
            b"",
        )
        .unwrap();
    assert_eq!(resp.ext("addTopicCount"), Some("5"));
    assert!(route_data(&mut c, "Shared")
        .unwrap()
        .queue_datas
        .iter()
        .all(|q| q.perm == 6));
    let resp = c
        .request(
            request::WIPE_WRITE_PERM_OF_BROKER,
            &[("brokerName", "ghost")],
            b"",
        )
        .unwrap();
    assert_eq!((resp.code, resp.ext("wipeTopicCount")), (0, Some("0")));
}

fn config_text(c: &mut Client) -> String {
    let resp = c.request(request::GET_NAMESRV_CONFIG, &[], b"").unwrap();
    assert_eq!(resp.code, 0);
    String::from_utf8(resp.body.to_vec()).unwrap()
}

#[test]
fn namesrv_config_get_update_blacklist_and_write_back() {
    let server = TestServer::start();
    let mut c = server.client();
    let text = config_text(&mut c);
    let keys: Vec<&str> = text.lines().map(|l| l.split('=').next().unwrap()).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "sorted by key");
    assert!(text.contains("enableTopicList=true\n"));
    // An unknown key refuses the whole request.
    let resp = c
        .request(
            request::UPDATE_NAMESRV_CONFIG,
            &[],
            b"enableTopicList=false\ncustom.key=hello\n",
        )
        .unwrap();
    assert_eq!(
        (resp.code, resp.remark.as_deref()),
        (response::SYSTEM_ERROR, Some("unknown key custom.key"))
    );
    assert!(config_text(&mut c).contains("enableTopicList=true\n"));
    let resp = c
        .request(
            request::UPDATE_NAMESRV_CONFIG,
            &[],
            b"enableTopicList=false\n",
        )
        .unwrap();
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    let text = config_text(&mut c);
    assert!(text.contains("enableTopicList=false\n"));
    // Live: the topic-list gate is now closed.
    assert_eq!(
        c.request(request::GET_TOPICS_BY_CLUSTER, &[("cluster", "x")], b"")
            .unwrap()
            .code,
        1
    );
    // Written back to configStorePath.
    let file = std::fs::read_to_string(server.dir.path().join("namesrv.properties")).unwrap();
    assert_eq!(file, "enableTopicList=false\n");
    for key in [
        "kvConfigPath",
        "configStorePath",
        "configBlackList",
        "rocketmqHome",
    ] {
        let body = format!("{key}=/etc/passwd\nenableTopicList=true\n");
        let resp = c
            .request(request::UPDATE_NAMESRV_CONFIG, &[], body.as_bytes())
            .unwrap();
        assert_eq!(resp.code, response::NO_PERMISSION, "{key}");
        assert_eq!(
            resp.remark.as_deref(),
            Some("Can not update config in black list.")
        );
    }
    // Nothing of a refused update was applied.
    assert!(config_text(&mut c).contains("enableTopicList=false\n"));
    let resp = c
        .request(request::UPDATE_NAMESRV_CONFIG, &[], b"bad=\\u12")
        .unwrap();
    assert_eq!(
        (resp.code, resp.remark.as_deref()),
        (1, Some("string2Properties error"))
    );
}

#[test]
fn order_message_enable_takes_effect_without_restart() {
    let server = TestServer::start();
    let mut c = server.client();
    let b = Broker::new("c", "broker-a", "10.0.0.1:10911", 0);
    register(&mut c, &b, &body_with(1, &[topic("Ordered", 4, 6)]));
    put_kv(&mut c, "ORDER_TOPIC_CONFIG", "Ordered", "broker-a:4");
    assert_eq!(
        route_data(&mut c, "Ordered").unwrap().order_topic_conf,
        None
    );
    c.request(
        request::UPDATE_NAMESRV_CONFIG,
        &[],
        b"orderMessageEnable=true",
    )
    .unwrap();
    assert_eq!(
        route_data(&mut c, "Ordered")
            .unwrap()
            .order_topic_conf
            .as_deref(),
        Some("broker-a:4")
    );
    put_kv(&mut c, "ORDER_TOPIC_CONFIG", "Ordered", "broker-a:8");
    assert_eq!(
        route_data(&mut c, "Ordered")
            .unwrap()
            .order_topic_conf
            .as_deref(),
        Some("broker-a:8")
    );
    // Registration answers carry the ORDER_TOPIC_CONFIG table.
    let resp = register(&mut c, &b, &body_with(1, &[topic("Ordered", 4, 6)]));
    assert_eq!(
        String::from_utf8(resp.body.to_vec()).unwrap(),
        r#"{"table":{"Ordered":"broker-a:8"}}"#
    );
}

#[test]
fn scan_interval_update_changes_the_expiry_cadence() {
    // With a one-hour scan interval nothing would expire during this test.
    let server = TestServer::start_with(|c| c.scan_not_active_broker_interval = 3_600_000);
    let mut c = server.client();
    let mut broker_conn = server.client();
    let b = Broker::new("c", "g", "10.0.0.1:10911", 0);
    register_with(
        &mut broker_conn,
        &b,
        &body_with(1, &[topic("T", 4, 6)]),
        &RegisterOptions {
            heartbeat_timeout_millis: Some(200),
            ..RegisterOptions::default()
        },
    );
    let resp = c
        .request(
            request::UPDATE_NAMESRV_CONFIG,
            &[],
            b"scanNotActiveBrokerInterval=100",
        )
        .unwrap();
    assert_eq!(resp.code, 0);
    assert!(wait_until(Duration::from_secs(10), || route_data(
        &mut c, "T"
    )
    .is_none()));
}

#[test]
fn admin_allow_list_refuses_mutations_from_other_addresses() {
    let server = TestServer::start_with(|c| {
        c.set("adminAllowList", "10.0.0.0/8");
    });
    let mut c = server.client();
    let resp = c
        .request(
            request::PUT_KV_CONFIG,
            &[("namespace", "n"), ("key", "k"), ("value", "v")],
            b"",
        )
        .unwrap();
    assert_eq!(resp.code, response::NO_PERMISSION);
    assert!(resp.remark.unwrap().contains("adminAllowList"));
    for code in [
        request::DELETE_KV_CONFIG,
        request::DELETE_TOPIC_IN_NAMESRV,
        request::REGISTER_TOPIC_IN_NAMESRV,
        request::WIPE_WRITE_PERM_OF_BROKER,
        request::ADD_WRITE_PERM_OF_BROKER,
        request::UPDATE_NAMESRV_CONFIG,
    ] {
        assert_eq!(
            c.request(code, &[], b"").unwrap().code,
            response::NO_PERMISSION,
            "code {code}"
        );
    }
    // Reads and broker traffic stay open.
    let b = Broker::new("c", "g", "10.0.0.1:10911", 0);
    assert_eq!(
        register(&mut c, &b, &body_with(1, &[topic("T", 4, 6)])).code,
        0
    );
    assert!(route_data(&mut c, "T").is_some());
    assert_eq!(
        c.request(request::GET_NAMESRV_CONFIG, &[], b"")
            .unwrap()
            .code,
        0
    );
    // Loopback allowed: mutations work.
    let open = TestServer::start_with(|c| {
        c.set("adminAllowList", "127.0.0.1/32");
    });
    let mut c = open.client();
    assert_eq!(put_kv(&mut c, "n", "k", "v").code, 0);
}

// ---------------------------------------------------------------------------------------------
// UPDATE_NAMESRV_CONFIG over the real binary: all or nothing, and written back into the
// operator's own file.

const OPERATOR_FILE: &str = "# Operator's notes: keep me\n\
listenPort=0\n\
\n\
# expiry scan, ms\n\
scanNotActiveBrokerInterval = 5000\n\
serverWorkerThreads=8\n";

fn update(c: &mut Client, body: &str) -> (i32, Option<String>) {
    let resp = c
        .request(request::UPDATE_NAMESRV_CONFIG, &[], body.as_bytes())
        .unwrap();
    (resp.code, resp.remark)
}

fn spawn_with_config(dir: &std::path::Path, conf: &std::path::Path) -> ServerProcess {
    ServerProcess::spawn(&[
        "-c".into(),
        conf.to_string_lossy().into_owned(),
        "--bindAddress=127.0.0.1".into(),
        format!("--logPath={}", dir.join("ns.log").display()),
        format!("--kvConfigPath={}", dir.join("kv.json").display()),
        "--logLevel=info".into(),
    ])
}

#[test]
fn update_answers_success_only_for_changes_it_made() {
    let dir = TempDir::new("update-refused");
    let conf = dir.path().join("namesrv.conf");
    std::fs::write(&conf, OPERATOR_FILE).unwrap();
    let server = spawn_with_config(dir.path(), &conf);
    let mut c = server.client();
    let before = config_text(&mut c);
    let refused = [
        (
            "scanNotActiveBrokerInterval=-5",
            "scanNotActiveBrokerInterval: -5 is outside 1..=3600000",
        ),
        (
            "scanNotActiveBrokerInterval=abc",
            "scanNotActiveBrokerInterval: \"abc\" is not an integer",
        ),
        (
            "scanNotActivBrokerInterval=100",
            "unknown key scanNotActivBrokerInterval (did you mean scanNotActiveBrokerInterval?)",
        ),
        (
            "listenPort=9999",
            "listenPort takes effect at start only: edit the config file",
        ),
        (
            "scanNotActiveBrokerInterval=0",
            "scanNotActiveBrokerInterval: 0 is outside 1..=3600000",
        ),
        (
            "orderMessageEnable=ture",
            "orderMessageEnable: \"ture\" is not true or false",
        ),
        // All or nothing: the valid first key is not applied either.
        (
            "orderMessageEnable=true\nlogPath=/tmp/elsewhere.log",
            "logPath takes effect at start only: edit the config file",
        ),
    ];
    for (body, remark) in refused {
        assert_eq!(
            update(&mut c, body),
            (response::SYSTEM_ERROR, Some(remark.to_string())),
            "{body}"
        );
    }
    assert_eq!(config_text(&mut c), before, "nothing was applied");
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), OPERATOR_FILE);
    // The black list keeps Java's answer.
    assert_eq!(
        update(&mut c, "kvConfigPath=/etc/passwd"),
        (
            response::NO_PERMISSION,
            Some("Can not update config in black list.".to_string())
        )
    );
}

#[test]
fn update_rewrites_only_the_changed_lines_of_the_config_file() {
    let dir = TempDir::new("update-file");
    let conf = dir.path().join("namesrv.conf");
    std::fs::write(&conf, OPERATOR_FILE).unwrap();
    let server = spawn_with_config(dir.path(), &conf);
    let mut c = server.client();
    assert_eq!(
        update(
            &mut c,
            "scanNotActiveBrokerInterval=7000\nserverWorkerThreads=8\norderMessageEnable=true\n"
        ),
        (response::SUCCESS, None)
    );
    let text = config_text(&mut c);
    assert!(text.contains("scanNotActiveBrokerInterval=7000\n"));
    assert!(text.contains("orderMessageEnable=true\n"));
    // Comments, order and blank lines stay; serverWorkerThreads did not change, so its line
    // is untouched; command-line overrides (bindAddress, logPath, ...) and defaults are not
    // written; a key the file did not have is appended.
    assert_eq!(
        std::fs::read_to_string(&conf).unwrap(),
        "# Operator's notes: keep me\n\
         listenPort=0\n\
         \n\
         # expiry scan, ms\n\
         scanNotActiveBrokerInterval=7000\n\
         serverWorkerThreads=8\n\
         orderMessageEnable=true\n"
    );
    // Java's keys that one event loop does not use are accepted and reported, as Java does.
    assert_eq!(
        update(&mut c, "serverWorkerThreads=4"),
        (response::SUCCESS, None)
    );
    assert!(config_text(&mut c).contains("serverWorkerThreads=4\n"));
    assert!(std::fs::read_to_string(&conf)
        .unwrap()
        .contains("\nserverWorkerThreads=4\n"));
}

#[test]
fn log_level_update_takes_effect_at_once() {
    let dir = TempDir::new("update-level");
    let conf = dir.path().join("namesrv.conf");
    std::fs::write(&conf, "listenPort=0\n").unwrap();
    let server = spawn_with_config(dir.path(), &conf);
    let log = dir.path().join("ns.log");
    let debug_lines = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(" DEBUG "))
            .count()
    };
    let mut c = server.client();
    // Connections and unknown codes are logged at debug only.
    assert_eq!(c.request(9999, &[], b"").unwrap().code, 3);
    let _other = server.client();
    assert_eq!(debug_lines(), 0);
    assert_eq!(update(&mut c, "logLevel=debug"), (response::SUCCESS, None));
    assert_eq!(c.request(9999, &[], b"").unwrap().code, 3);
    let _another = server.client();
    assert!(wait_until(Duration::from_secs(10), || debug_lines() > 0));
    assert!(std::fs::read_to_string(&conf)
        .unwrap()
        .ends_with("\nlogLevel=debug\n"));
}
