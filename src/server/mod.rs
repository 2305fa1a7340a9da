//! The name server on top of the event loop: the [`Handler`] that turns frames into
//! `RemotingCommand`s for the [`Processor`], and the pacing that keeps one loop fair.
//!
//! What lives here rather than in the loop or the processor:
//! * **Admission of registrations.** REGISTER_BROKER is the expensive request: it waits in a
//!   queue (one per connection, whose later frames are held so replies keep their order) and
//!   is applied in `before_sleep`, after the cheap requests of the turn, within a budget of
//!   registrations and time. Connections that may carry registrations are read as the loop's
//!   *bulk* class: after clients, first come first served, while the queue has room. Past
//!   `registrationBacklogLimit` waiting peers a registration is answered SYSTEM_BUSY
//!   `[OVERLOAD]`, as Java's full request queue is.
//! * **Expiry pacing.** The scan timer only marks a scan due; the scan runs a chunk of brokers
//!   per turn, and expired brokers' connections are closed a chunk per turn.
//! * **Large bodies** (REGISTER_BROKER, REGISTER_TOPIC_IN_NAMESRV past `decodeOnLoopMaxBytes`,
//!   as the processor says) are hashed and decoded by the [`decode_worker`]: the connection
//!   is held, and the request is handled again when the body comes back, in turn.
//! * **Unregistrations** come back from the batching thread and are applied in chunks, within
//!   the same time budget as registrations.
//! * **Registrations applied in steps** (a body of thousands of topics): their steps run
//!   within the same budget, a few per turn; until the last one, the route table takes no
//!   other change: queued registrations and unregistrations stay queued, and a request whose
//!   code row says it writes routes waits with its connection held (`after_steps`, the one
//!   ordering rule: [`NameServer::waits_for_topic_steps`]). Reads are served.
//! * **Deferred answers.** A KV change or config update is answered once the durable writer
//!   has it on disk: its connection is held meanwhile, and the answers are written when the
//!   writer's wake-up brings them (`answer_durable_writes`).
//! * **Heap trimming** after bursts, **settings refresh** after UPDATE_NAMESRV_CONFIG, the
//!   loop's counters for the stats extension, and a `catch_unwind` around every request.
//! * **The embedded Controller** (`enableControllerInNamesrv`, feature `controller`): its own
//!   listener on this loop, handled in [`controller_port`]; this handler only routes that
//!   listener's frames, closes and timers there, and those of the connections the controller's
//!   peer link opens (every connection not on the name server's listener).

use crate::config::NamesrvConfig;
use crate::event_loop::oneway;
use crate::event_loop::{
    self, ConnId, Ctx, EventLoop, Handler, Limits, ListenerTag, LoopStats, LoopWaker, Next,
    ReadClass, TimerId,
};
use crate::kv::KvStore;
use crate::processor::{
    BodyWork, DecodeJob, Decoded, Effects, Outbox, Processor, RequestContext, ServerCounters,
    UnregisterBatch, Unregistration,
};
use crate::remoting::codes::{self, is_broker_request, request};
use crate::remoting::command::{DecodeLimits, RemotingCommand};
use crate::remoting::frame::{self, FrameError};
use crate::remoting::json;
use crate::route::model::DecodeScratch;
use bytes::{Bytes, BytesMut};
use crossbeam_channel::Receiver;
use log::{error, info, warn};
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use crate::event_loop::StopHandle;
pub use controller_port::ControllerSetup;

#[cfg(feature = "controller")]
mod controller_port;
#[cfg(not(feature = "controller"))]
#[path = "no_controller_port.rs"]
mod controller_port;

use controller_port::{ControllerPort, PeerConnData};
use decode_worker::DecodeWorker;

mod decode_worker;

/// The name server's listener (the controller's is `controller_port::LISTENER`).
const NAMESRV_LISTENER: ListenerTag = ListenerTag(0);

/// Marks a broker expiry scan due every `scanNotActiveBrokerInterval`.
const SCAN_TIMER: TimerId = TimerId(0);

/// Bytes read from one connection per turn before others get theirs.
const READ_BUDGET: usize = 256 * 1024;

/// Time per turn spent on queued registrations and unregistrations (together) before the
/// loop goes back to answering reads: keeps route lookups fast during storms and mass
/// expiry. At least one queued item is always handled, so progress never stops.
const SLOW_WORK_BUDGET: Duration = Duration::from_micros(300);

/// Queued registration bytes beyond which broker connections are not read this turn (about
/// a dozen 100-topic registrations: what one turn's budget applies).
const REGISTRATION_READ_AHEAD_BYTES: usize = 256 * 1024;

/// Bytes of queued registration frames beyond which new ones are answered SYSTEM_BUSY.
const REGISTRATION_BACKLOG_BYTES: usize = 256 << 20;

/// Bytes of registration traffic after which freed heap is handed back to the OS once the
/// queues are empty again (glibc keeps a burst's peak otherwise).
const TRIM_AFTER_BYTES: usize = 4 << 20;

/// Connection buffers (bytes held at once) after which, once they are down to a quarter,
/// freed heap is handed back the same way (large frames, unread replies).
const TRIM_AFTER_BUFFERED: usize = 2 << 20;

/// Body bytes of REGISTER_TOPIC_IN_NAMESRV requests that may wait for the decode worker; more
/// are answered SYSTEM_BUSY (registrations are bounded by their own queue).
const DECODE_BACKLOG_BYTES: usize = 64 << 20;

