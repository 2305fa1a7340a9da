//! Golden request/response tests for every code the controller serves and every error path
//! of the Java controller's handlers: each request is a frame built from JSON text, each
//! expected answer is written out as the Java 5.3.3 controller sends it (header fields,
//! codes, remarks and fastjson bodies as documented for it), and the whole frame must match
//! byte for byte. Extension fields are in alphabetical order (Java's HashMap order is not
//! part of the contract).
#![cfg(feature = "controller")]

#[path = "controller_harness/mod.rs"]
mod harness;

use harness::TempDir;
use harness::{frame, request_header, Node};

const A1: &str = "127.0.0.1:30911";
const A2: &str = "127.0.0.1:30912";
const A3: &str = "127.0.0.1:30913";

/// The expected response header (opaque 9, as `Node::call` sends). `ext` is the inside of
/// `extFields` (None: no header object), `remark` already JSON-escaped.
fn resp(code: i32, ext: Option<&str>, remark: Option<&str>) -> String {
    let mut s = format!("{{\"code\":{code}");
    if let Some(ext) = ext {
        s.push_str(&format!(",\"extFields\":{{{ext}}}"));
    }
    s.push_str(",\"flag\":1,\"language\":\"JAVA\",\"opaque\":9");
    if let Some(remark) = remark {
        s.push_str(&format!(",\"remark\":\"{remark}\""));
    }
    s.push_str(",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":479}");
    s
}

/// Sends `code` with `ext` and `body`; the answer must be exactly `header` + `body`.
fn check(
    node: &mut Node,
    code: i32,
    ext: &[(&str, &str)],
    body: &[u8],
    header: &str,
    expected_body: &str,
) {
    let answer = node
        .request(&frame(&request_header(code, 9, 0, ext), body))
        .expect("an answer");
    let expected = frame(header, expected_body.as_bytes());
    assert_eq!(
        String::from_utf8_lossy(&answer),
        String::from_utf8_lossy(&expected),
        "request {code} {ext:?}"
    );
}

const CLUSTER: (&str, &str) = ("clusterName", "DefaultCluster");
const NAME: (&str, &str) = ("brokerName", "broker-a");

fn apply_id(node: &mut Node, id: &str, code: &str) -> String {
    node.call(
        1013,
        &[
            CLUSTER,
            NAME,
            ("appliedBrokerId", id),
            ("registerCheckCode", code),
        ],
        b"",
    )
    .0
}

/// broker-a with ids 1..=n registered at A1.., no master yet.
fn registered(n: usize) -> (TempDir, Node) {
    let dir = TempDir::new("ctrl-golden");
    let mut node = Node::open(&dir, &[]);
    for (i, addr) in [A1, A2, A3].iter().take(n).enumerate() {
        let id = (i + 1).to_string();
        let header = apply_id(&mut node, &id, &format!("{addr};1700000000000"));
        assert!(header.starts_with("{\"code\":0,"), "{header}");
    }
    (dir, node)
}

/// `registered(n)` with id 1 elected master and ids 1 and 2 heartbeating.
fn with_master(n: usize) -> (TempDir, Node) {
    let (dir, mut node) = registered(n);
    node.heartbeat(1, "broker-a", 1, 10_000, 0, 0);
    node.heartbeat(2, "broker-a", 2, 10_000, 0, 0);
    assert_eq!(node.self_elect("broker-a", 1), 0);
    (dir, node)
}

#[test]
fn get_next_broker_id_1012() {
    let (_dir, mut node) = registered(0);
    let next = |n: &str| {
        format!("\"brokerName\":\"broker-a\",\"clusterName\":\"DefaultCluster\",\"nextBrokerId\":\"{n}\"")
    };
    check(
        &mut node,
        1012,
        &[CLUSTER, NAME],
        b"",
        &resp(0, Some(&next("1")), None),
        "",
    );
    check(
        &mut node,
        1012,
        &[NAME],
        b"",
        &resp(
            0,
            Some("\"brokerName\":\"broker-a\",\"nextBrokerId\":\"1\""),
            None,
        ),
        "",
    );
    check(
        &mut node,
        1012,
        &[CLUSTER],
        b"",
        &resp(1, None, Some("the custom field <brokerName> is null")),
        "",
    );
    apply_id(&mut node, "1", "127.0.0.1:30911;1");
    check(
        &mut node,
        1012,
        &[CLUSTER, NAME],
        b"",
        &resp(0, Some(&next("2")), None),
        "",
    );
}

