//! The load engine: one thread, one mio `Poll`, many non-blocking connections, each keeping up
//! to `depth` requests in flight. Frames are prepared before the timed loop and written with an
//! opaque; answers are matched to their request by opaque ([`InFlight`]), so a server that
//! answers out of order (Java's thread pools do) is measured correctly.
//!
//! Connections belong to classes, each with its own statistics and optional target rate. A
//! rate-limited class is open-loop: request `i` is due at `start + i / rate`, and when no
//! connection has a free slot then (the server is behind) its latency counts from when it was
//! due, so a slow server cannot hide its queueing (coordinated omission). Unlimited classes
//! refill a connection as soon as an answer frees a slot.

use crate::args::Options;
use crate::hist::Histogram;
use crate::report::sample_proc;
use crate::transport::{Tls, Transport};
use bytes::BytesMut;
use mio::{Events, Interest, Poll, Token};
use rmq_namesrv::remoting::command::{
    DecodeLimits, FrameTemplate, Header, RemotingCommand, SerializeType,
};
use rmq_namesrv::remoting::frame::next_frame;
use rmq_namesrv::request::Encoded;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Default)]
pub struct ClassStats {
    pub ops: u64,
    pub hist: Histogram,
    /// Responses with a non-zero code, by code (expected codes excluded).
    pub errors_by_code: BTreeMap<i32, u64>,
    /// Responses with an expected non-success code (e.g. TOPIC_NOT_EXIST while expiring).
    pub expected_by_code: BTreeMap<i32, u64>,
    /// Connections the server closed with requests outstanding, or unexpectedly.
    pub closed: u64,
    /// Requests lost with a closed connection or never answered.
    pub lost: u64,
    /// Responses whose header could not be read or whose opaque matched nothing.
    pub bad_frames: u64,
    pub bytes_tx: u64,
    pub bytes_rx: u64,
}

impl ClassStats {
    pub fn errors(&self) -> u64 {
        let failures = self.failures().iter().map(|(_, n)| n).sum::<u64>();
        self.errors_by_code.values().sum::<u64>() + failures
    }

    /// The errors that are not answers, by their report name.
    pub fn failures(&self) -> [(&'static str, u64); 3] {
        [
            ("connections_closed", self.closed),
            ("unanswered", self.lost),
            ("bad_frames", self.bad_frames),
        ]
    }
}

/// A group of connections doing the same kind of request.
#[derive(Default)]
pub struct Class {
    pub name: String,
    /// Target ops/s for the whole class; `None` = as fast as the server answers.
    pub rate: Option<f64>,
    /// Response codes that are part of the workload rather than errors.
    pub expected_codes: Vec<i32>,
    /// The server closing these connections is part of the workload (broker expiry).
    pub closes_expected: bool,
    conns: Vec<usize>,
    rr: usize,
    next_due_ns: f64,
    blocked_since_ns: Option<u64>,
    pub stats: ClassStats,
    /// The statistics at the last progress line: the difference is the last second's.
    last_tick: ClassStats,
}

/// One frame: the library's header template and the body.
pub struct Template {
    head: FrameTemplate,
    body: Vec<u8>,
}

impl Template {
    pub fn new(st: SerializeType, request: &Encoded<'_>, version: i32) -> Self {
        Template::with_flag(st, request, version, 0)
    }

    /// `canned`'s reply: SUCCESS with `body_bytes` of body.
    pub fn success(st: SerializeType, body_bytes: usize) -> Self {
        let mut reply = Encoded::new(0);
        reply.body = vec![b'x'; body_bytes].into();
        Template::with_flag(st, &reply, 479, 1)
    }

    fn with_flag(st: SerializeType, e: &Encoded<'_>, version: i32, flag: i32) -> Self {
        let header = Header {
            code: e.code,
            language: "JAVA",
            version,
            opaque: 0,
            flag,
            remark: None,
        };
        Template {
            head: FrameTemplate::new(st, &header, Some(e.pairs())),
            body: e.body.to_vec(),
        }
    }