/// Unregistrations applied per step of a large batch.
const UNREGISTER_CHUNK: usize = 32;

/// Expiry entries examined per turn during a mass expiry, and expired brokers' connections
/// closed per turn (each close is a syscall or two; ten thousand at once would stall
/// everyone else).
const EXPIRY_CHUNK: usize = 64;

/// How long one NOTIFY_MIN_BROKER_ID_CHANGE attempt may take.
const NOTIFY_TIMEOUT: Duration = Duration::from_millis(300);

/// How long a stop may take to answer queued work and flush replies.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(3);

/// How recently an address must have completed a request to use the reserved connection
/// slots (`reservedConnectionsPercent`): clients ask for routes every 30 s, brokers register
/// every 30 s, so ten minutes covers a restart or a network blip.
const RECENT_CLIENT_WINDOW_MS: u64 = 600_000;

// ---------------------------------------------------------------------- public API

/// Why the server could not start.
#[derive(Debug)]
pub enum StartError {
    /// The listening socket could not be bound (port in use, address not local, ...).
    Bind {
        addr: SocketAddr,
        source: io::Error,
    },
    Io(io::Error),
    Kv(crate::kv::KvError),
    /// The embedded Controller cannot start (its port, store or settings; or this build has
    /// none): one line naming what failed.
    Controller(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Bind { addr, source } => {
                write!(f, "cannot listen on {addr}: {}", os_message(source))
            }
            StartError::Io(e) => write!(f, "{e}"),
            StartError::Kv(e) => write!(f, "{e}"),
            StartError::Controller(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StartError {}

impl From<io::Error> for StartError {
    fn from(e: io::Error) -> Self {
        StartError::Io(e)
    }
}

/// An OS error's message without Rust's ` (os error N)` suffix: what operators know from
/// other servers (`Address already in use`).
fn os_message(e: &io::Error) -> String {
    let text = e.to_string();
    match (e.raw_os_error(), text.rfind(" (os error ")) {
        (Some(_), Some(at)) => text[..at].to_string(),
        _ => text,
    }
}

/// A bound, not yet running name server.
pub struct Server {
    event_loop: EventLoop<NameServer>,
    app: NameServer,
    local_addr: SocketAddr,
}

impl Server {
    /// Loads the KV store, binds the listener and starts the helper threads. A config with
    /// `enableControllerInNamesrv=true` is refused: see [`Server::bind_with_controller`].
    pub fn bind(config: NamesrvConfig) -> Result<Server, StartError> {
        Server::bind_with_controller(config, None)
    }

    /// As [`Server::bind`], hosting the embedded Controller when `controller` is given (its
    /// listener, store and threads; `enableControllerInNamesrv` is then reported true).
    pub fn bind_with_controller(
        mut config: NamesrvConfig,
        controller: Option<ControllerSetup>,
    ) -> Result<Server, StartError> {
        if config.enable_controller_in_namesrv && controller.is_none() {
            return Err(ControllerPort::missing_setup());
        }
        config.enable_controller_in_namesrv = controller.is_some();
        let kv =
            KvStore::open(std::path::Path::new(&config.kv_config_path)).map_err(StartError::Kv)?;
        let addr = socket_address(&config.bind_address, config.listen_port)?;
        let descriptors = prepare_descriptors(&config);
        let mut event_loop = EventLoop::new(loop_limits(&config, descriptors))?;
        let local_addr = event_loop
            .listen(addr, NAMESRV_LISTENER)
            .map_err(|source| StartError::Bind { addr, source })?;
        // As Java after binding port 0: GET_NAMESRV_CONFIG reports the port actually bound.
        config.listen_port = local_addr.port();
        let controller = match controller {
            Some(setup) => Some(ControllerPort::bind(
                setup,
                &mut event_loop,
                &config.bind_address,
                local_addr,
            )?),
            None => None,
        };
        let mut app = NameServer::new(config, kv, event_loop.waker())?;
        app.descriptors = descriptors;
        app.arm_scan_timer(event_loop.ctx());
        if let Some(mut port) = controller {
            port.arm_timers(event_loop.ctx());
            app.controller = Some(port);
        }
        Ok(Server {
            event_loop,
            app,
            local_addr,
        })
    }

    /// The address actually bound (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The embedded Controller's address, when it is hosted.
    pub fn controller_addr(&self) -> Option<SocketAddr> {
        self.app.controller.as_ref().map(ControllerPort::local_addr)
    }

    pub fn stop_handle(&self) -> StopHandle {
        self.event_loop.stop_handle()
    }

    /// Runs the loop until stopped; returns once replies in flight were sent (within the
    /// drain timeout) and the helper threads have ended.
    pub fn run(self) -> io::Result<()> {
        if !keep_freed_heap_until_trim() {
            warn!("glibc refused the heap trim/mmap thresholds (mallopt): registration storms will page-fault more");
        }
        let app = self.event_loop.run(self.app)?;
        app.shutdown();
        Ok(())
    }
}

/// `host:port` as a socket address (IPv6 hosts with or without brackets).
fn socket_address(host: &str, port: u16) -> Result<SocketAddr, StartError> {
    format!("{host}:{port}")
        .parse()
        .or_else(|_| format!("[{host}]:{port}").parse())
        .map_err(|_| {
            StartError::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad bindAddress {host}"),
            ))
        })
}

/// A server running on its own thread (tests, embedding).
pub struct ServerHandle {
    addr: SocketAddr,
    controller_addr: Option<SocketAddr>,
    stop: StopHandle,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl ServerHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The embedded Controller's address, when it is hosted.
    pub fn controller_addr(&self) -> Option<SocketAddr> {
        self.controller_addr
    }

