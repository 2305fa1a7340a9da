//! `rmq-bench controller`: load on a RocketMQ controller (rmq-namesrv's embedded one, or any
//! other), over the real wire protocol, and the failover time seen by brokers.
//!
//! Throughput: N broker sets of two brokers are set up through the controller (ids applied,
//! both registered, heartbeats with a long timeout so both stay alive, id 1 elected, both in
//! the SyncStateSet), then three timed phases run one after the other, each on `--clients`
//! connections keeping `--depth` requests in flight (every in-flight request of a connection
//! is for a different set, so 1001's epochs can be tracked per set):
//! 1012 GET_NEXT_BROKER_ID (a read), 1003 REGISTER_BROKER with an unchanged address (nothing
//! to log) and 1001 ALTER_SYNC_STATE_SET alternating {1,2} and {1} (one logged event, one
//! fsync each). The sets are cleaned (1011) at the end. `--pid` samples the server's RSS
//! before the setup, after it and at the end, and its CPU time per phase.
//!
//! Failover (`--failover crash|hang`): per round, a master and a slave register through the
//! controller and with the name servers of `-n` as RocketMQ 5 brokers do; the master then dies
//! (its connections close) or hangs (heartbeats stop); the time until the slave receives 1008
//! and until the name server routes it as id 0 is measured.
//!
//! This module uses blocking connections on threads, not the engine: 1001 is stateful per
//! set, and failover needs listeners and role changes. Frames are decoded with the library's
//! decoder, so the generator costs more per request than the engine's workloads: compare
//! with the server's CPU (`--pid`) before calling a number the server's ceiling.

use crate::args::{Failover, Options};
use crate::hist::Histogram;
use crate::report::{sample_proc, thousands, ProcSample};
use bytes::BytesMut;
use rmq_namesrv::client::api::{BrokerIdentity, RegisterOptions};
use rmq_namesrv::client::Client;
use rmq_namesrv::remoting::codes::version;
use rmq_namesrv::remoting::command::{
    encode_frame, DecodeLimits, Header, RemotingCommand, SerializeType,
};
use rmq_namesrv::remoting::frame;
use rmq_namesrv::remoting::json::{self, Value};
use rmq_namesrv::route::model::{DataVersion, RegisterBody, TopicConfig};
use std::collections::VecDeque;
use std::io::{ErrorKind, Read};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const CLUSTER: &str = "ControllerBench";
/// Heartbeat timeout of the throughput sets' brokers: alive for the whole run.
const LONG_TIMEOUT_MS: &str = "3600000";
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

fn millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One request frame (JSON header, as Java peers send).
fn frame_of(code: i32, opaque: i32, flag: i32, ext: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(160 + body.len());
    let header = Header {
        code,
        language: "JAVA",
        version: version::CURRENT,
        opaque,
        flag,
        remark: None,
    };
    encode_frame(
        &mut out,
        SerializeType::Json,
        &header,
        Some(ext.iter().copied()),
        body,
    );
    out
}

fn call(
    c: &mut Client,
    code: i32,
    ext: &[(&str, &str)],
    body: &[u8],
) -> Result<RemotingCommand, String> {
    c.request(code, ext, body)
        .map_err(|e| format!("request {code}: {e}"))
}

/// SUCCESS, else the code and remark.
fn expect_ok(resp: RemotingCommand, what: &str) -> Result<RemotingCommand, String> {
    if resp.code == 0 {
        Ok(resp)
    } else {
        Err(format!("{what}: answered {} {:?}", resp.code, resp.remark))
    }
}

fn ext_i64(resp: &RemotingCommand, key: &str) -> Option<i64> {
    resp.ext(key).and_then(|v| v.parse().ok())
}

/// Runs the workload; returns the text (or JSON) to print.
pub fn run(o: &Options, stop: &AtomicBool) -> Result<String, String> {
    let controller = o.controller.clone().unwrap_or_default();
    match o.failover {
        Some(mode) => failover(o, &controller, mode, stop),
        None => throughput(o, &controller, stop),
    }
}

// ------------------------------------------------------------------ throughput

/// A set of the throughput run: its name and where its SyncStateSet stands.
#[derive(Clone)]
struct Set {
    name: String,
    master_epoch: i64,
    sync_state_set_epoch: i64,
    /// Whether the set is {1,2} now (else {1}).
    wide: bool,
}

