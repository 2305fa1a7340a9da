//! The throughput run: N broker sets set up through the controller, then 1012, 1003 and
//! 1001 timed one after the other on `--clients` connections with `--depth` requests in
//! flight on each (every in-flight request of a connection for a different set, so 1001's
//! epochs can be tracked per set), and the sets cleaned at the end.

use super::{
    apply_broker_id, call_ok, clean_broker_data, elect_master, expect_ok, ext_i64, frame_of,
    heartbeat, millis, next_broker_id, register_broker, report, server_sample, set_names,
    CALL_TIMEOUT,
};
use crate::args::Options;
use crate::hist::Histogram;
use rmq_namesrv::client::Client;
use rmq_namesrv::controller::request::field::{
    INVOKE_TIME, MASTER_EPOCH, NEW_SYNC_STATE_SET_EPOCH, SYNC_STATE_SET_EPOCH,
};
use rmq_namesrv::controller::request::{
    AlterSyncStateSet, ControllerRequest, LeaderRequest, SyncStateSetBody,
};
use rmq_namesrv::remoting::command::RemotingCommand;
use std::collections::VecDeque;
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

/// What a phase sends for a set and how it takes the answer.
trait PhaseRequest: Send {
    fn frame(&mut self, set: usize, opaque: i32, out: &mut Vec<u8>);
    /// The answer's code when it is an error (0 = fine).
    fn answer(&mut self, set: usize, resp: &RemotingCommand) -> i32;
}

/// Frames that never change (1012, 1003), encoded once with the set's index as opaque.
struct Fixed(Arc<Vec<Vec<u8>>>);

impl PhaseRequest for Fixed {
    fn frame(&mut self, set: usize, _opaque: i32, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0[set]);
    }
    fn answer(&mut self, _: usize, resp: &RemotingCommand) -> i32 {
        resp.code
    }
}

/// 1001 back and forth, epochs tracked per set.
struct Alter(Vec<Set>);

impl PhaseRequest for Alter {
    fn frame(&mut self, set: usize, opaque: i32, out: &mut Vec<u8>) {
        out.extend(alter_frame(&self.0[set], opaque));
    }
    fn answer(&mut self, set: usize, resp: &RemotingCommand) -> i32 {
        if resp.code != 0 {
            return resp.code;
        }
        let s = &mut self.0[set];
        s.sync_state_set_epoch = new_epoch(resp);
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
    req: &mut dyn PhaseRequest,
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
pub(super) struct PhaseResult {
    pub name: &'static str,
    pub ops: u64,
    pub wall: Duration,
    pub hist: Histogram,
    pub errors: Vec<(i32, u64)>,
    pub failures: Vec<String>,
    pub server_cpu_s: Option<f64>,
}

impl PhaseResult {
    pub fn ops_per_s(&self) -> f64 {
        self.ops as f64 / self.wall.as_secs_f64().max(1e-9)
    }
}

/// Runs `make(connection)`'s requests on every connection for the duration.
fn phase(
    o: &Options,
    addr: &str,
    name: &'static str,
    stop: &AtomicBool,
    make: impl Fn(usize) -> Box<dyn PhaseRequest>,
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
        .map(|(i, s)| frame_of(&next_broker_id(&s.name).encode(), i as i32))
        .collect()
}

/// 1003 frames of broker 2 of each set, at its registered address (nothing to log).
fn register_frames(sets: &[Set]) -> Vec<Vec<u8>> {
    sets.iter()
        .enumerate()
        .map(|(i, s)| {
            frame_of(
                &register_broker(&s.name, 2, &broker_addr(i, 2)).encode(),
                i as i32,
            )
        })
        .collect()
}

pub fn run(o: &Options, addr: &str, stop: &AtomicBool) -> Result<String, String> {
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
    Ok(report::throughput(
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
