//! The throughput run: N broker sets of two brokers are set up through the controller (ids
//! applied, both registered, heartbeats with a long timeout so both stay alive, id 1 elected,
//! both in the SyncStateSet), then three phases are timed one after the other on `--clients`
//! connections with `--depth` requests in flight: 1012 GET_NEXT_BROKER_ID (a read), 1003
//! REGISTER_BROKER with an unchanged address (nothing to log) and 1001 ALTER_SYNC_STATE_SET
//! alternating {1,2} and {1} (one logged event, one fsync each). A connection's requests in
//! flight are for distinct sets, so 1001's epochs can be tracked per set. The sets are
//! cleaned (1011) at the end. `--pid` samples the server's RSS before the setup, after it and
//! at the end, and its CPU time per phase.

use super::{
    apply_broker_id, call_ok, clean_broker_data, elect_master, expect_ok, ext_i64, frame_of,
    heartbeat, millis, next_broker_id, register_broker, server_sample, set_names, CALL_TIMEOUT,
};
use crate::args::Options;
use crate::engine::{ClassStats, Engine, NoWatch, PhaseSpec, Template, Until, Watch};
use crate::report::{json_text, thousands, ProcSample};
use crate::workloads::resolve;
use rmq_namesrv::client::Client;
use rmq_namesrv::controller::request::field::{
    INVOKE_TIME, MASTER_EPOCH, NEW_SYNC_STATE_SET_EPOCH, SYNC_STATE_SET_EPOCH,
};
use rmq_namesrv::controller::request::{
    AlterSyncStateSet, ControllerRequest, LeaderRequest, SyncStateSetBody,
};
use rmq_namesrv::remoting::codes::version;
use rmq_namesrv::remoting::command::{RemotingCommand, SerializeType};
use rmq_namesrv::remoting::json::Value;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Heartbeat timeout of the throughput sets' brokers: alive for the whole run.
const LONG_TIMEOUT_MS: u64 = 3_600_000;

/// A set of the throughput run: its name and where its SyncStateSet stands.
#[derive(Clone)]
struct Set {
    name: String,
    master_epoch: i32,
    sync_state_set_epoch: i32,
    /// Whether the set is {1,2} now (else {1}).
    wide: bool,
}

/// `--clients`, at most one per set.
fn connections(o: &Options) -> usize {
    o.clients.min(o.layout.brokers).max(1)
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
    for id in [1i64, 2] {
        let addr = broker_addr(index, id);
        call_ok(c, &apply_broker_id(name, id, &addr))?;
        call_ok(c, &register_broker(name, id, &addr))?;
    }
    let elected = call_ok(c, &elect_master(name, 1))?;
    for id in [1i64, 2] {
        let beat = heartbeat(name, &broker_addr(index, id), id, LONG_TIMEOUT_MS);
        c.oneway_encoded(&beat.encode())
            .map_err(|e| format!("904: {e}"))?;
    }
    let epoch = |key| ext_i64(&elected, key).and_then(|e| i32::try_from(e).ok());
    let mut set = Set {
        name: name.to_string(),
        master_epoch: epoch(MASTER_EPOCH).unwrap_or(0),
        sync_state_set_epoch: epoch(SYNC_STATE_SET_EPOCH).unwrap_or(0),
        wide: false,
    };
    let altered = expect_ok(alter(c, &set)?, "1001")?;
    set.sync_state_set_epoch = new_epoch(&altered);
    set.wide = true;
    Ok(set)
}

/// The SyncStateSet epoch a 1001 answer announces.
fn new_epoch(resp: &RemotingCommand) -> i32 {
    ext_i64(resp, NEW_SYNC_STATE_SET_EPOCH)
        .and_then(|e| i32::try_from(e).ok())
        .unwrap_or(0)
}

/// 1001 from {1,2} to {1} or back, as the master (id 1) sends it, with `mqadmin`'s
/// `invokeTime`.
fn alter_frame(set: &Set, opaque: i32) -> Vec<u8> {
    let members = if set.wide { vec![1] } else { vec![1, 2] };
    let alter = ControllerRequest::Leader(LeaderRequest::AlterSyncStateSet(AlterSyncStateSet {
        broker_name: Some(set.name.clone()),
        master_broker_id: Some(1),
        master_epoch: Some(set.master_epoch),
        body: Some(SyncStateSetBody {
            sync_state_set: Some(members.into_iter().collect()),
            sync_state_set_epoch: set.sync_state_set_epoch,
        }),
    }));
    let mut encoded = alter.encode();
    encoded.put_value(INVOKE_TIME, millis());
    frame_of(&encoded, opaque)
}