fn set_names(o: &Options) -> Vec<String> {
    let tag = if o.tag.is_empty() {
        format!("{}-{}", std::process::id(), millis() % 1_000_000)
    } else {
        o.tag.clone()
    };
    (0..o.brokers).map(|i| format!("cb-{tag}-{i}")).collect()
}

/// A made-up address per broker (the controller only stores it; nobody connects).
fn broker_addr(set: usize, id: i64) -> String {
    let port = 30901 + 10 * id;
    format!(
        "10.{}.{}.{}:{port}",
        (set >> 16) & 255,
        (set >> 8) & 255,
        set & 255
    )
}

/// 1013 + 1003 for ids 1 and 2, 1002 for id 1, heartbeats, 1001 to {1,2}. The heartbeats come
/// after the election so that nobody is active then and no 1008 goes to the made-up
/// addresses (as the controller notifies only active members).
fn set_up(c: &mut Client, name: &str, index: usize) -> Result<Set, String> {
    let base = [("clusterName", CLUSTER), ("brokerName", name)];
    for id in [1i64, 2] {
        let (id_text, addr) = (id.to_string(), broker_addr(index, id));
        let check = format!("{addr};{}", millis());
        let mut ext = base.to_vec();
        ext.extend([
            ("appliedBrokerId", id_text.as_str()),
            ("registerCheckCode", check.as_str()),
        ]);
        expect_ok(call(c, 1013, &ext, b"")?, "1013")?;
        let mut ext = base.to_vec();
        ext.extend([
            ("brokerId", id_text.as_str()),
            ("brokerAddress", addr.as_str()),
        ]);
        expect_ok(call(c, 1003, &ext, b"")?, "1003")?;
    }
    let mut ext = base.to_vec();
    ext.extend([("brokerId", "1"), ("designateElect", "false")]);
    let elected = expect_ok(call(c, 1002, &ext, b"")?, "1002")?;
    for id in [1i64, 2] {
        let (id_text, addr) = (id.to_string(), broker_addr(index, id));
        let mut ext = base.to_vec();
        ext.extend([
            ("brokerAddr", addr.as_str()),
            ("brokerId", id_text.as_str()),
            ("heartbeatTimeoutMills", LONG_TIMEOUT_MS),
        ]);
        c.oneway(904, &ext, b"").map_err(|e| format!("904: {e}"))?;
    }
    let mut set = Set {
        name: name.to_string(),
        master_epoch: ext_i64(&elected, "masterEpoch").unwrap_or(0),
        sync_state_set_epoch: ext_i64(&elected, "syncStateSetEpoch").unwrap_or(0),
        wide: false,
    };
    let altered = expect_ok(alter(c, &set)?, "1001")?;
    set.sync_state_set_epoch = ext_i64(&altered, "newSyncStateSetEpoch").unwrap_or(0);
    set.wide = true;
    Ok(set)
}

fn alter_frame(set: &Set, opaque: i32) -> Vec<u8> {
    let members = if set.wide { "1" } else { "1,2" };
    let body = format!(
        "{{\"syncStateSet\":[{members}],\"syncStateSetEpoch\":{}}}",
        set.sync_state_set_epoch
    );
    let epoch = set.master_epoch.to_string();
    let invoke = millis().to_string();
    let ext = [
        ("brokerName", set.name.as_str()),
        ("masterBrokerId", "1"),
        ("masterEpoch", epoch.as_str()),
        ("invokeTime", invoke.as_str()),
    ];
    frame_of(1001, opaque, 0, &ext, body.as_bytes())
}

/// One 1001 from {1} to {1,2} or back, blocking.
fn alter(c: &mut Client, set: &Set) -> Result<RemotingCommand, String> {
    c.send_raw(&alter_frame(set, 7))
        .map_err(|e| format!("1001: {e}"))?;
    c.read_response(7).map_err(|e| format!("1001: {e}"))
}

/// What a phase sends for a set and how it takes the answer.
trait Request: Send {
    fn frame(&mut self, set: usize, opaque: i32, out: &mut Vec<u8>);
    /// The answer's code when it is an error (0 = fine).
    fn answer(&mut self, set: usize, resp: &RemotingCommand) -> i32;
}

/// Frames that never change (1012, 1003), encoded once with the set's index as opaque.
struct Fixed(Arc<Vec<Vec<u8>>>);

impl Request for Fixed {
    fn frame(&mut self, set: usize, _opaque: i32, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0[set]);
    }
    fn answer(&mut self, _: usize, resp: &RemotingCommand) -> i32 {
        resp.code
    }
}

