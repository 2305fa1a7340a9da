//! A mass expiry over TCP: hundreds of brokers (one of them with thousands of topics) go
//! silent at once while a good client looks its route up on a connection of its own. The
//! loop paces the removal work (unregistrations, the expiry scan, closing the expired brokers'
//! connections) in steps per turn; the stats' `maxRemovalStepsPerTurn` is the most one turn
//! did, which must stay within the budget whatever the machine's speed.

mod common;

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
