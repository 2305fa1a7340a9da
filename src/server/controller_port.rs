//! The embedded Controller's port (`enableControllerInNamesrv=true`, feature `controller`): a
//! second listener on the name server's loop. Frames go to the socket-free [`Controller`]; this
//! module adds replies addressed by a [`Ticket`] (written when the controller releases them),
//! the log writer's wake-up flag (so the name server's turns pay nothing), timers, closed
//! connections, 1008 notifications (`event_loop::oneway`), the peer links ([`peers`]) and the
//! stop.

use super::{os_message, StartError};
use crate::audit;
use crate::config::NamesrvConfig;
use crate::controller::raft::{self, wire::Payload};
use crate::controller::Wake;
use crate::controller::{
    ConnRef, Controller, ControllerConfig, Reply, Response, Scan, SCAN_STEPS_PER_TURN,
};
use crate::event_loop::oneway::{self, Oneway, OnewaySender};
use crate::event_loop::{
    ConnId, Ctx, EventLoop, Handler, ListenerTag, LogGate, LoopWaker, Next, TimerId,
};
use crate::remoting::command::{RemotingCommand, SerializeType};
use crate::request::NameLimits;
use crossbeam_channel::TrySendError;
use log::{error, info, warn};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub(super) const LISTENER: ListenerTag = ListenerTag(1);

const DEADLINE_TIMER: TimerId = TimerId(11);
const SCAN_NOT_ACTIVE_TIMER: TimerId = TimerId(12);
const SCAN_INACTIVE_MASTER_TIMER: TimerId = TimerId(13);
const RAFT_TICK_TIMER: TimerId = TimerId(15);

/// At most one warning line per refused audited request and interval (admins may repeat them).
const REFUSED_AUDIT_INTERVAL_MS: u64 = 2_000;

/// Java starts its heartbeat-expiry scan 2 s after start, then keeps its interval.
const FIRST_SCAN_DELAY_MS: u64 = 2_000;

mod metrics;
mod peers;

pub(super) use peers::PeerConnData;
use peers::{PeerFrame, PeerLinks, PeerSetup};

/// Notifications waiting for the sending thread (one per broker of an election).
const NOTIFY_QUEUE: usize = 4_096;
/// Java's `invokeOneway(brokerAddr, request, 3000)`: the connect and write timeout.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(3);

/// The controller's settings, read at start.
#[derive(Debug, Clone)]
pub struct ControllerSetup {
    config: ControllerConfig,
}