    /// Stops the loop and waits for it to return.
    pub fn stop(mut self) -> io::Result<()> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> io::Result<()> {
        self.stop.stop();
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| io::Error::other("event loop thread panicked"))?,
            None => Ok(()),
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let Err(e) = self.stop_and_join() {
            error!("event loop ended with an error: {e}");
        }
    }
}

/// Binds and runs a server on a new thread; returns once it is listening.
pub fn start(config: NamesrvConfig) -> Result<ServerHandle, StartError> {
    start_with_controller(config, None)
}

/// As [`start`], hosting the embedded Controller when `controller` is given.
pub fn start_with_controller(
    config: NamesrvConfig,
    controller: Option<ControllerSetup>,
) -> Result<ServerHandle, StartError> {
    let server = Server::bind_with_controller(config, controller)?;
    let addr = server.local_addr();
    let controller_addr = server.controller_addr();
    let stop = server.stop_handle();
    let thread = std::thread::Builder::new()
        .name("event-loop".into())
        .spawn(move || server.run())?;
    Ok(ServerHandle {
        addr,
        controller_addr,
        stop,
        thread: Some(thread),
    })
}

// ---------------------------------------------------------------------- settings

/// What the loop enforces, from the config (again after each config update) and the
/// open-file limit (`descriptors`, the soft limit when known).
fn loop_limits(c: &NamesrvConfig, descriptors: Option<u64>) -> Limits {
    let max_connections = connection_cap(c.max_connections, descriptors);
    Limits {
        read_budget: READ_BUDGET,
        write_high_water: c.conn_write_high_water as usize,
        write_hard_cap: c.conn_write_hard_cap as usize,
        idle_ms: (c.server_channel_max_idle_time_seconds.max(0) as u64) * 1000,
        frame_timeout_ms: c.frame_read_timeout_millis,
        max_buffered: usize::try_from(c.max_buffered_bytes).unwrap_or(usize::MAX),
        max_connections,
        max_per_address: c.max_connections_per_address as usize,
        reserved_for_recent: max_connections * c.reserved_connections_percent as usize / 100,
        recent_window_ms: RECENT_CLIENT_WINDOW_MS,
        bulk_line_limit: c.registration_backlog_limit as usize,
        drain_timeout: DRAIN_TIMEOUT,
    }
}

/// Descriptors kept free beside the connections: the loop's own (poll, waker, listeners, a
/// spare), the log, config and KV files, the Controller's files, connections to brokers for
/// notifications. A fixed part and a share of the limit.
fn descriptor_headroom(limit: u64) -> u64 {
    32 + limit / 32
}

/// `maxConnections`, lowered to what the open-file limit leaves room for: past it `accept`
/// would fail for every newcomer instead of refusing them cleanly.
fn connection_cap(max_connections: u32, descriptors: Option<u64>) -> usize {
    let fit = descriptors.map_or(u64::MAX, |limit| {
        limit.saturating_sub(descriptor_headroom(limit)).max(1)
    });
    u64::from(max_connections).min(fit) as usize
}

/// The open-file limit `max_connections` needs (the inverse of [`connection_cap`]).
fn descriptors_wanted(max_connections: u32) -> u64 {
    (u64::from(max_connections) + 32) * 32 / 31 + 1
}

/// Raises the soft open-file limit to what `maxConnections` needs (up to the hard limit, as
/// the JVM does for the Java name server) and warns when it is still too low; returns the
/// soft limit, `None` when it cannot be read.
fn prepare_descriptors(c: &NamesrvConfig) -> Option<u64> {
    let before = event_loop::descriptor_limit()?;
    let now = event_loop::raise_descriptor_limit(descriptors_wanted(c.max_connections))?;
    if now.soft > before.soft {
        info!(
            "open-file limit raised from {} to {} for maxConnections={}",
            before.soft, now.soft, c.max_connections
        );
    }
    let cap = connection_cap(c.max_connections, Some(now.soft));
    if cap < c.max_connections as usize {
        warn!(
            "maxConnections={} does not fit the open-file limit ({} descriptors, hard limit {}; {} kept for files and outbound connections): accepting at most {cap} connections; raise LimitNOFILE (systemd) or ulimit -n",
            c.max_connections,
            now.soft,
            now.hard,
            descriptor_headroom(now.soft)
        );
    }
    Some(now.soft)
}

/// Settings read on every frame; refreshed after a config update.
#[derive(Debug, Clone, Copy)]
struct Settings {
    frame_max: u32,
    decode: DecodeLimits,
    scan_interval_ms: u64,
    registration_budget: usize,
}

impl Settings {
    fn from_config(c: &NamesrvConfig) -> Self {
        Settings {
            frame_max: c.frame_max_length,
            decode: DecodeLimits {
                max_header_len: c.max_header_length as usize,
                max_ext_fields: c.max_ext_fields as usize,
                json: json::Limits {
                    max_depth: c.max_json_depth as usize,
                    max_string_len: c.max_json_string_length as usize,
                },
            },
            scan_interval_ms: c.scan_not_active_broker_interval.max(1) as u64,
            registration_budget: c.registration_budget_per_iteration.max(1) as usize,
        }
    }
}

// ---------------------------------------------------------------------- the handler

