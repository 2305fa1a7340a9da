//! `rmq-admin` run as a process against real servers: every command's output, the JSON form,
//! errors and exit codes (0 ok, 1 server error / not found, 2 usage, 3 unreachable).

mod common;
mod fake_namesrv;

use common::*;
use fake_namesrv::{dead_addr, Behaviour, FakeNamesrv};
use rmq_namesrv::client::Client;
use rmq_namesrv::remoting::json::{self, Value};
use rmq_namesrv::route::model::TopicRouteData;
use std::process::Command;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn admin_env(args: &[&str], env: Option<&str>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rmq-admin"));
    cmd.args(args).env_remove("NAMESRV_ADDR");
    if let Some(list) = env {
        cmd.env("NAMESRV_ADDR", list);
    }
    let out = cmd.output().expect("rmq-admin runs");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

/// `rmq-admin -n <list> args...`
fn admin(list: &str, args: &[&str]) -> Run {
    let mut all = vec!["-n", list];
    all.extend_from_slice(args);
    admin_env(&all, None)
}

fn ok(run: &Run) -> &str {
    assert_eq!(
        run.code, 0,
        "stderr: {}\nstdout: {}",
        run.stderr, run.stdout
    );
    &run.stdout
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

fn parse(text: &str) -> Value {
    json::parse(text.as_bytes()).expect("--json output parses")
}

/// Two clusters: C1 has broker-a (master + slave), C2 has broker-b.
/// TopicA on broker-a, TopicB on broker-b, TopicShared on both.
struct Fixture {
    server: TestServer,
    /// The registering connections: closing them would unregister the brokers.
    _brokers: Vec<Client>,
}

fn fixture() -> Fixture {
    let server = TestServer::start();
    let a0 = Broker::new("C1", "broker-a", "127.0.0.1:10911", 0);
    let a1 = Broker::new("C1", "broker-a", "127.0.0.1:10921", 1);
    let b0 = Broker::new("C2", "broker-b", "127.0.0.1:10931", 0);
    let a_topics = [topic("TopicA", 8, 6), topic("TopicShared", 4, 6)];
    let b_topics = [topic("TopicB", 2, 6), topic("TopicShared", 4, 6)];
    let mut conns = Vec::new();
    for (broker, topics) in [(&a0, &a_topics), (&a1, &a_topics), (&b0, &b_topics)] {
        let mut c = server.client();
        let resp = register(&mut c, broker, &body_with(1, topics));
        assert_eq!(resp.code, 0, "{:?}", resp.remark);
        conns.push(c);
    }
    Fixture {
        server,
        _brokers: conns,
    }
}

#[test]
fn help_lists_every_command() {
    let run = admin_env(&["help"], None);
    let out = ok(&run);
    for name in [
        "clusterList",
        "topicRoute",
        "topicList",
        "brokerList",
        "updateKvConfig",
        "deleteKvConfig",
        "getKvConfig",
        "getNamesrvConfig",
        "updateNamesrvConfig",
        "wipeWritePerm",
        "addWritePerm",
        "deleteTopic",
        "stats",
    ] {
        assert!(
            out.lines().any(|l| l.trim_start().starts_with(name)),
            "help lacks {name}:\n{out}"
        );
    }
    let run = admin_env(&["help", "updateKvConfig"], None);
    let out = ok(&run);
    assert!(out.starts_with("usage: rmq-admin updateKvConfig -s <namespace> -k <key> -v <value>"));
    assert_eq!(admin_env(&["topicRoute", "--help"], None).code, 0);
}

#[test]
fn usage_errors_exit_2() {
    let srv = TestServer::start();
    for args in [
        &[][..],
        &["noSuchCommand"][..],
        &["topicRoute"][..],
        &["topicRoute", "-x", "y"][..],
        &["topicRoute", "-t"][..],
        &["updateKvConfig", "-s", "NS", "-k", "k"][..],
        &["clusterList", "stray"][..],
        &["--timeout", "soon", "clusterList"][..],
    ] {
        let run = admin(&srv.addr, args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.starts_with("rmq-admin: "), "{}", run.stderr);
        assert!(run.stdout.is_empty());
    }
    // No -n and no NAMESRV_ADDR.
    let run = admin_env(&["clusterList"], None);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("NAMESRV_ADDR"), "{}", run.stderr);
}

#[test]
fn cluster_list_shows_every_broker_address() {
    let f = fixture();
    let addr = &f.server.addr;
    let run = admin(addr, &["clusterList"]);
    assert_eq!(
        lines(ok(&run)),
        vec![
            "CLUSTER  BROKER    BID  ADDRESS          ZONE",
            "C1       broker-a  0    127.0.0.1:10911  -",
            "C1       broker-a  1    127.0.0.1:10921  -",
            "C2       broker-b  0    127.0.0.1:10931  -",
        ]
    );
    let run = admin(addr, &["clusterList", "-c", "C2"]);
    assert_eq!(lines(ok(&run)).len(), 2);

    let run = admin(addr, &["--json", "clusterList"]);
    let v = parse(ok(&run));
    let rows = v.as_array().expect("array");
    assert_eq!(rows.len(), 3);
    assert_eq!(
        rows[1].get("brokerName").and_then(Value::as_str),
        Some("broker-a")
    );
    assert_eq!(rows[1].get("brokerId"), Some(&Value::Int(1)));
    assert_eq!(
        rows[1].get("brokerAddr").and_then(Value::as_str),
        Some("127.0.0.1:10921")
    );
    assert_eq!(rows[1].get("zoneName"), Some(&Value::Null));

    let run = admin(addr, &["clusterList", "-c", "Nope"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("cluster Nope not found"),
        "{}",
        run.stderr
    );
}

#[test]
fn broker_list_shows_masters_and_slaves() {
    let f = fixture();
    let run = admin(&f.server.addr, &["brokerList"]);
    assert_eq!(
        lines(ok(&run)),
        vec![
            "BROKER    CLUSTER  MASTER           SLAVES             ZONE  ACTING_MASTER",
            "broker-a  C1       127.0.0.1:10911  1=127.0.0.1:10921  -     false",
            "broker-b  C2       127.0.0.1:10931  -                  -     false",
        ]
    );
    let run = admin(&f.server.addr, &["brokerList", "-c", "C1", "--json"]);
    let v = parse(ok(&run));
    let rows = v.as_array().expect("array");
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].get("masterAddr").and_then(Value::as_str),
        Some("127.0.0.1:10911")
    );
    assert_eq!(rows[0].get("enableActingMaster"), Some(&Value::Bool(false)));
}

