//! One handler per [`Request`], and the one place errors become Java's response codes and
//! remarks. It owns the state on the loop thread; slow work goes out through the [`Outbox`].

use crate::audit;
use crate::config::{check_allowed, Cidr, NamesrvConfig, UpdateError};
use crate::event_loop::oneway::OnewaySender;
use crate::event_loop::LoopStats;
use crate::kv::{DurableWriter, KvRefusal, KvStore};
use crate::remoting::codes::{self, response};
use crate::remoting::command::RemotingCommand;
use crate::request::{NameLimits, ParseError, Request};
use crate::route::model::{BodyLimits, DecodeScratch, RegisterBody};
use crate::route::table::{
    ConnId, ListKind, RemovalReason, RouteBounds, RouteSettings, RouteTable, UnregisterRequest,
};
use crossbeam_channel::Sender;
use log::{debug, warn};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

pub const ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

pub type Unregistration = (UnregisterRequest, RemovalReason);

pub type UnregisterBatch = Vec<Unregistration>;

/// Work that must not run on the loop: bounded channels (a full one is logged, never waited for).
pub struct Outbox {
    pub unregistrations: Sender<UnregisterBatch>,
    pub notifications: OnewaySender,
    pub durable: DurableWriter,
}

#[derive(Debug, Clone, Copy)]
pub struct RequestContext {
    pub peer: Option<SocketAddr>,
    pub now_ms: u64,
    /// Where an answer given later goes (a request whose change must be durable first).
    pub reply_to: LoopConnId,
}

/// Generation-checked: a deferred answer to a closed connection finds nothing.
pub type LoopConnId = crate::event_loop::ConnId;

/// An answer given later (an empty frame for a oneway request).
#[derive(Debug)]
pub struct DeferredReply {
    pub conn: LoopConnId,
    pub frame: Vec<u8>,
}

#[derive(Debug, Default)]
pub struct Effects {
    /// UPDATE_NAMESRV_CONFIG applied: re-read timer and limit settings.
    pub config_changed: bool,
    /// Answered later: hold the connection's later frames until then.
    pub deferred: bool,
    /// A body too large for the loop: nothing was done; hand it to the decode worker.
    pub off_loop: Option<Box<DecodeJob>>,
}

const OVERLOAD_REMARK: &str = "[OVERLOAD]system busy, start flow control for a while";

/// Why a request is refused or failed; [`Refusal::reply`] makes Java's code and remark of it.
#[derive(Debug)]
enum Refusal {
    Parse(ParseError),
    /// NO_PERMISSION with this remark (an allow-list, or UNREGISTER_BROKER's sender).
    NotAllowed(String),
    CrcMismatch,
    /// Java answers SYSTEM_ERROR without a remark.
    UnregisterQueueFull,
    Overloaded,
    TopicNotExist(String),
    NoKvItem {
        namespace: String,
        key: String,
    },
    NoKvNamespace(String),
    Kv(KvRefusal),
    Config(UpdateError),
    ConfigBacklog {
        waiting: usize,
    },
    /// A registry bound (`maxBrokers`, `maxTopics`...): SYSTEM_ERROR with this remark.
    OverBound(String),
    /// SYSTEM_ERROR with this remark.
    Failed(String),
}

/// Indexes of [`stats::REFUSAL_REASONS`].
const LIMITS: usize = 0;
const ALLOW_LIST: usize = 1;
const VALIDATION: usize = 2;

impl Refusal {
    fn code(&self) -> i32 {
        use response::{
            NO_PERMISSION, QUERY_NOT_FOUND, REQUEST_CODE_NOT_SUPPORTED, SYSTEM_BUSY, SYSTEM_ERROR,
            TOPIC_NOT_EXIST,
        };
        match self {
            Refusal::Parse(ParseError::NotSupported(_)) => REQUEST_CODE_NOT_SUPPORTED,
            Refusal::NotAllowed(_) => NO_PERMISSION,
            Refusal::Overloaded | Refusal::ConfigBacklog { .. } => SYSTEM_BUSY,
            Refusal::Kv(refusal) if refusal.is_busy() => SYSTEM_BUSY,
            Refusal::TopicNotExist(_) => TOPIC_NOT_EXIST,
            Refusal::NoKvItem { .. } | Refusal::NoKvNamespace(_) => QUERY_NOT_FOUND,
            Refusal::Config(e) => e.response_code(),
            _ => SYSTEM_ERROR,
        }
    }

