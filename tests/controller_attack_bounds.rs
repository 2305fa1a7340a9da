//! Hostile requests on the controller port, over TCP: bodies longer than their code takes,
//! names and addresses the name server would refuse, a 1006 naming one set thousands of
//! times. Each is refused (or answered) in a bounded turn of the loop both ports share, while
//! a good client looks a route up on the name server port: its p99 and the loop's longest
//! turn (`maxTurnMicros`) are checked.
#![cfg(feature = "controller")]

mod common;
mod controller_net;

use common::{remark, request_frame, stat};
use controller_net::ControllerServer;
use rmq_namesrv::client::Client;
use rmq_namesrv::remoting::command::{RemotingCommand, SerializeType};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest loop turn allowed. The goal is ~2 ms in a release build; a debug build on a
/// busy machine gets room, still far below what each attack cost before (seconds).
fn turn_bound() -> Duration {
    Duration::from_millis(if cfg!(debug_assertions) { 250 } else { 25 })
}

/// A frame of megabytes costs the loop one long turn whatever its code, on either port (the
/// name server's 318 too: 14-130 ms in a release build): reading it, not handling it.
fn megabyte_frame_turn_bound() -> Duration {
    Duration::from_millis(if cfg!(debug_assertions) { 1_000 } else { 250 })
}

/// Looks a route up on the name server port, over and over, until stopped.
struct GoodClient {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<Duration>>,
}

impl GoodClient {
    fn start(server: &ControllerServer) -> GoodClient {
        let mut client = server.namesrv_client();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut took = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                let started = Instant::now();
                let resp = client.request(105, &[("topic", "GoodTopic")], b"");
                assert_eq!(resp.expect("a route answer").code, 17);
                took.push(started.elapsed());
            }
            took
        });
        GoodClient { stop, thread }
    }

    /// Stops it: its p99 and its slowest lookup.
    fn finish(self) -> (Duration, Duration) {
        self.stop.store(true, Ordering::Relaxed);
        let mut took = self.thread.join().expect("good client");
        took.sort_unstable();
        assert!(!took.is_empty(), "the good client made no lookup");
        let p99 = took[(took.len() * 99 / 100).min(took.len() - 1)];
        (p99, *took.last().unwrap_or(&p99))
    }
}

/// Runs `attack`, then checks the good client's p99 and the loop's longest turn.
fn under_attack(server: &ControllerServer, what: &str, bound: Duration, attack: impl FnOnce()) {
    let mut ns = server.namesrv_client();
    let turn_before = stat(&mut ns, "maxTurnMicros");
    let good = GoodClient::start(server);
    let started = Instant::now();
    attack();
    let took = started.elapsed();
    let (p99, max) = good.finish();
    let turn = Duration::from_micros(stat(&mut ns, "maxTurnMicros").max(0) as u64);
    eprintln!(
        "{what}: attack {took:?}, good client p99 {p99:?} max {max:?}, maxTurnMicros {} (before {turn_before})",
        turn.as_micros()
    );
    assert!(
        turn <= bound || turn.as_micros() as i64 == turn_before,
        "{what}: the loop's longest turn was {turn:?}"
    );
    assert!(p99 <= bound, "{what}: the good client's p99 was {p99:?}");
}

fn controller(server: &ControllerServer, serialize_type: SerializeType) -> Client {
    let mut client = server.controller_client();
    client.serialize_type = serialize_type;
    client.set_timeout(Duration::from_secs(60));
    client
}

