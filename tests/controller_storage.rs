//! The controller's store (a single node is a Raft group of one, on the same storage as a
//! group of three): a restart rebuilds the same state, snapshots cut the log, a torn last
//! record is dropped, damage anywhere else refuses the start naming the file.
#![cfg(feature = "controller")]

#[path = "controller_harness/mod.rs"]
mod harness;

use harness::Node;
use harness::TempDir;
use rmq_namesrv::controller::raft::records::{self, StorageError};
use rmq_namesrv::controller::raft::storage::{self, RaftStore};
use rmq_namesrv::controller::state::ControllerState;
use rmq_namesrv::controller::{Controller, StartError};
use std::path::{Path, PathBuf};

/// Three sets with two ids each and a master: 9 logged events.
fn workload(node: &mut Node, sets: &[&str]) {
    for set in sets {
        node.register(set, 30911);
        node.register(set, 30912);
        node.heartbeat(1, set, 1, 10_000, 0, 0);
        assert_eq!(node.self_elect(set, 1), 0);
    }
}

fn store_dir(node: &mut Node) -> PathBuf {
    node.c().config().store_dir()
}

/// Stops the node (waiting for its writer), leaving the store as a restart finds it.
fn stop(node: &mut Node) {
    let c = node.controller.take().expect("running");
    assert!(c.shutdown().is_empty(), "nothing in flight");
}

/// Reads the store back as a start does (the node must be stopped), with the state as of its
/// snapshot.
fn read_store(dir: &Path) -> (RaftStore, ControllerState) {
    let (store, state, ..) = storage::recover(dir, &[1]).expect("the store opens");
    (store, state)
}

/// Whether the log ends in a torn record (what a start cuts off).
fn log_is_torn(dir: &Path) -> bool {
    let path = storage::log_path(dir);
    let bytes = std::fs::read(&path).expect("raft.log");
    records::scan(&path, &bytes)
        .expect("a good log")
        .torn
        .is_some()
}

/// The indexes of the entries `raft.log` holds (records of kind 1), in file order.
fn logged_entry_indexes(dir: &Path) -> Vec<u64> {
    let path = storage::log_path(dir);
    let bytes = std::fs::read(&path).expect("raft.log");
    records::scan(&path, &bytes)
        .expect("a good log")
        .records
        .iter()
        .filter(|r| r.item.first() == Some(&1))
        .filter_map(|r| entry_index(&r.item[1..]))
        .collect()
}

/// The `index` field (protobuf field 3, varint) of an encoded raft-rs Entry.
fn entry_index(mut bytes: &[u8]) -> Option<u64> {
    fn varint(bytes: &mut &[u8]) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = bytes.split_first()?;
            *bytes = rest;
            value |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
    while !bytes.is_empty() {
        let key = varint(&mut bytes)?;
        match key & 7 {
            0 => {
                let v = varint(&mut bytes)?;
                if key >> 3 == 3 {
                    return Some(v);
                }
            }
            2 => {
                let len = varint(&mut bytes)? as usize;
                bytes = bytes.get(len..)?;
            }
            _ => return None,
        }
    }
    None
}

fn open_error(node: &Node) -> String {
    let config = harness::config(&node.dir, &[]);
    match Controller::<i32>::open(config, None, 0) {
        Ok(_) => panic!("the start was not refused"),
        Err(StartError::Storage(e)) => {
            assert!(matches!(e, StorageError::Corrupt { .. }), "{e:?}");
            e.to_string()
        }
        Err(e) => panic!("refused for another reason: {e}"),
    }
}

