//! Strangers against the controller's liveness table, over TCP: a heartbeat or registration
//! naming a broker counts only from that broker's IP (or `brokerAllowList`), a close counts
//! only on the broker's own connection, and closes find their brokers without a scan.
//! Brokers and strangers are told apart by their loopback source address (127.0.0.x).
#![cfg(feature = "controller")]

mod common;
mod controller_net;

use bytes::Bytes;
use common::{connect_from, request_frame, stats, wait_until};
use controller_net::ControllerServer;
use rmq_namesrv::client::Client;
use rmq_namesrv::remoting::command::{DecodeLimits, RemotingCommand};
use rmq_namesrv::remoting::json::Value;
use rmq_namesrv::server::ControllerSetup;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const MASTER: [u8; 4] = [127, 0, 0, 2];
const STRANGER: [u8; 4] = [127, 0, 0, 3];
const MASTER_ADDR: &str = "127.0.0.2:10911";

/// One request on a raw stream, and its answer.
fn call(s: &mut TcpStream, code: i32, ext: &[(&str, &str)]) -> RemotingCommand {
    s.write_all(&request_frame(code, 1, ext, b""))
        .expect("send");
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("answer length");
    let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut frame).expect("answer");
    RemotingCommand::decode(Bytes::from(frame), &DecodeLimits::default()).expect("decodes")
}

fn heartbeat<'a>(name: &'a str, id: &'a str, addr: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("clusterName", "c"),
        ("brokerName", name),
        ("brokerId", id),
        ("brokerAddr", addr),
        ("heartbeatTimeoutMills", "60000"),
    ]
}

/// Set `b`'s only broker, id 1 at [`MASTER_ADDR`], registered and elected master (epoch 1).
fn master_of_b(controller: &str) -> TcpStream {
    let mut master = connect_from(MASTER, controller).expect("connect");
    let check_code = format!("{MASTER_ADDR};1");
    let applied = call(
        &mut master,
        1013,
        &[
            ("clusterName", "c"),
            ("brokerName", "b"),
            ("appliedBrokerId", "1"),
            ("registerCheckCode", &check_code),
        ],
    );
    assert_eq!(applied.code, 0, "{:?}", applied.remark);
    let register = [
        ("clusterName", "c"),
        ("brokerName", "b"),
        ("brokerId", "1"),
        ("brokerAddress", MASTER_ADDR),
    ];
    assert_eq!(call(&mut master, 1003, &register).code, 0);
    assert_eq!(
        call(&mut master, 904, &heartbeat("b", "1", MASTER_ADDR)).code,
        0
    );
    let elect = [("clusterName", "c"), ("brokerName", "b"), ("brokerId", "1")];
    assert_eq!(call(&mut master, 1002, &elect).code, 0);
    master
}

/// Set `b`'s (masterBrokerId, masterEpoch, masterAddress) as 1004 answers them.
fn master_now(ctrl: &mut Client) -> (Option<String>, String, Option<String>) {
    let resp = ctrl
        .request(1004, &[("brokerName", "b")], b"")
        .expect("1004");
    let field = |k| resp.ext(k).map(str::to_owned);
    (
        field("masterBrokerId"),
        field("masterEpoch").unwrap_or_default(),
        field("masterAddress"),
    )
}