/// 1001 back and forth, epochs tracked per set.
struct Alter(Vec<Set>);

impl Request for Alter {
    fn frame(&mut self, set: usize, opaque: i32, out: &mut Vec<u8>) {
        out.extend(alter_frame(&self.0[set], opaque));
    }
    fn answer(&mut self, set: usize, resp: &RemotingCommand) -> i32 {
        if resp.code != 0 {
            return resp.code;
        }
        let s = &mut self.0[set];
        s.sync_state_set_epoch = ext_i64(resp, "newSyncStateSetEpoch").unwrap_or(0);
        s.wide = !s.wide;
        0
    }
}

/// What one connection measured in a phase.
#[derive(Default)]
struct ConnStats {
    ops: u64,
    errors: Vec<(i32, u64)>,
    hist: Histogram,
    failure: Option<String>,
}

/// Keeps `depth` requests (for distinct sets) in flight on one connection until `until`.
fn drive(
    addr: &str,
    sets: &[usize],
    depth: usize,
    until: Instant,
    stop: &AtomicBool,
    req: &mut dyn Request,
) -> ConnStats {
    let mut stats = ConnStats::default();
    let mut c = match Client::connect(addr, CALL_TIMEOUT) {
        Ok(c) => c,
        Err(e) => {
            stats.failure = Some(format!("connect to {addr}: {e}"));
            return stats;
        }
    };
    let window = depth.min(sets.len()).max(1);
    let mut in_flight: VecDeque<(usize, Instant)> = VecDeque::with_capacity(window);
    let mut next = 0usize;
    let mut buf = Vec::with_capacity(window * 256);
    loop {
        let sending = Instant::now() < until && !stop.load(Ordering::Relaxed);
        buf.clear();
        while sending && in_flight.len() < window {
            let set = sets[next % sets.len()];
            next += 1;
            req.frame(set, set as i32, &mut buf);
            in_flight.push_back((set, Instant::now()));
        }
        if !buf.is_empty() {
            if let Err(e) = c.send_raw(&buf) {
                stats.failure = Some(format!("send: {e}"));
                return stats;
            }
        }
        let Some((set, sent)) = in_flight.pop_front() else {
            return stats;
        };
        match c.read_response(set as i32) {
            Ok(resp) => {
                stats.hist.record(sent.elapsed().as_micros() as u64);
                stats.ops += 1;
                let code = req.answer(set, &resp);
                if code != 0 {
                    count_error(&mut stats.errors, code, 1);
                }
            }
            Err(e) => {
                stats.failure = Some(format!("answer: {e}"));
                return stats;
            }
        }
    }
}

/// Adds `n` answers with error `code` to the per-code counts.
fn count_error(errors: &mut Vec<(i32, u64)>, code: i32, n: u64) {
    match errors.iter_mut().find(|(c, _)| *c == code) {
        Some((_, m)) => *m += n,
        None => errors.push((code, n)),
    }
}

/// One phase's result.
struct PhaseResult {
    name: &'static str,
    ops: u64,
    wall: Duration,
    hist: Histogram,
    errors: Vec<(i32, u64)>,
    failures: Vec<String>,
    server_cpu_s: Option<f64>,
}

impl PhaseResult {
    fn ops_per_s(&self) -> f64 {
        self.ops as f64 / self.wall.as_secs_f64().max(1e-9)
    }
}

