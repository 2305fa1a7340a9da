//! The write lease rocketmq-rust brokers expect in a 904 answer (not part of Java's
//! contract: Java brokers send 904 oneway and never read an answer).
//!
//! A rocketmq-rust 1.0 master fences its own writes unless a heartbeat answer carries
//! `{"brokerId":..,"generation":..,"leaseDurationMillis":10000,"masterEpoch":..,"safetyMarginMillis":2000}`
//! for its current authority (its broker id and master epoch). A grant is given only to the
//! committed master of its set, when it reports `storeReady=true` and the master epoch as its
//! own epoch; and only after the same leader has seen the same authority for lease + margin
//! (12 s), so a lease the previous master may still hold has run out before a new one starts.
//! `generation` counts grants per broker set.

use super::event::ObjectWriter;
use super::request::Heartbeat;
use super::state::ControllerState;
use std::collections::HashMap;

pub const LEASE_DURATION_MS: u64 = 10_000;
pub const SAFETY_MARGIN_MS: u64 = 2_000;
/// How long an authority must be stable under one leader before its first grant.
pub const HANDOVER_WAIT_MS: u64 = LEASE_DURATION_MS + SAFETY_MARGIN_MS;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Authority {
    broker_id: i64,
    master_epoch: i32,
}

#[derive(Debug)]
struct SetGate {
    authority: Authority,
    since_ms: u64,
    generation: u64,
}

/// Per leader term: since when each broker set has had its current authority.
#[derive(Debug, Default)]
pub struct WriteLeaseGate {
    term: Option<u64>,
    leader_since_ms: u64,
    sets: HashMap<String, SetGate>,
}

impl WriteLeaseGate {
    pub fn new() -> Self {
        WriteLeaseGate::default()
    }

    /// This node stopped being leader: every wait starts over.
    pub fn reset(&mut self) {
        *self = WriteLeaseGate::default();
    }

    /// The grant body for this heartbeat, if it earns one. `term` identifies the leader's
    /// reign (the Raft term).
    pub fn grant(
        &mut self,
        hb: &Heartbeat,
        state: &ControllerState,
        term: u64,
        now_ms: u64,
    ) -> Option<Vec<u8>> {
        if self.term != Some(term) {
            self.term = Some(term);
            self.leader_since_ms = now_ms;
            self.sets.clear();
        }
        let name = hb.broker_name.as_deref()?;
        let (replica, sync) = state.broker_set(name)?;
        let master = sync.master_broker_id()?;
        let authority = Authority {
            broker_id: master,
            master_epoch: sync.master_epoch(),
        };
        if !self.sets.contains_key(name) {
            self.sets.insert(
                name.to_owned(),
                SetGate {
                    authority,
                    since_ms: now_ms,
                    generation: 0,
                },
            );
        }
        let gate = self.sets.get_mut(name)?;
        if gate.authority != authority {
            gate.authority = authority;
            gate.since_ms = now_ms;
        }
        let eligible = hb.store_ready == Some(true)
            && hb.broker_id == Some(master)
            && hb.epoch == Some(authority.master_epoch)
            && authority.master_epoch > 0
            && hb.cluster_name.as_deref() == replica.cluster_name()
            && replica.contains(master);
        let waited = now_ms.saturating_sub(self.leader_since_ms) >= HANDOVER_WAIT_MS
            && now_ms.saturating_sub(gate.since_ms) >= HANDOVER_WAIT_MS;
        if !eligible || !waited {
            return None;
        }
        gate.generation += 1;
        let mut out = Vec::with_capacity(128);
        let mut w = ObjectWriter::new(&mut out);
        w.int("brokerId", authority.broker_id);
        w.int("generation", gate.generation as i64);
        w.int("leaseDurationMillis", LEASE_DURATION_MS as i64);
        w.int("masterEpoch", i64::from(authority.master_epoch));
        w.int("safetyMarginMillis", SAFETY_MARGIN_MS as i64);
        w.finish();
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::event::Event;

    fn state_with_master(master: i64, elections: usize) -> ControllerState {
        let mut state = ControllerState::new();
        for id in [1, 2] {
            state.apply(&Event::ApplyBrokerId {
                cluster_name: Some("c".into()),
                broker_name: "b".into(),
                broker_address: format!("h:{id}"),
                new_broker_id: id,
                register_check_code: format!("h:{id};0"),
            });
        }
        for _ in 0..elections {
            state.apply(&Event::ElectMaster {
                broker_name: "b".into(),
                new_master_elected: true,
                new_master_broker_id: Some(master),
            });
        }
        state
    }

    fn hb(id: i64, epoch: i32, ready: bool) -> Heartbeat {
        Heartbeat {
            cluster_name: Some("c".into()),
            broker_name: Some("b".into()),
            broker_id: Some(id),
            epoch: Some(epoch),
            store_ready: Some(ready),
            ..Heartbeat::default()
        }
    }

    #[test]
    fn only_the_committed_master_gets_a_lease_and_only_after_the_handover_wait() {
        let state = state_with_master(1, 1);
        let mut gate = WriteLeaseGate::new();
        assert_eq!(gate.grant(&hb(1, 1, true), &state, 1, 0), None);
        assert_eq!(
            gate.grant(&hb(1, 1, true), &state, 1, HANDOVER_WAIT_MS - 1),
            None
        );
        let body = gate
            .grant(&hb(1, 1, true), &state, 1, HANDOVER_WAIT_MS)
            .unwrap();
        assert_eq!(
            String::from_utf8(body).unwrap(),
            "{\"brokerId\":1,\"generation\":1,\"leaseDurationMillis\":10000,\"masterEpoch\":1,\"safetyMarginMillis\":2000}"
        );
        let again = gate
            .grant(&hb(1, 1, true), &state, 1, HANDOVER_WAIT_MS + 1000)
            .unwrap();
        assert!(String::from_utf8(again)
            .unwrap()
            .contains("\"generation\":2"));
        // Not the master, a stale epoch, or a store that is not ready: nothing.
        assert_eq!(gate.grant(&hb(2, 1, true), &state, 1, 20_000), None);
        assert_eq!(gate.grant(&hb(1, 0, true), &state, 1, 20_000), None);
        assert_eq!(gate.grant(&hb(1, 1, false), &state, 1, 20_000), None);
    }

    #[test]
    fn a_new_master_or_a_new_leader_restarts_the_wait() {
        let mut gate = WriteLeaseGate::new();
        let first = state_with_master(1, 1);
        assert!(gate.grant(&hb(1, 1, true), &first, 1, 0).is_none());
        assert!(gate.grant(&hb(1, 1, true), &first, 1, 12_000).is_some());
        let second = state_with_master(2, 2);
        assert!(gate.grant(&hb(2, 2, true), &second, 1, 12_000).is_none());
        assert!(gate.grant(&hb(2, 2, true), &second, 1, 23_999).is_none());
        assert!(gate.grant(&hb(2, 2, true), &second, 1, 24_000).is_some());
        assert!(
            gate.grant(&hb(2, 2, true), &second, 2, 24_000).is_none(),
            "new term"
        );
    }
}