#[test]
fn a_stranger_cannot_keep_or_kill_the_masters_liveness_nor_move_its_address() {
    let server = ControllerServer::start(&[]);
    let master = master_of_b(&server.controller);
    let mut ctrl = server.controller_client();
    let elected = (Some("1".into()), "1".into(), Some(MASTER_ADDR.to_owned()));
    assert_eq!(master_now(&mut ctrl), elected);

    let mut stranger = connect_from(STRANGER, &server.controller).expect("connect");
    for addr in [MASTER_ADDR, "127.0.0.3:10911"] {
        let resp = call(&mut stranger, 904, &heartbeat("b", "1", addr));
        assert_eq!(resp.code, 16, "{addr}: {:?}", resp.remark);
        let remark = resp.remark.unwrap_or_default();
        assert!(remark.contains("is at 127.0.0.2:10911"), "{remark}");
    }
    let moved = [
        ("clusterName", "c"),
        ("brokerName", "b"),
        ("brokerId", "1"),
        ("brokerAddress", "127.0.0.3:10911"),
    ];
    assert_eq!(call(&mut stranger, 1003, &moved).code, 16);
    // Nor to somebody else's address once the master is gone (below).
    let elsewhere = [
        ("clusterName", "c"),
        ("brokerName", "b"),
        ("brokerId", "1"),
        ("brokerAddress", "127.0.0.9:10911"),
    ];
    drop(stranger);
    // The stranger's close is not the master's death: no election follows.
    let changed = wait_until(Duration::from_millis(500), || {
        master_now(&mut ctrl) != elected
    });
    assert!(!changed, "{:?}", master_now(&mut ctrl));

    // The master's own close is.
    drop(master);
    assert!(wait_until(Duration::from_secs(5), || {
        master_now(&mut ctrl).1 == "2"
    }));
    // A broker restarted on another host moves its address to its new IP; nobody moves it to
    // a third one.
    let mut stranger = connect_from(STRANGER, &server.controller).expect("connect");
    assert_eq!(call(&mut stranger, 1003, &elsewhere).code, 16);
    assert_eq!(call(&mut stranger, 1003, &moved).code, 0);
}

/// A name server with the controller and `brokerAllowList` set at start.
fn start_with_broker_allow_list(list: &str) -> ControllerServer {
    common::init_test_log();
    let dir = common::TempDir::new("ctrl-live");
    let store = dir.path().join("controller").to_string_lossy().into_owned();
    let pairs = [
        ("controllerDLegerGroup", "group1".to_owned()),
        ("controllerDLegerPeers", "n0-127.0.0.1:0".to_owned()),
        ("controllerDLegerSelfId", "n0".to_owned()),
        ("controllerStorePath", store),
    ];
    let lookup = |key: &str| {
        pairs
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone())
    };
    let mut config = common::test_config(dir.path());
    config.enable_controller_in_namesrv = true;
    config.broker_allow_list = list.to_owned();
    let setup = ControllerSetup::from_config(&config, &lookup).expect("controller settings");
    let handle = common::start_with_controller(config, setup).expect("server starts");
    ControllerServer {
        namesrv: handle.local_addr().to_string(),
        controller: handle.controller_addr().expect("controller").to_string(),
        handle,
        dir,
    }
}

#[test]
fn the_allow_list_decides_who_may_heartbeat_and_no_remote_update_turns_the_check_off() {
    let server = start_with_broker_allow_list("127.0.0.2/32,127.0.0.3/32");
    let own = |source: [u8; 4], addr: &str| {
        let mut s = connect_from(source, &server.controller).expect("connect");
        call(&mut s, 904, &heartbeat("new", "1", addr))
    };
    let refused = own([127, 0, 0, 4], "127.0.0.4:10911");
    assert_eq!(refused.code, 16);
    assert!(refused
        .remark
        .unwrap_or_default()
        .contains("brokerAllowList"));
    assert_eq!(own(MASTER, MASTER_ADDR).code, 0);
    // In the list, but not the broker's IP.
    assert_eq!(own(STRANGER, MASTER_ADDR).code, 16);

    // A stranger cannot turn the check off from afar: it is read at start only.
    let mut ctrl = server.controller_client();
    let off = ctrl
        .request(1009, &[], b"checkBrokerSourceAddress=false\n")
        .expect("1009");
    assert_ne!(off.code, 0, "{:?}", off.remark);
    assert_eq!(own(STRANGER, MASTER_ADDR).code, 16);
}

/// Behind NAT a broker's address is not its source: the operator turns the check off.
#[test]
fn behind_nat_the_source_check_is_turned_off_at_start() {
    let server = ControllerServer::start(&[("checkBrokerSourceAddress", "false")]);
    let mut nat = connect_from(STRANGER, &server.controller).expect("connect");
    let resp = call(&mut nat, 904, &heartbeat("new", "1", MASTER_ADDR));
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
}