/// Runs `make(connection)`'s requests on every connection for the duration.
fn phase(
    o: &Options,
    addr: &str,
    name: &'static str,
    stop: &AtomicBool,
    make: impl Fn(usize) -> Box<dyn Request>,
) -> PhaseResult {
    let k = o.clients.min(o.brokers).max(1);
    let depth = o.depth.unwrap_or(16);
    let cpu_before = server_sample(o);
    let started = Instant::now();
    let until = started + o.duration;
    let results: Vec<ConnStats> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..k)
            .map(|c| {
                let sets: Vec<usize> = (c..o.brokers).step_by(k).collect();
                let mut req = make(c);
                scope.spawn(move || drive(addr, &sets, depth, until, stop, req.as_mut()))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let wall = started.elapsed();
    let cpu_after = server_sample(o);
    let mut result = PhaseResult {
        name,
        ops: 0,
        wall,
        hist: Histogram::new(),
        errors: Vec::new(),
        failures: Vec::new(),
        server_cpu_s: cpu_before.zip(cpu_after).map(|(b, a)| a.cpu_s - b.cpu_s),
    };
    for r in results {
        result.ops += r.ops;
        result.hist.merge(&r.hist);
        for (code, n) in r.errors {
            count_error(&mut result.errors, code, n);
        }
        result.failures.extend(r.failure);
    }
    result
}

/// 1012 frames, one per set (opaque = the set's index).
fn next_id_frames(sets: &[Set]) -> Vec<Vec<u8>> {
    sets.iter()
        .enumerate()
        .map(|(i, s)| {
            let ext = [("clusterName", CLUSTER), ("brokerName", s.name.as_str())];
            frame_of(1012, i as i32, 0, &ext, b"")
        })
        .collect()
}

/// 1003 frames of broker 2 of each set, at its registered address (nothing to log).
fn register_frames(sets: &[Set]) -> Vec<Vec<u8>> {
    sets.iter()
        .enumerate()
        .map(|(i, s)| {
            let addr = broker_addr(i, 2);
            let ext = [
                ("clusterName", CLUSTER),
                ("brokerName", s.name.as_str()),
                ("brokerId", "2"),
                ("brokerAddress", addr.as_str()),
            ];
            frame_of(1003, i as i32, 0, &ext, b"")
        })
        .collect()
}

/// The server's RSS and CPU time now (`--pid` only).
fn server_sample(o: &Options) -> Option<ProcSample> {
    o.pid.and_then(|p| sample_proc(&p.to_string()))
}

fn throughput(o: &Options, addr: &str, stop: &AtomicBool) -> Result<String, String> {
    let idle = server_sample(o);
    let mut c =
        Client::connect(addr, CALL_TIMEOUT).map_err(|e| format!("connect to {addr}: {e}"))?;
    let names = set_names(o);
    let started = Instant::now();
    let mut sets = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            return Err("interrupted during the setup".into());
        }
        sets.push(set_up(&mut c, name, i).map_err(|e| format!("setting up {name}: {e}"))?);
    }
    let setup = started.elapsed();
    let loaded = server_sample(o);
    let next_ids = Arc::new(next_id_frames(&sets));
    let registers = Arc::new(register_frames(&sets));
    let mut phases = vec![
        phase(o, addr, "1012 GET_NEXT_BROKER_ID", stop, |_| {
            Box::new(Fixed(next_ids.clone()))
        }),
        phase(o, addr, "1003 REGISTER_BROKER", stop, |_| {
            Box::new(Fixed(registers.clone()))
        }),
    ];
    // Each connection tracks the epochs of its own sets (in its own copy of the list).
    phases.push(phase(o, addr, "1001 ALTER_SYNC_STATE_SET", stop, |_| {
        Box::new(Alter(sets.clone()))
    }));
    let end = server_sample(o);
    let cleaned = clean_up(&mut c, &names);
    Ok(throughput_report(
        o,
        addr,
        setup,
        &phases,
        [idle, loaded, end],
        cleaned,
    ))
}

/// Removes the run's broker sets (1011, living brokers included).
fn clean_up(c: &mut Client, names: &[String]) -> Result<(), String> {
    for name in names {
        let ext = [
            ("brokerName", name.as_str()),
            ("isCleanLivingBroker", "true"),
        ];
        expect_ok(call(c, 1011, &ext, b"")?, "1011")?;
    }
    Ok(())
}

fn errors_text(errors: &[(i32, u64)]) -> String {
    let list: Vec<String> = errors
        .iter()
        .map(|(c, n)| format!("{n} x code {c}"))
        .collect();
    list.join(", ")
}

