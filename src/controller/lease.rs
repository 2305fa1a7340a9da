//! The write lease rocketmq-rust brokers expect in a 904 answer (Java brokers send 904 oneway
//! and never read one): an authority is a set's committed master and its master epoch. Why
//! generations grow across leaders and why a first grant waits `HANDOVER_WAIT_MS`:
//! docs/controller.md, "Liveness and failover".

use super::event::ObjectWriter;
use super::request::Heartbeat;
use super::state::ControllerState;
use std::collections::HashMap;

pub const LEASE_DURATION_MS: u64 = 10_000;
pub const SAFETY_MARGIN_MS: u64 = 2_000;
pub const HANDOVER_WAIT_MS: u64 = LEASE_DURATION_MS + SAFETY_MARGIN_MS;
/// Grants per set and term at most (31 years of one a second): generation = term × this + n.
pub const GRANTS_PER_TERM: u64 = 1_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Authority {
    broker_id: i64,
    master_epoch: i32,
}

fn authority_of(state: &ControllerState, name: &str) -> Option<Authority> {
    let sync = state.sync_state(name)?;
    Some(Authority {
        broker_id: sync.master_broker_id?,
        master_epoch: sync.master_epoch,
    })
}

#[derive(Debug)]
struct Known {
    authority: Authority,
    /// On the caller's clock; before its zero when learnt before this process started.
    since_ms: i64,
}

/// Since when this node has known each set's authority, and the grants of the term.
#[derive(Debug, Default)]
pub struct WriteLeaseGate {
    known: HashMap<String, Known>,
    /// The term `grants` count in.
    term: u64,
    grants: HashMap<String, u64>,
}

impl WriteLeaseGate {
    /// `name`'s authority in the applied state, learnt at `since_ms` if it changed.
    pub fn observe(&mut self, name: &str, state: &ControllerState, since_ms: u64) {
        let Some(authority) = authority_of(state, name) else {
            self.known.remove(name);
            return;
        };
        if self.known.get(name).map(|k| k.authority) != Some(authority) {
            let since_ms = clock(since_ms);
            let known = Known {
                authority,
                since_ms,
            };
            self.known.insert(name.to_owned(), known);
        }
    }

    /// Every set's authority in a recovered `state`.
    pub fn observe_all(&mut self, state: &ControllerState, since_ms: u64) {
        self.known
            .retain(|name, _| authority_of(state, name).is_some());
        for sync in state.sync_states() {
            self.observe(&sync.broker_name, state, since_ms);
        }
    }

    /// Forgets every set's authority (a leader's snapshot replaced the state); returns the
    /// records, to be freed off the loop.
    pub fn forget_all(&mut self) -> impl Send + 'static {
        std::mem::take(&mut self.known)
    }

    /// Moves `name`'s "known since" back to `now_ms - age_ms` (a restart), never forward.
    pub fn backdate(&mut self, name: &str, now_ms: u64, age_ms: u64) {
        if let Some(k) = self.known.get_mut(name) {
            k.since_ms = k.since_ms.min(clock(now_ms).saturating_sub(clock(age_ms)));
        }
    }

    /// The grant body for this heartbeat, if it earns one.
    pub fn grant(
        &mut self,
        hb: &Heartbeat,
        state: &ControllerState,
        term: u64,
        now_ms: u64,
        electing: bool,
    ) -> Option<Vec<u8>> {
        if self.term != term {
            self.term = term;
            self.grants.clear();
        }
        let name = hb.broker_name.as_deref()?;
        let (replica, _) = state.broker_set(name)?;
        let authority = authority_of(state, name)?;
        let eligible = hb.store_ready == Some(true)
            && hb.broker_id == Some(authority.broker_id)
            && hb.epoch == Some(authority.master_epoch)
            && authority.master_epoch > 0
            && hb.cluster_name.as_deref() == replica.cluster_name.as_deref()
            && replica.contains(authority.broker_id);
        // Not yet observed (should not happen: every apply observes): learnt now.
        self.observe(name, state, now_ms);
        let known = self.known.get(name)?;
        let known_for = clock(now_ms).saturating_sub(known.since_ms);
        if !eligible || electing || known_for < clock(HANDOVER_WAIT_MS) {
            return None;
        }
        let count = self.grants.entry(name.to_owned()).or_insert(0);
        if *count + 1 >= GRANTS_PER_TERM {
            log::error!("controller: broker set {name} had {GRANTS_PER_TERM} write leases in term {term}; none more until a new term (restart this node)");
            return None;
        }
        *count += 1;
        let generation = term.checked_mul(GRANTS_PER_TERM)? + *count;
        let mut out = Vec::with_capacity(128);
        let mut w = ObjectWriter::new(&mut out);
        w.int("brokerId", authority.broker_id);
        w.int("generation", i64::try_from(generation).ok()?);
        w.int("leaseDurationMillis", LEASE_DURATION_MS as i64);
        w.int("masterEpoch", i64::from(authority.master_epoch));
        w.int("safetyMarginMillis", SAFETY_MARGIN_MS as i64);
        w.finish();
        Some(out)
    }
}

