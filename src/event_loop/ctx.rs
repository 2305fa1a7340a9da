//! [`Ctx`]: what a handler may touch from its callbacks: connections, named timers, limits,
//! counters. Each connection has at most one live entry in the deadline buckets, for the
//! earliest of its deadlines; entries are re-checked when they fire, never moved per read.

use super::admission::Peers;
use super::budget::SMALL_UNSENT;
use super::connection::{interest, Connection, ReadArena, CONNECT_TIMEOUT_MS};
use super::tls::{Tls, TlsAcceptor};
use super::{ConnId, Limits, ListenerTag, LoopWaker, ReadClass, TimerId};
use crate::timer::DeadlineBuckets;
use bytes::Bytes;
use log::{debug, info, warn};
use mio::net::TcpStream;
use mio::{Registry, Token};
use slab::Slab;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

/// Write buffers kept for reuse, and the largest worth keeping (never a large reply's).
const SPARE_WRITE_BUFS: usize = 2;
const SPARE_WRITE_BUF_MAX: usize = 64 * 1024;

/// Unread input discarded per connection at the final close (beyond it, the kernel resets).
const UNREAD_DISCARD_MAX: usize = 4 << 20;

/// Bytes the write line ([`Ctx::flush_line`]) writes per turn, to all connections together:
/// with 1 MiB per connection, four peers reading 13 MB topic lists made turns write 4 MiB
/// (up to 11 ms on a busy two-core host, each write waking a reader); the stats'
/// `maxTurnBytesOut` shows the bound (`tests/attack/registry.py BIN topiclist`).
const TURN_WRITE_MAX: usize = 256 * 1024;

/// How often, at most, one kind of warning about peers is logged: an attack must not flood it.
pub(super) const WARN_EVERY_MS: u64 = 10_000;

/// Peer addresses an [`AddressGate`] remembers; past them, one line per interval for the rest.
const GATED_ADDRESSES: usize = 1024;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopStats {
    pub connections: usize,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Reply bodies queued shared rather than copied into a write buffer.
    pub shared_bytes: u64,
    pub refused: u64,
    pub buffered_bytes: usize,
    /// Peers closed for not reading their replies while the budget was spent.
    pub closed_over_budget: u64,
    pub frame_timeouts: u64,
    pub accept_failures: u64,
    pub max_turn_micros: u64,
    /// The most reply bytes one turn wrote.
    pub max_turn_bytes_out: u64,
    /// Turns longer than `LONG_TURN`.
    pub long_turns: u64,
}

/// Lets one kind of warning through at most once per interval and counts the others.
#[derive(Debug)]
pub struct LogGate {
    interval_ms: u64,
    next_ms: u64,
    held_back: u64,
}

impl LogGate {
    pub fn new(interval_ms: u64) -> Self {
        LogGate {
            interval_ms,
            next_ms: 0,
            held_back: 0,
        }
    }

    /// `Some(n)` when a line may be logged now (`n` were held back since the last one).
    pub fn ready(&mut self, now_ms: u64) -> Option<u64> {
        if now_ms < self.next_ms {
            self.held_back += 1;
            return None;
        }
        self.next_ms = now_ms + self.interval_ms;
        Some(std::mem::take(&mut self.held_back))
    }
}

/// Lets a warning about one peer address through at most once per interval (a refused peer
/// that retries in a loop must not flood the log, nor hide the others).
#[derive(Debug)]
pub struct AddressGate {
    interval_ms: u64,
    next_ms: HashMap<IpAddr, u64>,
    others: LogGate,
}

impl AddressGate {
    pub fn new(interval_ms: u64) -> Self {
        AddressGate {
            interval_ms,
            next_ms: HashMap::new(),
            others: LogGate::new(interval_ms),
        }
    }

    pub fn ready(&mut self, ip: IpAddr, now_ms: u64) -> bool {
        if self.next_ms.len() >= GATED_ADDRESSES && !self.next_ms.contains_key(&ip) {
            self.next_ms.retain(|_, next| *next > now_ms);
        }
        let full = self.next_ms.len() >= GATED_ADDRESSES;
        let next = now_ms + self.interval_ms;
        match self.next_ms.entry(ip) {
            Entry::Occupied(at) if now_ms < *at.get() => false,
            Entry::Occupied(mut at) => {
                at.insert(next);
                true
            }
            Entry::Vacant(entry) if !full => {
                entry.insert(next);
                true
            }
            Entry::Vacant(_) => self.others.ready(now_ms).is_some(),
        }
    }
}

