//! Typed request -> behaviour: one handler per [`Request`], applied to the tables, and the
//! one place where errors (a [`ParseError`] or a handler's refusal, [`Refusal`]) become
//! response codes and Java's remarks (docs/protocol.md §3). Before parsing, the code's row
//! decides whether an allow-list applies (`adminAllowList`, `brokerAllowList`; README
//! "Security" has the threat model); registrations are checked against the registry's bounds
//! before they are applied. Refusals are logged at warn, a few lines per interval and then a
//! count, so that a flood of bad requests cannot become a flood of synchronous log writes on
//! the loop.
//!
//! The processor owns the state (route table, KV store, config, counters) and runs on the
//! loop thread. It never blocks on the network or the disk: unregistrations go to the batching
//! thread and come back de-duplicated through [`Processor::apply_unregister_batch`]; 905
//! notifications leave as encoded frames for the sender thread; KV changes and config updates
//! go to the durable writer, and their requests are answered by
//! [`Processor::finish_durable_writes`] once the change is on disk (all through the
//! [`Outbox`]). Such a request's handling says so in [`Effects::deferred`]: the server then
//! holds the connection's later frames, so its answers keep their order.
//!
//! A request with a large body (REGISTER_BROKER, REGISTER_TOPIC_IN_NAMESRV) is handled in two
//! halves around the decode worker (`off_loop`, [`Effects::off_loop`]); a registration with
//! much topic work is applied in steps and answered after the last one (`register`,
//! [`Processor::run_topic_steps`], [`Effects::deferred`] again). Meanwhile the server holds
//! every request whose code row says it writes routes (`remoting::codes::writes_routes`).
//!
//! One file per area, mirroring `crate::request`: `kv` (KV config), `register` (the
//! registration pipeline), `broker` (heartbeat, data version, unregistration, member group),
//! `removal` (unregistration batches, expiry, closed connections), `routes` (route lookups,
//! topic lists, cluster info), `admin` (write permission, topic delete and register, stats),
//! `config` (the server's properties), beside `off_loop` (large bodies and the decode worker),
//! `reply` (answers and their templates), `durable` (answers given once the disk has a change)
//! and `stats` (counters and rate-limited log lines). Adding a request code: one row in
//! `remoting::codes`, one typed request in `crate::request`, one arm in
//! [`Processor::apply`] (an exhaustive match: the compiler finds a missing handler).

use crate::config::{Cidr, NamesrvConfig, SerializeTypeSetting, UpdateError};
use crate::event_loop::oneway::Oneway;
use crate::kv::{DurableWriter, KvRefusal, KvStore};
use crate::remoting::codes::{self, response};
use crate::remoting::command::{RemotingCommand, SerializeType};
use crate::request::{BodyDone, NameLimits, ParseError, Request};
use crate::route::model::{BodyLimits, DecodeScratch, RegisterBody};
use crate::route::table::{
    BoundExceeded, ConnId, RemovalReason, RouteBounds, RouteTable, UnregisterRequest, FLAG_UNIT,
    FLAG_UNIT_SUB,
};
use crossbeam_channel::Sender;
use log::{debug, warn};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

/// The KV namespace the name server itself reads (order topic configuration).
pub const ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

/// A broker to unregister, and why it goes.
pub type Unregistration = (UnregisterRequest, RemovalReason);

/// Unregistrations as the batching thread takes them and hands them back (de-duplicated by
/// request).
pub type UnregisterBatch = Vec<Unregistration>;

/// Where the processor sends work that must not run on the loop: plain messages over bounded
/// channels (a full queue is logged and counted, never waited for).
pub struct Outbox {
    /// To the batching thread (capacity `unRegisterBrokerQueueCapacity` messages).
    pub unregistrations: Sender<UnregisterBatch>,
    /// To the sender thread: NOTIFY_MIN_BROKER_ID_CHANGE frames.
    pub notifications: Sender<Oneway>,
    /// To the durable writer: KV changes and config file writes (and their results back).
    pub durable: DurableWriter,
}

/// Where a request came from and what the server around it looks like.
#[derive(Debug, Clone, Copy)]
pub struct RequestContext {
    pub conn: Option<ConnId>,
    pub peer: Option<SocketAddr>,
    pub now_ms: u64,
    /// Where an answer given later goes (a request whose change must be durable first).
    pub reply_to: Option<LoopConnId>,
}

/// The loop's generation-checked connection id: a deferred answer to a closed connection
/// finds nothing.
pub type LoopConnId = crate::event_loop::ConnId;