impl ControllerSetup {
    /// `lookup` gives the keys the config file and the command line actually set, so that a
    /// key both servers know takes the controller's default when nobody set it.
    pub fn from_config(
        namesrv: &NamesrvConfig,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<ControllerSetup>, String> {
        if !namesrv.enable_controller_in_namesrv {
            return Ok(None);
        }
        let mut config =
            ControllerConfig::from_lookup(lookup).map_err(|e| format!("controller config: {e}"))?;
        config.inherit(namesrv);
        let port = config.listen_port();
        if port != 0 && port == namesrv.listen_port {
            return Err(same_port(port));
        }
        // The controllers dial each other in plain TCP: an enforcing port would refuse them.
        if namesrv.tls_server_mode == "enforcing" && config.peers().len() > 1 {
            return Err(format!(
                "tls.server.mode=enforcing with a group of {} controllers: their peer links \
                 are plain TCP and would be refused; use tls.server.mode=permissive",
                config.peers().len()
            ));
        }
        Ok(Some(ControllerSetup { config }))
    }

    /// The effective settings (runtime updates applied) for `rmq-namesrv -p`.
    pub fn describe(&self) -> Result<String, String> {
        let mut config = self.config.clone();
        config.load_updates().map_err(|e| e.to_string())?;
        Ok(config.to_properties_text())
    }
}

/// The audit line of an answer to an audited request (`crate::audit`).
fn audit_answer(reply: &Reply<Ticket>, gate: &mut LogGate, now_ms: u64) {
    let Some(label) = audit::controller_label(reply.ticket.code) else {
        return;
    };
    let (r, what) = (&reply.response, reply.audit.as_deref().unwrap_or_default());
    audit::log(
        label,
        reply.ticket.peer,
        what,
        r.code,
        r.remark.as_deref(),
        || {
            let held_back = gate.ready(now_ms);
            if let Some(n @ 1..) = held_back {
                warn!("{n} more refused audited request(s) were not logged one by one");
            }
            held_back.is_some()
        },
    );
}

fn same_port(port: u16) -> String {
    format!(
        "controller config: controllerDLegerPeers gives this node port {port}, the name server's listenPort: the controller needs a port of its own (Java's examples use 9878)"
    )
}

/// Where an answer goes, and who asked what (for the audit line written with it).
#[derive(Debug, Clone, Copy)]
struct Ticket {
    conn: ConnId,
    opaque: i32,
    serialize: SerializeType,
    /// For the audit line and the request metrics: what was asked, by whom, and when.
    code: i32,
    peer: Option<SocketAddr>,
    arrived: Instant,
}

struct LogNews {
    pending: AtomicBool,
    waker: LoopWaker,
}

impl Wake for LogNews {
    fn wake(&self) {
        self.pending.store(true, Ordering::Release);
        self.waker.wake();
    }
}

pub(super) struct ControllerPort {
    controller: Controller<Ticket>,
    local_addr: SocketAddr,
    news: Arc<LogNews>,
    replies: Vec<Reply<Ticket>>,
    deadline_armed: Option<u64>,
    scan_not_active_ms: u64,
    scan_inactive_master_ms: u64,
    notifications: Option<OnewaySender>,
    next_notify_opaque: i32,
    sender: JoinHandle<()>,
    links: PeerLinks,
    peer_outbox: Vec<(u64, Payload)>,
    stopping: bool,
    /// Refused audited requests: a few warning lines per interval.
    refused_audits: LogGate,
    request_counts: metrics::RequestCounts,
}

impl ControllerPort {
    /// On the name server's bindAddress (as Java's clone of its server config), its timers
    /// armed and the name server's allow lists set.
    pub(super) fn bind<H: Handler<Conn = C>, C: PeerConnData>(
        setup: ControllerSetup,
        event_loop: &mut EventLoop<H>,
        namesrv: &NamesrvConfig,
        namesrv_addr: SocketAddr,
    ) -> Result<ControllerPort, StartError> {
        let mut config = setup.config;
        let port = config.listen_port();
        if port != 0 && port == namesrv_addr.port() {
            return Err(StartError::Controller(same_port(port)));
        }
        let addr = super::socket_address(&namesrv.bind_address, port)?;
        let local_addr = event_loop.listen(addr, LISTENER).map_err(|e| {
            StartError::Controller(format!(
                "cannot listen on {addr} (this node's entry of controllerDLegerPeers): {}",
                os_message(&e)
            ))
        })?;
        config.set_bound_port(local_addr.port());
        let settings = config.settings().clone();
        let links = PeerLinks::new(PeerSetup::from_config(&config)).map_err(|e| {
            StartError::Controller(format!("cannot start the peer resolver thread: {e}"))
        })?;
        let news = Arc::new(LogNews {
            pending: AtomicBool::new(false),
            waker: event_loop.waker(),
        });
        let wake: Arc<dyn Wake> = news.clone();
        super::check_store_dir("controllerStorePath", &config.config_store_path())?;
        let now = event_loop.ctx().now_ms();
        let controller = Controller::open(config, Some(wake), now)
            .map_err(|e| StartError::Controller(e.to_string()))?;
        let (notifications, sender) =
            oneway::spawn_sender("controller-notify", NOTIFY_QUEUE, NOTIFY_TIMEOUT)?;
        info!("controller listening on {local_addr}");
        let mut port = ControllerPort {
            controller,
            local_addr,
            news,
            replies: Vec::new(),
            deadline_armed: None,
            scan_not_active_ms: settings.scan_not_active_broker_interval_ms.max(1),
            scan_inactive_master_ms: settings.scan_inactive_master_interval_ms.max(1),
            notifications: Some(notifications),
            next_notify_opaque: 0,
            sender,
            links,
            peer_outbox: Vec::new(),
            stopping: false,
            refused_audits: LogGate::new(REFUSED_AUDIT_INTERVAL_MS),
            request_counts: Default::default(),
        };
        port.arm_timers(event_loop.ctx());
        port.set_allow_lists(namesrv);
        Ok(port)
    }

    pub(super) fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The name server's `adminAllowList` and `brokerAllowList` (at start and after each
    /// change).
    pub(super) fn set_allow_lists(&mut self, namesrv: &NamesrvConfig) {
        let parse = crate::config::Cidr::parse_list;
        self.controller.set_allow_lists(
            parse(&namesrv.admin_allow_list),
            parse(&namesrv.broker_allow_list),
        );
    }

