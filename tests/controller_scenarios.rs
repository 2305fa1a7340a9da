//! Java's controller test scenarios, ported as table-level tests:
//! * ReplicasInfoManagerTest: the request handlers on the tables, with liveness as data
//!   (`replicas::handle` + `ControllerState::apply`, no sockets, no threads);
//! * DLedgerControllerTest and ControllerManager's failover: the whole controller with its
//!   log, driven as the event loop will drive it (heartbeats, closed connections, scans,
//!   elections with retries, notifications, restarts).
#![cfg(feature = "controller")]

#[path = "controller_harness/mod.rs"]
mod harness;

use harness::{ExtValue, Node, TempDir};
use rmq_namesrv::controller::event::Event;
use rmq_namesrv::controller::liveness::Liveness;
use rmq_namesrv::controller::replicas::{self, Outcome, View};
use rmq_namesrv::controller::request::{
    AlterSyncStateSet, ApplyBrokerId, CleanBrokerData, ElectMaster, GetNextBrokerId, LeaderRequest,
    RegisterBroker, SyncStateSetBody,
};
use rmq_namesrv::controller::state::ControllerState;
use rmq_namesrv::controller::{ConnRef, Scan};
use std::collections::BTreeSet;

// ---------------------------------------------------------------------------------------------
// ReplicasInfoManagerTest

const CLUSTER: &str = "DefaultCluster";
const NAME: &str = "broker-set-a";
const IPS: [&str; 3] = ["127.0.0.1:9000", "127.0.0.1:9001", "127.0.0.1:9002"];
const NOW: u64 = 1_000_000;

/// The tables plus a liveness table standing in for Java's alive predicates.
struct Tables {
    state: ControllerState,
    liveness: Liveness,
    unclean: bool,
}

impl Tables {
    fn new() -> Tables {
        Tables {
            state: ControllerState::default(),
            liveness: Liveness::default(),
            unclean: false,
        }
    }

    /// Exactly `ids` alive (Java's `(a, b, c) -> ...` predicates), with progress per id.
    fn alive(&mut self, beats: &[(i64, i32, i64, i32)]) {
        self.liveness = Liveness::default();
        for &(id, epoch, offset, priority) in beats {
            self.liveness
                .on_heartbeat(
                    &rmq_namesrv::controller::request::Heartbeat {
                        cluster_name: Some(CLUSTER.into()),
                        broker_addr: Some(IPS[(id as usize - 1) % 3].into()),
                        broker_name: Some(NAME.into()),
                        broker_id: Some(id),
                        epoch: Some(epoch),
                        max_offset: Some(offset),
                        confirm_offset: Some(-1),
                        heartbeat_timeout_millis: Some(10_000_000_000),
                        election_priority: Some(priority),
                        store_ready: None,
                    },
                    None,
                    NOW,
                )
                .expect("room in the table");
        }
    }

    fn alive_ids(&mut self, ids: &[i64]) {
        let beats: Vec<_> = ids.iter().map(|&id| (id, 0, 0, 0)).collect();
        self.alive(&beats);
    }

    /// Handles a request and applies its events, as the pipeline does once they are durable.
    fn run(&mut self, request: LeaderRequest) -> Outcome {
        let outcome = replicas::handle(
            &request,
            &View {
                state: &self.state,
                liveness: &self.liveness,
                now_ms: NOW,
                enable_elect_unclean_master: self.unclean,
            },
        );
        for event in &outcome.events {
            self.state.apply(event);
        }
        outcome
    }

    fn register(&mut self, ip: &str, expect_id: i64, expect_master: Option<i64>) {
        let next = self.run(LeaderRequest::GetNextBrokerId(GetNextBrokerId {
            cluster_name: Some(CLUSTER.into()),
            broker_name: Some(NAME.into()),
        }));
        assert_eq!(
            next.response.ext_value("nextBrokerId"),
            Some(expect_id.to_string().as_str())
        );
        let applied = self.run(LeaderRequest::ApplyBrokerId(ApplyBrokerId {
            cluster_name: Some(CLUSTER.into()),
            broker_name: Some(NAME.into()),
            applied_broker_id: Some(expect_id),
            register_check_code: Some(format!("{ip};{NOW}")),
        }));
        assert_eq!(applied.response.code, 0);
        let registered = self.run(LeaderRequest::RegisterBroker(RegisterBroker {
            cluster_name: Some(CLUSTER.into()),
            broker_name: Some(NAME.into()),
            broker_id: Some(expect_id),
            broker_address: Some(ip.into()),
        }));
        assert_eq!(registered.response.code, 0);
        assert_eq!(
            registered.response.ext_value("masterBrokerId"),
            expect_master.map(|m| m.to_string()).as_deref()
        );
    }

