//! The failover run (`--failover crash|hang`): per round, a master and a slave register
//! through the controller and with the name servers of `-n` as RocketMQ 5 brokers do; the
//! master then dies (its connections close) or hangs (its heartbeats stop), and the time until
//! the slave receives 1008 and until a name server routes it as id 0 is measured.

use super::{
    alter_sync_state_set, apply_broker_id, call, call_ok, clean_broker_data, connect, elect_master,
    ext_i64, heartbeat, millis, next_broker_id, register_broker, set_names, CLUSTER,
};
use crate::args::{Failover, Options};
use crate::canned::OnCommand;
use crate::payload::{topic, PERM_RW};
use crate::report::{int, num, text, Report};
use crate::servers::Picker;
use rmq_namesrv::client::api::{BrokerIdentity, RegisterOptions};
use rmq_namesrv::client::Client;
use rmq_namesrv::controller::request::field::{
    MASTER_BROKER_ID, MASTER_EPOCH, NEXT_BROKER_ID, SYNC_STATE_SET_EPOCH,
};
use rmq_namesrv::event_loop::{Ctx, EventLoop, Limits, ListenerTag, StopHandle};
use rmq_namesrv::remoting::command::RemotingCommand;
use rmq_namesrv::route::model::{DataVersion, RegisterBody};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The topic the failover brokers register with the name servers.
fn failover_topic(set: &str) -> String {
    format!("{set}-topic")
}

/// A controller-mode broker reduced to what failover needs: its controller conversation, its
/// name-server registrations, heartbeats (a thread), and a listener for 1008 (a thread).
struct SimBroker {
    name: String,
    addr: String,
    id: i64,
    timeout_ms: u64,
    controller: Mutex<Option<Client>>,
    /// One connection per name server, kept open as brokers do: a name server drops the
    /// registrations of a connection that closes.
    namesrv: Mutex<Vec<Client>>,
    /// (master id, master epoch, sync-state-set epoch).
    role: Mutex<(i64, i64, i64)>,
    /// When a 1008 made this broker master (if every name server took its registration).
    promoted: Mutex<Option<Instant>>,
    heartbeating: AtomicBool,
    /// Stops the loop that takes the controller's 1008s.
    notices: StopHandle,
}

impl SimBroker {
    fn start(o: &Options, controller: &str, name: &str) -> Result<Arc<SimBroker>, String> {
        let local = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut notices = EventLoop::new(Limits::default()).map_err(|e| format!("listen: {e}"))?;
        let addr = notices.listen(local, ListenerTag(0));
        let addr = addr.map_err(|e| format!("listen: {e}"))?.to_string();
        let mut c = connect(controller)?;
        let next = call_ok(&mut c, &next_broker_id(name))?;
        let id = ext_i64(&next, NEXT_BROKER_ID).ok_or("1012 without nextBrokerId")?;
        call_ok(&mut c, &apply_broker_id(name, id, &addr))?;
        let registered = call_ok(&mut c, &register_broker(name, id, &addr))?;
        let namesrv = o.namesrv.iter().map(|ns| connect(ns));
        let b = Arc::new(SimBroker {
            name: name.to_string(),
            addr,
            id,
            timeout_ms: o.timeout_ms,
            controller: Mutex::new(Some(c)),
            namesrv: Mutex::new(namesrv.collect::<Result<_, _>>()?),
            role: Mutex::new((0, 0, 0)),
            promoted: Mutex::new(None),
            heartbeating: AtomicBool::new(true),
            notices: notices.stop_handle(),
        });
        b.adopt(&registered);
        b.heartbeat()?;
        if b.role()?.0 == 0 {
            let elected = b.with_controller(|c| call(c, &elect_master(name, id)))?;
            b.adopt(&elected);
        }
        let (master, epoch, _) = b.role()?;
        b.register_all(if master == id { 0 } else { id }, epoch)?;
        let (beats, listener) = (Arc::clone(&b), Arc::clone(&b));
        std::thread::spawn(move || beats.heartbeat_every_second());
        let handler = OnCommand(move |_: &mut Ctx<()>, _, cmd| listener.on_notice(&cmd));
        std::thread::spawn(move || notices.run(handler));
        Ok(b)
    }

    /// As the master: 1001 to {1, 2}.
    fn widen(&self, other: i64) -> Result<(), String> {
        let (master, epoch, set_epoch) = self.role()?;
        let alter = alter_sync_state_set(&self.name, master, epoch, &[master, other], set_epoch);
        self.with_controller(|c| call_ok(c, &alter))?;
        Ok(())
    }

    /// kill -9: every connection closes at once (the heartbeat thread then ends).
    fn kill(&self) {
        self.notices.stop();
        if let Ok(mut c) = self.controller.lock() {
            c.take();
        }
        if let Ok(mut ns) = self.namesrv.lock() {
            ns.clear();
        }
    }

    fn role(&self) -> Result<(i64, i64, i64), String> {
        Ok(*self.role.lock().map_err(|_| "poisoned")?)
    }

