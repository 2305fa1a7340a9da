//! The name server on top of the event loop: the [`Handler`] that turns frames into
//! `RemotingCommand`s for the [`Processor`], and the pacing that keeps one loop fair:
//! registrations wait in a queue applied within a budget per turn (`admission`),
//! unregistrations and the expiry scan go a chunk per turn (`pacing`), large bodies are
//! decoded off the loop (`decode_worker`). The embedded Controller's listener (feature
//! `controller`) shares the loop; its events go to `controller_port`.

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
use bytes::{Bytes, BytesMut};
use crossbeam_channel::Receiver;
use log::{error, warn};
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

use admission::{RegistrationQueue, REGISTRATION_READ_AHEAD_BYTES};
use controller_port::{ControllerPort, PeerConnData};
use decode_worker::DecodeWorker;
use pacing::ExpiryPacer;
use settings::{connection_cap, loop_limits, prepare_descriptors, Settings};

mod admission;
mod decode_worker;
mod pacing;
mod settings;

const NAMESRV_LISTENER: ListenerTag = ListenerTag(0);

const SCAN_TIMER: TimerId = TimerId(0);

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
        let bind = |setup| ControllerPort::bind(setup, &mut event_loop, &config, local_addr);
        let controller = controller.map(bind).transpose()?;
        let mut app = NameServer::new(config, kv, event_loop.waker())?;
        app.descriptors = descriptors;
        app.controller = controller;
        app.arm_scan_timer(event_loop.ctx());
        Ok(Server {
            event_loop,
            app,
            local_addr,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn controller_addr(&self) -> Option<SocketAddr> {
        self.app.controller.as_ref().map(ControllerPort::local_addr)
    }

    pub fn stop_handle(&self) -> StopHandle {
        self.event_loop.stop_handle()
    }

    pub fn run(self) -> io::Result<()> {
        let app = self.event_loop.run(self.app)?;
        app.shutdown();
        Ok(())
    }
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

#[derive(Debug, Default)]
struct PeerState {
    /// The first request says whether the peer is a broker.
    seen_request: bool,
    /// Accepted on the controller's listener, or opened by its peer link.
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
        })
    }

    fn arm_scan_timer(&mut self, ctx: &mut Ctx<PeerState>) {
        self.expiry.next_scan_ms = ctx.now_ms() + self.settings.scan_interval_ms;
        ctx.set_timer(SCAN_TIMER, self.expiry.next_scan_ms);
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
                return port.on_frame(ctx, conn, &cmd, self.processor.name_limits());
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
            return self.admit_registration(ctx, conn, cmd);
        }
        self.handle_now(ctx, conn, &cmd, BodyWork::OnLoop)
    }

    fn on_connected(&mut self, ctx: &mut Ctx<PeerState>, conn: ConnId, result: io::Result<()>) {
        if let Some(port) = self.controller.as_mut() {
            port.on_connected(ctx, conn, result);
        }
    }

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
        if (self.controller.as_mut()).is_some_and(|port| port.on_timer(ctx, timer)) {
            return;
        }
        if timer == SCAN_TIMER {
            self.expiry.scan_due = true;
        }
    }

    fn may_read_bulk(&self) -> bool {
        !self.registration_queue_full()
    }

    /// Writes in flight count only while stopping.
    fn before_sleep(&mut self, ctx: &mut Ctx<PeerState>) -> bool {
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
