//! The event loop: one thread owns the listener, a `slab` of connections, the timers and the
//! processor (and through it every table). Modelled on Redis' ae: the loop knows sockets,
//! buffers and time, and nothing about routes; it hands whole frames to the processor and
//! writes back whatever bytes the processor produced.
//!
//! Per iteration: poll, accept, read what is readable (bounded per connection so one busy
//! peer cannot starve the rest), cut and handle frames, flush, apply unregistration batches
//! handed back by the worker, then run due timers (broker expiry every
//! `scanNotActiveBrokerInterval`, idle connections after `serverChannelMaxIdleTimeSeconds`).

pub mod connection;
pub mod worker;

use crate::config::NamesrvConfig;
use crate::kv::KvStore;
use crate::processor::{Processor, RequestContext, ServerCounters, WorkerJob};
use crate::remoting::codes::{request, response};
use crate::remoting::command::{DecodeLimits, RemotingCommand};
use crate::remoting::frame;
use crate::remoting::json;
use crate::timer::DeadlineBuckets;
use connection::{Connection, FlushResult, ReadResult};
use crossbeam_channel::{bounded, unbounded, Receiver};
use log::{debug, error, info, warn};
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const LISTENER: Token = Token(usize::MAX - 1);
const WAKER: Token = Token(usize::MAX - 2);

/// Bytes read from one connection per loop iteration before others get their turn.
const READ_BUDGET: usize = 256 * 1024;

/// Time per iteration spent on queued registrations and unregistrations (together) before
/// the loop goes back to answering reads: keeps route lookups fast during storms and mass
/// expiry. At least one queued item is always handled, so progress never stops.
const SLOW_WORK_BUDGET: Duration = Duration::from_micros(300);

/// Queued registration bytes beyond which broker connections are not read this iteration
/// (about a dozen 100-topic registrations: what one iteration's budget applies).
const REGISTRATION_READ_AHEAD_BYTES: usize = 256 * 1024;

/// Bytes of registration traffic after which freed heap is handed back to the OS once the
/// queues are empty again (glibc keeps a burst's peak otherwise).
const TRIM_AFTER_BYTES: usize = 4 << 20;

/// Bytes of queued registration frames beyond which new ones are answered SYSTEM_BUSY.
const REGISTRATION_BACKLOG_BYTES: usize = 256 << 20;

/// Unregistrations applied per step of a large batch.
const UNREGISTER_CHUNK: usize = 32;

/// Expiry entries examined per loop iteration during a mass expiry (each expired
/// broker's connection is closed, a few microseconds apiece).
const EXPIRY_CHUNK: usize = 64;

/// Java's remark when a request queue is full.
const OVERLOAD_REMARK: &str = "[OVERLOAD]system busy, start flow control for a while";

/// A REGISTER_BROKER waiting for its turn.
struct QueuedRegistration {
    key: usize,
    generation: u64,
    cmd: RemotingCommand,
}

/// Settings the loop reads on every event; refreshed after a config update.
#[derive(Debug, Clone, Copy)]
struct LoopSettings {
    frame_max: u32,
    decode: DecodeLimits,
    idle_ms: u64,
    high_water: usize,
    hard_cap: usize,
    max_connections: usize,
    scan_interval_ms: u64,
    registration_backlog_limit: usize,
    registration_budget: usize,
}

impl LoopSettings {
    fn from_config(c: &NamesrvConfig) -> Self {
        LoopSettings {
            frame_max: c.frame_max_length,
            decode: DecodeLimits {
                max_header_len: c.max_header_length as usize,
                max_ext_fields: c.max_ext_fields as usize,
                json: json::Limits {
                    max_depth: c.max_json_depth as usize,
                    max_string_len: c.max_json_string_length as usize,
                },
            },
            idle_ms: (c.server_channel_max_idle_time_seconds.max(0) as u64) * 1000,
            high_water: c.conn_write_high_water as usize,
            hard_cap: c.conn_write_hard_cap as usize,
            max_connections: c.max_connections as usize,
            scan_interval_ms: c.scan_not_active_broker_interval.max(1) as u64,
            registration_backlog_limit: c.registration_backlog_limit as usize,
            registration_budget: c.registration_budget_per_iteration.max(1) as usize,
        }
    }
}