fn throughput_report(
    o: &Options,
    addr: &str,
    setup: Duration,
    phases: &[PhaseResult],
    rss: [Option<ProcSample>; 3],
    cleaned: Result<(), String>,
) -> String {
    if o.json {
        return throughput_json(o, addr, setup, phases, rss, cleaned);
    }
    let mut out = format!(
        "controller {addr}: {} broker sets x 2 brokers, {} connections x depth {}, {:.1} s per phase\n",
        o.brokers,
        o.clients.min(o.brokers).max(1),
        o.depth.unwrap_or(16),
        o.duration.as_secs_f64()
    );
    out += &format!(
        "setup: {:.1} s ({} writes)\n\n",
        setup.as_secs_f64(),
        o.brokers * 5
    );
    out += &format!(
        "{:<28} {:>11} {:>10} {:>8} {:>8} {:>9} {:>11}  errors\n",
        "request", "ops", "ops/s", "p50 us", "p99 us", "max us", "server cpu"
    );
    for p in phases {
        let cpu = p.server_cpu_s.map_or("-".to_string(), |s| {
            format!("{:.0}%", 100.0 * s / p.wall.as_secs_f64().max(1e-9))
        });
        out += &format!(
            "{:<28} {:>11} {:>10} {:>8} {:>8} {:>9} {:>11}  {}\n",
            p.name,
            thousands(p.ops),
            thousands(p.ops_per_s() as u64),
            p.hist.percentile(50.0),
            p.hist.percentile(99.0),
            p.hist.max(),
            cpu,
            errors_text(&p.errors)
        );
        for f in &p.failures {
            out += &format!("  connection failed: {f}\n");
        }
    }
    if let [Some(idle), Some(loaded), Some(end)] = rss {
        out += &format!(
            "\nserver RSS: {} KiB idle, {} KiB with the {} sets, {} KiB at the end (peak {} KiB)\n",
            thousands(idle.rss_kib),
            thousands(loaded.rss_kib),
            o.brokers,
            thousands(end.rss_kib),
            thousands(end.hwm_kib)
        );
    }
    if let Err(e) = cleaned {
        out += &format!("cleaning the sets failed: {e}\n");
    }
    out
}

fn throughput_json(
    o: &Options,
    addr: &str,
    setup: Duration,
    phases: &[PhaseResult],
    rss: [Option<ProcSample>; 3],
    cleaned: Result<(), String>,
) -> String {
    let int = |n: u64| Value::Int(n as i64);
    let phase_values = phases.iter().map(|p| {
        Value::Object(vec![
            ("request".into(), Value::Str(p.name.into())),
            ("ops".into(), int(p.ops)),
            ("ops_per_s".into(), int(p.ops_per_s() as u64)),
            ("p50_us".into(), int(p.hist.percentile(50.0))),
            ("p99_us".into(), int(p.hist.percentile(99.0))),
            ("max_us".into(), int(p.hist.max())),
            (
                "server_cpu_s".into(),
                p.server_cpu_s
                    .map_or(Value::Null, |s| Value::Str(format!("{s:.2}"))),
            ),
            ("errors".into(), int(p.errors.iter().map(|(_, n)| n).sum())),
            ("failed_connections".into(), int(p.failures.len() as u64)),
        ])
    });
    let rss_kib = |s: Option<ProcSample>| s.map_or(Value::Null, |s| int(s.rss_kib));
    let doc = Value::Object(vec![
        ("workload".into(), Value::Str("controller".into())),
        ("target".into(), Value::Str(addr.into())),
        ("broker_sets".into(), int(o.brokers as u64)),
        ("setup_ms".into(), int(setup.as_millis() as u64)),
        ("phases".into(), Value::Array(phase_values.collect())),
        ("server_rss_kib_idle".into(), rss_kib(rss[0])),
        ("server_rss_kib_loaded".into(), rss_kib(rss[1])),
        ("server_rss_kib_end".into(), rss_kib(rss[2])),
        ("cleaned".into(), Value::Bool(cleaned.is_ok())),
    ]);
    let mut out = Vec::new();
    json::write_value(&mut out, &doc);
    String::from_utf8_lossy(&out).into_owned()
}

// ------------------------------------------------------------------ failover

/// The topic the failover brokers register with the name servers.
fn failover_topic(set: &str) -> String {
    format!("{set}-topic")
}

