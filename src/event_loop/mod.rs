//! The event loop as a small library, after Redis's `ae`: one thread, one `mio::Poll`,
//! listeners, a `slab` of connections with their buffers, read scheduling, backpressure,
//! timeouts, named timers, a before-sleep hook and a clean stop. It knows nothing of RocketMQ:
//! the application comes in through the [`Handler`] trait (generic, so the per-frame call is
//! monomorphised). Each limit is explained where it is enforced: [`Limits`], `admission`,
//! `budget`, `EventLoop::accept_failed`, `Ctx::frame_deadline`.

mod admission;
mod batcher;
mod budget;
mod connection;
mod ctx;
pub mod descriptors;
mod http;
pub mod oneway;
#[cfg(feature = "tls")]
mod tls;
#[cfg(not(feature = "tls"))]
#[path = "no_tls.rs"]
mod tls;

#[cfg(test)]
pub(crate) mod tests;

pub use batcher::{spawn_batcher, Batch};
pub use ctx::{Ctx, LogGate, LoopStats};
pub use descriptors::{
    descriptor_limit, presize_descriptor_table, raise_descriptor_limit, DescriptorLimit,
    PRESIZED_DESCRIPTORS_MAX,
};
pub use tls::TlsAcceptor;

use bytes::{Bytes, BytesMut};
use ctx::WARN_EVERY_MS;
use log::{info, warn};
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use std::fmt;
use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Listener `i` polls under `Token(FIRST_LISTENER - i)`, connections under their slab key.
const WAKER: Token = Token(usize::MAX);
const FIRST_LISTENER: usize = usize::MAX - 1;
const MAX_LISTENERS: usize = 64;

const ACCEPT_RETRY_MS: u64 = 100;

/// Connections one listener accepts per turn: 10,000 brokers reconnecting at once (a restart,
/// a network blip) are taken a few dozen at a time between the connected clients' requests,
/// not in one turn of tens of milliseconds.
pub(crate) const ACCEPTS_PER_TURN: usize = 64;

/// A frame at least this large, once cut, is not left pinned by the bytes read after it.
const LARGE_FRAME: usize = 64 * 1024;

/// Read budgets (`Limits::read_budget`) one turn reads from all connections together, past
/// small requests: 200 peers each sending a large frame must not make one turn read 50 MiB.
const READ_BUDGETS_PER_TURN: usize = 4;

/// The goal: no request holds the loop longer than this (`LoopStats::long_turns` counts misses).
const LONG_TURN: Duration = Duration::from_millis(2);

/// TLS handshake work one turn does (at least one step, which an RSA-2048 signature alone can
/// exceed): a storm of new TLS clients waits its turn rather than delaying the connected ones.
const HANDSHAKE_TIME_PER_TURN: Duration = Duration::from_millis(1);

/// Reading and handling bulk connections' frames (registrations) one turn does (at least one
/// connection's read): 1 MiB of 5 KB registrations arriving at once took 5 ms of one turn.
const BULK_TIME_PER_TURN: Duration = Duration::from_millis(1);

/// Far above scheduling noise on a busy machine: a turn this long is a real stall, warned about.
const STALL_WARN: Duration = Duration::from_millis(20);

fn is_http(http_listeners: &[ListenerTag], listener: Option<ListenerTag>) -> bool {
    !http_listeners.is_empty() && listener.is_some_and(|tag| http_listeners.contains(&tag))
}

/// A slab slot and a generation: a `ConnId` kept after its close finds nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId {
    key: usize,
    generation: u64,
}