fn refused(resp: &RemotingCommand, remark_part: &str) {
    assert_eq!(resp.code, 1, "{:?}", resp.remark);
    assert!(remark(resp).contains(remark_part), "{:?}", resp.remark);
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

#[test]
fn config_updates_of_megabytes_are_refused_at_once() {
    let server = ControllerServer::start(&[]);
    let mut attacker = controller(&server, SerializeType::Json);
    let line = b"electMasterMaxRetryCount=3\n";
    under_attack(
        &server,
        "1009 of 8-15 MiB",
        megabyte_frame_turn_bound(),
        || {
            for mib in [8, 15] {
                let body: Vec<u8> = line.repeat(mib * 1024 * 1024 / line.len());
                let resp = attacker.request(1009, &[], &body).expect("1009");
                refused(&resp, "more than 16384; send fewer keys at a time");
            }
        },
    );
    let resp = attacker.request(1009, &[], line).expect("1009");
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
}

#[test]
fn names_longer_than_the_name_servers_limit_are_refused_and_nothing_is_stored() {
    let server = ControllerServer::start(&[]);
    let store = server.dir.path().join("controller");
    let stored_before = dir_bytes(&store);
    // Binary headers: the JSON header's string limit does not stop a 120 KB name there.
    let mut attacker = controller(&server, SerializeType::RocketMq);
    let long = "b".repeat(120 * 1024);
    under_attack(
        &server,
        "300 x 1013 with 120 KB names",
        turn_bound(),
        || {
            for i in 0..300 {
                let name = format!("{i}{long}");
                let fields = [
                    ("clusterName", "c"),
                    ("brokerName", name.as_str()),
                    ("appliedBrokerId", "1"),
                    ("registerCheckCode", "127.0.0.1:30911;1"),
                ];
                let resp = attacker.request(1013, &fields, b"").expect("1013");
                refused(&resp, "brokerName is longer than 255 bytes");
            }
        },
    );
    let grown = dir_bytes(&store).saturating_sub(stored_before);
    assert!(
        grown < 64 * 1024,
        "the controller's store grew {grown} bytes"
    );
    // Every code that reads names checks them, addresses too.
    for code in [904, 1001, 1002, 1003, 1004, 1011, 1012] {
        let resp = attacker
            .request(code, &[("clusterName", &long)], b"")
            .expect("answer");
        refused(&resp, "clusterName is longer than 255 bytes");
    }
    let resp = attacker
        .request(904, &[("brokerAddr", "6.6.6.6:1,\"x")], b"")
        .expect("904");
    refused(&resp, "brokerAddr \"6.6.6.6:1,\\\"x\" is not host:port");
    // A broker as real ones are still gets its id.
    let mut broker = controller(&server, SerializeType::Json);
    broker
        .send_raw(&common::apply_frame(7, "broker-a"))
        .expect("send");
    let resp = broker.read_response(7).expect("1013");
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
}

#[test]
fn a_sync_state_query_reads_each_name_once_and_its_body_is_bounded() {
    const IDS: i64 = 64;
    let server = ControllerServer::start(&[]);
    let mut broker = controller(&server, SerializeType::Json);
    let mut burst = Vec::new();
    for id in 1..=IDS {
        let check_code = format!("127.0.0.1:{};1", 20_000 + id);
        let fields = [
            ("clusterName", "c"),
            ("brokerName", "a1"),
            ("appliedBrokerId", &id.to_string()),
            ("registerCheckCode", &check_code),
        ];
        burst.extend(request_frame(1013, id as i32, &fields, b""));
    }
    broker.send_raw(&burst).expect("send");
    for id in 1..=IDS {
        let resp = broker.read_response(id as i32).expect("1013");
        assert_eq!(resp.code, 0, "id {id}: {:?}", resp.remark);
    }
    let list = |names: &mut dyn Iterator<Item = String>| {
        let quoted: Vec<String> = names.map(|n| format!("\"{n}\"")).collect();
        format!("[{}]", quoted.join(",")).into_bytes()
    };
    let mut attacker = controller(&server, SerializeType::Json);
    under_attack(
        &server,
        "1006 naming one set 20,000 times, then 4 MiB",
        turn_bound(),
        || {
            let repeated = list(&mut (0..20_000).map(|_| "a1".to_string()));
            let resp = attacker.request(1006, &[], &repeated).expect("1006");
            assert_eq!(resp.code, 0, "{:?}", resp.remark);
            let body = String::from_utf8_lossy(&resp.body);
            assert_eq!(body.matches("\"a1\":{").count(), 1, "{body}");
            assert_eq!(body.matches("\"brokerId\":").count(), IDS as usize);
            let huge = list(&mut (0..450_000).map(|_| "broker-a".to_string()));
            let resp = attacker.request(1006, &[], &huge).expect("1006");
            refused(
                &resp,
                "more than 131072; ask for fewer broker sets at a time",
            );
            // The worst body within the bound: distinct short names, one of them known.
            let distinct = list(&mut (0..14_000).map(|i| format!("{i:x}")).chain(["a1".into()]));
            assert!(distinct.len() <= 128 * 1024);
            let resp = attacker.request(1006, &[], &distinct).expect("1006");
            assert_eq!(resp.code, 0, "{:?}", resp.remark);
        },
    );
}