#[test]
fn topic_route_prints_brokers_and_queues_or_not_found() {
    let f = fixture();
    let addr = &f.server.addr;
    let run = admin(addr, &["topicRoute", "-t", "TopicShared"]);
    assert_eq!(
        lines(ok(&run)),
        vec![
            "Topic: TopicShared",
            "",
            "BROKER    CLUSTER  BID  ADDRESS          ZONE",
            "broker-a  C1       0    127.0.0.1:10911  -",
            "broker-a  C1       1    127.0.0.1:10921  -",
            "broker-b  C2       0    127.0.0.1:10931  -",
            "",
            "BROKER    READ_QUEUES  WRITE_QUEUES  PERM     SYS_FLAG",
            "broker-a  4            4             6 (RW-)  0",
            "broker-b  4            4             6 (RW-)  0",
        ]
    );

    // --json is the route itself, equal to what the client library decodes.
    let run = admin(addr, &["topicRoute", "--json", "--topic", "TopicA"]);
    let from_cli = TopicRouteData::decode(ok(&run).as_bytes()).expect("route JSON");
    let direct = f.server.client().get_route("TopicA").expect("route call");
    assert_eq!(Some(from_cli), direct);

    let run = admin(addr, &["topicRoute", "-t", "NoSuchTopic"]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.is_empty());
    assert_eq!(
        run.stderr.trim(),
        format!("rmq-admin: topic NoSuchTopic not found (no route on {addr})")
    );
}