pub struct Ctx<C> {
    registry: Registry,
    pub(super) conns: Slab<Connection<C>>,
    next_generation: u64,
    pub(super) limits: Limits,
    started: Instant,
    /// The loop's clock, read once per step rather than once per frame.
    clock_ms: u64,
    pub(super) stats: LoopStats,
    pub(super) peers: Peers,
    refusal_log: LogGate,
    timeout_log: LogGate,
    /// Connections refused for what they sent (a failed TLS handshake), per peer address.
    refused_input_log: AddressGate,
    /// The listeners whose connections speak TLS.
    tls: Vec<(ListenerTag, TlsAcceptor)>,
    pub(super) buffered: usize,
    pub(super) parked: VecDeque<ConnId>,
    /// The one connection whose large frame is read while the budget is spent.
    pub(super) lane: Option<ConnId>,
    pub(super) next_stall_scan_ms: u64,
    pub(super) budget_log: LogGate,
    /// Connections to read again this turn.
    pub(super) pending: VecDeque<ConnId>,
    pub(super) bulk_line: VecDeque<ConnId>,
    /// Connections whose write buffer the handler touched outside their own frame handling.
    dirty: Vec<usize>,
    /// Connections owing more than [`SMALL_UNSENT`]: written only by [`Ctx::flush_line`].
    pub(super) write_line: VecDeque<usize>,
    /// Notices not yet delivered (a failed connect is in `closed` too, delivered after).
    pub(super) closed: Vec<(ConnId, C)>,
    pub(super) connects: Vec<(ConnId, io::Result<()>)>,
    /// Named application timers (a handful: a scan costs less than a sorted structure).
    timers: Vec<(TimerId, u64)>,
    deadlines: DeadlineBuckets<ConnId>,
    spare_write_bufs: Vec<Vec<u8>>,
    read_arena: ReadArena,
    pub(super) stopping: bool,
    waker: LoopWaker,
}

impl<C> Ctx<C> {
    pub(super) fn new(registry: Registry, limits: Limits, waker: LoopWaker) -> Self {
        Ctx {
            registry,
            conns: Slab::new(),
            next_generation: 0,
            limits,
            started: Instant::now(),
            clock_ms: 0,
            stats: LoopStats::default(),
            peers: Peers::default(),
            refusal_log: LogGate::new(1000),
            timeout_log: LogGate::new(WARN_EVERY_MS),
            refused_input_log: AddressGate::new(WARN_EVERY_MS),
            tls: Vec::new(),
            buffered: 0,
            parked: VecDeque::new(),
            lane: None,
            next_stall_scan_ms: 0,
            budget_log: LogGate::new(WARN_EVERY_MS),
            pending: VecDeque::new(),
            bulk_line: VecDeque::new(),
            dirty: Vec::new(),
            write_line: VecDeque::new(),
            closed: Vec::new(),
            connects: Vec::new(),
            timers: Vec::new(),
            deadlines: DeadlineBuckets::new(1000),
            spare_write_bufs: Vec::new(),
            read_arena: ReadArena::default(),
            stopping: false,
            waker,
        }
    }

    /// Milliseconds since the loop was created, as read at the start of the current step.
    pub fn now_ms(&self) -> u64 {
        self.clock_ms
    }

    pub(super) fn update_clock(&mut self) -> u64 {
        self.clock_ms = self.started.elapsed().as_millis() as u64;
        self.clock_ms
    }

