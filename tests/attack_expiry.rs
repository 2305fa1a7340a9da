//! A mass expiry over TCP: hundreds of brokers (one of them with thousands of topics) go
//! silent at once while a good client looks its route up on a connection of its own. The
//! loop paces the removal work (unregistrations, the expiry scan, closing the expired brokers'
//! connections) in steps per turn; the stats' `maxRemovalStepsPerTurn` is the most one turn
//! did, which must stay within the budget whatever the machine's speed. The real binary's
//! log names the first few expired brokers, then one line counts the others.

#[path = "common/child.rs"]
mod child;
mod common;

use child::ServerProcess;
use common::*;
use rmq_namesrv::client::Client;
use rmq_namesrv::remoting::codes::{request, response};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The server's removal steps per turn (src/server/pacing.rs).
const STEPS_PER_TURN: i64 = 512;
const BROKERS: usize = 150;
const TOPICS: usize = 20;
/// More topics than one turn's steps: this group's removal must be spread over turns.
const LARGE_TOPICS: usize = 3_000;

fn topics(prefix: &str, n: usize) -> Vec<rmq_namesrv::route::model::TopicConfig> {
    (0..n)
        .map(|i| topic(&format!("{prefix}_{i}"), 4, 6))
        .collect()
}

/// Registers a broker with a 1 s heartbeat timeout on a connection of its own, kept open.
fn silent_broker(server: &TestServer, name: &str, addr: &str, n: usize) -> Client {
    let mut conn = server.client();
    let options = RegisterOptions {
        heartbeat_timeout_millis: Some(1_000),
        ..RegisterOptions::default()
    };
    let broker = Broker::new("c", name, addr, 0);
    let resp = register_with(
        &mut conn,
        &broker,
        &body_with(1, &topics(name, n)),
        &options,
    );
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    conn
}

#[test]
fn a_mass_expiry_is_paced_in_steps_per_turn() {
    let server = TestServer::start_with(|c| c.scan_not_active_broker_interval = 100);
    let mut good_broker = server.client();
    let good = Broker::new("c", "good", "10.9.0.1:10911", 0);
    register(
        &mut good_broker,
        &good,
        &body_with(1, &[topic("GoodTopic", 4, 6)]),
    );
    let mut silent: Vec<Client> = (0..BROKERS)
        .map(|i| {
            silent_broker(
                &server,
                &format!("b{i}"),
                &format!("10.1.{}.{}:10911", i / 200, i % 200),
                TOPICS,
            )
        })
        .collect();
    silent.push(silent_broker(
        &server,
        "large",
        "10.2.0.1:10911",
        LARGE_TOPICS,
    ));
    let mut ns = server.client();
    assert_eq!(
        stat(&mut ns, "topics") as usize,
        1 + BROKERS * TOPICS + LARGE_TOPICS
    );

    // The good client looks its route up until the expiry is over.
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let mut client = server.client();
    let lookups = std::thread::spawn(move || {
        let mut n = 0;
        while !stopped.load(Ordering::Relaxed) {
            let resp = client.request(
                request::GET_ROUTEINFO_BY_TOPIC,
                &[("topic", "GoodTopic")],
                b"",
            );
            assert_eq!(resp.expect("a route answer").code, response::SUCCESS);
            n += 1;
        }
        n
    });
    let expired = wait_until(Duration::from_secs(60), || {
        stat(&mut ns, "brokers") == 1 && stat(&mut ns, "connections") == 3
    });
    stop.store(true, Ordering::Relaxed);
    let answered = lookups.join().expect("good client");
    assert!(
        expired,
        "the silent brokers did not all expire and lose their connections"
    );
    assert!(answered > 0);
    assert_eq!(stat(&mut ns, "topics"), 1);
    assert_eq!(stat(&mut ns, "expiries") as usize, BROKERS + 1);
    let steps = stat(&mut ns, "maxRemovalStepsPerTurn");
    eprintln!("{answered} lookups; maxRemovalStepsPerTurn {steps}");
    assert!(
        (1..=STEPS_PER_TURN).contains(&steps),
        "one loop turn did {steps} steps of removal work"
    );
    assert!(route_data(&mut good_broker, "GoodTopic").is_some());
    drop(silent);
}

