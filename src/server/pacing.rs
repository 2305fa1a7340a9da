//! Pacing of the work that removes brokers: unregistration batches and the expiry scan (and
//! its connection closes) a chunk per turn, so that a mass expiry never stalls the loop.

use super::{NameServer, PeerState, SCAN_TIMER, SLOW_WORK_BUDGET};
use crate::event_loop::{ConnId, Ctx};
use crate::processor::UnregisterBatch;
use std::collections::VecDeque;
use std::time::Instant;

/// Unregistrations applied per step of a large batch.
pub(super) const UNREGISTER_CHUNK: usize = 32;

/// Expiry entries examined, and expired brokers' connections closed, per turn.
pub(super) const EXPIRY_CHUNK: usize = 64;

#[derive(Default)]
pub(super) struct ExpiryPacer {
    pub(super) next_scan_ms: u64,
    /// The scan timer fired; a scan starts when the one in progress (if any) is done.
    pub(super) scan_due: bool,
    /// A scan found more due brokers than one turn handles.
    pub(super) in_progress: bool,
    pub(super) conns_to_close: VecDeque<ConnId>,
}

impl NameServer {
    /// None while a registration is applied in steps (an unregistration of its broker would
    /// leave topics behind).
    pub(super) fn apply_unregistrations(&mut self, started: Instant) {
        while let Ok(batch) = self.unregister_batches.try_recv() {
            self.processor.record_unregister_batch(batch.len());
            self.removed_since_trim = true;
            self.unregistrations.extend(batch);
        }
        while !self.unregistrations.is_empty() && !self.processor.topic_steps_pending() {
            let n = self.unregistrations.len().min(UNREGISTER_CHUNK);
            let chunk: UnregisterBatch = self.unregistrations.drain(..n).collect();
            self.processor.apply_unregister_batch(&chunk);
            if started.elapsed() >= SLOW_WORK_BUDGET {
                break;
            }
        }
    }

    pub(super) fn pace_expiry(&mut self, ctx: &mut Ctx<PeerState>) {
        let now = ctx.now_ms();
        let expiry = &mut self.expiry;
        if expiry.scan_due || expiry.in_progress {
            if !expiry.in_progress {
                expiry.scan_due = false;
                expiry.next_scan_ms = now + self.settings.scan_interval_ms;
                ctx.set_timer(SCAN_TIMER, expiry.next_scan_ms);
            }
            let (to_close, more) = self.processor.expire_silent_brokers(now, EXPIRY_CHUNK);
            expiry.in_progress = more;
            expiry
                .conns_to_close
                .extend(to_close.into_iter().filter_map(|index| ctx.conn_at(index)));
        }
        for _ in 0..EXPIRY_CHUNK {
            let Some(conn) = expiry.conns_to_close.pop_front() else {
                break;
            };
            ctx.close(conn, "broker expired");
        }
    }
}
