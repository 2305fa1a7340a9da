//! The controller's store: a restart rebuilds the same state, snapshots cut the log, a torn
//! last record is dropped, damage anywhere else refuses the start naming the file.
#![cfg(feature = "controller")]

#[path = "controller_harness/mod.rs"]
mod harness;

use harness::Node;
use rmq_namesrv::controller::event::{encode_entry, Event};
use rmq_namesrv::controller::state::ControllerState;
use rmq_namesrv::controller::storage::{self, log, snapshot, Completion, Storage, StorageError};
use rmq_namesrv::test_support::TempDir;
use std::time::Duration;

fn apply_id(name: &str, id: i64) -> Event {
    Event::ApplyBrokerId {
        cluster_name: Some("c".into()),
        broker_name: name.into(),
        broker_address: format!("10.0.0.{id}:30911"),
        new_broker_id: id,
        register_check_code: format!("10.0.0.{id}:30911;{id}"),
    }
}

fn elect(name: &str, id: i64) -> Event {
    Event::ElectMaster {
        broker_name: name.into(),
        new_master_elected: true,
        new_master_broker_id: Some(id),
    }
}

/// Appends `entries` and waits until each is durable; returns the state they make.
fn append_all(store: &mut Storage, state: &mut ControllerState, entries: &[Vec<Event>]) {
    let mut indexes = Vec::new();
    for events in entries {
        indexes.push(store.append(encode_entry(events)).unwrap());
    }
    for expected in indexes {
        match store.wait_completion(Duration::from_secs(10)) {
            Some(Completion::Durable { index, entry }) => {
                assert_eq!(index, expected, "completions come in index order");
                for event in rmq_namesrv::controller::event::decode_entry(&entry).unwrap() {
                    state.apply(&event);
                }
            }
            other => panic!("expected entry {expected} durable, got {other:?}"),
        }
    }
}

fn workload(sets: usize) -> Vec<Vec<Event>> {
    let mut entries = Vec::new();
    for s in 0..sets {
        let name = format!("broker-{s}");
        entries.push(vec![apply_id(&name, 1)]);
        entries.push(vec![apply_id(&name, 2)]);
        entries.push(vec![elect(&name, 1)]);
        entries.push(vec![]); // a read barrier
    }
    entries
}

#[test]
fn a_restart_rebuilds_the_same_state() {
    let dir = TempDir::new("ctrl-store");
    let (mut store, recovered) = Storage::open(dir.path(), None).unwrap();
    assert_eq!(recovered.last_index, 0);
    let mut state = ControllerState::new();
    // Many appends handed over at once share writes and fsyncs (group commit).
    append_all(&mut store, &mut state, &workload(200));
    drop(store);
    let (store, recovered) = Storage::open(dir.path(), None).unwrap();
    assert_eq!(recovered.state, state);
    assert_eq!(recovered.last_index, 800);
    assert_eq!(recovered.replayed, 800);
    assert_eq!(recovered.events_since_snapshot, 600);
    assert!(recovered.torn_tail.is_none());
    drop(store);
}

#[test]
fn snapshots_cut_the_log_and_recovery_starts_from_them() {
    let dir = TempDir::new("ctrl-store");
    let mut node = Node::open(&dir, &[("controllerSnapshotEvents", "5")]);
    for set in ["broker-a", "broker-b", "broker-c"] {
        node.register(set, 30911);
        node.register(set, 30912);
        node.heartbeat(1, set, 1, 10_000, 0, 0);
        assert_eq!(node.self_elect(set, 1), 0);
    }
    // 9 events: the snapshot after the 5th; the other 4 stay in the log.
    let state = node.c().state().clone();
    let applied = node.c().applied_index();
    node.restart();
    let store_dir = node.c().config().store_dir();
    let (snap_index, snap_state) = snapshot::read(&storage::snapshot_path(&store_dir))
        .unwrap()
        .unwrap();
    let bytes = std::fs::read(storage::log_path(&store_dir)).unwrap();
    let records = log::scan(&storage::log_path(&store_dir), &bytes)
        .unwrap()
        .records;
    assert!(
        snap_index >= 5 && snap_index < applied,
        "snapshot at {snap_index} of {applied}"
    );
    assert!(
        records.iter().all(|r| r.index > snap_index),
        "records the snapshot holds are gone"
    );
    assert_eq!(records.last().map(|r| r.index), Some(applied));
    assert_ne!(snap_state, state, "the log holds the rest");
    assert_eq!(node.c().state(), &state);
    assert_eq!(node.c().applied_index(), applied);
    // More events after the restart keep the cadence and still recover.
    node.register("broker-d", 30911);
    let state = node.c().state().clone();
    node.restart();
    assert_eq!(node.c().state(), &state);
}