/// What the name server remembers per connection.
#[derive(Debug, Default)]
struct PeerState {
    /// Whether a request has been decoded on this connection yet (the first one says
    /// whether the peer is a broker or a client).
    seen_request: bool,
    /// Accepted on the controller's listener, or opened by its peer link: its frames and its
    /// close are the controller's.
    controller_port: bool,
}

impl PeerConnData for PeerState {
    fn peer_link() -> PeerState {
        PeerState {
            seen_request: false,
            controller_port: true,
        }
    }
}

/// A REGISTER_BROKER waiting for its turn.
struct QueuedRegistration {
    conn: ConnId,
    cmd: RemotingCommand,
    /// What the decode worker made of its body, once it has been there.
    work: BodyWork,
}

/// Registrations waiting to be applied, at most one per connection.
#[derive(Default)]
struct RegistrationQueue {
    queue: VecDeque<QueuedRegistration>,
    /// Body bytes of the queued registrations and of those with the decode worker.
    bytes: usize,
}

/// Where a mass expiry stands.
#[derive(Default)]
struct ExpiryPacer {
    next_scan_ms: u64,
    /// The scan timer fired; a scan starts when the one in progress (if any) is done.
    scan_due: bool,
    /// A scan found more due brokers than one turn handles.
    in_progress: bool,
    /// Connections of expired brokers waiting to be closed.
    conns_to_close: VecDeque<ConnId>,
}

/// The name server as the loop's handler.
struct NameServer {
    processor: Processor,
    settings: Settings,
    registrations: RegistrationQueue,
    /// Batches handed back by the batching thread, and their items not yet applied.
    unregister_batches: Receiver<UnregisterBatch>,
    unregistrations: VecDeque<Unregistration>,
    expiry: ExpiryPacer,
    bytes_since_trim: usize,
    /// The most the connections' buffers held since the last trim.
    buffered_peak: usize,
    next_trim_ms: u64,
    /// The soft open-file limit the connection cap is kept under.
    descriptors: Option<u64>,
    threads: Vec<JoinHandle<()>>,
    /// Requests that would change the route table while a registration is applied in steps,
    /// in arrival order, each holding its connection; handled after the last step.
    after_steps: VecDeque<(ConnId, RemotingCommand, BodyWork)>,
    /// Hashes and decodes large bodies off the loop.
    decode: DecodeWorker,
    /// Requests whose large bodies were handled this turn, freed by the decode worker.
    handled_off_loop: Vec<RemotingCommand>,
    /// The embedded Controller, when hosted.
    controller: Option<ControllerPort>,
}

impl NameServer {
    fn new(config: NamesrvConfig, kv: KvStore, waker: LoopWaker) -> io::Result<NameServer> {
        let capacity = config.un_register_broker_queue_capacity.max(1) as usize;
        let wake = waker.clone();
        let waker_for_decode = waker.clone();
        let (durable, kv_writer) = kv.spawn_writer("kv-writer", Box::new(move || wake.wake()))?;
        let (unregistrations, unregister_batches, batcher) =
            event_loop::spawn_batcher("unregister-worker", capacity, waker)?;
        let (notifications, sender) =
            oneway::spawn_sender("notify-sender", capacity, NOTIFY_TIMEOUT)?;
        let decode = DecodeWorker::spawn("decode-worker", waker_for_decode)?;
        let settings = Settings::from_config(&config);
        let outbox = Outbox {
            unregistrations,
            notifications,
            durable,
        };
        Ok(NameServer {
            processor: Processor::new(config, kv, outbox),
            settings,
            registrations: RegistrationQueue::default(),
            unregister_batches,
            unregistrations: VecDeque::new(),
            expiry: ExpiryPacer::default(),
            bytes_since_trim: 0,
            buffered_peak: 0,
            next_trim_ms: 0,
            descriptors: None,
            threads: vec![batcher, sender, kv_writer],
            after_steps: VecDeque::new(),
            decode,
            handled_off_loop: Vec::new(),
            controller: None,
        })
    }

    fn arm_scan_timer(&mut self, ctx: &mut Ctx<PeerState>) {
        self.expiry.next_scan_ms = ctx.now_ms() + self.settings.scan_interval_ms;
        ctx.set_timer(SCAN_TIMER, self.expiry.next_scan_ms);
    }

    /// The processor holds the threads' senders: dropping it ends them.
    fn shutdown(self) {
        let NameServer {
            processor,
            threads,
            decode,
            controller,
            ..
        } = self;
        if let Some(port) = controller {
            port.shutdown();
        }
        decode.shutdown();
        drop(processor);
        for t in threads {
            if t.join().is_err() {
                error!("a helper thread panicked");
            }
        }
    }

    /// Enough registrations are queued for this turn's budget: read no more broker traffic
    /// until some are applied.
    fn registration_queue_full(&self) -> bool {
        self.registrations.queue.len() + self.decode.in_flight()
            >= self.settings.registration_budget
            || self.registrations.bytes >= REGISTRATION_READ_AHEAD_BYTES
    }

    /// Whether `cmd` must wait for the last step of the registration being applied in
    /// steps: the one ordering rule of route changes. A request whose code row says it writes
    /// routes ([`codes::writes_routes`]) would change the tables under that registration
    /// (REGISTER_BROKER and the unregistration batches wait in their own queues as well).
    /// Reads never wait: they see each topic as before the registration or as after it.
    fn waits_for_topic_steps(&self, cmd: &RemotingCommand) -> bool {
        self.processor.topic_steps_pending() && !cmd.is_response() && codes::writes_routes(cmd.code)
    }