impl ConnId {
    /// Unique among open connections, reused only after the previous occupant's `on_close`.
    pub fn index(&self) -> usize {
        self.key
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenerTag(pub u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimerId(pub u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadClass {
    Interactive,
    /// Read after the interactive ones, in arrival order ([`Handler::may_read_bulk`]).
    Bulk,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Continue,
    /// Leave this connection's further frames alone until [`Ctx::release`] (replies keep
    /// their order while an answer is deferred).
    Hold,
    Close,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes read from one connection, and reply bytes its frames may add, per turn.
    pub read_budget: usize,
    /// Unsent bytes above which a peer's requests are no longer read (until half drained).
    pub write_high_water: usize,
    /// Unsent bytes above which a peer is disconnected.
    pub write_hard_cap: usize,
    /// Time without a whole frame after which a connection is closed; 0 = never.
    pub idle_ms: u64,
    /// Time a frame may take once its first byte is in (one-second granularity); 0 = no limit.
    pub frame_timeout_ms: u64,
    /// Bytes all connections' read and write buffers may hold together; 0 = no budget.
    pub max_buffered: usize,
    pub max_connections: usize,
    /// Connections one peer address may hold; 0 = no limit.
    pub max_per_address: usize,
    /// Of `max_connections`, the last slots, kept for recent clients (see `admission`).
    pub reserved_for_recent: usize,
    /// Clients and brokers ask every 30 s; the default, ten minutes, covers a restart.
    pub recent_window_ms: u64,
    /// Bulk connections that may wait in line ([`Ctx::bulk_line_full`]).
    pub bulk_line_limit: usize,
    /// How long a stop may take to drain.
    pub drain_timeout: Duration,
    /// Connections the kernel queues for each listener before it drops new SYNs (capped by
    /// `net.core.somaxconn`); the standard library's 128 overflows when a cluster reconnects
    /// at once, each dropped connect then waiting a 1 s SYN retry.
    pub listen_backlog: i32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            read_budget: 256 * 1024,
            write_high_water: 4 << 20,
            write_hard_cap: 64 << 20,
            idle_ms: 0,
            frame_timeout_ms: 0,
            max_buffered: 0,
            max_connections: 65_536,
            max_per_address: 0,
            reserved_for_recent: 0,
            recent_window_ms: 600_000,
            bulk_line_limit: usize::MAX,
            drain_timeout: Duration::from_secs(3),
            listen_backlog: 1024,
        }
    }
}

/// The application on top of the loop; every callback runs on the loop thread.
pub trait Handler {
    type Conn: Default;
    type FrameError: fmt::Display;

    /// The next whole frame off the front of `buf`, `Ok(None)` when more bytes are needed.
    fn cut_frame(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, Self::FrameError>;

    /// The whole length of the frame `buf` begins, after `cut_frame` found it partial, once its
    /// header tells: the read buffer then takes that size once rather than growing by copies.
    fn frame_len(&self, _buf: &[u8]) -> Option<usize> {
        None
    }

    /// How a new connection is read until the handler says otherwise.
    fn on_accept(
        &mut self,
        _ctx: &mut Ctx<Self::Conn>,
        _conn: ConnId,
        _listener: ListenerTag,
    ) -> ReadClass {
        ReadClass::Interactive
    }

    fn on_frame(&mut self, ctx: &mut Ctx<Self::Conn>, conn: ConnId, frame: Bytes) -> Next;

    /// An outbound connection ([`Ctx::connect`]) was established, or not (`on_close` follows).
    fn on_connected(&mut self, _ctx: &mut Ctx<Self::Conn>, _conn: ConnId, _result: io::Result<()>) {
    }

    fn on_close(&mut self, _ctx: &mut Ctx<Self::Conn>, _conn: ConnId, _data: Self::Conn) {}

    /// A named timer came due (it is disarmed; set it again to repeat).
    fn on_timer(&mut self, _ctx: &mut Ctx<Self::Conn>, _timer: TimerId) {}

    fn may_read_bulk(&self) -> bool {
        true
    }

    /// Once per turn (also while draining); true when work is pending (the poll won't sleep).
    fn before_sleep(&mut self, _ctx: &mut Ctx<Self::Conn>) -> bool {
        false
    }
}

/// Wakes the loop from another thread.
#[derive(Clone)]
pub struct LoopWaker(Arc<Waker>);

impl LoopWaker {
    pub fn wake(&self) {
        if let Err(e) = self.0.wake() {
            warn!("could not wake the event loop: {e}");
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct FrameRun {
    cut_any: bool,
    cut_large: bool,
    /// Stopped by a hold, backpressure or a budget rather than by a partial frame.
    stopped_by_loop: bool,
    replies_spent: bool,
}

/// Stops the loop from another thread: the first call drains, a second gives up the drain.
#[derive(Clone)]
pub struct StopHandle {
    stops: Arc<AtomicUsize>,
    waker: LoopWaker,
}

impl StopHandle {
    pub fn stop(&self) {
        self.stops.fetch_add(1, Ordering::SeqCst);
        self.waker.wake();
    }
}

struct Listener {
    socket: TcpListener,
    tag: ListenerTag,
    addr: SocketAddr,
    retry_at_ms: Option<u64>,
    /// Ready (reported readable, or more waiting than the last turn took): accept this turn.
    ready: bool,
}

pub struct EventLoop<H: Handler> {
    poll: Poll,
    listeners: Vec<Listener>,
    ctx: Ctx<H::Conn>,
    stops: Arc<AtomicUsize>,
    /// Given up when out of descriptors (see `accept_failed`).
    spare_fd: Option<File>,
    accept_log: LogGate,
    stall_log: LogGate,
    /// Bytes this turn may still read.
    turn_reads_left: usize,
    /// Listeners whose connections send HTTP request heads (`http`), not the handler's frames.
    http_listeners: Vec<ListenerTag>,
    http_log: LogGate,
    /// TLS handshake work this turn did.
    handshake_time: Duration,
    /// Bulk connections' reads and frames this turn.
    bulk_time: Duration,
}

impl<H: Handler> EventLoop<H> {
    pub fn new(limits: Limits) -> io::Result<Self> {
        let poll = Poll::new()?;
        let waker = LoopWaker(Arc::new(Waker::new(poll.registry(), WAKER)?));
        let registry = poll.registry().try_clone()?;
        Ok(EventLoop {
            poll,
            listeners: Vec::new(),
            ctx: Ctx::new(registry, limits, waker),
            stops: Arc::new(AtomicUsize::new(0)),
            spare_fd: File::open("/dev/null").ok(),
            accept_log: LogGate::new(WARN_EVERY_MS),
            stall_log: LogGate::new(WARN_EVERY_MS),
            turn_reads_left: 0,
            http_listeners: Vec::new(),
            http_log: LogGate::new(WARN_EVERY_MS),
            handshake_time: Duration::ZERO,
            bulk_time: Duration::ZERO,
        })
    }

    /// Returns the address actually bound (port 0 resolved).
    pub fn listen(&mut self, addr: SocketAddr, tag: ListenerTag) -> io::Result<SocketAddr> {
        if self.listeners.len() >= MAX_LISTENERS {
            return Err(io::Error::other("too many listeners"));
        }
        let mut socket = TcpListener::bind(addr)?;
        // SAFETY: listen(2) again on a listening socket this function owns: a longer queue.
        if unsafe { libc::listen(socket.as_raw_fd(), self.ctx.limits.listen_backlog) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let bound = socket.local_addr()?;
        let token = Token(FIRST_LISTENER - self.listeners.len());
        self.poll
            .registry()
            .register(&mut socket, token, Interest::READABLE)?;
        self.listeners.push(Listener {
            socket,
            tag,
            addr: bound,
            retry_at_ms: None,
            ready: false,
        });
        Ok(bound)
    }

    /// A listener whose connections each deliver HTTP request heads as frames (see `http`);
    /// admitted, budgeted and timed out like every other connection.
    pub fn listen_http(&mut self, addr: SocketAddr, tag: ListenerTag) -> io::Result<SocketAddr> {
        let bound = self.listen(addr, tag)?;
        self.http_listeners.push(tag);
        Ok(bound)
    }

    pub fn waker(&self) -> LoopWaker {
        self.ctx.waker()
    }

    pub fn ctx(&mut self) -> &mut Ctx<H::Conn> {
        &mut self.ctx
    }

    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            stops: self.stops.clone(),
            waker: self.ctx.waker(),
        }
    }

    pub fn run(mut self, mut handler: H) -> io::Result<H> {
        let mut events = Events::with_capacity(1024);
        let addrs: Vec<String> = self.listeners.iter().map(|l| l.addr.to_string()).collect();
        info!("event loop running on {}", addrs.join(", "));
        let mut work_pending = false;
        while self.stops.load(Ordering::SeqCst) == 0 {
            work_pending = self.turn(&mut handler, &mut events, work_pending)?;
        }
        self.drain(&mut handler, &mut events)?;
        self.ctx.drop_all();
        info!("event loop stopped");
        Ok(handler)
    }

    /// Poll, accept, flush, read interactive connections and line up bulk ones, read the
    /// pending and (while [`Handler::may_read_bulk`]) the bulk line, timers, `before_sleep`.
    fn turn(&mut self, h: &mut H, events: &mut Events, work_pending: bool) -> io::Result<bool> {
        let timeout = self.poll_timeout(h, work_pending);
        if let Err(e) = self.poll.poll(events, Some(timeout)) {
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(work_pending);
            }
            return Err(e);
        }
        let (began, bytes_out) = (Instant::now(), self.ctx.stats.bytes_out);
        self.turn_reads_left = READ_BUDGETS_PER_TURN * self.ctx.limits.read_budget;
        self.handshake_time = Duration::ZERO;
        self.bulk_time = Duration::ZERO;
        self.ctx.update_clock();
        for event in events.iter() {
            match event.token() {
                WAKER => {}
                Token(t) if t > FIRST_LISTENER - MAX_LISTENERS => {
                    if let Some(l) = self.listeners.get_mut(FIRST_LISTENER - t) {
                        l.ready = true;
                    }
                }
                Token(key) => {
                    let Some(conn) = self.ctx.conns.get(key) else {
                        continue;
                    };
                    if conn.connect_deadline_ms.is_some() {
                        self.ctx.finish_connect(key);
                    } else {
                        if event.is_writable() {
                            self.ctx.flush(key);
                        }
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            self.on_readable(h, key);
                        }
                    }
                    self.deliver_closes(h);
                }
            }
        }
        self.accept_ready(h);
        self.ctx.flush_line();
        self.ctx.resume_parked();
        self.read_pending(h);
        self.read_bulk_line(h);
        self.fire_timers(h);
        self.ctx.update_clock();
        let more = h.before_sleep(&mut self.ctx);
        self.after_callback(h);
        self.note_turn(began.elapsed(), bytes_out);
        Ok(more)
    }

    fn note_turn(&mut self, took: Duration, bytes_out_before: u64) {
        let stats = &mut self.ctx.stats;
        stats.max_turn_micros = stats.max_turn_micros.max(took.as_micros() as u64);
        let written = stats.bytes_out - bytes_out_before;
        stats.max_turn_bytes_out = stats.max_turn_bytes_out.max(written);
        if took <= LONG_TURN {
            return;
        }
        stats.long_turns += 1;
        if took > STALL_WARN {
            if let Some(more) = self.stall_log.ready(self.ctx.now_ms()) {
                warn!(
                    "one event loop turn took {} ms: every peer waited that long ({more} more turns over {} ms since the last line)",
                    took.as_millis(),
                    STALL_WARN.as_millis()
                );
            }
        }
    }

    fn poll_timeout(&mut self, h: &H, work_pending: bool) -> Duration {
        if work_pending
            || !self.ctx.pending.is_empty()
            || !self.ctx.write_line.is_empty()
            || (!self.ctx.bulk_line.is_empty() && h.may_read_bulk())
            || self.ctx.has_resumable()
            || self.listeners.iter().any(|l| l.ready)
        {
            return Duration::ZERO;
        }
        let retry = self.listeners.iter().filter_map(|l| l.retry_at_ms);
        let until_timer = match self.ctx.next_timer_ms().into_iter().chain(retry).min() {
            Some(at) => at.saturating_sub(self.ctx.update_clock()),
            None => 1000,
        };
        Duration::from_millis(until_timer.clamp(1, 1000))
    }

    /// At most [`ACCEPTS_PER_TURN`] connections from each ready listener (or one whose retry is
    /// due); a listener with more waiting stays ready (edge-triggered: no new event would come).
    fn accept_ready(&mut self, h: &mut H) {
        let now = self.ctx.now_ms();
        for index in 0..self.listeners.len() {
            let l = &mut self.listeners[index];
            let retry_due = l.retry_at_ms.is_some_and(|at| at <= now);
            if retry_due {
                l.retry_at_ms = None;
            }
            if std::mem::take(&mut l.ready) || retry_due {
                self.accept_some(h, index);
            }
        }
    }

    fn accept_some(&mut self, h: &mut H, index: usize) {
        // `on_close` before a slot is reused (see `ConnId::index`).
        self.deliver_closes(h);
        for _ in 0..ACCEPTS_PER_TURN {
            let Some(listener) = self.listeners.get(index) else {
                return;
            };
            let tag = listener.tag;
            match listener.socket.accept() {
                Ok((stream, peer)) => {
                    let data = H::Conn::default();
                    if let Some(id) = self.ctx.admit(stream, peer, tag, data) {
                        let class = h.on_accept(&mut self.ctx, id, tag);
                        self.ctx.set_read_class(id, class);
                        self.after_callback(h);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                // The peer gave up while waiting: the next one may be fine.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) => {
                    self.accept_failed(index, e);
                    return;
                }
            }
        }
        if let Some(listener) = self.listeners.get_mut(index) {
            listener.ready = true;
        }
    }

    /// Retried every `ACCEPT_RETRY_MS` (an edge-triggered listener would not report the
    /// waiting connections again); out of descriptors, the spare one is given up to close the
    /// waiting connections (their peers see a close instead of hanging).
    fn accept_failed(&mut self, index: usize, e: io::Error) {
        self.ctx.stats.accept_failures += 1;
        let out_of_descriptors = matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
        let now = self.ctx.now_ms();
        let open = self.ctx.conns.len();
        let Some(listener) = self.listeners.get_mut(index) else {
            return;
        };
        listener.retry_at_ms = Some(now + ACCEPT_RETRY_MS);
        let mut shed = 0;
        if out_of_descriptors {
            drop(self.spare_fd.take());
            // Bounded, so that a connection storm cannot hold the loop here.
            while shed < 1024 {
                match listener.socket.accept() {
                    Ok(_) => shed += 1,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            self.spare_fd = File::open("/dev/null").ok();
        }
        let Some(more) = self.accept_log.ready(now) else {
            return;
        };
        let limit = descriptor_limit().map_or("unknown".to_string(), |l| l.soft.to_string());
        warn!(
            "accept on {} failed: {e} ({open} connections open, open-file limit {limit}); {shed} waiting connection(s) closed, trying again every {ACCEPT_RETRY_MS} ms ({more} more failures since the last line)",
            listener.addr
        );
    }

    fn on_readable(&mut self, h: &mut H, key: usize) {
        let Some(id) = self.ctx.conn_at(key) else {
            return;
        };
        match self.ctx.get(id).map(|c| c.class) {
            Some(ReadClass::Interactive) => self.read_and_handle(h, id),
            Some(ReadClass::Bulk) => self.ctx.join_line(id),
            None => {}
        }
    }

    fn read_pending(&mut self, h: &mut H) {
        for _ in 0..self.ctx.pending.len() {
            let Some(id) = self.ctx.pending.pop_front() else {
                break;
            };
            self.read_and_handle(h, id);
        }
    }

    fn read_bulk_line(&mut self, h: &mut H) {
        let mut budget = self.ctx.bulk_line.len();
        let now = self.ctx.now_ms();
        while budget > 0 && h.may_read_bulk() && self.bulk_time < BULK_TIME_PER_TURN {
            budget -= 1;
            let Some(id) = self.ctx.bulk_line.pop_front() else {
                break;
            };
            if let Some(c) = self.ctx.get_mut(id) {
                c.in_line = false;
                // The wait in line was the loop's doing, not the peer's.
                if c.frame_started_ms.is_some() {
                    c.frame_started_ms = Some(now);
                }
                self.read_and_handle(h, id);
            }
        }
    }

    fn read_and_handle(&mut self, h: &mut H, id: ConnId) {
        self.ctx.update_clock();
        let line_full = self.ctx.bulk_line_full();
        let Some(conn) = self.ctx.get_mut(id) else {
            return;
        };
        if conn.blocked() {
            return;
        }
        // No room for bulk work: wait in line, unless the line is full (see `bulk_line_full`).
        let bulk = conn.class == ReadClass::Bulk;
        if bulk && !line_full && (!h.may_read_bulk() || self.bulk_time >= BULK_TIME_PER_TURN) {
            self.ctx.join_line(id);
            return;
        }
        // A small request is read whatever the turn read already (as in `budget`).
        let turn_left = self
            .turn_reads_left
            .max(budget::SMALL_READ.saturating_sub(conn.read_buf.len()));
        if turn_left == 0 {
            // Next turn (the poll does not wait while connections are pending).
            self.ctx.pending.push_back(id);
            return;
        }
        let handshake = conn.handshaking().then(Instant::now);
        if handshake.is_some() && self.handshake_time >= HANDSHAKE_TIME_PER_TURN {
            self.ctx.pending.push_back(id);
            return;
        }
        let allowance = self.ctx.read_allowance(id).min(turn_left);
        if allowance == 0 {
            return;
        }
        let Some((conn, arena)) = self.ctx.with_arena(id) else {
            return;
        };
        let bulk_began = bulk.then(Instant::now);
        conn.borrow_arena(arena, allowance);
        let read = conn.read_available(allowance);
        if let Some(began) = handshake {
            self.handshake_time += began.elapsed();
        }
        let (n, budget_spent) = match read {
            Ok(read) => read,
            Err(e) => {
                self.ctx.read_failed(id, &e);
                self.deliver_closes(h);
                return;
            }
        };
        self.ctx.stats.bytes_in += n as u64;
        self.turn_reads_left = self.turn_reads_left.saturating_sub(n);
        self.ctx.account(id.key);
        if budget_spent {
            // Come back to it after the others had their turn.
            self.ctx.pending.push_back(id);
        }
        self.handle_frames(h, id);
        if let Some(began) = bulk_began {
            self.bulk_time += began.elapsed();
        }
    }

    fn handle_frames(&mut self, h: &mut H, id: ConnId) {
        let Some(run) = self.cut_and_handle(h, id) else {
            self.deliver_closes(h);
            return;
        };
        if run.replies_spent {
            self.ctx.pending.push_back(id);
        }
        let now = self.ctx.now_ms();
        let frame_timeout = self.ctx.limits.frame_timeout_ms;
        let Some((conn, arena)) = self.ctx.with_arena(id) else {
            return;
        };
        conn.release_read_buffer(arena, run.cut_large);
        if !is_http(&self.http_listeners, conn.listener) {
            conn.frame_len = h.frame_len(&conn.read_buf).unwrap_or(0);
        }
        if !conn.mid_frame() || run.stopped_by_loop {
            conn.frame_started_ms = None;
        } else if run.cut_any || conn.frame_started_ms.is_none() {
            // A frame began in the bytes just read.
            conn.frame_started_ms = Some(now);
            if frame_timeout > 0 {
                self.ctx.arm_deadline(id, now + frame_timeout);
            }
        }
        self.ctx.leave_lane_if_done(id);
        self.ctx.account(id.key);
        self.ctx.flush(id.key);
        // Replies written to other connections (deferred answers) go out now too.
        self.after_callback(h);
    }

    /// `None` when the connection was closed.
    fn cut_and_handle(&mut self, h: &mut H, id: ConnId) -> Option<FrameRun> {
        let now = self.ctx.now_ms();
        let reply_budget = self.ctx.limits.read_budget;
        let mut run = FrameRun::default();
        let mut replied = 0;
        loop {
            let conn = self.ctx.get_mut(id)?;
            let blocked = conn.blocked();
            if blocked || replied >= reply_budget {
                run.stopped_by_loop = true;
                run.replies_spent = !blocked;
                return Some(run);
            }
            let unsent_before = conn.unsent();
            // `Err(None)`: an HTTP head over its bound.
            let cut = if is_http(&self.http_listeners, conn.listener) {
                http::cut_head(&mut conn.read_buf).map_err(|()| None)
            } else {
                h.cut_frame(&mut conn.read_buf).map_err(Some)
            };
            let frame = match cut {
                Ok(Some(frame)) => frame,
                Ok(None) => return Some(run),
                Err(Some(e)) => {
                    warn!("closing connection from {}: {e}", conn.peer);
                    // Replies to the frames before the bad one still go out, best effort.
                    self.ctx.close(id, "bad frame");
                    return None;
                }
                Err(None) => {
                    self.refuse_http_head(id);
                    return None;
                }
            };
            run.cut_any = true;
            run.cut_large |= frame.len() >= LARGE_FRAME;
            conn.last_frame_ms = now;
            // Admission counts the peers that connect to us, not the ones we dialed.
            if !conn.served {
                conn.served = true;
                if conn.listener.is_some() {
                    let ip = conn.peer.ip();
                    self.ctx.peers.first_frame(ip);
                }
            }
            let next = h.on_frame(&mut self.ctx, id, frame);
            if !self.ctx.closed.is_empty() {
                self.deliver_closes(h);
            }
            let high_water = self.ctx.limits.write_high_water;
            self.ctx.account(id.key);
            let conn = self.ctx.get_mut(id)?;
            replied += conn.unsent().saturating_sub(unsent_before);
            match next {
                Next::Continue => {}
                Next::Hold => conn.held = true,
                Next::Close => {
                    self.ctx.close(id, "closed by the application");
                    return None;
                }
            }
            if conn.unsent() > high_water {
                conn.read_paused = true;
            } else if self.ctx.park_if_unread(id) && self.ctx.get(id).is_none() {
                // The flush there found the socket broken.
                return None;
            }
        }
    }

    fn refuse_http_head(&mut self, id: ConnId) {
        let now = self.ctx.now_ms();
        if let Some(more) = self.http_log.ready(now) {
            let peer = self.ctx.peer(id);
            warn!(
                "closing HTTP connection from {peer:?}: request head over {} bytes ({more} more since the last line)",
                http::MAX_HEAD
            );
        }
        if let Some(out) = self.ctx.write_buf(id) {
            out.extend_from_slice(http::HEAD_TOO_LARGE);
        }
        self.ctx.close(id, "HTTP request head too large");
    }

    fn fire_timers(&mut self, h: &mut H) {
        let now = self.ctx.update_clock();
        while let Some(timer) = self.ctx.pop_due_timer(now) {
            h.on_timer(&mut self.ctx, timer);
            self.after_callback(h);
        }
        self.ctx.close_expired();
        self.ctx.close_stalled_writers();
        self.deliver_closes(h);
    }

    fn after_callback(&mut self, h: &mut H) {
        self.ctx.flush_dirty();
        self.deliver_closes(h);
    }

    /// The callbacks may themselves write, connect or close more.
    fn deliver_closes(&mut self, h: &mut H) {
        loop {
            if let Some((id, result)) = self.ctx.connects.pop() {
                h.on_connected(&mut self.ctx, id, result);
            } else if let Some((id, data)) = self.ctx.closed.pop() {
                h.on_close(&mut self.ctx, id, data);
            } else {
                return;
            }
            self.ctx.flush_dirty();
        }
    }

    /// Listeners closed, no more reading; `before_sleep` and flushes until done or timed out.
    fn drain(&mut self, h: &mut H, events: &mut Events) -> io::Result<()> {
        self.ctx.stopping = true;
        for mut l in self.listeners.drain(..) {
            let _ = self.poll.registry().deregister(&mut l.socket);
        }
        info!(
            "event loop draining: listeners closed, {} connection(s) open",
            self.ctx.conns.len()
        );
        let deadline = Instant::now() + self.ctx.limits.drain_timeout;
        loop {
            self.ctx.update_clock();
            let more = h.before_sleep(&mut self.ctx);
            self.after_callback(h);
            let unsent = self.ctx.flush_all();
            self.deliver_closes(h);
            if !more && unsent == 0 {
                return Ok(());
            }
            let now = Instant::now();
            if self.stops.load(Ordering::SeqCst) > 1 || now >= deadline {
                warn!(
                    "event loop stopping before the drain finished: {unsent} connection(s) with unsent replies, application work {}",
                    if more { "still pending" } else { "done" }
                );
                return Ok(());
            }
            // Work in flight may be another thread's (its waker ends the wait early): not a spin.
            let timeout = if more || !self.ctx.write_line.is_empty() {
                Duration::from_millis(1)
            } else {
                (deadline - now).min(Duration::from_millis(100))
            };
            if let Err(e) = self.poll.poll(events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}