    fn elect(&mut self, id: i64, designate: bool) -> Outcome {
        self.run(LeaderRequest::ElectMaster(ElectMaster {
            cluster_name: CLUSTER.into(),
            broker_name: NAME.into(),
            broker_id: id,
            designate_elect: designate,
        }))
    }

    fn controller_elect(&mut self) -> Outcome {
        self.run(LeaderRequest::ElectMaster(ElectMaster::controller_trigger(
            NAME,
        )))
    }

    fn alter(&mut self, master: i64, master_epoch: i32, set: &[i64], set_epoch: i32) -> Outcome {
        self.run(LeaderRequest::AlterSyncStateSet(AlterSyncStateSet {
            broker_name: Some(NAME.into()),
            master_broker_id: Some(master),
            master_epoch: Some(master_epoch),
            body: Some(SyncStateSetBody {
                sync_state_set: Some(set.iter().copied().collect()),
                sync_state_set_epoch: set_epoch,
            }),
        }))
    }

    /// (master, masterEpoch, syncStateSetEpoch, in-sync ids, other ids)
    fn replicas(&self) -> (Option<i64>, i32, i32, Vec<i64>, Vec<i64>) {
        let (replica, sync) = self.state.broker_set(NAME).expect("the set");
        let (in_sync, other): (Vec<i64>, Vec<i64>) = replica
            .brokers
            .keys()
            .partition(|id| sync.sync_state_set.contains(id));
        (
            sync.master_broker_id,
            sync.master_epoch,
            sync.sync_state_set_epoch,
            in_sync,
            other,
        )
    }

    /// Java's mockMetaData: three brokers, 1 elected first, 2 and 3 told the master lives,
    /// then the SyncStateSet grows to {1,2,3}.
    fn mock_meta_data(&mut self) {
        self.alive_ids(&[1, 2, 3]);
        for (i, ip) in IPS.iter().enumerate() {
            self.register(ip, i as i64 + 1, None);
        }
        assert_eq!(self.elect(1, false).response.code, 0);
        assert_eq!(self.elect(2, false).response.code, 2011);
        assert_eq!(self.elect(3, false).response.code, 2011);
        assert_eq!(self.alter(1, 1, &[1, 2, 3], 1).response.code, 0);
    }
}

#[test]
fn register_broker_success() {
    let mut t = Tables::new();
    t.mock_meta_data();
    assert_eq!(t.replicas(), (Some(1), 1, 2, vec![1, 2, 3], vec![]));
    assert_eq!(t.state.broker_set(NAME).unwrap().0.address(1), Some(IPS[0]));
}

#[test]
fn register_with_master_exist_resp() {
    let mut t = Tables::new();
    t.alive_ids(&[1, 2, 3]);
    t.register(IPS[0], 1, None);
    t.register(IPS[1], 2, None);
    assert_eq!(t.elect(1, false).response.code, 0);
    assert_eq!(t.elect(2, false).response.code, 2011);
    t.register(IPS[2], 3, Some(1));
    assert_eq!(t.elect(3, false).response.code, 2011);
    assert_eq!(t.replicas(), (Some(1), 1, 1, vec![1], vec![2, 3]));
}

#[test]
fn register_with_old_master_inactive() {
    let mut t = Tables::new();
    t.mock_meta_data();
    t.alive_ids(&[3]);
    let outcome = t.elect(3, false);
    assert_eq!(outcome.response.code, 0);
    assert_eq!(outcome.response.ext_value("masterAddress"), Some(IPS[2]));
    assert_eq!(t.replicas(), (Some(3), 2, 3, vec![3], vec![1, 2]));
}

#[test]
fn elect_master_old_master_still_alive() {
    let mut t = Tables::new();
    t.mock_meta_data();
    t.alive(&[(1, 1, 1, 0), (2, 1, 2, 0), (3, 1, 3, 0)]);
    assert_eq!(t.controller_elect().response.code, 2011);
}

