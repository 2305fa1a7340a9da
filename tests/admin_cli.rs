//! `rmq-admin` run as a process against real servers: every command's output, the JSON form,
//! errors and exit codes (0 ok, 1 error answer / not found / not a name server, 2 usage,
//! 3 unreachable, 4 partial: some servers failed), and peers that are not name servers.

#[path = "common/admin_run.rs"]
mod admin_run;
mod common;
mod fake_namesrv;

use admin_run::{admin_env, ok, parse, Run};
use common::*;
use fake_namesrv::{dead_addr, Behaviour, FakeNamesrv};
use rmq_namesrv::client::Client;
use rmq_namesrv::remoting::json::Value;
use rmq_namesrv::route::model::TopicRouteData;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

/// `rmq-admin -n <list> args...`
fn admin(list: &str, args: &[&str]) -> Run {
    let mut all = vec!["-n", list];
    all.extend_from_slice(args);
    admin_env(&all, None)
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
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
        "updateOrderConf",
        "topicClusterList",
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
fn every_binary_prints_its_name_version_and_commit() {
    let binaries = [
        ("rmq-namesrv", env!("CARGO_BIN_EXE_rmq-namesrv")),
        ("rmq-admin", env!("CARGO_BIN_EXE_rmq-admin")),
        ("rmq-bench", env!("CARGO_BIN_EXE_rmq-bench")),
    ];
    for (name, path) in binaries {
        for flag in ["--version", "-V"] {
            let out = std::process::Command::new(path).arg(flag).output().unwrap();
            let stdout = String::from_utf8(out.stdout).unwrap();
            assert!(out.status.success(), "{name} {flag}: {:?}", out.status);
            let want = format!("{name} {} (git ", env!("CARGO_PKG_VERSION"));
            assert!(
                stdout.starts_with(&want) && stdout.ends_with(")\n"),
                "{name} {flag}: {stdout:?}"
            );
            assert_eq!(stdout.lines().count(), 1, "{name} {flag}: {stdout:?}");
        }
    }
    // Anywhere on rmq-admin's line, as its other global options.
    let run = admin_env(&["topicRoute", "-t", "T", "-V"], None);
    assert!(ok(&run).starts_with("rmq-admin "), "{}", run.stdout);
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
fn topic_route_prints_json_like_mqadmin_tables_with_l_or_not_found() {
    let f = fixture();
    let addr = &f.server.addr;
    // Default: the route as indented JSON, as `mqadmin topicRoute` prints it.
    let run = admin(addr, &["topicRoute", "-t", "TopicA"]);
    let out = ok(&run);
    assert!(out.starts_with("{\n  \""), "{out}");
    let from_cli = TopicRouteData::decode(out.as_bytes()).expect("route JSON");
    let direct = f.server.client().get_route("TopicA").expect("route call");
    assert_eq!(Some(from_cli), direct);

    // --json is the same route on one line.
    let run = admin(addr, &["topicRoute", "--json", "--topic", "TopicA"]);
    assert_eq!(lines(ok(&run)).len(), 1);
    assert_eq!(
        Some(TopicRouteData::decode(run.stdout.as_bytes()).expect("route JSON")),
        direct
    );

    // -l (mqadmin's list form): tables.
    let run = admin(addr, &["topicRoute", "-tTopicShared", "-l"]);
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

    let run = admin(addr, &["topicRoute", "-t", "NoSuchTopic"]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.is_empty());
    assert_eq!(
        run.stderr.trim(),
        format!("rmq-admin: topic NoSuchTopic not found (no route on {addr})")
    );
}

#[test]
fn topic_cluster_list_names_every_cluster_serving_the_topic() {
    let f = fixture();
    let addr = &f.server.addr;
    assert_eq!(
        ok(&admin(addr, &["topicClusterList", "-t", "TopicShared"])),
        "C1\nC2\n"
    );
    assert_eq!(ok(&admin(addr, &["topicClusterList", "-tTopicB"])), "C2\n");
    let run = admin(addr, &["--json", "topicClusterList", "-t", "TopicA"]);
    assert_eq!(parse(ok(&run)), Value::Array(vec![Value::Str("C1".into())]));
    let run = admin(addr, &["topicClusterList", "-t", "NoSuchTopic"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("topic NoSuchTopic not found"),
        "{}",
        run.stderr
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

    // Values attached to their letters, as mqadmin (commons-cli) accepts them.
    let run = admin(addr, &["getKvConfig", "-sORDER_TOPIC_CONFIG", "-kTopicB"]);
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
        format!("rmq-admin: no KV config item ORDER_TOPIC_CONFIG/TopicA on {addr}")
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
    let run = admin(addr, &["topicRoute", "-t", "TopicA", "-l"]);
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

    // An unknown broker: said so, exit 1, nothing touched.
    for command in ["wipeWritePerm", "addWritePerm"] {
        let run = admin(addr, &[command, "-b", "nosuch"]);
        assert_eq!(run.code, 1, "{command}: {}", run.stderr);
        assert_eq!(
            run.stderr.trim(),
            format!("rmq-admin: {addr}: no broker named nosuch is registered here")
        );
        assert!(
            run.stdout.contains("no broker named nosuch"),
            "{}",
            run.stdout
        );
    }
    assert_eq!(perm_of("TopicA"), vec![("broker-a".to_string(), 6)]);
}

#[test]
fn delete_topic_everywhere_or_in_one_cluster() {
    let f = fixture();
    let addr = &f.server.addr;
    let run = admin(addr, &["deleteTopic", "-t", "TopicShared", "-c", "C2"]);
    assert_eq!(lines(ok(&run))[1], format!("{addr}  OK"));
    assert!(
        run.stderr.contains("brokers still have it"),
        "deleteTopic says brokers are not touched: {}",
        run.stderr
    );
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
    assert!(
        run.stderr.trim().starts_with(&format!(
            "rmq-admin: {}: REQUEST_CODE_NOT_SUPPORTED (3): request type 29001 not supported",
            fake.addr
        )),
        "{}",
        run.stderr
    );
}

#[test]
fn unreachable_servers_exit_3_and_reads_fail_over() {
    let f = fixture();
    let dead = dead_addr();
    let run = admin(&dead, &["clusterList"]);
    assert_eq!(run.code, 3);
    assert!(run.stdout.is_empty());
    assert_eq!(
        run.stderr.trim(),
        format!("rmq-admin: {dead}: connection refused (nothing listens there)")
    );

    // A hung server times out after --timeout.
    let hung = FakeNamesrv::start(Behaviour::Silent);
    let run = admin(
        &hung.addr,
        &["--timeout", "200", "topicRoute", "-t", "TopicA"],
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains("timed out"), "{}", run.stderr);
    assert!(run.stderr.contains(&hung.addr), "{}", run.stderr);

    // Two down: both named, still exit 3.
    let run = admin(
        &format!("{dead};{}", hung.addr),
        &["--timeout", "200", "topicList"],
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr
            .starts_with("rmq-admin: no name server of 2 answered:"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&dead) && run.stderr.contains(&hung.addr),
        "{}",
        run.stderr
    );

    // One of two down: reads go to the live one whichever the random start was.
    let list = format!("{dead};{}", f.server.addr);
    for _ in 0..3 {
        let run = admin(&list, &["clusterList", "-c", "C2"]);
        assert_eq!(lines(ok(&run)).len(), 2);
    }

    // NAMESRV_ADDR is used when -n is absent.
    let run = admin_env(&["clusterList", "-c", "C1"], Some(&list));
    assert_eq!(lines(ok(&run)).len(), 3);
}

#[test]
fn a_write_that_some_servers_missed_exits_4_and_names_them() {
    let srv = TestServer::start();
    let dead = dead_addr();
    // One live, one down: the live one is updated, the dead one reported, exit 4 (partial),
    // not 3 ("no name server reachable"), which would be a lie.
    let list = format!("{dead};{}", srv.addr);
    let run = admin(&list, &["updateKvConfig", "-s", "NS", "-k", "k", "-v", "v"]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    let rows = lines(&run.stdout);
    assert_eq!(
        rows[1]
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect::<Vec<_>>(),
        [dead.as_str(), "connection refused (nothing listens there)"]
    );
    assert_eq!(
        rows[2].split_whitespace().collect::<Vec<_>>(),
        [srv.addr.as_str(), "OK"]
    );
    assert_eq!(
        run.stderr.trim(),
        format!("rmq-admin: {dead}: connection refused (nothing listens there)")
    );
    assert_eq!(
        srv.client().get_kv_config("NS", "k").expect("get"),
        Some("v".into())
    );

    // One live, one answering an error (a name server that refuses the request): exit 4 too,
    // and the JSON rows say which.
    let other = FakeNamesrv::start(Behaviour::NoStats);
    let list = format!("{};{}", srv.addr, other.addr);
    let run = admin(&list, &["--json", "deleteKvConfig", "-s", "NS", "-k", "k"]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    let v = parse(&run.stdout);
    let rows = v.as_array().expect("array");
    assert_eq!(rows[0].get("result").and_then(Value::as_str), Some("OK"));
    let failed = rows[1].get("result").and_then(Value::as_str).unwrap_or("");
    assert!(
        failed.starts_with("REQUEST_CODE_NOT_SUPPORTED (3)"),
        "{failed}"
    );
    assert!(run.stderr.contains(&other.addr), "{}", run.stderr);
    assert_eq!(srv.client().get_kv_config("NS", "k").expect("get"), None);

    // Every server down: 3. Every server refusing: 1.
    let run = admin(&dead, &["updateKvConfig", "-s", "NS", "-k", "k", "-v", "v"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    let run = admin(
        &other.addr,
        &["updateKvConfig", "-s", "NS", "-k", "k", "-v", "v"],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
}

/// A peer that is not a name server, on std::net.
#[derive(Clone, Copy)]
enum Peer {
    /// Answers any bytes with an HTTP 400 and closes.
    Http,
    /// Reads the request and closes without an answer.
    Closes,
    /// Answers every request with REQUEST_CODE_NOT_SUPPORTED, as a broker does for
    /// name-server requests.
    Broker,
}

fn serve_peer(mut stream: TcpStream, peer: Peer) {
    use rmq_namesrv::remoting::codes::{response, FLAG_RESPONSE};
    use rmq_namesrv::remoting::command::{encode_frame, DecodeLimits, Header, RemotingCommand};
    let mut len = [0u8; 4];
    match peer {
        // Read what came before closing: unread data would turn the close into a reset.
        Peer::Closes => {
            let _ = stream.read(&mut [0u8; 4096]);
        }
        Peer::Http => {
            let _ = stream.read(&mut [0u8; 4096]);
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
            let _ = stream.shutdown(std::net::Shutdown::Write);
            let _ = stream.read_to_end(&mut Vec::new());
        }
        Peer::Broker => {
            while stream.read_exact(&mut len).is_ok() {
                let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
                if stream.read_exact(&mut frame).is_err() {
                    return;
                }
                let Ok(cmd) = RemotingCommand::decode(frame.into(), &DecodeLimits::default())
                else {
                    return;
                };
                let remark = format!(" request type {} not supported", cmd.code);
                let header = Header {
                    code: response::REQUEST_CODE_NOT_SUPPORTED,
                    language: "JAVA",
                    version: 479,
                    opaque: cmd.opaque,
                    flag: FLAG_RESPONSE,
                    remark: Some(&remark),
                };
                let mut out = Vec::new();
                encode_frame(
                    &mut out,
                    cmd.serialize_type,
                    &header,
                    None::<[(&str, &str); 0]>,
                    b"",
                );
                if stream.write_all(&out).is_err() {
                    return;
                }
            }
        }
    }
}

/// Starts `peer` on an ephemeral port; it serves until the test process ends.
fn start_peer(peer: Peer) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve_peer(stream, peer));
        }
    });
    addr
}

#[test]
fn a_peer_that_is_not_a_name_server_is_named_with_what_it_did() {
    let http = start_peer(Peer::Http);
    let closes = start_peer(Peer::Closes);
    let broker = start_peer(Peer::Broker);
    let cases = [
        (
            &http,
            "answered something that is not a name server's answer",
        ),
        (&closes, "connection closed without an answer"),
        (
            &broker,
            "REQUEST_CODE_NOT_SUPPORTED (3): request type 106 not supported: not a name server",
        ),
    ];
    for (addr, what) in cases {
        let run = admin(addr, &["clusterList"]);
        assert_eq!(run.code, 1, "{addr}: {}", run.stderr);
        assert!(run.stdout.is_empty());
        assert!(
            run.stderr
                .starts_with(&format!("rmq-admin: {addr}: {what}")),
            "{addr}: {}",
            run.stderr
        );
    }
    let run = admin(&http, &["topicList"]);
    assert!(
        run.stderr.trim_end().ends_with("it speaks HTTP"),
        "{}",
        run.stderr
    );

    // In a list, reads pass over such peers to a real name server; writes name them.
    let f = fixture();
    let list = format!("{http};{closes};{broker};{}", f.server.addr);
    for _ in 0..3 {
        assert_eq!(
            lines(ok(&admin(&list, &["clusterList", "-c", "C2"]))).len(),
            2
        );
    }
    let run = admin(&list, &["updateKvConfig", "-s", "NS", "-k", "k", "-v", "v"]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    for addr in [&http, &closes, &broker] {
        assert!(
            run.stderr.contains(&format!("rmq-admin: {addr}: ")),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn update_order_conf_puts_gets_and_deletes_the_order_topic_config_item() {
    let f = fixture();
    let addr = &f.server.addr;
    let run = admin(
        addr,
        &[
            "updateOrderConf",
            "-t",
            "TopicA",
            "-m",
            "put",
            "-v",
            "broker-a:4",
        ],
    );
    assert_eq!(
        lines(ok(&run))[1].split_whitespace().collect::<Vec<_>>(),
        [addr.as_str(), "OK"]
    );
    let kv = |c: &mut Client| {
        c.get_kv_config("ORDER_TOPIC_CONFIG", "TopicA")
            .expect("get")
    };
    assert_eq!(kv(&mut f.server.client()), Some("broker-a:4".into()));
    assert_eq!(
        ok(&admin(addr, &["updateOrderConf", "-tTopicA", "-mget"])),
        "broker-a:4\n"
    );
    // The route carries it once orderMessageEnable is on: what producers read.
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
    let run = admin(addr, &["topicRoute", "-t", "TopicA", "-l"]);
    assert!(
        ok(&run).contains("Order topic conf: broker-a:4"),
        "{}",
        run.stdout
    );

    ok(&admin(
        addr,
        &["updateOrderConf", "-t", "TopicA", "-m", "delete"],
    ));
    assert_eq!(kv(&mut f.server.client()), None);
    let run = admin(addr, &["updateOrderConf", "-t", "TopicA", "-m", "get"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("no KV config item ORDER_TOPIC_CONFIG/TopicA"),
        "{}",
        run.stderr
    );

    // A conf producers could not parse, a missing -v or an unknown method: usage errors.
    for args in [
        &[
            "updateOrderConf",
            "-t",
            "TopicA",
            "-m",
            "put",
            "-v",
            "broker-a",
        ][..],
        &["updateOrderConf", "-t", "TopicA", "-m", "put"][..],
        &["updateOrderConf", "-t", "TopicA", "-m", "upsert"][..],
        &["updateOrderConf", "-t", "TopicA"][..],
    ] {
        let run = admin(addr, args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
    }
    assert_eq!(kv(&mut f.server.client()), None);
}
