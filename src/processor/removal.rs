//! Brokers leaving: unregistration batches and the NOTIFY_MIN_BROKER_ID_CHANGE frames.

use super::{Processor, UnregisterBatch, Unregistration};
use crate::event_loop::oneway::Oneway;
use crate::remoting::codes::{version::CURRENT, FLAG_ONEWAY};
use crate::remoting::command::SerializeType;
use crate::route::table::{BatchOutcome, ConnId, MinIdNotification, RemovalReason};
use crossbeam_channel::TrySendError;
use log::{warn, Level};
use std::collections::VecDeque;

impl Processor {
    pub(super) fn send_notification(&mut self, n: MinIdNotification) {
        let message = Oneway {
            what: "NOTIFY_MIN_BROKER_ID_CHANGE",
            frame: n
                .encode()
                .frame(SerializeType::Json, "JAVA", CURRENT, 0, FLAG_ONEWAY),
            targets: n.targets,
        };
        if let Err(e) = self.outbox.notifications.try_send(message) {
            warn!("NOTIFY_MIN_BROKER_ID_CHANGE dropped: sender queue {e}");
        }
    }

    /// Queues unregistrations for the batching thread (a move, whatever their number); when
    /// its queue is full (logged), hands them back.
    pub fn submit_unregistrations(
        &mut self,
        batch: UnregisterBatch,
    ) -> Result<(), UnregisterBatch> {
        if batch.is_empty() {
            return Ok(());
        }
        match self.outbox.unregistrations.try_send(batch) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(b)) => {
                self.stats.unregister_queue_full += 1;
                warn!(
                    "unregistration queue full (unRegisterBrokerQueueCapacity {}): {} request(s) not queued",
                    self.config.un_register_broker_queue_capacity,
                    b.len()
                );
                Err(b)
            }
            Err(TrySendError::Disconnected(b)) => {
                warn!("unregistration worker unavailable: its thread has ended");
                Err(b)
            }
        }
    }

    /// A step of the expiry scan: the connections to close (at its end, when the
    /// unregistrations are queued as one batch), the entries examined, whether it goes on.
    /// The first few expiries of an interval are logged one by one, the others counted.
    pub fn expire_silent_brokers(
        &mut self,
        now_ms: u64,
        limit: usize,
    ) -> (Vec<ConnId>, usize, bool) {
        let (expired, examined, more) = self.table.expire_silent_brokers(now_ms, limit);
        for e in expired {
            let r = &e.request;
            let name = || format!("{}@{} ({})", r.broker_name, r.broker_addr, r.cluster);
            if self.stats.expired_brokers.admit_named(now_ms, name) {
                warn!("broker expired: {} silent for {} ms", name(), e.silent_ms);
            }
            self.expired_conns_this_scan.extend(e.conn);
            let reason = RemovalReason::Expired {
                silent_ms: e.silent_ms,
            };
            self.expired_this_scan.push((e.request, reason));
            self.stats.expiries += 1;
        }
        if more {
            return (Vec::new(), examined, true);
        }
        let mut conns = std::mem::take(&mut self.expired_conns_this_scan);
        let batch = std::mem::take(&mut self.expired_this_scan);
        if let Err(batch) = self.submit_unregistrations(batch) {
            for (r, _) in batch {
                self.table.rearm(&r.cluster, &r.broker_addr, now_ms);
            }
        }
        conns.sort_unstable();
        conns.dedup();
        (conns, examined, more)
    }

    pub fn connection_closed(&mut self, conn: ConnId) {
        let requests = self.table.connection_closed(conn);
        if requests.is_empty() {
            return;
        }
        let batch = requests
            .into_iter()
            .map(|r| (r, RemovalReason::ConnectionClosed))
            .collect();
        // Not queued (logged): the brokers stay until they expire.
        let _ = self.submit_unregistrations(batch);
    }

    pub fn record_unregister_batch(&mut self, len: usize) {
        self.stats.unregister_batches += 1;
        self.stats.largest_batch = self.stats.largest_batch.max(len);
    }

    /// Applies queued unregistrations in order within `max_steps` of work (as
    /// [`RouteTable::unregister_step`] weighs it); returns the steps taken. None while a
    /// registration is applied in steps; while a group's topics are dropped in steps, route
    /// writers wait ([`Processor::topic_steps_pending`]).
    pub fn apply_unregistrations(
        &mut self,
        queue: &mut VecDeque<Unregistration>,
        max_steps: usize,
        now_ms: u64,
    ) -> usize {
        if !self.topic_steps.is_empty() {
            return 0;
        }
        let mut outcome = BatchOutcome::default();
        let mut applied = 0;
        self.removal_in_steps = false;
        for (req, _) in queue.iter() {
            let before = outcome.steps;
            let left = max_steps.saturating_sub(before);
            if !self.table.unregister_step(req, left, &mut outcome) {
                self.removal_in_steps = outcome.steps > before;
                break;
            }
            applied += 1;
        }
        if outcome.steps == 0 {
            return 0;
        }
        self.table.finish_unregistrations(&mut outcome);
        let batch: Vec<Unregistration> = queue.drain(..applied).collect();
        self.stats.unregistrations += applied as u64;
        let named = self.log_removals(&batch, now_ms);
        if applied > 0 && (outcome.topics_removed > 0 || outcome.broker_groups_removed > 0) {
            let level = if named { Level::Info } else { Level::Debug };
            log::log!(
                level,
                "unregistration batch of {applied}: {} broker group(s) and {} topic(s) removed",
                outcome.broker_groups_removed,
                outcome.topics_removed
            );
        }
        for n in std::mem::take(&mut outcome.notifications) {
            self.send_notification(n);
        }
        outcome.steps
    }

    /// The first removals of an interval get a line at info each, the rest one at debug (the
    /// route-change summary counts them): a mass expiry must not write thousands of lines on
    /// the loop. True when one of these got its own line.
    fn log_removals(&mut self, batch: &[Unregistration], now_ms: u64) -> bool {
        let mut named = false;
        for (r, reason) in batch {
            let own_line = self.stats.changes.removed_broker(now_ms);
            named |= own_line;
            let level = if own_line { Level::Info } else { Level::Debug };
            if log::log_enabled!(level) {
                let why = match reason {
                    RemovalReason::Unregister => "unregistered".to_string(),
                    RemovalReason::Expired { silent_ms } => format!("expired after {silent_ms} ms"),
                    RemovalReason::ConnectionClosed => "connection closed".to_string(),
                };
                log::log!(
                    level,
                    "broker removed: {}@{} id {} cluster {} ({why})",
                    r.broker_name,
                    r.broker_addr,
                    r.broker_id,
                    r.cluster
                );
            }
        }
        named
    }

    /// The most removal work (see [`RouteTable::unregister_step`]) one loop turn did.
    pub fn record_removal_turn(&mut self, steps: usize) {
        self.stats.max_removal_steps = self.stats.max_removal_steps.max(steps);
    }
}
