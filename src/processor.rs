//! Typed request -> behaviour: one handler per [`Request`], applied to the tables, and the
//! one place where errors (a [`ParseError`] or a handler's refusal) become response codes and
//! Java's remarks (docs/protocol.md §3). Before parsing, the code's row decides whether an
//! allow-list applies (`adminAllowList`, `brokerAllowList`; README "Security" has the threat
//! model); registrations are checked against the registry's bounds before they are applied.
//! Refusals are logged at warn, a few lines per interval and then a count, so that a flood of
//! bad requests cannot become a flood of synchronous log writes on the loop.
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
//! A registration with many topics (a decoded body of more than [`STEPPED_APPLY_TOPICS`]) is
//! applied in steps: everything but putting its topic configs at once, then the topic configs
//! a slice per step ([`Processor::run_topic_steps`], called by the server within its per-turn
//! budget), and it is answered after the last step ([`Effects::deferred`] again). Meanwhile the
//! route table has one writer: requests that would change it
//! ([`Processor::waits_for_topic_steps`]), further registrations and unregistrations wait for
//! the last step, so the tables end as a one-go apply leaves them.

use crate::config::{Cidr, ConfigPlan, NamesrvConfig, SerializeTypeSetting};
use crate::event_loop::oneway::Oneway;
use crate::kv::{
    Change, Commit, Done, DurableWriter, Job, KvLimits, KvRefusal, KvStore, WriterGone,
};
use crate::remoting::codes::{self, request, response, version, FLAG_ONEWAY, FLAG_RESPONSE};
use crate::remoting::command::{
    encode_frame, FrameTemplate, Header, RemotingCommand, SerializeType,
};
use crate::request::{
    BodyDone, BrokerHeartbeat, BrokerRef, DeleteTopic, GetBrokerMemberGroup, GetKvList,
    GetRouteInfo, GetTopicsByCluster, KvKey, NameLimits, ParseError, QueryDataVersion,
    RegisterBroker, RegisterTopic, Request, UpdateNamesrvConfig, WritePerm,
};
use crate::route::model::{
    self, BodyLimits, DecodeScratch, Dialect, QueueData, RegisterBody, TopicRouteData,
};
use crate::route::table::{
    BodyFingerprint, BoundExceeded, ConnId, ExpiredBroker, MinIdNotification, RegisterRequest,
    RegisterResult, RemovalReason, RouteBounds, RouteSettings, RouteTable, Takeover, TopicSteps,
    TopicsInput, UnregisterRequest, FLAG_UNIT, FLAG_UNIT_SUB,
};
use crossbeam_channel::{Sender, TrySendError};
use log::{debug, error, info, warn};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Effects {
    /// UPDATE_NAMESRV_CONFIG applied: re-read timer and limit settings.
    pub config_changed: bool,
    /// Not answered yet: the answer comes from [`Processor::finish_durable_writes`] (or, for a
    /// registration applied in steps, from [`Processor::run_topic_steps`]); hold the
    /// connection's later frames until then.
    pub deferred: bool,
    /// A REGISTER_BROKER whose body changed and is to be decoded off the loop
    /// ([`BodyWork::DecodeOffLoop`]): nothing was answered; hand it to the decode worker
    /// ([`decode_registration`]) with this fingerprint, then back as [`BodyWork::Decoded`].
    pub decode_off_loop: Option<BodyFingerprint>,
}

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

/// Request counts by code: a flat array for RocketMQ's range (no hashing per request), a map
/// for anything else a peer may send.
#[derive(Debug)]
struct RequestCounts {
    low: Vec<u64>,
    other: HashMap<i32, u64>,
}

impl Default for RequestCounts {
    fn default() -> Self {
        RequestCounts {
            low: vec![0; 1024],
            other: HashMap::new(),
        }
    }
}

impl RequestCounts {
    fn count(&mut self, code: i32) {
        match usize::try_from(code).ok().and_then(|c| self.low.get_mut(c)) {
            Some(n) => *n += 1,
            // Unknown codes from hostile peers must not grow this map without bound.
            None if self.other.len() < 1024 || self.other.contains_key(&code) => {
                *self.other.entry(code).or_insert(0) += 1
            }
            None => {}
        }
    }

    fn sorted(&self) -> Vec<(i32, u64)> {
        let mut v: Vec<(i32, u64)> = self
            .low
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(c, n)| (c as i32, *n))
            .chain(self.other.iter().map(|(c, n)| (*c, *n)))
            .collect();
        v.sort_unstable();
        v
    }
}

#[derive(Debug, Default)]
struct Stats {
    requests_by_code: RequestCounts,
    registrations: u64,
    registrations_unchanged: u64,
    expiries: u64,
    unregistrations: u64,
    unregister_batches: u64,
    largest_batch: usize,
    unregister_queue_full: u64,
    rejected_busy: u64,
    /// Route changes since the last summary line.
    changes: ChangeSummary,
    /// Refused requests, bounds reached, addresses taken over: warned a few lines at a time.
    refusals: WarnLimiter,
    bounds_reached: WarnLimiter,
    takeovers: WarnLimiter,
}

/// Lines per interval a [`WarnLimiter`] lets through; the rest are counted.
const WARN_LINES: u32 = 5;

/// Warnings of one kind, at most [`WARN_LINES`] per [`CHANGE_SUMMARY_INTERVAL_MS`]; the ones
/// past that are counted and reported in one line when the interval is over.
#[derive(Debug, Default, PartialEq, Eq)]
struct WarnLimiter {
    /// When the running interval ends; 0 when nothing was warned since the last one.
    due_ms: u64,
    lines: u32,
    suppressed: u64,
}

impl WarnLimiter {
    /// Whether this event gets a line of its own (otherwise it is counted).
    fn admit(&mut self, now_ms: u64) -> bool {
        if self.due_ms == 0 {
            self.due_ms = now_ms.saturating_add(CHANGE_SUMMARY_INTERVAL_MS).max(1);
        }
        if self.lines < WARN_LINES {
            self.lines += 1;
            true
        } else {
            self.suppressed += 1;
            false
        }
    }

    /// Once the interval is over: resets, and returns how many events were not logged.
    fn take_due(&mut self, now_ms: u64) -> Option<u64> {
        if self.due_ms == 0 || now_ms < self.due_ms {
            return None;
        }
        let done = std::mem::take(self);
        (done.suppressed > 0).then_some(done.suppressed)
    }
}

/// How often route changes from registrations are summarised at info.
const CHANGE_SUMMARY_INTERVAL_MS: u64 = 10_000;
/// "new broker registered" lines logged one by one per interval; beyond that they are
/// counted into the summary (a cluster start registers thousands at once).
const NEW_BROKER_LINES: u32 = 10;

/// Route changes made by registrations and REGISTER_TOPIC_IN_NAMESRV, counted between info
/// lines instead of logged one line per request.
#[derive(Debug, Default, PartialEq, Eq)]
struct ChangeSummary {
    /// When the running interval ends; 0 when nothing happened since the last line.
    due_ms: u64,
    new_brokers_logged: u32,
    new_brokers_unlogged: u64,
    brokers_changed: u64,
    queue_entries_changed: u64,
    topics_registered: u64,
    queue_entries_registered: u64,
}

impl ChangeSummary {
    fn start(&mut self, now_ms: u64) {
        if self.due_ms == 0 {
            self.due_ms = now_ms.saturating_add(CHANGE_SUMMARY_INTERVAL_MS).max(1);
        }
    }