#[test]
fn apply_broker_id_1013() {
    let (_dir, mut node) = registered(0);
    let names = "\"brokerName\":\"broker-a\",\"clusterName\":\"DefaultCluster\"";
    let code1 = "127.0.0.1:30911;1700000000000";
    let apply = |id: &'static str, code: &'static str| {
        [
            CLUSTER,
            NAME,
            ("appliedBrokerId", id),
            ("registerCheckCode", code),
        ]
    };
    // An unknown set accepts only id 1.
    check(&mut node, 1013, &apply("2", code1), b"",
        &resp(2014, Some(names), Some("Broker-set: broker-a hasn't been registered in controller, but broker try to apply brokerId: 2")), "");
    check(
        &mut node,
        1013,
        &apply("1", code1),
        b"",
        &resp(0, Some(names), None),
        "",
    );
    // Re-applying with the same check code (a broker that crashed between steps) succeeds.
    check(
        &mut node,
        1013,
        &apply("1", code1),
        b"",
        &resp(0, Some(names), None),
        "",
    );
    check(
        &mut node,
        1013,
        &apply("1", "127.0.0.1:30999;5"),
        b"",
        &resp(
            2014,
            Some(names),
            Some("Fail to apply brokerId: 1 in broker-set: broker-a"),
        ),
        "",
    );
    check(
        &mut node,
        1013,
        &apply("7", "127.0.0.1:30999;5"),
        b"",
        &resp(0, Some(names), None),
        "",
    );
    check(
        &mut node,
        1013,
        &[CLUSTER, NAME, ("appliedBrokerId", "8")],
        b"",
        &resp(
            1,
            None,
            Some("the custom field <registerCheckCode> is null"),
        ),
        "",
    );
    check(
        &mut node,
        1013,
        &[CLUSTER, NAME, ("registerCheckCode", code1)],
        b"",
        &resp(1, None, Some("the custom field <appliedBrokerId> is null")),
        "",
    );
    check(
        &mut node,
        1013,
        &apply("9", ";;"),
        b"",
        &resp(
            1,
            None,
            Some("registerCheckCode \\\";;\\\" holds no broker address"),
        ),
        "",
    );
    // Ids counted, not maxed: 1 and 7 were given, so the next is 3.
    check(&mut node, 1012, &[CLUSTER, NAME], b"",
        &resp(0, Some("\"brokerName\":\"broker-a\",\"clusterName\":\"DefaultCluster\",\"nextBrokerId\":\"3\""), None), "");
}

#[test]
fn register_broker_1003() {
    let (_dir, mut node) = registered(2);
    let names = "\"brokerName\":\"broker-a\",\"clusterName\":\"DefaultCluster\"";
    check(
        &mut node,
        1003,
        &[
            CLUSTER,
            ("brokerName", "broker-x"),
            ("brokerId", "1"),
            ("brokerAddress", A1),
        ],
        b"",
        &resp(
            2010,
            Some("\"brokerName\":\"broker-x\",\"clusterName\":\"DefaultCluster\""),
            Some("Broker-set: broker-x hasn't been registered in controller"),
        ),
        "",
    );
    check(
        &mut node,
        1003,
        &[CLUSTER, NAME, ("brokerId", "5"), ("brokerAddress", A1)],
        b"",
        &resp(
            2010,
            Some(names),
            Some("BrokerId: 5 hasn't been registered in broker-set: broker-a"),
        ),
        "",
    );
    check(
        &mut node,
        1003,
        &[CLUSTER, NAME, ("brokerId", "1")],
        b"",
        &resp(1, None, Some("the custom field <brokerAddress> is null")),
        "",
    );
    check(
        &mut node,
        1003,
        &[CLUSTER, ("brokerId", "1"), ("brokerAddress", A1)],
        b"",
        &resp(1, None, Some("the custom field <brokerName> is null")),
        "",
    );
    // No master yet: the names and the (empty) set.
    check(
        &mut node,
        1003,
        &[CLUSTER, NAME, ("brokerId", "1"), ("brokerAddress", A1)],
        b"",
        &resp(0, Some(names), None),
        "{\"syncStateSet\":[],\"syncStateSetEpoch\":0}",
    );
    // An alive master is announced ...
    node.heartbeat(1, "broker-a", 1, 10_000, 0, 0);
    assert_eq!(node.self_elect("broker-a", 1), 0);
    let with_master = format!("{names},\"masterAddress\":\"{A1}\",\"masterBrokerId\":\"1\",\"masterEpoch\":\"1\",\"syncStateSetEpoch\":\"1\"");
    check(
        &mut node,
        1003,
        &[CLUSTER, NAME, ("brokerId", "2"), ("brokerAddress", A2)],
        b"",
        &resp(0, Some(&with_master), None),
        "{\"syncStateSet\":[1],\"syncStateSetEpoch\":1}",
    );
    // ... a silent one is not.
    node.now += 10_001;
    check(
        &mut node,
        1003,
        &[CLUSTER, NAME, ("brokerId", "2"), ("brokerAddress", A2)],
        b"",
        &resp(0, Some(names), None),
        "{\"syncStateSet\":[1],\"syncStateSetEpoch\":1}",
    );
    // A new address is recorded (UpdateBrokerAddress) and shows in the member list.
    check(
        &mut node,
        1003,
        &[
            CLUSTER,
            NAME,
            ("brokerId", "2"),
            ("brokerAddress", "10.0.0.7:30912"),
        ],
        b"",
        &resp(0, Some(names), None),
        "{\"syncStateSet\":[1],\"syncStateSetEpoch\":1}",
    );
    let (_, body) = node.call(1006, &[], b"[\"broker-a\"]");
    assert!(String::from_utf8(body)
        .unwrap()
        .contains("\"brokerAddress\":\"10.0.0.7:30912\",\"brokerId\":2"));
}