#[test]
fn a_restart_rebuilds_the_same_state_and_serves_at_once() {
    let dir = TempDir::new("ctrl-store");
    let mut node = Node::open(&dir, &[]);
    let status = node.c().group_status();
    assert!(status.serving, "a single node serves as soon as it opens");
    let names: Vec<String> = (0..40).map(|i| format!("broker-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    workload(&mut node, &names);
    let state = node.c().state().clone();
    let applied = node.c().applied_index();
    node.restart();
    assert_eq!(node.c().state(), &state);
    let after = node.c().group_status();
    assert!(after.serving);
    assert!(after.term > status.term, "a new term per start");
    // Everything before the restart, plus the new term's empty entry.
    assert_eq!(node.c().applied_index(), applied + 1);
    // And it keeps taking writes.
    node.register("broker-new", 30911);
    let state = node.c().state().clone();
    node.restart();
    assert_eq!(node.c().state(), &state);
}

#[test]
fn snapshots_cut_the_log_and_recovery_starts_from_them() {
    let dir = TempDir::new("ctrl-store");
    let mut node = Node::open(&dir, &[("controllerSnapshotEvents", "5")]);
    workload(&mut node, &["broker-a", "broker-b", "broker-c"]);
    // 9 events: a snapshot after the 5th; the rest stays in the log.
    let state = node.c().state().clone();
    let applied = node.c().applied_index();
    let store_dir = store_dir(&mut node);
    stop(&mut node);
    let (store, snapshot_state) = read_store(&store_dir);
    let snap_index = store.snapshot_index();
    assert!(
        snap_index >= 5 && snap_index < applied,
        "snapshot at {snap_index} of {applied}"
    );
    let logged = logged_entry_indexes(&store_dir);
    assert!(
        logged.iter().all(|i| *i > snap_index),
        "entries the snapshot holds are gone from the log: {logged:?} (snapshot {snap_index})"
    );
    assert_eq!(logged.last(), Some(&applied));
    assert_ne!(snapshot_state, state, "the log holds the rest");
    drop(store);
    node.restart();
    assert_eq!(node.c().state(), &state);
    // More events after the restart keep the cadence and still recover.
    node.register("broker-d", 30911);
    let state = node.c().state().clone();
    node.restart();
    assert_eq!(node.c().state(), &state);
}

#[test]
fn a_torn_last_record_is_dropped_and_appends_continue() {
    let dir = TempDir::new("ctrl-store");
    let mut node = Node::open(&dir, &[]);
    workload(&mut node, &["broker-a", "broker-b"]);
    let state = node.c().state().clone();
    let store_dir = store_dir(&mut node);
    stop(&mut node);
    // A crash in the middle of the next append: half a record at the end of the file.
    let path = storage::log_path(&store_dir);
    let mut bytes = std::fs::read(&path).unwrap();
    let good_len = bytes.len();
    let last_seq = records::scan(&path, &bytes)
        .unwrap()
        .records
        .last()
        .unwrap()
        .seq;
    let mut half = Vec::new();
    records::encode_record(last_seq + 1, &[1, 0x08, 0x01, 0x10, 0x63], &mut half);
    bytes.extend_from_slice(&half[..half.len() / 2]);
    std::fs::write(&path, &bytes).unwrap();
    assert!(log_is_torn(&store_dir));
    read_store(&store_dir);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        good_len as u64,
        "cut back"
    );
    node.restart();
    assert_eq!(node.c().state(), &state);
    node.register("broker-z", 30911);
    let state = node.c().state().clone();
    node.restart();
    assert_eq!(node.c().state(), &state);
    stop(&mut node);
    assert!(!log_is_torn(&store_dir));
}

#[test]
fn damage_inside_the_log_refuses_the_start_naming_the_file() {
    let dir = TempDir::new("ctrl-store");
    let mut node = Node::open(&dir, &[]);
    workload(&mut node, &["broker-a", "broker-b"]);
    let store_dir = store_dir(&mut node);
    stop(&mut node);
    let path = storage::log_path(&store_dir);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[records::MAGIC.len() + records::RECORD_HEADER_LEN + 3] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let text = open_error(&node);
    assert!(
        text.contains(&path.display().to_string()) && text.contains("byte 8"),
        "{text}"
    );
    // Left as found: nothing was cut.
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[test]
fn a_damaged_snapshot_or_a_log_out_of_order_refuses_the_start() {
    let dir = TempDir::new("ctrl-store");
    let mut node = Node::open(&dir, &[("controllerSnapshotEvents", "3")]);
    workload(&mut node, &["broker-a", "broker-b"]);
    let state = node.c().state().clone();
    let store_dir = store_dir(&mut node);
    stop(&mut node);
    let (store, _) = read_store(&store_dir);
    assert!(store.snapshot_index() > 0, "a snapshot was written");
    drop(store);
    node.restart();
    assert_eq!(node.c().state(), &state, "snapshot + log read back");
    stop(&mut node);

    // A log whose records skip a sequence number.
    let log_path = storage::log_path(&store_dir);
    let intact = std::fs::read(&log_path).unwrap();
    let mut gap = records::MAGIC.to_vec();
    records::encode_record(1, &[2], &mut gap);
    records::encode_record(3, &[2], &mut gap);
    std::fs::write(&log_path, &gap).unwrap();
    let err = open_error(&node);
    assert!(err.contains("record 3 follows record 1"), "{err}");

    // A log whose entries do not continue the snapshot (an entry far past it).
    let mut far = records::MAGIC.to_vec();
    // kind 1, Entry { term: 1, index: 1000 }
    records::encode_record(1, &[1, 0x10, 0x01, 0x18, 0xE8, 0x07], &mut far);
    std::fs::write(&log_path, &far).unwrap();
    let err = open_error(&node);
    assert!(err.contains("do not follow the log"), "{err}");
    std::fs::write(&log_path, &intact).unwrap();

    // A snapshot that fails its checksum.
    let snap_path = storage::snapshot_path(&store_dir);
    let mut bytes = std::fs::read(&snap_path).unwrap();
    let last = bytes.len() - 2;
    bytes[last] ^= 0x01;
    std::fs::write(&snap_path, &bytes).unwrap();
    let err = open_error(&node);
    assert!(
        err.contains(&snap_path.display().to_string()) && err.contains("checksum"),
        "{err}"
    );
}

#[test]
fn a_store_that_is_not_ours_is_refused() {
    let dir = TempDir::new("ctrl-store");
    let mut node = Node::open(&dir, &[]);
    let store_dir = store_dir(&mut node);
    stop(&mut node);
    std::fs::write(storage::log_path(&store_dir), b"something else entirely").unwrap();
    let err = open_error(&node);
    assert!(err.contains("not a controller Raft log"), "{err}");
}