    fn with_controller<T>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, String>,
    ) -> Result<T, String> {
        let mut guard = self.controller.lock().map_err(|_| "poisoned")?;
        f(guard.as_mut().ok_or("no controller connection")?)
    }

    fn adopt(&self, resp: &RemotingCommand) {
        let field = |key| ext_i64(resp, key).unwrap_or(0);
        if let (Some(master), Ok(mut role)) = (ext_i64(resp, MASTER_BROKER_ID), self.role.lock()) {
            *role = (master, field(MASTER_EPOCH), field(SYNC_STATE_SET_EPOCH));
        }
    }

    /// One oneway 904 on the controller connection (unless hung); an error once killed.
    fn heartbeat(&self) -> Result<(), String> {
        let beat = heartbeat(&self.name, &self.addr, self.id, self.timeout_ms);
        let beating = self.heartbeating.load(Ordering::SeqCst);
        self.with_controller(|c| {
            if !beating {
                return Ok(());
            }
            c.oneway_encoded(&beat.encode()).map_err(|e| e.to_string())
        })
    }

    /// Java brokers heartbeat every second (brokerHeartbeatInterval).
    fn heartbeat_every_second(&self) {
        while self.heartbeat().is_ok() {
            std::thread::sleep(Duration::from_millis(1000));
        }
    }

    /// A 1008: a higher master epoch naming this broker makes it master, registered as id 0.
    fn on_notice(&self, cmd: &RemotingCommand) {
        let (master, epoch) = (ext_i64(cmd, MASTER_BROKER_ID), ext_i64(cmd, MASTER_EPOCH));
        let (Some(master), Some(epoch), Ok(mut r)) = (master, epoch, self.role.lock()) else {
            return;
        };
        if cmd.code != 1008 || epoch <= r.1 {
            return;
        }
        *r = (
            master,
            epoch,
            ext_i64(cmd, SYNC_STATE_SET_EPOCH).unwrap_or(r.2),
        );
        drop(r);
        let notified = Instant::now();
        if master == self.id && self.register_all(0, epoch).is_ok() {
            if let Ok(mut p) = self.promoted.lock() {
                *p = Some(notified);
            }
        }
    }

    /// REGISTER_BROKER to every name server, `stateVersion = masterEpoch`.
    fn register_all(&self, broker_id: i64, master_epoch: i64) -> Result<(), String> {
        let name = failover_topic(&self.name);
        let body = RegisterBody {
            data_version: DataVersion {
                counter: millis() as i64,
                state_version: master_epoch,
                timestamp: millis() as i64,
            },
            topics: vec![(name.clone(), topic(&name, 4, PERM_RW))],
            filter_servers: Some(Vec::new()),
            mappings: Vec::new(),
        };
        let identity = BrokerIdentity {
            cluster: CLUSTER.to_string(),
            broker_name: self.name.clone(),
            broker_addr: self.addr.clone(),
            broker_id,
            ha_server_addr: self.addr.clone(),
        };
        let mut conns = self.namesrv.lock().map_err(|_| "poisoned")?;
        for c in conns.iter_mut() {
            c.register_broker(&identity, &body, &RegisterOptions::default())
                .map_err(|e| format!("REGISTER_BROKER to {}: {e}", c.peer()))?;
        }
        Ok(())
    }
}

/// Whether the name server of `c` routes `addr` as id 0 of `name`.
fn routed_as_master(c: &mut Client, name: &str, addr: &str) -> bool {
    let route = c.get_route(&failover_topic(name)).ok().flatten();
    let mut brokers = route.iter().flat_map(|r| &r.broker_datas);
    brokers.any(|b| b.broker_name == name && b.broker_addrs.get(&0).is_some_and(|a| a == addr))
}

/// One round's times from the master's death: until the slave is notified, until it is routed.
fn failover_round(
    o: &Options,
    mode: Failover,
    round: usize,
) -> Result<(Duration, Duration), String> {
    let controller = o.controller.as_deref().unwrap_or_default();
    let name = format!("{}-failover-{round}", set_names(o)[0]);
    let master = SimBroker::start(o, controller, &name)?;
    let slave = SimBroker::start(o, controller, &name)?;
    master.widen(slave.id)?;
    // The name server whose route is watched, as --strategy picks a client's.
    let watched = &o.namesrv[Picker::new(&o.namesrv, o.strategy, None)?.next()?];
    let mut ns = connect(watched)?;
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
    let promoted = slave.promoted.lock().ok().and_then(|p| *p);
    let notified = promoted.map_or(routed, |t| t - died);
    slave.kill();
    master.kill();
    let _ = call(&mut connect(controller)?, &clean_broker_data(&name));
    Ok((notified, routed))
}

/// The rounds' times in the report's results: `round_N_notified` and `round_N_routed` (ms).
pub fn run(o: &Options, mode: Failover, stop: &AtomicBool) -> Result<Report, String> {
    let controller = o.controller.as_deref().unwrap_or_default();
    let mode_name = match mode {
        Failover::Crash => "crash (connections closed)",
        Failover::Hang => "hang (heartbeats stopped)",
    };
    let target = format!("{controller} (name servers {})", o.namesrv.join(";"));
    let mut report = Report::new("controller-failover", target, None);
    report.param("mode", text(mode_name));
    report.param("heartbeat_timeout_ms", int(o.timeout_ms));
    let ms = |d: Duration| num(d.as_secs_f64() * 1000.0, 1);
    for round in 0..o.rounds {
        if stop.load(Ordering::Relaxed) {
            report.interrupted = true;
            break;
        }
        let (notified, routed) = failover_round(o, mode, round)?;
        report.result(format!("round_{round}_notified"), ms(notified), "ms");
        report.result(format!("round_{round}_routed"), ms(routed), "ms");
    }
    Ok(report)
}