#[test]
fn elect_master_1002_first_election_and_master_still_alive() {
    let (_dir, mut node) = registered(2);
    let elect = |id: &'static str| [CLUSTER, NAME, ("brokerId", id), ("designateElect", "false")];
    check(
        &mut node,
        1002,
        &[CLUSTER, ("brokerName", "broker-x"), ("brokerId", "1")],
        b"",
        &resp(2010, Some(""), Some("Broker hasn't been registered")),
        "",
    );
    // Without brokerName Java's header keeps its initial "": not registered either.
    check(
        &mut node,
        1002,
        &[CLUSTER, ("brokerId", "1")],
        b"",
        &resp(2010, Some(""), Some("Broker hasn't been registered")),
        "",
    );
    // The first master needs no heartbeat.
    check(&mut node, 1002, &elect("1"), b"",
        &resp(0, Some(&format!("\"masterAddress\":\"{A1}\",\"masterBrokerId\":\"1\",\"masterEpoch\":\"1\",\"syncStateSetEpoch\":\"1\"")), None),
        &format!("{{\"brokerMemberGroup\":{{\"brokerAddrs\":{{1:\"{A1}\",2:\"{A2}\"}},\"brokerName\":\"broker-a\",\"cluster\":\"DefaultCluster\"}},\"syncStateSet\":[1]}}"));
    node.heartbeat(1, "broker-a", 1, 10_000, 1, 100);
    check(&mut node, 1002, &elect("2"), b"",
        &resp(2011, Some(&format!("\"masterAddress\":\"{A1}\",\"masterBrokerId\":\"1\",\"masterEpoch\":\"1\",\"syncStateSetEpoch\":\"1\"")),
            Some("The old master 1 is still alive, not need to elect new master for broker broker-a")),
        "{\"syncStateSet\":[1]}");
}

#[test]
fn elect_master_1002_failures_and_the_controller_path() {
    let (_dir, mut node) = with_master(2);
    // The master goes silent; 2 is alive but not in the SyncStateSet {1}.
    node.now += 10_001;
    node.heartbeat(2, "broker-a", 2, 10_000, 1, 0);
    check(
        &mut node,
        1002,
        &[
            CLUSTER,
            NAME,
            ("brokerId", "2"),
            ("designateElect", "false"),
        ],
        b"",
        &resp(2012, Some(""), Some("Failed to elect a new master")),
        "",
    );
    // brokerId -1 (or absent, or not a number) takes the controller's path: no master, epoch + 1.
    check(
        &mut node,
        1002,
        &[CLUSTER, NAME, ("brokerId", "-1")],
        b"",
        &resp(
            2004,
            Some(""),
            Some("Old master has down and failed to elect a new broker master"),
        ),
        "",
    );
    check(
        &mut node,
        1002,
        &[CLUSTER, NAME, ("brokerId", "x")],
        b"",
        &resp(
            2004,
            Some(""),
            Some("Old master has down and failed to elect a new broker master"),
        ),
        "",
    );
    check(
        &mut node,
        1004,
        &[NAME],
        b"",
        &resp(0, Some("\"masterEpoch\":\"3\""), None),
        "{\"syncStateSet\":[1],\"syncStateSetEpoch\":1}",
    );
}