/// One 1001 from {1} to {1,2} or back, blocking.
fn alter(c: &mut Client, set: &Set) -> Result<RemotingCommand, String> {
    c.send_raw(&alter_frame(set, 7))
        .map_err(|e| format!("1001: {e}"))?;
    c.read_response(7).map_err(|e| format!("1001: {e}"))
}

/// The 1001 phase: each set's request carries the epochs its last answer announced. Sets
/// are planned as their 1012 template ids (`first` is set 0's).
struct Alter {
    sets: Vec<Set>,
    first: u32,
}

impl Alter {
    fn set(&self, template: u32) -> Option<usize> {
        let i = template.checked_sub(self.first)? as usize;
        (i < self.sets.len()).then_some(i)
    }
}

impl Watch for Alter {
    fn write_request(&mut self, template: u32, opaque: i32, out: &mut Vec<u8>) -> bool {
        let Some(i) = self.set(template) else {
            return false;
        };
        out.extend(alter_frame(&self.sets[i], opaque));
        true
    }

    fn on_response(&mut self, _: usize, template: u32, answer: &RemotingCommand, _: Instant) {
        if let (Some(i), 0) = (self.set(template), answer.code) {
            let s = &mut self.sets[i];
            s.sync_state_set_epoch = new_epoch(answer);
            s.wide = !s.wide;
        }
    }
}

struct PhaseResult {
    name: &'static str,
    wall: Duration,
    stats: ClassStats,
    server_cpu_s: Option<f64>,
}

impl PhaseResult {
    fn ops_per_s(&self) -> f64 {
        self.stats.ops as f64 / self.wall.as_secs_f64().max(1e-9)
    }
}

/// The request of every set, encoded once (1012 and 1003 never change).
fn templates(
    engine: &mut Engine,
    sets: &[Set],
    request: impl Fn(usize, &Set) -> ControllerRequest,
) -> Rc<[u32]> {
    let ids = sets.iter().enumerate().map(|(i, s)| {
        let t = Template::new(
            SerializeType::Json,
            &request(i, s).encode(),
            version::CURRENT,
            "JAVA",
        );
        engine.add_template(t)
    });
    ids.collect::<Vec<_>>().into()
}

/// Runs `plan` (one template per set) on every connection of `class` for the duration:
/// connection `c` takes sets `c`, `c + k`, ... so that its requests in flight are for
/// distinct sets.
fn phase(
    o: &Options,
    engine: &mut Engine,
    class: usize,
    name: &'static str,
    plan: &[u32],
    watch: &mut dyn Watch,
) -> PhaseResult {
    let k = connections(o);
    engine.replan(class, |c| {
        let own: Vec<u32> = plan.iter().skip(c).step_by(k).copied().collect();
        (own.into(), 0)
    });
    engine.classes[class].name = name.into();
    let spec = PhaseSpec {
        name: name.into(),
        classes: vec![class],
        until: Until::Elapsed(o.duration),
        limit: o.duration + Duration::from_secs(1),
        drain: CALL_TIMEOUT,
    };
    let cpu_before = server_sample(o);
    let result = engine.run_phase(&spec, watch);
    let cpu_after = server_sample(o);
    PhaseResult {
        name,
        wall: result.elapsed,
        stats: result
            .classes
            .into_iter()
            .next()
            .map(|(_, s)| s)
            .unwrap_or_default(),
        server_cpu_s: cpu_before.zip(cpu_after).map(|(b, a)| a.cpu_s - b.cpu_s),
    }
}