    /// Runs one request now and writes its reply to the connection; one that would change
    /// the route table under a registration applied in steps waits for its last step.
    fn handle_now(
        &mut self,
        ctx: &mut Ctx<PeerState>,
        conn: ConnId,
        cmd: &RemotingCommand,
        work: BodyWork,
    ) -> Next {
        if self.waits_for_topic_steps(cmd) {
            self.after_steps.push_back((conn, cmd.clone(), work));
            return Next::Hold;
        }
        let rctx = RequestContext {
            conn: Some(conn.index()),
            peer: ctx.peer(conn),
            now_ms: ctx.now_ms(),
            reply_to: Some(conn),
        };
        let counters = server_counters(ctx.stats());
        let Some(out) = ctx.write_buf(conn) else {
            return Next::Close;
        };
        let Some(effects) = handle_guarded(&mut self.processor, &rctx, &counters, cmd, work, out)
        else {
            warn!(
                "closing connection from {:?}: handling request code {} panicked",
                rctx.peer, cmd.code
            );
            return Next::Close;
        };
        if effects.config_changed {
            self.refresh_settings(ctx);
        }
        if let Some(job) = effects.off_loop {
            return self.decode_off_loop(ctx, conn, cmd.clone(), job);
        }
        if effects.deferred {
            // Answered by answer_durable_writes; later frames wait so replies keep their order.
            return Next::Hold;
        }
        Next::Continue
    }

    /// A request other than a registration whose body is too large for the loop: decoded by
    /// the worker while the connection is held, then handled again ([`NameServer::take_decoded`]);
    /// answered SYSTEM_BUSY when too many bytes already wait there (registrations are bounded
    /// by their own queue).
    fn decode_off_loop(
        &mut self,
        ctx: &mut Ctx<PeerState>,
        conn: ConnId,
        cmd: RemotingCommand,
        job: DecodeJob,
    ) -> Next {
        if self.decode.bytes_in_flight() + cmd.body.len() > DECODE_BACKLOG_BYTES {
            warn!(
                "decode worker backlog full: answering SYSTEM_BUSY to request {} from {:?}",
                cmd.code,
                ctx.peer(conn)
            );
            if let Some(out) = ctx.write_buf(conn) {
                self.processor.reply_overloaded(&cmd, out);
            }
            return Next::Continue;
        }
        match self
            .decode
            .decode(decode_worker::Request { conn, cmd, job })
        {
            None => Next::Hold,
            Some(back) => {
                let decoded = decode_here(&back);
                self.handle_now(ctx, conn, &back.cmd, BodyWork::OffLoop(Box::new(decoded)))
            }
        }
    }

    /// Answers the requests whose change the durable writer has finished (KV changes, config
    /// updates); each answered connection may send its next frames.
    fn answer_durable_writes(&mut self, ctx: &mut Ctx<PeerState>) {
        let (replies, effects) = self.processor.finish_durable_writes();
        for reply in replies {
            if let Some(out) = ctx.write_buf(reply.conn) {
                out.extend_from_slice(&reply.frame);
            }
            ctx.release(reply.conn);
        }
        if effects.config_changed {
            self.refresh_settings(ctx);
        }
    }

    /// A REGISTER_BROKER: queued (holding the connection's later frames), or answered
    /// SYSTEM_BUSY when too much is waiting.
    fn admit_registration(
        &mut self,
        ctx: &mut Ctx<PeerState>,
        conn: ConnId,
        cmd: RemotingCommand,
    ) -> Next {
        // The queue is full and more peers than `registrationBacklogLimit` wait behind it:
        // registrations read now are refused rather than queued.
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

    /// After UPDATE_NAMESRV_CONFIG: new limits for the loop, new settings here.
    fn refresh_settings(&mut self, ctx: &mut Ctx<PeerState>) {
        let config = self.processor.config();
        self.settings = Settings::from_config(config);
        if ctx.limits().max_connections != connection_cap(config.max_connections, self.descriptors)
        {
            self.descriptors = prepare_descriptors(config).or(self.descriptors);
        }
        ctx.set_limits(loop_limits(config, self.descriptors));
        // A shorter scan interval takes effect now, not after the old one.
        let next = ctx.now_ms() + self.settings.scan_interval_ms;
        if next < self.expiry.next_scan_ms {
            self.expiry.next_scan_ms = next;
            ctx.set_timer(SCAN_TIMER, next);
        }
    }

    /// Applies queued registrations: at least one, then until the count or time budget for
    /// this turn is spent. Each answered connection may send its next frames; a registration
    /// whose body is too large to hash or decode here goes to the decode worker instead and
    /// comes back through [`NameServer::take_decoded`].
    fn run_registrations(&mut self, ctx: &mut Ctx<PeerState>, started: Instant) {
        // One registration applied in steps at a time: no other may change the tables under
        // it (its broker's later registration least of all).
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
            self.bytes_since_trim += q.cmd.body.len();
            done += 1;
            self.run_registration(ctx, q);
            if self.processor.topic_steps_pending() {
                break;
            }
        }
    }

    /// Applied registration bodies and handled large requests are freed by the decode worker.
    fn free_off_loop(&mut self) {
        let spent = self.processor.take_spent_bodies();
        let requests = std::mem::take(&mut self.handled_off_loop);
        if !spent.is_empty() || !requests.is_empty() {
            self.decode.free(spent, requests);
        }
    }