#[test]
fn elect_master_1002_designated_by_an_administrator() {
    let (_dir, mut node) = with_master(2);
    let alter = node.call(
        1001,
        &[NAME, ("masterBrokerId", "1"), ("masterEpoch", "1")],
        b"{\"syncStateSet\":[1,2],\"syncStateSetEpoch\":1}",
    );
    assert!(alter.0.starts_with("{\"code\":0,"), "{}", alter.0);
    // Designating an id that is not alive elects nobody, even with the master alive.
    check(
        &mut node,
        1002,
        &[CLUSTER, NAME, ("brokerId", "3"), ("designateElect", "true")],
        b"",
        &resp(2012, Some(""), Some("Failed to elect a new master")),
        "",
    );
    check(&mut node, 1002, &[CLUSTER, NAME, ("brokerId", "2"), ("designateElect", "true")], b"",
        &resp(0, Some(&format!("\"masterAddress\":\"{A2}\",\"masterBrokerId\":\"2\",\"masterEpoch\":\"2\",\"syncStateSetEpoch\":\"3\"")), None),
        &format!("{{\"brokerMemberGroup\":{{\"brokerAddrs\":{{1:\"{A1}\",2:\"{A2}\"}},\"brokerName\":\"broker-a\",\"cluster\":\"DefaultCluster\"}},\"syncStateSet\":[2]}}"));
}

#[test]
fn get_replica_info_1004() {
    let (_dir, mut node) = registered(1);
    check(
        &mut node,
        1004,
        &[("brokerName", "broker-x")],
        b"",
        &resp(2008, Some(""), Some("Broker metadata is not existed")),
        "",
    );
    check(
        &mut node,
        1004,
        &[],
        b"",
        &resp(1, None, Some("the custom field <brokerName> is null")),
        "",
    );
    check(
        &mut node,
        1004,
        &[NAME],
        b"",
        &resp(0, Some("\"masterEpoch\":\"0\""), None),
        "{\"syncStateSet\":[],\"syncStateSetEpoch\":0}",
    );
    assert_eq!(node.self_elect("broker-a", 1), 0);
    check(
        &mut node,
        1004,
        &[NAME],
        b"",
        &resp(
            0,
            Some(&format!(
                "\"masterAddress\":\"{A1}\",\"masterBrokerId\":\"1\",\"masterEpoch\":\"1\""
            )),
            None,
        ),
        "{\"syncStateSet\":[1],\"syncStateSetEpoch\":1}",
    );
}