#[test]
fn topic_list_all_and_per_cluster() {
    let f = fixture();
    let addr = &f.server.addr;
    let run = admin(addr, &["topicList"]);
    let topics = lines(ok(&run));
    for t in ["TopicA", "TopicB", "TopicShared"] {
        assert!(topics.contains(&t), "{topics:?}");
    }
    let mut sorted = topics.clone();
    sorted.sort();
    assert_eq!(topics, sorted);

    let run = admin(addr, &["topicList", "-c"]);
    let out = ok(&run);
    let rows = lines(out);
    assert_eq!(rows[0], "CLUSTER  TOPIC");
    for row in [
        "C1       TopicA",
        "C1       TopicShared",
        "C2       TopicB",
        "C2       TopicShared",
    ] {
        assert!(rows.contains(&row), "{out}");
    }
    assert!(!rows.contains(&"C2       TopicA"), "{out}");

    let run = admin(addr, &["--json", "topicList"]);
    let v = parse(ok(&run));
    assert!(v
        .as_array()
        .expect("array")
        .contains(&Value::Str("TopicB".into())));

    // The server refuses when the list is disabled: a server error, exit 1.
    ok(&admin(
        addr,
        &[
            "updateNamesrvConfig",
            "-k",
            "enableAllTopicList",
            "-v",
            "false",
        ],
    ));
    let run = admin(addr, &["topicList"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("SYSTEM_ERROR (1): disable"),
        "{}",
        run.stderr
    );
}

#[test]
fn kv_config_update_get_delete() {
    let srv = TestServer::start();
    let addr = &srv.addr;
    let run = admin(
        addr,
        &[
            "updateKvConfig",
            "-s",
            "ORDER_TOPIC_CONFIG",
            "-k",
            "TopicA",
            "-v",
            "broker-a:4",
        ],
    );
    assert_eq!(
        lines(ok(&run)),
        vec![
            format!("{:w$}  RESULT", "NAMESRV", w = addr.len()),
            format!("{addr}  OK")
        ]
    );
    ok(&admin(
        addr,
        &[
            "updateKvConfig",
            "-s",
            "ORDER_TOPIC_CONFIG",
            "-k",
            "TopicB",
            "-v",
            "broker-b:8",
        ],
    ));
    assert_eq!(
        srv.client()
            .get_kv_config("ORDER_TOPIC_CONFIG", "TopicA")
            .expect("get"),
        Some("broker-a:4".to_string())
    );

    let run = admin(
        addr,
        &["getKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "TopicB"],
    );
    assert_eq!(ok(&run), "broker-b:8\n");
    let run = admin(addr, &["getKvConfig", "-s", "ORDER_TOPIC_CONFIG"]);
    assert_eq!(
        lines(ok(&run)),
        vec!["KEY     VALUE", "TopicA  broker-a:4", "TopicB  broker-b:8"]
    );
    let run = admin(addr, &["getKvConfig", "-s", "ORDER_TOPIC_CONFIG", "--json"]);
    let v = parse(ok(&run));
    assert_eq!(v.as_array().map(<[Value]>::len), Some(2));
    assert_eq!(
        v.as_array()
            .and_then(|a| a[0].get("value"))
            .and_then(Value::as_str),
        Some("broker-a:4")
    );

    ok(&admin(
        addr,
        &["deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "TopicA"],
    ));
    assert_eq!(
        srv.client()
            .get_kv_config("ORDER_TOPIC_CONFIG", "TopicA")
            .expect("get"),
        None
    );
    let run = admin(
        addr,
        &["getKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "TopicA"],
    );
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr.trim(),
        "rmq-admin: no KV config item ORDER_TOPIC_CONFIG/TopicA"
    );
    let run = admin(addr, &["getKvConfig", "-s", "NO_SUCH_NAMESPACE"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("no KV config namespace NO_SUCH_NAMESPACE"),
        "{}",
        run.stderr
    );
}

#[test]
fn namesrv_config_get_and_update() {
    let srv = TestServer::start();
    let addr = &srv.addr;
    let run = admin(addr, &["getNamesrvConfig"]);
    let out = ok(&run);
    assert_eq!(lines(out)[0], format!("============ {addr} ============"));
    let row = |key: &str, out: &str| -> Option<String> {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string())
    };
    assert_eq!(row("orderMessageEnable", out).as_deref(), Some("false"));

    ok(&admin(
        addr,
        &[
            "updateNamesrvConfig",
            "-k",
            "orderMessageEnable",
            "-v",
            "true",
        ],
    ));
    let run = admin(addr, &["getNamesrvConfig"]);
    assert_eq!(row("orderMessageEnable", ok(&run)).as_deref(), Some("true"));
    let run = admin(addr, &["getNamesrvConfig", "--json"]);
    let v = parse(ok(&run));
    assert_eq!(
        v.get(addr)
            .and_then(|c| c.get("orderMessageEnable"))
            .and_then(Value::as_str),
        Some("true")
    );

    // A black-listed key: the server says no, exit 1, the row carries the reason.
    let run = admin(
        addr,
        &[
            "updateNamesrvConfig",
            "-k",
            "kvConfigPath",
            "-v",
            "/etc/passwd",
        ],
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stdout
            .contains("NO_PERMISSION (16): Can not update config in black list."),
        "{}",
        run.stdout
    );
    assert!(run.stderr.contains(addr.as_str()), "{}", run.stderr);
}

#[test]
fn write_permission_wipe_and_add() {
    let f = fixture();
    let addr = &f.server.addr;
    let perm_of = |topic: &str| -> Vec<(String, i32)> {
        let route = f
            .server
            .client()
            .get_route(topic)
            .expect("route")
            .expect("exists");
        route
            .queue_datas
            .iter()
            .map(|q| (q.broker_name.clone(), q.perm))
            .collect()
    };
    let run = admin(addr, &["wipeWritePerm", "-b", "broker-a"]);
    assert_eq!(lines(ok(&run))[1], format!("{addr}  OK      2"));
    assert_eq!(
        perm_of("TopicShared"),
        vec![("broker-a".to_string(), 4), ("broker-b".to_string(), 6)]
    );
    let run = admin(addr, &["topicRoute", "-t", "TopicA"]);
    assert!(ok(&run).contains("4 (R--)"));

    let run = admin(addr, &["--json", "addWritePerm", "-b", "broker-a"]);
    let v = parse(ok(&run));
    let row = &v.as_array().expect("array")[0];
    assert_eq!(
        row.get("namesrv").and_then(Value::as_str),
        Some(addr.as_str())
    );
    assert_eq!(row.get("result").and_then(Value::as_str), Some("OK"));
    assert_eq!(row.get("addTopicCount"), Some(&Value::Int(2)));
    assert_eq!(perm_of("TopicA"), vec![("broker-a".to_string(), 6)]);

    // An unknown broker touches nothing.
    let run = admin(addr, &["wipeWritePerm", "-b", "nobody"]);
    assert!(ok(&run).lines().nth(1).is_some_and(|l| l.ends_with("  0")));
}

#[test]
fn delete_topic_everywhere_or_in_one_cluster() {
    let f = fixture();
    let addr = &f.server.addr;
    let run = admin(addr, &["deleteTopic", "-t", "TopicShared", "-c", "C2"]);
    assert_eq!(lines(ok(&run))[1], format!("{addr}  OK"));
    let route = f
        .server
        .client()
        .get_route("TopicShared")
        .expect("route")
        .expect("still there");
    let names: Vec<&str> = route
        .queue_datas
        .iter()
        .map(|q| q.broker_name.as_str())
        .collect();
    assert_eq!(names, vec!["broker-a"]);

    ok(&admin(addr, &["deleteTopic", "-t", "TopicA"]));
    assert_eq!(f.server.client().get_route("TopicA").expect("route"), None);
    assert_eq!(admin(addr, &["topicRoute", "-t", "TopicA"]).code, 1);
}

#[test]
fn stats_shows_the_extension_and_fails_on_other_name_servers() {
    let f = fixture();
    let addr = &f.server.addr;
    let run = admin(addr, &["stats"]);
    let out = ok(&run);
    let value = |key: &str| -> Option<i64> {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
    };
    assert_eq!(lines(out)[0], format!("============ {addr} ============"));
    assert_eq!(value("brokers"), Some(3));
    assert_eq!(value("brokerGroups"), Some(2));
    assert_eq!(value("clusters"), Some(2));
    assert_eq!(value("registrations"), Some(3));
    assert_eq!(
        value("rejectedBusy"),
        Some(0),
        "every field the server reports is shown"
    );
    assert!(value("connections").is_some_and(|n| n >= 4), "{out}");
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["103", "REGISTER_BROKER", "3"]),
        "{out}"
    );

    let run = admin(addr, &["stats", "--json"]);
    let v = parse(ok(&run));
    let st = v.get(addr).expect("keyed by address");
    assert_eq!(st.get("topics").and_then(Value::as_i64), Some(3));
    assert_eq!(
        st.get("requests")
            .and_then(|r| r.get("103"))
            .and_then(Value::as_i64),
        Some(3)
    );

    // A name server without the extension answers REQUEST_CODE_NOT_SUPPORTED: exit 1.
    let fake = FakeNamesrv::start(Behaviour::NoStats);
    let run = admin(&fake.addr, &["stats"]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.is_empty());
    assert_eq!(
        run.stderr.trim(),
        format!(
            "rmq-admin: {}: REQUEST_CODE_NOT_SUPPORTED (3): request type 29001 not supported",
            fake.addr
        )
    );
}

#[test]
fn unreachable_servers_exit_3_and_reads_fail_over() {
    let f = fixture();
    let dead = dead_addr();
    let run = admin(&dead, &["clusterList"]);
    assert_eq!(run.code, 3);
    assert!(run.stdout.is_empty());
    assert!(
        run.stderr
            .starts_with("rmq-admin: no name server reachable ("),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains(&dead), "{}", run.stderr);

    // A hung server times out after --timeout.
    let hung = FakeNamesrv::start(Behaviour::Silent);
    let run = admin(
        &hung.addr,
        &["--timeout", "200", "topicRoute", "-t", "TopicA"],
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains("timed out"), "{}", run.stderr);

    // One of two down: reads go to the live one whichever the random start was.
    let list = format!("{dead};{}", f.server.addr);
    for _ in 0..3 {
        let run = admin(&list, &["clusterList", "-c", "C2"]);
        assert_eq!(lines(ok(&run)).len(), 2);
    }
    // Writes go to both: the live one is updated, the dead one reported, exit 3.
    let run = admin(&list, &["updateKvConfig", "-s", "NS", "-k", "k", "-v", "v"]);
    assert_eq!(run.code, 3);
    let rows = lines(&run.stdout);
    assert!(
        rows[1].starts_with(&dead) && !rows[1].ends_with("OK"),
        "{}",
        run.stdout
    );
    assert_eq!(
        rows[2].split_whitespace().collect::<Vec<_>>(),
        [f.server.addr.as_str(), "OK"]
    );
    assert!(run.stderr.contains(&dead), "{}", run.stderr);
    assert_eq!(
        f.server.client().get_kv_config("NS", "k").expect("get"),
        Some("v".into())
    );

    // NAMESRV_ADDR is used when -n is absent.
    let run = admin_env(&["clusterList", "-c", "C1"], Some(&list));
    assert_eq!(lines(ok(&run)).len(), 3);
}
