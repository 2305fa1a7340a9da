//! The elect policy (Java's `DefaultElectPolicy`): who becomes master of a broker set, in
//! docs/controller.md ("Liveness and failover"). Unlike Java, offsets and priorities compare
//! exactly (Java's subtractions overflow) and ties go to the lowest broker id.

use super::liveness::Liveness;
use std::cmp::Ordering;
use std::collections::BTreeSet;

#[derive(Debug, Clone, Copy)]
pub struct ElectInput<'a> {
    pub cluster_name: Option<&'a str>,
    pub broker_name: &'a str,
    pub sync_state_set: &'a BTreeSet<i64>,
    /// Every registered id, when unclean elections are enabled; None otherwise.
    pub all_replicas: Option<&'a BTreeSet<i64>>,
    pub old_master: Option<i64>,
    /// designateElect=true's id.
    pub prefer: Option<i64>,
}

pub fn elect(input: &ElectInput<'_>, liveness: &Liveness, now_ms: u64) -> Option<i64> {
    try_elect(input, input.sync_state_set, liveness, now_ms).or_else(|| {
        input
            .all_replicas
            .and_then(|all| try_elect(input, all, liveness, now_ms))
    })
}

fn try_elect(
    input: &ElectInput<'_>,
    candidates: &BTreeSet<i64>,
    liveness: &Liveness,
    now_ms: u64,
) -> Option<i64> {
    let alive: Vec<i64> = candidates
        .iter()
        .copied()
        .filter(|id| liveness.is_active(input.cluster_name, input.broker_name, *id, now_ms))
        .collect();
    if alive.is_empty() {
        return None;
    }
    if let Some(old) = input.old_master {
        if alive.contains(&old) && input.prefer.map_or(true, |p| p == old) {
            return Some(old);
        }
    }
    if let Some(prefer) = input.prefer {
        return alive.contains(&prefer).then_some(prefer);
    }
    // Best replication progress; `alive` is ascending, so min_by keeps the lowest id on ties.
    alive.into_iter().min_by(|a, b| {
        let la = liveness.get(input.cluster_name, input.broker_name, *a);
        let lb = liveness.get(input.cluster_name, input.broker_name, *b);
        match (la, lb) {
            (Some(la), Some(lb)) => lb
                .epoch
                .cmp(&la.epoch)
                .then(lb.max_offset.cmp(&la.max_offset))
                .then(la.election_priority.cmp(&lb.election_priority)),
            // Unreachable (both passed is_active); keep the order total anyway.
            _ => Ordering::Equal,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::request::Heartbeat;

    const C: Option<&str> = Some("c");

    fn beat(t: &mut Liveness, id: i64, timeout: i64, epoch: i32, offset: i64, priority: i32) {
        t.on_heartbeat(
            &Heartbeat {
                cluster_name: Some("c".into()),
                broker_addr: Some(format!("h:{id}")),
                broker_name: Some("b".into()),
                broker_id: Some(id),
                epoch: Some(epoch),
                max_offset: Some(offset),
                confirm_offset: Some(-1),
                heartbeat_timeout_millis: Some(timeout),
                election_priority: Some(priority),
                store_ready: None,
            },
            None,
            1_000,
        )
        .unwrap();
    }

    fn ids(v: &[i64]) -> BTreeSet<i64> {
        v.iter().copied().collect()
    }

    fn input<'a>(
        set: &'a BTreeSet<i64>,
        all: Option<&'a BTreeSet<i64>>,
        old: Option<i64>,
        prefer: Option<i64>,
    ) -> ElectInput<'a> {
        ElectInput {
            cluster_name: C,
            broker_name: "b",
            sync_state_set: set,
            all_replicas: all,
            old_master: old,
            prefer,
        }
    }

    /// One row of the policy table: (heartbeats (id, timeout, epoch, offset, priority),
    /// sync set, all replicas, old master, preferred id) -> winner. The first five rows are
    /// ReplicasInfoManagerTest's scenarios; the rest cover the rules around them.
    type Row = (
        &'static [(i64, i64, i32, i64, i32)],
        &'static [i64],
        Option<&'static [i64]>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
    );

    const LONG: i64 = 10_000_000_000;
    const DEAD: i64 = -10_000;

    #[test]
    fn the_policy_table() {
        let rows: &[Row] = &[
            // testElectMasterOldMasterStillAlive: the active old master stays.
            (
                &[(1, LONG, 1, 1, 0), (2, LONG, 1, 2, 0), (3, LONG, 1, 3, 0)],
                &[1, 2, 3],
                None,
                Some(1),
                None,
                Some(1),
            ),
            // testElectMasterPreferHigherEpoch: 1 is dead; 2 has epoch 1, 3 epoch 0.
            (
                &[(1, DEAD, 1, 3, 0), (2, LONG, 1, 2, 0), (3, LONG, 0, 3, 0)],
                &[1, 2, 3],
                None,
                Some(1),
                None,
                Some(2),
            ),
            // testElectMasterPreferHigherOffsetWhenEpochEquals.
            (
                &[(1, DEAD, 1, 3, 0), (2, LONG, 1, 2, 0), (3, LONG, 1, 3, 0)],
                &[1, 2, 3],
                None,
                Some(1),
                None,
                Some(3),
            ),
            // testElectMasterPreferHigherPriorityWhenEpochAndOffsetEquals: lower value wins.
            (
                &[(1, DEAD, 1, 3, 3), (2, LONG, 1, 3, 2), (3, LONG, 1, 3, 1)],
                &[1, 2, 3],
                None,
                Some(1),
                None,
                Some(3),
            ),
            // testAllReplicasShutdownAndRestart: only the dead master is in sync.
            (
                &[(1, DEAD, 1, 3, 0), (2, LONG, 1, 2, 0)],
                &[1],
                None,
                Some(1),
                None,
                None,
            ),
            // ... and with enableElectUncleanMaster the other replicas are tried next.
            (
                &[(1, DEAD, 1, 3, 0), (2, LONG, 1, 2, 0)],
                &[1],
                Some(&[1, 2]),
                Some(1),
                None,
                Some(2),
            ),
            // A designated id wins over the active old master ...
            (
                &[(1, LONG, 1, 1, 0), (2, LONG, 1, 1, 0)],
                &[1, 2],
                None,
                Some(1),
                Some(2),
                Some(2),
            ),
            // ... designating the old master keeps it ...
            (
                &[(1, LONG, 1, 1, 0), (2, LONG, 1, 1, 0)],
                &[1, 2],
                None,
                Some(1),
                Some(1),
                Some(1),
            ),
            // ... and an inactive designated id elects nobody (no fallback).
            (
                &[(1, LONG, 1, 1, 0), (2, DEAD, 1, 1, 0)],
                &[1, 2],
                None,
                Some(1),
                Some(2),
                None,
            ),
            // Never heard of: not active.
            (&[], &[1, 2], None, None, None, None),
            // Full ties go to the lowest id.
            (
                &[(5, LONG, 2, 9, 1), (4, LONG, 2, 9, 1), (6, LONG, 2, 9, 1)],
                &[4, 5, 6],
                None,
                None,
                None,
                Some(4),
            ),
            // Offsets 2^31 apart still rank by offset (Java's int cast would flip them).
            (
                &[(1, LONG, 1, 1, 0), (2, LONG, 1, 1 + (1 << 31), 0)],
                &[1, 2],
                None,
                None,
                None,
                Some(2),
            ),
            // Priorities around the extremes compare correctly (Java's subtraction overflows).
            (
                &[(1, LONG, 1, 1, i32::MAX), (2, LONG, 1, 1, -1)],
                &[1, 2],
                None,
                None,
                None,
                Some(2),
            ),
        ];
        for (i, (beats, set, all, old, prefer, winner)) in rows.iter().enumerate() {
            let mut t = Liveness::default();
            for &(id, timeout, epoch, offset, priority) in beats.iter() {
                beat(&mut t, id, timeout, epoch, offset, priority);
            }
            let set = ids(set);
            let all = all.map(ids);
            let got = elect(&input(&set, all.as_ref(), *old, *prefer), &t, 1_000);
            assert_eq!(got, *winner, "row {i}");
        }
    }
}
