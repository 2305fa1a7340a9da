//! Pacing of the work that removes brokers: the expiry scan, queued unregistrations and the
//! closing of expired brokers' connections share a budget of steps per turn, so that a mass
//! expiry never stalls the loop; the heap they free goes back to the OS every few turns of
//! such work, a little at a time, rather than all at once after it.

use super::{release_free_heap, NameServer, PeerState, SCAN_TIMER};
use crate::event_loop::{ConnId, Ctx};
use std::collections::VecDeque;

/// Removal work per turn, in steps of about a microsecond of loop time: a topic queue entry
/// dropped or an expiry entry scanned is one, a broker removed
/// [`crate::route::table::BROKER_STEPS`], a connection closed [`CLOSE_STEPS`]. Thread CPU time
/// of a release build during `rmq-bench expire` on a two-core host: a scan entry 0.85-1.6 µs,
/// a close 8-36 µs (by run; on loopback the close also runs the peer's side of the FIN), 32
/// brokers removed 0.47 ms with 10 topics each and 0.78 ms with 100. So a turn's removal work
/// stays within a millisecond whatever the mix.
pub(super) const REMOVAL_STEPS_PER_TURN: usize = 512;

/// Steps a connection close counts (see [`REMOVAL_STEPS_PER_TURN`]): 32 closes in one turn
/// took 0.8-1.2 ms of the loop thread's CPU (2.5 ms of wall time) on 2026-12-03.
const CLOSE_STEPS: usize = 32;

/// Removal steps after which freed heap is handed back to the OS (`malloc_trim`, whose cost is
/// mostly the pages it drops). Once after the removals, 10,000 expired brokers' 40 MB took
/// 2.1-3.3 ms of one turn's CPU; every this many steps, at most 0.5-0.95 ms (about 260 trims,
/// 22-27 ms in all, the same RSS after). Measured with `rmq-bench expire` against a build
/// timing each trim (thread CPU time).
const TRIM_EVERY_STEPS: usize = 4 * REMOVAL_STEPS_PER_TURN;

#[derive(Default)]
pub(super) struct ExpiryPacer {
    pub(super) next_scan_ms: u64,
    /// The scan timer fired; a scan starts when the one in progress (if any) is done.
    pub(super) scan_due: bool,
    /// A scan found more due brokers than one turn handles.
    pub(super) in_progress: bool,
    pub(super) conns_to_close: VecDeque<ConnId>,
    steps_since_trim: usize,
}

impl NameServer {
    /// A part of the expiry scan first (finite work: unregistrations cannot starve it), then
    /// queued unregistrations, then closes, while the turn's steps last.
    pub(super) fn pace_removals(&mut self, ctx: &mut Ctx<PeerState>) {
        let (budget, mut steps, now) = (REMOVAL_STEPS_PER_TURN, 0, ctx.now_ms());
        let expiry = &mut self.expiry;
        if expiry.scan_due || expiry.in_progress {
            if !expiry.in_progress {
                expiry.scan_due = false;
                expiry.next_scan_ms = now + self.settings.scan_interval_ms;
                ctx.set_timer(SCAN_TIMER, expiry.next_scan_ms);
            }
            let (to_close, examined, more) = self.processor.expire_silent_brokers(now, budget);
            steps += examined;
            expiry.in_progress = more;
            expiry
                .conns_to_close
                .extend(to_close.into_iter().filter_map(|index| ctx.conn_at(index)));
        }
        while let Ok(batch) = self.unregister_batches.try_recv() {
            self.processor.record_unregister_batch(batch.len());
            self.removed_since_trim = true;
            if self.unregistrations.is_empty() {
                self.unregistrations = batch.into(); // no copy of a mass expiry's batch
            } else {
                self.unregistrations.extend(batch);
            }
        }
        let left = budget - steps;
        steps += (self.processor).apply_unregistrations(&mut self.unregistrations, left, now);
        while steps + CLOSE_STEPS <= budget {
            let Some(conn) = self.expiry.conns_to_close.pop_front() else {
                break;
            };
            ctx.close(conn, "broker expired");
            steps += CLOSE_STEPS;
        }
        self.processor.record_removal_turn(steps);
        self.expiry.steps_since_trim += steps;
        if self.expiry.steps_since_trim >= TRIM_EVERY_STEPS {
            self.expiry.steps_since_trim = 0;
            release_free_heap();
        }
    }
}
