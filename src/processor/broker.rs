//! What brokers send about themselves: REGISTER_BROKER (the unchanged check, decoding on or
//! off the loop, the apply at once or in steps), BROKER_HEARTBEAT, QUERY_DATA_VERSION,
//! UNREGISTER_BROKER and GET_BROKER_MEMBER_GROUP.

use super::{
    allows, DeferredReply, Processor, Refusal, Reply, ReplyBody, ReplyExt, RequestContext,
    ORDER_TOPIC_CONFIG,
};
use crate::remoting::codes::request;
use crate::remoting::command::RemotingCommand;
use crate::request::{
    BodyDone, BrokerHeartbeat, BrokerRef, GetBrokerMemberGroup, NameLimits, ParseError,
    QueryDataVersion, RegisterBroker, Request,
};
use crate::route::model;
use crate::route::model::{BodyLimits, DecodeScratch, QueueData, RegisterBody};
use crate::route::table::{
    BodyFingerprint, BoundExceeded, RegisterRequest, RegisterResult, RemovalReason, Takeover,
    TopicSteps, TopicsInput,
};
use log::{debug, info, warn};
use std::time::{Duration, Instant};

/// Where a REGISTER_BROKER body is hashed and decoded. The server decides by its size; the
/// checks are the same wherever they run.
#[derive(Debug)]
pub enum BodyWork {
    /// Everything on the loop (small bodies: the common case, no thread hop).
    OnLoop,
    /// Hashed on the loop (cheap at this size); a changed body is decoded off it.
    DecodeOffLoop,
    /// Hashed off the loop (`None`: the header did not parse there); a changed body is
    /// decoded off it.
    Hashed(Option<BodyFingerprint>),
    /// Hashed, CRC-checked and decoded off the loop.
    Decoded(Box<DecodedBody>),
    /// A REGISTER_TOPIC_IN_NAMESRV body decoded and checked off the loop: its queue datas.
    RouteDecoded(Result<Vec<QueueData>, ParseError>),
}

/// A registration body as the decode worker leaves it.
#[derive(Debug)]
pub struct DecodedBody {
    pub fingerprint: BodyFingerprint,
    /// The body's actual CRC when the header's `bodyCrc32` names another (then not decoded).
    pub crc_mismatch: Option<i64>,
    pub body: Result<RegisterBody, ParseError>,
}

/// What the decode worker needs to check a body as the loop would (a snapshot of the
/// config's limits, taken when the job is handed over).
#[derive(Debug, Clone, Copy)]
pub struct BodyChecks {
    pub body: BodyLimits,
    pub names: NameLimits,
}

/// Off the loop: a REGISTER_BROKER body's fingerprint (`None` when the header does not parse;
/// the loop then answers the parse error without hashing).
pub fn hash_registration(cmd: &RemotingCommand, checks: &BodyChecks) -> Option<BodyFingerprint> {
    match Request::parse(cmd, &checks.names) {
        Ok(Request::RegisterBroker(r)) => Some(r.fingerprint),
        _ => None,
    }
}

/// Off the loop: a REGISTER_TOPIC_IN_NAMESRV body decoded and checked as parsing it on the
/// loop would. A header the parse refuses gives no queue datas: the loop refuses it again.
pub fn decode_route_body(cmd: &RemotingCommand, names: &NameLimits) -> BodyWork {
    BodyWork::RouteDecoded(match Request::parse(cmd, names) {
        Ok(Request::RegisterTopic(r)) => Ok(r.queue_datas),
        Ok(_) => Ok(Vec::new()),
        Err(e) => Err(e),
    })
}

/// Off the loop: what the loop's registration handler would do to a changed body before
/// touching the tables: the `bodyCrc32` check, then decoding (into `scratch`'s strings) and
/// the topic-config checks.
pub fn decode_registration(
    cmd: &RemotingCommand,
    fingerprint: BodyFingerprint,
    checks: &BodyChecks,
    scratch: &mut DecodeScratch,
) -> DecodedBody {
    let parsed = Request::parse_after(cmd, &checks.names, BodyDone::Hashed(fingerprint));
    let (crc_mismatch, body) = match parsed {
        Ok(Request::RegisterBroker(r)) => match r.crc_mismatch() {
            Some(actual) => (Some(actual), Ok(RegisterBody::default())),
            None => (None, r.decode_body(&checks.body, &checks.names, scratch)),
        },
        Ok(_) => (None, Err(ParseError::NotSupported(cmd.code))),
        Err(e) => (None, Err(e)),
    };
    DecodedBody {
        fingerprint,
        crc_mismatch,
        body,
    }
}

