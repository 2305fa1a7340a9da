//! Controller failover that rocketmq-rust 1.0 brokers can rely on, with stand-in brokers that
//! heartbeat and hold write leases as theirs do (tests/controller_net): a master that keeps
//! its role is never fenced, and holds a new lease within one lease interval, after the
//! controller leader is killed (three real processes) or a single-node controller restarts;
//! a killed group member restarts and catches up; a group member's stop does not wait for
//! peers it can no longer hear.
#![cfg(feature = "controller")]

#[path = "common/child.rs"]
mod child;
mod common;
mod controller_net;
#[path = "controller_net/group.rs"]
mod group;

use common::{server_read_all, wait_until, RawCalls};
use controller_net::{BrokerOptions, ControllerServer, Endpoints, StandInBroker};
use group::ProcessGroup;
use rmq_namesrv::client::Client;
use std::time::{Duration, Instant};

/// The grant's `leaseDurationMillis`: a master fenced by a leader change or restart must take
/// writes again within this of the controller serving again.
const LEASE_INTERVAL: Duration = Duration::from_millis(10_000);
/// The first grant to a new master waits out lease + margin (12 s) after its election.
const FIRST_GRANT: Duration = Duration::from_secs(30);

/// Master `a` and slave `b` of broker-a, rocketmq-rust style; returns once `a` takes writes.
fn master_with_a_lease(at: &Endpoints) -> (StandInBroker, StandInBroker) {
    let a = StandInBroker::start_with(at, "broker-a", BrokerOptions::rocketmq_rust());
    let b = StandInBroker::start_with(at, "broker-a", BrokerOptions::rocketmq_rust());
    assert!(a.role().is_master(), "{:?}", a.role());
    assert!(
        wait_until(FIRST_GRANT, || a.can_write()),
        "no lease for the master: refused {:?}",
        a.refused_grants()
    );
    (a, b)
}

/// Waits for a grant above `generation`; how long after `since` it was taken.
fn next_grant_after(a: &StandInBroker, generation: i64, since: Instant) -> Option<Duration> {
    wait_until(LEASE_INTERVAL, || a.accepted_after(generation).is_some());
    a.accepted_after(generation)
        .map(|at| at.saturating_duration_since(since))
}

#[test]
fn a_single_node_restart_leaves_the_master_writing_within_one_lease_interval() {
    let port = group::free_ports(1)[0];
    let peers = format!("n0-127.0.0.1:{port}");
    let server = ControllerServer::start(&[("controllerDLegerPeers", &peers)]);
    let (a, b) = master_with_a_lease(&server.endpoints());
    let (before, role) = (a.lease_generation(), a.role());
    let stopped = Instant::now();
    let dir = server.stop();
    let server = ControllerServer::start_in(dir, &[("controllerDLegerPeers", &peers)]);
    // A single node serves as soon as it is open.
    let serving = Instant::now();
    let took = next_grant_after(&a, before, serving).unwrap_or_else(|| {
        panic!(
            "no new grant within {LEASE_INTERVAL:?} of the restart; refused {:?}",
            a.refused_grants()
        )
    });
    eprintln!("single node restarted: the master's next lease {took:?} after it served");
    assert!(a.can_write());
    assert_eq!(
        a.fenced_after(stopped),
        0,
        "an answer without a lease fenced the master"
    );
    assert_eq!(a.role(), role, "the master kept its role");
    assert!(!b.role().is_master());
    assert!(a.refused_grants().is_empty(), "{:?}", a.refused_grants());
    assert!(a.lease_generation() > before);
    drop(server);
}

#[test]
fn a_leader_only_kill_leaves_the_master_writing_and_the_killed_node_catches_up() {
    let mut group = ProcessGroup::start("");
    let leader = group
        .wait_for_leader(Duration::from_secs(30))
        .expect("a leader");
    // The brokers register with a name server that survives.
    let survivor = (leader + 1) % group::NODES;
    let at = Endpoints {
        namesrv: group.members[survivor].namesrv.clone(),
        controllers: group.controllers(),
    };
    let (a, b) = master_with_a_lease(&at);
    let (before, role) = (a.lease_generation(), a.role());
    let killed = Instant::now();
    group.kill9(leader);
    let new_leader = group
        .wait_for_leader(Duration::from_secs(30))
        .expect("a new leader");
    let serving = Instant::now();
    assert_ne!(new_leader, leader);
    let took = next_grant_after(&a, before, serving).unwrap_or_else(|| {
        panic!(
            "no grant from the new leader within {LEASE_INTERVAL:?}; refused {:?}",
            a.refused_grants()
        )
    });
    eprintln!("leader killed: the master's next lease {took:?} after the new leader served");
    assert!(a.can_write());
    assert_eq!(
        a.fenced_after(killed),
        0,
        "an answer without a lease fenced the master"
    );
    assert_eq!(a.role(), role, "the master kept its role");
    assert!(!b.role().is_master());
    assert!(a.refused_grants().is_empty(), "{:?}", a.refused_grants());

    // The killed node comes back and catches up: every member applied the same entries.
    let restarted = Instant::now();
    group.restart(leader);
    let applied = |i: usize| -> Option<String> {
        group.members[i]
            .metadata()
            .and_then(|m| m.ext("raftApplied").map(str::to_owned))
    };
    let caught_up = wait_until(Duration::from_secs(30), || {
        let all: Vec<Option<String>> = (0..group::NODES).map(applied).collect();
        all.iter().all(|a| a.is_some()) && all.windows(2).all(|w| w[0] == w[1])
    });
    assert!(
        caught_up,
        "members at {:?}",
        (0..group::NODES).map(applied).collect::<Vec<_>>()
    );
    eprintln!(
        "killed node restarted and caught up in {:?}",
        restarted.elapsed()
    );
}

#[test]
fn a_group_member_stops_without_waiting_for_peers_it_cannot_hear() {
    let mut group = ProcessGroup::start("");
    let leader = group
        .wait_for_leader(Duration::from_secs(30))
        .expect("a leader");
    for i in (0..group::NODES).filter(|&i| i != leader) {
        group.kill9(i);
    }
    // A write that cannot commit any more (its peers are gone)...
    let mut c = Client::connect(&group.members[leader].controller, Duration::from_secs(10))
        .expect("connect");
    let opaque = c
        .send_request(
            1013,
            &[
                ("clusterName", "c"),
                ("brokerName", "stuck"),
                ("appliedBrokerId", "1"),
                ("registerCheckCode", "127.0.0.1:1;1"),
            ],
            b"",
        )
        .expect("send");
    // The request must have reached the server (not only its socket) before the stop,
    // else the stop's close resets the connection over the unread bytes.
    assert!(
        wait_until(Duration::from_secs(10), || server_read_all(&c)),
        "the leader did not read the request"
    );
    // ...then a stop: it is answered, and the stop does not wait out the drain's 3 s.
    let took = group.terminate(leader);
    let answer = c.read_response(opaque).expect("an answer before the stop");
    assert_ne!(answer.code, 0, "{:?}", answer.remark);
    assert!(took < Duration::from_secs(2), "the stop took {took:?}");
    let log = group.members[leader].log();
    assert!(
        !log.contains("before the drain finished"),
        "{}",
        log.lines()
            .filter(|l| l.contains("drain"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