/// An answer given once its change is durable (or failed): the frame for the connection,
/// empty for a oneway request. The server writes it and releases the connection.
#[derive(Debug)]
pub struct DeferredReply {
    pub conn: LoopConnId,
    pub frame: Vec<u8>,
}

/// Counters kept by the server loop, reported by the stats extension.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerCounters {
    pub connections: usize,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Bytes all connections' buffers hold now (bounded by maxBufferedBytes).
    pub buffered_bytes: usize,
    /// Connections refused by maxConnections, the per-address limit or the reserve.
    pub refused_connections: u64,
    /// Connections closed because a frame did not complete within frameReadTimeoutMillis.
    pub frame_timeouts: u64,
    /// Peers closed for not reading their replies while the buffer budget was spent.
    pub closed_over_budget: u64,
    /// `accept` failures (out of descriptors and the like).
    pub accept_failures: u64,
    /// The loop's longest turn so far, in microseconds, and its turns over 2 ms.
    pub max_turn_micros: u64,
    pub long_turns: u64,
}

/// What the server must do after a request besides writing the reply.
#[derive(Debug, Clone, Copy, Default)]
pub struct Effects {
    /// UPDATE_NAMESRV_CONFIG applied: re-read timer and limit settings.
    pub config_changed: bool,
    /// Not answered yet: the answer comes from [`Processor::finish_durable_writes`] (or, for a
    /// registration applied in steps, from [`Processor::run_topic_steps`]); hold the
    /// connection's later frames until then.
    pub deferred: bool,
    /// A body too large for the loop: nothing was done nor answered; hand the request and
    /// this job to the decode worker ([`decode_off_loop`]), then handle it again with what
    /// comes back ([`BodyWork::OffLoop`]), holding the connection's later frames meanwhile.
    pub off_loop: Option<DecodeJob>,
}

/// Java's remark when a request queue is full.
const OVERLOAD_REMARK: &str = "[OVERLOAD]system busy, start flow control for a while";

/// Why a request is refused, or failed after it was taken: each handler names its reason,
/// and [`Refusal::reply`] is the one place where a reason becomes a response code and remark
/// (Java's, where Java has one).
#[derive(Debug)]
enum Refusal {
    /// The request does not parse: REQUEST_CODE_NOT_SUPPORTED for a code not answered here,
    /// SYSTEM_ERROR with the error's text otherwise.
    Parse(ParseError),
    /// The peer is outside the allow-list `list` that gates request `code`.
    NotAllowed {
        code: i32,
        list: &'static str,
    },
    /// With an allow-list set, an UNREGISTER_BROKER of `broker` (`name@addr (cluster)`) not
    /// sent over that broker's registration connection, nor from an admin address.
    UnregisterNotAllowed {
        broker: String,
    },
    /// A registry bound (`maxBrokers`, `maxTopics`, `maxTopicsPerBroker`).
    Bound(BoundExceeded),
    /// A registration body whose CRC is not its header's `bodyCrc32`.
    CrcMismatch,
    /// The unregistration queue is full (Java answers SYSTEM_ERROR without a remark).
    UnregisterQueueFull,
    /// A request queue of the server is full.
    Overloaded,
    /// Routes asked before `waitSecondsForService` has passed.
    NotReady,
    /// A topic list the config turns off (`enableTopicList`, `enableAllTopicList`).
    ListDisabled,
    TopicNotExist(String),
    NoKvItem {
        namespace: String,
        key: String,
    },
    NoKvNamespace(String),
    /// A KV change its limits refuse (SYSTEM_BUSY when the disk is behind).
    Kv(KvRefusal),
    /// A config update refused by its checks.
    Config(UpdateError),
    /// Config updates waiting for the disk are at their limit.
    ConfigBacklog {
        waiting: usize,
    },
    /// A change that must be answered later, asked with no connection to answer.
    NoConnection,
    /// The durable writer's thread has ended (a bug): nothing was changed.
    KvWriterGone,
    ConfigWriterGone,
    WriterGone,
    /// The durable writer could not write a KV change (the error) or a config file (the
    /// remark).
    KvNotPersisted(String),
    ConfigNotWritten(String),
}