/// A controller-mode broker reduced to what failover needs: its controller conversation, its
/// name-server registrations, heartbeats, and a listener for 1008.
struct SimBroker {
    name: String,
    addr: String,
    id: i64,
    controller: Arc<Mutex<Option<Client>>>,
    /// One connection per name server, kept open as brokers do: a name server drops the
    /// registrations of a connection that closes.
    namesrv: Arc<Mutex<Vec<Client>>>,
    /// (master id, master epoch, sync-state-set epoch).
    role: Arc<Mutex<(i64, i64, i64)>>,
    /// When a 1008 making this broker master arrived, and when its registration as master
    /// was answered by every name server.
    promoted: Arc<Mutex<(Option<Instant>, Option<Instant>)>>,
    heartbeating: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl SimBroker {
    fn start(o: &Options, controller: &str, name: &str) -> Result<SimBroker, String> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("listen: {e}"))?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let addr = listener
            .local_addr()
            .map_err(|e| e.to_string())?
            .to_string();
        let mut c = Client::connect(controller, CALL_TIMEOUT)
            .map_err(|e| format!("connect to {controller}: {e}"))?;
        let base = [("clusterName", CLUSTER), ("brokerName", name)];
        let next = expect_ok(call(&mut c, 1012, &base, b"")?, "1012")?;
        let id = ext_i64(&next, "nextBrokerId").ok_or("1012 without nextBrokerId")?;
        let id_text = id.to_string();
        let check = format!("{addr};{}", millis());
        let mut ext = base.to_vec();
        ext.extend([
            ("appliedBrokerId", id_text.as_str()),
            ("registerCheckCode", check.as_str()),
        ]);
        expect_ok(call(&mut c, 1013, &ext, b"")?, "1013")?;
        let mut ext = base.to_vec();
        ext.extend([
            ("brokerId", id_text.as_str()),
            ("brokerAddress", addr.as_str()),
        ]);
        let registered = expect_ok(call(&mut c, 1003, &ext, b"")?, "1003")?;
        let mut namesrv = Vec::new();
        for ns in &o.namesrv {
            let conn = Client::connect(ns, CALL_TIMEOUT);
            namesrv.push(conn.map_err(|e| format!("connect to {ns}: {e}"))?);
        }
        let mut b = SimBroker {
            name: name.to_string(),
            addr,
            id,
            controller: Arc::new(Mutex::new(Some(c))),
            namesrv: Arc::new(Mutex::new(namesrv)),
            role: Arc::new(Mutex::new((0, 0, 0))),
            promoted: Arc::new(Mutex::new((None, None))),
            heartbeating: Arc::new(AtomicBool::new(true)),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        };
        b.adopt(&registered);
        heartbeat(&b.controller, name, &b.addr, id, o.timeout_ms);
        if b.role.lock().map(|r| r.0).unwrap_or(0) == 0 {
            let ext = [
                ("clusterName", CLUSTER),
                ("brokerName", name),
                ("brokerId", id_text.as_str()),
                ("designateElect", "false"),
            ];
            let elected = b.with_controller(|c| call(c, 1002, &ext, b""))?;
            b.adopt(&elected);
        }
        let role = *b.role.lock().map_err(|_| "poisoned")?;
        register_all(
            &b.namesrv,
            name,
            &b.addr,
            if role.0 == id { 0 } else { id },
            role.1,
        )?;
        b.spawn_threads(listener, o.timeout_ms);
        Ok(b)
    }

    fn with_controller<T>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, String>,
    ) -> Result<T, String> {
        let mut guard = self.controller.lock().map_err(|_| "poisoned")?;
        f(guard.as_mut().ok_or("no controller connection")?)
    }

    fn adopt(&self, resp: &RemotingCommand) {
        if let (Some(master), Ok(mut role)) = (ext_i64(resp, "masterBrokerId"), self.role.lock()) {
            *role = (
                master,
                ext_i64(resp, "masterEpoch").unwrap_or(0),
                ext_i64(resp, "syncStateSetEpoch").unwrap_or(0),
            );
        }
    }

    fn spawn_threads(&mut self, listener: TcpListener, timeout_ms: u64) {
        let (controller, name, addr, id) = (
            self.controller.clone(),
            self.name.clone(),
            self.addr.clone(),
            self.id,
        );
        let (beat, stop) = (self.heartbeating.clone(), self.stop.clone());
        self.threads.push(std::thread::spawn(move || {
            // Java brokers heartbeat every second (brokerHeartbeatInterval).
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1000));
                if beat.load(Ordering::SeqCst) {
                    heartbeat(&controller, &name, &addr, id, timeout_ms);
                }
            }
        }));
        let (role, promoted, stop) = (self.role.clone(), self.promoted.clone(), self.stop.clone());
        let (namesrv, name, addr) = (self.namesrv.clone(), self.name.clone(), self.addr.clone());
        self.threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let Ok((stream, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                };
                // The controller keeps its connection open: frames are handled as they come,
                // on a thread per connection.
                let (role, promoted, stop) = (role.clone(), promoted.clone(), stop.clone());
                let (namesrv, name, addr) = (namesrv.clone(), name.clone(), addr.clone());
                std::thread::spawn(move || {
                    read_frames(stream, &stop, |cmd| {
                        on_notice(cmd, id, &role, &promoted, &namesrv, &name, &addr)
                    })
                });
            }
        }));
    }

    /// As the master: 1001 to {1, 2}.
    fn widen(&self, other: i64) -> Result<(), String> {
        let (master, epoch, set_epoch) = *self.role.lock().map_err(|_| "poisoned")?;
        let body =
            format!("{{\"syncStateSet\":[{master},{other}],\"syncStateSetEpoch\":{set_epoch}}}");
        let (m, e) = (master.to_string(), epoch.to_string());
        let ext = [
            ("brokerName", self.name.as_str()),
            ("masterBrokerId", m.as_str()),
            ("masterEpoch", e.as_str()),
        ];
        self.with_controller(|c| expect_ok(call(c, 1001, &ext, body.as_bytes())?, "1001"))?;
        Ok(())
    }

    /// kill -9: every connection closes at once, nothing more is sent (the threads notice
    /// the stop flag later; dropping the broker waits for them).
    fn kill(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Ok(mut c) = self.controller.lock() {
            c.take();
        }
        if let Ok(mut ns) = self.namesrv.lock() {
            ns.clear();
        }
    }
}