#[test]
fn a_torn_last_record_is_dropped_and_appends_continue() {
    let dir = TempDir::new("ctrl-store");
    let (mut store, _) = Storage::open(dir.path(), None).unwrap();
    let mut state = ControllerState::new();
    append_all(&mut store, &mut state, &workload(2));
    drop(store);
    // A crash in the middle of the next append: half a record at the end of the file.
    let path = storage::log_path(dir.path());
    let mut half = Vec::new();
    log::encode_record(9, &encode_entry(&[apply_id("broker-z", 1)]), &mut half);
    let mut bytes = std::fs::read(&path).unwrap();
    let good_len = bytes.len();
    bytes.extend_from_slice(&half[..half.len() / 2]);
    std::fs::write(&path, &bytes).unwrap();
    let (mut store, recovered) = Storage::open(dir.path(), None).unwrap();
    assert!(recovered.torn_tail.is_some());
    assert_eq!(recovered.state, state);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        good_len as u64,
        "cut back"
    );
    append_all(&mut store, &mut state, &[vec![apply_id("broker-z", 1)]]);
    drop(store);
    let (_store, recovered) = Storage::open(dir.path(), None).unwrap();
    assert!(recovered.torn_tail.is_none());
    assert_eq!(recovered.state, state);
    assert_eq!(recovered.last_index, 9);
}

#[test]
fn damage_inside_the_log_refuses_the_start_naming_the_file() {
    let dir = TempDir::new("ctrl-store");
    let (mut store, _) = Storage::open(dir.path(), None).unwrap();
    append_all(&mut store, &mut ControllerState::new(), &workload(2));
    drop(store);
    let path = storage::log_path(dir.path());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[log::MAGIC.len() + log::RECORD_HEADER_LEN + 3] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let err = Storage::open(dir.path(), None).err().expect("refused");
    assert!(matches!(err, StorageError::Corrupt { .. }));
    let text = err.to_string();
    assert!(
        text.contains(&path.display().to_string()) && text.contains("byte 8"),
        "{text}"
    );
    // Left as found: nothing was cut.
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[test]
fn a_damaged_snapshot_or_a_gap_after_it_refuses_the_start() {
    let dir = TempDir::new("ctrl-store");
    let mut state = ControllerState::new();
    let (mut store, _) = Storage::open(dir.path(), None).unwrap();
    append_all(&mut store, &mut state, &workload(1));
    store.snapshot(4, &state).unwrap();
    match store.wait_completion(Duration::from_secs(10)) {
        Some(Completion::Snapshot {
            index: 4,
            result: Ok(0),
        }) => {}
        other => panic!("snapshot: {other:?}"),
    }
    append_all(&mut store, &mut state, &workload(1)[..2]);
    drop(store);
    let (store, recovered) = Storage::open(dir.path(), None).unwrap();
    assert_eq!(
        (
            recovered.snapshot_index,
            recovered.replayed,
            recovered.last_index
        ),
        (4, 2, 6)
    );
    assert_eq!(recovered.state, state);
    drop(store);

    // A log that skips an index after the snapshot.
    let log_path = storage::log_path(dir.path());
    let mut gap = log::MAGIC.to_vec();
    log::encode_record(6, &[], &mut gap);
    let intact = std::fs::read(&log_path).unwrap();
    std::fs::write(&log_path, &gap).unwrap();
    let err = Storage::open(dir.path(), None)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("continues at record 6 but the snapshot ends at 4"),
        "{err}"
    );
    std::fs::write(&log_path, &intact).unwrap();

    // A snapshot that fails its checksum.
    let snap_path = storage::snapshot_path(dir.path());
    let mut bytes = std::fs::read(&snap_path).unwrap();
    let last = bytes.len() - 2;
    bytes[last] ^= 0x01;
    std::fs::write(&snap_path, &bytes).unwrap();
    let err = Storage::open(dir.path(), None)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains(&snap_path.display().to_string()) && err.contains("checksum"),
        "{err}"
    );
}

#[test]
fn a_store_that_is_not_ours_is_refused() {
    let dir = TempDir::new("ctrl-store");
    std::fs::write(storage::log_path(dir.path()), b"something else entirely").unwrap();
    let err = Storage::open(dir.path(), None)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("not a controller event log"), "{err}");
}