#[test]
fn alter_sync_state_set_1001_every_check_in_order() {
    let (_dir, mut node) = with_master(3);
    let header = |master: &'static str, epoch: &'static str| {
        [NAME, ("masterBrokerId", master), ("masterEpoch", epoch)]
    };
    let refused =
        |code: i32, remark: &str| resp(code, Some("\"newSyncStateSetEpoch\":\"0\""), Some(remark));
    let because = "Rejecting alter syncStateSet request because";
    type Case<'a> = (Vec<(&'a str, &'a str)>, &'a str, String);
    let cases: Vec<Case> = vec![
        (vec![("brokerName", "broker-x"), ("masterBrokerId", "1"), ("masterEpoch", "1")], "{\"syncStateSet\":[1,2],\"syncStateSetEpoch\":1}",
            refused(2013, "Broker metadata is not existed")),
        (header("1", "1").to_vec(), "{\"syncStateSet\":[1],\"syncStateSetEpoch\":1}",
            refused(2013, "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet")),
        (header("2", "1").to_vec(), "{\"syncStateSet\":[1,2],\"syncStateSetEpoch\":1}",
            refused(2002, &format!("{because} the current leader is:{{1}}, not {{2}}"))),
        (vec![NAME, ("masterEpoch", "1")], "{\"syncStateSet\":[1,2],\"syncStateSetEpoch\":1}",
            refused(2002, &format!("{because} the current leader is:{{1}}, not {{null}}"))),
        (header("1", "5").to_vec(), "{\"syncStateSet\":[1,2],\"syncStateSetEpoch\":1}",
            refused(2000, &format!("{because} the current master epoch is:{{1}}, not {{5}}"))),
        (header("1", "1").to_vec(), "{\"syncStateSet\":[1,2],\"syncStateSetEpoch\":7}",
            refused(2001, &format!("{because} the current syncStateSet epoch is:{{1}}, not {{7}}"))),
        (header("1", "1").to_vec(), "{\"syncStateSet\":[1,9],\"syncStateSetEpoch\":1}",
            refused(2003, &format!("{because} the replicas {{9}} don't exist"))),
        (header("1", "1").to_vec(), "{\"syncStateSet\":[1,3],\"syncStateSetEpoch\":1}",
            refused(2006, &format!("{because} the replicas {{3}} don't alive"))),
        (header("1", "1").to_vec(), "{\"syncStateSet\":[2],\"syncStateSetEpoch\":1}",
            refused(2013, &format!("{because} the newSyncStateSet don't contains origin leader {{1}}"))),
        (vec![NAME, ("masterBrokerId", "1")], "{\"syncStateSet\":[1,2],\"syncStateSetEpoch\":1}",
            resp(1, None, Some("the custom field <masterEpoch> is null"))),
        (header("1", "1").to_vec(), "", resp(1, None, Some("the custom field <syncStateSet body> is null"))),
        (header("1", "1").to_vec(), "{\"syncStateSet\":[1,2]", resp(1, None, Some("SyncStateSet body: invalid JSON at byte 21: unexpected end of input in object"))),
    ];
    for (ext, body, expected) in &cases {
        check(&mut node, 1001, ext, body.as_bytes(), expected, "");
    }
    check(
        &mut node,
        1001,
        &header("1", "1"),
        b"{\"syncStateSet\":[2,1],\"syncStateSetEpoch\":1}",
        &resp(0, Some("\"newSyncStateSetEpoch\":\"2\""), None),
        "{\"syncStateSet\":[1,2],\"syncStateSetEpoch\":2}",
    );
}

#[test]
fn get_sync_state_data_1006() {
    let (_dir, mut node) = with_master(3);
    check(
        &mut node,
        1006,
        &[],
        b"",
        &resp(1, None, Some("not set any response code")),
        "",
    );
    check(
        &mut node,
        1006,
        &[],
        b"[]",
        &resp(1, None, Some("not set any response code")),
        "",
    );
    let (header, _) = node.call(1006, &[], b"not json");
    assert!(
        header.starts_with("{\"code\":1,\"flag\":1,")
            && header.contains("\"remark\":\"broker name list: invalid JSON"),
        "{header}"
    );
    let identity = |id: i64, addr: &str, alive: bool| {
        format!("{{\"alive\":{alive},\"brokerAddress\":\"{addr}\",\"brokerId\":{id},\"brokerName\":\"broker-a\"}}")
    };
    let expected = format!(
        "{{\"replicasInfoTable\":{{\"broker-a\":{{\"inSyncReplicas\":[{}],\"masterAddress\":\"{A1}\",\"masterBrokerId\":1,\"masterEpoch\":1,\"notInSyncReplicas\":[{},{}],\"syncStateSetEpoch\":1}}}}}}",
        identity(1, A1, true),
        identity(2, A2, true),
        identity(3, A3, false)
    );
    check(
        &mut node,
        1006,
        &[],
        b"[\"broker-a\",\"broker-x\",\"broker-a\"]",
        &resp(0, None, None),
        &expected,
    );
    check(
        &mut node,
        1006,
        &[],
        b"[\"broker-x\"]",
        &resp(0, None, None),
        "{\"replicasInfoTable\":{}}",
    );
}

