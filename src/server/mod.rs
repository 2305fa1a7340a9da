//! The name server on top of the event loop: the [`Handler`] that turns frames into
//! `RemotingCommand`s for the [`Processor`], and the pacing that keeps one loop fair:
//! registrations wait in a queue applied within a budget per turn (`admission`),
//! unregistrations and the expiry scan go a chunk per turn (`pacing`), large bodies are
//! decoded off the loop (`decode_worker`). The embedded Controller's listener (feature
//! `controller`) shares the loop; its events go to `controller_port`. With `tls.server.mode`
//! set (feature `tls`), both listeners speak TLS (`tls`).

use crate::config::NamesrvConfig;
use crate::event_loop::oneway;
use crate::event_loop::{
    self, ConnId, Ctx, EventLoop, Handler, ListenerTag, LoopWaker, Next, ReadClass, TimerId,
};
use crate::kv::KvStore;
use crate::processor::{
    BodyWork, DeferredReply, Effects, Outbox, Processor, RequestContext, UnregisterBatch,
    Unregistration,
};
use crate::remoting::codes::{self, is_broker_request, request};
use crate::remoting::command::RemotingCommand;
use crate::remoting::frame::{self, FrameError};
use crate::systemd::Notifier;
use bytes::{Bytes, BytesMut};
use crossbeam_channel::{Receiver, Sender};
use log::{error, warn};
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use crate::event_loop::StopHandle;
pub use controller_port::ControllerSetup;

#[cfg(feature = "controller")]
mod controller_port;
#[cfg(not(feature = "controller"))]
#[path = "no_controller_port.rs"]
mod controller_port;

#[cfg(feature = "tls")]
mod tls;
#[cfg(not(feature = "tls"))]
#[path = "no_tls.rs"]
mod tls;

use admission::{RegistrationQueue, REGISTRATION_READ_AHEAD_BYTES};
use controller_port::{ControllerPort, PeerConnData};
use decode_worker::DecodeWorker;
use metrics_port::MetricsPort;
use pacing::ExpiryPacer;
use settings::{connection_cap, loop_limits, prepare_descriptors, Settings};
use tls::TlsPorts;

mod admission;
mod decode_worker;
mod metrics_port;
mod pacing;
mod settings;

const NAMESRV_LISTENER: ListenerTag = ListenerTag(0);

const SCAN_TIMER: TimerId = TimerId(0);

const WATCHDOG_TIMER: TimerId = TimerId(1);

/// Time per turn for queued registrations and unregistrations together (at least one item).
const SLOW_WORK_BUDGET: Duration = Duration::from_micros(300);

/// Bytes read and written after which freed heap is handed back to the OS once the queues are
/// empty again (RSS after a load suite: 5.0 MiB with, 6.4-6.7 MiB without; re-measure with
/// `rmq-bench ... --pid` and `ps -o rss` after the runs).
const TRIM_AFTER_BYTES: u64 = 4 << 20;

const NOTIFY_TIMEOUT: Duration = Duration::from_millis(300);