    /// Counts a first registration; true while it should still get a line of its own.
    fn new_broker(&mut self, now_ms: u64) -> bool {
        self.start(now_ms);
        if self.new_brokers_logged < NEW_BROKER_LINES {
            self.new_brokers_logged += 1;
            true
        } else {
            self.new_brokers_unlogged += 1;
            false
        }
    }

    fn broker_changed(&mut self, queue_entries: usize, now_ms: u64) {
        self.start(now_ms);
        self.brokers_changed += 1;
        self.queue_entries_changed += queue_entries as u64;
    }

    fn topic_registered(&mut self, queue_entries: usize, now_ms: u64) {
        self.start(now_ms);
        self.topics_registered += 1;
        self.queue_entries_registered += queue_entries as u64;
    }

    /// The summary line once the interval is over (and resets), if anything was counted.
    fn take_due(&mut self, now_ms: u64) -> Option<String> {
        if self.due_ms == 0 || now_ms < self.due_ms {
            return None;
        }
        let done = std::mem::take(self);
        let mut parts = Vec::new();
        if done.brokers_changed > 0 {
            parts.push(format!(
                "{} registration(s) changed {} topic queue entries",
                done.brokers_changed, done.queue_entries_changed
            ));
        }
        if done.topics_registered > 0 {
            parts.push(format!(
                "{} topic(s) registered by REGISTER_TOPIC_IN_NAMESRV with {} queue entries",
                done.topics_registered, done.queue_entries_registered
            ));
        }
        if done.new_brokers_unlogged > 0 {
            parts.push(format!(
                "{} more new broker(s) registered (listed at debug)",
                done.new_brokers_unlogged
            ));
        }
        (!parts.is_empty()).then(|| format!("route changes: {}", parts.join("; ")))
    }
}

/// An error that becomes a response code and remark.
struct Reject {
    code: i32,
    remark: String,
}

fn reject(code: i32, remark: impl Into<String>) -> Reject {
    Reject {
        code,
        remark: remark.into(),
    }
}

/// Parse errors are answered REQUEST_CODE_NOT_SUPPORTED (unknown code) or SYSTEM_ERROR, with
/// the error's text as the remark, as Java's.
impl From<ParseError> for Reject {
    fn from(e: ParseError) -> Self {
        let code = match e {
            ParseError::NotSupported(_) => response::REQUEST_CODE_NOT_SUPPORTED,
            _ => response::SYSTEM_ERROR,
        };
        reject(code, e.to_string())
    }
}

/// Reply under construction.
struct Reply {
    code: i32,
    remark: Option<String>,
    ext: ReplyExt,
    body: ReplyBody,
    /// Answered later (see [`Effects::deferred`]); nothing is written now.
    deferred: bool,
    /// Not answered: the body goes to the decode worker first (see [`Effects::decode_off_loop`]).
    decode_off_loop: Option<BodyFingerprint>,
}