    pub fn write_to(&self, out: &mut Vec<u8>, opaque: i32) {
        self.head
            .write_with_body(out, opaque, |out| out.extend_from_slice(&self.body));
    }
}

/// The requests in flight on one connection, by opaque: an answer finds its request whatever
/// the order of answers, and a stray or repeated answer finds nothing.
struct InFlight {
    depth: usize,
    last_opaque: i32,
    /// Opaque -> (template, start in ns).
    requests: HashMap<i32, (u32, u64), foldhash::fast::RandomState>,
}

impl InFlight {
    fn new(depth: usize) -> InFlight {
        let depth = depth.max(1);
        InFlight {
            depth,
            last_opaque: 0,
            // Twice the depth: a table at most half full rehashes its tombstones in place, so
            // inserting and removing never allocates once the run has started.
            requests: HashMap::with_capacity_and_hasher(2 * depth, Default::default()),
        }
    }

    fn is_full(&self) -> bool {
        self.requests.len() >= self.depth
    }

    /// Registers a request of `template` if the depth allows; returns its opaque.
    fn insert(&mut self, template: u32, start_ns: u64) -> Option<i32> {
        if self.is_full() {
            return None;
        }
        self.last_opaque = self.last_opaque.wrapping_add(1) & i32::MAX;
        self.requests.insert(self.last_opaque, (template, start_ns));
        Some(self.last_opaque)
    }

    /// Forgets every request in flight; returns how many there were.
    fn clear(&mut self) -> usize {
        let n = self.requests.len();
        self.requests.clear();
        n
    }
}

struct Conn {
    stream: Transport,
    peer: SocketAddr,
    class: usize,
    /// Template ids this connection cycles through.
    plan: Rc<[u32]>,
    cursor: usize,
    sent_in_phase: usize,
    in_flight: InFlight,
    out: Vec<u8>,
    out_pos: usize,
    inb: BytesMut,
    open: bool,
    active: bool,
}

/// How long to wait for the requests in flight once a phase stops sending.
const DRAIN: Duration = Duration::from_secs(10);

/// Observes responses during a phase (the expire workload watches routes disappear).
pub trait Watch {
    /// An answer to a request of `template`.
    fn on_response(&mut self, _template: u32, _answer: &RemotingCommand) {}
    /// Ends the phase before its time.
    fn finished(&self) -> bool {
        false
    }
    /// Extra text for the progress line.
    fn progress(&self) -> String {
        String::new()
    }
    /// Writes the request planned as `template` itself when it depends on earlier answers (the
    /// controller's 1001 carries the last announced epoch); false: the template is sent.
    fn write_request(&mut self, _template: u32, _opaque: i32, _out: &mut Vec<u8>) -> bool {
        false
    }
}

pub struct NoWatch;
impl Watch for NoWatch {}

#[derive(Clone)]
pub struct PhaseResult {
    pub name: String,
    pub elapsed: Duration,
    pub classes: Vec<(String, ClassStats)>,
    /// The stop flag ended this phase before its time.
    pub interrupted: bool,
    /// The server's CPU seconds over the phase (`--pid`).
    pub server_cpu_s: Option<f64>,
    /// Every connection of the phase was closed, which ended it: the servers they went to.
    pub all_closed: Option<String>,
}

pub struct Engine {
    poll: Poll,
    events: Events,
    conns: Vec<Conn>,
    pub templates: Vec<Template>,
    pub classes: Vec<Class>,
    epoch: Instant,
    progress: bool,
    dirty: Vec<usize>,
    /// Every read lands here first, then in its connection's buffer.
    read_chunk: Vec<u8>,
    /// Raised from outside (a signal handler) to end the current phase early.
    stop: Arc<AtomicBool>,
    /// `--pid`: the server whose CPU time each phase reports.
    server_pid: Option<u32>,
    /// `--tls`: connections are made over TLS.
    pub tls: Option<Tls>,
}

/// The running phase: its connections and clock.
struct Phase {
    conns: Vec<usize>,
    /// The phase ends once every connection has sent each request of its plan once.
    once: bool,
    hard_end: Instant,
    next_tick: Instant,
    draining: Option<Instant>,
}

impl Engine {
    /// An engine printing progress unless `--quiet`, sampling the server of `--pid`.
    pub fn new(o: &Options, stop: Arc<AtomicBool>) -> io::Result<Engine> {
        Ok(Engine {
            poll: Poll::new()?,
            events: Events::with_capacity(4096),
            conns: Vec::new(),
            templates: Vec::new(),
            classes: Vec::new(),
            epoch: Instant::now(),
            progress: !o.quiet,
            dirty: Vec::new(),
            read_chunk: vec![0; 64 * 1024],
            stop,
            server_pid: o.pid,
            tls: None,
        })
    }