    pub fn stats(&self) -> LoopStats {
        LoopStats {
            connections: self.conns.len(),
            buffered_bytes: self.buffered,
            ..self.stats
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Changed timeouts apply to open connections at once.
    pub fn set_limits(&mut self, limits: Limits) {
        let timeouts_changed = (limits.idle_ms, limits.frame_timeout_ms)
            != (self.limits.idle_ms, self.limits.frame_timeout_ms);
        self.limits = limits;
        if timeouts_changed {
            let keys: Vec<usize> = self.conns.iter().map(|(key, _)| key).collect();
            for key in keys {
                if let Some(id) = self.conn_at(key) {
                    self.arm_next_deadline(id);
                }
            }
        }
    }

    pub fn waker(&self) -> LoopWaker {
        self.waker.clone()
    }

    /// How `listener`'s next connections speak TLS (`None`: plain); open ones keep theirs.
    pub fn set_tls(&mut self, listener: ListenerTag, acceptor: Option<TlsAcceptor>) {
        self.tls.retain(|(tag, _)| *tag != listener);
        if let Some(acceptor) = acceptor {
            self.tls.push((listener, acceptor));
        }
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping
    }

    pub(super) fn get(&self, id: ConnId) -> Option<&Connection<C>> {
        self.conns
            .get(id.key)
            .filter(|c| c.generation == id.generation)
    }

    pub(super) fn get_mut(&mut self, id: ConnId) -> Option<&mut Connection<C>> {
        self.conns
            .get_mut(id.key)
            .filter(|c| c.generation == id.generation)
    }

    pub fn conn_at(&self, index: usize) -> Option<ConnId> {
        self.conns.get(index).map(|c| ConnId {
            key: index,
            generation: c.generation,
        })
    }

    pub fn peer(&self, id: ConnId) -> Option<SocketAddr> {
        self.get(id).map(|c| c.peer)
    }

    /// `None` for an outbound connection, or once closed.
    pub fn listener(&self, id: ConnId) -> Option<ListenerTag> {
        self.get(id).and_then(|c| c.listener)
    }

    pub fn unsent(&self, id: ConnId) -> usize {
        self.get(id).map_or(0, |c| c.unsent())
    }

    pub fn data(&mut self, id: ConnId) -> Option<&mut C> {
        self.get_mut(id).map(|c| &mut c.data)
    }

    /// Where replies are appended; bytes written outside the connection's own `on_frame` go
    /// out when the callback returns.
    pub fn write_buf(&mut self, id: ConnId) -> Option<&mut Vec<u8>> {
        let conn = self
            .conns
            .get_mut(id.key)
            .filter(|c| c.generation == id.generation)?;
        if conn.write_buf.capacity() == 0 {
            if let Some(buf) = self.spare_write_bufs.pop() {
                conn.write_buf = buf;
            }
        }
        if !conn.dirty {
            conn.dirty = true;
            self.dirty.push(id.key);
        }
        Some(&mut conn.write_buf)
    }

    /// `head` appended to the write buffer, then `body` queued after it, shared (not copied);
    /// false once the connection is closed.
    pub fn write_with_body(
        &mut self,
        id: ConnId,
        head: impl FnOnce(&mut Vec<u8>),
        body: Bytes,
    ) -> bool {
        let Some(out) = self.write_buf(id) else {
            return false;
        };
        head(out);
        self.stats.shared_bytes += body.len() as u64;
        self.conns[id.key].queue_body(body);
        true
    }

    pub fn set_read_class(&mut self, id: ConnId, class: ReadClass) {
        if let Some(c) = self.get_mut(id) {
            c.class = class;
        }
    }

    pub fn release(&mut self, id: ConnId) {
        let Some(conn) = self.get_mut(id) else {
            return;
        };
        conn.held = false;
        match conn.class {
            ReadClass::Interactive => self.pending.push_back(id),
            ReadClass::Bulk => self.join_line(id),
        }
    }

    /// No more frames are read from `id`; it is closed once its replies are written (an HTTP
    /// answer with `Connection: close`). Return [`super::Next::Hold`] after it.
    pub fn close_when_flushed(&mut self, id: ConnId) {
        if let Some(conn) = self.get_mut(id) {
            conn.held = true;
            conn.peer_closed = true;
        }
    }

    /// A bulk connection the loop comes back to now is read anyway: the handler should refuse
    /// the costly work it brings rather than queue it.
    pub fn bulk_line_full(&self) -> bool {
        self.bulk_line.len() >= self.limits.bulk_line_limit
    }

    /// What the write buffer holds is sent if the socket takes it at once; `on_close` follows
    /// when the current callback has returned.
    pub fn close(&mut self, id: ConnId, why: &str) {
        let Some(conn) = self.get_mut(id) else {
            return;
        };
        if conn.unsent() > 0 && conn.connect_deadline_ms.is_none() {
            if let Ok(n) = conn.flush(small_write(conn.unsent())) {
                self.stats.bytes_out += n as u64;
            }
        }
        self.remove(id.key, why);
    }

    pub fn set_timer(&mut self, timer: TimerId, at_ms: u64) {
        match self.timers.iter_mut().find(|(t, _)| *t == timer) {
            Some(entry) => entry.1 = at_ms,
            None => self.timers.push((timer, at_ms)),
        }
    }

    pub fn cancel_timer(&mut self, timer: TimerId) {
        self.timers.retain(|(t, _)| *t != timer);
    }

    /// An outbound connection: limited like any other but not counted by admission; bytes
    /// written before [`super::Handler::on_connected`] wait.
    pub fn connect(&mut self, addr: SocketAddr, data: C) -> io::Result<ConnId> {
        if self.stopping {
            return Err(io::Error::other("the event loop is stopping"));
        }
        let id = self.insert(TcpStream::connect(addr)?, addr, None, data)?;
        debug!("connection {} to {addr}: connecting", id.key);
        Ok(id)
    }

    pub(super) fn admit(
        &mut self,
        stream: TcpStream,
        peer: SocketAddr,
        listener: ListenerTag,
        data: C,
    ) -> Option<ConnId> {
        let now = self.now_ms();
        if let Err(refusal) = self.peers.check(peer.ip(), &self.limits, now) {
            self.stats.refused += 1;
            if self.refusal_log.ready(now).is_some() {
                warn!(
                    "refusing connection from {peer}: {} ({} refused so far)",
                    refusal.describe(&self.limits),
                    self.stats.refused
                );
            }
            return None;
        }
        if let Err(e) = stream.set_nodelay(true) {
            debug!("TCP_NODELAY on {peer}: {e}");
        }
        let id = (self.insert(stream, peer, Some(listener), data))
            .inspect_err(|e| warn!("could not register connection from {peer}: {e}"))
            .ok()?;
        debug!("connection {} from {peer}", id.key);
        self.conns[id.key].tls = Tls::for_listener(&self.tls, listener);
        // Data may already be waiting (edge-triggered readiness).
        self.pending.push_back(id);
        Some(id)
    }

    fn insert(
        &mut self,
        mut stream: TcpStream,
        peer: SocketAddr,
        listener: Option<ListenerTag>,
        data: C,
    ) -> io::Result<ConnId> {
        let now = self.now_ms();
        let entry = self.conns.vacant_entry();
        let key = entry.key();
        let outbound = listener.is_none();
        self.registry
            .register(&mut stream, Token(key), interest(outbound))?;
        self.next_generation += 1;
        let generation = self.next_generation;
        entry.insert(Connection::new(
            stream, peer, listener, generation, now, data,
        ));
        if !outbound {
            self.peers.opened(peer.ip());
        }
        let id = ConnId { key, generation };
        self.arm_next_deadline(id);
        Ok(id)
    }

    /// Invalid input (a refused TLS handshake, plain bytes on a TLS-only port) is warned about,
    /// once per peer address per interval; other errors are the peer's going.
    pub(super) fn read_failed(&mut self, id: ConnId, e: &io::Error) {
        let Some(peer) = self.peer(id) else {
            return;
        };
        if e.kind() == io::ErrorKind::InvalidData {
            if self.refused_input_log.ready(peer.ip(), self.now_ms()) {
                warn!("closing connection from {peer}: {e}");
            }
        } else {
            debug!("read from {peer}: {e}");
        }
        self.remove(id.key, "read error");
    }

    /// Once: readiness is reported again and again for a socket left unread.
    pub(super) fn join_line(&mut self, id: ConnId) {
        if let Some(c) = self.get_mut(id) {
            if !c.in_line {
                c.in_line = true;
                self.bulk_line.push_back(id);
            }
        }
    }

    /// No flush; queues the notice for the handler.
    pub(super) fn remove(&mut self, key: usize, why: &str) {
        let Some(mut conn) = self.conns.try_remove(key) else {
            return;
        };
        let _ = self.registry.deregister(&mut conn.stream);
        debug!("connection {key} from {} closed: {why}", conn.peer);
        self.buffered -= conn.accounted;
        if conn.listener.is_some() {
            self.peers
                .closed(conn.peer.ip(), conn.served.then_some(conn.last_frame_ms));
        }
        let id = ConnId {
            key,
            generation: conn.generation,
        };
        if self.lane == Some(id) {
            self.lane = None;
        }
        self.closed.push((id, conn.data));
    }

    pub(super) fn with_arena(
        &mut self,
        id: ConnId,
    ) -> Option<(&mut Connection<C>, &mut ReadArena)> {
        let conn = self.conns.get_mut(id.key)?;
        (conn.generation == id.generation).then_some((conn, &mut self.read_arena))
    }

    /// Small replies go out at once; a connection owing more joins the write line.
    pub(super) fn flush(&mut self, key: usize) {
        self.flush_up_to(key, 0);
    }

    /// Writes what `key` owes if that is small, else at most `large_max` bytes (the write
    /// line's share), queueing it in the line when more is left; returns the bytes written.
    fn flush_up_to(&mut self, key: usize, large_max: usize) -> usize {
        let now = self.now_ms();
        let Some(conn) = self.conns.get_mut(key) else {
            return 0;
        };
        conn.dirty = false;
        if conn.connect_deadline_ms.is_some() {
            return 0;
        }
        let max = small_write(conn.unsent()).max(large_max);
        let written = match conn.flush(max) {
            Ok(n) => {
                self.stats.bytes_out += n as u64;
                if n == max && conn.unsent() > 0 && !self.write_line.contains(&key) {
                    self.write_line.push_back(key);
                }
                if n > 0 || conn.unsent() == 0 {
                    conn.last_write_ms = now;
                }
                n
            }
            Err(e) => {
                debug!("write to {}: {e}", conn.peer);
                self.remove(key, "write error");
                return 0;
            }
        };
        let unsent = conn.unsent();
        let hard_cap = self.limits.write_hard_cap;
        if unsent > hard_cap {
            warn!(
                "closing connection from {}: {unsent} bytes unread by the peer exceed the write hard cap {hard_cap}",
                conn.peer
            );
            self.remove(key, "write buffer hard cap");
            return written;
        }
        if conn.peer_closed && unsent == 0 {
            // Nothing more will come, and nothing is owed.
            self.remove(key, "closed by peer");
            return written;
        }
        let id = ConnId {
            key,
            generation: conn.generation,
        };
        if conn.read_paused && unsent <= self.limits.write_high_water / 2 {
            conn.read_paused = false;
            self.pending.push_back(id);
        }
        if unsent == 0 && conn.write_buf.capacity() > 0 {
            let buf = std::mem::take(&mut conn.write_buf);
            if buf.capacity() <= SPARE_WRITE_BUF_MAX
                && self.spare_write_bufs.len() < SPARE_WRITE_BUFS
            {
                self.spare_write_bufs.push(buf);
            }
        }
        conn.update_interest(&self.registry, key);
        self.account(key);
        self.unpark_drained(id);
        written
    }

    pub(super) fn flush_dirty(&mut self) {
        while let Some(key) = self.dirty.pop() {
            if self.conns.get(key).is_some_and(|c| c.dirty) {
                self.flush(key);
            }
        }
    }

    /// Once per turn: connections owing large replies, from the front of the line while
    /// [`TURN_WRITE_MAX`] lasts; one that wrote its share and owes more goes to the back, so
    /// each gets its turn. Small replies never wait here (see [`Ctx::flush`]).
    pub(super) fn flush_line(&mut self) {
        let mut left = TURN_WRITE_MAX;
        for _ in 0..self.write_line.len() {
            if left == 0 {
                break;
            }
            let Some(key) = self.write_line.pop_front() else {
                break;
            };
            left = left.saturating_sub(self.flush_up_to(key, left));
        }
    }

    /// Returns how many connections still have bytes waiting.
    pub(super) fn flush_all(&mut self) -> usize {
        let waiting = |c: &Connection<C>| c.unsent() > 0 && c.connect_deadline_ms.is_none();
        let keys: Vec<usize> = self.conns.iter().map(|(key, _)| key).collect();
        for key in keys {
            if self.conns.get(key).is_some_and(waiting) {
                self.flush(key);
            }
        }
        self.flush_line();
        self.conns.iter().filter(|(_, c)| waiting(c)).count()
    }

    pub(super) fn next_timer_ms(&self) -> Option<u64> {
        self.timers.iter().map(|(_, at)| *at).min()
    }

    pub(super) fn pop_due_timer(&mut self, now_ms: u64) -> Option<TimerId> {
        let (i, _) = self
            .timers
            .iter()
            .enumerate()
            .filter(|(_, (_, at))| *at <= now_ms)
            .min_by_key(|(_, (_, at))| *at)?;
        Some(self.timers.swap_remove(i).0)
    }

    /// Unless its live entry fires earlier (an entry it replaces is ignored when it fires).
    pub(super) fn arm_deadline(&mut self, id: ConnId, at_ms: u64) {
        let bucket = self.deadlines.bucket_of(at_ms);
        if let Some(c) = self.get_mut(id) {
            if c.deadline_bucket == 0 || bucket < c.deadline_bucket {
                c.deadline_bucket = bucket;
                self.deadlines.schedule(at_ms, id);
            }
        }
    }

    fn arm_next_deadline(&mut self, id: ConnId) {
        if let Some(at) = self.get(id).and_then(|c| self.next_deadline(c)) {
            self.arm_deadline(id, at);
        }
    }

    /// The slowloris limits: a connection is closed when its frame is not complete within
    /// `frame_timeout_ms` of its first byte, or when it completes no frame for `idle_ms`
    /// (trickled bytes do not count). The frame clock stops while the loop is not reading (a
    /// hold, backpressure, the bulk line); a peer parked by the budget is not exempt, or peers
    /// that never finish their frames would keep the budget spent for good.
    fn frame_deadline(&self, c: &Connection<C>) -> Option<u64> {
        let timeout = self.limits.frame_timeout_ms;
        let started = c.frame_started_ms?;
        if timeout == 0 || c.held || c.read_paused || c.in_line {
            return None;
        }
        Some(started + timeout)
    }

    fn idle_deadline(&self, c: &Connection<C>) -> Option<u64> {
        let idle_ms = self.limits.idle_ms;
        (idle_ms > 0).then_some(c.last_frame_ms + idle_ms)
    }

    /// A held or in-line frame is looked at again a frame timeout from now.
    fn next_deadline(&self, c: &Connection<C>) -> Option<u64> {
        if c.connect_deadline_ms.is_some() {
            return c.connect_deadline_ms;
        }
        let waiting_frame = (self.limits.frame_timeout_ms > 0 && c.frame_started_ms.is_some())
            .then_some(self.clock_ms + self.limits.frame_timeout_ms);
        let frame = self.frame_deadline(c).or(waiting_frame);
        self.idle_deadline(c).into_iter().chain(frame).min()
    }

    pub(super) fn close_expired(&mut self) {
        let now = self.now_ms();
        self.peers.prune(now, self.limits.recent_window_ms);
        if self.deadlines.is_empty() {
            return;
        }
        let mut fired = Vec::new();
        self.deadlines
            .pop_due(now, usize::MAX, |bucket, id| fired.push((bucket, id)));
        for (bucket, id) in fired {
            match self.get_mut(id) {
                Some(c) if c.deadline_bucket == bucket => c.deadline_bucket = 0,
                _ => continue,
            }
            let Some(c) = self.get(id) else {
                continue;
            };
            // Both may have passed by the time the bucket fires: the earlier one is the reason.
            let idle_at = self.idle_deadline(c).filter(|at| *at <= now);
            let frame_at = self.frame_deadline(c).filter(|at| *at <= now);
            if c.connect_deadline_ms.is_some_and(|at| at <= now) {
                let e = io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("not established within {CONNECT_TIMEOUT_MS} ms"),
                );
                self.connect_failed(id, e);
            } else if c.connect_deadline_ms.is_some() {
                self.arm_next_deadline(id);
            } else if idle_at.is_some_and(|idle| frame_at.map_or(true, |f| idle <= f)) {
                info!(
                    "closing connection from {}: no whole request for {} ms (idle limit {} ms)",
                    c.peer,
                    now.saturating_sub(c.last_frame_ms),
                    self.limits.idle_ms
                );
                self.remove(id.key, "idle");
            } else if frame_at.is_some() {
                self.frame_timed_out(id);
            } else {
                self.arm_next_deadline(id);
            }
        }
    }

    fn frame_timed_out(&mut self, id: ConnId) {
        let now = self.now_ms();
        let Some(c) = self.get(id) else {
            return;
        };
        let (peer, buffered) = (c.peer, c.read_buf.len());
        let what = match buffered == 0 && c.tls.is_some() {
            true => "a TLS handshake",
            false => "a frame",
        };
        let elapsed_ms = now.saturating_sub(c.frame_started_ms.unwrap_or(now));
        self.stats.frame_timeouts += 1;
        if let Some(more) = self.timeout_log.ready(now) {
            warn!(
                "closing connection from {peer}: {what} begun {elapsed_ms} ms ago is still incomplete ({buffered} bytes so far; frame timeout {} ms; {more} more since the last line)",
                self.limits.frame_timeout_ms
            );
        }
        self.remove(id.key, "frame timeout");
    }

    pub(super) fn connect_failed(&mut self, id: ConnId, e: io::Error) {
        debug!("connection {} to {:?}: {e}", id.key, self.peer(id));
        self.connects.push((id, Err(e)));
        self.remove(id.key, "connect failed");
    }

    /// Established, failed, or (a spurious wake-up, as mio documents) still in progress.
    pub(super) fn finish_connect(&mut self, key: usize) {
        let now = self.now_ms();
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        let id = ConnId {
            key,
            generation: conn.generation,
        };
        let failure = match conn.stream.take_error() {
            Ok(Some(e)) | Err(e) => Some(e),
            Ok(None) => match conn.stream.peer_addr() {
                Ok(_) => None,
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
                Err(e) => Some(e),
            },
        };
        if let Some(e) = failure {
            self.connect_failed(id, e);
            return;
        }
        conn.connect_deadline_ms = None;
        conn.last_frame_ms = now;
        conn.last_write_ms = now;
        let peer = conn.peer;
        if let Err(e) = conn.stream.set_nodelay(true) {
            debug!("TCP_NODELAY on {peer}: {e}");
        }
        debug!("connection {} to {peer}: established", id.key);
        self.connects.push((id, Ok(())));
        self.arm_next_deadline(id);
        self.pending.push_back(id);
        self.flush(id.key);
    }

    pub(super) fn drop_all(&mut self) {
        let mut scratch = vec![0u8; 64 * 1024];
        for mut conn in self.conns.drain() {
            conn.discard_input(&mut scratch, UNREAD_DISCARD_MAX);
        }
    }
}

/// What a flush outside the write line may write of `unsent` bytes: all of a small reply,
/// nothing of a large one.
fn small_write(unsent: usize) -> usize {
    if unsent <= SMALL_UNSENT {
        unsent
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gate_lets_each_address_through_once_per_interval_and_stays_bounded() {
        let mut gate = AddressGate::new(1_000);
        let (a, b): (IpAddr, IpAddr) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        assert!(gate.ready(a, 0));
        assert!(!gate.ready(a, 999));
        assert!(gate.ready(b, 999), "another address is not held back");
        assert!(gate.ready(a, 1_000));
        let flood =
            (0..2 * GATED_ADDRESSES as u32).filter(|i| gate.ready(i.to_be_bytes().into(), 2_000));
        assert_eq!(
            flood.count(),
            GATED_ADDRESSES + 1,
            "the rest share one line"
        );
        assert!(gate.next_ms.len() <= GATED_ADDRESSES);
        let stranger: IpAddr = [192, 0, 2, 1].into();
        assert!(!gate.ready(stranger, 2_500));
        assert!(gate.ready(stranger, 3_000), "expired addresses make room");
    }
}
