//! The throughput run: N broker sets of two live brokers (id 1 master, both in the
//! SyncStateSet) are set up through the controller, then three phases are timed: 1012
//! GET_NEXT_BROKER_ID (a read), 1003 REGISTER_BROKER with an unchanged address (nothing to log)
//! and 1001 ALTER_SYNC_STATE_SET alternating {1,2} and {1} (one logged event, one fsync each).
//! The sets are cleaned (1011) at the end.

use super::{
    alter_sync_state_set, apply_broker_id, call_ok, clean_broker_data, connect, elect_master,
    ext_i64, heartbeat, millis, next_broker_id, register_broker, set_names,
};
use crate::engine::{Engine, NoWatch, Template, Watch};
use crate::report::{int, num, Mark, Report};
use crate::workloads::{resolve, Bench};
use rmq_namesrv::client::Client;
use rmq_namesrv::controller::request::field::{
    INVOKE_TIME, MASTER_EPOCH, NEW_SYNC_STATE_SET_EPOCH, SYNC_STATE_SET_EPOCH,
};
use rmq_namesrv::controller::request::ControllerRequest;
use rmq_namesrv::remoting::codes::version::CURRENT;
use rmq_namesrv::remoting::command::{RemotingCommand, SerializeType};
use rmq_namesrv::request::Encoded;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::time::Instant;

/// Heartbeat timeout of the throughput sets' brokers: alive for the whole run.
const LONG_TIMEOUT_MS: u64 = 3_600_000;

/// A set of the throughput run: its name and where its SyncStateSet stands.
#[derive(Clone)]
struct Set {
    name: String,
    master_epoch: i64,
    sync_state_set_epoch: i64,
    /// Whether the set is {1,2} now (else {1}).
    wide: bool,
}

/// A made-up address per broker (the controller only stores it; nobody connects), on the
/// IP the controller sees this tool at: it takes heartbeats and registrations naming a broker
/// only from that broker's IP (`checkBrokerSourceAddress`).
fn broker_addr(ip: IpAddr, set: usize, id: i64) -> String {
    let port = 20_000 + (2 * set + id as usize) % 40_000;
    SocketAddr::new(ip, port as u16).to_string()
}

/// 1013 + 1003 for ids 1 and 2, 1002 for id 1, heartbeats, 1001 to {1,2}. Heartbeats after the
/// election: nobody is active then, so no 1008 goes to the made-up addresses.
fn set_up(c: &mut Client, name: &str, index: usize, ip: IpAddr) -> Result<Set, String> {
    for id in [1i64, 2] {
        let addr = broker_addr(ip, index, id);
        call_ok(c, &apply_broker_id(name, id, &addr))?;
        call_ok(c, &register_broker(name, id, &addr))?;
    }
    let elected = call_ok(c, &elect_master(name, 1))?;
    for id in [1i64, 2] {
        let beat = heartbeat(name, &broker_addr(ip, index, id), id, LONG_TIMEOUT_MS);
        c.oneway_encoded(&beat.encode())
            .map_err(|e| format!("904: {e}"))?;
    }
    let mut set = Set {
        name: name.to_string(),
        master_epoch: ext_i64(&elected, MASTER_EPOCH).unwrap_or(0),
        sync_state_set_epoch: ext_i64(&elected, SYNC_STATE_SET_EPOCH).unwrap_or(0),
        wide: false,
    };
    let altered = with_alter(&set, |e| c.request_ok(e)).map_err(|e| format!("1001: {e}"))?;
    set.sync_state_set_epoch = ext_i64(&altered, NEW_SYNC_STATE_SET_EPOCH).unwrap_or(0);
    set.wide = true;
    Ok(set)
}