#[test]
fn elect_master_prefers_higher_epoch_then_offset_then_priority() {
    // (heartbeats of the two live brokers; 1 is dead) -> winner
    type Beat = (i64, i32, i64, i32);
    let rows: [(&[Beat], i64); 3] = [
        (&[(2, 1, 2, 0), (3, 0, 3, 0)], 2),
        (&[(2, 1, 2, 0), (3, 1, 3, 0)], 3),
        (&[(2, 1, 3, 2), (3, 1, 3, 1)], 3),
    ];
    for (beats, winner) in rows {
        let mut t = Tables::new();
        t.mock_meta_data();
        t.alive(beats);
        let outcome = t.controller_elect();
        assert_eq!(outcome.response.code, 0);
        assert_eq!(
            outcome.response.ext_value("masterBrokerId"),
            Some(winner.to_string().as_str())
        );
        assert_eq!(
            outcome.response.ext_value("masterAddress"),
            Some(IPS[winner as usize - 1])
        );
        assert_eq!(outcome.response.ext_value("masterEpoch"), Some("2"));
    }
}

#[test]
fn elect_master_by_controller_then_by_administrator() {
    let mut t = Tables::new();
    t.mock_meta_data();
    t.alive_ids(&[2, 3]);
    let first = t.controller_elect();
    assert_eq!(first.response.ext_value("masterEpoch"), Some("2"));
    let master: i64 = first
        .response
        .ext_value("masterBrokerId")
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(master, 1);
    // Java's alterNewInSyncSet checks with an always-true predicate.
    t.alive_ids(&[1, 2, 3]);
    assert_eq!(t.alter(master, 2, &[1, 2, 3], 3).response.code, 0);
    // The administrator designates 1, which is not alive.
    t.alive_ids(&[2, 3]);
    assert_eq!(t.elect(1, true).response.code, 2012);
    // ... designates the current master, which is alive.
    t.alive_ids(&[1, 2, 3]);
    assert_eq!(t.elect(master, true).response.code, 2011);
    // ... designates 1 while the current master is down.
    let others: Vec<i64> = [1, 2, 3].into_iter().filter(|id| *id != master).collect();
    t.alive_ids(&others);
    let third = t.elect(1, true);
    assert_eq!(third.response.code, 0);
    assert_eq!(third.response.ext_value("masterBrokerId"), Some("1"));
    assert_eq!(third.response.ext_value("masterAddress"), Some(IPS[0]));
    assert_eq!(third.response.ext_value("masterEpoch"), Some("3"));
}

#[test]
fn all_replicas_shutdown_and_restart() {
    let mut t = Tables::new();
    t.mock_meta_data();
    assert_eq!(t.alter(1, 1, &[1], 2).response.code, 0);
    t.alive_ids(&[2, 3]);
    let outcome = t.controller_elect();
    assert_eq!(outcome.response.code, 2004);
    assert_eq!(
        outcome.events,
        vec![Event::ElectMaster {
            broker_name: NAME.into(),
            new_master_elected: false,
            new_master_broker_id: None
        }]
    );
    let (master, master_epoch, _, in_sync, _) = t.replicas();
    assert_eq!((master, master_epoch, in_sync), (None, 2, vec![1]));
    // Broker 2 is not in the set: it cannot take over; with unclean elections it can.
    assert_eq!(t.elect(2, false).response.code, 2012);
    t.unclean = true;
    let unclean = t.elect(2, false);
    assert_eq!(unclean.response.code, 0);
    assert_eq!(t.replicas().0, Some(2));
}