/// Registrations with more topic work than this (topic configs to put, plus queue entries of
/// topics no longer reported to remove) are applied in steps: putting a topic config costs
/// about 1.6 µs on a busy core (a new topic; less for one already held), so 1,000 are about
/// the 2 ms a request may hold the loop.
pub const STEPPED_APPLY_TOPICS: usize = 1_000;

/// Topic configs put per step (about 0.2 ms); the server runs steps until its per-turn budget
/// is spent.
pub(super) const TOPICS_PER_STEP: usize = 128;

/// A registration being applied in steps, and its answer once done.
pub(super) struct StepsJob {
    pub(super) steps: TopicSteps,
    pub(super) body: RegisterBody,
    /// The broker was registered before: its topic changes count in the change summary (as
    /// a one-go registration's do).
    pub(super) count_changes: bool,
    pub(super) reply: Option<DeferredReply>,
    /// `brokerName@brokerAddr`, for the log.
    pub(super) who: String,
}

/// A changed registration body, or why there is none yet.
pub(super) enum ChangedBody {
    Ready(RegisterBody),
    /// To be decoded off the loop first.
    OffLoop,
}

impl Processor {
    pub(super) fn register_broker(
        &mut self,
        ctx: &RequestContext,
        r: &RegisterBroker<'_>,
        work: BodyWork,
    ) -> Result<Reply, Refusal> {
        let req = r.table_request(ctx.conn, ctx.now_ms);
        let decoded_off_loop = matches!(work, BodyWork::Decoded(_));
        if !decoded_off_loop {
            self.stats.registrations += 1;
        }
        let mut result = if self.table.is_unchanged_body(&req) {
            self.stats.registrations_unchanged += 1;
            self.table.register_broker(&req, TopicsInput::Unchanged)
        } else {
            let body = match self.changed_body(ctx, r, work)? {
                ChangedBody::Ready(body) => body,
                ChangedBody::OffLoop => {
                    return Ok(Reply {
                        decode_off_loop: Some(r.fingerprint),
                        ..Reply::ok()
                    })
                }
            };
            let topics = TopicsInput::Body(&body);
            if let Err(e) = self.table.check_register_bounds(&req, topics, &self.bounds) {
                return Err(self.bound_reached(ctx, &registration_of(r), e));
            }
            self.apply_changed_body(r, &req, body, decoded_off_loop)
        };
        if let Some(takeover) = result.taken_over.take() {
            self.took_over(r, takeover, ctx.now_ms);
        }
        self.log_registration(r, &result, ctx.now_ms);
        if let Some(n) = result.notification.take() {
            self.send_notification(n);
        }
        let mut ext = Vec::new();
        if let Some(ha) = result.ha_server_addr {
            ext.push(("haServerAddr", ha));
        }
        if let Some(master) = result.master_addr {
            ext.push(("masterAddr", master));
        }
        let body = if self.config.return_order_topic_config_to_broker && !result.fenced {
            // Encoded by the writer when the namespace last changed; shared, not copied.
            self.kv.namespace_body(ORDER_TOPIC_CONFIG)
        } else {
            None
        };
        Ok(Reply {
            ext: ReplyExt::Pairs(ext),
            body: body.map_or(ReplyBody::None, ReplyBody::Shared),
            ..Reply::ok()
        })
    }