    /// One registration: answered, or handed to the decode worker (its bytes still count as
    /// queued) to come back through [`NameServer::take_decoded`].
    fn run_registration(&mut self, ctx: &mut Ctx<PeerState>, q: QueuedRegistration) {
        let QueuedRegistration { conn, cmd, work } = q;
        let large = matches!(work, BodyWork::OffLoop(_));
        let Some(peer) = ctx.peer(conn) else {
            return;
        };
        let rctx = RequestContext {
            conn: Some(conn.index()),
            peer: Some(peer),
            now_ms: ctx.now_ms(),
            reply_to: Some(conn),
        };
        let counters = server_counters(ctx.stats());
        let Some(out) = ctx.write_buf(conn) else {
            return;
        };
        let processor = &mut self.processor;
        let Some(effects) = handle_guarded(processor, &rctx, &counters, &cmd, work, out) else {
            ctx.close(conn, "registration handler panicked");
            return;
        };
        if let Some(job) = effects.off_loop {
            let bytes = cmd.body.len();
            match self
                .decode
                .decode(decode_worker::Request { conn, cmd, job })
            {
                None => self.registrations.bytes += bytes,
                Some(back) => {
                    let work = BodyWork::OffLoop(Box::new(decode_here(&back)));
                    let (cmd, conn) = (back.cmd, back.conn);
                    self.run_registration(ctx, QueuedRegistration { conn, cmd, work });
                }
            }
            return;
        }
        if large {
            self.handled_off_loop.push(cmd);
        }
        if effects.deferred {
            // Applied in steps: answered by run_topic_steps.
            return;
        }
        // Frames that arrived behind the registration can go now, in turn with the other
        // waiting brokers (first come, first served).
        ctx.release(conn);
    }

    /// Steps of a registration applied in steps, within the turn's slow-work budget. Once
    /// the last is done, the registration is answered and its connection may send its next
    /// frames, and the requests that waited for it are handled, in arrival order. Returns
    /// whether the route table is free for other changes.
    fn run_topic_steps(&mut self, ctx: &mut Ctx<PeerState>, started: Instant) -> bool {
        if self.processor.topic_steps_pending() {
            let now_ms = ctx.now_ms();
            for answer in self
                .processor
                .run_topic_steps(now_ms, started, SLOW_WORK_BUDGET)
            {
                if let Some(out) = ctx.write_buf(answer.conn) {
                    out.extend_from_slice(&answer.frame);
                }
                ctx.release(answer.conn);
            }
        }
        while !self.processor.topic_steps_pending() {
            let Some((conn, cmd, work)) = self.after_steps.pop_front() else {
                break;
            };
            if ctx.peer(conn).is_none() {
                continue;
            }
            match self.handle_now(ctx, conn, &cmd, work) {
                Next::Continue => ctx.release(conn),
                Next::Hold => {}
                Next::Close => ctx.close(conn, "handling a held request failed"),
            }
        }
        !self.processor.topic_steps_pending()
    }

    /// Registrations the decode worker is done with join the queue again, to be applied in
    /// turn; other requests it decoded are handled now.
    fn take_decoded(&mut self, ctx: &mut Ctx<PeerState>) {
        while let Some(done) = self.decode.try_take() {
            let work = BodyWork::OffLoop(Box::new(done.decoded));
            if done.cmd.code == request::REGISTER_BROKER {
                self.registrations.queue.push_back(QueuedRegistration {
                    conn: done.conn,
                    cmd: done.cmd,
                    work,
                });
                continue;
            }
            if ctx.peer(done.conn).is_none() {
                continue;
            }
            match self.handle_now(ctx, done.conn, &done.cmd, work) {
                Next::Continue => ctx.release(done.conn),
                Next::Hold => {}
                Next::Close => ctx.close(done.conn, "handling a decoded request failed"),
            }
            self.handled_off_loop.push(done.cmd);
        }
    }