impl Refusal {
    /// The response code (with [`Refusal::reply`], the one place where refusals become codes).
    fn code(&self) -> i32 {
        use response::{
            NO_PERMISSION, QUERY_NOT_FOUND, REQUEST_CODE_NOT_SUPPORTED, SYSTEM_BUSY, SYSTEM_ERROR,
            TOPIC_NOT_EXIST,
        };
        match self {
            Refusal::Parse(ParseError::NotSupported(_)) => REQUEST_CODE_NOT_SUPPORTED,
            Refusal::NotAllowed { .. } | Refusal::UnregisterNotAllowed { .. } => NO_PERMISSION,
            Refusal::Overloaded | Refusal::ConfigBacklog { .. } => SYSTEM_BUSY,
            Refusal::Kv(refusal) if refusal.is_busy() => SYSTEM_BUSY,
            Refusal::TopicNotExist(_) => TOPIC_NOT_EXIST,
            Refusal::NoKvItem { .. } | Refusal::NoKvNamespace(_) => QUERY_NOT_FOUND,
            Refusal::Config(e) => e.response_code(),
            _ => SYSTEM_ERROR,
        }
    }

    /// The answer: the code and the remark ([`Display`](std::fmt::Display)), in the shape
    /// Java's answer has.
    fn reply(self) -> Reply {
        match self {
            // Java answers without a remark.
            Refusal::UnregisterQueueFull => Reply {
                code: self.code(),
                ..Reply::ok()
            },
            // Java built these with a response header: `"extFields":{}`.
            Refusal::CrcMismatch | Refusal::NoKvItem { .. } => Reply {
                ext: ReplyExt::Pairs(Vec::new()),
                ..Reply::error(self.code(), self.to_string())
            },
            _ => Reply::error(self.code(), self.to_string()),
        }
    }
}

/// The remark.
impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Parse(e) => write!(f, "{e}"),
            Refusal::NotAllowed { code, list } => {
                write!(f, "request {code} is not allowed from this address ({list})")
            }
            Refusal::UnregisterNotAllowed { broker } => write!(
                f,
                "UNREGISTER_BROKER of {broker} refused: not sent over that broker's registration connection, nor from an address in adminAllowList"
            ),
            Refusal::Bound(e) => write!(f, "{e}"),
            Refusal::CrcMismatch => f.write_str("crc32 not match"),
            Refusal::UnregisterQueueFull => f.write_str("the unregistration queue is full"),
            Refusal::Overloaded => f.write_str(OVERLOAD_REMARK),
            Refusal::NotReady => f.write_str("name server not ready"),
            Refusal::ListDisabled => f.write_str("disable"),
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
            Refusal::NoConnection => f.write_str("no connection to answer"),
            Refusal::KvWriterGone => {
                f.write_str("persisting the KV config failed: its writer thread has ended")
            }
            Refusal::ConfigWriterGone => f.write_str(
                "cannot write the config file: the writer thread has ended; nothing was changed",
            ),
            Refusal::WriterGone => {
                f.write_str("persisting failed: the writer thread has ended; nothing was changed")
            }
            Refusal::KvNotPersisted(e) => write!(f, "persisting the KV config failed: {e}"),
            Refusal::ConfigNotWritten(remark) => f.write_str(remark),
        }
    }
}

impl From<ParseError> for Refusal {
    fn from(e: ParseError) -> Self {
        Refusal::Parse(e)
    }
}

/// The name server's state and request handling.
pub struct Processor {
    pub table: RouteTable,
    kv: KvStore,
    config: NamesrvConfig,
    started: Instant,
    outbox: Outbox,
    stats: Stats,
    body_limits: BodyLimits,
    admin_allow_list: Vec<Cidr>,
    /// Requests waiting for the durable writer, in the order their jobs were submitted.
    awaiting: VecDeque<Awaiting>,
    next_write_id: u64,
    /// UPDATE_NAMESRV_CONFIGs waiting for the one being written (one at a time, so that each
    /// is checked against the config the previous one made).
    config_queue: VecDeque<(Ticket, String)>,
    config_writing: bool,
    /// When a full KV store was last warned about.
    kv_full_warned_ms: Option<u64>,
    broker_allow_list: Vec<Cidr>,
    bounds: RouteBounds,
    /// Brokers found expired by the scan in progress, submitted together when it ends, and
    /// their connections, closed then.
    expired_this_scan: UnregisterBatch,
    expired_conns_this_scan: Vec<ConnId>,
    /// Bodies decoded off the loop and applied (see [`Processor::take_spent_bodies`]).
    spent_bodies: Vec<RegisterBody>,
    /// Strings of the changed bodies applied on the loop, for the next ones decoded here.
    scratch: DecodeScratch,
    /// Registrations whose topic configs are put in steps, oldest first; and the one the
    /// request being handled started.
    topic_steps: VecDeque<StepsJob>,
    new_steps: Option<StepsJob>,
    templates: ReplyTemplates,
}

