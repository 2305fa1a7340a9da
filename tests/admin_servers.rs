//! `rmq-admin` with several real name servers: which one a read asks under each `--strategy`
//! (random as Java's mqadmin, pinned, round-robin, fewest connections), and `--all`, which
//! asks every one, shows their answers side by side and exits 5 where they differ.

#[path = "common/admin_run.rs"]
mod admin_run;
mod common;
mod fake_namesrv;

use admin_run::{admin_env, ok, parse, Run};
use common::*;
use fake_namesrv::dead_addr;
use rmq_namesrv::client::Client;
use rmq_namesrv::remoting::json::Value;
use std::collections::BTreeSet;
use std::time::Duration;

/// `rmq-admin -n <list> args...`
fn admin(list: &str, args: &[&str]) -> Run {
    let mut all = vec!["-n", list];
    all.extend_from_slice(args);
    admin_env(&all, None)
}

/// Two name servers, each holding KV item NS/who = its own name ("a", "b"), so an answer
/// says which server gave it.
fn two_servers() -> (TestServer, TestServer, String) {
    let a = TestServer::start();
    let b = TestServer::start();
    a.client()
        .put_kv_config("NS", "who", "a")
        .expect("put on a");
    b.client()
        .put_kv_config("NS", "who", "b")
        .expect("put on b");
    let list = format!("{};{}", a.addr, b.addr);
    (a, b, list)
}

/// Which server answered `getKvConfig -s NS -k who` under `strategy`.
fn who(list: &str, strategy: &str) -> String {
    let run = admin(
        list,
        &[
            "--strategy",
            strategy,
            "getKvConfig",
            "-s",
            "NS",
            "-k",
            "who",
        ],
    );
    ok(&run).trim().to_string()
}

/// Client connections `server` counts now.
fn connections(server: &TestServer) -> i64 {
    server.client().stats().expect("stats").connections
}

/// Opens `n` idle connections to `server` and waits until it counts them.
fn load(server: &TestServer, n: usize) -> Vec<Client> {
    let before = connections(server);
    let extra: Vec<Client> = (0..n).map(|_| server.client()).collect();
    assert!(
        wait_until(Duration::from_secs(10), || connections(server)
            >= before + n as i64),
        "{} never counted the extra connections",
        server.addr
    );
    extra
}

#[test]
fn pinned_asks_the_named_server_only() {
    let (a, b, list) = two_servers();
    assert_eq!(who(&list, "pinned:0"), "a");
    assert_eq!(who(&list, "pinned:1"), "b");
    assert_eq!(who(&list, &format!("pinned:{}", b.addr)), "b");
    assert_eq!(who(&list, &format!("pinned:{}", a.addr)), "a");

    // Outside the list: a usage error that shows the list.
    let run = admin(
        &list,
        &["--strategy", "pinned:2", "getKvConfig", "-s", "NS"],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("pinned:2 names no server"),
        "{}",
        run.stderr
    );
    let run = admin(&list, &["--strategy", "nearest", "clusterList"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("unknown strategy"), "{}", run.stderr);

    // Pinned to a dead server: no failover to the live one.
    let dead = dead_addr();
    let list = format!("{dead};{}", b.addr);
    let run = admin(&list, &["--strategy", "pinned:0", "clusterList"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains(&dead), "{}", run.stderr);
}

#[test]
fn round_robin_asks_the_first_server_and_the_next_when_it_is_down() {
    let (_a, b, list) = two_servers();
    for _ in 0..3 {
        assert_eq!(who(&list, "round-robin"), "a");
    }
    let list = format!("{};{}", dead_addr(), b.addr);
    assert_eq!(who(&list, "round-robin"), "b");
}

#[test]
fn random_is_the_default_and_starts_at_either_server() {
    let (_a, b, list) = two_servers();
    let mut seen = BTreeSet::new();
    for _ in 0..40 {
        let run = admin(&list, &["getKvConfig", "-s", "NS", "-k", "who"]);
        seen.insert(ok(&run).trim().to_string());
        if seen.len() == 2 {
            break;
        }
    }
    // Each of 40 runs starts at either with probability 1/2: both appear.
    assert_eq!(seen, BTreeSet::from(["a".to_string(), "b".to_string()]));
    // Whatever the start, a dead server is passed over.
    let list = format!("{};{}", dead_addr(), b.addr);
    for _ in 0..3 {
        assert_eq!(who(&list, "random"), "b");
    }
}

#[test]
fn fewest_asks_the_server_with_fewer_connections() {
    let (a, b, list) = two_servers();
    let _busy_a = load(&a, 5);
    assert_eq!(who(&list, "fewest"), "b");
    let _busy_b = load(&b, 10);
    assert_eq!(who(&list, "fewest"), "a");
}

#[test]
fn help_says_which_server_a_read_asks_and_what_exit_5_means() {
    let out = admin_env(&["help"], None);
    let text = ok(&out);
    for needle in [
        "--strategy S",
        "random",
        "what Java's mqadmin",
        "pinned:N",
        "round-robin",
        "fewest",
        "--all",
        "5 --all: the name servers' answers differ",
    ] {
        assert!(text.contains(needle), "help lacks {needle:?}:\n{text}");
    }
}

/// Registers `broker` with `topics` on `server`; the connection keeps it registered.
fn registered(
    server: &TestServer,
    broker: &Broker,
    topics: &[rmq_namesrv::route::model::TopicConfig],
) -> Client {
    let mut c = server.client();
    let resp = register(&mut c, broker, &body_with(1, topics));
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    c
}

/// (namesrv, differs) of each row of a `--all --json` table.
fn marks(rows: &Value) -> Vec<(String, bool)> {
    rows.as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            let addr = r.get("namesrv").and_then(Value::as_str).expect("namesrv");
            let differs = r.get("differs").and_then(Value::as_bool).expect("differs");
            (addr.to_string(), differs)
        })
        .collect()
}