/// Stops a running server from another thread.
#[derive(Clone)]
pub struct StopHandle {
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
}

impl StopHandle {
    /// Asks the loop to return from `run`; it wakes through the `Waker`.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Err(e) = self.waker.wake() {
            warn!("could not wake the event loop to stop it: {e}");
        }
    }
}

/// A bound, not yet running name server.
pub struct Server {
    poll: Poll,
    listener: TcpListener,
    local_addr: SocketAddr,
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    conns: Slab<Connection>,
    processor: Processor,
    batches: Receiver<worker::Batch>,
    worker: Option<JoinHandle<()>>,
    settings: LoopSettings,
    idle: DeadlineBuckets<(usize, u64)>,
    started: Instant,
    next_scan_ms: u64,
    counters: ServerCounters,
    next_generation: u64,
    read_scratch: Vec<u8>,
    out: Vec<u8>,
    /// Connections with unread socket data or unprocessed frames left by a budget.
    pending: VecDeque<usize>,
    /// Readable broker connections waiting for room in the registration queue, in order.
    deferred_reads: VecDeque<usize>,
    /// Registrations are the expensive requests: they wait here, at most one per
    /// connection, and are applied under a per-iteration budget after cheap requests.
    registrations: VecDeque<QueuedRegistration>,
    registration_bytes: usize,
    bytes_since_trim: usize,
    next_trim_ms: u64,
    refused_connections: u64,
    next_refusal_log_ms: u64,
    /// A scan found more due brokers than one iteration handles.
    expiry_in_progress: bool,
    /// Connections of expired brokers waiting to be closed, with their generation.
    expired_conns: VecDeque<(usize, u64)>,
    /// Unregistrations handed back by the worker, applied in chunks.
    unregistrations: VecDeque<(
        crate::route::table::UnregisterRequest,
        crate::route::table::RemovalReason,
    )>,
}