#[test]
fn clean_broker_data() {
    let clean = |cluster: Option<&str>, name: &str, ids: Option<&str>, living: bool| {
        LeaderRequest::CleanBrokerData(CleanBrokerData {
            cluster_name: cluster.map(str::to_owned),
            broker_name: Some(name.to_owned()),
            broker_controller_ids_to_clean: ids.map(str::to_owned),
            is_clean_living_broker: living,
        })
    };
    let mut t = Tables::new();
    t.mock_meta_data();
    assert_eq!(
        t.run(clean(Some(CLUSTER), NAME, Some("1"), false))
            .response
            .code,
        2009
    );
    let r = t.run(clean(Some(CLUSTER), NAME, None, false));
    assert_eq!(r.response.code, 2009);
    assert_eq!(
        r.response.remark.as_deref(),
        Some("Broker broker-set-a is still alive, clean up failure")
    );
    t.alive_ids(&[]);
    assert_eq!(
        t.run(clean(Some(CLUSTER), NAME, Some("1"), false))
            .response
            .code,
        0
    );
    assert_eq!(
        t.run(clean(Some(CLUSTER), NAME, Some("1;2;3"), false))
            .response
            .code,
        0
    );
    assert!(
        !t.state.contains_broker_set(NAME),
        "every id cleaned: the set is gone"
    );
    let r = t.run(clean(Some(CLUSTER), "broker12", Some("1;2;3"), true));
    assert_eq!(r.response.code, 2009);
    assert_eq!(
        r.response.remark.as_deref(),
        Some("Broker broker12 is not existed,clean broker data failure.")
    );
    assert_eq!(
        t.run(clean(None, "broker12", Some("1;2;3"), true))
            .response
            .code,
        2009
    );
    let mut t = Tables::new();
    t.mock_meta_data();
    t.alive_ids(&[]);
    assert_eq!(
        t.run(clean(None, NAME, Some("1;2;3"), true)).response.code,
        0
    );
    assert!(!t.state.contains_broker_set(NAME));
}

#[test]
fn applying_ids_keeps_counting_after_cleaning() {
    let mut t = Tables::new();
    t.mock_meta_data();
    t.alive_ids(&[]);
    assert_eq!(
        t.run(LeaderRequest::CleanBrokerData(CleanBrokerData {
            cluster_name: Some(CLUSTER.into()),
            broker_name: Some(NAME.into()),
            broker_controller_ids_to_clean: Some("3".into()),
            is_clean_living_broker: false,
        }))
        .response
        .code,
        0
    );
    // nextAssignBrokerId counts ids ever given: 4, not max(1, 2) + 1.
    t.register("127.0.0.1:9003", 4, None);
}

// ---------------------------------------------------------------------------------------------
// The controller with its log: failover as ControllerManager and DLedgerControllerTest do it

/// Three brokers of broker-a registered, 1 master, SyncStateSet {1,2,3}; broker i
/// heartbeats on connection i with a 10 s timeout.
fn mock_meta_data(node: &mut Node) {
    for i in 1..=3u64 {
        let id = node.register("broker-a", 30910 + i as u16);
        assert_eq!(id, i as i64);
        node.heartbeat(i, "broker-a", id, 10_000, 1, 100 * id);
    }
    assert_eq!(node.self_elect("broker-a", 1), 0);
    assert_eq!(node.self_elect("broker-a", 2), 2011);
    assert_eq!(node.self_elect("broker-a", 3), 2011);
    let (header, _) = node.call(
        1001,
        &[
            ("brokerName", "broker-a"),
            ("masterBrokerId", "1"),
            ("masterEpoch", "1"),
        ],
        b"{\"syncStateSet\":[1,2,3],\"syncStateSetEpoch\":1}",
    );
    assert_eq!(harness::code_of(&header), 0);
    // The first election notified nobody who was not heartbeating yet ... all three were.
    let _ = node.c().take_notifications();
}

fn master(node: &mut Node) -> (Option<i64>, i32, BTreeSet<i64>) {
    let sync = node
        .c()
        .state()
        .sync_state("broker-a")
        .expect("set")
        .clone();
    (
        sync.master_broker_id,
        sync.master_epoch,
        sync.sync_state_set.clone(),
    )
}

fn settle(node: &mut Node) {
    let mut out = Vec::new();
    node.drive_until(&mut out, |_, pending| pending == 0);
    assert!(out.is_empty(), "no client was waiting: {out:?}");
}

#[test]
fn a_master_whose_connection_closes_is_replaced_and_the_others_are_told() {
    let dir = TempDir::new("ctrl-scenario");
    let mut node = Node::open(&dir, &[]);
    mock_meta_data(&mut node);
    let now = node.now;
    let mut out = Vec::new();
    node.c().connection_closed(ConnRef(1), now, &mut out);
    settle(&mut node);
    // 3 has the higher offset (300 > 200) at the same epoch.
    assert_eq!(master(&mut node), (Some(3), 2, [3].into_iter().collect()));
    let mut told: Vec<(String, i32, i64)> = node
        .c()
        .take_notifications()
        .into_iter()
        .map(|n| (n.broker_addr, n.master_epoch, n.master_broker_id))
        .collect();
    told.sort();
    assert_eq!(
        told,
        vec![
            ("127.0.0.1:30912".into(), 2, 3),
            ("127.0.0.1:30913".into(), 2, 3)
        ],
        "only the active members, at their registered addresses"
    );
}