impl Drop for SimBroker {
    fn drop(&mut self) {
        self.kill();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One oneway 904 on the broker's controller connection.
fn heartbeat(controller: &Mutex<Option<Client>>, name: &str, addr: &str, id: i64, timeout_ms: u64) {
    let (id, timeout) = (id.to_string(), timeout_ms.to_string());
    let ext = [
        ("clusterName", CLUSTER),
        ("brokerAddr", addr),
        ("brokerName", name),
        ("brokerId", id.as_str()),
        ("heartbeatTimeoutMills", timeout.as_str()),
    ];
    if let Ok(mut guard) = controller.lock() {
        if let Some(c) = guard.as_mut() {
            let _ = c.oneway(904, &ext, b"");
        }
    }
}

/// Handles each frame of one connection as it arrives, until the connection closes or `stop`.
fn read_frames(
    mut stream: std::net::TcpStream,
    stop: &AtomicBool,
    mut handle: impl FnMut(&RemotingCommand),
) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = BytesMut::new();
    let mut chunk = [0u8; 4096];
    while !stop.load(Ordering::SeqCst) {
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => return,
        }
        while let Ok(Some(f)) = frame::next_frame(&mut buf, 1 << 20) {
            if let Ok(cmd) = RemotingCommand::decode(f, &DecodeLimits::default()) {
                handle(&cmd);
            }
        }
    }
}

/// A 1008: a higher master epoch naming this broker makes it master, registered as id 0.
fn on_notice(
    cmd: &RemotingCommand,
    id: i64,
    role: &Mutex<(i64, i64, i64)>,
    promoted: &Mutex<(Option<Instant>, Option<Instant>)>,
    namesrv: &Mutex<Vec<Client>>,
    name: &str,
    addr: &str,
) {
    let (Some(master), Some(epoch)) = (ext_i64(cmd, "masterBrokerId"), ext_i64(cmd, "masterEpoch"))
    else {
        return;
    };
    let Ok(mut r) = role.lock() else {
        return;
    };
    if cmd.code != 1008 || epoch <= r.1 {
        return;
    }
    *r = (
        master,
        epoch,
        ext_i64(cmd, "syncStateSetEpoch").unwrap_or(r.2),
    );
    drop(r);
    if master != id {
        return;
    }
    let notified = Instant::now();
    if register_all(namesrv, name, addr, 0, epoch).is_ok() {
        if let Ok(mut p) = promoted.lock() {
            *p = (Some(notified), Some(Instant::now()));
        }
    }
}

/// REGISTER_BROKER to every name server, `stateVersion = masterEpoch`.
fn register_all(
    namesrv: &Mutex<Vec<Client>>,
    name: &str,
    addr: &str,
    broker_id: i64,
    master_epoch: i64,
) -> Result<(), String> {
    let topic = failover_topic(name);
    let body = RegisterBody {
        data_version: DataVersion {
            counter: millis() as i64,
            state_version: master_epoch,
            timestamp: millis() as i64,
        },
        topics: vec![(
            topic.clone(),
            TopicConfig {
                topic_name: topic,
                read_queue_nums: 4,
                write_queue_nums: 4,
                perm: 6,
                topic_sys_flag: 0,
            },
        )],
        filter_servers: Some(Vec::new()),
        mappings: Vec::new(),
    };
    let identity = BrokerIdentity {
        cluster: CLUSTER.to_string(),
        broker_name: name.to_string(),
        broker_addr: addr.to_string(),
        broker_id,
        ha_server_addr: addr.to_string(),
    };
    let mut conns = namesrv.lock().map_err(|_| "poisoned")?;
    for c in conns.iter_mut() {
        c.register_broker(&identity, &body, &RegisterOptions::default())
            .map_err(|e| format!("REGISTER_BROKER to {}: {e}", c.peer()))?;
    }
    Ok(())
}

