//! [`Ctx`]: the part of the loop a handler may touch from its callbacks: connections (their
//! write buffers, read class, hold, close), named timers, limits, counters. The loop itself
//! ([`super::EventLoop`]) keeps the poll, the listeners and the handler, and drives the turn.
//!
//! Closing is immediate (the socket is deregistered and the slot freed at once), but the
//! handler hears of it through `on_close` only when its current callback has returned; the
//! loop delivers those notices before it accepts again, so a slot is never reused before the
//! application has forgotten the connection that held it.

use super::connection::{Connection, FlushResult};
use super::{ConnId, Limits, ListenerTag, LoopWaker, ReadClass, TimerId};
use crate::timer::DeadlineBuckets;
use log::{debug, info, warn};
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use slab::Slab;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

/// Write buffers kept for reuse, and the largest capacity worth keeping: enough for a burst of
/// ordinary replies, small enough that the pool never pins a large reply's allocation.
const SPARE_WRITE_BUFS: usize = 2;
const SPARE_WRITE_BUF_MAX: usize = 64 * 1024;

/// What the loop counted, for the application's statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopStats {
    pub connections: usize,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Connections refused because `max_connections` were open.
    pub refused: u64,
}

/// The loop's state that handlers reach through their callbacks.
pub struct Ctx<C> {
    registry: Registry,
    pub(super) conns: Slab<Connection<C>>,
    next_generation: u64,
    pub(super) limits: Limits,
    started: Instant,
    /// The loop's clock, read once per step rather than once per frame.
    clock_ms: u64,
    pub(super) stats: LoopStats,
    next_refusal_log_ms: u64,
    /// Connections to read again this turn: new ones, ones whose read budget ran out, ones
    /// released from backpressure.
    pub(super) pending: VecDeque<ConnId>,
    /// Bulk connections waiting, first come first served, for the handler to admit reads.
    pub(super) bulk_line: VecDeque<ConnId>,
    /// Connections whose write buffer the handler touched outside their own frame handling.
    dirty: Vec<usize>,
    /// Connections closed since the handler last heard, with the application's state.
    pub(super) closed: Vec<(ConnId, C)>,
    /// Named application timers (a handful: a sorted structure would cost more than a scan).
    timers: Vec<(TimerId, u64)>,
    idle: DeadlineBuckets<ConnId>,
    spare_write_bufs: Vec<Vec<u8>>,
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
            next_refusal_log_ms: 0,
            pending: VecDeque::new(),
            bulk_line: VecDeque::new(),
            dirty: Vec::new(),
            closed: Vec::new(),
            timers: Vec::new(),
            idle: DeadlineBuckets::new(1000),
            spare_write_bufs: Vec::new(),
            stopping: false,
            waker,
        }
    }

    // ------------------------------------------------------------------ for handlers

    /// Milliseconds since the loop was created (the clock of timers and idle deadlines), as
    /// read at the start of the current step: after the poll, before each connection's
    /// frames, before the timers and before `before_sleep`.
    pub fn now_ms(&self) -> u64 {
        self.clock_ms
    }

    pub(super) fn update_clock(&mut self) -> u64 {
        self.clock_ms = self.started.elapsed().as_millis() as u64;
        self.clock_ms
    }

    pub fn stats(&self) -> LoopStats {
        self.stats
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// New limits, effective from the next event (idle deadlines already set are re-checked
    /// against the new value when they fire).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// A handle other threads use to wake the loop (it then runs `before_sleep`).
    pub fn waker(&self) -> LoopWaker {
        self.waker.clone()
    }

    /// The loop is draining: listeners are closed, no request is read any more.
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

    /// The connection now in slot `index` (see [`ConnId::index`]), if any.
    pub fn conn_at(&self, index: usize) -> Option<ConnId> {
        self.conns.get(index).map(|c| ConnId {
            key: index,
            generation: c.generation,
        })
    }

    pub fn peer(&self, id: ConnId) -> Option<SocketAddr> {
        self.get(id).map(|c| c.peer)
    }

    /// The listener a connection came in on.
    pub fn listener(&self, id: ConnId) -> Option<ListenerTag> {
        self.get(id).map(|c| c.listener)
    }

    /// The application's state for a connection.
    pub fn data(&mut self, id: ConnId) -> Option<&mut C> {
        self.get_mut(id).map(|c| &mut c.data)
    }

    /// The connection's write buffer, to append reply bytes to; `None` once it is closed.
    /// Bytes written here outside the connection's own `on_frame` go out when the current
    /// callback returns.
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

    /// Sets how the connection is scheduled from now on.
    pub fn set_read_class(&mut self, id: ConnId, class: ReadClass) {
        if let Some(c) = self.get_mut(id) {
            c.class = class;
        }
    }

    /// Lets a connection held by `Next::Hold` have its next frames handled: it is read again
    /// in its turn (an interactive connection this turn, a bulk one from the line).
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

    /// Bulk connections waiting in line to be read.
    pub fn bulk_waiting(&self) -> usize {
        self.bulk_line.len()
    }

    /// As many bulk connections wait as `Limits::bulk_line_limit` allows: a bulk connection
    /// the loop comes back to now is read anyway, and the handler should refuse the costly
    /// work it brings rather than queue it.
    pub fn bulk_line_full(&self) -> bool {
        self.bulk_line.len() >= self.limits.bulk_line_limit
    }

    /// Closes a connection: what is already in its write buffer is sent if the socket takes it
    /// at once; `on_close` follows when the current callback has returned.
    pub fn close(&mut self, id: ConnId, why: &str) {
        if self.get(id).is_none() {
            return;
        }
        if let Some(conn) = self.conns.get_mut(id.key) {
            if conn.unsent() > 0 {
                if let FlushResult::Written(n) = conn.flush() {
                    self.stats.bytes_out += n as u64;
                }
            }
        }
        self.remove(id.key, why);
    }

    /// Arms (or moves) the named timer to fire at `at_ms` on the loop's clock.
    pub fn set_timer(&mut self, timer: TimerId, at_ms: u64) {
        match self.timers.iter_mut().find(|(t, _)| *t == timer) {
            Some(entry) => entry.1 = at_ms,
            None => self.timers.push((timer, at_ms)),
        }
    }

    pub fn cancel_timer(&mut self, timer: TimerId) {
        self.timers.retain(|(t, _)| *t != timer);
    }

    // ------------------------------------------------------------------ for the loop

    /// Takes a new connection into the slab, or refuses it past `max_connections`.
    pub(super) fn admit(
        &mut self,
        mut stream: TcpStream,
        peer: SocketAddr,
        listener: ListenerTag,
        data: C,
    ) -> Option<ConnId> {
        if self.conns.len() >= self.limits.max_connections {
            self.stats.refused += 1;
            // One line per second at most: a connection flood must not flood the log.
            let now = self.now_ms();
            if now >= self.next_refusal_log_ms {
                warn!(
                    "refusing connection from {peer}: {} connections open, the limit ({} refused so far)",
                    self.limits.max_connections, self.stats.refused
                );
                self.next_refusal_log_ms = now + 1000;
            }
            return None;
        }
        if let Err(e) = stream.set_nodelay(true) {
            debug!("TCP_NODELAY on {peer}: {e}");
        }
        let now = self.now_ms();
        let entry = self.conns.vacant_entry();
        let key = entry.key();
        if let Err(e) = self
            .registry
            .register(&mut stream, Token(key), Interest::READABLE)
        {
            warn!("could not register connection from {peer}: {e}");
            return None;
        }
        self.next_generation += 1;
        let generation = self.next_generation;
        entry.insert(Connection::new(
            stream, peer, listener, generation, now, data,
        ));
        self.stats.connections = self.conns.len();
        let id = ConnId { key, generation };
        if self.limits.idle_ms > 0 {
            self.idle.schedule(now + self.limits.idle_ms, id);
        }
        debug!("connection {key} from {peer}");
        // Data may already be waiting (edge-triggered readiness).
        self.pending.push_back(id);
        Some(id)
    }

    /// Puts a bulk connection in line to be read, once: readiness is reported again and again
    /// for a socket left unread, and duplicates would make the line grow without bound.
    pub(super) fn join_line(&mut self, id: ConnId) {
        if let Some(c) = self.get_mut(id) {
            if !c.in_line {
                c.in_line = true;
                self.bulk_line.push_back(id);
            }
        }
    }

    /// Removes a connection (no flush) and queues the notice for the handler.
    pub(super) fn remove(&mut self, key: usize, why: &str) {
        if let Some(mut conn) = self.conns.try_remove(key) {
            let _ = self.registry.deregister(conn.stream_mut());
            debug!("connection {key} from {} closed: {why}", conn.peer);
            self.stats.connections = self.conns.len();
            let id = ConnId {
                key,
                generation: conn.generation,
            };
            self.closed.push((id, conn.data));
        }
    }

    /// Writes what the socket takes, then applies the write-side rules: close on error or
    /// past the hard cap, resume reading below half the high-water mark, keep WRITABLE
    /// interest only while bytes wait, give a drained buffer back to the pool.
    pub(super) fn flush(&mut self, key: usize) {
        let now = self.now_ms();
        let Limits {
            write_high_water,
            write_hard_cap,
            ..
        } = self.limits;
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        conn.dirty = false;
        match conn.flush() {
            FlushResult::Written(n) => {
                self.stats.bytes_out += n as u64;
                if n > 0 {
                    conn.last_active_ms = now;
                }
            }
            FlushResult::Error(e) => {
                debug!("write to {}: {e}", conn.peer);
                self.remove(key, "write error");
                return;
            }
        }
        let unsent = conn.unsent();
        if unsent > write_hard_cap {
            warn!(
                "closing connection from {}: {unsent} bytes unread by the peer exceed the write hard cap {write_hard_cap}",
                conn.peer
            );
            self.remove(key, "write buffer hard cap");
            return;
        }
        let id = ConnId {
            key,
            generation: conn.generation,
        };
        if conn.read_paused && unsent <= write_high_water / 2 {
            // Drained below the low-water mark: handle what is buffered, then read on.
            conn.read_paused = false;
            self.pending.push_back(id);
        }
        if unsent == 0 && conn.write_buf.capacity() > 0 {
            let buf = conn.take_empty_write_buf();
            if buf.capacity() <= SPARE_WRITE_BUF_MAX
                && self.spare_write_bufs.len() < SPARE_WRITE_BUFS
            {
                self.spare_write_bufs.push(buf);
            }
        }
        let want_write = unsent > 0;
        if want_write != conn.write_interest {
            conn.write_interest = want_write;
            let interest = if want_write {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            if let Err(e) = self
                .registry
                .reregister(conn.stream_mut(), Token(key), interest)
            {
                warn!("reregister failed: {e}");
            }
        }
        if conn.peer_closed && unsent == 0 && !conn.read_buf.is_empty() {
            // The peer half-closed with a partial frame left: nothing more will come.
            self.remove(key, "closed by peer mid-frame");
        }
    }

    /// Flushes the connections whose write buffers handlers touched.
    pub(super) fn flush_dirty(&mut self) {
        while let Some(key) = self.dirty.pop() {
            if self.conns.get(key).is_some_and(|c| c.dirty) {
                self.flush(key);
            }
        }
    }

    /// Flushes every connection with bytes waiting (the drain at stop).
    pub(super) fn flush_all(&mut self) -> usize {
        let waiting: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.unsent() > 0)
            .map(|(k, _)| k)
            .collect();
        for key in waiting {
            self.flush(key);
        }
        self.conns.iter().filter(|(_, c)| c.unsent() > 0).count()
    }

    /// The earliest application timer deadline.
    pub(super) fn next_timer_ms(&self) -> Option<u64> {
        self.timers.iter().map(|(_, at)| *at).min()
    }

    /// Removes and returns the earliest application timer due at `now_ms`.
    pub(super) fn pop_due_timer(&mut self, now_ms: u64) -> Option<TimerId> {
        let (i, _) = self
            .timers
            .iter()
            .enumerate()
            .filter(|(_, (_, at))| *at <= now_ms)
            .min_by_key(|(_, (_, at))| *at)?;
        Some(self.timers.swap_remove(i).0)
    }

    /// Closes connections silent for longer than `idle_ms`; re-arms the others (a deadline is
    /// only moved when its bucket fires, never on each read or write).
    pub(super) fn close_idle(&mut self) {
        if self.idle.is_empty() {
            return;
        }
        let now = self.now_ms();
        let mut fired = Vec::new();
        self.idle.pop_due(now, usize::MAX, |_, id| fired.push(id));
        let idle_ms = self.limits.idle_ms;
        for id in fired {
            let Some(c) = self.get(id) else {
                continue;
            };
            if idle_ms == 0 {
                continue;
            }
            let deadline = c.last_active_ms + idle_ms;
            if deadline <= now {
                info!(
                    "closing connection from {}: idle for {} ms (limit {idle_ms} ms)",
                    c.peer,
                    now - c.last_active_ms
                );
                self.remove(id.key, "idle");
            } else {
                self.idle.schedule(deadline, id);
            }
        }
    }

    /// Deregisters and drops every connection (the loop is returning; no notices).
    pub(super) fn drop_all(&mut self) {
        for mut conn in self.conns.drain() {
            let _ = self.registry.deregister(conn.stream_mut());
        }
        self.stats.connections = 0;
        self.pending.clear();
        self.bulk_line.clear();
        self.closed.clear();
    }
}