fn stat(v: &Value, key: &str) -> i64 {
    v.get(key).and_then(Value::as_i64).unwrap_or(-1)
}

/// 100,000 heartbeat entries, then 3,000 bare connect-and-close: each close finds its brokers
/// through the index by connection (a scan of the table per close held the loop for ms each).
#[test]
fn closes_find_their_brokers_through_an_index_not_a_scan() {
    const ENTRIES: usize = 100_000;
    const CLOSES: usize = 3_000;
    let server = ControllerServer::start(&[]);
    let mut filler = server.controller_client();
    let mut burst = Vec::new();
    for i in 0..ENTRIES {
        let name = format!("s{}", i / 4);
        let id = (i % 4 + 1).to_string();
        let ext = heartbeat(&name, &id, "127.0.0.1:10911");
        let (_, frame) = filler.encode(904, 2, ext.iter().copied(), b"");
        burst.extend(frame);
        if burst.len() > 1 << 20 {
            filler.send_raw(&burst).expect("heartbeats");
            burst.clear();
        }
    }
    filler.send_raw(&burst).expect("heartbeats");
    // Answered after every oneway heartbeat before it on this connection.
    assert_eq!(filler.request(1005, &[], b"").expect("1005").code, 0);

    // In batches below the listen backlog, each followed by a good client's request: its
    // wait is what the closes ahead of it cost the loop.
    let mut good = server.controller_client();
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    for _ in 0..CLOSES / 100 {
        for _ in 0..100 {
            drop(TcpStream::connect(&server.controller).expect("connect"));
        }
        let sent = Instant::now();
        assert_eq!(good.request(1005, &[], b"").expect("1005").code, 0);
        slowest = slowest.max(sent.elapsed());
    }
    let took = started.elapsed();
    let max_turn = stat(&stats(&mut server.namesrv_client()), "maxTurnMicros");
    eprintln!(
        "{CLOSES} closes over {ENTRIES} entries: {took:?}, good client's slowest {slowest:?}, maxTurnMicros {max_turn} (the heartbeats' turns included)"
    );
    assert!(slowest < Duration::from_millis(500), "{slowest:?}");
    // The entries are still there: the filler's connection is open.
    let ok = filler
        .request(904, &heartbeat("s0", "1", "127.0.0.1:10911"), b"")
        .expect("904");
    assert_eq!(ok.code, 0, "{:?}", ok.remark);
}

/// Heartbeats of new brokers with the longest names: the table's bytes are bounded, and the
/// heartbeat past the bound is refused with the reason (it used to grow RSS by hundreds of MiB).
#[test]
fn the_heartbeat_tables_bytes_are_bounded_with_a_clear_refusal() {
    let server = ControllerServer::start(&[]);
    let mut filler = server.controller_client();
    let long = "n".repeat(250);
    let mut burst = Vec::new();
    // More than 48 MiB of entries of ~670 bytes.
    for i in 0..80_000 {
        let name = format!("{long}{i}");
        let mut ext = heartbeat(&name, "1", "127.0.0.1:10911");
        ext[0] = ("clusterName", &long);
        let (_, frame) = filler.encode(904, 2, ext.iter().copied(), b"");
        burst.extend(frame);
        if burst.len() > 1 << 20 {
            filler.send_raw(&burst).expect("heartbeats");
            burst.clear();
        }
    }
    filler.send_raw(&burst).expect("heartbeats");
    let one_more = format!("{long}x");
    let mut ext = heartbeat(&one_more, "1", "127.0.0.1:10911");
    ext[0] = ("clusterName", &long);
    let refused = filler.request(904, &ext, b"").expect("904");
    assert_eq!(refused.code, 2, "{:?}", refused.remark);
    let remark = refused.remark.unwrap_or_default();
    assert!(remark.contains("heartbeat table is full"), "{remark}");
    // A known broker still heartbeats.
    let first = format!("{long}0");
    let mut ext = heartbeat(&first, "1", "127.0.0.1:10911");
    ext[0] = ("clusterName", &long);
    assert_eq!(filler.request(904, &ext, b"").expect("904").code, 0);
}