pub fn run(o: &Options, addr: &str, stop: Arc<AtomicBool>) -> Result<String, String> {
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
    let mut engine = Engine::new(!o.quiet, stop).map_err(|e| format!("poll: {e}"))?;
    let next_ids = templates(&mut engine, &sets, |_, s| next_broker_id(&s.name));
    let registers = templates(&mut engine, &sets, |i, s| {
        register_broker(&s.name, 2, &broker_addr(i, 2))
    });
    let class = engine.add_class("controller", None);
    let k = connections(o);
    let depth = o.depth.unwrap_or(16).min(o.layout.brokers.div_ceil(k));
    let target = resolve(addr)?;
    for _ in 0..k {
        engine
            .connect(target, class, next_ids.clone(), 0, depth)
            .map_err(|e| format!("connect to {addr}: {e}"))?;
    }
    let mut alter = Alter {
        first: next_ids.first().copied().unwrap_or(0),
        sets,
    };
    let runs: [(&'static str, &[u32], &mut dyn Watch); 3] = [
        ("1012 GET_NEXT_BROKER_ID", &next_ids, &mut NoWatch),
        ("1003 REGISTER_BROKER", &registers, &mut NoWatch),
        ("1001 ALTER_SYNC_STATE_SET", &next_ids, &mut alter),
    ];
    let phases = runs.map(|(name, plan, watch)| phase(o, &mut engine, class, name, plan, watch));
    let end = server_sample(o);
    let cleaned = clean_up(&mut c, &names);
    Ok(report(
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
        call_ok(c, &clean_broker_data(name))?;
    }
    Ok(())
}

fn us(ns: u64) -> u64 {
    ns / 1000
}

/// The text (or JSON) report: one row per phase (ops/s, latency, the server's CPU, errors
/// by code), the server's RSS.
fn report(
    o: &Options,
    addr: &str,
    setup: Duration,
    phases: &[PhaseResult],
    rss: [Option<ProcSample>; 3],
    cleaned: Result<(), String>,
) -> String {
    if o.json {
        return report_json(o, addr, setup, phases, rss, cleaned);
    }
    let mut out = format!(
        "controller {addr}: {} broker sets x 2 brokers, {} connections x depth {}, {:.1} s per phase\n",
        o.layout.brokers,
        connections(o),
        o.depth.unwrap_or(16),
        o.duration.as_secs_f64()
    );
    out += &format!(
        "setup: {:.1} s ({} writes)\n\n",
        setup.as_secs_f64(),
        o.layout.brokers * 5
    );
    out += &format!(
        "{:<28} {:>11} {:>10} {:>8} {:>8} {:>9} {:>11}  errors\n",
        "request", "ops", "ops/s", "p50 us", "p99 us", "max us", "server cpu"
    );
    for p in phases {
        let errors = p.stats.errors_by_code.iter();
        let errors: Vec<String> = errors.map(|(c, n)| format!("{n} x code {c}")).collect();
        let cpu = p.server_cpu_s.map_or("-".to_string(), |s| {
            format!("{:.0}%", 100.0 * s / p.wall.as_secs_f64().max(1e-9))
        });
        out += &format!(
            "{:<28} {:>11} {:>10} {:>8} {:>8} {:>9} {:>11}  {}\n",
            p.name,
            thousands(p.stats.ops),
            thousands(p.ops_per_s() as u64),
            us(p.stats.hist.percentile(50.0)),
            us(p.stats.hist.percentile(99.0)),
            us(p.stats.hist.max()),
            cpu,
            errors.join(", ")
        );
        for (what, _, n) in p.stats.failures() {
            if n > 0 {
                out += &format!("  {what}: {n}\n");
            }
        }
    }
    if let [Some(idle), Some(loaded), Some(end)] = rss {
        out += &format!(
            "\nserver RSS: {} KiB idle, {} KiB with the {} sets, {} KiB at the end (peak {} KiB)\n",
            thousands(idle.rss_kib),
            thousands(loaded.rss_kib),
            o.layout.brokers,
            thousands(end.rss_kib),
            thousands(end.hwm_kib)
        );
    }
    if let Err(e) = cleaned {
        out += &format!("cleaning the sets failed: {e}\n");
    }
    out
}

fn report_json(
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
            ("ops".into(), int(p.stats.ops)),
            ("ops_per_s".into(), int(p.ops_per_s() as u64)),
            ("p50_us".into(), int(us(p.stats.hist.percentile(50.0)))),
            ("p99_us".into(), int(us(p.stats.hist.percentile(99.0)))),
            ("max_us".into(), int(us(p.stats.hist.max()))),
            (
                "server_cpu_s".into(),
                p.server_cpu_s
                    .map_or(Value::Null, |s| Value::Str(format!("{s:.2}"))),
            ),
            ("errors".into(), int(p.stats.errors() - p.stats.closed)),
            ("failed_connections".into(), int(p.stats.closed)),
        ])
    });
    let rss_kib = |s: Option<ProcSample>| s.map_or(Value::Null, |s| int(s.rss_kib));
    let doc = Value::Object(vec![
        ("workload".into(), Value::Str("controller".into())),
        ("target".into(), Value::Str(addr.into())),
        ("broker_sets".into(), int(o.layout.brokers as u64)),
        ("setup_ms".into(), int(setup.as_millis() as u64)),
        ("phases".into(), Value::Array(phase_values.collect())),
        ("server_rss_kib_idle".into(), rss_kib(rss[0])),
        ("server_rss_kib_loaded".into(), rss_kib(rss[1])),
        ("server_rss_kib_end".into(), rss_kib(rss[2])),
        ("cleaned".into(), Value::Bool(cleaned.is_ok())),
    ]);
    json_text(&doc)
}