/// `send` with the master's 1001 from {1,2} to {1} or back, with Java's `invokeTime`.
fn with_alter<T>(set: &Set, send: impl FnOnce(&Encoded<'_>) -> T) -> T {
    let members: &[i64] = if set.wide { &[1] } else { &[1, 2] };
    let (epoch, set_epoch) = (set.master_epoch, set.sync_state_set_epoch);
    let alter = alter_sync_state_set(&set.name, 1, epoch, members, set_epoch);
    let mut encoded = alter.encode();
    encoded.put_value(INVOKE_TIME, millis());
    send(&encoded)
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
        let frame = |e: &Encoded<'_>| e.frame(SerializeType::Json, "JAVA", CURRENT, opaque, 0);
        out.extend(with_alter(&self.sets[i], frame));
        true
    }

    fn on_response(&mut self, template: u32, answer: &RemotingCommand) {
        if let (Some(i), 0) = (self.set(template), answer.code) {
            let s = &mut self.sets[i];
            s.sync_state_set_epoch = ext_i64(answer, NEW_SYNC_STATE_SET_EPOCH).unwrap_or(0);
            s.wide = !s.wide;
        }
    }
}

/// The request of every set, encoded once (1012 and 1003 never change).
fn templates(
    engine: &mut Engine,
    sets: &[Set],
    request: impl Fn(usize, &Set) -> ControllerRequest,
) -> Rc<[u32]> {
    let ids = sets.iter().enumerate().map(|(i, s)| {
        let t = Template::new(SerializeType::Json, &request(i, s).encode(), CURRENT);
        engine.add_template(t)
    });
    ids.collect::<Vec<_>>().into()
}

pub fn run(mut b: Bench) -> Result<Report, String> {
    let addr = b.o.controller.clone().unwrap_or_default();
    b.report.target.clone_from(&addr);
    let mut c = connect(&addr)?;
    let ip = c.local_addr().map(|a| a.ip());
    let ip = ip.map_err(|e| format!("connect to {addr}: {e}"))?;
    let names = set_names(&b.o);
    let started = Instant::now();
    let mut sets = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        if b.engine.stopped() {
            return Err("interrupted during the setup".into());
        }
        sets.push(set_up(&mut c, name, i, ip).map_err(|e| format!("setting up {name}: {e}"))?);
    }
    let setup_s = started.elapsed().as_secs_f64();
    let loaded = Mark::now(b.o.pid);
    let next_ids = templates(&mut b.engine, &sets, |_, s| next_broker_id(&s.name));
    let registers = templates(&mut b.engine, &sets, |i, s| {
        register_broker(&s.name, 2, &broker_addr(ip, i, 2))
    });
    let class = b.engine.add_class("controller", None);
    // `--clients`, at most one per set: a connection's requests in flight are for distinct
    // sets, so 1001's epochs can be tracked per set.
    let k = b.o.clients.min(b.o.layout.brokers).max(1);
    let depth = b.o.depth.min(b.o.layout.brokers.div_ceil(k));
    let target = resolve(&addr)?;
    for _ in 0..k {
        b.engine.connect(target, class, Rc::default(), 0, depth)?; // planned per phase
    }
    b.param("broker_sets", int(b.o.layout.brokers));
    b.param("connections", int(k));
    b.param("depth", int(depth));
    b.param("setup_s", num(setup_s, 3));
    b.param("setup_writes", int(b.o.layout.brokers * 5));
    let mut alter = Alter {
        first: next_ids.first().copied().unwrap_or(0),
        sets,
    };
    let runs: [(&'static str, &[u32], &mut dyn Watch); 3] = [
        ("1012 GET_NEXT_BROKER_ID", &next_ids, &mut NoWatch),
        ("1003 REGISTER_BROKER", &registers, &mut NoWatch),
        ("1001 ALTER_SYNC_STATE_SET", &next_ids, &mut alter),
    ];
    for (name, plan, watch) in runs {
        // Connection `c` takes sets `c`, `c + k`, ...
        b.engine.replan(class, |c| {
            let own: Vec<u32> = plan.iter().skip(c).step_by(k).copied().collect();
            own.into()
        });
        b.engine.classes[class].name = name.into();
        b.phase(name, &[class], true, watch, (b.o.duration, false));
    }
    if b.o.pid.is_some() {
        let rss = int(loaded.server.rss_kib);
        b.report.result("server_rss_with_sets", rss, "KiB");
    }
    // Removes the run's broker sets (1011, living brokers included) up to the first failure.
    let clean = |name: &String| call_ok(&mut c, &clean_broker_data(name)).map(drop);
    if let Err(e) = names.iter().try_for_each(clean) {
        let failure = format!("cleaning the sets failed: {e}");
        b.report.failures.push(failure);
    }
    Ok(b.finish())
}