#[test]
fn a_master_that_stops_heartbeating_is_dropped_by_the_scan_honouring_its_own_timeout() {
    let dir = TempDir::new("ctrl-scenario");
    let mut node = Node::open(&dir, &[]);
    mock_meta_data(&mut node);
    node.heartbeat(1, "broker-a", 1, 2_000, 1, 100);
    node.now += 2_001;
    let now = node.now;
    let mut out = Vec::new();
    let closed = node.c().run_scan(Scan::NotActive, now, &mut out);
    assert_eq!(
        closed,
        vec![ConnRef(1)],
        "the expired broker's connection is closed"
    );
    settle(&mut node);
    assert_eq!(master(&mut node).0, Some(3));
}

/// A paced scan judges each set at its own step: a master that heartbeats after the scan
/// started but before its shard is reached stays; one that stays silent is dropped.
#[test]
fn a_paced_scan_judges_each_broker_with_the_heartbeats_of_its_own_step() {
    let dir = TempDir::new("ctrl-scenario");
    let mut node = Node::open(&dir, &[]);
    mock_meta_data(&mut node);
    node.heartbeat(1, "broker-a", 1, 2_000, 1, 100);
    node.now += 2_001;
    let mut out = Vec::new();
    node.c().start_scan(Scan::NotActive);
    node.c().start_scan(Scan::InactiveMaster);
    // The master was expired when the scans started; it heartbeats before their first step.
    node.heartbeat(1, "broker-a", 1, 2_000, 1, 100);
    let mut steps = 0;
    while node.c().scanning() {
        let now = node.now;
        assert!(node.c().scan_step(now, 1, &mut out).is_empty());
        steps += 1;
    }
    assert!(
        steps > 1,
        "a budget of one set goes a shard a step: {steps} steps"
    );
    settle(&mut node);
    assert_eq!(master(&mut node).0, Some(1), "no election");
    // Silent from now on: the next scan drops it, and the set elects another master.
    node.now += 2_001;
    node.c().start_scan(Scan::NotActive);
    let mut closed = Vec::new();
    while node.c().scanning() {
        let now = node.now;
        closed.extend(node.c().scan_step(now, 1, &mut out));
    }
    assert_eq!(closed, vec![ConnRef(1)]);
    settle(&mut node);
    assert_eq!(master(&mut node).0, Some(3));
}

#[test]
fn no_electable_replica_means_three_failed_elections_and_masterepoch_plus_three() {
    let dir = TempDir::new("ctrl-scenario");
    let mut node = Node::open(&dir, &[]);
    mock_meta_data(&mut node);
    let (header, _) = node.call(
        1001,
        &[
            ("brokerName", "broker-a"),
            ("masterBrokerId", "1"),
            ("masterEpoch", "1"),
        ],
        b"{\"syncStateSet\":[1],\"syncStateSetEpoch\":2}",
    );
    assert_eq!(harness::code_of(&header), 0);
    let now = node.now;
    let mut out = Vec::new();
    node.c().connection_closed(ConnRef(1), now, &mut out);
    settle(&mut node);
    // electMasterMaxRetryCount (3) controller-triggered attempts, each recording "no master".
    assert_eq!(master(&mut node), (None, 4, [1].into_iter().collect()));
    assert!(node.c().take_notifications().is_empty());
    // Broker 2 is not in sync: its own election fails; broker 1 comes back and is elected.
    assert_eq!(node.self_elect("broker-a", 2), 2012);
    node.heartbeat(4, "broker-a", 1, 10_000, 1, 100);
    assert_eq!(node.self_elect("broker-a", 1), 0);
    assert_eq!(master(&mut node), (Some(1), 5, [1].into_iter().collect()));
}

