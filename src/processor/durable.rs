//! Requests answered once their change is on disk (KV changes, config updates).

use super::{DeferredReply, Effects, Processor, Refusal, Reply, Ticket};
use crate::config::ConfigPlan;
use crate::kv::{Done, Job, WriterGone};
use log::error;
use std::time::Instant;

pub(super) struct Awaiting {
    pub(super) id: u64,
    pub(super) ticket: Ticket,
    /// For a config update: what to apply once the file is written.
    pub(super) plan: Option<Box<ConfigPlan>>,
    /// The change, for its audit line.
    pub(super) what: String,
    submitted: Instant,
}

impl Processor {
    pub fn writes_in_flight(&self) -> usize {
        self.awaiting.len()
    }

    /// Takes what the durable writer finished and answers the waiting requests in order.
    pub fn finish_durable_writes(&mut self) -> (Vec<DeferredReply>, Effects) {
        let mut replies = Vec::new();
        let mut effects = Effects::default();
        if self.awaiting.is_empty() {
            return (replies, effects);
        }
        loop {
            match self.outbox.durable.try_done() {
                Ok(Some(Done::Changes(commit))) => self.kv_committed(commit, &mut replies),
                Ok(Some(Done::File { id, result })) => {
                    self.config_written(id, result, &mut replies, &mut effects)
                }
                Ok(None) => break,
                Err(WriterGone) => {
                    self.writer_gone(&mut replies);
                    break;
                }
            }
        }
        (replies, effects)
    }

    fn writer_gone(&mut self, replies: &mut Vec<DeferredReply>) {
        error!(
            "BUG: the KV writer thread has ended; {} request(s) answered failed",
            self.awaiting.len()
        );
        self.kv.forget_in_flight();
        self.config_writing = false;
        let gone = "persisting failed: the writer thread has ended; nothing was changed";
        let failed = |what: String| Refusal::Failed(gone.into()).reply().audited(what);
        let tickets: Vec<(Ticket, String)> = std::mem::take(&mut self.awaiting)
            .into_iter()
            .map(|waiting| (waiting.ticket, waiting.what))
            .chain(
                std::mem::take(&mut self.config_queue)
                    .into_iter()
                    .map(|(t, _)| (t, String::new())),
            )
            .collect();
        for (ticket, what) in tickets {
            replies.push(self.answer_later(ticket, &failed(what)));
        }
    }

    /// Hands the job made with a fresh id to the durable writer; `ticket` is answered when done,
    /// and the change (`what`) audited then.
    pub(super) fn submit_durable(
        &mut self,
        job: impl FnOnce(u64) -> Job,
        ticket: Ticket,
        plan: Option<Box<ConfigPlan>>,
        what: String,
    ) -> Result<Reply, Job> {
        self.next_write_id += 1;
        let id = self.next_write_id;
        self.outbox.durable.submit(job(id))?;
        self.awaiting.push_back(Awaiting {
            id,
            ticket,
            plan,
            what,
            submitted: Instant::now(),
        });
        Ok(Reply::later())
    }

    /// The waiting request of job `id` (normally the front: jobs finish in order).
    pub(super) fn take_awaiting(&mut self, id: u64) -> Option<Awaiting> {
        let at = self.awaiting.iter().position(|a| a.id == id)?;
        let done = self.awaiting.remove(at)?;
        self.stats.durable_writes.observe(done.submitted.elapsed());
        Some(done)
    }
}