/// Why the server could not start.
#[derive(Debug)]
pub enum StartError {
    Io(io::Error),
    Kv(crate::kv::KvError),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Io(e) => write!(f, "{e}"),
            StartError::Kv(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StartError {}

impl From<io::Error> for StartError {
    fn from(e: io::Error) -> Self {
        StartError::Io(e)
    }
}

impl Server {
    /// Loads the KV store, binds the listener and starts the worker thread.
    pub fn bind(config: NamesrvConfig) -> Result<Server, StartError> {
        let kv =
            KvStore::open(std::path::Path::new(&config.kv_config_path)).map_err(StartError::Kv)?;
        Server::bind_with_kv(config, kv)
    }

    /// Like [`Server::bind`] with a given KV store (tests and benches use an in-memory one).
    pub fn bind_with_kv(config: NamesrvConfig, kv: KvStore) -> Result<Server, StartError> {
        let addr: SocketAddr = format!("{}:{}", config.bind_address, config.listen_port)
            .parse()
            .or_else(|_| format!("[{}]:{}", config.bind_address, config.listen_port).parse())
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("bad bindAddress {}", config.bind_address),
                )
            })?;
        let poll = Poll::new()?;
        let mut listener = TcpListener::bind(addr)?;
        let local_addr = listener.local_addr()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let capacity = config.un_register_broker_queue_capacity.max(1) as usize;
        let (jobs_tx, jobs_rx) = bounded::<WorkerJob>(capacity);
        let (batches_tx, batches_rx) = unbounded();
        let worker_waker = waker.clone();
        let worker = std::thread::Builder::new()
            .name("unregister-worker".into())
            .spawn(move || worker::run(jobs_rx, batches_tx, worker_waker))?;
        let settings = LoopSettings::from_config(&config);
        let processor = Processor::new(config, kv, jobs_tx);
        Ok(Server {
            poll,
            listener,
            local_addr,
            waker,
            stop: Arc::new(AtomicBool::new(false)),
            conns: Slab::new(),
            processor,
            batches: batches_rx,
            worker: Some(worker),
            settings,
            idle: DeadlineBuckets::new(1000),
            started: Instant::now(),
            next_scan_ms: settings.scan_interval_ms,
            counters: ServerCounters::default(),
            next_generation: 0,
            read_scratch: vec![0u8; 64 * 1024],
            out: Vec::with_capacity(64 * 1024),
            pending: VecDeque::new(),
            deferred_reads: VecDeque::new(),
            registrations: VecDeque::new(),
            registration_bytes: 0,
            bytes_since_trim: 0,
            next_trim_ms: 0,
            refused_connections: 0,
            next_refusal_log_ms: 0,
            expiry_in_progress: false,
            expired_conns: VecDeque::new(),
            unregistrations: VecDeque::new(),
        })
    }

    /// The address actually bound (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            stop: self.stop.clone(),
            waker: self.waker.clone(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Runs the loop until stopped.
    pub fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        info!("event loop running on {}", self.local_addr);
        while !self.stop.load(Ordering::SeqCst) {
            let timeout = self.poll_timeout();
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            // Clients first: their lookups are cheap and latency-sensitive, while broker
            // connections mostly carry registrations that only join the queue. Brokers are
            // read in arrival order, as far as the registration queue has room.
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept_all(),
                    WAKER => {}
                    Token(key) => {
                        if event.is_writable() {
                            self.on_writable(key);
                        }
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            if self.conns.get(key).is_some_and(|c| c.broker_like) {
                                self.defer_read(key);
                            } else {
                                self.on_readable(key);
                            }
                        }
                    }
                }
            }
            self.run_pending();
            self.read_brokers_in_turn();
            let slow_work = Instant::now();
            self.run_registrations(slow_work);
            self.apply_batches(slow_work);
            self.run_timers();
            self.trim_heap_after_bursts();
        }
        info!("event loop stopping");
        self.shutdown();
        Ok(())
    }

    fn shutdown(mut self) {
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for k in keys {
            if let Some(mut c) = self.conns.try_remove(k) {
                let _ = self.poll.registry().deregister(c.stream_mut());
            }
        }
        // The processor holds the worker's job sender: dropping it ends the worker.
        let Server {
            processor, worker, ..
        } = self;
        drop(processor);
        if let Some(w) = worker {
            let _ = w.join();
        }
    }

    fn poll_timeout(&self) -> Duration {
        if !self.pending.is_empty()
            || !self.registrations.is_empty()
            || !self.unregistrations.is_empty()
            || self.expiry_in_progress
            || !self.expired_conns.is_empty()
            || (!self.deferred_reads.is_empty() && !self.registration_queue_full())
        {
            return Duration::ZERO;
        }
        let now = self.now_ms();
        let until_scan = self.next_scan_ms.saturating_sub(now);
        Duration::from_millis(until_scan.clamp(1, 1000))
    }

    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, peer)) => {
                    if self.conns.len() >= self.settings.max_connections {
                        self.refused_connections += 1;
                        // One line per second at most: a connection flood must not flood the log.
                        let now = self.now_ms();
                        if now >= self.next_refusal_log_ms {
                            warn!(
                                "refusing connection from {peer}: maxConnections {} reached ({} refused so far)",
                                self.settings.max_connections, self.refused_connections
                            );
                            self.next_refusal_log_ms = now + 1000;
                        }
                        drop(stream);
                        continue;
                    }
                    if let Err(e) = stream.set_nodelay(true) {
                        debug!("TCP_NODELAY on {peer}: {e}");
                    }
                    let now = self.now_ms();
                    let entry = self.conns.vacant_entry();
                    let key = entry.key();
                    if let Err(e) =
                        self.poll
                            .registry()
                            .register(&mut stream, Token(key), Interest::READABLE)
                    {
                        warn!("could not register connection from {peer}: {e}");
                        continue;
                    }
                    self.next_generation += 1;
                    entry.insert(Connection::new(stream, peer, now, self.next_generation));
                    self.counters.connections = self.conns.len();
                    self.schedule_idle(key, now);
                    debug!("connection {key} from {peer}");
                    // Data may already be waiting (edge-triggered readiness).
                    self.pending.push_back(key);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EMFILE and friends: log and try again on the next readiness event.
                    warn!("accept failed: {e}");
                    return;
                }
            }
        }
    }

    fn schedule_idle(&mut self, key: usize, now: u64) {
        if self.settings.idle_ms == 0 {
            return;
        }
        if let Some(c) = self.conns.get(key) {
            self.idle
                .schedule(now + self.settings.idle_ms, (key, c.generation));
        }
    }

    fn on_readable(&mut self, key: usize) {
        let now = self.now_ms();
        let queue_full = self.registration_queue_full();
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        // Backpressure, or a registration of this peer still queued: leave further bytes in
        // the kernel's socket buffer until it is answered (bounds memory during storms).
        if conn.read_paused || conn.registration_queued {
            return;
        }
        // A full iteration's worth of registrations is already queued: reading more broker
        // traffic now would only lengthen this iteration for everyone else, so the peer waits
        // its turn. Past `registrationBacklogLimit` waiting peers it is read anyway and its
        // registration answered SYSTEM_BUSY, as Java's full queue does.
        if conn.broker_like
            && queue_full
            && self.deferred_reads.len() < self.settings.registration_backlog_limit
        {
            self.defer_read(key);
            return;
        }
        match conn.read_available(&mut self.read_scratch, READ_BUDGET) {
            ReadResult::WouldBlock(n) => {
                self.counters.bytes_in += n as u64;
                if n > 0 {
                    conn.last_active_ms = now;
                }
            }
            ReadResult::BudgetExhausted(n) => {
                self.counters.bytes_in += n as u64;
                conn.last_active_ms = now;
                self.pending.push_back(key);
            }
            ReadResult::Closed(n) => {
                self.counters.bytes_in += n as u64;
                conn.peer_closed = true;
            }
            ReadResult::Error(e) => {
                debug!("read from {}: {e}", conn.peer);
                self.close(key, "read error");
                return;
            }
        }
        self.process_frames(key);
    }

    fn on_writable(&mut self, key: usize) {
        self.flush(key);
    }

    fn run_pending(&mut self) {
        let n = self.pending.len();
        for _ in 0..n {
            let Some(key) = self.pending.pop_front() else {
                break;
            };
            if self.conns.contains(key) {
                self.on_readable(key);
            }
        }
    }

    /// Cuts and handles every whole frame buffered on `key` (until backpressure), then flushes.
    fn process_frames(&mut self, key: usize) {
        let now = self.now_ms();
        // The queue is full and more peers than `registrationBacklogLimit` wait behind it:
        // registrations read now are refused rather than queued.
        let shedding = self.registration_queue_full()
            && self.deferred_reads.len() >= self.settings.registration_backlog_limit;
        let mut close_reason: Option<String> = None;
        {
            let Some(conn) = self.conns.get_mut(key) else {
                return;
            };
            let ctx = RequestContext {
                conn: Some(key),
                peer: Some(conn.peer),
                now_ms: now,
            };
            while !conn.read_paused && !conn.registration_queued {
                let frame = match frame::next_frame(&mut conn.read_buf, self.settings.frame_max) {
                    Ok(Some(f)) => f,
                    Ok(None) => break,
                    Err(e) => {
                        close_reason = Some(e.to_string());
                        break;
                    }
                };
                let cmd = match RemotingCommand::decode(frame, &self.settings.decode) {
                    Ok(c) => c,
                    Err(e) => {
                        close_reason = Some(e.to_string());
                        break;
                    }
                };
                if !conn.seen_request {
                    conn.seen_request = true;
                    conn.broker_like = is_broker_request(cmd.code);
                }
                if cmd.code == request::REGISTER_BROKER && !cmd.is_response() {
                    let over = shedding
                        || self.registration_bytes + cmd.body.len() > REGISTRATION_BACKLOG_BYTES;
                    if over {
                        warn!(
                            "registration backlog full ({} queued): answering SYSTEM_BUSY to {}",
                            self.registrations.len(),
                            conn.peer
                        );
                        self.processor.reply_error(
                            &cmd,
                            response::SYSTEM_BUSY,
                            OVERLOAD_REMARK,
                            &mut self.out,
                        );
                        continue;
                    }
                    // Answered in run_registrations; this connection's later frames wait so
                    // that its responses keep their order.
                    self.registration_bytes += cmd.body.len();
                    self.registrations.push_back(QueuedRegistration {
                        key,
                        generation: conn.generation,
                        cmd,
                    });
                    conn.registration_queued = true;
                    conn.broker_like = true;
                    break;
                }
                let Some(effects) = handle_guarded(
                    &mut self.processor,
                    &ctx,
                    &self.counters,
                    &cmd,
                    &mut self.out,
                ) else {
                    close_reason = Some(format!("handling request code {} panicked", cmd.code));
                    break;
                };
                if effects.config_changed {
                    self.settings = LoopSettings::from_config(self.processor.config());
                    // A shorter scan interval takes effect now, not after the old one.
                    self.next_scan_ms = self.next_scan_ms.min(now + self.settings.scan_interval_ms);
                }
                if conn.write_buf.len() + self.out.len() > self.settings.high_water {
                    conn.write_buf.extend_from_slice(&self.out);
                    self.out.clear();
                    conn.read_paused = true;
                }
            }
            conn.write_buf.extend_from_slice(&self.out);
            self.out.clear();
            conn.release_idle_read_buffer();
        }
        if let Some(reason) = close_reason {
            let peer = self.conns.get(key).map(|c| c.peer);
            warn!("closing connection from {peer:?}: {reason}");
            // Answers to the frames before the bad one still go out, best effort.
            self.flush(key);
            self.close(key, "bad frame");
            return;
        }
        self.flush(key);
        if let Some(conn) = self.conns.get(key) {
            if conn.peer_closed && conn.write_buf.is_empty() {
                self.close(key, "closed by peer");
            }
        }
    }

    fn flush(&mut self, key: usize) {
        let now = self.now_ms();
        let low_water = self.settings.high_water / 2;
        let hard_cap = self.settings.hard_cap;
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        let result = conn.flush();
        match result {
            FlushResult::Done(n) | FlushResult::Partial(n) => {
                self.counters.bytes_out += n as u64;
                if n > 0 {
                    conn.last_active_ms = now;
                }
            }
            FlushResult::Error(e) => {
                debug!("write to {}: {e}", conn.peer);
                self.close(key, "write error");
                return;
            }
        }
        if conn.write_buf.len() > hard_cap {
            let peer = conn.peer;
            warn!(
                "closing connection from {peer}: {} bytes unread by the peer exceed connWriteHardCap {hard_cap}",
                conn.write_buf.len()
            );
            self.close(key, "write buffer hard cap");
            return;
        }
        if conn.read_paused && conn.write_buf.len() <= low_water {
            // Drained below the low-water mark: handle what is buffered, then read on.
            conn.read_paused = false;
            self.pending.push_back(key);
        }
        let want_write = !conn.write_buf.is_empty();
        if want_write != conn.write_interest {
            conn.write_interest = want_write;
            let interest = if want_write {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            if let Err(e) = self
                .poll
                .registry()
                .reregister(conn.stream_mut(), Token(key), interest)
            {
                warn!("reregister failed: {e}");
            }
        }
        if conn.peer_closed && conn.write_buf.is_empty() && !conn.read_buf.is_empty() {
            // The peer half-closed with a partial frame left: nothing more will come.
            self.close(key, "closed by peer mid-frame");
        }
    }

    fn close(&mut self, key: usize, why: &str) {
        if let Some(mut conn) = self.conns.try_remove(key) {
            let _ = self.poll.registry().deregister(conn.stream_mut());
            debug!("connection {key} from {} closed: {why}", conn.peer);
            self.counters.connections = self.conns.len();
            self.processor.connection_closed(key);
        }
    }

    /// Applies queued registrations: at least one, then until the count or time budget
    /// for this iteration is spent.
    fn run_registrations(&mut self, started: Instant) {
        let mut done = 0;
        while done < self.settings.registration_budget {
            if done > 0 && started.elapsed() >= SLOW_WORK_BUDGET {
                break;
            }
            let Some(q) = self.registrations.pop_front() else {
                break;
            };
            self.registration_bytes -= q.cmd.body.len();
            self.bytes_since_trim += q.cmd.body.len();
            done += 1;
            let Some(conn) = self.conns.get_mut(q.key) else {
                continue;
            };
            if conn.generation != q.generation {
                continue;
            }
            let ctx = RequestContext {
                conn: Some(q.key),
                peer: Some(conn.peer),
                now_ms: self.started.elapsed().as_millis() as u64,
            };
            if handle_guarded(
                &mut self.processor,
                &ctx,
                &self.counters,
                &q.cmd,
                &mut self.out,
            )
            .is_none()
            {
                self.out.clear();
                self.close(q.key, "registration handler panicked");
                continue;
            }
            conn.write_buf.extend_from_slice(&self.out);
            self.out.clear();
            conn.registration_queued = false;
            self.flush(q.key);
            // Frames that arrived behind the registration can go now, in turn with the other
            // waiting brokers (first come, first served).
            self.defer_read(q.key);
        }
    }

    /// Reads waiting broker connections, oldest first, while the registration queue has room.
    fn read_brokers_in_turn(&mut self) {
        let mut budget = self.deferred_reads.len();
        while budget > 0 && !self.registration_queue_full() {
            budget -= 1;
            match self.deferred_reads.pop_front() {
                Some(key) => {
                    if let Some(c) = self.conns.get_mut(key) {
                        c.read_deferred = false;
                    }
                    self.on_readable(key)
                }
                None => break,
            }
        }
    }

    /// Puts a broker connection in line to be read, once: readiness is reported again and
    /// again for a socket we leave unread, and duplicates would make the line grow without
    /// bound (and unfair).
    fn defer_read(&mut self, key: usize) {
        if let Some(c) = self.conns.get_mut(key) {
            if !c.read_deferred {
                c.read_deferred = true;
                self.deferred_reads.push_back(key);
            }
        }
    }

    /// Enough registrations are queued for this iteration's budget: read no more broker
    /// traffic until some are applied.
    fn registration_queue_full(&self) -> bool {
        self.registrations.len() >= self.settings.registration_budget
            || self.registration_bytes >= REGISTRATION_READ_AHEAD_BYTES
    }

    /// Takes batches from the worker and applies them in chunks, so that a mass expiry
    /// never holds the loop for long.
    fn apply_batches(&mut self, started: Instant) {
        while let Ok(batch) = self.batches.try_recv() {
            self.processor.record_unregister_batch(batch.len());
            self.bytes_since_trim += batch.len() * 1024;
            self.unregistrations.extend(batch);
        }
        while !self.unregistrations.is_empty() {
            let n = self.unregistrations.len().min(UNREGISTER_CHUNK);
            let chunk: Vec<_> = self.unregistrations.drain(..n).collect();
            self.processor.apply_unregister_batch(&chunk);
            if started.elapsed() >= SLOW_WORK_BUDGET {
                break;
            }
        }
    }

    /// After a registration burst or a mass unregistration, once the queues are back to their
    /// usual size, hands the freed heap back to the OS (at most once a second), so RSS
    /// follows the tables rather than the burst's peak.
    fn trim_heap_after_bursts(&mut self) {
        // During a long storm the queue never empties, so "drained to its usual read-ahead"
        // is the signal that a burst is over.
        if self.bytes_since_trim < TRIM_AFTER_BYTES
            || self.registration_bytes > REGISTRATION_READ_AHEAD_BYTES
            || !self.unregistrations.is_empty()
        {
            return;
        }
        let now = self.now_ms();
        if now < self.next_trim_ms {
            return;
        }
        self.bytes_since_trim = 0;
        self.next_trim_ms = now + 1000;
        release_free_heap();
    }

    fn run_timers(&mut self) {
        let now = self.now_ms();
        if now >= self.next_scan_ms || self.expiry_in_progress {
            if !self.expiry_in_progress {
                self.next_scan_ms = now + self.settings.scan_interval_ms;
            }
            // A mass expiry is spread over several iterations so lookups keep flowing.
            let (to_close, more) = self.processor.expire_silent_brokers(now, EXPIRY_CHUNK);
            self.expiry_in_progress = more;
            for key in to_close {
                if let Some(c) = self.conns.get(key) {
                    self.expired_conns.push_back((key, c.generation));
                }
            }
        }
        // Expired brokers' connections are closed a few per iteration (each close is a
        // syscall or two; ten thousand at once would stall everyone else).
        for _ in 0..EXPIRY_CHUNK {
            let Some((key, generation)) = self.expired_conns.pop_front() else {
                break;
            };
            if self
                .conns
                .get(key)
                .is_some_and(|c| c.generation == generation)
            {
                self.close(key, "broker expired");
            }
        }
        if !self.idle.is_empty() {
            let mut fired = Vec::new();
            self.idle.pop_due(now, usize::MAX, |_, k| fired.push(k));
            for (key, generation) in fired {
                let Some(c) = self.conns.get(key) else {
                    continue;
                };
                if c.generation != generation {
                    continue;
                }
                if self.settings.idle_ms == 0 {
                    continue;
                }
                let deadline = c.last_active_ms + self.settings.idle_ms;
                if deadline <= now {
                    info!(
                        "closing connection from {}: idle for {} ms (serverChannelMaxIdleTimeSeconds)",
                        c.peer,
                        now - c.last_active_ms
                    );
                    self.close(key, "idle");
                } else {
                    self.idle.schedule(deadline, (key, generation));
                }
            }
        }
    }
}