#[derive(Debug)]
pub enum StartError {
    Bind { addr: SocketAddr, source: io::Error },
    Io(io::Error),
    Kv(crate::kv::KvError),
    Controller(String),
    Tls(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Bind { addr, source } => {
                write!(f, "cannot listen on {addr}: {}", os_message(source))
            }
            StartError::Io(e) => write!(f, "{e}"),
            StartError::Kv(e) => write!(f, "{e}"),
            StartError::Controller(e) | StartError::Tls(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StartError {}

impl From<io::Error> for StartError {
    fn from(e: io::Error) -> Self {
        StartError::Io(e)
    }
}

/// An OS error's message without Rust's ` (os error N)` suffix (`Address already in use`).
fn os_message(e: &io::Error) -> String {
    let text = e.to_string();
    match (e.raw_os_error(), text.rfind(" (os error ")) {
        (Some(_), Some(at)) => text[..at].to_string(),
        _ => text,
    }
}

pub struct Server {
    event_loop: EventLoop<NameServer>,
    app: NameServer,
    local_addr: SocketAddr,
    reloads: Sender<LiveValues>,
}

/// The config file's values of the keys that may change while running, as SIGHUP read them.
type LiveValues = Vec<(String, String)>;

/// Reloads read while the loop is busy that may wait for it; more are refused, not queued.
const WAITING_RELOADS: usize = 4;

/// Hands a reloaded config from the signal thread to the loop, which owns the config.
#[derive(Clone)]
pub struct ReloadHandle {
    reloads: Sender<LiveValues>,
    waker: LoopWaker,
}

impl ReloadHandle {
    /// False when reloads are already waiting for a busy loop (nothing was handed over).
    pub fn reload(&self, live: LiveValues) -> bool {
        let handed = self.reloads.try_send(live).is_ok();
        self.waker.wake();
        handed
    }
}

impl Server {
    pub fn bind_with_controller(
        mut config: NamesrvConfig,
        controller: Option<ControllerSetup>,
    ) -> Result<Server, StartError> {
        if config.enable_controller_in_namesrv && controller.is_none() {
            return Err(ControllerPort::missing_setup());
        }
        config.enable_controller_in_namesrv = controller.is_some();
        check_store_dir("kvConfigPath", Path::new(&config.kv_config_path))?;
        check_store_dir("configStorePath", Path::new(&config.config_store_path))?;
        let tls = TlsPorts::from_config(&config).map_err(StartError::Tls)?;
        let kv = KvStore::open(Path::new(&config.kv_config_path)).map_err(StartError::Kv)?;
        let addr = socket_address(&config.bind_address, config.listen_port)?;
        let descriptors = prepare_descriptors(&config);
        let mut event_loop = EventLoop::new(loop_limits(&config, descriptors))?;
        let local_addr = event_loop
            .listen(addr, NAMESRV_LISTENER)
            .map_err(|source| StartError::Bind { addr, source })?;
        // As Java after binding port 0: GET_NAMESRV_CONFIG reports the port actually bound.
        config.listen_port = local_addr.port();
        let bind = |setup| ControllerPort::bind(setup, &mut event_loop, &config, local_addr);
        let controller = controller.map(bind).transpose()?;
        let metrics = MetricsPort::bind(&config, &mut event_loop)?;
        let mut app = NameServer::new(config, kv, event_loop.waker())?;
        app.descriptors = descriptors;
        app.controller = controller;
        app.metrics = metrics;
        app.tls = tls;
        if let Some(tls) = &mut app.tls {
            let controller_port = app
                .controller
                .is_some()
                .then_some(controller_port::LISTENER);
            let listeners: Vec<ListenerTag> = [Some(NAMESRV_LISTENER), controller_port]
                .into_iter()
                .flatten()
                .collect();
            tls.start(event_loop.ctx(), &listeners);
        }
        app.arm_scan_timer(event_loop.ctx());
        let (reloads, reloaded) = crossbeam_channel::bounded(WAITING_RELOADS);
        app.reloaded = reloaded;
        Ok(Server {
            event_loop,
            app,
            local_addr,
            reloads,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn controller_addr(&self) -> Option<SocketAddr> {
        self.app.controller.as_ref().map(ControllerPort::local_addr)
    }

    /// The metrics endpoint's address (`metricsExporterType=PROM`).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.app.metrics.as_ref().map(MetricsPort::local_addr)
    }

    pub fn stop_handle(&self) -> StopHandle {
        self.event_loop.stop_handle()
    }

    pub fn reload_handle(&self) -> ReloadHandle {
        ReloadHandle {
            reloads: self.reloads.clone(),
            waker: self.event_loop.waker(),
        }
    }

    /// systemd's watchdog: `WATCHDOG=1` from the loop's own timer every half `interval`, so a
    /// loop stuck for longer than `interval` misses it and systemd restarts the process.
    pub fn watchdog(&mut self, notifier: Notifier, interval: Duration) {
        let every_ms = (interval.as_millis() as u64 / 2).max(1);
        log::info!("systemd watchdog: WATCHDOG=1 every {every_ms} ms");
        self.app.watchdog = Some((notifier, every_ms));
        self.app.ping_watchdog(self.event_loop.ctx());
    }

    pub fn run(self) -> io::Result<()> {
        let app = self.event_loop.run(self.app)?;
        app.shutdown();
        Ok(())
    }
}

/// Fails the start, naming `key` and the directory, when `file`'s directory cannot be created
/// or written: better than a SYSTEM_ERROR answered at the first update or KV write.
fn check_store_dir(key: &str, file: &Path) -> Result<(), StartError> {
    let dir = crate::durable_file::parent_dir(file);
    let probe = format!(
        ".{}.start-check",
        file.file_name().unwrap_or_default().to_string_lossy()
    );
    crate::durable_file::check_writable_dir(dir, &probe).map_err(|e| {
        StartError::Io(io::Error::new(
            e.kind(),
            format!(
                "{key}: cannot write in {}: {}",
                dir.display(),
                os_message(&e)
            ),
        ))
    })
}

/// IPv6 hosts with or without brackets.
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

/// What a connection is: how it is read, and the `kind` of the connections gauge.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum PeerKind {
    /// On the name server's port, before its first request says whether it is a broker.
    #[default]
    New,
    Broker,
    Client,
    /// Accepted on the controller's listener, or opened by its peer link.
    Controller,
    Metrics,
}

#[derive(Debug, Default)]
struct PeerState {
    kind: PeerKind,
}

impl PeerConnData for PeerState {
    fn peer_link() -> PeerState {
        PeerState {
            kind: PeerKind::Controller,
        }
    }
}

struct NameServer {
    processor: Processor,
    settings: Settings,
    registrations: RegistrationQueue,
    unregister_batches: Receiver<UnregisterBatch>,
    unregistrations: VecDeque<Unregistration>,
    expiry: ExpiryPacer,
    trimmed_at_bytes: u64,
    removed_since_trim: bool,
    next_trim_ms: u64,
    descriptors: Option<u64>,
    threads: Vec<JoinHandle<()>>,
    /// Route writes held while a registration is applied in steps, in arrival order.
    after_steps: VecDeque<(ConnId, RemotingCommand, BodyWork)>,
    decode: DecodeWorker,
    handled_off_loop: Vec<RemotingCommand>,
    controller: Option<ControllerPort>,
    /// systemd's socket and the ping interval (ms), under `WatchdogSec=`.
    watchdog: Option<(Notifier, u64)>,
    reloaded: Receiver<LiveValues>,
    metrics: Option<MetricsPort>,
    /// Open connections by kind, as [`metrics_port::COUNTED_KINDS`].
    conn_kinds: [usize; 4],
    tls: Option<TlsPorts>,
}

impl NameServer {
    fn new(config: NamesrvConfig, kv: KvStore, waker: LoopWaker) -> io::Result<NameServer> {
        let capacity = config.un_register_broker_queue_capacity.max(1) as usize;
        let wake = waker.clone();
        let (durable, kv_writer) = kv.spawn_writer("kv-writer", Box::new(move || wake.wake()))?;
        let (unregistrations, unregister_batches, batcher) =
            event_loop::spawn_batcher("unregister-worker", capacity, waker.clone())?;
        let (notifications, sender) =
            oneway::spawn_sender("notify-sender", capacity, NOTIFY_TIMEOUT)?;
        let decode = DecodeWorker::spawn("decode-worker", waker)?;
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
            trimmed_at_bytes: 0,
            removed_since_trim: false,
            next_trim_ms: 0,
            descriptors: None,
            threads: vec![batcher, kv_writer, sender],
            after_steps: VecDeque::new(),
            decode,
            handled_off_loop: Vec::new(),
            controller: None,
            watchdog: None,
            reloaded: crossbeam_channel::never(),
            metrics: None,
            conn_kinds: [0; 4],
            tls: None,
        })
    }

    /// Counts a connection becoming `kind` (`opened`) or leaving it.
    fn count_kind(&mut self, kind: PeerKind, opened: bool) {
        let mut counted = metrics_port::COUNTED_KINDS.iter();
        if let Some(i) = counted.position(|(k, _)| *k == kind) {
            let n = &mut self.conn_kinds[i];
            *n = if opened { *n + 1 } else { n.saturating_sub(1) };
        }
    }

    fn arm_scan_timer(&mut self, ctx: &mut Ctx<PeerState>) {
        self.expiry.next_scan_ms = ctx.now_ms() + self.settings.scan_interval_ms;
        ctx.set_timer(SCAN_TIMER, self.expiry.next_scan_ms);
    }

    fn ping_watchdog(&mut self, ctx: &mut Ctx<PeerState>) {
        if let Some((notifier, every_ms)) = self.watchdog.as_mut() {
            notifier.notify("WATCHDOG=1");
            ctx.set_timer(WATCHDOG_TIMER, ctx.now_ms() + *every_ms);
        }
    }

    fn shutdown(self) {
        if let Some(port) = self.controller {
            port.shutdown();
        }
        self.decode.shutdown();
        drop(self.processor);
        for t in self.threads {
            if t.join().is_err() {
                error!("a helper thread panicked");
            }
        }
    }

    /// The one ordering rule of route changes: while a registration is applied in steps, a
    /// request whose code row [`codes::writes_routes`] waits for its last step.
    fn waits_for_topic_steps(&self, cmd: &RemotingCommand) -> bool {
        self.processor.topic_steps_pending() && !cmd.is_response() && codes::writes_routes(cmd.code)
    }

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
        let Some(effects) = self.run_guarded(ctx, conn, cmd, work) else {
            return Next::Close;
        };
        if effects.config_changed {
            self.refresh_settings(ctx);
        }
        if let Some(job) = effects.off_loop {
            return self.decode_off_loop(ctx, conn, cmd.clone(), *job);
        }
        if effects.deferred {
            // Answered by answer_durable_writes or run_topic_lists; later frames wait so replies
            // keep their order.
            return Next::Hold;
        }
        Next::Continue
    }

    /// A request its connection was held for (nothing if the connection closed meanwhile).
    fn handle_held(
        &mut self,
        ctx: &mut Ctx<PeerState>,
        conn: ConnId,
        cmd: &RemotingCommand,
        work: BodyWork,
    ) {
        if ctx.peer(conn).is_none() {
            return;
        }
        match self.handle_now(ctx, conn, cmd, work) {
            Next::Continue => ctx.release(conn),
            Next::Hold => {}
            Next::Close => ctx.close(conn, "handling a held request failed"),
        }
    }

    /// `None`: the connection is gone, or the handling panicked (the caller closes it).
    fn run_guarded(
        &mut self,
        ctx: &mut Ctx<PeerState>,
        conn: ConnId,
        cmd: &RemotingCommand,
        work: BodyWork,
    ) -> Option<Effects> {
        let rctx = RequestContext {
            peer: ctx.peer(conn),
            now_ms: ctx.now_ms(),
            reply_to: conn,
        };
        let counters = ctx.stats();
        let out = ctx.write_buf(conn)?;
        let (mark, processor) = (out.len(), &mut self.processor);
        let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            processor.handle_with(&rctx, &counters, cmd, work, out)
        }));
        if handled.is_err() {
            out.truncate(mark);
            error!(
                "BUG: request code {} from {:?} panicked; closing that connection",
                cmd.code, rctx.peer
            );
        }
        handled.ok()
    }

    fn deliver(ctx: &mut Ctx<PeerState>, replies: Vec<DeferredReply>) {
        for reply in replies {
            if let Some(out) = ctx.write_buf(reply.conn) {
                out.extend_from_slice(&reply.frame);
            }
            ctx.release(reply.conn);
        }
    }

    fn answer_durable_writes(&mut self, ctx: &mut Ctx<PeerState>) {
        let (replies, effects) = self.processor.finish_durable_writes();
        NameServer::deliver(ctx, replies);
        if effects.config_changed {
            self.refresh_settings(ctx);
        }
    }

    fn apply_reloads(&mut self, ctx: &mut Ctx<PeerState>) {
        while let Ok(live) = self.reloaded.try_recv() {
            if self.processor.reload_config(&live).config_changed {
                self.refresh_settings(ctx);
            }
        }
    }

    fn refresh_settings(&mut self, ctx: &mut Ctx<PeerState>) {
        let config = self.processor.config();
        self.settings = Settings::from_config(config);
        if let Some(port) = self.controller.as_mut() {
            port.set_allow_lists(config);
        }
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

    /// Once the queues are back to their usual size (at most once a second).
    fn trim_heap_after_bursts(&mut self, ctx: &Ctx<PeerState>) {
        let stats = ctx.stats();
        let moved = stats.bytes_in + stats.bytes_out;
        let now_ms = ctx.now_ms();
        if (moved - self.trimmed_at_bytes < TRIM_AFTER_BYTES && !self.removed_since_trim)
            || self.registrations.bytes > REGISTRATION_READ_AHEAD_BYTES
            || !self.unregistrations.is_empty()
            || self.expiry.in_progress
            || !self.expiry.conns_to_close.is_empty()
            || self.decode.ready_here()
            || now_ms < self.next_trim_ms
        {
            return;
        }
        self.trimmed_at_bytes = moved;
        self.removed_since_trim = false;
        self.next_trim_ms = now_ms + 1000;
        release_free_heap();
    }
}

