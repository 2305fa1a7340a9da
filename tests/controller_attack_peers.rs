//! The peer link of three real `rmq-namesrv` processes on loopback: a follower restored from
//! an empty store catches up through a snapshot far above one frame (chunked), and with
//! `controllerPeerSecret` set a peer that cannot prove the secret never speaks Raft.
#![cfg(feature = "controller")]

#[path = "common/child.rs"]
mod child;
mod common;
#[path = "controller_net/group.rs"]
mod group;

use common::{stat, wait_until};
use group::{ProcessGroup as Group, NODES};
use hmac::{Hmac, Mac};
use protobuf::Message as _;
use raft::eraftpb::{ConfState, Message, MessageType, Snapshot, SnapshotMetadata};
use rmq_namesrv::client::Client;
use rmq_namesrv::controller::raft::storage::{encode_snapshot_file, snapshot_path};
use rmq_namesrv::controller::snapshot;
use rmq_namesrv::controller::state::{
    BrokerIdInfo, BrokerReplicaInfo, ControllerState, SyncStateInfo,
};
use rmq_namesrv::remoting::command::{
    encode_frame, DecodeLimits, Header, RemotingCommand, SerializeType,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const PEER_CODE: i32 = 40_016;
const SETS: usize = 100_000;
const SECRET: &str = "the-group-secret-0123456789";

/// `SETS` broker sets of one broker each, as of Raft index 3.
fn seed(store: &std::path::Path) -> usize {
    let mut state = ControllerState::default();
    for k in 0..SETS {
        let name = format!("broker-set-with-a-rather-long-name-{k:06}");
        let addr = format!("10.{}.{}.{}:10911", k >> 16, (k >> 8) & 255, k & 255);
        let mut info = BrokerReplicaInfo::new(Some("DefaultCluster".into()), name.clone());
        info.next_assign_broker_id = 2;
        let check = format!("{addr};1700000000000");
        let broker = BrokerIdInfo {
            address: addr,
            register_check_code: check,
        };
        info.brokers.insert(1, broker);
        state.insert_replica_info(info);
        let mut sync = SyncStateInfo::new(Some("DefaultCluster".into()), name);
        sync.master_broker_id = Some(1);
        sync.master_epoch = 1;
        sync.sync_state_set_epoch = 1;
        sync.sync_state_set.insert(1);
        state.insert_sync_state(sync);
    }
    let mut meta = SnapshotMetadata {
        index: 3,
        term: 1,
        ..Default::default()
    };
    meta.set_conf_state(ConfState {
        voters: vec![1, 2, 3],
        ..Default::default()
    });
    let mut snap = Snapshot::default();
    snap.set_metadata(meta);
    let data = snapshot::encode(3, &state);
    let size = data.len();
    snap.data = data.into();
    let file = encode_snapshot_file(&snap);
    for i in 0..NODES {
        let dir = store.join(format!("rmq-controller-n{i}"));
        std::fs::create_dir_all(&dir).expect("store");
        std::fs::write(snapshot_path(&dir), &file).expect("snapshot");
    }
    size
}

fn status(group: &Group, i: usize, key: &str) -> Option<u64> {
    group.members[i].metadata()?.ext(key)?.parse().ok()
}

/// The longest loop turn (and route lookup) allowed while the snapshot moves. The goal is
/// ~2 ms in a release build; a busy machine preempts the loop for tens of ms at times, and a
/// debug build gets more room, still far below what encoding and reading the snapshot on the
/// loop cost in one turn each (release: 0.2-0.6 s on the leader, 0.5-1.4 s on the follower).
fn turn_bound() -> Duration {
    Duration::from_millis(if cfg!(debug_assertions) { 250 } else { 50 })
}

/// Looks a route up on a name server port, over and over, until stopped.
struct GoodClient {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<Duration>>,
}

impl GoodClient {
    fn start(namesrv: &str) -> GoodClient {
        let mut client = Client::connect(namesrv, Duration::from_secs(10)).expect("name server");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut took = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                let started = Instant::now();
                let resp = client.request(105, &[("topic", "GoodTopic")], b"");
                assert_eq!(resp.expect("a route answer").code, 17);
                took.push(started.elapsed());
                std::thread::sleep(Duration::from_millis(1));
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

fn max_turn(group: &Group, i: usize) -> Duration {
    let mut ns = Client::connect(&group.members[i].namesrv, Duration::from_secs(10)).expect("ns");
    Duration::from_micros(stat(&mut ns, "maxTurnMicros").max(0) as u64)
}

#[test]
fn a_follower_restored_from_an_empty_store_catches_up_through_a_snapshot_of_100k_sets() {
    let mut size = 0;
    // No inactive-master scans (each one a pass over the 100,000 sets) while turns are timed.
    let config = "controllerSnapshotEvents=1\nscanInactiveMasterInterval=3600000";
    let mut group = Group::start_with(config, |store| size = seed(store));
    assert!(size > 4 << 20, "the snapshot is {size} bytes");
    let leader = group
        .wait_for_leader(Duration::from_secs(60))
        .expect("a leader");
    let f = (leader + 1) % NODES;
    group.kill9(f);
    std::fs::remove_dir_all(group.store(f)).expect("the follower's store removed");
    let leader_turn_before = max_turn(&group, leader);
    let on_leader = GoodClient::start(&group.members[leader].namesrv);
    let started = Instant::now();
    group.restart(f);
    let on_follower = GoodClient::start(&group.members[f].namesrv);
    let caught_up = wait_until(Duration::from_secs(60), || {
        let applied = status(&group, f, "raftApplied");
        applied.is_some_and(|a| a >= 4) && applied == status(&group, leader, "raftApplied")
    });
    let took = started.elapsed();
    let log = group.members[f].log();
    assert!(caught_up, "the restored follower caught up: {log}");
    assert!(
        log.contains("installing the leader's snapshot at index 3"),
        "{log}"
    );
    let (leader_p99, leader_max) = on_leader.finish();
    let (follower_p99, follower_max) = on_follower.finish();
    let (leader_turn, follower_turn) = (max_turn(&group, leader), max_turn(&group, f));
    eprintln!(
        "{size}-byte snapshot: caught up in {took:?}; longest turn: leader {leader_turn:?} (before {leader_turn_before:?}), follower {follower_turn:?}; route lookups p99 / max: leader {leader_p99:?} / {leader_max:?}, follower {follower_p99:?} / {follower_max:?}"
    );
    // The leader's first scan when it began to serve may be its longest turn.
    let leader_ok = |turn| turn <= turn_bound() || turn == leader_turn_before;
    assert!(leader_ok(leader_turn), "the leader's longest turn");
    assert!(follower_turn <= turn_bound(), "the follower's longest turn");
    assert!(leader_max <= turn_bound() && follower_max <= turn_bound());

    // A change: every node snapshots its 100,000 sets (controllerSnapshotEvents=1).
    let mut controller =
        Client::connect(&group.members[leader].controller, Duration::from_secs(10))
            .expect("controller");
    let ext = [
        ("clusterName", "DefaultCluster"),
        ("brokerName", "broker-set-with-a-rather-long-name-000000"),
        ("appliedBrokerId", "2"),
        ("registerCheckCode", "127.0.0.1:10912;1700000000000"),
    ];
    let resp = controller.request(1013, &ext, b"").expect("1013");
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    let written = wait_until(Duration::from_secs(60), || {
        group.members[leader].log().contains("written; log cut")
    });
    assert!(written, "the leader wrote a snapshot");
    let leader_turn = max_turn(&group, leader);
    eprintln!("after a snapshot of the 100,000 sets, the leader's longest turn: {leader_turn:?}");
    assert!(leader_ok(leader_turn), "the leader's longest turn");
}

fn frame(flag: i32, ext: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let header = Header {
        code: PEER_CODE,
        language: "RUST",
        version: 0,
        opaque: 1,
        flag,
        remark: None,
    };
    let mut out = Vec::new();
    let ext = Some(ext.iter().copied());
    encode_frame(&mut out, SerializeType::Json, &header, ext, body);
    out
}

/// The next frame, or None once the server closed the connection.
fn read_cmd(s: &mut TcpStream) -> Option<RemotingCommand> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut rest = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut rest).ok()?;
    RemotingCommand::decode(rest.into(), &DecodeLimits::default()).ok()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A vote request for a far later term from node 1 to node 3.
fn vote() -> Vec<u8> {
    let mut m = Message::default();
    m.set_msg_type(MessageType::MsgRequestVote);
    (m.from, m.to, m.term, m.log_term, m.index) = (1, 3, 1_000, 1_000, 1_000);
    m.write_to_bytes().expect("encode")
}

/// Node n2 (Raft id 3) dialed by someone claiming to be n0 (id 1) from n0's IP.
fn handshake(group: &Group, nonce: Option<&str>) -> (TcpStream, Option<RemotingCommand>) {
    let mut s = TcpStream::connect(&group.members[2].controller).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut ext = vec![
        ("kind", "handshake"),
        ("group", "g"),
        ("nodeId", "1"),
        ("addr", group.members[0].controller.as_str()),
    ];
    ext.extend(nonce.map(|n| ("nonce", n)));
    s.write_all(&frame(0, &ext, b"")).expect("handshake");
    let answer = read_cmd(&mut s);
    (s, answer)
}

fn terms(group: &Group) -> Vec<Option<u64>> {
    (0..NODES).map(|i| status(group, i, "raftTerm")).collect()
}

#[test]
fn a_peer_without_the_groups_secret_cannot_speak_raft() {
    let group = Group::start(&format!("controllerPeerSecret={SECRET}"));
    group
        .wait_for_leader(Duration::from_secs(30))
        .expect("the group links and elects with the right secret");
    let before = terms(&group);

    // No secret: refused at the handshake.
    let (mut s, answer) = handshake(&group, None);
    let answer = answer.expect("an answer");
    assert_eq!(answer.code, 1);
    assert!(answer
        .remark
        .as_deref()
        .unwrap_or("")
        .contains("controllerPeerSecret"));
    let _ = s.write_all(&frame(2, &[], &vote()));
    assert!(read_cmd(&mut s).is_none(), "closed");

    // A wrong secret: the answer carries the node's nonce and proof; the proof made with
    // another secret closes the connection before the vote is read.
    let nonce = hex(&[7u8; 16]);
    let (mut s, answer) = handshake(&group, Some(&nonce));
    let answer = answer.expect("an answer");
    assert_eq!(answer.code, 0);
    let theirs = answer
        .ext("nonce")
        .expect("the acceptor's nonce")
        .to_owned();
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(b"not-the-secret").unwrap();
    mac.update(format!("dialer\0g\0{theirs}").as_bytes());
    let proof = hex(&mac.finalize().into_bytes());
    let _ = s.write_all(&frame(2, &[("proof", proof.as_str())], b""));
    let _ = s.write_all(&frame(2, &[], &vote()));
    assert!(read_cmd(&mut s).is_none(), "closed");

    // Every member still has the same term, and the leader is still in place.
    assert_eq!(terms(&group), before);
    assert!(group.serving_leader().is_some());
    let log = group.members[2].log();
    // One line per second: the second refusal may be counted in the next line only.
    assert!(
        log.contains("refusing the connection from 127.0.0.1:")
            && log.contains("has no controllerPeerSecret"),
        "{log}"
    );
    assert!(!log.contains("unknown key"), "{log}");
    assert!(!log.contains(SECRET), "the secret is never logged");
    let mut c = Client::connect(&group.members[0].controller, Duration::from_secs(5)).unwrap();
    let config = c.request(1010, &[], b"").expect("GET_CONTROLLER_CONFIG");
    let text = String::from_utf8_lossy(&config.body);
    assert!(
        text.contains("controllerDLegerGroup=g") && !text.contains(SECRET),
        "{text}"
    );
}
