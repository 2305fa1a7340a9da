//! REGISTER_BROKER: an unchanged body only refreshes the broker; a changed one is decoded (by
//! the worker when large) and applied, past [`STEPPED_APPLY_TOPICS`] in steps.

use super::off_loop::{body_weight, decode_checked, BodyRefused, BodyWork, Decoded};
use super::ORDER_TOPIC_CONFIG;
use super::{DeferredReply, Processor, Refusal, Reply, ReplyExt, RequestContext};
use crate::request::reply::RegisterBrokerReply;
use crate::request::RegisterBroker;
use crate::route::model::RegisterBody;
use crate::route::table::{
    BoundExceeded, RegisterRequest, RegisterResult, Takeover, TopicSteps, TopicsInput,
};
use log::{debug, info, warn};
use std::time::{Duration, Instant};

/// Registrations with more topic work than this are applied in steps: a new topic config costs
/// about 1.6 µs on a busy core, so 1,000 are about the 2 ms a request may hold the loop
/// (`cargo bench --bench register_apply`, churn_100_topics).
pub const STEPPED_APPLY_TOPICS: usize = 1_000;

/// Topic configs put per step (about 0.2 ms); steps run until the turn's budget is spent.
const TOPICS_PER_STEP: usize = 128;

pub(super) struct StepsJob {
    pub(super) steps: TopicSteps,
    pub(super) body: RegisterBody,
    /// The broker was registered before: its topic changes count in the change summary.
    count_changes: bool,
    pub(super) reply: Option<DeferredReply>,
    who: String,
}

enum Body {
    /// Not decoded yet: decoded here if it changed (a small body).
    Here,
    Decoded(Result<RegisterBody, BodyRefused>),
    /// Not decoded by the worker: it was the body applied last when the job was made.
    Skipped,
}

impl Processor {
    pub(super) fn register_broker(
        &mut self,
        ctx: &RequestContext,
        r: &RegisterBroker<'_>,
        work: BodyWork,
    ) -> Result<Reply, Refusal> {
        let (fingerprint, body) = match work {
            BodyWork::OnLoop if self.too_large_for_the_loop(body_weight(r.body, r.compressed)) => {
                let unchanged = self.table.unchanged_fingerprint(&r.broker);
                return Ok(Reply::off_loop(self.decode_job(unchanged)));
            }
            BodyWork::OnLoop => (r.fingerprint(), Body::Here),
            BodyWork::OffLoop(decoded) => match *decoded {
                Decoded::Registration {
                    fingerprint,
                    body: Some(body),
                } => (fingerprint, Body::Decoded(body)),
                Decoded::Registration {
                    fingerprint,
                    body: None,
                } => (fingerprint, Body::Skipped),
                Decoded::Failed(e) => return Err(self.body_refused(ctx, r, BodyRefused::Bad(e))),
                // The header parsed here but not there (the limits changed in between).
                Decoded::TopicRoute(_) | Decoded::Header => {
                    return Ok(Reply::off_loop(self.decode_job(None)))
                }
            },
        };
        let req = RegisterRequest {
            broker: r.broker,
            conn: Some(ctx.reply_to.index()),
            now_ms: ctx.now_ms,
            fingerprint,
        };
        let mut result = if self.table.is_unchanged_body(&req) {
            if let Body::Decoded(Ok(body)) = body {
                self.spent_bodies.push(body);
            }
            self.stats.registrations += 1;
            self.stats.registrations_unchanged += 1;
            self.table.register_broker(&req, TopicsInput::Unchanged).0
        } else {
            let (decoded, off_loop) = match body {
                Body::Here => {
                    let names = self.name_limits();
                    let limits = self.body_limits;
                    (decode_checked(r, &limits, &names, &mut self.scratch), false)
                }
                Body::Decoded(decoded) => (decoded, true),
                // Another write made it a changed body since the job was made.
                Body::Skipped => return Ok(Reply::off_loop(self.decode_job(None))),
            };
            self.stats.registrations += 1;
            let body = decoded.map_err(|refused| self.body_refused(ctx, r, refused))?;
            if let Err(e) =
                self.table
                    .check_register_bounds(&req, TopicsInput::Body(&body), &self.bounds)
            {
                return Err(self.bound_reached(ctx, &registration_of(r), e));
            }
            self.apply_changed_body(&req, body, off_loop)
        };
        if let Some(takeover) = result.taken_over.take() {
            self.took_over(r, takeover, ctx.now_ms);
        }
        self.log_registration(r, &result, ctx.now_ms);
        if let Some(n) = result.notification.take() {
            self.send_notification(n);
        }
        Ok(self.registration_reply(result))
    }

    /// SUCCESS with a slave's master addresses, and ORDER_TOPIC_CONFIG unless fenced.
    fn registration_reply(&self, result: RegisterResult) -> Reply {
        let header = RegisterBrokerReply {
            ha_server_addr: result.ha_server_addr,
            master_addr: result.master_addr,
        };
        // Encoded by the writer when the namespace last changed; shared, not copied.
        let body = (self.config.return_order_topic_config_to_broker && !result.fenced)
            .then(|| self.kv.namespace_body(ORDER_TOPIC_CONFIG))
            .flatten();
        Reply::with_body(body.unwrap_or_default()).with_ext(ReplyExt::Pairs(header.encode()))
    }