/// Where a deferred answer goes.
#[derive(Debug, Clone, Copy)]
struct Ticket {
    conn: LoopConnId,
    opaque: i32,
    oneway: bool,
}

/// Whether `peer` is inside `list`; an empty list lets everyone in, and so does a request
/// with no peer address (made inside the process).
fn allows(list: &[Cidr], peer: Option<SocketAddr>) -> bool {
    match peer {
        Some(p) => list.is_empty() || list.iter().any(|c| c.contains(p.ip())),
        None => true,
    }
}

impl Processor {
    pub fn new(config: NamesrvConfig, mut kv: KvStore, outbox: Outbox) -> Self {
        let table = RouteTable::new(route_settings(&config), 1000);
        kv.set_limits(crate::kv::KvLimits::from_config(&config));
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
        Processor {
            table,
            kv,
            body_limits: body_limits(&config),
            admin_allow_list: Cidr::parse_list(&config.admin_allow_list),
            broker_allow_list: Cidr::parse_list(&config.broker_allow_list),
            bounds: route_bounds(&config),
            config,
            started: Instant::now(),
            outbox,
            stats: Stats::default(),
            awaiting: VecDeque::new(),
            next_write_id: 0,
            config_queue: VecDeque::new(),
            config_writing: false,
            kv_full_warned_ms: None,
            expired_this_scan: Vec::new(),
            expired_conns_this_scan: Vec::new(),
            spent_bodies: Vec::new(),
            scratch: DecodeScratch::default(),
            topic_steps: VecDeque::new(),
            new_steps: None,
            templates: ReplyTemplates::new(),
        }
    }

    pub fn config(&self) -> &NamesrvConfig {
        &self.config
    }

    fn serialize_type(&self) -> SerializeType {
        match self.config.serialize_type {
            SerializeTypeSetting::Json => SerializeType::Json,
            SerializeTypeSetting::RocketMq => SerializeType::RocketMq,
        }
    }

    /// Handles one request and appends its response frame (if any) to `out`.
    pub fn handle(
        &mut self,
        ctx: &RequestContext,
        counters: &ServerCounters,
        cmd: &RemotingCommand,
        out: &mut Vec<u8>,
    ) -> Effects {
        self.handle_with(ctx, counters, cmd, BodyWork::OnLoop, out)
    }