    /// Which [`stats::REFUSAL_REASONS`] it counts under; none for answers such as "no route".
    fn reason(&self) -> Option<usize> {
        match self {
            Refusal::Parse(ParseError::NotSupported(_)) => None,
            Refusal::Parse(_) | Refusal::CrcMismatch | Refusal::Config(_) => Some(VALIDATION),
            Refusal::Kv(KvRefusal::TooLong { .. }) => Some(VALIDATION),
            Refusal::NotAllowed(_) => Some(ALLOW_LIST),
            Refusal::UnregisterQueueFull
            | Refusal::Overloaded
            | Refusal::Kv(_)
            | Refusal::ConfigBacklog { .. }
            | Refusal::OverBound(_) => Some(LIMITS),
            Refusal::TopicNotExist(_)
            | Refusal::NoKvItem { .. }
            | Refusal::NoKvNamespace(_)
            | Refusal::Failed(_) => None,
        }
    }

    fn reply(self) -> Reply {
        match self {
            // Java answers without a remark.
            Refusal::UnregisterQueueFull => Reply {
                code: self.code(),
                ..Reply::ok()
            },
            // Java built these with a response header: `"extFields":{}`.
            Refusal::CrcMismatch | Refusal::NoKvItem { .. } => {
                Reply::error(self.code(), self.to_string()).with_ext(ReplyExt::Pairs(Vec::new()))
            }
            _ => Reply::error(self.code(), self.to_string()),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Parse(e) => write!(f, "{e}"),
            Refusal::NotAllowed(remark) | Refusal::OverBound(remark) | Refusal::Failed(remark) => {
                f.write_str(remark)
            }
            Refusal::CrcMismatch => f.write_str("crc32 not match"),
            Refusal::UnregisterQueueFull => f.write_str("the unregistration queue is full"),
            Refusal::Overloaded => f.write_str(OVERLOAD_REMARK),
            Refusal::TopicNotExist(topic) => write!(
                f,
                "No topic route info in name server for the topic: {topic}\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
            ),
            Refusal::NoKvItem { namespace, key } => {
                write!(f, "No config item, Namespace: {namespace} Key: {key}")
            }
            Refusal::NoKvNamespace(namespace) => {
                write!(f, "No config item, Namespace: {namespace}")
            }
            Refusal::Kv(refusal) => write!(f, "{refusal}"),
            Refusal::Config(e) => f.write_str(&e.remark()),
            Refusal::ConfigBacklog { waiting } => write!(
                f,
                "[OVERLOAD] {waiting} config updates are waiting for the disk; try again later"
            ),
        }
    }
}

pub struct Processor {
    pub table: RouteTable,
    kv: KvStore,
    config: NamesrvConfig,
    started: Instant,
    outbox: Outbox,
    stats: Stats,
    body_limits: BodyLimits,
    admin_allow_list: Vec<Cidr>,
    awaiting: VecDeque<Awaiting>,
    next_write_id: u64,
    config_queue: VecDeque<(Ticket, String)>,
    config_writing: bool,
    broker_allow_list: Vec<Cidr>,
    bounds: RouteBounds,
    expired_this_scan: UnregisterBatch,
    expired_conns_this_scan: Vec<ConnId>,
    spent_bodies: Vec<RegisterBody>,
    /// Strings of the changed bodies applied on the loop, for the next ones decoded here.
    scratch: DecodeScratch,
    /// Registrations applied in steps, oldest first; and the one started by this request.
    topic_steps: VecDeque<StepsJob>,
    new_steps: Option<StepsJob>,
    /// Topic list requests waiting for their list's encoding, oldest first.
    lists_waiting: VecDeque<(ListKind, Ticket)>,
    /// A group's topics are being dropped in steps before its last address goes.
    removal_in_steps: bool,
    templates: ReplyTemplates,
}

/// Where an answer goes, and who asked what (for the audit line of an answer given later).
#[derive(Debug, Clone, Copy)]
struct Ticket {
    conn: LoopConnId,
    opaque: i32,
    oneway: bool,
    code: i32,
    peer: Option<SocketAddr>,
}

impl Processor {
    pub fn new(config: NamesrvConfig, kv: KvStore, outbox: Outbox) -> Self {
        let mut processor = Processor {
            table: RouteTable::new(RouteSettings::default(), 1000),
            kv,
            body_limits: BodyLimits::default(),
            admin_allow_list: Vec::new(),
            broker_allow_list: Vec::new(),
            bounds: RouteBounds::default(),
            config,
            started: Instant::now(),
            outbox,
            stats: Stats::default(),
            awaiting: VecDeque::new(),
            next_write_id: 0,
            config_queue: VecDeque::new(),
            config_writing: false,
            expired_this_scan: Vec::new(),
            expired_conns_this_scan: Vec::new(),
            spent_bodies: Vec::new(),
            scratch: DecodeScratch::default(),
            topic_steps: VecDeque::new(),
            new_steps: None,
            lists_waiting: VecDeque::new(),
            removal_in_steps: false,
            templates: ReplyTemplates::new(),
        };
        processor.derive_settings();
        let kv = &processor.kv;
        let (usage, limits) = (kv.usage(), kv.limits());
        if usage.entries > limits.max_entries || usage.bytes > limits.max_total_bytes {
            warn!(
                "KV config {} holds {} entries and {} bytes, over kvMaxEntries {} or kvMaxTotalBytes {}: \
                 puts that add to it are refused until entries are deleted or the limits raised",
                kv.path().display(),
                usage.entries,
                usage.bytes,
                limits.max_entries,
                limits.max_total_bytes
            );
        }
        processor
    }