    /// Ctrl-C: phases end at once, later ones do not start.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub fn add_template(&mut self, t: Template) -> u32 {
        self.templates.push(t);
        (self.templates.len() - 1) as u32
    }

    pub fn add_class(&mut self, name: &str, rate: Option<f64>) -> usize {
        self.classes.push(Class {
            name: name.to_string(),
            rate,
            ..Class::default()
        });
        self.classes.len() - 1
    }

    /// Opens a connection for `class` that cycles through `plan` starting at `start`.
    pub fn connect(
        &mut self,
        addr: SocketAddr,
        class: usize,
        plan: Rc<[u32]>,
        start: usize,
        depth: usize,
    ) -> Result<(), String> {
        let idx = self.conns.len();
        let open = || -> io::Result<Transport> {
            let timeout = Duration::from_secs(10);
            let stream = std::net::TcpStream::connect_timeout(&addr, timeout)?;
            stream.set_nodelay(true)?;
            let mut stream = Transport::open(stream, addr, self.tls.as_ref(), timeout)?;
            let interest = Interest::READABLE | Interest::WRITABLE;
            self.poll
                .registry()
                .register(&mut stream, Token(idx), interest)?;
            Ok(stream)
        };
        let stream = open().map_err(|e| format!("connect to {addr}: {e}"))?;
        self.conns.push(Conn {
            stream,
            peer: addr,
            class,
            cursor: start % plan.len().max(1),
            plan,
            sent_in_phase: 0,
            in_flight: InFlight::new(depth),
            out: Vec::with_capacity(64 * 1024),
            out_pos: 0,
            inb: BytesMut::new(),
            open: true,
            active: false,
        });
        self.classes[class].conns.push(idx);
        Ok(())
    }