/// Expired brokers named one by one per interval (the server's `WARN_LINES`).
const NAMED_EXPIRIES: usize = 5;
/// Removals named one by one per interval (the server's `NEW_BROKER_LINES`).
const NAMED_REMOVALS: usize = 10;
/// Brokers going silent together, each on a connection of its own: an expired broker's
/// connection is closed (as Java does), which would remove the others registered over it
/// as "connection closed", not as expired.
const MASS: usize = 200;

#[test]
fn a_mass_expiry_logs_a_few_brokers_by_name_and_one_count_of_the_others() {
    let dir = TempDir::new("expiry-log");
    let conf = dir.path().join("namesrv.conf");
    std::fs::write(&conf, "listenPort=0\n").unwrap();
    let log = dir.path().join("ns.log");
    let server = ServerProcess::spawn(&[
        "-c".to_string(),
        conf.to_string_lossy().into_owned(),
        "--bindAddress=127.0.0.1".into(),
        "--scanNotActiveBrokerInterval=100".into(),
        format!("--logPath={}", log.display()),
        format!("--kvConfigPath={}", dir.path().join("kv.json").display()),
    ]);
    // Brokers with a 1 s heartbeat timeout, their connections kept open.
    let options = RegisterOptions {
        heartbeat_timeout_millis: Some(1_000),
        ..RegisterOptions::default()
    };
    let mut silent = Vec::with_capacity(MASS);
    for i in 0..MASS {
        let mut conn = Client::connect(&server.addr, Duration::from_secs(5)).expect("connect");
        let broker = Broker::new("c", &format!("m{i}"), &format!("10.3.0.{i}:10911"), 0);
        let resp = register_with(
            &mut conn,
            &broker,
            &body_with(1, &topics(&format!("m{i}"), 1)),
            &options,
        );
        assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
        silent.push(conn);
    }
    let mut ns = Client::connect(&server.addr, Duration::from_secs(5)).expect("connect");
    let expired = wait_until(Duration::from_secs(60), || {
        stat(&mut ns, "expiries") as usize == MASS
    });
    assert!(
        expired,
        "{} of {MASS} brokers expired",
        stat(&mut ns, "expiries")
    );
    // The count's line comes once the interval (10 s) of the first expiry is over.
    let text = |l: &&str| l.contains("WARN") && l.contains("expired");
    let mut lines: Vec<String> = Vec::new();
    let summarised = wait_until(Duration::from_secs(30), || {
        let written = std::fs::read_to_string(&log).unwrap_or_default();
        lines = written.lines().filter(text).map(str::to_string).collect();
        lines.iter().any(|l| l.contains("more broker(s) expired"))
    });
    let all = lines.join("\n");
    assert!(
        summarised,
        "no line counts the expired brokers not named:\n{all}"
    );
    let named = lines
        .iter()
        .filter(|l| l.contains("broker expired: m"))
        .count();
    assert_eq!(named, NAMED_EXPIRIES, "{all}");
    assert_eq!(lines.len(), NAMED_EXPIRIES + 1, "{all}");
    let count = format!("{} more broker(s) expired", MASS - NAMED_EXPIRIES);
    let summary = lines.iter().find(|l| l.contains("more broker(s) expired"));
    let summary = summary.map(String::as_str).unwrap_or_default();
    assert!(summary.contains(&count), "{summary}");
    // Some of those not named one by one are named there, a few.
    assert!(summary.contains("among them m"), "{summary}");
    assert!(summary.len() < 600, "{} bytes: {summary}", summary.len());
    // Their removals likewise: ten lines an interval name a broker each, the route-change
    // summary counts the rest.
    let (mut named, mut counted) = (0, 0);
    let accounted = wait_until(Duration::from_secs(30), || {
        let written = std::fs::read_to_string(&log).unwrap_or_default();
        named = written.matches("broker removed: m").count();
        counted = written
            .lines()
            .filter_map(|l| l.split_once(" more broker(s) removed"))
            .filter_map(|(head, _)| head.rsplit(' ').next()?.parse::<usize>().ok())
            .sum::<usize>();
        named + counted == MASS
    });
    assert!(
        accounted,
        "{named} removals named, {counted} counted, of {MASS}"
    );
    assert!(
        named <= 2 * NAMED_REMOVALS,
        "{named} removals named one by one"
    );
}