    fn apply_changed_body(
        &mut self,
        req: &RegisterRequest<'_>,
        body: RegisterBody,
        decoded_off_loop: bool,
    ) -> RegisterResult {
        let (mut result, steps) = self.table.register_broker(req, TopicsInput::Body(&body));
        match steps {
            Some(steps) if steps.remaining(&body) > STEPPED_APPLY_TOPICS => {
                self.new_steps = Some(StepsJob {
                    count_changes: !result.first,
                    steps,
                    body,
                    reply: None,
                    who: format!("{}@{}", req.broker.broker_name, req.broker.broker_addr),
                });
                return result;
            }
            Some(mut steps) => {
                self.table.apply_topic_steps(&mut steps, &body, usize::MAX);
                result.topics_changed = steps.changed;
            }
            None => {}
        }
        if decoded_off_loop {
            // A large body's thousands of strings are freed off the loop too.
            self.spent_bodies.push(body);
        } else {
            self.scratch.recycle(body);
        }
        result
    }

    /// Runs at least one step, then until `budget` is spent; returns the answers now complete.
    pub fn run_topic_steps(
        &mut self,
        now_ms: u64,
        started: Instant,
        budget: Duration,
    ) -> Vec<DeferredReply> {
        let mut answers = Vec::new();
        while let Some(job) = self.topic_steps.front_mut() {
            if self
                .table
                .apply_topic_steps(&mut job.steps, &job.body, TOPICS_PER_STEP)
            {
                if let Some(job) = self.topic_steps.pop_front() {
                    self.finish_steps(job, now_ms, &mut answers);
                }
            }
            if started.elapsed() >= budget {
                break;
            }
        }
        answers
    }

    pub(super) fn finish_steps(
        &mut self,
        job: StepsJob,
        now_ms: u64,
        answers: &mut Vec<DeferredReply>,
    ) {
        let changed = job.steps.changed;
        debug!(
            "broker {} changed {changed} topic queue entries (applied in steps)",
            job.who
        );
        if changed > 0 && job.count_changes {
            self.stats.changes.broker_changed(changed, now_ms);
        }
        answers.extend(job.reply);
        self.spent_bodies.push(job.body);
    }

    /// A registration, or a group's removal, applied in steps (route writers wait for it).
    pub fn topic_steps_pending(&self) -> bool {
        !self.topic_steps.is_empty() || self.removal_in_steps
    }

    pub fn take_spent_bodies(&mut self) -> Vec<RegisterBody> {
        std::mem::take(&mut self.spent_bodies)
    }

    /// A bound refused a registration: SYSTEM_ERROR naming the key, and a rate-limited warn.
    pub(super) fn bound_reached(
        &mut self,
        ctx: &RequestContext,
        what: &dyn std::fmt::Display,
        e: BoundExceeded,
    ) -> Refusal {
        if self.stats.bounds_reached.admit(ctx.now_ms) {
            warn!("refused {what} from {:?}: {e}", ctx.peer);
        }
        Refusal::OverBound(e.to_string())
    }

    /// A registration took its address from another broker name: warned (rate-limited).
    fn took_over(&mut self, r: &RegisterBroker<'_>, t: Takeover, now_ms: u64) {
        let (old, b) = (&t.previous, &r.broker);
        if self.stats.takeovers.admit(now_ms) {
            warn!(
                "address {} ({}) taken over by broker {} id {}: it was broker {} id {}'s, now unregistered there ({} group(s), {} topic(s) removed)",
                b.broker_addr, b.cluster, b.broker_name, b.broker_id, old.broker_name,
                old.broker_id, t.outcome.broker_groups_removed, t.outcome.topics_removed
            );
        }
        for n in t.outcome.notifications {
            self.send_notification(n);
        }
    }

    /// New brokers and fencing at info/warn; topic changes counted into the periodic summary.
    fn log_registration(&mut self, r: &RegisterBroker<'_>, result: &RegisterResult, now_ms: u64) {
        let b = &r.broker;
        let (name, addr, id, cluster) = (b.broker_name, b.broker_addr, b.broker_id, b.cluster);
        if result.fenced {
            warn!(
                "registration of {name}@{addr} id {id} ({cluster}) fenced: a newer stateVersion holds that id"
            );
        } else if result.first {
            if self.stats.changes.new_broker(now_ms) {
                info!(
                    "new broker registered: {name}@{addr} id {id} cluster {cluster} ha {}",
                    b.ha_server_addr
                );
            } else {
                debug!("new broker registered: {name}@{addr} id {id} cluster {cluster}");
            }
        } else if result.topics_changed > 0 {
            self.stats
                .changes
                .broker_changed(result.topics_changed, now_ms);
            debug!(
                "broker {name}@{addr} changed {} topic queue entries",
                result.topics_changed
            );
        } else {
            debug!("broker {name}@{addr} refreshed");
        }
    }
}

pub(super) fn registration_of(r: &RegisterBroker<'_>) -> String {
    format!(
        "registration of {}@{} ({})",
        r.broker.broker_name, r.broker.broker_addr, r.broker.cluster
    )
}