    pub fn config(&self) -> &NamesrvConfig {
        &self.config
    }

    pub fn handle_with(
        &mut self,
        ctx: &RequestContext,
        counters: &LoopStats,
        cmd: &RemotingCommand,
        work: BodyWork,
        out: &mut Vec<u8>,
    ) -> Effects {
        if cmd.is_response() {
            debug!(
                "dropping unexpected response frame (opaque {}) from {:?}",
                cmd.opaque, ctx.peer
            );
            return Effects::default();
        }
        let began = self.stats.requests_by_code.timer(cmd.code);
        let mut effects = Effects::default();
        self.new_steps = None;
        let ticket = Ticket {
            conn: ctx.reply_to,
            opaque: cmd.opaque,
            oneway: cmd.is_oneway(),
            code: cmd.code,
            peer: ctx.peer,
        };
        let reply = match self.dispatch(ctx, counters, cmd, ticket, work) {
            Ok(r) => r,
            Err(refusal) => {
                if let Some(reason) = refusal.reason() {
                    self.stats.refused[reason] += 1;
                }
                let reply = refusal.reply();
                debug!(
                    "request {} from {:?} answered {}: {}",
                    cmd.code,
                    ctx.peer,
                    reply.code,
                    reply.remark.as_deref().unwrap_or("")
                );
                reply
            }
        };
        if reply.off_loop.is_some() {
            effects.off_loop = reply.off_loop;
            return effects;
        }
        if !reply.deferred {
            self.audit(&ticket, &reply);
        }
        (self.stats.requests_by_code).count(cmd.code, reply.code, began);
        if let Some(mut job) = self.new_steps.take() {
            // Answered when the last step is done: success means the change was made.
            job.reply = Some(self.deferred_reply(ticket, &reply));
            self.topic_steps.push_back(job);
            effects.deferred = true;
            return effects;
        }
        if reply.deferred {
            effects.deferred = true;
        } else if !cmd.is_oneway() {
            self.write_reply(cmd.opaque, &reply, out);
        }
        effects
    }

    pub fn reply_overloaded(&mut self, cmd: &RemotingCommand, out: &mut Vec<u8>) {
        let refusal = Refusal::Overloaded;
        (self.stats.requests_by_code).count(cmd.code, refusal.code(), None);
        self.stats.refused[LIMITS] += 1;
        self.stats.rejected_busy += 1;
        if !cmd.is_oneway() {
            self.write_reply(cmd.opaque, &refusal.reply(), out);
        }
    }

    fn write_reply(&self, opaque: i32, reply: &Reply, out: &mut Vec<u8>) {
        let serialize_type = self.config.serialize_type;
        if !self.templates.write(serialize_type, opaque, reply, out) {
            encode_reply(serialize_type, opaque, reply, out);
        }
    }

    /// The allow-lists, the typed request (unless it goes off the loop first), its handler.
    fn dispatch(
        &mut self,
        ctx: &RequestContext,
        counters: &LoopStats,
        cmd: &RemotingCommand,
        ticket: Ticket,
        work: BodyWork,
    ) -> Result<Reply, Refusal> {
        self.check_allow_lists(ctx, cmd.code)?;
        if let BodyWork::OnLoop = work {
            if let Some(job) = self.off_loop_before_parse(cmd) {
                return Ok(Reply::off_loop(job));
            }
        }
        let limits = self.name_limits();
        // A body the worker has seen is never decoded on the loop.
        let decoded = matches!(work, BodyWork::OffLoop(_));
        match Request::parse_after(cmd, &limits, decoded) {
            Ok(request) => self.apply(ctx, counters, request, ticket, work),
            Err(e) => {
                if !matches!(e, ParseError::NotSupported(_)) {
                    self.warn_refused(ctx, cmd.code, &e);
                }
                Err(Refusal::Parse(e))
            }
        }
    }

    /// `adminAllowList` for admin writes, `brokerAllowList` for what brokers report.
    fn check_allow_lists(&mut self, ctx: &RequestContext, code: i32) -> Result<(), Refusal> {
        let (key, list) =
            if !self.admin_allow_list.is_empty() && codes::needs_admin_allow_list(code) {
                ("adminAllowList", &self.admin_allow_list)
            } else if !self.broker_allow_list.is_empty() && codes::needs_broker_allow_list(code) {
                ("brokerAllowList", &self.broker_allow_list)
            } else {
                return Ok(());
            };
        let refused = check_allowed(key, list, code, ctx.peer.map(|p| p.ip()));
        refused.map_err(|remark| {
            let refusal = Refusal::NotAllowed(remark);
            self.warn_refused(ctx, code, &refusal);
            refusal
        })
    }