    /// Gives the `i`-th connection of `class` a new plan (e.g. churned bodies after setup).
    pub fn replan(&mut self, class: usize, mut plan_of: impl FnMut(usize) -> Rc<[u32]>) {
        for (i, &ci) in self.classes[class].conns.iter().enumerate() {
            (self.conns[ci].plan, self.conns[ci].cursor) = (plan_of(i), 0);
        }
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Queues one request on connection `ci`, latency counted from `start_ns`.
    #[inline]
    fn send_one(&mut self, ci: usize, start_ns: u64, watch: &mut dyn Watch) {
        let c = &mut self.conns[ci];
        let tid = c.plan[c.cursor];
        c.cursor = (c.cursor + 1) % c.plan.len();
        c.sent_in_phase += 1;
        if let Some(opaque) = c.in_flight.insert(tid, start_ns) {
            if !watch.write_request(tid, opaque, &mut c.out) {
                self.templates[tid as usize].write_to(&mut c.out, opaque);
            }
        }
    }

    fn can_send(&self, ci: usize, once: bool) -> bool {
        let c = &self.conns[ci];
        c.open
            && c.active
            && !c.in_flight.is_full()
            && !c.plan.is_empty()
            && (!once || c.sent_in_phase < c.plan.len())
    }

    /// Fills an unlimited connection up to its depth and writes.
    fn fill(&mut self, ci: usize, once: bool, watch: &mut dyn Watch) {
        if self.classes[self.conns[ci].class].rate.is_some() || !self.can_send(ci, once) {
            return;
        }
        let now = self.now_ns();
        while self.can_send(ci, once) {
            self.send_one(ci, now, watch);
        }
        self.flush(ci);
    }

    fn flush(&mut self, ci: usize) {
        let c = &mut self.conns[ci];
        if !c.open {
            return;
        }
        while c.out_pos < c.out.len() {
            match c.stream.write(&c.out[c.out_pos..]) {
                Ok(0) => break,
                Ok(n) => {
                    c.out_pos += n;
                    self.classes[c.class].stats.bytes_tx += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return self.close(ci),
            }
        }
        c.out.clear();
        c.out_pos = 0;
        // TLS: ciphertext the socket did not take goes now (or on the next writable event).
        match c.stream.flush() {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => self.close(ci),
            _ => {}
        }
    }

    fn close(&mut self, ci: usize) {
        let c = &mut self.conns[ci];
        if !c.open {
            return;
        }
        c.open = false;
        let _ = self.poll.registry().deregister(&mut c.stream);
        let lost = c.in_flight.clear() as u64;
        let class = &mut self.classes[c.class];
        if !class.closes_expected || lost > 0 {
            class.stats.closed += 1;
        }
        class.stats.lost += lost;
    }

    fn on_readable(&mut self, ci: usize, watch: &mut dyn Watch) {
        loop {
            let c = &mut self.conns[ci];
            if !c.open {
                return;
            }
            match c.stream.read(&mut self.read_chunk) {
                Ok(0) => {
                    self.handle_frames(ci, watch);
                    return self.close(ci);
                }
                Ok(n) => {
                    c.inb.extend_from_slice(&self.read_chunk[..n]);
                    self.classes[c.class].stats.bytes_rx += n as u64;
                    self.handle_frames(ci, watch);
                    // A short read emptied the socket; data arriving later raises a new
                    // edge, so the read that would only say WouldBlock can be skipped (one
                    // syscall per response saved at depth 1).
                    if n < self.read_chunk.len() {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return self.close(ci),
            }
        }
    }

    fn handle_frames(&mut self, ci: usize, watch: &mut dyn Watch) {
        let now_ns = self.now_ns();
        let c = &mut self.conns[ci];
        let class = &mut self.classes[c.class];
        loop {
            let frame = match next_frame(&mut c.inb, u32::MAX) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(_) => {
                    class.stats.bad_frames += 1;
                    return self.close(ci);
                }
            };
            let Ok(head) = RemotingCommand::decode(frame, &DecodeLimits::default()) else {
                class.stats.bad_frames += 1;
                continue;
            };
            if !head.is_response() {
                continue; // a request from the server (e.g. NOTIFY_MIN_BROKER_ID_CHANGE)
            }
            let Some((template, start_ns)) = c.in_flight.requests.remove(&head.opaque) else {
                class.stats.bad_frames += 1;
                continue;
            };
            class.stats.ops += 1;
            class.stats.hist.record(now_ns.saturating_sub(start_ns));
            if head.code != 0 {
                if class.expected_codes.contains(&head.code) {
                    *class.stats.expected_by_code.entry(head.code).or_default() += 1;
                } else {
                    *class.stats.errors_by_code.entry(head.code).or_default() += 1;
                }
            }
            watch.on_response(template, &head);
        }
        if !c.in_flight.is_full() {
            self.dirty.push(ci);
        }
    }

    /// Sends what rate-limited classes owe by now.
    fn pace(&mut self, classes: &[usize], once: bool, watch: &mut dyn Watch) {
        let now = self.now_ns();
        for &k in classes {
            let Some(rate) = self.classes[k].rate else {
                continue;
            };
            let interval = 1e9 / rate.max(1e-9);
            while self.classes[k].next_due_ns <= now as f64 {
                let (conns, n) = (&self.classes[k].conns, self.classes[k].conns.len());
                let mut ring = (0..n).map(|i| (self.classes[k].rr + i) % n);
                let Some(rr) = ring.find(|&rr| self.can_send(conns[rr], once)) else {
                    // Every connection is full: the server is behind. Requests owed from
                    // now on count their latency from when they were due (or from now,
                    // whichever is later: our own timer slack is not the server's fault).
                    let class = &mut self.classes[k];
                    class.blocked_since_ns.get_or_insert(now);
                    break;
                };
                let ci = conns[rr];
                let class = &mut self.classes[k];
                class.rr = (rr + 1) % n;
                let start = match class.blocked_since_ns {
                    Some(b) => b.max(class.next_due_ns as u64),
                    None => now,
                };
                class.next_due_ns += interval;
                self.send_one(ci, start, watch);
                self.dirty.push(ci);
            }
            let class = &mut self.classes[k];
            if class.next_due_ns > now as f64 {
                class.blocked_since_ns = None;
            }
        }
    }

    fn next_due_in(&self, classes: &[usize]) -> Option<Duration> {
        let now = self.now_ns() as f64;
        let paced = classes.iter().map(|&k| &self.classes[k]);
        // A blocked class waits for a response, not for the clock.
        let waiting = paced.filter(|c| c.rate.is_some() && c.blocked_since_ns.is_none());
        let due = waiting.map(|c| Duration::from_nanos((c.next_due_ns - now).max(0.0) as u64));
        due.min()
    }

    /// One line per second: each class's throughput, p99 and errors over the last second.
    fn print_progress(&mut self, phase: &str, t: f64, classes: &[usize], watch: &dyn Watch) {
        let mut line = format!("[{phase} {t:6.1}s]");
        for &k in classes {
            let c = &mut self.classes[k];
            let (now, then) = (&c.stats, &c.last_tick);
            let ops = now.ops - then.ops;
            let errors = now.errors() - then.errors();
            let p99_us = now.hist.percentile_since(&then.hist, 99.0) as f64 / 1000.0;
            c.last_tick.clone_from(&c.stats);
            let name = &c.name;
            line += &format!("  {name} {ops} ops/s, p99 {p99_us:.0} us, {errors} errors");
        }
        line.push_str(&watch.progress());
        eprintln!("{line}");
    }

    /// When the phase has connections and the servers closed all of them: those servers.
    fn all_closed(&self, phase: &Phase) -> Option<String> {
        let mut conns = phase.conns.iter().map(|&ci| &self.conns[ci]);
        let closed = !phase.conns.is_empty() && conns.all(|c| !c.open);
        closed.then(|| {
            let peers = phase
                .conns
                .iter()
                .map(|&ci| self.conns[ci].peer.to_string());
            peers
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
                .join(";")
        })
    }

    fn phase_over(&self, phase: &Phase, watch: &dyn Watch, now: Instant) -> bool {
        now >= phase.hard_end
            || self.stopped()
            || watch.finished()
            || self.all_closed(phase).is_some()
            || phase.once
                && phase.conns.iter().all(|&ci| {
                    let c = &self.conns[ci];
                    !c.open || c.sent_in_phase >= c.plan.len()
                })
    }

    fn send_due(&mut self, classes: &[usize], once: bool, sending: bool, watch: &mut dyn Watch) {
        if sending {
            self.pace(classes, once, watch);
        }
        let dirty = std::mem::take(&mut self.dirty);
        for &ci in &dirty {
            if sending {
                self.fill(ci, once, watch);
            }
            self.flush(ci);
        }
        self.dirty = dirty;
        self.dirty.clear();
    }

    /// How long the next poll may wait: the next tick, pacing deadline, phase or drain end.
    fn poll_timeout(&self, classes: &[usize], phase: &Phase, now: Instant) -> Duration {
        let end = phase.draining.map_or(phase.hard_end, |d| d + DRAIN);
        let timeout = phase.next_tick.min(end).saturating_duration_since(now);
        let due = self
            .next_due_in(classes)
            .filter(|_| phase.draining.is_none());
        due.map_or(timeout, |d| d.min(timeout))
    }

    /// Waits for socket events and handles them; false when polling failed for good.
    fn poll_and_dispatch(&mut self, timeout: Duration, watch: &mut dyn Watch) -> bool {
        if let Err(e) = self.poll.poll(&mut self.events, Some(timeout)) {
            if e.kind() != io::ErrorKind::Interrupted {
                eprintln!("rmq-bench: poll failed: {e}");
                return false;
            }
        }
        // Taken out for the walk (handling an event needs `self`); an empty `Events` is free.
        let events = std::mem::replace(&mut self.events, Events::with_capacity(0));
        let n = self.conns.len();
        for e in events.iter().filter(|e| e.token().0 < n) {
            if e.is_writable() {
                self.flush(e.token().0);
            }
            if e.is_readable() || e.is_read_closed() || e.is_error() {
                self.on_readable(e.token().0, watch);
            }
        }
        self.events = events;
        true
    }

    /// Runs one phase from zeroed statistics until `limit`, the watch, or (`once`) every plan
    /// sent once ends it, and drains it; what is still in flight after the drain is unanswered.
    pub fn run_phase(
        &mut self,
        name: &str,
        classes: &[usize],
        (limit, once): (Duration, bool),
        watch: &mut dyn Watch,
    ) -> PhaseResult {
        let server_cpu = |pid: Option<u32>| Some(sample_proc(&pid?.to_string())?.cpu_s);
        let cpu_before = server_cpu(self.server_pid);
        let started = Instant::now();
        let start_ns = self.now_ns() as f64;
        for &k in classes {
            let c = &mut self.classes[k];
            (c.stats, c.last_tick) = Default::default();
            c.next_due_ns = start_ns;
            c.blocked_since_ns = None;
        }
        let mut phase = Phase {
            conns: classes
                .iter()
                .flat_map(|&k| self.classes[k].conns.clone())
                .collect(),
            once,
            hard_end: started + limit,
            next_tick: started + Duration::from_secs(1),
            draining: None,
        };
        for &ci in &phase.conns {
            (self.conns[ci].active, self.conns[ci].sent_in_phase) = (true, 0);
            self.fill(ci, once, watch);
        }
        loop {
            let now = Instant::now();
            if phase.draining.is_none() && self.phase_over(&phase, &*watch, now) {
                phase
                    .conns
                    .iter()
                    .for_each(|&ci| self.conns[ci].active = false);
                phase.draining = Some(now);
            }
            if let Some(d) = phase.draining {
                let conns = phase.conns.iter().map(|&ci| &self.conns[ci]);
                let in_flight = conns.map(|c| c.in_flight.requests.len());
                if in_flight.sum::<usize>() == 0 || now >= d + DRAIN {
                    break;
                }
            }
            self.send_due(classes, once, phase.draining.is_none(), watch);
            if now >= phase.next_tick {
                if self.progress {
                    let t = (now - started).as_secs_f64();
                    self.print_progress(name, t, classes, &*watch);
                }
                phase.next_tick += Duration::from_secs(1);
            }
            let timeout = self.poll_timeout(classes, &phase, now);
            if !self.poll_and_dispatch(timeout, watch) {
                break;
            }
        }
        for &ci in &phase.conns {
            let c = &mut self.conns[ci];
            self.classes[c.class].stats.lost += c.in_flight.clear() as u64;
        }
        let stats = classes.iter().map(|&k| &self.classes[k]);
        let stats = stats.map(|c| (c.name.clone(), c.stats.clone())).collect();
        PhaseResult {
            name: name.to_string(),
            elapsed: started.elapsed(),
            classes: stats,
            interrupted: self.stopped(),
            server_cpu_s: cpu_before
                .zip(server_cpu(self.server_pid))
                .map(|(b, a)| a - b),
            all_closed: self.all_closed(&phase),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use rmq_namesrv::remoting::command::encode_frame;
    use rmq_namesrv::request::field;
    use std::net::TcpListener;

    fn decode(frame: &[u8]) -> RemotingCommand {
        RemotingCommand::decode(Bytes::copy_from_slice(frame), &DecodeLimits::default()).unwrap()
    }

    #[test]
    fn templates_write_frames_that_decode_with_their_opaque() {
        // A field value that looks like the opaque must not be taken for it.
        let mut request = Encoded::new(105);
        request.put(field::TOPIC, ",\"opaque\":0,");
        request.body = b",\"opaque\":0,".as_slice().into();
        for st in [SerializeType::Json, SerializeType::RocketMq] {
            let t = Template::new(st, &request, 479);
            for opaque in [0, 7, 123_456_789, i32::MAX] {
                let mut out = vec![9u8; 3];
                t.write_to(&mut out, opaque);
                let cmd = decode(&out[7..]);
                assert_eq!((cmd.code, cmd.opaque), (105, opaque));
                assert_eq!(cmd.ext(field::TOPIC), Some(",\"opaque\":0,"));
                assert_eq!(&cmd.body[..], b",\"opaque\":0,");
            }
        }
    }

    #[test]
    fn answers_find_their_request_in_any_order() {
        let mut f = InFlight::new(3);
        let a = f.insert(10, 1).unwrap();
        let b = f.insert(11, 2).unwrap();
        let c = f.insert(12, 3).unwrap();
        assert!(f.is_full() && f.insert(13, 4).is_none());
        assert_eq!(f.requests.remove(&c).map(|s| s.0), Some(12));
        assert!(f.requests.remove(&c).is_none(), "an answer is taken once");
        let d = f.insert(13, 5).unwrap();
        assert_ne!(d, c, "a new request gets a new opaque");
        assert!(f.requests.remove(&c).is_none());
        assert_eq!(f.requests.remove(&a).map(|s| s.0), Some(10));
        assert_eq!(f.requests.remove(&d), Some((13, 5)));
        assert_eq!(f.requests.len(), 1);
        assert_eq!(f.clear(), 1);
        assert!(f.requests.remove(&b).is_none());
        assert_eq!(f.requests.len(), 0);
    }

    fn answer(out: &mut Vec<u8>, request: &RemotingCommand) {
        let header = Header {
            code: 0,
            language: "JAVA",
            version: 479,
            opaque: request.opaque,
            flag: 1,
            remark: None,
        };
        let no_ext: [(&str, &str); 0] = [];
        encode_frame(out, request.serialize_type, &header, Some(no_ext), b"");
    }

    /// Answers `total` requests, holding one back until six later ones are answered (or the
    /// last one came), then the next one, and so on.
    fn reordering_server(total: usize) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let (mut buf, mut chunk) = (bytes::BytesMut::new(), [0u8; 4096]);
            let (mut held, mut seen) = (None, 0);
            while let Ok(n @ 1..) = s.read(&mut chunk) {
                buf.extend_from_slice(&chunk[..n]);
                let mut out = Vec::new();
                while let Ok(Some(f)) = next_frame(&mut buf, 1 << 20) {
                    let request = RemotingCommand::decode(f, &DecodeLimits::default()).unwrap();
                    seen += 1;
                    if held.is_none() && seen < total {
                        held = Some((request, 0));
                        continue;
                    }
                    answer(&mut out, &request);
                    if let Some((h, later)) = &mut held {
                        *later += 1;
                        if *later == 6 || seen == total {
                            answer(&mut out, h);
                            held = None;
                        }
                    }
                }
                s.write_all(&out).unwrap();
            }
        });
        addr
    }

    #[test]
    fn a_server_answering_out_of_order_is_measured_without_errors() {
        let o = crate::args::parse(
            &["route".into(), "-n".into(), "h:1".into(), "-q".into()],
            None,
        );
        let mut engine = Engine::new(&o.unwrap(), Arc::new(AtomicBool::new(false))).unwrap();
        let request = Encoded::new(105);
        let t = engine.add_template(Template::new(SerializeType::Json, &request, 479));
        let class = engine.add_class("route", None);
        engine
            .connect(reordering_server(40), class, vec![t; 40].into(), 0, 4)
            .unwrap();
        let until = (Duration::from_secs(20), true);
        let result = engine.run_phase("main", &[class], until, &mut NoWatch);
        let stats = &result.classes[0].1;
        assert_eq!((stats.ops, stats.errors()), (40, 0));
    }
}
