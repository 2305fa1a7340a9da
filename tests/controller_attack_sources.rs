//! Strangers against a broker set's elections, ids and in-sync replicas, over TCP: a broker's
//! own election (1002), its id application (1013) and its master's sync-state change (1001)
//! count only from the IP of the broker's address and from inside `brokerAllowList`, as its
//! heartbeat does. The broker sits at 127.0.0.1, the stranger at 127.0.0.2 (loopback accepts
//! any 127/8 source).
#![cfg(feature = "controller")]

mod common;
mod controller_net;

use bytes::Bytes;
use common::connect_from;
use controller_net::ControllerServer;
use rmq_namesrv::client::Client;
use rmq_namesrv::remoting::command::{DecodeLimits, RemotingCommand};
use rmq_namesrv::server::ControllerSetup;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const BROKER: [u8; 4] = [127, 0, 0, 1];
const STRANGER: [u8; 4] = [127, 0, 0, 2];
const ADDR_1: &str = "127.0.0.1:10911";
const ADDR_2: &str = "127.0.0.1:10912";

/// One request on a raw stream, and its answer.
fn call(s: &mut TcpStream, code: i32, ext: &[(&str, &str)], body: &[u8]) -> RemotingCommand {
    s.write_all(&common::request_frame(code, 1, ext, body))
        .expect("send");
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("answer length");
    let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut frame).expect("answer");
    RemotingCommand::decode(Bytes::from(frame), &DecodeLimits::default()).expect("decodes")
}

fn apply_id(s: &mut TcpStream, id: &str, addr: &str) -> RemotingCommand {
    let check_code = format!("{addr};1");
    let ext = [
        ("clusterName", "c"),
        ("brokerName", "b"),
        ("appliedBrokerId", id),
        ("registerCheckCode", &check_code),
    ];
    call(s, 1013, &ext, b"")
}

fn elect(s: &mut TcpStream, id: &str) -> RemotingCommand {
    let ext = [("clusterName", "c"), ("brokerName", "b"), ("brokerId", id)];
    call(s, 1002, &ext, b"")
}

fn heartbeat(s: &mut TcpStream, id: &str, addr: &str) -> RemotingCommand {
    let ext = [
        ("clusterName", "c"),
        ("brokerName", "b"),
        ("brokerId", id),
        ("brokerAddr", addr),
        ("heartbeatTimeoutMills", "60000"),
    ];
    call(s, 904, &ext, b"")
}

/// The master (id 1, epoch 1) asks for ids 1 and 2 in sync (set epoch 1).
fn add_2_to_sync_set(s: &mut TcpStream) -> RemotingCommand {
    let ext = [
        ("brokerName", "b"),
        ("masterBrokerId", "1"),
        ("masterEpoch", "1"),
    ];
    let body = br#"{"syncStateSet":[1,2],"syncStateSetEpoch":1}"#;
    call(s, 1001, &ext, body)
}

/// Set `b`'s (masterBrokerId, masterEpoch) as 1004 answers them.
fn master_now(ctrl: &mut Client) -> (Option<String>, String) {
    let resp = ctrl
        .request(1004, &[("brokerName", "b")], b"")
        .expect("1004");
    let master = resp.ext("masterBrokerId").map(str::to_owned);
    (
        master,
        resp.ext("masterEpoch").unwrap_or_default().to_owned(),
    )
}

fn refused(resp: &RemotingCommand, why: &str) {
    assert_eq!(resp.code, 16, "{:?}", resp.remark);
    let remark = resp.remark.as_deref().unwrap_or_default();
    assert!(remark.contains(why), "{remark}");
}

#[test]
fn a_stranger_cannot_elect_apply_ids_for_or_alter_the_sync_set_of_a_broker_elsewhere() {
    let server = ControllerServer::start(&[]);
    let mut ctrl = server.controller_client();
    let mut broker = connect_from(BROKER, &server.controller).expect("connect");
    let mut stranger = connect_from(STRANGER, &server.controller).expect("connect");
    assert_eq!(apply_id(&mut broker, "1", ADDR_1).code, 0);

    // The set was never elected: an election would take the id named, alive or not.
    refused(&elect(&mut stranger, "1"), "is at 127.0.0.1:10911");
    // Nor an id the set does not hold, nor the controller's own form (id -1), which on a set
    // never elected would leave it without a master at masterEpoch 1.
    refused(&elect(&mut stranger, "9"), "broker set b holds no id 9");
    refused(&elect(&mut stranger, "-1"), "holds no id -1");
    assert_eq!(master_now(&mut ctrl), (None, "0".into()));

    // Ids: neither the broker's own again, nor a new one at the broker's address.
    refused(
        &apply_id(&mut stranger, "1", ADDR_1),
        "is at 127.0.0.1:10911",
    );
    refused(
        &apply_id(&mut stranger, "2", ADDR_2),
        "is at 127.0.0.1:10912",
    );
    assert_eq!(apply_id(&mut broker, "2", ADDR_2).code, 0);

    assert_eq!(heartbeat(&mut broker, "1", ADDR_1).code, 0);
    assert_eq!(heartbeat(&mut broker, "2", ADDR_2).code, 0);
    assert_eq!(elect(&mut broker, "1").code, 0);
    refused(&add_2_to_sync_set(&mut stranger), "is at 127.0.0.1:10911");
    // The stranger's change did not take effect: the master's own, at the same epochs, does.
    let own = add_2_to_sync_set(&mut broker);
    assert_eq!(own.code, 0, "{:?}", own.remark);
}