impl Handler for NameServer {
    type Conn = PeerState;
    type FrameError = FrameError;

    fn cut_frame(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        frame::next_frame(buf, self.settings.frame_max)
    }

    fn frame_len(&self, buf: &[u8]) -> Option<usize> {
        let length = u32::from_be_bytes(*buf.first_chunk()?);
        (u64::from(length) + 4 <= u64::from(self.settings.frame_max)).then_some(length as usize + 4)
    }

    /// Read as brokers' until their first request shows a client.
    fn on_accept(&mut self, ctx: &mut Ctx<PeerState>, conn: ConnId, tag: ListenerTag) -> ReadClass {
        let kind = match tag {
            controller_port::LISTENER => PeerKind::Controller,
            metrics_port::LISTENER => PeerKind::Metrics,
            _ => PeerKind::New,
        };
        self.count_kind(kind, true);
        if let Some(peer) = ctx.data(conn) {
            peer.kind = kind;
        }
        match kind {
            PeerKind::New => ReadClass::Bulk,
            _ => ReadClass::Interactive,
        }
    }

    fn on_frame(&mut self, ctx: &mut Ctx<PeerState>, conn: ConnId, frame: Bytes) -> Next {
        if self.metrics.is_some() && ctx.listener(conn) == Some(metrics_port::LISTENER) {
            return self.answer_scrape(ctx, conn, &frame);
        }
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
                return port.on_frame(ctx, conn, &cmd, self.processor.name_limits());
            }
        }
        if ctx
            .data(conn)
            .is_some_and(|peer| peer.kind == PeerKind::New)
        {
            let (kind, class) = if is_broker_request(cmd.code) {
                (PeerKind::Broker, ReadClass::Bulk)
            } else {
                (PeerKind::Client, ReadClass::Interactive)
            };
            if let Some(peer) = ctx.data(conn) {
                peer.kind = kind;
            }
            self.count_kind(PeerKind::New, false);
            self.count_kind(kind, true);
            ctx.set_read_class(conn, class);
        }
        if cmd.code == request::REGISTER_BROKER && !cmd.is_response() {
            return self.admit_registration(ctx, conn, cmd);
        }
        #[cfg(debug_assertions)]
        debug_stall(&cmd);
        self.handle_now(ctx, conn, &cmd, BodyWork::OnLoop)
    }

    fn on_connected(&mut self, ctx: &mut Ctx<PeerState>, conn: ConnId, result: io::Result<()>) {
        if let Some(port) = self.controller.as_mut() {
            port.on_connected(ctx, conn, result);
        }
    }

    fn on_close(&mut self, ctx: &mut Ctx<PeerState>, conn: ConnId, peer: PeerState) {
        self.count_kind(peer.kind, false);
        if peer.kind == PeerKind::Controller {
            if let Some(port) = self.controller.as_mut() {
                port.on_close(ctx, conn);
            }
            return;
        }
        self.processor.connection_closed(conn.index());
    }

    fn on_timer(&mut self, ctx: &mut Ctx<PeerState>, timer: TimerId) {
        if (self.controller.as_mut()).is_some_and(|port| port.on_timer(ctx, timer)) {
            return;
        }
        match timer {
            SCAN_TIMER => self.expiry.scan_due = true,
            WATCHDOG_TIMER => self.ping_watchdog(ctx),
            tls::RELOAD_TIMER => {
                if let Some(tls) = &mut self.tls {
                    tls.on_timer(ctx);
                }
            }
            _ => {}
        }
    }

    fn may_read_bulk(&self) -> bool {
        !self.registration_queue_full()
    }

    /// Writes in flight count only while stopping.
    fn before_sleep(&mut self, ctx: &mut Ctx<PeerState>) -> bool {
        self.apply_reloads(ctx);
        self.answer_durable_writes(ctx);
        let controller_busy = (self.controller.as_mut()).is_some_and(|port| port.before_sleep(ctx));
        self.take_decoded(ctx);
        let slow_work = Instant::now();
        self.run_registrations(ctx, slow_work);
        self.free_off_loop();
        self.pace_removals(ctx);
        let answered = self
            .processor
            .run_topic_lists(|c, head, body| ctx.write_with_body(c, head, body));
        for conn in answered {
            ctx.release(conn);
        }
        self.trim_heap_after_bursts(ctx);
        // Once per turn, not per request; the scan timer wakes a quiet loop for it.
        self.processor.log_change_summary(ctx.now_ms());
        controller_busy
            || !self.registrations.queue.is_empty()
            || self.processor.topic_steps_pending()
            || !self.after_steps.is_empty()
            || self.processor.topic_lists_waiting()
            || !self.unregistrations.is_empty()
            || self.expiry.in_progress
            || self.expiry.scan_due
            || !self.expiry.conns_to_close.is_empty()
            || (ctx.is_stopping()
                && (self.processor.writes_in_flight() > 0 || self.decode.in_flight() > 0))
    }
}

/// Debug builds only, for tests of what a stuck loop does (the systemd watchdog stops,
/// tests/systemd.rs): `RMQ_NAMESRV_DEBUG_STALL_MS=N` makes every GET_NAMESRV_CONFIG hold the
/// loop N ms. The integration tests run the debug binary; a release build has no such hook.
#[cfg(debug_assertions)]
fn debug_stall(cmd: &RemotingCommand) {
    if cmd.code != request::GET_NAMESRV_CONFIG || cmd.is_response() {
        return;
    }
    let stall = std::env::var("RMQ_NAMESRV_DEBUG_STALL_MS").ok();
    if let Some(ms) = stall.and_then(|ms| ms.parse().ok()) {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_free_heap() {
    // SAFETY: glibc's malloc_trim has no preconditions: it only releases whole free pages of
    // the allocator's own free lists (under its locks).
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_heap() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_errors_read_as_the_os_says_them() {
        let e = io::Error::from_raw_os_error(98);
        assert!(e.to_string().contains("(os error 98)"));
        assert!(!os_message(&e).contains("os error"));
        let plain = io::Error::other("no such thing");
        assert_eq!(os_message(&plain), "no such thing");
    }
}