#[test]
fn unclean_elections_take_a_replica_outside_the_set() {
    let dir = TempDir::new("ctrl-scenario");
    let mut node = Node::open(&dir, &[("enableElectUncleanMaster", "true")]);
    mock_meta_data(&mut node);
    node.call(
        1001,
        &[
            ("brokerName", "broker-a"),
            ("masterBrokerId", "1"),
            ("masterEpoch", "1"),
        ],
        b"{\"syncStateSet\":[1],\"syncStateSetEpoch\":2}",
    );
    let now = node.now;
    node.c().connection_closed(ConnRef(1), now, &mut Vec::new());
    settle(&mut node);
    let (m, epoch, set) = master(&mut node);
    assert_eq!((m, epoch), (Some(3), 2));
    assert_eq!(set, [3].into_iter().collect());
}

#[test]
fn the_inactive_master_scan_elects_when_a_member_is_still_alive() {
    let dir = TempDir::new("ctrl-scenario");
    let mut node = Node::open(&dir, &[]);
    mock_meta_data(&mut node);
    // 1 stops, 2 and 3 keep heartbeating; no expiry scan has run yet.
    node.now += 9_000;
    node.heartbeat(2, "broker-a", 2, 10_000, 1, 200);
    node.heartbeat(3, "broker-a", 3, 10_000, 1, 300);
    node.now += 1_001;
    let now = node.now;
    node.c()
        .run_scan(Scan::InactiveMaster, now, &mut Vec::new());
    settle(&mut node);
    assert_eq!(master(&mut node).0, Some(3));
    // With every member silent, the scan leaves the set alone.
    node.now += 20_000;
    let before = master(&mut node);
    let now = node.now;
    node.c()
        .run_scan(Scan::InactiveMaster, now, &mut Vec::new());
    settle(&mut node);
    assert_eq!(master(&mut node), before);
}

#[test]
fn notifications_can_be_turned_off_at_runtime() {
    let dir = TempDir::new("ctrl-scenario");
    let mut node = Node::open(&dir, &[]);
    mock_meta_data(&mut node);
    let (header, _) = node.call(1009, &[], b"notifyBrokerRoleChanged=false");
    assert_eq!(harness::code_of(&header), 0);
    let now = node.now;
    node.c().connection_closed(ConnRef(1), now, &mut Vec::new());
    settle(&mut node);
    assert_eq!(master(&mut node).0, Some(3));
    assert!(node.c().take_notifications().is_empty());
}

#[test]
fn a_restart_keeps_the_state_and_answers_as_before() {
    let dir = TempDir::new("ctrl-scenario");
    let mut node = Node::open(&dir, &[]);
    mock_meta_data(&mut node);
    let before = node.c().state().clone();
    let applied = node.c().applied_index();
    node.restart();
    assert_eq!(node.c().state(), &before);
    // Every entry before the restart, then the empty entry a new term starts with.
    assert_eq!(node.c().applied_index(), applied + 1);
    let (header, body) = node.call(1004, &[("brokerName", "broker-a")], b"");
    assert!(
        header.contains(
            "\"masterAddress\":\"127.0.0.1:30911\",\"masterBrokerId\":\"1\",\"masterEpoch\":\"1\""
        ),
        "{header}"
    );
    assert_eq!(body, b"{\"syncStateSet\":[1,2,3],\"syncStateSetEpoch\":2}");
    // Liveness is not persisted: after a restart the master counts as alive only once it
    // heartbeats again, so 1003 leaves it out until then.
    let (header, _) = node.call(
        1003,
        &[
            ("clusterName", "DefaultCluster"),
            ("brokerName", "broker-a"),
            ("brokerId", "2"),
            ("brokerAddress", "127.0.0.1:30912"),
        ],
        b"",
    );
    assert!(!header.contains("masterBrokerId"), "{header}");
}

#[test]
fn process_read_event_puts_reads_through_the_log() {
    let dir = TempDir::new("ctrl-scenario");
    let mut node = Node::open(&dir, &[("processReadEvent", "true")]);
    let before = node.c().applied_index();
    let (header, _) = node.call(1012, &[("clusterName", "c"), ("brokerName", "b")], b"");
    assert_eq!(harness::code_of(&header), 0);
    assert_eq!(
        node.c().applied_index(),
        before + 1,
        "an empty entry went through the log"
    );
}

#[test]
fn one_election_per_broker_set_at_a_time() {
    let dir = TempDir::new("ctrl-scenario");
    let mut node = Node::open(&dir, &[]);
    mock_meta_data(&mut node);
    let now = node.now;
    let mut out = Vec::new();
    // The connection close and the scan both find the dead master before anything is durable.
    node.c().connection_closed(ConnRef(1), now, &mut out);
    node.c().run_scan(Scan::InactiveMaster, now, &mut out);
    assert!(node.c().pending_requests() <= 1);
    settle(&mut node);
    assert_eq!(master(&mut node), (Some(3), 2, [3].into_iter().collect()));
}

