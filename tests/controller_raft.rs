//! Three real `rmq-namesrv` processes as one controller group on loopback: the group elects a
//! leader, followers answer 2007 and name the leader in 1005, a stream of writes (1013 broker
//! ids and 1002 elections) goes to whoever leads, the leader is killed with SIGKILL in the
//! middle of it and restarted; every acknowledged change is on the survivors' new leader, the
//! group serves again (the time it took is printed), and the restarted node catches up.
#![cfg(feature = "controller")]

#[path = "common/child.rs"]
mod child;
mod common;
#[path = "controller_net/group.rs"]
mod group;

use common::wait_until;
use group::{ProcessGroup as Group, NODES};
use rmq_namesrv::client::Client;
use rmq_namesrv::remoting::command::RemotingCommand;
use std::time::{Duration, Instant};

/// One write, sent to whoever serves; Some(answer) once a node answered it (None: the
/// group had no serving leader for 20 s).
fn write(group: &Group, code: i32, ext: &[(&str, &str)]) -> Option<RemotingCommand> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let Some(leader) =
            group.wait_for_leader(deadline.saturating_duration_since(Instant::now()))
        else {
            break;
        };
        let Ok(mut c) = Client::connect(&group.members[leader].controller, Duration::from_secs(6))
        else {
            continue;
        };
        match c.request(code, ext, b"") {
            // 2007: leadership moved between the 1005 and the write; SYSTEM_ERROR (1): lost
            // leadership with the write in flight. Either way: not acknowledged, try again.
            Ok(r) if r.code == 2007 || r.code == 1 => continue,
            Ok(r) => return Some(r),
            Err(_) => continue,
        }
    }
    None
}

fn apply_id(group: &Group, set: &str) -> bool {
    write(
        group,
        1013,
        &[
            ("clusterName", "c"),
            ("brokerName", set),
            ("appliedBrokerId", "1"),
            ("registerCheckCode", "127.0.0.1:30911;1"),
        ],
    )
    .is_some_and(|r| r.code == 0)
}

fn elect(group: &Group, set: &str) -> Option<i32> {
    let r = write(
        group,
        1002,
        &[
            ("clusterName", "c"),
            ("brokerName", set),
            ("brokerId", "1"),
            ("designateElect", "false"),
        ],
    )?;
    (r.code == 0).then(|| r.ext("masterEpoch").and_then(|e| e.parse().ok()))?
}

#[test]
fn the_group_survives_sigkill_of_its_leader_with_every_acknowledged_change() {
    let mut group = Group::start("controllerSnapshotEvents=25");
    let first = group
        .wait_for_leader(Duration::from_secs(20))
        .expect("a leader within 20 s");
    // Followers: 2007 for leader-only codes, 1005 names the leader.
    let follower = (first + 1) % NODES;
    let mut c =
        Client::connect(&group.members[follower].controller, Duration::from_secs(5)).unwrap();
    let r = c
        .request(1012, &[("clusterName", "c"), ("brokerName", "x")], b"")
        .unwrap();
    assert_eq!(r.code, 2007);
    let meta = group.members[follower].metadata().unwrap();
    assert_eq!(
        meta.ext("controllerLeaderId"),
        Some(format!("n{first}").as_str())
    );
    assert_eq!(meta.ext("isLeader"), Some("false"));

    let mut acked_sets = Vec::new();
    let mut acked_masters = Vec::new();
    let mut killed_at = None;
    for k in 0..120 {
        let set = format!("set-{k}");
        if apply_id(&group, &set) {
            acked_sets.push(set.clone());
            if let Some(epoch) = elect(&group, &set) {
                acked_masters.push((set, epoch));
            }
        }
        if k == 40 {
            // kill -9 the leader in the middle of the stream.
            let leader = group.serving_leader().expect("a leader");
            group.kill9(leader);
            killed_at = Some((leader, Instant::now()));
            let next = group
                .wait_for_leader(Duration::from_secs(20))
                .expect("the survivors elect a leader");
            let took = killed_at.unwrap().1.elapsed();
            eprintln!("leader n{leader} killed; n{next} serves after {took:?}");
            assert_ne!(next, leader);
        }
        if k == 80 {
            let (old, _) = killed_at.unwrap();
            group.restart(old);
        }
    }
    assert!(acked_sets.len() > 100, "{} acknowledged", acked_sets.len());
    // Every acknowledged change is on the serving leader (a survivor or the restarted node,
    // which can lead only with every committed entry).
    let leader = group.wait_for_leader(Duration::from_secs(20)).unwrap();
    let mut c = Client::connect(&group.members[leader].controller, Duration::from_secs(5)).unwrap();
    for set in &acked_sets {
        let r = c
            .request(1012, &[("clusterName", "c"), ("brokerName", set)], b"")
            .unwrap();
        assert_eq!(
            r.ext("nextBrokerId"),
            Some("2"),
            "{set} acknowledged, then lost"
        );
    }
    for (set, epoch) in &acked_masters {
        let r = c.request(1004, &[("brokerName", set)], b"").unwrap();
        let now: i32 = r
            .ext("masterEpoch")
            .and_then(|e| e.parse().ok())
            .unwrap_or(0);
        assert!(
            now >= *epoch,
            "{set}: acknowledged epoch {epoch}, now {now}"
        );
    }
    // The restarted node catches up: every node applies up to the same index.
    assert!(
        wait_until(Duration::from_secs(20), || {
            let applied: Vec<Option<String>> = group
                .members
                .iter()
                .map(|n| {
                    n.metadata()
                        .and_then(|m| m.ext("raftApplied").map(str::to_owned))
                })
                .collect();
            applied.iter().all(Option::is_some) && applied.windows(2).all(|w| w[0] == w[1])
        }),
        "the restarted node caught up"
    );
}