    /// As [`Processor::handle`], for a request whose body the decode worker has decoded
    /// (`work`). A request is counted when it is answered, not when it goes off the loop.
    pub fn handle_with(
        &mut self,
        ctx: &RequestContext,
        counters: &ServerCounters,
        cmd: &RemotingCommand,
        work: BodyWork,
        out: &mut Vec<u8>,
    ) -> Effects {
        if cmd.is_response() {
            // We only send oneway requests (905), so no response is ever expected.
            debug!(
                "dropping unexpected response frame (opaque {}) from {:?}",
                cmd.opaque, ctx.peer
            );
            return Effects::default();
        }
        let mut effects = Effects::default();
        // Only a registration handled just now may leave steps to run (not one whose handling
        // panicked halfway).
        self.new_steps = None;
        let ticket = ctx.reply_to.map(|conn| Ticket {
            conn,
            opaque: cmd.opaque,
            oneway: cmd.is_oneway(),
        });
        let reply = match self.dispatch(ctx, counters, cmd, ticket, work) {
            Ok(r) => r,
            Err(refusal) => {
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
        self.stats.requests_by_code.count(cmd.code);
        if let Some(mut job) = self.new_steps.take() {
            match ticket {
                Some(ticket) => {
                    // Answered when the last step is done: success means the change was made.
                    job.reply = Some(self.deferred_reply(ticket, &reply));
                    self.topic_steps.push_back(job);
                    effects.deferred = true;
                    return effects;
                }
                None => {
                    // No connection to answer later (an in-process caller): applied now.
                    while !self
                        .table
                        .apply_topic_steps(&mut job.steps, &job.body, usize::MAX)
                    {
                    }
                    self.finish_steps(job, ctx.now_ms, &mut Vec::new());
                }
            }
        }
        if reply.deferred {
            effects.deferred = true;
        } else if !cmd.is_oneway() {
            self.write_reply(cmd.opaque, &reply, out);
        }
        self.log_change_summary(ctx.now_ms);
        effects
    }

    /// Answers `cmd` SYSTEM_BUSY without handling it (the loop's overload path: a queue in
    /// front of the processor is full).
    pub fn reply_overloaded(&mut self, cmd: &RemotingCommand, out: &mut Vec<u8>) {
        self.stats.requests_by_code.count(cmd.code);
        self.stats.rejected_busy += 1;
        if !cmd.is_oneway() {
            self.write_reply(cmd.opaque, &Refusal::Overloaded.reply(), out);
        }
    }

    fn write_reply(&self, opaque: i32, reply: &Reply, out: &mut Vec<u8>) {
        let serialize_type = self.serialize_type();
        if !self.templates.write(serialize_type, opaque, reply, out) {
            encode_reply(serialize_type, opaque, reply, out);
        }
    }

    /// The allow-lists, then (unless it goes off the loop first) the typed request, then its
    /// handler.
    fn dispatch(
        &mut self,
        ctx: &RequestContext,
        counters: &ServerCounters,
        cmd: &RemotingCommand,
        ticket: Option<Ticket>,
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
        let done = match &work {
            BodyWork::OffLoop(_) => BodyDone::Decoded,
            BodyWork::OnLoop => BodyDone::Nothing,
        };
        match Request::parse_after(cmd, &limits, done) {
            Ok(request) => self.apply(ctx, counters, request, ticket, work),
            Err(e) => {
                if !matches!(e, ParseError::NotSupported(_)) {
                    self.warn_refused(ctx, cmd.code, &e);
                }
                Err(Refusal::Parse(e))
            }
        }
    }

    /// `adminAllowList` for the admin writes, `brokerAllowList` for what brokers report about
    /// themselves. Both are off by default, and then the code is not even looked up.
    fn check_allow_lists(&mut self, ctx: &RequestContext, code: i32) -> Result<(), Refusal> {
        let (key, list) =
            if !self.admin_allow_list.is_empty() && codes::needs_admin_allow_list(code) {
                ("adminAllowList", &self.admin_allow_list)
            } else if !self.broker_allow_list.is_empty() && codes::needs_broker_allow_list(code) {
                ("brokerAllowList", &self.broker_allow_list)
            } else {
                return Ok(());
            };
        if allows(list, ctx.peer) {
            return Ok(());
        }
        let refusal = Refusal::NotAllowed { code, list: key };
        self.warn_refused(ctx, code, &refusal);
        Err(refusal)
    }

    /// A refused request at warn, rate-limited.
    fn warn_refused(&mut self, ctx: &RequestContext, code: i32, why: &dyn std::fmt::Display) {
        if self.stats.refusals.admit(ctx.now_ms) {
            warn!(
                "refused {} from {:?}: {why}",
                codes::request_name(code),
                ctx.peer
            );
        }
    }

    /// One handler per typed request (`work`: what the decode worker made of its body, for
    /// the two requests with large bodies).
    fn apply(
        &mut self,
        ctx: &RequestContext,
        counters: &ServerCounters,
        request: Request<'_>,
        ticket: Option<Ticket>,
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
            Request::GetAllTopicList => self.all_topic_list(),
            Request::DeleteTopic(r) => self.delete_topic(r),
            Request::RegisterTopic(r) => self.register_topic(ctx, r, work),
            Request::GetTopicsByCluster(r) => self.topics_by_cluster(r),
            Request::GetSystemTopicList => self.system_topic_list(),
            Request::GetUnitTopicList => self.unit_topics(|f| f & FLAG_UNIT != 0),
            Request::GetHasUnitSubTopicList => self.unit_topics(|f| f & FLAG_UNIT_SUB != 0),
            Request::GetHasUnitSubUnunitTopicList => {
                self.unit_topics(|f| f & FLAG_UNIT_SUB != 0 && f & FLAG_UNIT == 0)
            }
            Request::GetNamesrvConfig => self.get_config(),
            Request::UpdateNamesrvConfig(r) => self.update_config(r, ticket),
            Request::Stats => self.stats(counters),
        }
    }

    fn name_limits(&self) -> NameLimits {
        NameLimits {
            max_name_length: self.config.max_name_length as usize,
            max_topic_name_length: self.config.max_topic_name_length as usize,
            max_queue_nums: self.config.max_queue_nums.min(i32::MAX as u32) as i32,
        }
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

use config::{body_limits, route_bounds, route_settings};
use durable::Awaiting;
pub use off_loop::{body_weight, decode_off_loop, BodyWork, DecodeJob, Decoded};
use register::StepsJob;
pub use register::STEPPED_APPLY_TOPICS;
use reply::{encode_reply, Reply, ReplyBody, ReplyExt, ReplyTemplates};
use stats::{log_grouped, Stats};

mod admin;
mod broker;
mod config;
mod durable;
mod kv;
mod off_loop;
mod register;
mod removal;
mod reply;
mod routes;
mod stats;

#[cfg(test)]
mod tests;