    /// Takes batches from the batching thread and applies them in chunks, so that a mass
    /// expiry never holds the loop for long; none while a registration is applied in steps
    /// (an unregistration of its broker applies after it, as if it had applied in one go, so
    /// it leaves no topic behind).
    fn apply_unregistrations(&mut self, started: Instant) {
        while let Ok(batch) = self.unregister_batches.try_recv() {
            self.processor.record_unregister_batch(batch.len());
            self.bytes_since_trim += batch.len() * 1024;
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

    /// A due scan runs a chunk of brokers per turn; when it ends, the expired brokers'
    /// connections are closed, a chunk per turn.
    fn pace_expiry(&mut self, ctx: &mut Ctx<PeerState>) {
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

    /// After a registration burst, a mass unregistration, or connections that buffered much
    /// (large frames, unread replies), or tables shrunk by removals, once the queues and buffers are back to their usual
    /// size, hands the freed heap back to the OS (at most once a second), so RSS follows the
    /// tables rather than the burst's peak.
    fn trim_heap_after_bursts(&mut self, ctx: &mut Ctx<PeerState>) {
        let now_ms = ctx.now_ms();
        // What the tables freed (removed brokers and topics) counts like traffic.
        self.bytes_since_trim += self.processor.take_freed_bytes();
        let buffered = ctx.stats().buffered_bytes;
        self.buffered_peak = self.buffered_peak.max(ctx.take_buffered_peak());
        let buffers_drained =
            self.buffered_peak >= TRIM_AFTER_BUFFERED && buffered <= self.buffered_peak / 4;
        // During a long storm the queue never empties, so "drained to its usual read-ahead"
        // is the signal that a burst is over.
        if (self.bytes_since_trim < TRIM_AFTER_BYTES && !buffers_drained)
            || self.registrations.bytes > REGISTRATION_READ_AHEAD_BYTES
            || !self.unregistrations.is_empty()
            || now_ms < self.next_trim_ms
        {
            return;
        }
        self.bytes_since_trim = 0;
        self.buffered_peak = buffered;
        self.next_trim_ms = now_ms + 1000;
        self.processor.release_decode_scratch();
        release_free_heap();
    }
}

impl Handler for NameServer {
    type Conn = PeerState;
    type FrameError = FrameError;

    fn cut_frame(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        frame::next_frame(buf, self.settings.frame_max)
    }

    /// New connections are scheduled as brokers' until their first request shows a client;
    /// the controller's are read at once (small requests, answered by the controller).
    fn on_accept(&mut self, ctx: &mut Ctx<PeerState>, conn: ConnId, tag: ListenerTag) -> ReadClass {
        if tag == controller_port::LISTENER {
            if let Some(peer) = ctx.data(conn) {
                peer.controller_port = true;
            }
            return ReadClass::Interactive;
        }
        ReadClass::Bulk
    }

    fn on_frame(&mut self, ctx: &mut Ctx<PeerState>, conn: ConnId, frame: Bytes) -> Next {
        let cmd = match RemotingCommand::decode(frame, &self.settings.decode) {
            Ok(c) => c,
            Err(e) => {
                warn!("closing connection from {:?}: {e}", ctx.peer(conn));
                return Next::Close;
            }
        };
        if let Some(port) = self.controller.as_mut() {
            // The controller's listener, and the connections its peer link opened.
            if ctx.listener(conn) != Some(NAMESRV_LISTENER) {
                return port.on_frame(ctx, conn, &cmd);
            }
        }
        if let Some(peer) = ctx.data(conn) {
            if !peer.seen_request {
                peer.seen_request = true;
                let class = if is_broker_request(cmd.code) {
                    ReadClass::Bulk
                } else {
                    ReadClass::Interactive
                };
                ctx.set_read_class(conn, class);
            }
        }
        if cmd.code == request::REGISTER_BROKER && !cmd.is_response() {
            // Answered in before_sleep; this connection's later frames wait so that its
            // replies keep their order.
            return self.admit_registration(ctx, conn, cmd);
        }
        self.handle_now(ctx, conn, &cmd, BodyWork::OnLoop)
    }

    /// Only the controller's peer link opens connections.
    fn on_connected(&mut self, ctx: &mut Ctx<PeerState>, conn: ConnId, result: io::Result<()>) {
        if let Some(port) = self.controller.as_mut() {
            port.on_connected(ctx, conn, result);
        }
    }

    /// Every broker that registered over the connection is unregistered (on the controller's
    /// port: every broker that heartbeated over it is inactive).
    fn on_close(&mut self, ctx: &mut Ctx<PeerState>, conn: ConnId, peer: PeerState) {
        if peer.controller_port {
            if let Some(port) = self.controller.as_mut() {
                port.on_close(ctx, conn);
            }
            return;
        }
        self.processor.connection_closed(conn.index());
    }

    fn on_timer(&mut self, ctx: &mut Ctx<PeerState>, timer: TimerId) {
        if let Some(port) = self.controller.as_mut() {
            if port.on_timer(ctx, timer) {
                return;
            }
        }
        if timer == SCAN_TIMER {
            self.expiry.scan_due = true;
            // A quiet spell after a burst still gets its route-change summary line.
            self.processor.log_change_summary(ctx.now_ms());
        }
    }

    fn may_read_bulk(&self) -> bool {
        !self.registration_queue_full()
    }

    /// The paced work of a turn: answers of durable writes, registrations, then
    /// unregistrations (sharing one time budget), expiry, heap trimming; and what the
    /// controller's log writer finished. Writes in flight are work pending only while stopping
    /// (otherwise the writer's wake-up ends the poll).
    fn before_sleep(&mut self, ctx: &mut Ctx<PeerState>) -> bool {
        self.answer_durable_writes(ctx);
        let controller_busy = match self.controller.as_mut() {
            Some(port) => port.before_sleep(ctx),
            None => false,
        };
        self.take_decoded(ctx);
        let slow_work = Instant::now();
        self.run_registrations(ctx, slow_work);
        self.free_off_loop();
        self.apply_unregistrations(slow_work);
        self.pace_expiry(ctx);
        self.trim_heap_after_bursts(ctx);
        controller_busy
            || !self.registrations.queue.is_empty()
            || self.processor.topic_steps_pending()
            || !self.after_steps.is_empty()
            || !self.unregistrations.is_empty()
            || self.expiry.in_progress
            || self.expiry.scan_due
            || !self.expiry.conns_to_close.is_empty()
            || (ctx.is_stopping()
                && (self.processor.writes_in_flight() > 0 || self.decode.in_flight() > 0))
    }
}

fn server_counters(stats: LoopStats) -> ServerCounters {
    ServerCounters {
        connections: stats.connections,
        bytes_in: stats.bytes_in,
        bytes_out: stats.bytes_out,
        buffered_bytes: stats.buffered_bytes,
        refused_connections: stats.refused,
        frame_timeouts: stats.frame_timeouts,
        closed_over_budget: stats.closed_over_budget,
        accept_failures: stats.accept_failures,
        max_turn_micros: stats.max_turn_micros,
        long_turns: stats.long_turns,
    }
}

/// Runs the processor on one request, containing a panic (a bug, never expected) to that
/// request: it is logged and the caller closes the connection, and the server keeps serving
/// everyone else.
fn handle_guarded(
    processor: &mut Processor,
    ctx: &RequestContext,
    counters: &ServerCounters,
    cmd: &RemotingCommand,
    work: BodyWork,
    out: &mut Vec<u8>,
) -> Option<Effects> {
    let mark = out.len();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        processor.handle_with(ctx, counters, cmd, work, out)
    }));
    match result {
        Ok(effects) => Some(effects),
        Err(_) => {
            out.truncate(mark);
            error!(
                "BUG: request code {} from {:?} panicked; closing that connection",
                cmd.code, ctx.peer
            );
            None
        }
    }
}