    /// A changed registration body, decoded here or by the decode worker (as `work` says),
    /// after the `bodyCrc32` check; or the answer refusing it.
    fn changed_body(
        &mut self,
        ctx: &RequestContext,
        r: &RegisterBroker<'_>,
        work: BodyWork,
    ) -> Result<ChangedBody, Refusal> {
        let (crc_mismatch, decoded) = match work {
            BodyWork::DecodeOffLoop | BodyWork::Hashed(_) => return Ok(ChangedBody::OffLoop),
            BodyWork::Decoded(d) => (d.crc_mismatch, Some(d.body)),
            BodyWork::OnLoop | BodyWork::RouteDecoded(_) => (r.crc_mismatch(), None),
        };
        if let Some(actual) = crc_mismatch {
            warn!(
                "rejected registration of {}@{} ({}): body crc32 {actual} != header bodyCrc32 {}",
                r.broker_name, r.broker_addr, r.cluster, r.body_crc32
            );
            return Err(Refusal::CrcMismatch);
        }
        let decoded = match decoded {
            Some(decoded) => decoded,
            None => {
                let names = self.name_limits();
                r.decode_body(&self.body_limits, &names, &mut self.scratch)
            }
        };
        match decoded {
            Ok(body) => Ok(ChangedBody::Ready(body)),
            Err(e) => {
                let what = format!("{}: {e}", registration_of(r));
                self.warn_refused(ctx, request::REGISTER_BROKER, &what);
                Err(Refusal::Parse(e))
            }
        }
    }