/// Requests only brokers send: a connection opening with one of these is scheduled as a
/// broker's.
fn is_broker_request(code: i32) -> bool {
    matches!(
        code,
        request::REGISTER_BROKER
            | request::UNREGISTER_BROKER
            | request::BROKER_HEARTBEAT
            | request::QUERY_DATA_VERSION
            | request::REGISTER_TOPIC_IN_NAMESRV
    )
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

/// Runs the processor on one request, containing a panic (a bug, never expected) to that
/// request: it is logged and the caller closes the connection, and the server keeps serving
/// everyone else.
fn handle_guarded(
    processor: &mut Processor,
    ctx: &RequestContext,
    counters: &ServerCounters,
    cmd: &RemotingCommand,
    out: &mut Vec<u8>,
) -> Option<crate::processor::Effects> {
    let mark = out.len();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        processor.handle(ctx, counters, cmd, out)
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

/// A server running on its own thread (tests, embedding).
pub struct ServerHandle {
    addr: SocketAddr,
    stop: StopHandle,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl ServerHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
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
    start_server(Server::bind(config)?)
}

/// Like [`start`] with a given KV store.
pub fn start_with_kv(config: NamesrvConfig, kv: KvStore) -> Result<ServerHandle, StartError> {
    start_server(Server::bind_with_kv(config, kv)?)
}

fn start_server(server: Server) -> Result<ServerHandle, StartError> {
    let addr = server.local_addr();
    let stop = server.stop_handle();
    let thread = std::thread::Builder::new()
        .name("event-loop".into())
        .spawn(move || server.run())?;
    Ok(ServerHandle {
        addr,
        stop,
        thread: Some(thread),
    })
}