/// What the decode worker would make of a job, made here: the fallback when the worker is gone
/// (it ended after a panic), so that large bodies are still answered.
fn decode_here(request: &decode_worker::Request) -> Decoded {
    let (cmd, job) = (&request.cmd, &request.job);
    error!(
        "the decode worker is gone: decoding request {} on the loop",
        cmd.code
    );
    decode_worker::decode_guarded(cmd, job, &mut DecodeScratch::default())
}

/// Returns freed heap memory to the OS (glibc keeps it in its free lists otherwise).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_free_heap() {
    extern "C" {
        fn malloc_trim(pad: usize) -> i32;
    }
    // SAFETY: glibc's malloc_trim(size_t) has no preconditions: it only walks the allocator's
    // own free lists (under the allocator's locks) and releases whole free pages; it never
    // touches memory that is still allocated.
    unsafe {
        malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_heap() {}

/// glibc's `M_TRIM_THRESHOLD`: free memory at the top of the heap kept before `free` shrinks it.
const HEAP_TRIM_THRESHOLD: i32 = 32 << 20;
/// glibc's `M_MMAP_THRESHOLD`: allocations from this size up get their own mapping.
const HEAP_MMAP_THRESHOLD: i32 = 4 << 20;

/// Makes glibc keep freed heap until [`release_free_heap`] hands it back. By default `free`
/// shrinks the heap whenever 128 KiB or more are free at its top, so under a registration
/// storm every 21 KB frame buffer is taken from fresh pages and faulted in again:
/// ~690k page faults in a 5 s steady `rmq-bench register` run, 50-57k registrations/s; with
/// these thresholds 800 faults and 89-92k/s, RSS the same (5.2-5.6 MiB), since the loop
/// still trims after bursts (at most once a second). Allocations of 4 MiB and more (huge
/// bodies) keep their own mappings, returned at once when freed. Returns whether glibc took
/// both settings.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_freed_heap_until_trim() -> bool {
    const M_TRIM_THRESHOLD: i32 = -1;
    const M_MMAP_THRESHOLD: i32 = -3;
    extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
    }
    // SAFETY: glibc's mallopt(int, int) only sets allocator parameters (under its lock); it
    // returns 1 on success, 0 for an unknown parameter or a value out of range.
    unsafe {
        mallopt(M_TRIM_THRESHOLD, HEAP_TRIM_THRESHOLD) == 1
            && mallopt(M_MMAP_THRESHOLD, HEAP_MMAP_THRESHOLD) == 1
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_freed_heap_until_trim() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_cap_stays_below_the_open_file_limit() {
        // ulimit -n 64: room for 30 connections, the rest kept for files.
        assert_eq!(connection_cap(65_536, Some(64)), 30);
        assert_eq!(connection_cap(65_536, Some(1024)), 960);
        assert_eq!(connection_cap(100, Some(1024)), 100);
        assert_eq!(connection_cap(100, None), 100);
        // What the cap asks for is enough for it, and not much more.
        for max in [100u32, 65_536, 1_000_000] {
            let wanted = descriptors_wanted(max);
            assert_eq!(connection_cap(max, Some(wanted)), max as usize);
            assert!(
                connection_cap(max, Some(wanted - 2)) < max as usize,
                "{max}"
            );
        }
    }

    #[test]
    fn loop_limits_follow_the_config() {
        let mut c = NamesrvConfig {
            max_connections: 1000,
            reserved_connections_percent: 5,
            frame_read_timeout_millis: 1234,
            max_buffered_bytes: 8 << 20,
            max_connections_per_address: 7,
            ..NamesrvConfig::default()
        };
        let l = loop_limits(&c, Some(1_000_000));
        assert_eq!(l.max_connections, 1000);
        assert_eq!(l.reserved_for_recent, 50);
        assert_eq!((l.frame_timeout_ms, l.max_buffered), (1234, 8 << 20));
        assert_eq!(l.max_per_address, 7);
        // The reserve is a share of the cap actually in force.
        c.max_connections = 65_536;
        assert_eq!(loop_limits(&c, Some(64)).reserved_for_recent, 1);
    }

    #[test]
    fn os_errors_read_as_the_os_says_them() {
        let e = io::Error::from_raw_os_error(98);
        assert!(e.to_string().contains("(os error 98)"));
        assert!(!os_message(&e).contains("os error"));
        let plain = io::Error::other("no such thing");
        assert_eq!(os_message(&plain), "no such thing");
    }
}