#[test]
fn clean_broker_data_1011() {
    let (_dir, mut node) = with_master(3);
    let ids = |list: &'static str| [CLUSTER, NAME, ("brokerControllerIdsToClean", list)];
    check(
        &mut node,
        1011,
        &[CLUSTER, NAME],
        b"",
        &resp(
            2009,
            None,
            Some("Broker broker-a is still alive, clean up failure"),
        ),
        "",
    );
    check(&mut node, 1011, &ids("1;x"), b"",
        &resp(2009, None, Some("Please set the option <brokerControllerIdsToClean> according to the format, exception: java.lang.NumberFormatException: For input string: \\\"x\\\"")), "");
    check(
        &mut node,
        1011,
        &ids("3;2"),
        b"",
        &resp(
            2009,
            None,
            Some("Broker [broker-a,  2] is still alive, clean up failure"),
        ),
        "",
    );
    check(
        &mut node,
        1011,
        &[
            CLUSTER,
            ("brokerName", "broker-x"),
            ("brokerControllerIdsToClean", "1"),
        ],
        b"",
        &resp(
            2009,
            None,
            Some("Broker broker-x is not existed,clean broker data failure."),
        ),
        "",
    );
    check(
        &mut node,
        1011,
        &[CLUSTER],
        b"",
        &resp(1, None, Some("the custom field <brokerName> is null")),
        "",
    );
    check(&mut node, 1011, &ids("3"), b"", &resp(0, None, None), "");
    let (_, body) = node.call(1006, &[], b"[\"broker-a\"]");
    assert!(!String::from_utf8(body).unwrap().contains("\"brokerId\":3"));
    // With isCleanLivingBroker the id list is ignored: the whole set goes.
    check(
        &mut node,
        1011,
        &[
            CLUSTER,
            NAME,
            ("brokerControllerIdsToClean", "2"),
            ("isCleanLivingBroker", "true"),
        ],
        b"",
        &resp(0, None, None),
        "",
    );
    check(
        &mut node,
        1004,
        &[NAME],
        b"",
        &resp(2008, Some(""), Some("Broker metadata is not existed")),
        "",
    );
}

#[test]
fn broker_heartbeat_904() {
    let (_dir, mut node) = registered(1);
    let hb = [CLUSTER, NAME, ("brokerAddr", A1), ("brokerId", "1")];
    check(
        &mut node,
        904,
        &hb,
        b"",
        &resp(0, None, Some("Heart beat success")),
        "",
    );
    check(
        &mut node,
        904,
        &[CLUSTER, NAME, ("brokerAddr", A1)],
        b"",
        &resp(2005, None, Some("Heart beat with empty brokerId")),
        "",
    );
    // Java brokers send it oneway: recorded, never answered.
    let oneway = frame(
        &request_header(
            904,
            10,
            2,
            &[CLUSTER, ("brokerName", "broker-b"), ("brokerId", "4")],
        ),
        b"",
    );
    assert_eq!(node.request(&oneway), None);
    assert!(node
        .c()
        .liveness()
        .get(Some("DefaultCluster"), "broker-b", 4)
        .is_some());
}

#[test]
fn get_metadata_info_1005() {
    let (_dir, mut node) = registered(0);
    check(&mut node, 1005, &[], b"",
        &resp(0, Some("\"controllerLeaderAddress\":\"127.0.0.1:9878\",\"controllerLeaderId\":\"n0\",\"group\":\"group1\",\"isLeader\":\"true\",\"peers\":\"n0:127.0.0.1:9878;\""), None), "");
}