    /// A refused request's warning; an audited one's is its audit line.
    fn warn_refused(&mut self, ctx: &RequestContext, code: i32, why: &dyn std::fmt::Display) {
        if audit::namesrv_label(code).is_none() && self.stats.refusals.admit(ctx.now_ms) {
            warn!(
                "refused {} from {:?}: {why}",
                codes::request_name(code),
                ctx.peer
            );
        }
    }

    fn apply(
        &mut self,
        ctx: &RequestContext,
        counters: &LoopStats,
        request: Request<'_>,
        ticket: Ticket,
        work: BodyWork,
    ) -> Result<Reply, Refusal> {
        match request {
            Request::PutKvConfig(r) => self.put_kv_config(ctx, r, ticket),
            Request::GetKvConfig(r) => self.get_kv_config(r),
            Request::DeleteKvConfig(r) => self.delete_kv_config(ctx, r, ticket),
            Request::GetKvList(r) => self.get_kv_list(r),
            Request::RegisterBroker(r) => self.register_broker(ctx, &r, work),
            Request::UnregisterBroker(r) => self.unregister_broker(ctx, r),
            Request::BrokerHeartbeat(r) => self.broker_heartbeat(ctx, r),
            Request::QueryDataVersion(r) => self.query_data_version(ctx, r),
            Request::GetBrokerMemberGroup(r) => self.broker_member_group(r),
            Request::GetRouteInfo(r) => self.route_info(r),
            Request::GetBrokerClusterInfo => self.cluster_info(),
            Request::WipeWritePerm(r) => self.write_perm(r, false),
            Request::AddWritePerm(r) => self.write_perm(r, true),
            Request::GetAllTopicList => self.listed_topics(ListKind::All, ticket),
            Request::DeleteTopic(r) => self.delete_topic(r),
            Request::RegisterTopic(r) => self.register_topic(ctx, r, work),
            Request::GetTopicsByCluster(r) => self.topics_by_cluster(r, ticket),
            Request::GetSystemTopicList => self.system_topic_list(),
            Request::GetUnitTopicList => self.listed_topics(ListKind::Unit, ticket),
            Request::GetHasUnitSubTopicList => self.listed_topics(ListKind::UnitSub, ticket),
            Request::GetHasUnitSubUnunitTopicList => {
                self.listed_topics(ListKind::UnitSubNotUnit, ticket)
            }
            Request::GetNamesrvConfig => self.get_config(),
            Request::UpdateNamesrvConfig(r) => self.update_config(r, ticket),
            Request::Stats => self.stats(counters),
        }
    }

    pub(crate) fn name_limits(&self) -> NameLimits {
        NameLimits::from_config(&self.config)
    }

    /// The audit line of an answer (given now or later): every refusal of an audited code,
    /// and a change its handler described ([`Reply::audit`]).
    fn audit(&mut self, ticket: &Ticket, reply: &Reply) {
        let Some(label) = audit::namesrv_label(ticket.code) else {
            return;
        };
        if reply.code == response::SUCCESS && reply.audit.is_none() {
            return;
        }
        let what = reply.audit.as_deref().unwrap_or_default();
        let now_ms = self.started.elapsed().as_millis() as u64;
        let refusals = &mut self.stats.refusals;
        let remark = reply.remark.as_deref();
        audit::log(label, ticket.peer, what, reply.code, remark, || {
            refusals.admit(now_ms)
        });
    }

    /// The answer to a request that waited, its audit line written.
    fn answer_later(&mut self, ticket: Ticket, reply: &Reply) -> DeferredReply {
        self.audit(&ticket, reply);
        self.deferred_reply(ticket, reply)
    }

    fn deferred_reply(&self, ticket: Ticket, reply: &Reply) -> DeferredReply {
        let mut frame = Vec::new();
        if !ticket.oneway {
            self.write_reply(ticket.opaque, reply, &mut frame);
        }
        DeferredReply {
            conn: ticket.conn,
            frame,
        }
    }
}

use durable::Awaiting;
pub use off_loop::{body_weight, decode_off_loop, BodyWork, DecodeJob, Decoded};
use register::StepsJob;
pub use register::STEPPED_APPLY_TOPICS;
use reply::{encode_reply, Reply, ReplyExt, ReplyTemplates};
use stats::Stats;

mod admin;
mod broker;
mod config;
mod durable;
mod kv;
mod metrics;
mod off_loop;
mod register;
mod removal;
mod reply;
mod routes;
mod stats;

#[cfg(test)]
mod tests;