/// ControllerManagerTest.testSomeApi: two brokers with 3 s heartbeat timeouts; the first to
/// ask becomes master, the second is told so; when the master falls silent the other one
/// (outside the SyncStateSet, with enableElectUncleanMaster) takes over.
#[test]
fn some_api_the_silent_master_is_replaced_by_the_live_broker() {
    let dir = TempDir::new("ctrl-scenario");
    let mut node = Node::open(
        &dir,
        &[
            ("enableElectUncleanMaster", "true"),
            ("scanNotActiveBrokerInterval", "1000"),
            ("notifyBrokerRoleChanged", "false"),
        ],
    );
    assert_eq!(node.register("broker1", 8000), 1);
    assert_eq!(node.register("broker1", 8001), 2);
    node.heartbeat(1, "broker1", 1, 3_000, 0, 0);
    node.heartbeat(2, "broker1", 2, 3_000, 0, 0);
    let (first, _) = node.call(
        1002,
        &[
            ("clusterName", "DefaultCluster"),
            ("brokerName", "broker1"),
            ("brokerId", "1"),
        ],
        b"",
    );
    let (second, _) = node.call(
        1002,
        &[
            ("clusterName", "DefaultCluster"),
            ("brokerName", "broker1"),
            ("brokerId", "2"),
        ],
        b"",
    );
    let master_fields = "\"masterAddress\":\"127.0.0.1:8000\",\"masterBrokerId\":\"1\",\"masterEpoch\":\"1\",\"syncStateSetEpoch\":\"1\"";
    assert!(
        first.starts_with("{\"code\":0,") && first.contains(master_fields),
        "{first}"
    );
    assert!(
        second.starts_with("{\"code\":2011,") && second.contains(master_fields),
        "{second}"
    );
    // Broker 2 keeps heartbeating every second; broker 1 is silent; the scan runs each second.
    let mut out = Vec::new();
    for _ in 0..4 {
        node.now += 1_000;
        node.heartbeat(2, "broker1", 2, 3_000, 0, 0);
        let now = node.now;
        node.c().run_scan(Scan::NotActive, now, &mut out);
        settle(&mut node);
    }
    let (header, _) = node.call(1004, &[("brokerName", "broker1")], b"");
    assert!(header.contains("\"masterBrokerId\":\"2\""), "{header}");
    assert!(node.c().take_notifications().is_empty());
}

#[test]
fn config_updates_are_answered_in_order_once_their_file_is_fsynced() {
    let dir = TempDir::new("ctrl-scenario");
    let mut node = Node::open(&dir, &[]);
    let bodies: [&[u8]; 3] = [
        b"electMasterMaxRetryCount=5",
        b"electMasterMaxRetryCount=6\nenableElectUncleanMaster=true",
        b"noSuchKey=1",
    ];
    let mut out = Vec::new();
    for (ticket, body) in bodies.iter().enumerate() {
        let cmd = harness::decode(&harness::frame(
            &harness::request_header(1009, ticket as i32, 0, &[]),
            body,
        ));
        let now = node.now;
        node.c()
            .handle_from(ticket as i32, &cmd, Some(ConnRef(1)), None, now, &mut out);
    }
    assert!(
        out.is_empty(),
        "nothing is answered before its file is written"
    );
    node.drive_until(&mut out, |out, _| out.len() == 3);
    let answers: Vec<(i32, i32)> = out.iter().map(|r| (r.ticket, r.response.code)).collect();
    assert_eq!(answers, vec![(0, 0), (1, 0), (2, 1)]);
    let settings = node.c().config().settings().clone();
    assert_eq!(settings.elect_master_max_retry_count, 6);
    assert!(settings.enable_elect_unclean_master);
    let kept = std::fs::read_to_string(node.c().config().config_store_path()).unwrap();
    assert!(
        kept.contains("electMasterMaxRetryCount=6\n")
            && kept.contains("enableElectUncleanMaster=true\n"),
        "{kept}"
    );
    node.restart();
    assert_eq!(node.c().config().settings(), &settings);
}