/// Whether the first name server routes `addr` as id 0 of `name`.
fn routed_as_master(c: &mut Client, name: &str, addr: &str) -> bool {
    match c.get_route(&failover_topic(name)) {
        Ok(Some(route)) => route
            .broker_datas
            .iter()
            .any(|b| b.broker_name == name && b.broker_addrs.get(&0).is_some_and(|a| a == addr)),
        _ => false,
    }
}

/// One round's times, from the master's death.
struct Round {
    notified: Duration,
    routed: Duration,
}

fn failover_round(
    o: &Options,
    controller: &str,
    mode: Failover,
    round: usize,
) -> Result<Round, String> {
    let name = format!("{}-failover-{round}", set_names(o)[0]);
    let master = SimBroker::start(o, controller, &name)?;
    let slave = SimBroker::start(o, controller, &name)?;
    master.widen(slave.id)?;
    let mut ns = Client::connect(&o.namesrv[0], CALL_TIMEOUT).map_err(|e| e.to_string())?;
    let died = Instant::now();
    match mode {
        Failover::Crash => master.kill(),
        Failover::Hang => master.heartbeating.store(false, Ordering::SeqCst),
    }
    let deadline = died + o.max_wait;
    let routed = loop {
        if routed_as_master(&mut ns, &name, &slave.addr) {
            break died.elapsed();
        }
        if Instant::now() > deadline {
            return Err(format!(
                "round {round}: the slave was not routed as master within {:?}",
                o.max_wait
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let notified = slave
        .promoted
        .lock()
        .ok()
        .and_then(|p| p.0)
        .map_or(routed, |t| t - died);
    drop(slave);
    drop(master);
    let mut c = Client::connect(controller, CALL_TIMEOUT).map_err(|e| e.to_string())?;
    let _ = call(
        &mut c,
        1011,
        &[
            ("brokerName", name.as_str()),
            ("isCleanLivingBroker", "true"),
        ],
        b"",
    );
    Ok(Round { notified, routed })
}

fn failover(
    o: &Options,
    controller: &str,
    mode: Failover,
    stop: &AtomicBool,
) -> Result<String, String> {
    let mut rounds = Vec::new();
    for round in 0..o.rounds {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        rounds.push(failover_round(o, controller, mode, round)?);
    }
    let mode_name = match mode {
        Failover::Crash => "crash (connections closed)",
        Failover::Hang => "hang (heartbeats stopped)",
    };
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    if o.json {
        let list = rounds.iter().map(|r| {
            Value::Object(vec![
                (
                    "notified_ms".into(),
                    Value::Str(format!("{:.1}", ms(r.notified))),
                ),
                (
                    "routed_ms".into(),
                    Value::Str(format!("{:.1}", ms(r.routed))),
                ),
            ])
        });
        let doc = Value::Object(vec![
            ("workload".into(), Value::Str("controller-failover".into())),
            ("mode".into(), Value::Str(mode_name.into())),
            (
                "heartbeat_timeout_ms".into(),
                Value::Int(o.timeout_ms as i64),
            ),
            ("rounds".into(), Value::Array(list.collect())),
        ]);
        let mut out = Vec::new();
        json::write_value(&mut out, &doc);
        return Ok(String::from_utf8_lossy(&out).into_owned());
    }
    let mut out = format!(
        "failover on controller {controller}, name servers {}: master {mode_name}, brokers' heartbeatTimeoutMills {} ms\n",
        o.namesrv.join(";"),
        o.timeout_ms
    );
    out += &format!(
        "{:<6} {:>14} {:>22}\n",
        "round", "notified (ms)", "routed as master (ms)"
    );
    for (i, r) in rounds.iter().enumerate() {
        out += &format!("{:<6} {:>14.1} {:>22.1}\n", i, ms(r.notified), ms(r.routed));
    }
    Ok(out)
}