fn clock(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::event::Event;

    fn state_with_master(master: i64, elections: usize) -> ControllerState {
        let mut state = ControllerState::default();
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

    fn generation(body: Option<Vec<u8>>) -> u64 {
        let text = String::from_utf8(body.expect("a grant")).unwrap();
        let digits: String = text
            .split("\"generation\":")
            .nth(1)
            .unwrap()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().unwrap()
    }

    #[test]
    fn only_the_committed_master_gets_a_lease_and_only_after_the_handover_wait() {
        let state = state_with_master(1, 1);
        let mut gate = WriteLeaseGate::default();
        gate.observe("b", &state, 0);
        assert_eq!(gate.grant(&hb(1, 1, true), &state, 1, 0, false), None);
        assert_eq!(
            gate.grant(&hb(1, 1, true), &state, 1, HANDOVER_WAIT_MS - 1, false),
            None
        );
        let body = gate
            .grant(&hb(1, 1, true), &state, 1, HANDOVER_WAIT_MS, false)
            .unwrap();
        assert_eq!(
            String::from_utf8(body).unwrap(),
            "{\"brokerId\":1,\"generation\":1000000001,\"leaseDurationMillis\":10000,\"masterEpoch\":1,\"safetyMarginMillis\":2000}"
        );
        let again = gate.grant(&hb(1, 1, true), &state, 1, HANDOVER_WAIT_MS + 1000, false);
        assert_eq!(generation(again), 1_000_000_002);
        // Not the master, a stale epoch, a store that is not ready, or an election in flight.
        assert_eq!(gate.grant(&hb(2, 1, true), &state, 1, 20_000, false), None);
        assert_eq!(gate.grant(&hb(1, 0, true), &state, 1, 20_000, false), None);
        assert_eq!(gate.grant(&hb(1, 1, false), &state, 1, 20_000, false), None);
        assert_eq!(gate.grant(&hb(1, 1, true), &state, 1, 20_000, true), None);
    }

    #[test]
    fn a_new_master_waits_and_a_new_term_counts_above_the_old_one() {
        let mut gate = WriteLeaseGate::default();
        let first = state_with_master(1, 1);
        gate.observe("b", &first, 0);
        let g1 = generation(gate.grant(&hb(1, 1, true), &first, 7, 12_000, false));
        // A new master: the wait starts when this node learns it.
        let second = state_with_master(2, 2);
        gate.observe("b", &second, 12_000);
        assert!(gate
            .grant(&hb(2, 2, true), &second, 7, 23_999, false)
            .is_none());
        let g2 = generation(gate.grant(&hb(2, 2, true), &second, 7, 24_000, false));
        // A new leader (term 8) that knew the authority long enough grants at once, above
        // every generation of term 7.
        let g3 = generation(gate.grant(&hb(2, 2, true), &second, 8, 24_001, false));
        assert!(g1 < g2 && g2 < g3, "{g1} {g2} {g3}");
        assert_eq!(g3, 8 * GRANTS_PER_TERM + 1);
    }

    #[test]
    fn a_restart_counts_a_known_authority_from_its_stamp() {
        let state = state_with_master(1, 1);
        let mut gate = WriteLeaseGate::default();
        gate.observe("b", &state, 50_000);
        gate.backdate("b", 50_000, 20_000);
        assert!(gate
            .grant(&hb(1, 1, true), &state, 2, 42_000, false)
            .is_some());
        // Never forward.
        gate.backdate("b", 50_000, 0);
        assert!(gate
            .grant(&hb(1, 1, true), &state, 2, 42_001, false)
            .is_some());
        // A process whose clock starts at 0: learnt 30 s before it started.
        let mut gate = WriteLeaseGate::default();
        gate.observe("b", &state, 0);
        gate.backdate("b", 0, 30_000);
        assert!(gate.grant(&hb(1, 1, true), &state, 3, 100, false).is_some());
    }
}