#[test]
fn with_the_source_check_off_anyone_speaks_for_the_broker_as_in_java() {
    let server = ControllerServer::start(&[("checkBrokerSourceAddress", "false")]);
    let mut ctrl = server.controller_client();
    let mut stranger = connect_from(STRANGER, &server.controller).expect("connect");
    assert_eq!(apply_id(&mut stranger, "1", ADDR_1).code, 0);
    assert_eq!(apply_id(&mut stranger, "2", ADDR_2).code, 0);
    // Java's first election takes the id asked for, though it never heartbeated.
    assert_eq!(elect(&mut stranger, "1").code, 0);
    assert_eq!(master_now(&mut ctrl), (Some("1".into()), "1".into()));
    assert_eq!(heartbeat(&mut stranger, "1", ADDR_1).code, 0);
    assert_eq!(heartbeat(&mut stranger, "2", ADDR_2).code, 0);
    assert_eq!(add_2_to_sync_set(&mut stranger).code, 0);
}

#[test]
fn an_election_from_the_brokers_own_ip_never_makes_a_dead_id_master() {
    let server = ControllerServer::start(&[]);
    let mut ctrl = server.controller_client();
    let mut master = connect_from(BROKER, &server.controller).expect("connect");
    assert_eq!(apply_id(&mut master, "1", ADDR_1).code, 0);
    assert_eq!(apply_id(&mut master, "2", ADDR_2).code, 0);
    assert_eq!(heartbeat(&mut master, "1", ADDR_1).code, 0);
    assert_eq!(elect(&mut master, "1").code, 0);

    // Id 2 never heartbeated: the live master stays, and once it is gone nobody is elected.
    let mut other = connect_from(BROKER, &server.controller).expect("connect");
    assert_eq!(elect(&mut other, "2").code, 2011);
    drop(master);
    let no_master = |ctrl: &mut Client| master_now(ctrl).0.is_none();
    assert!(common::wait_until(Duration::from_secs(5), || no_master(
        &mut ctrl
    )));
    assert_eq!(elect(&mut other, "2").code, 2012);
    assert!(no_master(&mut ctrl), "{:?}", master_now(&mut ctrl));
}

/// A name server with the controller, `brokerAllowList` and the source check off, so that
/// only the list decides.
fn start_with_only_the_allow_list(list: &str) -> ControllerServer {
    common::init_test_log();
    let dir = common::TempDir::new("ctrl-src");
    let store = dir.path().join("controller").to_string_lossy().into_owned();
    let pairs = [
        ("controllerDLegerGroup", "group1".to_owned()),
        ("controllerDLegerPeers", "n0-127.0.0.1:0".to_owned()),
        ("controllerDLegerSelfId", "n0".to_owned()),
        ("controllerStorePath", store),
        ("checkBrokerSourceAddress", "false".to_owned()),
    ];
    let lookup = |key: &str| {
        let pair = pairs.iter().find(|(k, _)| *k == key);
        pair.map(|(_, v)| v.clone())
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
fn broker_allow_list_decides_who_may_elect_apply_ids_and_alter_the_sync_set() {
    let server = start_with_only_the_allow_list("127.0.0.1/32");
    let mut ctrl = server.controller_client();
    let mut broker = connect_from(BROKER, &server.controller).expect("connect");
    let mut outside = connect_from(STRANGER, &server.controller).expect("connect");
    refused(
        &apply_id(&mut outside, "1", "127.0.0.2:10911"),
        "brokerAllowList",
    );
    assert_eq!(apply_id(&mut broker, "1", ADDR_1).code, 0);
    assert_eq!(apply_id(&mut broker, "2", ADDR_2).code, 0);
    refused(&elect(&mut outside, "1"), "brokerAllowList");
    assert_eq!(master_now(&mut ctrl), (None, "0".into()));
    assert_eq!(elect(&mut broker, "1").code, 0);
    assert_eq!(heartbeat(&mut broker, "1", ADDR_1).code, 0);
    assert_eq!(heartbeat(&mut broker, "2", ADDR_2).code, 0);
    refused(&add_2_to_sync_set(&mut outside), "brokerAllowList");
    assert_eq!(add_2_to_sync_set(&mut broker).code, 0);
}