#[test]
fn all_shows_two_servers_agreeing_on_the_same_route() {
    let (a, b, list) = two_servers();
    let broker = Broker::new("C1", "broker-a", "127.0.0.1:10911", 0);
    let _conns = [&a, &b].map(|s| registered(s, &broker, &[topic("TopicA", 8, 6)]));

    let run = admin(&list, &["--all", "topicRoute", "-t", "TopicA"]);
    let out = ok(&run);
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["Topic:", "TopicA"]);
    assert_eq!(
        rows[2],
        ["DIFF", "NAMESRV", "BROKER", "CLUSTER", "BID", "ADDRESS", "ZONE"]
    );
    assert_eq!(
        rows[3],
        [
            a.addr.as_str(),
            "broker-a",
            "C1",
            "0",
            "127.0.0.1:10911",
            "-"
        ]
    );
    assert_eq!(
        rows[4],
        [
            b.addr.as_str(),
            "broker-a",
            "C1",
            "0",
            "127.0.0.1:10911",
            "-"
        ]
    );

    let run = admin(&list, &["--all", "--json", "topicRoute", "-t", "TopicA"]);
    let v = parse(ok(&run));
    let both = vec![(a.addr.clone(), false), (b.addr.clone(), false)];
    assert_eq!(marks(v.get("brokers").expect("brokers")), both);
    assert_eq!(marks(v.get("queues").expect("queues")), both);

    let run = admin(&list, &["--all", "clusterList"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stdout.contains('*'), "{}", run.stdout);
}

#[test]
fn all_marks_what_one_server_lacks_and_exits_5() {
    let (a, b, list) = two_servers();
    let broker_a = Broker::new("C1", "broker-a", "127.0.0.1:10911", 0);
    let broker_b = Broker::new("C1", "broker-b", "127.0.0.1:10921", 0);
    let shared = [topic("TopicA", 8, 6)];
    let _conns = [
        registered(&a, &broker_a, &shared),
        registered(&b, &broker_a, &shared),
        // broker-b reached only server a.
        registered(&a, &broker_b, &shared),
    ];

    let run = admin(&list, &["--all", "--json", "topicRoute", "-t", "TopicA"]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("the name servers disagree: rows marked * are not on all 2"),
        "{}",
        run.stderr
    );
    let v = parse(&run.stdout);
    assert_eq!(
        marks(v.get("brokers").expect("brokers")),
        [
            (a.addr.clone(), false),
            (b.addr.clone(), false),
            (a.addr.clone(), true)
        ]
    );
    let brokers = v.get("brokers").and_then(Value::as_array).expect("rows");
    assert_eq!(
        brokers[2].get("brokerName").and_then(Value::as_str),
        Some("broker-b")
    );

    // The text form marks the same row.
    let run = admin(&list, &["--all", "clusterList"]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    let marked: Vec<&str> = run.stdout.lines().filter(|l| l.starts_with('*')).collect();
    assert_eq!(marked.len(), 1, "{}", run.stdout);
    assert!(
        marked[0].contains(&a.addr) && marked[0].contains("broker-b"),
        "{}",
        run.stdout
    );

    // A KV item one server lacks: that server shows one row of '-', marked.
    let run = admin(&list, &["--all", "getKvConfig", "-s", "NS", "-k", "who"]);
    assert_eq!(
        run.code, 5,
        "both have it, with different values: {}",
        run.stderr
    );
    a.client().put_kv_config("NS", "onlyA", "1").expect("put");
    let run = admin(&list, &["--all", "getKvConfig", "-s", "NS", "-k", "onlyA"]);
    assert_eq!(run.code, 5, "{}", run.stderr);
    let rows: Vec<Vec<&str>> = run
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["DIFF", "NAMESRV", "VALUE"],
            vec!["*", a.addr.as_str(), "1"],
            vec!["*", b.addr.as_str(), "-"]
        ]
    );
}

#[test]
fn all_reports_what_no_server_has_and_servers_it_could_not_ask() {
    let (a, _b, list) = two_servers();
    let run = admin(&list, &["--all", "topicRoute", "-t", "Nowhere"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("topic Nowhere not found on any of the 2"),
        "{}",
        run.stderr
    );

    // One server down, the other answering: partial (4), the dead one named.
    let dead = dead_addr();
    let list = format!("{};{dead}", a.addr);
    let run = admin(&list, &["--all", "getKvConfig", "-s", "NS", "-k", "who"]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(run.stderr.contains(&dead), "{}", run.stderr);
    assert_eq!(
        run.stdout
            .lines()
            .nth(1)
            .map(|l| l.split_whitespace().collect::<Vec<_>>()),
        Some(vec![a.addr.as_str(), "a"])
    );

    // --all with --strategy, or with a controller command, is a usage error.
    let run = admin(&list, &["--all", "--strategy", "random", "clusterList"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}