    /// A changed body's registration: applied at once when its topic work (configs to put,
    /// stale entries to remove) is small, else in steps ([`Processor::run_topic_steps`]).
    fn apply_changed_body(
        &mut self,
        r: &RegisterBroker<'_>,
        req: &RegisterRequest<'_>,
        body: RegisterBody,
        decoded_off_loop: bool,
    ) -> RegisterResult {
        let (mut result, steps) = self.table.register_broker_in_steps(req, &body);
        match steps {
            Some(steps) if steps.remaining(&body) > STEPPED_APPLY_TOPICS => {
                self.new_steps = Some(self.steps_job(r, &result, steps, body));
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

    fn steps_job(
        &self,
        r: &RegisterBroker<'_>,
        result: &RegisterResult,
        steps: TopicSteps,
        body: RegisterBody,
    ) -> StepsJob {
        StepsJob {
            count_changes: !result.first,
            steps,
            body,
            reply: None,
            who: format!("{}@{}", r.broker_name, r.broker_addr),
        }
    }

    /// Puts the topic configs of registrations applied in steps, a step at a time, until
    /// `budget` from `started` is spent (at least one step); returns the answers of those now
    /// complete.
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
        self.log_change_summary(now_ms);
    }

    /// A registration is being applied in steps (see [`Processor::run_topic_steps`]).
    pub fn topic_steps_pending(&self) -> bool {
        !self.topic_steps.is_empty()
    }

    /// Frees the topic-name strings kept for the next changed bodies (before the server hands
    /// freed heap back to the OS: kept strings would keep their pages).
    pub fn release_decode_scratch(&mut self) {
        self.scratch.release();
    }

    /// Decoded registration bodies already applied, for the server to free off the loop.
    pub fn take_spent_bodies(&mut self) -> Vec<RegisterBody> {
        std::mem::take(&mut self.spent_bodies)
    }

    /// The limits a body is checked against, for the decode worker.
    pub fn body_checks(&self) -> BodyChecks {
        BodyChecks {
            body: self.body_limits,
            names: self.name_limits(),
        }
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
        Refusal::Bound(e)
    }

    /// A registration took its address from another broker name (step 0 of the table's
    /// registration): warned, rate-limited, naming both; notifications sent.
    fn took_over(&mut self, r: &RegisterBroker<'_>, t: Takeover, now_ms: u64) {
        let old = &t.previous;
        if self.stats.takeovers.admit(now_ms) {
            warn!(
                "address {} ({}) taken over by broker {} id {}: it was broker {} id {}'s, now unregistered there ({} group(s), {} topic(s) removed)",
                r.broker_addr, r.cluster, r.broker_name, r.broker_id, old.broker_name,
                old.broker_id, t.outcome.broker_groups_removed, t.outcome.topics_removed
            );
        }
        self.count_freed(&t.outcome);
        for n in t.outcome.notifications {
            self.send_notification(n);
        }
    }

    /// New brokers and fencing at info/warn; topic changes counted into the periodic summary
    /// (and logged at debug), since a churning cluster changes topics on every registration.
    fn log_registration(&mut self, r: &RegisterBroker<'_>, result: &RegisterResult, now_ms: u64) {
        let (name, addr, id, cluster) = (r.broker_name, r.broker_addr, r.broker_id, r.cluster);
        if result.fenced {
            warn!(
                "registration of {name}@{addr} id {id} ({cluster}) fenced: a newer stateVersion holds that id"
            );
        } else if result.first {
            if self.stats.changes.new_broker(now_ms) {
                info!(
                    "new broker registered: {name}@{addr} id {id} cluster {cluster} ha {}",
                    r.ha_server_addr
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

    pub(super) fn unregister_broker(
        &mut self,
        ctx: &RequestContext,
        r: BrokerRef<'_>,
    ) -> Result<Reply, Refusal> {
        self.check_unregister_sender(ctx, &r)?;
        if self.submit_unregistrations(vec![(r.unregister_request(), RemovalReason::Unregister)]) {
            Ok(Reply::ok())
        } else {
            Err(Refusal::UnregisterQueueFull)
        }
    }

    /// With either allow-list set, a broker is unregistered only over the connection it
    /// registered over (under the same name), or by an address in `adminAllowList`: an
    /// address that may register may not remove other brokers. A broker that reconnected
    /// re-registers over its new connection before it can unregister over it.
    fn check_unregister_sender(
        &mut self,
        ctx: &RequestContext,
        r: &BrokerRef<'_>,
    ) -> Result<(), Refusal> {
        if self.admin_allow_list.is_empty() && self.broker_allow_list.is_empty() {
            return Ok(());
        }
        let (cluster, addr, name) = (r.cluster, r.broker_addr, r.broker_name);
        if self.table.registered_over(cluster, addr, name, ctx.conn)
            || (!self.admin_allow_list.is_empty() && allows(&self.admin_allow_list, ctx.peer))
        {
            return Ok(());
        }
        let refusal = Refusal::UnregisterNotAllowed {
            broker: format!("{name}@{addr} ({cluster})"),
        };
        self.warn_refused(ctx, request::UNREGISTER_BROKER, &refusal);
        Err(refusal)
    }

    pub(super) fn broker_heartbeat(
        &mut self,
        ctx: &RequestContext,
        r: BrokerHeartbeat<'_>,
    ) -> Result<Reply, Refusal> {
        self.table.heartbeat(r.cluster, r.broker_addr, ctx.now_ms);
        Ok(Reply::ok())
    }

    pub(super) fn query_data_version(
        &mut self,
        ctx: &RequestContext,
        r: QueryDataVersion<'_>,
    ) -> Result<Reply, Refusal> {
        let (cluster, addr) = (r.broker.cluster, r.broker.broker_addr);
        let answered = self
            .table
            .query_data_version(cluster, addr, ctx.now_ms, |stored| {
                let changed = r.changed(stored.map(|(version, text)| (version, &text[..])))?;
                Ok((changed, stored.map(|(_, text)| text.clone())))
            });
        let (changed, text) = answered.map_err(|e: ParseError| {
            self.warn_refused(ctx, request::QUERY_DATA_VERSION, &e);
            Refusal::Parse(e)
        })?;
        Ok(Reply {
            ext: ReplyExt::Changed(changed),
            // The stored version's text (none for a broker not live), shared with the table.
            body: text.map_or(ReplyBody::None, ReplyBody::Shared),
            ..Reply::ok()
        })
    }

    pub(super) fn broker_member_group(
        &mut self,
        r: GetBrokerMemberGroup<'_>,
    ) -> Result<Reply, Refusal> {
        let addrs = self.table.broker_member_group(r.broker_name);
        let mut body = Vec::new();
        model::encode_member_group(r.cluster, r.broker_name, &addrs, &mut body);
        Ok(Reply::with_body(body))
    }
}

/// A registration as log lines name it: `registration of broker@addr (cluster)`.
pub(super) fn registration_of(r: &RegisterBroker<'_>) -> String {
    format!(
        "registration of {}@{} ({})",
        r.broker_name, r.broker_addr, r.cluster
    )
}