/// A reply's `extFields`.
enum ReplyExt {
    /// No `extFields` member (Java's handlers without a custom response header).
    None,
    Pairs(Vec<(&'static str, String)>),
    /// QUERY_DATA_VERSION's `{"changed":"true|false"}`, written from a template.
    Changed(bool),
}

enum ReplyBody {
    None,
    Owned(Vec<u8>),
    Shared(bytes::Bytes),
}

impl ReplyBody {
    /// The body's bytes (empty for `None`).
    fn bytes(&self) -> &[u8] {
        match self {
            ReplyBody::Owned(v) => v,
            ReplyBody::Shared(b) => b,
            ReplyBody::None => &[],
        }
    }
}

/// A reply encoded field by field (what the templates hold, for the replies they cover).
fn encode_reply(serialize_type: SerializeType, opaque: i32, reply: &Reply, out: &mut Vec<u8>) {
    let header = Header {
        code: reply.code,
        language: "JAVA",
        version: version::CURRENT,
        opaque,
        flag: FLAG_RESPONSE,
        remark: reply.remark.as_deref(),
    };
    let body = reply.body.bytes();
    // One encoder call (one instance of it) for every kind of ext fields.
    let (pairs, changed): (&[(&str, String)], _) = match &reply.ext {
        ReplyExt::None => (&[], None),
        ReplyExt::Pairs(pairs) => (pairs, None),
        ReplyExt::Changed(c) => (&[], Some(if *c { "true" } else { "false" })),
    };
    let ext = (!matches!(reply.ext, ReplyExt::None)).then(|| {
        let pairs = pairs.iter().map(|(k, v)| (*k, v.as_str()));
        pairs.chain(changed.map(|v| ("changed", v)))
    });
    encode_frame(out, serialize_type, &header, ext, body);
}

/// The frames of the replies sent most (heartbeats, QUERY_DATA_VERSION, routes), encoded once per
/// header codec: a reply is then a copy and the opaque's digits, the same bytes as encoding
/// it field by field.
struct ReplyTemplates {
    /// SUCCESS without remark or ext fields (any body: route lookups, cluster info...); per
    /// [`SerializeType`] (JSON, ROCKETMQ).
    ok: [FrameTemplate; 2],
    /// SUCCESS with `changed` false and true.
    changed: [[FrameTemplate; 2]; 2],
}

impl ReplyTemplates {
    fn new() -> Self {
        let header = Header {
            code: response::SUCCESS,
            language: "JAVA",
            version: version::CURRENT,
            opaque: 0,
            flag: FLAG_RESPONSE,
            remark: None,
        };
        let no_ext: Option<[(&str, &str); 0]> = None;
        let types = [SerializeType::Json, SerializeType::RocketMq];
        let changed =
            |value: &str| types.map(|t| FrameTemplate::new(t, &header, Some([("changed", value)])));
        ReplyTemplates {
            ok: types.map(|t| FrameTemplate::new(t, &header, no_ext)),
            changed: [changed("false"), changed("true")],
        }
    }

    /// Writes `reply` from its template; false when it has none.
    fn write(
        &self,
        serialize_type: SerializeType,
        opaque: i32,
        reply: &Reply,
        out: &mut Vec<u8>,
    ) -> bool {
        let Some(template) = self.of(reply, serialize_type) else {
            return false;
        };
        template.write_with_body(out, opaque, |o| o.extend_from_slice(reply.body.bytes()));
        true
    }

    /// The template for `reply`, if it has one.
    fn of(&self, reply: &Reply, serialize_type: SerializeType) -> Option<&FrameTemplate> {
        if reply.code != response::SUCCESS || reply.remark.is_some() {
            return None;
        }
        let t = serialize_type as usize;
        match &reply.ext {
            ReplyExt::None => Some(&self.ok[t]),
            ReplyExt::Changed(c) => Some(&self.changed[usize::from(*c)][t]),
            ReplyExt::Pairs(_) => None,
        }
    }
}

impl Reply {
    fn ok() -> Self {
        Reply {
            code: response::SUCCESS,
            remark: None,
            ext: ReplyExt::None,
            body: ReplyBody::None,
            deferred: false,
            decode_off_loop: None,
        }
    }
    /// The answer waits for the durable writer.
    fn later() -> Self {
        Reply {
            deferred: true,
            ..Reply::ok()
        }
    }
    fn with_body(body: Vec<u8>) -> Self {
        Reply {
            body: ReplyBody::Owned(body),
            ..Reply::ok()
        }
    }
    fn error(code: i32, remark: impl Into<String>) -> Self {
        Reply {
            code,
            remark: Some(remark.into()),
            ..Reply::ok()
        }
    }
}

impl From<Reject> for Reply {
    fn from(r: Reject) -> Self {
        Reply::error(r.code, r.remark)
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

/// Registrations with more topic work than this (topic configs to put, plus queue entries of
/// topics no longer reported to remove) are applied in steps: putting a topic config costs
/// about 1.6 µs on a busy core (a new topic; less for one already held), so 1,000 are about
/// the 2 ms a request may hold the loop.
pub const STEPPED_APPLY_TOPICS: usize = 1_000;

/// Topic configs put per step (about 0.2 ms); the server runs steps until its per-turn budget
/// is spent.
const TOPICS_PER_STEP: usize = 128;

/// A registration being applied in steps, and its answer once done.
struct StepsJob {
    steps: TopicSteps,
    body: RegisterBody,
    /// The broker was registered before: its topic changes count in the change summary (as
    /// a one-go registration's do).
    count_changes: bool,
    reply: Option<DeferredReply>,
    /// `brokerName@brokerAddr`, for the log.
    who: String,
}

/// A changed registration body, or why there is none yet.
enum ChangedBody {
    Ready(RegisterBody),
    /// To be decoded off the loop first.
    OffLoop,
    /// Refused with this answer (not an error reply of the usual shape).
    Answer(Reply),
}

fn route_settings(config: &NamesrvConfig) -> RouteSettings {
    RouteSettings {
        support_acting_master: config.support_acting_master,
        delete_topic_with_broker_registration: config.delete_topic_with_broker_registration,
        notify_min_broker_id_changed: config.notify_min_broker_id_changed,
        cache_max_bytes: config.route_cache_max_bytes as usize,
    }
}

/// The KV store's limits from the config's `kvMax*` rows.
fn kv_limits(config: &NamesrvConfig) -> KvLimits {
    KvLimits {
        max_key_length: config.kv_max_key_length as usize,
        max_value_length: config.kv_max_value_length as usize,
        max_entries: config.kv_max_entries as usize,
        max_total_bytes: config.kv_max_total_bytes as usize,
    }
}

/// UPDATE_NAMESRV_CONFIGs, and bytes of their bodies, that may wait behind the one being
/// written; more are answered SYSTEM_BUSY (each waiting one holds a connection and its body).
const MAX_WAITING_CONFIG_UPDATES: usize = 64;
const MAX_WAITING_CONFIG_BYTES: usize = 1 << 20;

/// Where a deferred answer goes.
#[derive(Debug, Clone, Copy)]
struct Ticket {
    conn: LoopConnId,
    opaque: i32,
    oneway: bool,
}

/// A request waiting for the durable writer's job `id`.
struct Awaiting {
    id: u64,
    ticket: Ticket,
    /// For a config update: what to apply once the file is written.
    plan: Option<Box<ConfigPlan>>,
}

fn route_bounds(config: &NamesrvConfig) -> RouteBounds {
    RouteBounds {
        max_brokers: config.max_brokers as usize,
        max_topics: config.max_topics as usize,
        max_topics_per_broker: config.max_topics_per_broker as usize,
    }
}

/// Whether `peer` is inside `list`; an empty list lets everyone in, and so does a request
/// with no peer address (made inside the process).
fn allows(list: &[Cidr], peer: Option<SocketAddr>) -> bool {
    match peer {
        Some(p) => list.is_empty() || list.iter().any(|c| c.contains(p.ip())),
        None => true,
    }
}

fn body_limits(config: &NamesrvConfig) -> BodyLimits {
    let mut limits = BodyLimits::default();
    limits.json.max_depth = config.max_json_depth as usize;
    limits.json.max_string_len = config.max_json_string_length as usize;
    limits.max_topics = config.max_topics_per_registration as usize;
    limits.max_inflated_len = config.max_inflated_body_length as usize;
    limits
}

impl Processor {
    pub fn new(config: NamesrvConfig, mut kv: KvStore, outbox: Outbox) -> Self {
        let table = RouteTable::new(route_settings(&config), 1000);
        kv.set_limits(kv_limits(&config));
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
            admin_allow_list: config.admin_allow_list_parsed(),
            broker_allow_list: config.broker_allow_list_parsed(),
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

    /// As [`Processor::handle`], for a REGISTER_BROKER whose body is (to be) hashed or
    /// decoded off the loop as `work` says. A body coming back decoded is not counted again.
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
        if !matches!(work, BodyWork::Decoded(_)) {
            self.stats.requests_by_code.count(cmd.code);
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
            Err(r) => {
                debug!(
                    "request {} from {:?} answered {}: {}",
                    cmd.code, ctx.peer, r.code, r.remark
                );
                r.into()
            }
        };
        if reply.decode_off_loop.is_some() {
            effects.decode_off_loop = reply.decode_off_loop;
            return effects;
        }
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

    /// Answers `cmd` with an error without handling it (the loop's overload path).
    pub fn reply_error(
        &mut self,
        cmd: &RemotingCommand,
        code: i32,
        remark: &str,
        out: &mut Vec<u8>,
    ) {
        self.stats.requests_by_code.count(cmd.code);
        self.stats.rejected_busy += 1;
        if !cmd.is_oneway() {
            self.write_reply(cmd.opaque, &Reply::error(code, remark), out);
        }
    }

    fn write_reply(&self, opaque: i32, reply: &Reply, out: &mut Vec<u8>) {
        let serialize_type = self.serialize_type();
        if !self.templates.write(serialize_type, opaque, reply, out) {
            encode_reply(serialize_type, opaque, reply, out);
        }
    }

    /// The allow-lists, then the typed request, then its handler.
    fn dispatch(
        &mut self,
        ctx: &RequestContext,
        counters: &ServerCounters,
        cmd: &RemotingCommand,
        ticket: Option<Ticket>,
        work: BodyWork,
    ) -> Result<Reply, Reject> {
        self.check_allow_lists(ctx, cmd.code)?;
        let limits = self.name_limits();
        let done = match &work {
            BodyWork::Hashed(Some(fingerprint)) => BodyDone::Hashed(*fingerprint),
            BodyWork::Decoded(d) => BodyDone::Hashed(d.fingerprint),
            BodyWork::RouteDecoded(_) => BodyDone::Decoded,
            BodyWork::OnLoop | BodyWork::DecodeOffLoop | BodyWork::Hashed(None) => {
                BodyDone::Nothing
            }
        };
        let request = match Request::parse_after(cmd, &limits, done) {
            Ok(request) => request,
            Err(e) => {
                if !matches!(e, ParseError::NotSupported(_)) {
                    self.warn_refused(ctx, cmd.code, &e);
                }
                return Err(e.into());
            }
        };
        match (request, work) {
            (Request::RegisterBroker(r), work) => self.register_broker(ctx, &r, work),
            (Request::RegisterTopic(mut r), BodyWork::RouteDecoded(decoded)) => {
                r.queue_datas = decoded.inspect_err(|e| self.warn_refused(ctx, cmd.code, e))?;
                self.register_topic(ctx, r)
            }
            (request, _) => self.apply(ctx, counters, request, ticket),
        }
    }

    /// `adminAllowList` for the admin writes, `brokerAllowList` for what brokers report about
    /// themselves. Both are off by default, and then the code is not even looked up.
    fn check_allow_lists(&mut self, ctx: &RequestContext, code: i32) -> Result<(), Reject> {
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
        let remark = format!("request {code} is not allowed from this address ({key})");
        self.warn_refused(ctx, code, &remark);
        Err(reject(response::NO_PERMISSION, remark))
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

    /// One handler per typed request.
    fn apply(
        &mut self,
        ctx: &RequestContext,
        counters: &ServerCounters,
        request: Request<'_>,
        ticket: Option<Ticket>,
    ) -> Result<Reply, Reject> {
        match request {
            Request::PutKvConfig(r) => {
                let prepared = self.kv.prepare_put(r.namespace, r.key, r.value);
                self.submit_kv_change(prepared, ticket, ctx.now_ms)
            }
            Request::GetKvConfig(r) => self.get_kv_config(r),
            Request::DeleteKvConfig(r) => {
                let prepared = self.kv.prepare_delete(r.namespace, r.key);
                self.submit_kv_change(prepared, ticket, ctx.now_ms)
            }
            Request::GetKvList(r) => self.get_kv_list(r),
            Request::RegisterBroker(r) => self.register_broker(ctx, &r, BodyWork::OnLoop),
            Request::UnregisterBroker(r) => self.unregister_broker(ctx, r),
            Request::BrokerHeartbeat(r) => self.broker_heartbeat(ctx, r),
            Request::QueryDataVersion(r) => self.query_data_version(ctx, r),
            Request::GetBrokerMemberGroup(r) => self.broker_member_group(r),
            Request::GetRouteInfo(r) => self.route_info(r),
            Request::GetBrokerClusterInfo => {
                let mut body = Vec::with_capacity(256);
                self.table.cluster_info().encode(&mut body);
                Ok(Reply::with_body(body))
            }
            Request::WipeWritePerm(r) => self.write_perm(r, false),
            Request::AddWritePerm(r) => self.write_perm(r, true),
            Request::GetAllTopicList => self.all_topic_list(),
            Request::DeleteTopic(r) => self.delete_topic(r),
            Request::RegisterTopic(r) => self.register_topic(ctx, r),
            Request::GetTopicsByCluster(r) => self.topics_by_cluster(r),
            Request::GetSystemTopicList => self.system_topic_list(),
            Request::GetUnitTopicList => self.unit_topics(|f| f & FLAG_UNIT != 0),
            Request::GetHasUnitSubTopicList => self.unit_topics(|f| f & FLAG_UNIT_SUB != 0),
            Request::GetHasUnitSubUnunitTopicList => {
                self.unit_topics(|f| f & FLAG_UNIT_SUB != 0 && f & FLAG_UNIT == 0)
            }
            Request::GetNamesrvConfig => Ok(Reply::with_body(
                self.config.to_properties_text().into_bytes(),
            )),
            Request::UpdateNamesrvConfig(r) => self.update_config(r, ticket),
            Request::Stats => Ok(Reply::with_body(self.stats_body(counters))),
        }
    }

    fn name_limits(&self) -> NameLimits {
        NameLimits {
            max_name_length: self.config.max_name_length as usize,
            max_topic_name_length: self.config.max_topic_name_length as usize,
            max_queue_nums: self.config.max_queue_nums.min(i32::MAX as u32) as i32,
        }
    }

    // ------------------------------------------------------------------ KV

    /// PUT_KV_CONFIG and DELETE_KV_CONFIG: a change the limits allow goes to the durable
    /// writer and is answered once it is on disk (or failed); one that changes nothing is
    /// answered at once.
    fn submit_kv_change(
        &mut self,
        prepared: Result<Option<Change>, KvRefusal>,
        ticket: Option<Ticket>,
        now_ms: u64,
    ) -> Result<Reply, Reject> {
        let change = match prepared {
            Ok(Some(change)) => change,
            Ok(None) => return Ok(Reply::ok()),
            Err(refusal) => return Err(self.kv_refused(refusal, now_ms)),
        };
        let Some(ticket) = ticket else {
            // Every request the server hands over has a connection; nothing to answer later.
            self.kv.cancel(&change);
            return Err(reject(response::SYSTEM_ERROR, "no connection to answer"));
        };
        self.next_write_id += 1;
        let id = self.next_write_id;
        match self.outbox.durable.submit(Job::Change { id, change }) {
            Ok(()) => {
                self.awaiting.push_back(Awaiting {
                    id,
                    ticket,
                    plan: None,
                });
                Ok(Reply::later())
            }
            Err(job) => {
                if let Job::Change { change, .. } = job {
                    self.kv.cancel(&change);
                }
                Err(reject(
                    response::SYSTEM_ERROR,
                    "persisting the KV config failed: its writer thread has ended",
                ))
            }
        }
    }

    /// A change the KV limits refuse: `1` with the limit named, or `2` when the disk is
    /// behind (trying again later helps). A full store is warned about every 10 s at most.
    fn kv_refused(&mut self, refusal: KvRefusal, now_ms: u64) -> Reject {
        let full = matches!(
            refusal,
            KvRefusal::TooManyEntries { .. } | KvRefusal::TooManyBytes { .. }
        );
        let due = match self.kv_full_warned_ms {
            Some(at) => now_ms >= at + 10_000,
            None => true,
        };
        if full && due {
            self.kv_full_warned_ms = Some(now_ms);
            let usage = self.kv.usage();
            warn!(
                "KV config {} is full ({} entries, {} bytes): {refusal}",
                self.kv.path().display(),
                usage.entries,
                usage.bytes
            );
        }
        let code = if refusal.is_busy() {
            response::SYSTEM_BUSY
        } else {
            response::SYSTEM_ERROR
        };
        reject(code, refusal.to_string())
    }

    /// Requests waiting for the durable writer.
    pub fn writes_in_flight(&self) -> usize {
        self.awaiting.len()
    }

    /// Takes what the durable writer finished: KV changes become visible (and the routes
    /// built from ORDER_TOPIC_CONFIG are dropped from the cache), config updates are applied,
    /// and the waiting requests get their answers, in the order they were asked.
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

    /// The writer thread ended (a bug) with requests unanswered: they (and the config updates
    /// waiting their turn) are answered failed rather than held for ever.
    fn writer_gone(&mut self, replies: &mut Vec<DeferredReply>) {
        error!(
            "BUG: the KV writer thread has ended; {} request(s) answered failed",
            self.awaiting.len()
        );
        self.kv.forget_in_flight();
        self.config_writing = false;
        let failed = Reply::error(
            response::SYSTEM_ERROR,
            "persisting failed: the writer thread has ended; nothing was changed",
        );
        let tickets: Vec<Ticket> = std::mem::take(&mut self.awaiting)
            .into_iter()
            .map(|waiting| waiting.ticket)
            .chain(
                std::mem::take(&mut self.config_queue)
                    .into_iter()
                    .map(|(t, _)| t),
            )
            .collect();
        for ticket in tickets {
            replies.push(self.deferred_reply(ticket, &failed));
        }
    }

    fn kv_committed(&mut self, commit: Commit, replies: &mut Vec<DeferredReply>) {
        let replaced = self.kv.apply(&commit);
        if !replaced.is_empty() {
            // If the writer is gone they are freed here instead.
            let _ = self.outbox.durable.submit(Job::Discard(replaced));
        }
        let reply = match &commit.result {
            Ok(_) => {
                log_grouped(
                    log::Level::Info,
                    "KV config",
                    commit.changes.iter().map(|(_, c)| {
                        let verb = if c.op == crate::kv::Op::Delete {
                            "delete"
                        } else {
                            "put"
                        };
                        format!("{verb} {}/{}", c.namespace, c.key)
                    }),
                );
                for (_, change) in &commit.changes {
                    if &*change.namespace == ORDER_TOPIC_CONFIG {
                        self.table.invalidate_topic(&change.key);
                    }
                }
                Reply::ok()
            }
            Err(e) => Reply::error(
                response::SYSTEM_ERROR,
                format!("persisting the KV config failed: {e}"),
            ),
        };
        for (id, _) in &commit.changes {
            if let Some(waiting) = self.take_awaiting(*id) {
                replies.push(self.deferred_reply(waiting.ticket, &reply));
            }
        }
    }

    /// The waiting request of job `id` (normally the front: jobs finish in order).
    fn take_awaiting(&mut self, id: u64) -> Option<Awaiting> {
        let at = self.awaiting.iter().position(|a| a.id == id)?;
        self.awaiting.remove(at)
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

    fn get_kv_config(&mut self, r: KvKey<'_>) -> Result<Reply, Reject> {
        match self.kv.get(r.namespace, r.key) {
            Some(v) => Ok(Reply {
                ext: ReplyExt::Pairs(vec![("value", v.to_string())]),
                ..Reply::ok()
            }),
            None => Ok(Reply {
                ext: ReplyExt::Pairs(Vec::new()),
                ..Reply::error(
                    response::QUERY_NOT_FOUND,
                    format!("No config item, Namespace: {} Key: {}", r.namespace, r.key),
                )
            }),
        }
    }

    fn get_kv_list(&mut self, r: GetKvList<'_>) -> Result<Reply, Reject> {
        match self.kv.namespace_body(r.namespace) {
            Some(body) => Ok(Reply {
                body: ReplyBody::Shared(body),
                ..Reply::ok()
            }),
            None => Err(reject(
                response::QUERY_NOT_FOUND,
                format!("No config item, Namespace: {}", r.namespace),
            )),
        }
    }

    // ------------------------------------------------------------------ brokers

    fn register_broker(
        &mut self,
        ctx: &RequestContext,
        r: &RegisterBroker<'_>,
        work: BodyWork,
    ) -> Result<Reply, Reject> {
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
                ChangedBody::Answer(reply) => return Ok(reply),
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
    ) -> Result<ChangedBody, Reject> {
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
            // Java built this response with RegisterBrokerResponseHeader: `"extFields":{}`.
            return Ok(ChangedBody::Answer(Reply {
                ext: ReplyExt::Pairs(Vec::new()),
                ..Reply::error(response::SYSTEM_ERROR, "crc32 not match")
            }));
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
                Err(e.into())
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

    fn finish_steps(&mut self, job: StepsJob, now_ms: u64, answers: &mut Vec<DeferredReply>) {
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

    /// Whether `cmd` must wait until the registration being applied in steps is done: it
    /// would change the route table under it (REGISTER_BROKER and unregistrations wait in the
    /// server's queues anyway). Reads never wait: they see each topic as before the
    /// registration or as after it.
    pub fn waits_for_topic_steps(&self, cmd: &RemotingCommand) -> bool {
        self.topic_steps_pending()
            && !cmd.is_response()
            && matches!(
                cmd.code,
                request::REGISTER_TOPIC_IN_NAMESRV
                    | request::DELETE_TOPIC_IN_NAMESRV
                    | request::WIPE_WRITE_PERM_OF_BROKER
                    | request::ADD_WRITE_PERM_OF_BROKER
            )
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
    fn bound_reached(
        &mut self,
        ctx: &RequestContext,
        what: &dyn std::fmt::Display,
        e: BoundExceeded,
    ) -> Reject {
        if self.stats.bounds_reached.admit(ctx.now_ms) {
            warn!("refused {what} from {:?}: {e}", ctx.peer);
        }
        reject(response::SYSTEM_ERROR, e.to_string())
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

    /// Logs the route-change summary if its interval is over. Called after every request;
    /// the server may also call it from its scan tick so that a quiet spell after a burst
    /// does not hold the line back.
    pub fn log_change_summary(&mut self, now_ms: u64) {
        if let Some(line) = self.stats.changes.take_due(now_ms) {
            info!("{line}");
        }
        let stats = &mut self.stats;
        for (limiter, what) in [
            (&mut stats.refusals, "refused request(s)"),
            (
                &mut stats.bounds_reached,
                "registration(s) refused by a bound",
            ),
            (&mut stats.takeovers, "address takeover(s)"),
        ] {
            if let Some(n) = limiter.take_due(now_ms) {
                warn!("{n} more {what} in the last interval, not logged one by one");
            }
        }
    }

    fn unregister_broker(
        &mut self,
        ctx: &RequestContext,
        r: BrokerRef<'_>,
    ) -> Result<Reply, Reject> {
        self.check_unregister_sender(ctx, &r)?;
        if self.submit_unregistrations(vec![(r.unregister_request(), RemovalReason::Unregister)]) {
            Ok(Reply::ok())
        } else {
            Ok(Reply {
                code: response::SYSTEM_ERROR,
                ..Reply::ok()
            })
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
    ) -> Result<(), Reject> {
        if self.admin_allow_list.is_empty() && self.broker_allow_list.is_empty() {
            return Ok(());
        }
        let (cluster, addr, name) = (r.cluster, r.broker_addr, r.broker_name);
        if self.table.registered_over(cluster, addr, name, ctx.conn)
            || (!self.admin_allow_list.is_empty() && allows(&self.admin_allow_list, ctx.peer))
        {
            return Ok(());
        }
        let remark = format!(
            "UNREGISTER_BROKER of {name}@{addr} ({cluster}) refused: not sent over that broker's registration connection, nor from an address in adminAllowList"
        );
        self.warn_refused(ctx, request::UNREGISTER_BROKER, &remark);
        Err(reject(response::NO_PERMISSION, remark))
    }

    fn broker_heartbeat(
        &mut self,
        ctx: &RequestContext,
        r: BrokerHeartbeat<'_>,
    ) -> Result<Reply, Reject> {
        self.table.heartbeat(r.cluster, r.broker_addr, ctx.now_ms);
        Ok(Reply::ok())
    }

    fn query_data_version(
        &mut self,
        ctx: &RequestContext,
        r: QueryDataVersion<'_>,
    ) -> Result<Reply, Reject> {
        let (cluster, addr) = (r.broker.cluster, r.broker.broker_addr);
        let answered = self
            .table
            .query_data_version(cluster, addr, ctx.now_ms, |stored| {
                let changed = r.changed(stored.map(|(version, text)| (version, &text[..])))?;
                Ok((changed, stored.map(|(_, text)| text.clone())))
            });
        let (changed, text) = answered.map_err(|e: ParseError| {
            self.warn_refused(ctx, request::QUERY_DATA_VERSION, &e);
            Reject::from(e)
        })?;
        Ok(Reply {
            ext: ReplyExt::Changed(changed),
            // The stored version's text (none for a broker not live), shared with the table.
            body: text.map_or(ReplyBody::None, ReplyBody::Shared),
            ..Reply::ok()
        })
    }

    fn broker_member_group(&mut self, r: GetBrokerMemberGroup<'_>) -> Result<Reply, Reject> {
        let addrs = self.table.broker_member_group(r.broker_name);
        let mut body = Vec::new();
        model::encode_member_group(r.cluster, r.broker_name, &addrs, &mut body);
        Ok(Reply::with_body(body))
    }

    // ------------------------------------------------------------------ routes

    fn route_info(&mut self, r: GetRouteInfo<'_>) -> Result<Reply, Reject> {
        if self.config.need_wait_for_service
            && self.started.elapsed().as_secs() < self.config.wait_seconds_for_service.max(0) as u64
        {
            return Err(reject(response::SYSTEM_ERROR, "name server not ready"));
        }
        let topic = r.topic;
        let order_enabled = self.config.order_message_enable;
        let kv = &self.kv;
        let order_conf = || {
            if order_enabled {
                kv.get(ORDER_TOPIC_CONFIG, topic).map(str::to_string)
            } else {
                None
            }
        };
        if let Some(zone) = r.zone {
            // Zone-filtered answers are built per request and always legacy (§5.8).
            let Some(mut route) = self.table.pickup_route(topic) else {
                return Err(topic_not_exist(topic));
            };
            route.order_topic_conf = order_conf();
            filter_by_zone(&mut route, zone);
            let mut body = Vec::new();
            route.encode(Dialect::Legacy, &mut body);
            return Ok(Reply::with_body(body));
        }
        match self.table.route_body(topic, r.dialect, order_conf) {
            Some(bytes) => Ok(Reply {
                body: ReplyBody::Shared(bytes),
                ..Reply::ok()
            }),
            None => Err(topic_not_exist(topic)),
        }
    }

    fn write_perm(&mut self, r: WritePerm<'_>, enable: bool) -> Result<Reply, Reject> {
        let count = self.table.set_write_perm(r.broker_name, enable);
        let (key, verb) = if enable {
            ("addTopicCount", "added")
        } else {
            ("wipeTopicCount", "wiped")
        };
        info!(
            "write permission {verb} for broker {}: {count} topic(s)",
            r.broker_name
        );
        Ok(Reply {
            ext: ReplyExt::Pairs(vec![(key, count.to_string())]),
            ..Reply::ok()
        })
    }

    fn delete_topic(&mut self, r: DeleteTopic<'_>) -> Result<Reply, Reject> {
        if self.table.delete_topic(r.topic, r.cluster) {
            info!(
                "topic {} deleted (cluster {:?})",
                r.topic,
                r.cluster.unwrap_or("")
            );
        }
        Ok(Reply::ok())
    }

    /// REGISTER_TOPIC_IN_NAMESRV: brokers with `enableSingleTopicRegister` send one per topic,
    /// so each is logged at debug and counted into the periodic summary.
    fn register_topic(
        &mut self,
        ctx: &RequestContext,
        r: RegisterTopic<'_>,
    ) -> Result<Reply, Reject> {
        if let Err(e) = self
            .table
            .check_topic_bounds(r.topic, &r.queue_datas, &self.bounds)
        {
            let what = format!("REGISTER_TOPIC_IN_NAMESRV of {}", r.topic);
            return Err(self.bound_reached(ctx, &what, e));
        }
        if self.table.register_topic(r.topic, &r.queue_datas) {
            self.stats
                .changes
                .topic_registered(r.queue_datas.len(), ctx.now_ms);
            debug!(
                "topic {} registered with {} queue entries",
                r.topic,
                r.queue_datas.len()
            );
        }
        Ok(Reply::ok())
    }

    fn all_topic_list(&mut self) -> Result<Reply, Reject> {
        if !self.config.enable_all_topic_list {
            return Err(reject(response::SYSTEM_ERROR, "disable"));
        }
        let mut body = Vec::new();
        model::encode_topic_list(self.table.topic_names(), None, &mut body);
        Ok(Reply::with_body(body))
    }

    fn topics_by_cluster(&mut self, r: GetTopicsByCluster<'_>) -> Result<Reply, Reject> {
        if !self.config.enable_topic_list {
            return Err(reject(response::SYSTEM_ERROR, "disable"));
        }
        let topics = self.table.topics_of_cluster(r.cluster()?);
        let mut body = Vec::new();
        model::encode_topic_list(topics.iter().map(String::as_str), None, &mut body);
        Ok(Reply::with_body(body))
    }

    fn system_topic_list(&mut self) -> Result<Reply, Reject> {
        let (topics, addr) = self.table.system_topics();
        let mut body = Vec::new();
        model::encode_topic_list(
            topics.iter().map(String::as_str),
            addr.as_deref(),
            &mut body,
        );
        Ok(Reply::with_body(body))
    }

    fn unit_topics(&mut self, pred: impl Fn(i32) -> bool) -> Result<Reply, Reject> {
        if !self.config.enable_topic_list {
            return Err(reject(response::SYSTEM_ERROR, "disable"));
        }
        let topics = self.table.topics_with_flag(pred);
        let mut body = Vec::new();
        model::encode_topic_list(topics.into_iter(), None, &mut body);
        Ok(Reply::with_body(body))
    }

    // ------------------------------------------------------------------ config

    /// UPDATE_NAMESRV_CONFIG: checked against the config, written back to the config file by
    /// the durable writer, applied and answered once the file is on disk. One at a time: a
    /// request arriving meanwhile waits its turn (and is checked against the config the one
    /// before it made).
    fn update_config(
        &mut self,
        r: UpdateNamesrvConfig<'_>,
        ticket: Option<Ticket>,
    ) -> Result<Reply, Reject> {
        let Some(text) = r.properties else {
            return Ok(Reply::ok());
        };
        if !self.config_writing {
            return self.start_config_update(text, ticket);
        }
        let Some(ticket) = ticket else {
            return Err(reject(response::SYSTEM_ERROR, "no connection to answer"));
        };
        let waiting_bytes: usize = self.config_queue.iter().map(|(_, t)| t.len()).sum();
        if self.config_queue.len() >= MAX_WAITING_CONFIG_UPDATES
            || waiting_bytes + text.len() > MAX_WAITING_CONFIG_BYTES
        {
            return Err(reject(
                response::SYSTEM_BUSY,
                format!(
                    "[OVERLOAD] {} config updates are waiting for the disk; try again later",
                    self.config_queue.len()
                ),
            ));
        }
        self.config_queue.push_back((ticket, text.to_string()));
        Ok(Reply::later())
    }

    fn start_config_update(&mut self, text: &str, ticket: Option<Ticket>) -> Result<Reply, Reject> {
        let plan = match self.config.plan_update(text) {
            Ok(Some(plan)) => plan,
            Ok(None) => return Ok(Reply::ok()),
            Err(e) => {
                warn!("refused config update: {e}");
                return Err(reject(e.response_code(), e.remark()));
            }
        };
        let Some(ticket) = ticket else {
            return Err(reject(response::SYSTEM_ERROR, "no connection to answer"));
        };
        let persist = plan.clone();
        self.next_write_id += 1;
        let id = self.next_write_id;
        let write: crate::kv::FileWrite =
            Box::new(move || persist.persist().map_err(|e| e.remark()));
        if self.outbox.durable.submit(Job::File { id, write }).is_err() {
            return Err(reject(
                response::SYSTEM_ERROR,
                "cannot write the config file: the writer thread has ended; nothing was changed",
            ));
        }
        self.config_writing = true;
        self.awaiting.push_back(Awaiting {
            id,
            ticket,
            plan: Some(Box::new(plan)),
        });
        Ok(Reply::later())
    }

    /// The config file of update `id` is written (or not): apply and answer it, then start
    /// the next waiting update.
    fn config_written(
        &mut self,
        id: u64,
        result: Result<(), String>,
        replies: &mut Vec<DeferredReply>,
        effects: &mut Effects,
    ) {
        let Some(Awaiting {
            ticket,
            plan: Some(plan),
            ..
        }) = self.take_awaiting(id)
        else {
            return;
        };
        self.config_writing = false;
        let reply = match result {
            Ok(()) => {
                self.adopt_config(*plan, effects);
                Reply::ok()
            }
            Err(remark) => {
                warn!("config update not applied: {remark}");
                Reply::error(response::SYSTEM_ERROR, remark)
            }
        };
        replies.push(self.deferred_reply(ticket, &reply));
        while !self.config_writing {
            let Some((ticket, text)) = self.config_queue.pop_front() else {
                break;
            };
            let reply = match self.start_config_update(&text, Some(ticket)) {
                Ok(reply) if reply.deferred => continue,
                Ok(reply) => reply,
                Err(r) => r.into(),
            };
            replies.push(self.deferred_reply(ticket, &reply));
        }
    }

    /// The plan's file is written: its config becomes the server's.
    fn adopt_config(&mut self, plan: ConfigPlan, effects: &mut Effects) {
        info!("config updated: {}", plan.changed().join(", "));
        let before = std::mem::replace(&mut self.config, plan.next);
        self.apply_config_change(&before);
        effects.config_changed = true;
    }

    fn apply_config_change(&mut self, before: &NamesrvConfig) {
        let settings = route_settings(&self.config);
        let routes_differ = settings != self.table.settings
            || before.order_message_enable != self.config.order_message_enable;
        self.table.settings = settings;
        if routes_differ {
            self.table.invalidate_all();
        }
        self.body_limits = body_limits(&self.config);
        self.kv.set_limits(kv_limits(&self.config));
        self.admin_allow_list = self.config.admin_allow_list_parsed();
        self.broker_allow_list = self.config.broker_allow_list_parsed();
        self.bounds = route_bounds(&self.config);
        if before.log_level != self.config.log_level {
            if let Ok(level) = self.config.log_level.parse() {
                crate::logging::set_level(level);
            }
        }
    }

    fn stats_body(&self, counters: &ServerCounters) -> Vec<u8> {
        use crate::remoting::json::{write_i64, write_key};
        let mut out = Vec::with_capacity(512);
        let fields: [(&str, i64); 23] = [
            ("connections", counters.connections as i64),
            ("brokers", self.table.live_broker_count() as i64),
            ("brokerGroups", self.table.broker_group_count() as i64),
            ("topics", self.table.topic_count() as i64),
            ("clusters", self.table.cluster_count() as i64),
            ("uptimeMillis", self.started.elapsed().as_millis() as i64),
            ("registrations", self.stats.registrations as i64),
            (
                "registrationsUnchanged",
                self.stats.registrations_unchanged as i64,
            ),
            ("expiries", self.stats.expiries as i64),
            ("unregistrations", self.stats.unregistrations as i64),
            ("unregisterBatches", self.stats.unregister_batches as i64),
            ("largestUnregisterBatch", self.stats.largest_batch as i64),
            ("bytesIn", counters.bytes_in as i64),
            ("bytesOut", counters.bytes_out as i64),
            ("rejectedBusy", self.stats.rejected_busy as i64),
            (
                "unregisterQueueFull",
                self.stats.unregister_queue_full as i64,
            ),
            ("bufferedBytes", counters.buffered_bytes as i64),
            ("refusedConnections", counters.refused_connections as i64),
            ("frameTimeouts", counters.frame_timeouts as i64),
            ("closedOverBudget", counters.closed_over_budget as i64),
            ("acceptFailures", counters.accept_failures as i64),
            ("maxTurnMicros", counters.max_turn_micros as i64),
            ("longTurns", counters.long_turns as i64),
        ];
        out.push(b'{');
        for (k, v) in fields {
            write_key(&mut out, k);
            write_i64(&mut out, v);
            out.push(b',');
        }
        write_key(&mut out, "requests");
        out.push(b'{');
        for (i, (code, n)) in self.stats.requests_by_code.sorted().into_iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_key(&mut out, &code.to_string());
            write_i64(&mut out, n as i64);
        }
        out.extend_from_slice(b"}}");
        out
    }

    // ------------------------------------------------------------------ loop events

    /// Hands a NOTIFY_MIN_BROKER_ID_CHANGE to the sender thread (connecting to brokers is
    /// slow work that must stay off the loop).
    fn send_notification(&mut self, n: MinIdNotification) {
        let message = Oneway {
            what: "NOTIFY_MIN_BROKER_ID_CHANGE",
            frame: min_broker_id_change_frame(&n),
            targets: n.targets,
        };
        if let Err(e) = self.outbox.notifications.try_send(message) {
            warn!("NOTIFY_MIN_BROKER_ID_CHANGE dropped: sender queue {e}");
        }
    }

    /// Queues unregistrations for the batching thread; returns false (and logs) when its
    /// queue is full.
    pub fn submit_unregistrations(&mut self, batch: UnregisterBatch) -> bool {
        if batch.is_empty() {
            return true;
        }
        match self.outbox.unregistrations.try_send(batch) {
            Ok(()) => true,
            Err(TrySendError::Full(b)) => {
                self.stats.unregister_queue_full += 1;
                warn!(
                    "unregistration queue full (unRegisterBrokerQueueCapacity {}): {} request(s) not queued",
                    self.config.un_register_broker_queue_capacity,
                    b.len()
                );
                false
            }
            Err(TrySendError::Disconnected(_)) => {
                warn!("unregistration worker unavailable: its thread has ended");
                false
            }
        }
    }

    /// The scan tick: silent brokers are expired, their connections reported for closing,
    /// and their unregistrations queued as one batch.
    /// At most `limit` deadline entries are examined; the flag says whether more are due.
    pub fn expire_silent_brokers(&mut self, now_ms: u64, limit: usize) -> (Vec<ConnId>, bool) {
        let (expired, more): (Vec<ExpiredBroker>, bool) =
            self.table.expire_silent_brokers_limited(now_ms, limit);
        log_grouped(
            log::Level::Warn,
            "broker expired",
            expired.iter().map(|e| {
                format!(
                    "{}@{} ({}) silent for {} ms",
                    e.request.broker_name, e.request.broker_addr, e.request.cluster, e.silent_ms
                )
            }),
        );
        for e in &expired {
            if let Some(c) = e.conn {
                self.expired_conns_this_scan.push(c);
            }
            self.expired_this_scan.push((
                e.request.clone(),
                RemovalReason::Expired {
                    silent_ms: e.silent_ms,
                },
            ));
        }
        self.stats.expiries += expired.len() as u64;
        // One scan, however many iterations it is spread over, hands the worker one batch,
        // and only then are the expired brokers' connections closed (closing earlier would
        // unregister the other brokers of a shared connection in a batch of their own).
        if more {
            return (Vec::new(), true);
        }
        let mut conns = std::mem::take(&mut self.expired_conns_this_scan);
        if !self.expired_this_scan.is_empty() {
            let batch = std::mem::take(&mut self.expired_this_scan);
            let keys: Vec<(Arc<str>, Arc<str>)> = batch
                .iter()
                .map(|(r, _)| (r.cluster.clone(), r.broker_addr.clone()))
                .collect();
            if !self.submit_unregistrations(batch) {
                for (cluster, addr) in keys {
                    self.table.rearm(&cluster, &addr, now_ms);
                }
            }
        }
        conns.sort_unstable();
        conns.dedup();
        (conns, more)
    }

    /// A connection closed: unregister every broker that registered over it.
    pub fn connection_closed(&mut self, conn: ConnId) {
        let requests = self.table.connection_closed(conn);
        if requests.is_empty() {
            return;
        }
        let batch = requests
            .into_iter()
            .map(|r| (r, RemovalReason::ConnectionClosed))
            .collect();
        self.submit_unregistrations(batch);
    }

    /// Counts a de-duplicated batch handed back by the worker (applied in chunks).
    pub fn record_unregister_batch(&mut self, len: usize) {
        self.stats.unregister_batches += 1;
        self.stats.largest_batch = self.stats.largest_batch.max(len);
    }

    /// Applies (a chunk of) a batch handed back by the worker.
    pub fn apply_unregister_batch(&mut self, batch: &[Unregistration]) {
        let requests: Vec<UnregisterRequest> = batch.iter().map(|(r, _)| r.clone()).collect();
        let outcome = self.table.unregister_batch(&requests);
        self.stats.unregistrations += requests.len() as u64;
        log_grouped(
            log::Level::Info,
            "broker removed",
            batch.iter().map(|(r, reason)| {
                let why = match reason {
                    RemovalReason::Unregister => "unregistered".to_string(),
                    RemovalReason::Expired { silent_ms } => format!("expired after {silent_ms} ms"),
                    RemovalReason::ConnectionClosed => "connection closed".to_string(),
                };
                format!(
                    "{}@{} id {} cluster {} ({why})",
                    r.broker_name, r.broker_addr, r.broker_id, r.cluster
                )
            }),
        );
        if outcome.topics_removed > 0 || outcome.broker_groups_removed > 0 {
            info!(
                "unregistration batch of {}: {} broker group(s) and {} topic(s) removed",
                requests.len(),
                outcome.broker_groups_removed,
                outcome.topics_removed
            );
        }
        for n in outcome.notifications {
            self.send_notification(n);
        }
    }
}

/// The oneway NOTIFY_MIN_BROKER_ID_CHANGE (905) request Java's name server sends each target
/// broker (docs/protocol.md §3.5).
fn min_broker_id_change_frame(n: &MinIdNotification) -> Vec<u8> {
    let min_id = n.min_broker_id.to_string();
    let mut ext: Vec<(&str, &str)> = vec![
        ("minBrokerId", min_id.as_str()),
        ("minBrokerAddr", n.min_broker_addr.as_str()),
    ];
    if let Some(a) = &n.offline_broker_addr {
        ext.push(("offlineBrokerAddr", a));
    }
    if let Some(a) = &n.ha_broker_addr {
        ext.push(("haBrokerAddr", a));
    }
    let header = Header {
        code: request::NOTIFY_MIN_BROKER_ID_CHANGE,
        language: "JAVA",
        version: version::CURRENT,
        opaque: 0,
        flag: FLAG_ONEWAY,
        remark: None,
    };
    let mut frame = Vec::new();
    encode_frame(
        &mut frame,
        SerializeType::Json,
        &header,
        Some(ext.iter().copied()),
        &[],
    );
    frame
}

/// Logs one line per item, or lines of up to 100 items when there are many (a mass expiry
/// of ten thousand brokers must not cost ten thousand synchronous log writes on the loop).
fn log_grouped(level: log::Level, what: &str, items: impl ExactSizeIterator<Item = String>) {
    if !log::log_enabled!(level) {
        return;
    }
    let total = items.len();
    if total <= 10 {
        for item in items {
            log::log!(level, "{what}: {item}");
        }
        return;
    }
    let mut line = String::new();
    let mut in_line = 0;
    for (i, item) in items.enumerate() {
        if in_line > 0 {
            line.push_str("; ");
        }
        line.push_str(&item);
        in_line += 1;
        if in_line == 100 || i + 1 == total {
            log::log!(level, "{what} ({} of {total}): {line}", i + 1);
            line.clear();
            in_line = 0;
        }
    }
}

/// A registration as log lines name it: `registration of broker@addr (cluster)`.
fn registration_of(r: &RegisterBroker<'_>) -> String {
    format!(
        "registration of {}@{} ({})",
        r.broker_name, r.broker_addr, r.cluster
    )
}

fn topic_not_exist(topic: &str) -> Reject {
    reject(
        response::TOPIC_NOT_EXIST,
        format!(
            "No topic route info in name server for the topic: {topic}\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
        ),
    )
}

/// ZoneRouteRPCHook (§5.8): keep brokers without a master or in the requested zone.
pub fn filter_by_zone(route: &mut TopicRouteData, zone: &str) {
    let mut removed_addrs = Vec::new();
    let mut removed_names = Vec::new();
    route.broker_datas.retain(|b| {
        let keep = !b.broker_addrs.contains_key(&0)
            || b.zone_name
                .as_deref()
                .is_some_and(|z| z.eq_ignore_ascii_case(zone));
        if !keep {
            removed_names.push(b.broker_name.clone());
            removed_addrs.extend(b.broker_addrs.values().cloned());
        }
        keep
    });
    route
        .queue_datas
        .retain(|q| !removed_names.contains(&q.broker_name));
    for a in removed_addrs {
        route.filter_server_table.remove(&a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::model::DataVersion;

    #[test]
    fn templated_replies_are_the_bytes_of_encoded_ones() {
        let dv = DataVersion {
            counter: 7,
            state_version: -2,
            timestamp: 1_700_000_000_123,
        };
        let mut text = Vec::new();
        dv.encode(&mut text);
        let text = bytes::Bytes::from(text);
        let replies = || {
            let changed = |c, body| Reply {
                ext: ReplyExt::Changed(c),
                body,
                ..Reply::ok()
            };
            [
                Reply::ok(),
                Reply::with_body(b"{\"a\":1}".to_vec()),
                Reply {
                    body: ReplyBody::Shared(bytes::Bytes::from_static(&[7u8; 300])),
                    ..Reply::ok()
                },
                changed(false, ReplyBody::Shared(text.clone())),
                changed(true, ReplyBody::Shared(text.clone())),
                changed(true, ReplyBody::None),
            ]
        };
        let templates = ReplyTemplates::new();
        for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
            for reply in replies() {
                for opaque in [0, 42, -7, i32::MIN, i32::MAX] {
                    let (mut templated, mut encoded) = (vec![1u8], vec![1u8]);
                    assert!(templates.write(serialize_type, opaque, &reply, &mut templated));
                    encode_reply(serialize_type, opaque, &reply, &mut encoded);
                    assert_eq!(templated, encoded);
                }
            }
            let error = Reply::error(response::SYSTEM_ERROR, "x");
            assert!(!templates.write(serialize_type, 1, &error, &mut Vec::new()));
        }
    }

    #[test]
    fn route_changes_are_summarised_once_per_interval() {
        let mut s = ChangeSummary::default();
        assert_eq!(s.take_due(1_000_000), None, "nothing happened");
        s.broker_changed(3, 1_000);
        s.broker_changed(2, 5_000);
        s.topic_registered(4, 6_000);
        assert_eq!(s.take_due(10_999), None, "the interval is not over");
        assert_eq!(
            s.take_due(11_000).as_deref(),
            Some("route changes: 2 registration(s) changed 5 topic queue entries; 1 topic(s) registered by REGISTER_TOPIC_IN_NAMESRV with 4 queue entries")
        );
        assert_eq!(s, ChangeSummary::default());
        assert_eq!(s.take_due(100_000), None);
    }

    #[test]
    fn the_first_new_brokers_of_an_interval_get_their_own_line_and_the_rest_a_count() {
        let mut s = ChangeSummary::default();
        let own_line = (0..25).filter(|_| s.new_broker(0)).count();
        assert_eq!(own_line, NEW_BROKER_LINES as usize);
        assert_eq!(
            s.take_due(CHANGE_SUMMARY_INTERVAL_MS).as_deref(),
            Some("route changes: 15 more new broker(s) registered (listed at debug)")
        );
        assert!(s.new_broker(20_000), "a new interval logs again");
        assert_eq!(s.take_due(30_000), None, "nothing left to summarise");
    }
}