    pub(super) fn missing_setup() -> StartError {
        StartError::Controller(
            "enableControllerInNamesrv=true but no controller settings were given: start it with Server::bind_with_controller".into(),
        )
    }

    fn arm_timers<C: PeerConnData>(&mut self, ctx: &mut Ctx<C>) {
        self.links.start(ctx);
        let now = ctx.now_ms();
        ctx.set_timer(SCAN_NOT_ACTIVE_TIMER, now + FIRST_SCAN_DELAY_MS);
        ctx.set_timer(
            SCAN_INACTIVE_MASTER_TIMER,
            now + self.scan_inactive_master_ms,
        );
        ctx.set_timer(RAFT_TICK_TIMER, now + raft::TICK_MS);
    }

    /// A panic (a bug) closes this connection only. `names`: the name server's limits now.
    pub(super) fn on_frame<C>(
        &mut self,
        ctx: &mut Ctx<C>,
        conn: ConnId,
        cmd: &RemotingCommand,
        names: NameLimits,
    ) -> Next {
        if cmd.code == peers::PEER_CODE || self.links.owns(conn) {
            return self.on_peer_frame(ctx, conn, cmd);
        }
        let peer = ctx.peer(conn);
        let ticket = Ticket {
            conn,
            opaque: cmd.opaque,
            serialize: cmd.serialize_type,
            code: cmd.code,
            peer,
            arrived: Instant::now(),
        };
        let now = ctx.now_ms();
        let controller = &mut self.controller;
        controller.set_name_limits(names);
        let replies = &mut self.replies;
        let peer = peer.map(|addr| addr.ip());
        let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let from = Some(ConnRef(conn.index() as u64));
            controller.handle_from(ticket, cmd, from, peer, now, replies);
        }));
        if handled.is_err() {
            error!(
                "BUG: controller request code {} from {:?} panicked; closing that connection",
                cmd.code,
                ctx.peer(conn)
            );
            self.replies.clear();
            return Next::Close;
        }
        if cmd.is_oneway() {
            // No answer to count at delivery (a broker's heartbeat): counted as handled.
            let handled = Response::new(crate::remoting::codes::response::SUCCESS, None);
            (self.request_counts).count(cmd.code, &handled, ticket.arrived.elapsed());
        }
        self.deliver(ctx);
        Next::Continue
    }

    fn on_peer_frame<C>(&mut self, ctx: &mut Ctx<C>, conn: ConnId, cmd: &RemotingCommand) -> Next {
        match self.links.on_frame(ctx, conn, cmd) {
            PeerFrame::Payload { from, payload } => {
                let now = ctx.now_ms();
                self.controller
                    .on_peer_message(from, payload, now, &mut self.replies);
                self.deliver(ctx);
                Next::Continue
            }
            PeerFrame::Handled => Next::Continue,
            PeerFrame::Close => Next::Close,
        }
    }

    pub(super) fn on_connected<C>(
        &mut self,
        ctx: &mut Ctx<C>,
        conn: ConnId,
        result: io::Result<()>,
    ) {
        self.links.on_connected(ctx, conn, &result);
    }

    /// Its brokers are inactive now (see `elections`).
    pub(super) fn on_close<C>(&mut self, ctx: &mut Ctx<C>, conn: ConnId) {
        if self.links.on_closed(ctx, conn) {
            return;
        }
        let now = ctx.now_ms();
        self.controller
            .connection_closed(ConnRef(conn.index() as u64), now, &mut self.replies);
        self.deliver(ctx);
    }

    /// False for a timer that is not the controller's.
    pub(super) fn on_timer<C: PeerConnData>(&mut self, ctx: &mut Ctx<C>, timer: TimerId) -> bool {
        if self.links.on_timer(ctx, timer) {
            return true;
        }
        let now = ctx.now_ms();
        match timer {
            DEADLINE_TIMER => {
                self.deadline_armed = None;
                self.controller.expire_requests(now, &mut self.replies);
            }
            SCAN_NOT_ACTIVE_TIMER => {
                ctx.set_timer(SCAN_NOT_ACTIVE_TIMER, now + self.scan_not_active_ms);
                self.controller.start_scan(Scan::NotActive);
            }
            RAFT_TICK_TIMER => {
                ctx.set_timer(RAFT_TICK_TIMER, now + raft::TICK_MS);
                self.controller.raft_tick(now, &mut self.replies);
            }
            SCAN_INACTIVE_MASTER_TIMER => {
                ctx.set_timer(
                    SCAN_INACTIVE_MASTER_TIMER,
                    now + self.scan_inactive_master_ms,
                );
                self.controller.start_scan(Scan::InactiveMaster);
            }
            _ => return false,
        }
        self.deliver(ctx);
        true
    }

    /// A part of the scans under way (see `controller::manager::elections`); the loop comes
    /// back without sleeping while one is.
    fn scan_step<C>(&mut self, ctx: &mut Ctx<C>) {
        let now = ctx.now_ms();
        let expired = (self.controller).scan_step(now, SCAN_STEPS_PER_TURN, &mut self.replies);
        for ConnRef(index) in expired {
            let Some(conn) = ctx.conn_at(index as usize) else {
                continue;
            };
            if ctx.listener(conn) == Some(LISTENER) {
                ctx.close(conn, "controller: broker heartbeat expired");
            }
        }
        self.deliver(ctx);
    }

    /// While the loop drains, reports work pending until every request in flight is answered;
    /// and while a scan is under way.
    pub(super) fn before_sleep<C>(&mut self, ctx: &mut Ctx<C>) -> bool {
        if self.controller.scanning() {
            self.scan_step(ctx);
        }
        if self.news.pending.swap(false, Ordering::Acquire) {
            let now = ctx.now_ms();
            self.controller.on_log_completions(now, &mut self.replies);
            self.deliver(ctx);
        }
        if ctx.is_stopping() && !self.stopping {
            self.stopping = true;
            self.controller.stop_waiting_for_peers(&mut self.replies);
            self.deliver(ctx);
        }
        let chunks = self.links.pump(ctx);
        chunks
            || self.controller.scanning()
            || ctx.is_stopping() && self.controller.pending_requests() > 0
    }

    fn deliver<C>(&mut self, ctx: &mut Ctx<C>) {
        let now = ctx.now_ms();
        for reply in self.replies.drain(..) {
            audit_answer(&reply, &mut self.refused_audits, now);
            let ticket = reply.ticket;
            let took = ticket.arrived.elapsed();
            (self.request_counts).count(ticket.code, &reply.response, took);
            // None: the connection closed while its request waited.
            if let Some(out) = ctx.write_buf(ticket.conn) {
                reply.response.encode(ticket.opaque, ticket.serialize, out);
            }
        }
        self.send_notifications();
        self.controller.take_peer_messages(&mut self.peer_outbox);
        for (to, payload) in self.peer_outbox.drain(..) {
            self.links.send(ctx, to, payload);
        }
        let next = self.controller.next_deadline_ms();
        if next != self.deadline_armed {
            match next {
                Some(at) => ctx.set_timer(DEADLINE_TIMER, at),
                None => ctx.cancel_timer(DEADLINE_TIMER),
            }
            self.deadline_armed = next;
        }
    }

    fn send_notifications(&mut self) {
        let Some(sender) = &self.notifications else {
            return;
        };
        for n in self.controller.take_notifications() {
            self.next_notify_opaque = self.next_notify_opaque.wrapping_add(1);
            let mut frame = Vec::with_capacity(256);
            n.encode(self.next_notify_opaque, &mut frame);
            info!(
                "controller: notifying {} of broker set master id {} (masterEpoch {})",
                n.broker_addr, n.master_broker_id, n.master_epoch
            );
            let message = Oneway {
                what: "NOTIFY_BROKER_ROLE_CHANGED",
                targets: vec![n.broker_addr],
                frame,
            };
            let why = match sender.try_send(message) {
                Ok(()) => continue,
                Err(TrySendError::Full(_)) => "the sending queue is full",
                Err(TrySendError::Disconnected(_)) => "the sending thread is gone",
            };
            warn!("controller: role-change notification dropped: {why}");
        }
    }

    /// Waits for the log writer, then for the notifications already queued.
    pub(super) fn shutdown(self) {
        self.links.shutdown();
        let unanswered = self.controller.shutdown().len();
        if unanswered > 0 {
            warn!("controller stopped with {unanswered} request(s) unanswered");
        }
        drop(self.notifications);
        if self.sender.join().is_err() {
            error!("the controller notification thread panicked");
        }
    }
}
