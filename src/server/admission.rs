//! Admission of registrations: the queue applied in `before_sleep` within a budget, SYSTEM_BUSY
//! `[OVERLOAD]` past the backlog limits, and the steps of a registration applied in steps.

use super::{decode_worker, NameServer, PeerState, SLOW_WORK_BUDGET};
use crate::event_loop::{ConnId, Ctx, Next, ReadClass};
use crate::processor::BodyWork;
use crate::remoting::command::RemotingCommand;
use log::warn;
use std::collections::VecDeque;
use std::time::Instant;

/// Queued registration bytes beyond which broker connections are not read this turn (about
/// a dozen 100-topic registrations: what one turn's budget applies).
pub(super) const REGISTRATION_READ_AHEAD_BYTES: usize = 256 * 1024;

/// Bytes of queued registration frames beyond which new ones are answered SYSTEM_BUSY.
pub(super) const REGISTRATION_BACKLOG_BYTES: usize = 256 << 20;

pub(super) struct QueuedRegistration {
    pub(super) conn: ConnId,
    pub(super) cmd: RemotingCommand,
    pub(super) work: BodyWork,
}

#[derive(Default)]
pub(super) struct RegistrationQueue {
    pub(super) queue: VecDeque<QueuedRegistration>,
    /// Body bytes of the queued registrations and of those with the decode worker.
    pub(super) bytes: usize,
}

impl NameServer {
    /// Read no more broker traffic this turn.
    pub(super) fn registration_queue_full(&self) -> bool {
        self.registrations.queue.len() + self.decode.in_flight()
            >= self.settings.registration_budget
            || self.registrations.bytes >= REGISTRATION_READ_AHEAD_BYTES
    }

    pub(super) fn admit_registration(
        &mut self,
        ctx: &mut Ctx<PeerState>,
        conn: ConnId,
        cmd: RemotingCommand,
    ) -> Next {
        // More peers than `registrationBacklogLimit` wait behind a full queue.
        let shedding = self.registration_queue_full() && ctx.bulk_line_full();
        if shedding || self.registrations.bytes + cmd.body.len() > REGISTRATION_BACKLOG_BYTES {
            warn!(
                "registration backlog full ({} queued): answering SYSTEM_BUSY to {:?}",
                self.registrations.queue.len(),
                ctx.peer(conn)
            );
            if let Some(out) = ctx.write_buf(conn) {
                self.processor.reply_overloaded(&cmd, out);
            }
            return Next::Continue;
        }
        self.registrations.bytes += cmd.body.len();
        self.registrations.queue.push_back(QueuedRegistration {
            conn,
            cmd,
            work: BodyWork::OnLoop,
        });
        ctx.set_read_class(conn, ReadClass::Bulk);
        Next::Hold
    }

    /// At least one, then until the turn's budget is spent.
    pub(super) fn run_registrations(&mut self, ctx: &mut Ctx<PeerState>, started: Instant) {
        // One registration applied in steps at a time.
        if !self.run_topic_steps(ctx, started) {
            return;
        }
        let mut done = 0;
        while done < self.settings.registration_budget {
            if done > 0 && started.elapsed() >= SLOW_WORK_BUDGET {
                break;
            }
            let Some(q) = self.registrations.queue.pop_front() else {
                break;
            };
            self.registrations.bytes -= q.cmd.body.len();
            done += 1;
            self.run_registration(ctx, q);
            if self.processor.topic_steps_pending() {
                break;
            }
        }
    }

    fn run_registration(&mut self, ctx: &mut Ctx<PeerState>, q: QueuedRegistration) {
        let QueuedRegistration { conn, cmd, work } = q;
        let large = matches!(work, BodyWork::OffLoop(_));
        if ctx.peer(conn).is_none() {
            return;
        }
        let Some(effects) = self.run_guarded(ctx, conn, &cmd, work) else {
            ctx.close(conn, "registration handler panicked");
            return;
        };
        if let Some(job) = effects.off_loop {
            // Its bytes still count as queued until it comes back.
            self.registrations.bytes += cmd.body.len();
            self.decode.decode(decode_worker::Request {
                conn,
                cmd,
                job: *job,
            });
            return;
        }
        if large {
            self.handled_off_loop.push(cmd);
        }
        if effects.deferred {
            // Applied in steps: answered by run_topic_steps.
            return;
        }
        ctx.release(conn);
    }

    /// After the last step, the requests that waited are handled in order. Returns whether the
    /// table is free.
    fn run_topic_steps(&mut self, ctx: &mut Ctx<PeerState>, started: Instant) -> bool {
        if self.processor.topic_steps_pending() {
            let now_ms = ctx.now_ms();
            let answers = self
                .processor
                .run_topic_steps(now_ms, started, SLOW_WORK_BUDGET);
            NameServer::deliver(ctx, answers);
        }
        while !self.processor.topic_steps_pending() {
            let Some((conn, cmd, work)) = self.after_steps.pop_front() else {
                break;
            };
            self.handle_held(ctx, conn, &cmd, work);
        }
        !self.processor.topic_steps_pending()
    }
}