#[test]
fn update_and_get_controller_config_1009_1010() {
    let (_dir, mut node) = registered(0);
    check(
        &mut node,
        1009,
        &[],
        b"electMasterMaxRetryCount=2\n",
        &resp(0, None, None),
        "",
    );
    check(&mut node, 1009, &[], b"", &resp(0, None, None), "");
    check(
        &mut node,
        1009,
        &[],
        b"configStorePath=/etc/passwd\n",
        &resp(16, None, Some("Can not update config in black list.")),
        "",
    );
    check(
        &mut node,
        1009,
        &[],
        b"scanNotActiveBrokerInterval=1\n",
        &resp(
            1,
            None,
            Some("scanNotActiveBrokerInterval: takes effect at start only: edit the config file"),
        ),
        "",
    );
    check(
        &mut node,
        1009,
        &[],
        b"electMasterMaxRetryCount=x\n",
        &resp(
            1,
            None,
            Some("electMasterMaxRetryCount: \\\"x\\\" is not an integer"),
        ),
        "",
    );
    let (header, body) = node.call(1010, &[], b"");
    assert_eq!(header, resp(0, None, None));
    let text = String::from_utf8(body).unwrap();
    for line in [
        "controllerDLegerGroup=group1",
        "controllerDLegerPeers=n0-127.0.0.1:9878",
        "controllerDLegerSelfId=n0",
        "controllerType=DLedger",
        "electMasterMaxRetryCount=2",
        "enableElectUncleanMaster=false",
        "notifyBrokerRoleChanged=true",
        "isProcessReadEvent=false",
        "scanInactiveMasterInterval=5000",
        "scanNotActiveBrokerInterval=5000",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    assert!(text.lines().any(|l| l.starts_with("configStorePath=")
        && l.ends_with("/rmq-controller-n0/controller.properties")));
    // The change survives a restart.
    node.restart();
    assert_eq!(node.c().config().settings().elect_master_max_retry_count, 2);
}

#[test]
fn other_codes_are_not_supported() {
    let (_dir, mut node) = registered(0);
    check(
        &mut node,
        105,
        &[],
        b"",
        &resp(3, None, Some(" request type 105 not supported")),
        "",
    );
    check(
        &mut node,
        1007,
        &[],
        b"",
        &resp(3, None, Some(" request type 1007 not supported")),
        "",
    );
    check(
        &mut node,
        51001,
        &[],
        b"",
        &resp(3, None, Some(" request type 51001 not supported")),
        "",
    );
}

#[test]
fn every_golden_scenario_survives_a_restart() {
    let (_dir, mut node) = with_master(3);
    node.call(
        1001,
        &[NAME, ("masterBrokerId", "1"), ("masterEpoch", "1")],
        b"{\"syncStateSet\":[1,2],\"syncStateSetEpoch\":1}",
    );
    node.call(
        1011,
        &[CLUSTER, NAME, ("brokerControllerIdsToClean", "3")],
        b"",
    );
    let before = node.c().state().clone();
    node.restart();
    assert_eq!(node.c().state(), &before);
}

#[test]
fn the_first_election_takes_any_id_even_an_unregistered_one() {
    let (_dir, mut node) = registered(1);
    check(&mut node, 1002, &[CLUSTER, NAME, ("brokerId", "9")], b"",
        &resp(0, Some("\"masterBrokerId\":\"9\",\"masterEpoch\":\"1\",\"syncStateSetEpoch\":\"1\""), None),
        &format!("{{\"brokerMemberGroup\":{{\"brokerAddrs\":{{1:\"{A1}\"}},\"brokerName\":\"broker-a\",\"cluster\":\"DefaultCluster\"}},\"syncStateSet\":[9]}}"));
}

#[test]
fn an_id_list_of_only_separators_cleans_the_whole_set() {
    let (_dir, mut node) = with_master(2);
    check(
        &mut node,
        1011,
        &[CLUSTER, NAME, ("brokerControllerIdsToClean", ";;")],
        b"",
        &resp(0, None, None),
        "",
    );
    check(
        &mut node,
        1004,
        &[NAME],
        b"",
        &resp(2008, Some(""), Some("Broker metadata is not existed")),
        "",
    );
}

/// rocketmq-rust brokers send 904 as a request with `storeReady` and read a write lease in
/// the answer; only the master, after the 12 s handover wait, gets one.
#[test]
fn broker_heartbeat_904_with_a_write_lease_for_rocketmq_rust_masters() {
    let (_dir, mut node) = registered(2);
    assert_eq!(node.self_elect("broker-a", 1), 0);
    let master = [
        CLUSTER,
        NAME,
        ("brokerAddr", A1),
        ("brokerId", "1"),
        ("epoch", "1"),
        ("storeReady", "true"),
    ];
    let slave = [
        CLUSTER,
        NAME,
        ("brokerAddr", A2),
        ("brokerId", "2"),
        ("epoch", "1"),
        ("storeReady", "true"),
    ];
    check(
        &mut node,
        904,
        &master,
        b"",
        &resp(0, None, Some("Heart beat success")),
        "",
    );
    node.now += 12_000;
    check(&mut node, 904, &master, b"", &resp(0, None, Some("Heart beat success")),
        "{\"brokerId\":1,\"generation\":1000000001,\"leaseDurationMillis\":10000,\"masterEpoch\":1,\"safetyMarginMillis\":2000}");
    check(
        &mut node,
        904,
        &slave,
        b"",
        &resp(0, None, Some("Heart beat success")),
        "",
    );
    check(&mut node, 904, &master, b"", &resp(0, None, Some("Heart beat success")),
        "{\"brokerId\":1,\"generation\":1000000002,\"leaseDurationMillis\":10000,\"masterEpoch\":1,\"safetyMarginMillis\":2000}");
}
